//! The rules a run ran under, as its request records them, and the rules a strict replay runs
//! it under.
//!
//! A run started through the surface records `rules` in its request: the roster's and the
//! policy's TOML text with the SHA-256 of each, and the limits that bound it (the model-call
//! and time budget, the token and cost ceilings, the output cap, the context budget, the
//! delivery profile and the switches that add stages). A strict replay takes all of them from
//! there, so editing `.forum/policy.toml` or a ceiling after the run changes nothing about
//! its replay. The executors come from the request's `runtime` record as they always did.
//!
//! A run recorded before requests held their rules is replayed under today's roster or policy
//! only where its record proves that file is the one it ran under: a `ship` or gate entry of
//! the run names the file's digest and today's file has the same. Anything else is refused,
//! naming what the record lacks. Its ceilings then come from the `options` record (which
//! holds them whenever one was set); its model-call and time budget are not recorded, which
//! matters only to a run that stopped on its budget, so such a run is refused.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value as J, json};

use crate::exec::config::Metering;
use crate::exec::{Call, ExecError, Executor, Reply, Seats};

use crate::context::ContextBudget;
use crate::ledger::{hash::sha256_hex, kind};
use crate::policy::Policy;
use crate::roster::Roster;
use crate::run::Options;
use crate::spend::{Ceilings, usd_to_pico};

use super::Recorded;

/// The `rules` record of a run started with `opts` on `roster`. The options must be final
/// (ceilings taken from the runtime, the time limit capped), as the run will use them.
pub fn record(opts: &Options, roster: &Roster) -> J {
    let file = |sha: Option<&str>, text: Option<&str>| match (sha, text) {
        (Some(sha), Some(text)) => json!({ "sha256": sha, "toml": text }),
        _ => J::Null,
    };
    json!({
        "roster": file(roster.digest(), roster.text()),
        "policy": file(Some(opts.policy.digest.as_str()), Some(&*opts.policy.text)),
        "limits": limits(opts),
    })
}

/// The limits a run runs under with `opts` (`limits` of its [`record`]): what a resume
/// records in its `resume` entry when it runs under others than its request recorded.
pub(crate) fn limits(opts: &Options) -> J {
    let mut limits = Map::new();
    let mut put = |k: &str, v: Option<J>| {
        if let Some(v) = v {
            limits.insert(k.to_string(), v);
        }
    };
    put("max_model_calls", opts.max_model_calls.map(|n| json!(n)));
    put("max_seconds", opts.max_seconds.map(|s| json!(s)));
    put("max_tokens", opts.ceilings.max_tokens.map(|n| json!(n)));
    put(
        "max_cost_pico",
        opts.ceilings.max_cost_pico.map(|n| json!(n)),
    );
    put(
        "max_output_tokens",
        opts.max_output_tokens.map(|n| json!(n)),
    );
    put(
        "context_budget",
        opts.context_budget.map(|b| budget_record(&b)),
    );
    put(
        "delivery_profile",
        opts.delivery_profile.clone().map(J::from),
    );
    put("judge_intent", opts.judge_intent.then_some(J::Bool(true)));
    put("revise", opts.revise.then_some(J::Bool(true)));
    put(
        "checkpoint_each_wave",
        opts.checkpoint_each_wave.then_some(J::Bool(true)),
    );
    J::Object(limits)
}

/// Whether the run `run` (its entries, request first) ran under a spend ceiling anywhere: its
/// request's (`opts`), or one a resume of it was given (its `resume` entry's `limits`).
pub fn under_a_ceiling(run: &[Recorded], opts: &Options) -> bool {
    opts.ceilings.any()
        || run.iter().any(|e| {
            let l = &e.payload["limits"];
            e.kind == kind::RESUME && (l["max_tokens"].is_u64() || l["max_cost_pico"].is_u64())
        })
}

/// The limits of the run part that `resume` (a `resume` entry) starts: those it records (a
/// resume may run under others than its request: new ceilings, say). A `resume` written before
/// resumes named their limits (or named them only where they differed from the request's)
/// names none, and is replayed under the request's; the line returned says so.
pub(super) fn resumed_under(opts: &mut Options, resume: &Recorded) -> Option<String> {
    if let Some(l) = resume.payload.get("limits").filter(|l| l.is_object()) {
        apply_limits(opts, l);
        return None;
    }
    opts.resume_limits_unkept = true;
    Some(format!(
        "the resume at seq {} names no limits (a version before this one wrote them only where they differed from the request's, or not at all): its part is replayed under the request's limits",
        resume.seq
    ))
}

fn budget_record(b: &ContextBudget) -> J {
    json!({
        "max_total_tokens": b.max_total_tokens,
        "max_request_tokens": b.max_request_tokens,
        "max_task_tokens": b.max_task_tokens,
        "max_upstream_tokens": b.max_upstream_tokens,
        "bytes_per_token": b.bytes_per_token,
    })
}

fn budget_of(v: &J) -> Option<ContextBudget> {
    let n = |k: &str| v.get(k).and_then(J::as_u64);
    Some(ContextBudget {
        max_total_tokens: n("max_total_tokens"),
        max_request_tokens: n("max_request_tokens"),
        max_task_tokens: n("max_task_tokens"),
        max_upstream_tokens: n("max_upstream_tokens"),
        bytes_per_token: n("bytes_per_token")?,
    })
}

/// Where each of the rules a replay ran under came from, one phrase each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Sources {
    /// The roster: `recorded` (the text the request holds), or today's file, proven the same
    /// by the digest a named entry records.
    pub roster: String,
    /// The policy, likewise.
    pub policy: String,
    /// The executors: `recorded`, or `none recorded` (the run was given its executors in
    /// code; the replay answers every call from the record either way).
    pub runtime: String,
    /// The budget and ceilings: `recorded`, or where they came from for an older run.
    pub limits: String,
}

/// The rules a strict replay runs a run under.
pub struct Rules {
    /// The roster the run routed with.
    pub roster: Roster,
    /// The engine's options: the policy and the limits, as recorded.
    pub options: Options,
    /// Where each came from.
    pub sources: Sources,
}

/// Today's roster and policy, read only for a run that did not record its own.
pub struct Current<'a> {
    /// Reads today's roster, or says why it cannot.
    pub roster: &'a dyn Fn() -> Result<Roster, String>,
    /// Reads today's policy, or says why it cannot.
    pub policy: &'a dyn Fn() -> Result<Policy, String>,
}

/// The rules run `run` (its entries, request first) ran under. `Err` says in one line which
/// of them the record does not carry.
pub fn resolve(run: &[Recorded], current: Current<'_>) -> Result<Rules, String> {
    let request = &run[0];
    let seq = request.seq;
    let runtime = match request.payload.get("runtime") {
        Some(r) if !r.is_null() => "recorded",
        _ => "none recorded",
    };
    let Some(rules) = request.payload.get("rules").filter(|r| r.is_object()) else {
        return older(run, current, runtime);
    };
    let roster_text = recorded_file(seq, rules, "roster")?;
    let policy_text = recorded_file(seq, rules, "policy")?;
    let roster = Roster::from_toml_str(&roster_text, &format!("the roster run {seq} recorded"))
        .map_err(|e| e.to_string())?;
    let policy = Policy::from_toml_str(&policy_text, &format!("the policy run {seq} recorded"))
        .map_err(|e| e.to_string())?;
    let mut options = Options {
        policy,
        ..Options::default()
    };
    apply_limits(&mut options, &rules["limits"]);
    options.secrets = guard_of(&options.policy, &request.payload["options"]);
    // The replayed request records the same rules, or it would differ from the record.
    options.rules_record = Some(rules.clone());
    Ok(Rules {
        roster,
        options,
        sources: Sources {
            roster: "recorded".into(),
            policy: "recorded".into(),
            runtime: runtime.into(),
            limits: "recorded".into(),
        },
    })
}

/// The TOML text the request's `rules` holds for `what`, checked against its digest.
fn recorded_file(seq: u64, rules: &J, what: &str) -> Result<String, String> {
    let f = &rules[what];
    let (Some(sha), Some(text)) = (f["sha256"].as_str(), f["toml"].as_str()) else {
        return Err(format!(
            "run {seq} records no {what} text (it was given one built in code): strict replay cannot route or plan it under the {what} it ran under, so it refuses"
        ));
    };
    if sha256_hex(text.as_bytes()) != sha {
        return Err(format!(
            "the {what} text run {seq} recorded does not have the digest recorded beside it ({sha}): it was changed before it was recorded (a secret redacted in it?), so strict replay refuses"
        ));
    }
    Ok(text.to_string())
}

/// The secrets guard a run ran with, as a live run builds it: its policy's `[secrets]`, in the
/// mode its options record (`--secrets`). A change's screen finds secrets by it (its
/// allowlist), so a strict replay screens a worker's commit again by the same rules.
fn guard_of(policy: &Policy, options: &J) -> crate::secrets::Guard {
    let mut secrets = policy.secrets.clone();
    if let Some(mode) = options["secrets"]
        .as_str()
        .and_then(|m| crate::secrets::Mode::parse(m).ok())
    {
        secrets.mode = mode;
    }
    crate::secrets::Guard::new(crate::secrets::Scanner::new(), secrets)
}

fn apply_limits(o: &mut Options, l: &J) {
    let n = |k: &str| l.get(k).and_then(J::as_u64);
    let yes = |k: &str| l.get(k).and_then(J::as_bool).unwrap_or(false);
    o.max_model_calls = n("max_model_calls");
    o.max_seconds = l.get("max_seconds").and_then(J::as_f64);
    o.ceilings = Ceilings {
        max_tokens: n("max_tokens"),
        max_cost_pico: n("max_cost_pico"),
    };
    o.max_output_tokens = n("max_output_tokens").and_then(|n| u32::try_from(n).ok());
    o.context_budget = l.get("context_budget").and_then(budget_of);
    o.delivery_profile = l
        .get("delivery_profile")
        .and_then(J::as_str)
        .map(str::to_string);
    o.judge_intent = yes("judge_intent");
    o.revise = yes("revise");
    o.checkpoint_each_wave = yes("checkpoint_each_wave");
}

/// The first entry of `run` whose `rules` names a digest for `what`: its seq and the digest.
fn named_digest<'r>(run: &'r [Recorded], what: &str) -> Option<(u64, &'r str)> {
    run.iter()
        .filter(|e| e.kind == kind::SHIP || e.kind == kind::GATE_PENDING)
        .find_map(|e| Some((e.seq, e.payload["rules"][what].as_str()?)))
}

/// Today's file for `what` when the record proves it is the one the run ran under.
fn proven<T>(
    run: &[Recorded],
    what: &str,
    today: &dyn Fn() -> Result<T, String>,
    digest: impl Fn(&T) -> Option<String>,
) -> Result<(T, String), String> {
    let seq = run[0].seq;
    let Some((at, recorded)) = named_digest(run, what) else {
        return Err(format!(
            "run {seq} was recorded before runs recorded their rules, and no entry of it names the digest of the {what} it ran under: strict replay cannot tell today's {what} is that one, so it refuses"
        ));
    };
    let today = today().map_err(|e| {
        format!("seq {at} names the {what} run {seq} ran under, and today's cannot be read: {e}")
    })?;
    match digest(&today) {
        Some(d) if d == recorded => Ok((
            today,
            format!("today's {what}, the same by its digest as seq {at} records"),
        )),
        d => Err(format!(
            "run {seq} did not record its {what}, and today's differs from the one it ran under (seq {at} names {recorded}, today's is {}): strict replay refuses rather than replay it under other rules",
            d.unwrap_or_else(|| "built in code".into())
        )),
    }
}

/// The rules of a run recorded before requests held them: see the module doc.
fn older(run: &[Recorded], current: Current<'_>, runtime: &str) -> Result<Rules, String> {
    let seq = run[0].seq;
    let (policy, policy_from) = proven(run, "policy", current.policy, |p| Some(p.digest.clone()))?;
    let (roster, roster_from) = proven(run, "roster", current.roster, |r| {
        r.digest().map(str::to_string)
    })?;
    if let Some(b) = run.iter().find(|e| e.kind == kind::BUDGET) {
        return Err(format!(
            "run {seq} stopped on its budget (seq {}), and it was recorded before runs recorded the limits they ran under: strict replay cannot stop it where it stopped, so it refuses",
            b.seq
        ));
    }
    let mut options = Options {
        policy,
        ..Options::default()
    };
    let o = &run[0].payload["options"];
    options.ceilings = Ceilings {
        max_tokens: o.get("max_tokens").and_then(J::as_u64),
        max_cost_pico: o.get("max_cost_usd").and_then(J::as_f64).map(usd_to_pico),
    };
    Ok(Rules {
        roster,
        options,
        sources: Sources {
            roster: roster_from,
            policy: policy_from,
            runtime: runtime.into(),
            limits: "the ceilings its options record; it did not stop on a budget".into(),
        },
    })
}

/// The replay's seats with the metering of the executors the run recorded: each executor
/// answers from the record, and reserves what the run's own executor reserved for the same
/// call (its prompt bound, output cap and price), so a ceiling stops the replay where it
/// stopped the run.
pub(super) struct Metered<'a> {
    /// The seats that answer from the record.
    pub(super) replay: &'a dyn Seats,
    /// The seats built from the run's recorded runtime, never called.
    pub(super) real: &'a dyn Seats,
}

/// One executor answering from the record, metered as the recorded one.
struct Paired {
    answer: Arc<dyn Executor>,
    real: Arc<dyn Executor>,
}

impl Executor for Paired {
    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError> {
        self.answer.call(call)
    }

    fn model(&self) -> String {
        self.answer.model()
    }

    fn describe(&self) -> String {
        self.answer.describe()
    }

    fn metering(&self) -> Metering {
        self.real.metering()
    }

    /// Metered while it runs as the record shows the call was (a replay runs no agent
    /// behind a forwarder), or as the recorded executor would be here.
    fn metered_live(&self) -> bool {
        self.answer.metered_live() || self.real.metered_live()
    }

    fn prompt_tokens_bound(&self, call: &Call<'_>) -> u64 {
        self.real.prompt_tokens_bound(call)
    }

    /// The editing worker's turns are answered from the record too (each reserved by the
    /// engine from the recorded executor's metering, as any call).
    fn tool_chat(&self) -> Option<&dyn crate::exec::tool_chat::ToolChat> {
        self.answer.tool_chat()
    }
}

fn paired(answer: Arc<dyn Executor>, real: Arc<dyn Executor>) -> Arc<dyn Executor> {
    Arc::new(Paired { answer, real })
}

impl Seats for Metered<'_> {
    fn orchestrator(&self) -> Arc<dyn Executor> {
        paired(self.replay.orchestrator(), self.real.orchestrator())
    }

    fn worker(&self, roster: &Roster, agent: &str) -> Arc<dyn Executor> {
        paired(
            self.replay.worker(roster, agent),
            self.real.worker(roster, agent),
        )
    }

    fn ladder(&self, roster: &Roster, agent: &str) -> Vec<Arc<dyn Executor>> {
        crate::exec::untiered(self.tiered_ladder(roster, agent))
    }

    fn tiered_ladder(
        &self,
        roster: &Roster,
        agent: &str,
    ) -> Vec<(Option<crate::roster::Tier>, Arc<dyn Executor>)> {
        let real = self.real.ladder(roster, agent);
        self.replay
            .tiered_ladder(roster, agent)
            .into_iter()
            .enumerate()
            .map(|(i, (tier, e))| match real.get(i) {
                Some(r) => (tier, paired(e, r.clone())),
                None => (tier, e),
            })
            .collect()
    }

    fn slot(&self, slot: &str) -> Option<Arc<dyn Executor>> {
        self.replay.slot(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: J) -> Vec<Recorded> {
        vec![Recorded {
            seq: 3,
            ts: 1.0,
            actor: "client".into(),
            kind: kind::REQUEST.into(),
            parent: None,
            payload: body,
        }]
    }

    #[test]
    fn recorded_rules_come_back_whatever_the_files_say_today() {
        let policy = Policy::from_toml_str("max_parallel = 1\nmax_tasks = 3\n", "p").unwrap();
        let opts = Options {
            policy,
            max_model_calls: Some(7),
            ceilings: Ceilings {
                max_tokens: Some(900),
                max_cost_pico: None,
            },
            ..Options::default()
        };
        let roster = Roster::default_roster();
        let run = request(json!({"text": "x", "rules": record(&opts, &roster)}));
        let current = Current {
            roster: &|| Err("no file".into()),
            policy: &|| Err("no file".into()),
        };
        let r = resolve(&run, current).unwrap();
        assert_eq!(r.options.policy, opts.policy);
        assert_eq!(r.options.max_model_calls, Some(7));
        assert_eq!(r.options.ceilings, opts.ceilings);
        assert_eq!(r.roster, roster);
        assert_eq!(r.sources.policy, "recorded");
        assert_eq!(r.sources.runtime, "none recorded");
    }

    #[test]
    fn an_older_run_is_refused_unless_an_entry_proves_todays_file() {
        let run = request(json!({"text": "x"}));
        let roster = || Ok(Roster::default_roster());
        let policy = || Ok(Policy::default());
        let current = || Current {
            roster: &roster,
            policy: &policy,
        };
        let err = resolve(&run, current()).err().unwrap();
        assert!(
            err.contains("no entry of it names the digest of the policy"),
            "{err}"
        );
        let mut run = run;
        run.push(Recorded {
            seq: 9,
            ts: 2.0,
            actor: "orchestrator".into(),
            kind: kind::SHIP.into(),
            parent: Some(3),
            payload: json!({"rules": {
                "policy": Policy::default().digest,
                "roster": Roster::default_roster().digest(),
            }}),
        });
        let r = resolve(&run, current()).unwrap();
        assert_eq!(
            r.sources.policy,
            "today's policy, the same by its digest as seq 9 records"
        );
        let other = || Ok(Policy::from_toml_str("max_parallel = 2\n", "p").unwrap());
        let err = resolve(
            &run,
            Current {
                roster: &roster,
                policy: &other,
            },
        )
        .err()
        .unwrap();
        assert!(err.contains("today's differs"), "{err}");
    }
}
