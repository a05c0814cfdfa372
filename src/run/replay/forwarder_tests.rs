//! A run whose confined worker its metering forwarder stopped at the token ceiling, recorded
//! by the live engine (the worker stands in for an agent CLI: it hands the engine its egress,
//! the forwarder's count and the stop through the thread's seam, as the agent executor does),
//! then replayed strictly from the record, as it was and with a decision after the stop edited.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value as J, json};

use crate::exec::command::{self, Metered};
use crate::exec::{Call, ExecError, Executor, Fleet, Reply, Scripted, Usage};
use crate::ledger::{MemoryStorage, NewEntry, Storage, Value, kind};
use crate::roster::Roster;
use crate::run::{Env, Options, Silent, StepClock};
use crate::spend::Ceilings;

use super::super::{ReplayError, read_all, strict};

/// What the stand-in's egress saw over one call: `tokens` counted in all, and the ceiling it
/// stopped the agent at, if it did.
fn seen(tokens: u64, ceiling: Option<&str>) -> J {
    let mut m = json!({
        "requests": 2, "input_tokens": tokens * 4 / 5, "output_tokens": tokens / 5,
        "refused": u8::from(ceiling.is_some()), "overshoot_tokens": 0, "usage_seen": true,
    });
    if let Some(c) = ceiling {
        m["ceiling"] = json!(c);
        m["overshoot_tokens"] = json!(300);
        m["max_tokens"] = json!(2_700);
    }
    json!({"metered": m, "refused_connections": {}})
}

/// An agent CLI behind its metering forwarder: T1's call is counted 1,000 tokens; T2's is
/// stopped at the token ceiling after 3,000.
struct Confined;

impl Executor for Confined {
    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError> {
        let stop = call.prompt.contains("write the notes");
        let tokens = if stop { 3_000 } else { 1_000 };
        command::note_egress_seen(seen(tokens, stop.then_some("tokens")));
        command::note_metered(Metered {
            input_tokens: tokens * 4 / 5,
            output_tokens: tokens / 5,
            seen: true,
            ceiling: stop.then_some("tokens"),
        });
        if stop {
            return Err(ExecError::Ceiling("stopped at the tokens ceiling".into()));
        }
        command::note_agent_reported(json!({"prompt_tokens": 790, "completion_tokens": 200}));
        Ok(Reply {
            text: "fixed add".into(),
            model: "agent-model".into(),
            usage: Some(Usage {
                input_tokens: 800,
                output_tokens: 200,
                estimated: false,
                truncated: false,
                over_reservation: None,
            }),
            elapsed: Duration::ZERO,
        })
    }

    fn model(&self) -> String {
        "agent-model".into()
    }

    fn describe(&self) -> String {
        "a confined agent".into()
    }

    fn metered_live(&self) -> bool {
        true
    }
}

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"fix add in calc","depends_on":[],"done_when":["the tests pass"]},{"id":"T2","agent":"backend","instruction":"write the notes","depends_on":["T1"],"done_when":["the notes say it"]}]}"#;

fn orchestrator() -> Arc<dyn Executor> {
    Arc::new(Scripted::new("planner-model", |call| {
        Ok(match call.schema.map(|s| s.name.as_str()) {
            Some("plan") => PLAN.to_string(),
            Some("verdict") => r#"{"decision":"pass","score":0.9,"reason":"ok"}"#.into(),
            _ => "Fixed add.".into(),
        })
    }))
}

fn opts() -> Options {
    Options {
        ceilings: Ceilings {
            max_tokens: Some(40_000),
            max_cost_pico: None,
        },
        ..Options::default()
    }
}

/// Records the run live; returns its ledger.
fn recorded(roster: &Roster) -> MemoryStorage {
    let worker: Arc<dyn Executor> = Arc::new(Confined);
    let seats = Fleet::fixed(orchestrator(), worker, Vec::new());
    let clock = StepClock::new(1000.0, 1.0);
    let env = Env {
        roster,
        seats: &seats,
        clock: &clock,
        progress: &Silent,
    };
    let mut store = MemoryStorage::default();
    let _ = crate::run::submit(&mut store, &env, &opts(), "fix add and write the notes");
    store
}

/// The entries of `store` of `kind`, with their bodies.
fn bodies(store: &MemoryStorage, of: &str) -> Vec<(u64, J)> {
    read_all(store)
        .unwrap()
        .into_iter()
        .filter(|(e, _)| e.kind == of)
        .map(|(e, b)| (e.seq, b.unwrap()))
        .collect()
}

/// A copy of `store` with the body at `seq` changed by `edit`, every entry hashed again.
fn edited(store: &MemoryStorage, seq: u64, edit: impl Fn(&mut J)) -> MemoryStorage {
    let mut out = MemoryStorage::default();
    for (e, body) in read_all(store).unwrap() {
        let mut body = body.unwrap();
        if e.seq == seq {
            edit(&mut body);
        }
        out.append(NewEntry {
            actor: e.actor.clone(),
            kind: e.kind.clone(),
            causal_parent: e.causal_parent,
            payload: Value::from_serde(&body),
            ts: e.ts,
        })
        .unwrap();
    }
    out
}

#[test]
fn a_worker_its_forwarder_stopped_at_a_ceiling_replays_and_an_edit_after_it_diverges() {
    let roster = Roster::default_roster();
    let store = recorded(&roster);
    let results = bodies(&store, kind::RESULT);
    let (stop_at, stop) = results.iter().find(|(_, b)| b["id"] == "T2").unwrap();
    assert_eq!(stop["error"], "ceiling", "{results:?}");
    assert_eq!(stop["usage"]["prompt_tokens"], 2_400, "{stop}");
    assert!(
        stop["output"]
            .as_str()
            .unwrap()
            .contains("metering forwarder stopped the agent at its tokens ceiling"),
        "{stop}"
    );
    let budget = bodies(&store, kind::BUDGET);
    let (budget_at, stopped) = budget.last().expect("the run stopped on its ceiling");
    assert_eq!(stopped["ceiling"], "max_tokens", "{stopped}");

    // As recorded: every decision after the stop is made again and agrees.
    let r = strict(&store, 0, &roster, &opts()).unwrap();
    assert_eq!(r.divergence, None, "{r:?}");
    assert!(r.unanswered.is_empty(), "{r:?}");
    assert_eq!(r.recorded, r.recomputed, "{r:?}");

    // The budget stop edited to name the cost ceiling: the forwarder's stop says tokens.
    let forged = edited(&store, *budget_at, |b| b["ceiling"] = json!("max_cost_usd"));
    let r = strict(&forged, 0, &roster, &opts()).unwrap();
    assert_eq!(
        r.divergence.as_ref().map(|d| d.seq),
        Some(*budget_at),
        "{r:?}"
    );

    // The stop's verdict edited to a pass: the stopped task is failed again.
    let verdicts = bodies(&store, kind::VERDICT);
    let (verdict_at, _) = verdicts.iter().find(|(_, b)| b["id"] == "T2").unwrap();
    let forged = edited(&store, *verdict_at, |b| b["ok"] = json!(true));
    let r = strict(&forged, 0, &roster, &opts()).unwrap();
    assert_eq!(
        r.divergence.as_ref().map(|d| d.seq),
        Some(*verdict_at),
        "{r:?}"
    );

    // The forwarder's count edited down: the stop's usage is the count the replay hands back,
    // so the result itself diverges where the engine charged what the record now says.
    let forged = edited(&store, *stop_at, |b| {
        b["usage"]["prompt_tokens"] = json!(10)
    });
    let r = strict(&forged, 0, &roster, &opts()).unwrap();
    assert_eq!(
        r.divergence.as_ref().map(|d| d.seq),
        Some(*stop_at),
        "{r:?}"
    );
}

#[test]
fn a_ceiling_stop_without_the_forwarders_count_is_refused_naming_its_seq() {
    let roster = Roster::default_roster();
    let store = recorded(&roster);
    let results = bodies(&store, kind::RESULT);
    let (at, _) = results.iter().find(|(_, b)| b["id"] == "T2").unwrap();
    let forged = edited(&store, *at, |b| {
        b.as_object_mut().unwrap().remove("egress");
    });
    match strict(&forged, 0, &roster, &opts()) {
        Err(ReplayError::Refused(m)) => {
            assert!(m.contains(&format!("seq {at}")), "{m}");
            assert!(m.contains("no count of the forwarder"), "{m}");
        }
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn the_forwarders_readings_are_read_from_a_result_and_an_older_one_by_its_counts() {
    let b = json!({"egress": seen(1_000, Some("cost_usd")), "usage": {"agent_reported": {"cost_usd": 1.0}}});
    let e = super::of(&b).unwrap();
    let m = e.metered.unwrap();
    assert_eq!((m.input_tokens, m.output_tokens, m.seen), (800, 200, true));
    assert_eq!(m.ceiling, Some("cost_usd"));
    assert_eq!(e.reported, Some(json!({"cost_usd": 1.0})));
    // Before `usage_seen` was kept: seen when it counted any token.
    let older = json!({"egress": {"metered": {"input_tokens": 0, "output_tokens": 0}}});
    assert!(!super::of(&older).unwrap().metered.unwrap().seen);
    assert_eq!(super::of(&json!({"output": "x"})), None);
}
