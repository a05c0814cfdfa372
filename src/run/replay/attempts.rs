//! `--attempts N` runs replayed: each attempt's worker reply, change commit and checks are
//! answered from its own entries (their bodies carry `attempt`) in the order they ran, as for
//! one change; the pre-ship gate's reply over the attempts is the raw reply the `gate` of its
//! `attempt_choice` entry keeps (`reply`), parsed again by the engine. The engine decides again which attempts passed, which one the
//! rule or the gate's reply chooses (`chosen`, `rule`), and what ships; an `attempt_choice` or
//! `ship` made to say otherwise is the divergence.

use serde_json::{Value as J, json};

use crate::ledger::kind;

use super::Recorded;

/// How many attempts each task of the run was given: the request's recorded `options`, else
/// (a count taken from the runtime's `[work] attempts`) the highest attempt its entries name,
/// else one.
pub(super) fn count(run: &[Recorded]) -> u32 {
    let recorded = run
        .first()
        .and_then(|r| r.payload["options"]["attempts"].as_u64());
    let seen = run
        .iter()
        .filter(|e| e.kind == kind::CHANGE || e.kind == kind::RESULT)
        .filter_map(|e| e.payload.get("attempt").and_then(J::as_u64))
        .max();
    let n = recorded.or(seen).unwrap_or(1);
    u32::try_from(n).unwrap_or(u32::MAX).max(1)
}

/// The gate's reply to the question over a task's attempts, from its `attempt_choice` entry:
/// `None` when the gate was not asked (light verification, the budget), `Some(Ok(text))` for
/// what it answered, `Some(Err(message))` for a call that failed. The raw reply the entry
/// keeps (`gate.reply`) is handed back as it is, for the engine to parse again; a run recorded
/// before it was kept has one made from the decision the entry keeps. `Err` names a reply
/// kept cut short, or an answer the record keeps only as the text of its failure.
pub(super) fn gate_reply(e: &Recorded) -> Result<Option<Result<String, String>>, String> {
    let g = &e.payload["gate"];
    let decision = g["decision"].as_str().unwrap_or_default();
    let reason = g["reason"].as_str().unwrap_or_default();
    let error = g.get("error").and_then(J::as_str);
    if decision == "skipped" || error == Some("budget") {
        return Ok(None);
    }
    if let Some(raw) = g.get("reply").and_then(J::as_str) {
        if g["reply_cut"] == true {
            return Err(format!(
                "the attempt choice at seq {} keeps the gate's reply cut short, so the choice cannot be made again from it",
                e.seq
            ));
        }
        return Ok(Some(Ok(raw.to_string())));
    }
    let unusable = "the gate answered without a usable decision: ";
    let text = match error {
        None if decision == "merge" => {
            // The gate named the attempt it chose: the one the entry says was chosen.
            json!({"decision": "merge", "attempt": e.payload["chosen"], "reason": reason})
        }
        None => json!({"decision": decision, "reason": reason}),
        // A merge the engine could not use: what made it unusable is all it kept, and all
        // the engine reads of it.
        Some("a merge names no \"attempt\"") => json!({"decision": "merge", "reason": "-"}),
        Some(why) => match not_passing(why) {
            Some(n) => json!({"decision": "merge", "attempt": n, "reason": "-"}),
            None => match reason.strip_prefix("the gate failed (other): ") {
                Some(msg) => return Ok(Some(Err(msg.to_string()))),
                None if reason.starts_with(unusable) || reason.starts_with("the gate failed") => {
                    return Err(format!(
                        "the attempt choice at seq {} keeps only the text of the gate's failed answer ({why}), not the answer itself",
                        e.seq
                    ));
                }
                None => {
                    return Err(format!(
                        "the attempt choice at seq {} records a gate error ({why}) this replay cannot answer",
                        e.seq
                    ));
                }
            },
        },
    };
    Ok(Some(Ok(text.to_string())))
}

/// The attempt a "not one of the passing attempts" error names.
fn not_passing(why: &str) -> Option<u64> {
    why.strip_prefix("attempt ")?
        .strip_suffix(" is not one of the passing attempts")?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(kind: &str, payload: J) -> Recorded {
        Recorded {
            seq: 9,
            ts: 1.0,
            actor: "orchestrator".into(),
            kind: kind.into(),
            parent: None,
            payload,
        }
    }

    #[test]
    fn the_count_is_the_recorded_option_else_the_highest_attempt_seen() {
        let req = e("request", json!({"options": {"attempts": 3}}));
        assert_eq!(count(&[req]), 3);
        let run = [
            e("request", json!({})),
            e("change", json!({"task": "T1", "attempt": 1})),
            e("change", json!({"task": "T1", "attempt": 2})),
        ];
        assert_eq!(count(&run), 2);
        assert_eq!(count(&run[..1]), 1);
    }

    #[test]
    fn the_gates_reply_is_rebuilt_from_what_the_choice_kept() {
        let choice =
            |gate: J, chosen: J| e("attempt_choice", json!({"gate": gate, "chosen": chosen}));
        let merged = choice(
            json!({"decision": "merge", "reason": "small", "model": "m"}),
            json!(2),
        );
        let text = gate_reply(&merged).unwrap().unwrap().unwrap();
        let v: J = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({"decision": "merge", "attempt": 2, "reason": "small"})
        );
        let undetermined = choice(json!({"decision": "undetermined", "reason": "r"}), json!(3));
        let v: J =
            serde_json::from_str(&gate_reply(&undetermined).unwrap().unwrap().unwrap()).unwrap();
        assert_eq!(v, json!({"decision": "undetermined", "reason": "r"}));
        // Not asked: no reply.
        let light = choice(json!({"decision": "skipped", "reason": "light"}), json!(1));
        assert_eq!(gate_reply(&light).unwrap(), None);
        let budget = choice(
            json!({"decision": "undetermined", "reason": "x", "error": "budget"}),
            json!(1),
        );
        assert_eq!(gate_reply(&budget).unwrap(), None);
        // An unusable merge is rebuilt as what made it unusable.
        let bad = choice(
            json!({"decision": "undetermined", "reason": "the gate answered without a usable decision: attempt 5 is not one of the passing attempts", "error": "attempt 5 is not one of the passing attempts"}),
            J::Null,
        );
        let v: J = serde_json::from_str(&gate_reply(&bad).unwrap().unwrap().unwrap()).unwrap();
        assert_eq!(v["attempt"], 5);
        let failed = choice(
            json!({"decision": "undetermined", "reason": "the gate failed (other): boom", "error": "other"}),
            J::Null,
        );
        assert_eq!(gate_reply(&failed).unwrap(), Some(Err("boom".into())));
        let lost = choice(
            json!({"decision": "undetermined", "reason": "the gate answered without a usable decision: no JSON", "error": "no JSON"}),
            J::Null,
        );
        let err = gate_reply(&lost).unwrap_err();
        assert!(err.contains("seq 9"), "{err}");
    }

    #[test]
    fn a_kept_raw_reply_is_handed_back_as_it_is_and_a_cut_one_is_refused() {
        // The raw reply names attempt 1; the parsed form, edited, says 2: the raw one wins.
        let raw = r#"{"decision":"merge","attempt":1,"reason":"smaller"}"#;
        let kept = e(
            "attempt_choice",
            json!({"chosen": 2, "gate": {"decision": "merge", "reason": "smaller", "reply": raw}}),
        );
        assert_eq!(gate_reply(&kept).unwrap(), Some(Ok(raw.to_string())));
        // An unusable answer is parsed again too, from what the gate said.
        let garbled = e(
            "attempt_choice",
            json!({"chosen": null, "gate": {"decision": "undetermined", "reason": "the gate answered without a usable decision: no JSON", "error": "no JSON", "reply": "no idea"}}),
        );
        assert_eq!(gate_reply(&garbled).unwrap(), Some(Ok("no idea".into())));
        let cut = e(
            "attempt_choice",
            json!({"gate": {"decision": "merge", "reason": "r", "reply": "{", "reply_cut": true}}),
        );
        let err = gate_reply(&cut).unwrap_err();
        assert!(err.contains("seq 9") && err.contains("cut short"), "{err}");
    }
}
