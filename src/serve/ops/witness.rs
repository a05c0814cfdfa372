//! `POST /witness`: the daemon as a witness, a thin call into [`crate::surface::witness`], the
//! same function `git forum witness` runs. The state directory and key come from `serve
//! --witness-state DIR --witness-key FILE`, else `forum.witnessState` and `forum.witnessKey`;
//! the log's keys from `forum.noteVerifiers`. A cosigned offer answers 200 with the report; a
//! refused one 409 with the same report (the reason, the accepted note and, for a conflict,
//! where the evidence was kept) and its one line as `error`.

use std::path::PathBuf;

use super::*;
use crate::surface::witness as w;

impl Dispatcher {
    fn witness_setting(&self, flag: &Option<PathBuf>, key: &str) -> Result<Option<PathBuf>, Reply> {
        if let Some(p) = flag {
            return Ok(Some(p.clone()));
        }
        let repo = self.repo.to_thread_local();
        let v = repo
            .config_snapshot()
            .string(key)
            .map(|s| PathBuf::from(s.to_string()));
        Ok(v)
    }

    pub(crate) fn witness(&self, req: &Request<'_>) -> Res {
        let a: crate::surface::request::work::Witness = crate::surface::request::decode(req.body)?;
        // The same choice, in the same words, as `git forum witness` given the offer as text.
        let offer = a.offer().map_err(Reply::from)?;
        let unavailable = |what: &str| -> Reply {
            surface::Error::new(
                surface::Class::Unavailable,
                format!("this server is not a witness: {what}"),
            )
            .into()
        };
        let state = self
            .witness_setting(&self.cfg.witness_state, "forum.witnessState")?
            .ok_or_else(|| {
                unavailable("start it with --witness-state DIR or set forum.witnessState")
            })?;
        let key_file = self
            .witness_setting(&self.cfg.witness_key, "forum.witnessKey")?
            .ok_or_else(|| {
                unavailable("start it with --witness-key FILE or set forum.witnessKey")
            })?;
        let key = std::fs::read_to_string(&key_file).map_err(|e| {
            unavailable(&format!(
                "its key {} cannot be read: {e}",
                key_file.display()
            ))
        })?;
        let log_keys = self.reader()?.note_verifier_keys();
        let opts = w::WitnessOptions {
            state: &state,
            key: &key,
            log_keys: &log_keys,
            now: w::now_seconds(),
        };
        let r = w::witness(&opts, offer).map_err(reply_of)?;
        let mut body = serde_json::to_value(&r).map_err(|e| {
            Reply::from(surface::Error::internal(format!(
                "encoding the report: {e}"
            )))
        })?;
        if r.ok {
            return Ok(body);
        }
        body["error"] = J::String(w::refusal_line(&r));
        Err(Reply {
            status: 409,
            body,
            text: None,
        })
    }
}
