//! The standard tree and the hooks' checks over the daemon, thin calls into
//! [`crate::surface::tlog_layout`] and [`crate::surface::hooks`], the functions the command line
//! runs: `POST /tlog/prove`, `POST /tlog/checkpoint` (signs with `forum.noteKey`),
//! `GET /tlog/<path>` (the tlog-tiles layout of the latest signed note, which the HTTP transport
//! serves as raw bytes) and `POST /hooks/check`.

use super::*;
use crate::surface::request::tlog as rq;
use crate::surface::tlog_layout as layout;

impl Dispatcher {
    pub(crate) fn tlog_prove(&self, req: &Request<'_>) -> Res {
        let a: rq::TlogProve = request::decode(req.body)?;
        let ask = match (a.seq, a.consistency_from) {
            (Some(seq), _) => surface::tlog::TlogAsk::Inclusion(seq),
            (None, m) => surface::tlog::TlogAsk::Consistency(m.unwrap_or_default()),
        };
        answer(layout::prove(
            &self.reader()?,
            &self.cfg.ledger,
            ask,
            a.size,
        ))
    }

    pub(crate) fn tlog_sign(&self, req: &Request<'_>) -> Res {
        let a: rq::TlogSign = request::decode(req.body)?;
        let store = self.writer()?;
        if !store.exists()? {
            return Err(surface::Error::conflict(format!(
                "ledger {:?} has no entries yet: nothing to sign",
                self.cfg.ledger
            ))
            .into());
        }
        let signed = surface::tlog::checkpoint_note(&store, &self.cfg.ledger, None, a.no_record)
            .map_err(reply_of)?;
        Ok(layout::note_answer(&self.cfg.ledger, &signed))
    }

    /// `path` is the layout path (`checkpoint`, `tile/...`), from the URL (the MCP tool puts its
    /// field there).
    pub(crate) fn tlog_read(&self, path: &str) -> Res {
        let a = rq::TlogRead {
            path: path.to_string(),
        };
        request::Request::validate(&a)?;
        answer(layout::read(&self.reader()?, &self.cfg.ledger, &a.path))
    }

    pub(crate) fn hooks_check(&self, req: &Request<'_>) -> Res {
        let a: rq::HooksCheck = request::decode(req.body)?;
        answer(crate::surface::hooks::check(&self.cfg.dir, &a))
    }
}
