//! The dispatcher's handlers: each decodes its body into its typed request ([`crate::surface::request`]), calls the engine, and answers
//! JSON or an error [`Reply`]. Reads go through short-lived store handles and the shared entry
//! cache; writes go through the one long-lived writer.

use std::sync::Arc;

use serde_json::{Value as J, json};

use super::dispatch::{Dispatcher, EntryCache, Reply, Request};
use crate::context::ContextBudget;
use crate::exec::config;
use crate::ledger::{Entry, NewEntry, Storage, StorageError, Value, canonical, kind};
use crate::quality::profile::get_profile;
use crate::quality::{HumanizeError, humanize};
use crate::route::{build_communication_contract, check_request, route_request};
use crate::surface;
use crate::surface::clock::{self, RunClock};
use crate::surface::request::{self, ledger as rq, prose};
use crate::surface::run::Seats;
use crate::surface::run::plan::PlanAsk;
use crate::surface::run::{self, Env, RunError, Status};
use crate::surface::run::{Bodies, ContextSource, Decide, Decision, Go, RunOptions};
use crate::surface::store::{GitStore, Options};

mod campaign;
mod flight;
mod lanes;
mod replay;
mod runs;
mod tlog;
mod witness;
mod work;
mod workers;

type Res = Result<J, Reply>;

fn bad(message: impl Into<String>) -> Reply {
    crate::surface::Error::usage(message).into()
}

/// A surface error as the daemon answers it: its class's status and its one line.
fn reply_of(e: surface::Error) -> Reply {
    e.into()
}

/// A surface report as the daemon answers it.
fn answer(r: surface::Result<impl serde::Serialize>) -> Res {
    let r = r.map_err(reply_of)?;
    serde_json::to_value(&r).map_err(|e| {
        Reply::from(crate::surface::Error::internal(format!(
            "encoding the report: {e}"
        )))
    })
}

fn not_found(message: impl Into<String>) -> Reply {
    crate::surface::Error::not_found(message).into()
}

/// A test hook: with `GIT_FORUM_HOLD_VERIFY=FILE` in the server's environment, a verify writes
/// `FILE.held` and waits (at most a minute) until FILE exists, so a test can show that other
/// requests are answered while one is in flight, without depending on how long a verify takes.
fn hold_for_test() {
    let Some(file) = std::env::var_os("GIT_FORUM_HOLD_VERIFY") else {
        return;
    };
    let mut held = file.clone();
    held.push(".held");
    let _ = std::fs::write(&held, b"");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::path::Path::new(&file).exists() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A path segment that must be a seq.
fn parse_seq(text: &str) -> Result<u64, Reply> {
    let ok = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| text.parse::<u64>().ok())
        .flatten()
        .ok_or_else(|| bad(format!("seq {text:?} is not a non-negative integer")))
}

/// A refused append as a run's storage reports it.
fn refused(r: Reply) -> StorageError {
    StorageError::Invalid(r.message().to_string())
}

/// The ledger as a run sees it: reads through the shared entry cache (each read sees one
/// consistent tip) and one handle of its own for bodies; writes through the server's writer,
/// one append at a time, so other requests interleave with a long run.
struct Shared<'a> {
    d: &'a Dispatcher,
    reader: GitStore,
}

impl Shared<'_> {
    fn view(&self) -> Result<Arc<EntryCache>, StorageError> {
        self.d
            .snapshot()
            .map_err(|r| StorageError::Io(r.message().to_string()))
    }
}

impl Storage for Shared<'_> {
    fn len(&self) -> Result<u64, StorageError> {
        Ok(self.view()?.entries.len() as u64)
    }

    fn head(&self) -> Result<Option<Entry>, StorageError> {
        Ok(self.view()?.entries.last().cloned())
    }

    fn get(&self, seq: u64) -> Result<Option<Entry>, StorageError> {
        Ok(self.view()?.entries.get(seq as usize).cloned())
    }

    fn payload(&self, payload_hash: &str) -> Result<Option<Value>, StorageError> {
        let view = self.view()?;
        let Some(seq) = view
            .entries
            .iter()
            .rposition(|e| e.payload_hash == payload_hash)
        else {
            return Ok(None);
        };
        Dispatcher::body_in(&self.reader, &view, seq as u64)
            .map_err(|r| StorageError::Io(r.message().to_string()))
    }

    // Each append of a run in progress is seen by the reads after it (see
    // [`Dispatcher::caught_up`]): the run's progress may name it before the run answers.
    fn append(&mut self, new: NewEntry) -> Result<Entry, StorageError> {
        let r = self.d.writer().map_err(refused)?.append_entry(&new);
        self.d.caught_up();
        Ok(r?.entry)
    }

    fn append_at(&mut self, seq: u64, new: NewEntry) -> Result<Option<Entry>, StorageError> {
        let r = self
            .d
            .writer()
            .map_err(refused)?
            .append_entry_at(&new, Some(seq));
        self.d.caught_up();
        Ok(r?.map(|a| a.entry))
    }

    fn append_batch(&mut self, batch: Vec<NewEntry>) -> Result<Vec<Entry>, StorageError> {
        let r = self.d.writer().map_err(refused)?.append_entries(&batch);
        self.d.caught_up();
        Ok(r?.into_iter().map(|a| a.entry).collect())
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        Ok(self.d.writer().map_err(refused)?.sync()?)
    }
}

impl Dispatcher {
    // ----- plumbing -----

    /// The timestamp of a new entry: pinned, else the clock (microseconds, as Forum keeps).
    pub(crate) fn now(&self) -> f64 {
        self.cfg.timestamp.unwrap_or_else(clock::system_now)
    }

    /// A read handle on the same repository and ledger (or fetched copy).
    pub(crate) fn reader(&self) -> Result<GitStore, Reply> {
        Ok(surface::store::open_spec(
            self.repo.to_thread_local(),
            &self.cfg.ledger,
            Options::default(),
        )?)
    }

    /// Every entry, its commit and the checkpoint, as of one read of the tip (see
    /// [`Dispatcher::current`]). The view is shared with the cache: while a request holds it,
    /// the next extension of the cache copies the entries, so the frequent small reads use
    /// [`Dispatcher::with_view`] instead.
    pub(crate) fn snapshot(&self) -> Result<Arc<EntryCache>, Reply> {
        Ok(self.current()?.view.clone())
    }

    /// `f` of the entries as of one read of the tip, run under the cache's lock so that no
    /// request keeps a share of them and extending the cache after an append never copies
    /// them. `f` should take what it needs (a few entries, a length) and return.
    pub(crate) fn with_view<R>(&self, f: impl FnOnce(&EntryCache) -> R) -> Result<R, Reply> {
        Ok(f(&self.current()?.view))
    }

    /// The body of the entry at `seq` of `view` (`None` when redacted), read from its commit.
    pub(crate) fn body_in(
        store: &GitStore,
        view: &EntryCache,
        seq: u64,
    ) -> Result<Option<Value>, Reply> {
        let Some(id) = view.commits.get(seq as usize) else {
            return Ok(None);
        };
        match store.body_of_commit(id)? {
            None => Ok(None),
            Some(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| {
                    Reply::from(crate::surface::Error::internal(format!(
                        "the body of seq {seq} is not UTF-8"
                    )))
                })?;
                canonical::parse(&text).map(Some).map_err(|e| {
                    Reply::from(crate::surface::Error::internal(format!(
                        "the body of seq {seq} is not JSON: {e}"
                    )))
                })
            }
        }
    }

    /// The entry at `seq`, or 404.
    fn entry_at(entries: &[Entry], seq: u64) -> Result<&Entry, Reply> {
        entries.get(seq as usize).ok_or_else(|| {
            not_found(format!(
                "no entry at seq {seq} (the ledger holds {} entries)",
                entries.len()
            ))
        })
    }

    /// Appends through the writer.
    pub(crate) fn append_new(
        &self,
        new: &NewEntry,
    ) -> Result<crate::surface::store::Appended, Reply> {
        new.validate().map_err(bad)?;
        let r = self.writer()?.append_entry(new);
        self.caught_up();
        Ok(r?)
    }

    fn seats(&self) -> Result<Arc<dyn Seats>, Reply> {
        if self.is_draining() {
            return Err(Reply::from(crate::surface::Error::unavailable(
                "the server is shutting down and takes no new runs",
            )));
        }
        self.executors
            .seats
            .clone()
            .map_err(|why| Reply::from(crate::surface::Error::unavailable(why.to_string())))
    }

    // ----- the ledger -----

    pub(crate) fn status(&self) -> Res {
        self.status_in(&self.current()?.view)
    }

    fn status_in(&self, view: &EntryCache) -> Res {
        let size = view.entries.len() as u64;
        answer(Ok(surface::ledger::status(
            &self.cfg.ledger,
            size,
            &view.root,
        )))
    }

    pub(crate) fn checkpoint(&self) -> Res {
        self.checkpoint_in(&self.current()?.view)
    }

    fn checkpoint_in(&self, view: &EntryCache) -> Res {
        let size = view.entries.len() as u64;
        answer(Ok(surface::ledger::checkpoint(
            &self.cfg.ledger,
            size,
            &view.root,
        )))
    }

    pub(crate) fn record_checkpoint(&self, req: &Request<'_>) -> Res {
        let _: rq::CheckpointRecord = request::decode(req.body)?;
        let store = self.reader()?;
        if !store.exists()? {
            return Err(surface::Error::conflict(format!(
                "ledger {:?} has no entries yet: nothing to checkpoint",
                self.cfg.ledger
            ))
            .into());
        }
        let what = surface::ledger::Record {
            record: true,
            sign: false,
        };
        answer(surface::ledger::record_checkpoint(
            &store,
            &self.cfg.ledger,
            what,
        ))
    }

    /// Deep verify, the same report as `git forum verify --deep --json`; a ledger with no
    /// entries yet verifies (the daemon serves it before its first append).
    pub(crate) fn verify(&self) -> Res {
        hold_for_test();
        let r = self.verify_cached(true)?;
        serde_json::to_value(r).map_err(|e| {
            Reply::from(crate::surface::Error::internal(format!(
                "encoding the report: {e}"
            )))
        })
    }

    pub(crate) fn entry(&self, seq: &str) -> Res {
        let seq = parse_seq(seq)?;
        answer(self.with_view(|v| surface::ledger::entry(&v.entries, seq))?)
    }

    pub(crate) fn payload(&self, seq: &str) -> Res {
        let seq = parse_seq(seq)?;
        let (e, commit) = self.with_view(|v| {
            Self::entry_at(&v.entries, seq).map(|e| (e.clone(), v.commits[seq as usize]))
        })??;
        let r = surface::read::payload_of(&self.reader()?, e, &commit).map_err(reply_of)?;
        let res = match r.exact() {
            // NaN and the infinities have no serde_json form: the answer is written as text
            // (as Forum writes JSON), so the body read back still hashes to its payload_hash.
            // A finished answer, not a failure: `Err` is how a handler hands one back whole.
            Some(exact) => Err(Reply::exact(answer(Ok(&r))?, exact.canonical())),
            None => answer(Ok(r)),
        };
        let text = match &res {
            Ok(body) => body.to_string(),
            Err(reply) if reply.status == 200 => reply.body_text(),
            Err(_) => return res,
        };
        self.keep_payload(commit, text);
        res
    }

    /// The newest entries first, at most `limit` (default and cap
    /// [`surface::read::MAX_PAGE`]): the JSON list `git forum log --json` prints.
    pub(crate) fn log(&self, req: &Request<'_>) -> Res {
        let a: rq::Log = request::decode(req.body)?;
        let limit = a.limit.map_or(surface::read::MAX_PAGE as u64, |n| {
            n.min(surface::read::MAX_PAGE as u64)
        });
        answer(Ok(self.with_view(|v| {
            surface::read::log_of(&v.entries, Some(limit))
        })?))
    }

    /// Entries with seq <= N, one page at a time (`limit`, at most [`super::page::MAX_PAGE`];
    /// `after`, the `next` of the page before).
    pub(crate) fn replay(&self, seq: &str, req: &Request<'_>) -> Res {
        let seq = parse_seq(seq)?;
        let page: rq::Page = request::decode(req.body)?;
        answer(Ok(self.with_view(|v| {
            surface::read::replay(&v.entries, seq, page.size(), page.after)
        })?))
    }

    pub(crate) fn why(&self, seq: &str) -> Res {
        let seq = parse_seq(seq)?;
        answer(self.with_view(|v| surface::ledger::why(&v.entries, seq))?)
    }

    pub(crate) fn prove(&self, req: &Request<'_>) -> Res {
        let a: rq::Prove = request::decode(req.body)?;
        let ask = match (a.seq, a.consistency_from) {
            (Some(seq), _) => surface::proof::Ask::Inclusion(seq),
            (None, m) => surface::proof::Ask::Consistency(m.unwrap_or_default()),
        };
        let store = self.reader()?;
        // A fetched copy is proved under the name its checkpoints are signed for.
        answer(surface::proof::prove_stored(
            &store,
            store.signature_ledger(),
            &store.signed_checkpoints()?,
            ask,
            a.size,
        ))
    }

    pub(crate) fn append(&self, req: &Request<'_>) -> Res {
        let a: request::work::Append = request::decode(req.body)?;
        let key = super::idem::key_of(req.key, a.idempotency_key.as_deref())?;
        let (actor, kind) = (a.actor.as_str(), a.kind.as_str());
        let parent = a.causal_parent;
        // Over HTTP the body is read again with the ledger's own parser, so numbers keep their
        // identity (1 is not 1.0, wide integers stay exact), as with `git forum append`.
        let payload = match req.raw {
            Some(raw) => {
                let text =
                    std::str::from_utf8(raw).map_err(|_| bad("the request body is not UTF-8"))?;
                let v = canonical::parse(text)
                    .map_err(|e| bad(format!("the request body is not valid JSON: {e}")))?;
                v.get("payload").cloned()
            }
            None => a.payload.clone().map(|p| p.0),
        };
        let payload = payload.ok_or_else(|| bad("field \"payload\" is required"))?;
        let new = NewEntry {
            actor: actor.to_string(),
            kind: kind.to_string(),
            causal_parent: parent,
            payload,
            ts: self.now(),
        };
        if let Some(key) = key {
            return self.append_once(key, &new);
        }
        answer(surface::append::append(&mut *self.writer()?, &new))
    }

    // ----- model-free helpers -----

    pub(crate) fn route(&self, req: &Request<'_>) -> Res {
        let a: prose::Route = request::decode(req.body)?;
        let (decision, frame) = route_request(&a.text, &self.roster);
        Ok(decision.to_value(&frame).to_serde())
    }

    pub(crate) fn humanize(&self, req: &Request<'_>) -> Res {
        let a: prose::Humanize = request::decode(req.body)?;
        let profile = get_profile(a.how.profile.as_deref()).map_err(|e| bad(e.to_string()))?;
        let audience = a.how.audience.as_deref().unwrap_or("operator");
        let h = humanize(&a.text, audience, profile).map_err(|e| match e {
            HumanizeError::Blank => bad("nothing to humanize: the text is empty or blank"),
            other => bad(other.to_string()),
        })?;
        Ok(h.payload().to_serde())
    }

    pub(crate) fn prose_contract(&self, req: &Request<'_>) -> Res {
        let a: prose::ProseContract = request::decode(req.body)?;
        let (_, frame) = route_request(&a.text, &self.roster);
        let contract = match a.profile.as_deref() {
            None => frame.communication_contract,
            Some(p) => build_communication_contract(
                &frame.domain,
                &frame.intent,
                frame.posture.as_str(),
                p,
                frame.proof_lane.as_deref(),
                frame.domain_lane.as_deref(),
                &frame.human_contract,
            )
            .map_err(|e| bad(e.to_string()))?,
        };
        Ok(contract.payload().to_serde())
    }

    // ----- push and fetch -----

    /// `GET /sync`: [`crate::surface::sync::sync_status`] of the served ledger.
    pub(crate) fn sync_status(&self) -> Res {
        let view = self.snapshot()?;
        answer(crate::surface::sync::sync_status(
            &self.repo,
            &self.cfg.ledger,
            view.entries.len(),
            &view.root,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_segments_are_plain_digits() {
        assert_eq!(parse_seq("0").unwrap(), 0);
        assert_eq!(parse_seq("42").unwrap(), 42);
        for bad in ["", "-1", "+1", "1.0", "x", " 1", "99999999999999999999999"] {
            assert_eq!(parse_seq(bad).unwrap_err().status, 400, "{bad:?}");
        }
    }
}
