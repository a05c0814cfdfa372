//! Strict replay of the editing worker where the sum of a task's usage is not enough: a
//! conversation a spend ceiling stopped mid-task (each turn's usage is answered from the
//! result's `turn_usage`, so the replay stops at the same turn), and the structured reply of
//! an endpoint that takes no tools (rebuilt from its edits, asked with the worktree listing
//! its result keeps).

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::edit_worker::{Stub, call, fleet, submit};
use crate::strict_replay::{rehashed_export, strict_cli};
use crate::strict_replay_edit::{import_as, refusal};
use crate::strict_replay_work::strict;
use crate::work_run::{self, payloads};

/// A model that lists files every turn and reports a large usage for each, so a token
/// ceiling stops its conversation after a few turns.
fn costly_lister(turn: usize, _: &J) -> (u16, J) {
    let message = json!({"role": "assistant", "content": format!("turn {turn}: listing"),
                         "tool_calls": [call(&format!("ls{turn}"), "list_files", json!({}))]});
    let answer = json!({"model": "stub-coder",
                        "choices": [{"message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1000, "completion_tokens": 2000}});
    (200, answer)
}

/// Records run 0 of `repo`: the costly lister stopped by `--max-tokens 20000`.
pub(crate) fn ceiling_run(repo: &Repo) {
    work_run::setup(repo);
    let stub = Stub::start(fleet(costly_lister));
    let out = submit(
        repo,
        &stub,
        &["--max-tool-calls", "50", "--max-tokens", "20000"],
    );
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The result of task T1.
fn result_of_t1(repo: &Repo) -> (u64, J) {
    payloads(repo, "result")
        .into_iter()
        .find(|(_, p)| p["id"] == "T1")
        .unwrap()
}

#[test]
fn a_conversation_its_token_ceiling_stopped_replays_to_the_same_stop_on_every_format() {
    on_each_kind(|repo| {
        ceiling_run(repo);
        let (_, result) = result_of_t1(repo);
        assert_eq!(result["error"], "ceiling", "{result}");
        let turns = result["turns"].as_u64().unwrap();
        let each = result["turn_usage"].as_array().unwrap();
        assert_eq!(each.len() as u64, turns, "{result}");
        // Every turn but the one the ceiling refused reported its own usage.
        assert!(turns >= 3, "{result}");
        assert!(
            each[..each.len() - 1]
                .iter()
                .all(|u| u["completion_tokens"] == 2000),
            "{result}"
        );
        assert_eq!(each[each.len() - 1], J::Null, "{result}");
        assert_eq!(result["usage"]["completion_tokens"], 2000 * (turns - 1));
        assert_eq!(result["turn_texts"][0], "turn 0: listing", "{result}");
        assert_eq!(payloads(repo, "tool_call")[0].1["call_id"], "ls0");
        let budget = payloads(repo, "budget");
        assert_eq!(budget[0].1["ceiling"], "max_tokens", "{budget:?}");
        let (code, r) = strict_cli(repo, 0);
        crate::strict_replay_work::no_divergence(code, &r);
    });
}

#[test]
fn an_edited_turn_usage_or_stop_diverges_and_an_older_record_is_refused() {
    let repo = Repo::new("sha1");
    ceiling_run(&repo);
    let (result_seq, result) = result_of_t1(&repo);
    let calls = payloads(&repo, "tool_call");
    // The first turn said it used far more: the ceiling stops the replay a turn or more
    // earlier, where the record holds a tool call of a turn the replay never asks.
    let forged = rehashed_export(&repo, |seq, b| {
        if seq == result_seq {
            b["turn_usage"][0]["prompt_tokens"] = json!(9000);
        }
    });
    import_as(&repo, &forged, "heavier");
    let (code, r) = strict(&repo, &["--ledger", "heavier"]);
    assert_eq!(code, Some(1), "{r}");
    let at = r["divergence"]["seq"].as_u64().unwrap();
    let turns = result["turns"].as_u64().unwrap();
    let moved = calls
        .iter()
        .find(|(seq, _)| *seq == at)
        .unwrap_or_else(|| panic!("{r}"));
    assert!(moved.1["turn"].as_u64().unwrap() < turns, "{r}");
    // The stop itself edited: the budget entry names another ceiling.
    let budget = payloads(&repo, "budget")[0].0;
    let forged = rehashed_export(&repo, |seq, b| {
        if seq == budget {
            b["ceiling"] = json!("max_cost_usd");
        }
    });
    import_as(&repo, &forged, "other-stop");
    let (code, r) = strict(&repo, &["--ledger", "other-stop"]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["divergence"]["seq"], json!(budget), "{r}");
    // Recorded before results kept each turn's usage: refused, naming the result.
    let older = rehashed_export(&repo, |seq, b| {
        if seq == result_seq {
            b.as_object_mut().unwrap().remove("turn_usage");
        }
    });
    import_as(&repo, &older, "older");
    let err = refusal(&repo, "older");
    assert!(err.contains(&format!("seq {result_seq}")), "{err}");
    assert!(
        err.contains("each turn's") && err.contains("ceiling"),
        "{err}"
    );
}

/// An endpoint that rejects `tools`: the worker answers one structured reply instead.
fn no_tools(_: usize, _: &J) -> (u16, J) {
    let e = json!({"error": {"message": "tools param requires --jinja flag", "type": "invalid_request_error"}});
    (400, e)
}

#[test]
fn a_structured_reply_replays_with_no_divergence_on_every_format() {
    on_each_kind(|repo| {
        work_run::setup(repo);
        let stub = Stub::start(fleet(no_tools));
        let out = submit(repo, &stub, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let calls = payloads(repo, "tool_call");
        assert_eq!(calls[0].1["via"], "structured", "{calls:?}");
        let (_, result) = result_of_t1(repo);
        assert!(
            result["listing"].as_str().unwrap().contains("calc.py"),
            "{result}"
        );
        assert_eq!(result["turns"], 2, "{result}");
        let asked = stub.requests();
        let (code, r) = strict_cli(repo, 0);
        crate::strict_replay_work::no_divergence(code, &r);
        assert_eq!(stub.requests(), asked);
    });
}

#[test]
fn an_edited_structured_edit_diverges_and_one_without_its_listing_is_refused() {
    let repo = Repo::new("sha1");
    work_run::setup(&repo);
    let stub = Stub::start(fleet(no_tools));
    assert!(submit(&repo, &stub, &[]).status.success());
    let call = payloads(&repo, "tool_call")[0].0;
    let result_seq = result_of_t1(&repo).0;
    // The edit renumbered: the engine numbers the edits itself.
    let forged = rehashed_export(&repo, |seq, b| {
        if seq == call {
            b["n"] = json!(7);
        }
    });
    import_as(&repo, &forged, "renumbered");
    let (code, r) = strict(&repo, &["--ledger", "renumbered"]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["divergence"]["seq"], json!(call), "{r}");
    assert!(
        r["divergence"]["recomputed"]
            .as_str()
            .unwrap()
            .contains("n:1"),
        "{r}"
    );
    // The ship decision changed from merge to block, its raw reply left as it was.
    let ship = payloads(&repo, "ship")[0].0;
    let forged = rehashed_export(&repo, |seq, b| {
        if seq == ship {
            b["decision"] = json!("block");
        }
    });
    import_as(&repo, &forged, "blocked");
    let (code, r) = strict(&repo, &["--ledger", "blocked"]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["divergence"]["seq"], json!(ship), "{r}");
    // Recorded before results kept the listing: refused, naming the structured edit.
    let older = rehashed_export(&repo, |seq, b| {
        if seq == result_seq {
            b.as_object_mut().unwrap().remove("listing");
        }
    });
    import_as(&repo, &older, "older");
    let err = refusal(&repo, "older");
    assert!(err.contains(&format!("seq {call}")), "{err}");
    assert!(err.contains("listing"), "{err}");
}
