//! The receipts of a run: ours (`git-forum.receipt/v1`, what one submit or resume did) and
//! Forum's action receipt (`project-telos.action-receipt/v1`, built over the run's entries),
//! the latter also as the `receipt` operation.

use serde::Serialize;
use serde_json::{Value as J, json};

use crate::ledger::Value;
use crate::report::{Snapshot, receipt};
use crate::run::{self, Outcome, status};
use crate::store::git::GitStore;
use crate::surface::{Error, Report, Result};

/// Our receipt of one submit or resume: its entries, calls per model, verdicts, route frame.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct RunReceipt {
    pub(crate) schema: &'static str,
    pub(crate) ledger: String,
    pub(crate) status: &'static str,
    pub(crate) request_seq: u64,
    pub(crate) answer_seq: Option<u64>,
    /// The entries this invocation wrote.
    pub(crate) entries: Vec<u64>,
    pub(crate) ledger_size: u64,
    pub(crate) checkpoint: String,
    pub(crate) model_calls: u64,
    pub(crate) calls_per_model: std::collections::BTreeMap<String, u64>,
    pub(crate) verdicts: std::collections::BTreeMap<String, u64>,
    pub(crate) route_frame: J,
    /// The `interrupted` entry, when a draining daemon stopped the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) interrupted_seq: Option<u64>,
}

impl Report for RunReceipt {
    const SCHEMA: &'static str = "git-forum.receipt/v1";
}

/// Our receipt of the run `outcome` reports, on ledger `ledger` of `size` entries whose
/// checkpoint is `checkpoint`.
pub(crate) fn run_receipt(
    outcome: &Outcome,
    ledger: &str,
    checkpoint: &str,
    size: u64,
) -> RunReceipt {
    RunReceipt {
        schema: RunReceipt::SCHEMA,
        ledger: ledger.to_string(),
        status: outcome.status.as_str(),
        request_seq: outcome.request_seq,
        answer_seq: outcome.answer_seq,
        entries: outcome.written.clone(),
        ledger_size: size,
        checkpoint: checkpoint.to_string(),
        model_calls: outcome.total_calls(),
        calls_per_model: outcome.calls.clone(),
        verdicts: outcome.verdicts.clone(),
        route_frame: outcome.route_frame.to_serde(),
        interrupted_seq: None,
    }
}

/// Why Forum's receipt of a run could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReceiptError {
    /// Reading or verifying the ledger failed.
    #[error(transparent)]
    Store(#[from] crate::store::git::StoreError),
    /// The run's request entry is not in the ledger.
    #[error("the ledger has no request at seq {0}")]
    NoRequest(u64),
}

/// Forum's action receipt of the run `outcome` reports: built over the run's own entries with
/// the ledger's checkpoint and deep verification, from what the run was given (its call and
/// seconds budget, its context budget, the delivery profile asked for) and the answer it
/// delivered.
pub(crate) fn forum_receipt(
    store: &GitStore,
    outcome: &Outcome,
    opts: &run::Options,
) -> std::result::Result<J, ReceiptError> {
    let items = crate::surface::reports::load_git(store)?;
    let mut s = Snapshot::from_items(items);
    s.deep_verified &= store.verify(true)?.passed();
    let Some(mut inputs) = receipt::inputs_for_run(&s, outcome.request_seq) else {
        return Err(ReceiptError::NoRequest(outcome.request_seq));
    };
    if let Some(a) = &outcome.answer {
        inputs.answer = a.clone();
    }
    let mut budget = serde_json::Map::new();
    if let Some(n) = opts.max_model_calls {
        budget.insert("max_model_calls".into(), json!(n));
    }
    if let Some(secs) = opts.max_seconds {
        budget.insert("max_seconds".into(), json!(secs));
    }
    if let Some(n) = opts.ceilings.max_tokens {
        budget.insert("max_tokens".into(), json!(n));
    }
    if let Some(p) = opts.ceilings.max_cost_pico {
        budget.insert("max_cost_usd".into(), json!(crate::spend::pico_to_usd(p)));
    }
    inputs.budget = Value::from_serde(&J::Object(budget));
    if let Some(b) = &opts.context_budget {
        let mut limits = serde_json::Map::new();
        limits.insert("bytes_per_token".into(), json!(b.bytes_per_token));
        for (k, v) in [
            ("max_request_tokens", b.max_request_tokens),
            ("max_task_tokens", b.max_task_tokens),
            ("max_total_tokens", b.max_total_tokens),
            ("max_upstream_tokens", b.max_upstream_tokens),
        ] {
            if let Some(n) = v {
                limits.insert(k.into(), json!(n));
            }
        }
        inputs.context_limits = Value::from_serde(&J::Object(limits));
    }
    inputs.delivery_profile = opts.delivery_profile.clone();
    let roots = status::roots(&s.entries());
    let run = s.slice(|e| roots.get(&e.seq) == Some(&outcome.request_seq));
    Ok(receipt::receipt(&run, &inputs).to_serde())
}

/// Forum's action receipt of one run, as the `receipt` operation answers.
#[derive(Debug, Clone)]
pub(crate) struct Receipt(pub(crate) Value);

impl Serialize for Receipt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.to_serde().serialize(s)
    }
}

impl Report for Receipt {
    const SCHEMA: &'static str = "project-telos.action-receipt/v1";
}

/// Forum's action receipt of the run whose request is at `run` (`None`: the latest run) of
/// the snapshot `s` (loaded with deep verification).
pub(crate) fn receipt_of(s: &Snapshot, run: Option<u64>) -> Result<Receipt> {
    let roots = status::roots(&s.entries());
    let run = match run {
        Some(seq) => seq,
        None => s
            .entries()
            .iter()
            .rev()
            .find(|e| roots.get(&e.seq) == Some(&e.seq))
            .map(|e| e.seq)
            .ok_or_else(|| Error::not_found("no run in this ledger yet (submit starts one)"))?,
    };
    receipt::receipt_for_run(s, run)
        .map(Receipt)
        .ok_or_else(|| {
            Error::not_found(format!(
                "no run starts at seq {run} (the runs list shows them)"
            ))
        })
}
