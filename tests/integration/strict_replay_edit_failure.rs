//! Strict replay of the editing worker's own failures: a model turn that fails inside the tool
//! loop (an HTTP error, a reply that is not JSON) is kept in the task's `result` as `failure`
//! (class, status, body; a reply that is not JSON as the reply itself), the replay gives it
//! back at the same turn (parsing a kept reply again), and the engine's escalation to the
//! next rung is decided again and compared. The weak model fails its second turn; the run
//! climbs to the strong model, which fixes the bug, and finishes.

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::edit_worker::{FIXED, RAW_BODY, Stub, chat_answer, fleet, tool_turn};
use crate::strict_replay::forged_export;
use crate::strict_replay_edit::{import_as, refusal};
use crate::strict_replay_work::{no_divergence, strict};
use crate::work_run::{self, payloads};

const CHECK: &str = "python3 -m unittest -q";

/// A status and a body the stub answers with.
type Answer = fn() -> (u16, J);
const WEAK: &str = "stub-weak";
const STRONG: &str = "stub-strong";

/// The worker's turns: the test read, the fix written, the check run, the report.
fn coder(turn: usize) -> J {
    match turn {
        0 => tool_turn("c1", "read_file", json!({"path": "test_calc.py"})),
        1 => tool_turn(
            "c2",
            "write_file",
            json!({"path": "calc.py", "content": FIXED}),
        ),
        2 => tool_turn("c3", "run_command", json!({"command": CHECK})),
        _ => chat_answer(json!("Fixed add in calc.py; the tests pass."), None),
    }
}

/// A stub whose weak model answers its second tool turn with `failed` (a status and a body),
/// every other turn as [`coder`]; each answer names the model it was asked of.
fn stub(failed: Answer) -> Stub {
    let control = fleet(|_, _| (200, J::Null));
    Stub::start(move |req: &J| {
        let (status, mut answer) = if req.get("tools").is_none() {
            control(req)
        } else {
            let turn = req["messages"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
            if req["model"] == WEAK && turn == 1 {
                return failed();
            }
            (200, coder(turn))
        };
        answer["model"] = req["model"].clone();
        (status, answer)
    })
}

fn overloaded() -> (u16, J) {
    (
        500,
        json!({"error": {"message": "the model is overloaded"}}),
    )
}

const NOT_JSON: &str = "<html><body>502 upstream went away</body></html>";

fn not_json() -> (u16, J) {
    (200, json!({ RAW_BODY: NOT_JSON }))
}

/// Records run 0 in `repo`: the weak model on every seat, the strong one as the frontier
/// tier, both served by `stub`.
fn record(repo: &Repo, stub: &Stub) {
    work_run::setup(repo);
    let url = stub.url("/v1/chat/completions");
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!(
            "[runtime.default]\nchat_url = \"{url}\"\nmodel = \"{WEAK}\"\nis_local = true\n\n[runtime.tiers.frontier]\nchat_url = \"{url}\"\nmodel = \"{STRONG}\"\nis_local = true\n"
        ),
    )
    .unwrap();
    let out = repo
        .forum()
        .args(["submit", "--json", "--work", "--check", CHECK, "fix calc"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The seq and body of the weak model's failed result, after checking the run climbed to the
/// strong model, which fixed the bug.
fn failed_turn(repo: &Repo) -> (u64, J) {
    let results = payloads(repo, "result");
    let (at, failed) = results
        .iter()
        .find(|(_, p)| p["id"] == "T1" && p["ok"] == false)
        .cloned()
        .expect("the weak model's failed result");
    assert_eq!(failed["model"], WEAK, "{failed}");
    // It failed at its second turn, after its first tool call.
    assert_eq!(failed["turns"], 2, "{failed}");
    let climbed = payloads(repo, "tier_escalation");
    assert_eq!(climbed.len(), 1, "{climbed:?}");
    assert_eq!(climbed[0].1["to"], STRONG, "{climbed:?}");
    assert!(
        results
            .iter()
            .any(|(_, p)| p["id"] == "T1" && p["ok"] == true && p["model"] == STRONG),
        "{results:?}"
    );
    let branch = repo.git_ok(&["show", "forum/run-0:calc.py"]);
    assert!(branch.contains("return a + b\n\n\ndef mul"), "{branch}");
    (at, failed)
}

/// `forged` (a re-hashed copy of `repo`'s ledger) imported as `name` diverges at `at`.
fn diverges_at(repo: &Repo, forged: &git_forum::ledger::MemoryStorage, name: &str, at: u64) -> J {
    import_as(repo, forged, name);
    let (code, r) = strict(repo, &["--ledger", name]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
    r
}

#[test]
fn an_editing_worker_whose_turn_failed_with_http_500_climbs_replays_and_its_class_is_checked() {
    on_each_kind(|repo| {
        let stub = stub(overloaded);
        record(repo, &stub);
        let (at, failed) = failed_turn(repo);
        assert_eq!(failed["error"], "http_status", "{failed}");
        let f = &failed["failure"];
        assert_eq!(
            (&f["class"], &f["status"]),
            (&json!("http_status"), &json!(500))
        );
        assert!(
            f["body"].as_str().unwrap().contains("overloaded"),
            "{failed}"
        );
        let asked = stub.requests();
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        // Every turn came from the record: the stub was not asked again.
        assert_eq!(stub.requests(), asked);
        // The class edited in a copy: the engine's result of the failure differs at its seq.
        let forged = forged_export(repo, at, |b| b["failure"]["class"] = json!("timeout"));
        let r = diverges_at(repo, &forged, "forged", at);
        let d = &r["divergence"];
        assert!(
            d["recomputed"].as_str().unwrap().contains("error:timeout"),
            "{d}"
        );
        // Recorded before results kept the failure: refused in one line.
        let older = forged_export(repo, at, |b| {
            b.as_object_mut().unwrap().remove("failure");
        });
        import_as(repo, &older, "older");
        let err = refusal(repo, "older");
        assert!(err.contains(&format!("seq {at}")), "{err}");
        assert!(err.contains("(http_status)"), "{err}");
        assert!(err.contains("older record"), "{err}");
    });
}

#[test]
fn an_editing_worker_whose_reply_was_not_json_keeps_the_reply_and_parses_it_again() {
    on_each_kind(|repo| {
        let stub = stub(not_json);
        record(repo, &stub);
        let (at, failed) = failed_turn(repo);
        assert_eq!(failed["error"], "invalid_json", "{failed}");
        // The ledger keeps the bytes the endpoint sent, not why they did not parse.
        let f = &failed["failure"];
        assert_eq!(f["body"], NOT_JSON, "{failed}");
        assert_eq!(f["raw_reply"], true, "{failed}");
        assert!(
            failed["output"]
                .as_str()
                .unwrap()
                .contains("answered with invalid JSON: expected value at line 1 column 1"),
            "{failed}"
        );
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        // The reply edited to one that fails to parse otherwise: the parse error is the
        // replay's own, so the result's message differs at its seq.
        let forged = forged_export(repo, at, |b| {
            b["failure"]["body"] = json!("{\"choices\": [")
        });
        let r = diverges_at(repo, &forged, "forged", at);
        let d = &r["divergence"];
        assert!(d["recomputed"].as_str().unwrap().contains("EOF"), "{d}");
        // The message's parse error edited: the replay makes its own from the bytes.
        let forged = forged_export(repo, at, |b| {
            let out = b["output"]
                .as_str()
                .unwrap()
                .replace("line 1 column 1", "line 9");
            b["output"] = json!(out);
        });
        diverges_at(repo, &forged, "forged-message", at);
    });
}

/// A stub whose weak model takes no tools and answers the structured reply asked instead with
/// `structured`; the strong model works through the tools as [`coder`].
fn no_tools_stub(structured: Answer) -> Stub {
    let control = fleet(|_, _| (200, J::Null));
    Stub::start(move |req: &J| {
        let weak = req["model"] == WEAK;
        let asked = req["messages"].to_string();
        let (status, mut answer) = if weak && req.get("tools").is_some() {
            (
                400,
                json!({"error": {"message": "tools are not supported"}}),
            )
        } else if weak && asked.contains("This endpoint takes no tools") {
            structured()
        } else if req.get("tools").is_some() {
            let turn = req["messages"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
            (200, coder(turn))
        } else {
            control(req)
        };
        answer["model"] = req["model"].clone();
        (status, answer)
    })
}

const NOT_EDITS: &str = "I would rather explain the fix than write it.";

fn not_edits() -> (u16, J) {
    (200, chat_answer(json!(NOT_EDITS), None))
}

#[test]
fn a_structured_reply_that_failed_or_was_not_the_edits_replays_and_climbs() {
    let cases: [(Answer, &str); 2] = [
        (overloaded, "http_status"),
        (not_edits, "malformed_fallback"),
    ];
    for (structured, code) in cases {
        on_each_kind(|repo| structured_case(repo, structured, code));
    }
}

/// One case of the test above, on `repo`: the structured reply answered by `structured`
/// failed the weak model's task with `code`.
fn structured_case(repo: &Repo, structured: Answer, code: &str) {
    let stub = no_tools_stub(structured);
    record(repo, &stub);
    let results = payloads(repo, "result");
    let (at, failed) = results
        .iter()
        .find(|(_, p)| p["id"] == "T1" && p["ok"] == false)
        .cloned()
        .expect("the weak model's failed result");
    assert_eq!(failed["error"], code, "{failed}");
    assert!(failed["listing"].is_string(), "{failed}");
    assert_eq!(payloads(repo, "tier_escalation").len(), 1, "{code}");
    if code == "malformed_fallback" {
        assert_eq!(failed["reply"]["text"], NOT_EDITS, "{failed}");
    } else {
        assert_eq!(failed["failure"]["status"], 500, "{failed}");
    }
    let (exit, r) = strict(repo, &[]);
    no_divergence(exit, &r);
    if code != "malformed_fallback" {
        let forged = forged_export(repo, at, |b| b["failure"]["class"] = json!("connect"));
        diverges_at(repo, &forged, "forged", at);
        return;
    }
    // Kept cut short, the reply cannot be parsed again: refused at its seq.
    let cut = forged_export(repo, at, |b| b["reply"]["cut"] = json!(true));
    import_as(repo, &cut, "cut");
    let err = refusal(repo, "cut");
    assert!(
        err.contains(&format!("seq {at}")) && err.contains("cut short"),
        "{err}"
    );
    // Recorded before the reply was kept: refused at its seq.
    let older = forged_export(repo, at, |b| {
        b.as_object_mut().unwrap().remove("reply");
    });
    import_as(repo, &older, "older");
    let err = refusal(repo, "older");
    assert!(
        err.contains(&format!("seq {at}")) && err.contains("recorded before"),
        "{err}"
    );
    // The reply edited to other text that is not the edits either: the engine's reason for
    // refusing it is its own, so the result differs at its seq.
    let forged = forged_export(repo, at, |b| b["reply"]["text"] = json!("{\"writes\": []}"));
    diverges_at(repo, &forged, "forged", at);
}
