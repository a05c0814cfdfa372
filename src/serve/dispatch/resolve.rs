//! The route table as code: a method and path to the handler that answers it. Pure: resolving
//! runs nothing.

use serde_json::{Value as J, json};

use super::{Dispatcher, Reply, Request, TLOG_PREFIX};

pub(super) type Handler<'p> = Box<dyn FnOnce(&Dispatcher, &Request<'_>) -> Result<J, Reply> + 'p>;

/// Maps a method and path to its handler; `None` when no route matches. Pure: nothing runs.
pub(super) fn resolve<'p>(method: &str, path: &'p str) -> Option<Handler<'p>> {
    let rest = path.strip_prefix('/')?;
    let segs: Vec<&'p str> = rest.split('/').collect();
    let h: Handler<'p> = match (method, segs.as_slice()) {
        ("GET", ["health"]) => Box::new(|_, _| Ok(json!({"ok": true}))),
        ("GET", ["status"]) => Box::new(|d, _| d.status()),
        ("GET", ["verify"]) => Box::new(|d, _| d.verify()),
        ("GET", ["checkpoint"]) => Box::new(|d, _| d.checkpoint()),
        ("POST", ["checkpoint"]) => Box::new(|d, r| d.record_checkpoint(r)),
        ("GET", ["ledger", seq]) => {
            let seq = *seq;
            Box::new(move |d, _| d.entry(seq))
        }
        ("GET", ["payload", seq]) => {
            let seq = *seq;
            Box::new(move |d, _| d.payload(seq))
        }
        ("GET", ["replay", seq]) => {
            let seq = *seq;
            Box::new(move |d, r| d.replay(seq, r))
        }
        ("GET", ["why", seq]) => {
            let seq = *seq;
            Box::new(move |d, _| d.why(seq))
        }
        ("POST", ["prove"]) => Box::new(|d, r| d.prove(r)),
        ("POST", ["append"]) => Box::new(|d, r| d.append(r)),
        ("GET", ["runs"]) => Box::new(|d, _| d.runs()),
        ("GET", ["gates"]) => Box::new(|d, _| d.gates()),
        ("POST", ["gate", "approve"]) => {
            Box::new(|d, r| d.gate(crate::ledger::kind::GATE_APPROVED, r))
        }
        ("POST", ["gate", "edit"]) => Box::new(|d, r| d.gate(crate::ledger::kind::GATE_EDITED, r)),
        ("POST", ["gate", "reject"]) => {
            Box::new(|d, r| d.gate(crate::ledger::kind::GATE_REJECTED, r))
        }
        ("GET", ["runtime"]) => Box::new(|d, _| d.runtime()),
        ("GET", ["model"]) => Box::new(|d, _| d.model_status()),
        ("GET", ["sync"]) => Box::new(|d, _| d.sync_status()),
        ("POST", ["route"]) => Box::new(|d, r| d.route(r)),
        ("POST", ["lane", "check"]) => Box::new(|d, r| d.lane_check(r)),
        ("POST", ["lane", "gaps"]) => Box::new(|d, r| d.lane_gaps(r)),
        ("POST", ["plan"]) => Box::new(|d, r| d.plan(r)),
        ("POST", ["submit"]) => Box::new(|d, r| d.submit(r)),
        ("POST", ["resume"]) => Box::new(|d, r| d.resume(r)),
        ("POST", ["halt"]) => Box::new(|d, r| d.halt(r)),
        ("POST", ["humanize"]) => Box::new(|d, r| d.humanize(r)),
        ("POST", ["prose", "contract"]) => Box::new(|d, r| d.prose_contract(r)),
        ("GET", ["summary"]) => Box::new(|d, _| d.summary()),
        ("GET", ["room"]) => Box::new(|d, _| d.room()),
        ("GET", ["capsule"]) => Box::new(|d, _| d.capsule()),
        ("GET", ["receipt"]) => Box::new(|d, _| d.receipt(None)),
        ("GET", ["receipt", seq]) => {
            let seq = *seq;
            Box::new(move |d, _| d.receipt_of(seq))
        }
        ("GET", ["grade"]) => Box::new(|d, _| d.grade()),
        ("POST", ["bench"]) => Box::new(|d, r| d.bench(r)),
        ("POST", ["context", "preflight"]) => Box::new(|d, r| d.preflight(r)),
        _ => return resolve_work(method, rest, &segs),
    };
    Some(h)
}

/// The routes of traces, campaigns, grades and `--work` runs, for [`resolve`]; the rest goes on
/// to [`resolve_tlog`].
fn resolve_work<'p>(method: &str, rest: &'p str, segs: &[&'p str]) -> Option<Handler<'p>> {
    let h: Handler<'p> = match (method, segs) {
        ("POST", ["import-trace"]) => Box::new(|d, r| d.import_trace(r)),
        ("POST", ["mine"]) => Box::new(|d, r| d.mine(r)),
        ("POST", ["campaign", "declare"]) => Box::new(|d, r| d.campaign_declare(r)),
        ("POST", ["campaign", "status"]) => Box::new(|d, r| d.campaign_status(r)),
        ("POST", ["campaign", "next"]) => Box::new(|d, r| d.campaign_next(r)),
        ("POST", ["campaign", "ingest-status"]) => Box::new(|d, r| d.campaign_ingest(r)),
        ("POST", ["campaign", "run"]) => Box::new(|d, r| d.campaign_run(r)),
        ("POST", ["worker"]) => Box::new(|d, r| d.worker_start(r)),
        ("GET", ["workers"]) => Box::new(|d, _| d.workers_list()),
        ("POST", ["worker", "stop"]) => Box::new(|d, r| d.worker_stop(r)),
        ("POST", ["grade"]) => Box::new(|d, r| d.grade_of(r)),
        ("POST", ["gradable"]) => Box::new(|d, r| d.gradable(r)),
        ("GET", ["status", "full"]) => Box::new(|d, _| d.full_status()),
        ("GET", ["doctor"]) => Box::new(|d, _| d.doctor()),
        ("POST", ["witness"]) => Box::new(|d, r| d.witness(r)),
        ("POST", ["diff"]) => Box::new(|d, r| d.diff(r)),
        ("POST", ["attest"]) => Box::new(|d, r| d.attest(r)),
        ("POST", ["replay"]) => Box::new(|d, r| d.replay_strict(r)),
        ("POST", ["reproduce"]) => Box::new(|d, r| d.reproduce(r)),
        ("POST", ["apply"]) => Box::new(|d, r| d.apply(r)),
        ("POST", ["apply", "dry-run"]) => Box::new(|d, r| d.apply_dry_run(r)),
        ("GET", ["blame"]) => Box::new(|d, r| d.blame(r)),
        ("POST", ["discard"]) => Box::new(|d, r| d.discard(r)),
        ("GET", ["log"]) => Box::new(|d, r| d.log(r)),
        _ => return resolve_tlog(method, rest, segs),
    };
    Some(h)
}

/// The routes of the standard tree and the hooks' checks, for [`resolve`]: `rest` is the path
/// without its leading `/`, `segs` its segments.
fn resolve_tlog<'p>(method: &str, rest: &'p str, segs: &[&'p str]) -> Option<Handler<'p>> {
    let h: Handler<'p> = match (method, segs) {
        ("POST", ["tlog", "prove"]) => Box::new(|d, r| d.tlog_prove(r)),
        ("POST", ["tlog", "checkpoint"]) => Box::new(|d, r| d.tlog_sign(r)),
        ("GET", ["tlog", tail @ ..]) if !tail.is_empty() && tail != ["prove"] => {
            let file = &rest[TLOG_PREFIX.len() - 1..];
            Box::new(move |d, _| d.tlog_read(file))
        }
        ("POST", ["hooks", "check"]) => Box::new(|d, r| d.hooks_check(r)),
        _ => return None,
    };
    Some(h)
}
