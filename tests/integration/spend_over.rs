//! Usage reported above a reservation, through the binary: an agent CLI (a
//! stand-in `claude` on `PATH`, answering in Claude Code's JSON) that reports 15,000,000 tokens
//! for a task run under `--max-tokens 50000` is charged only what the ceiling allows, the task's
//! result says it was over its reservation and by how much, the run stops as a ceiling stop
//! (exit 4, `stopped_on_ceiling`, a `budget` entry naming the overrun), and `summary` adds up to
//! what was charged, at or under the ceiling, with the overrun flagged.

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo};

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]},{"id":"T2","agent":"docs","instruction":"write the API docs","depends_on":["T1"],"done_when":[]}]}"#;

/// Tokens the stand-in reports for a task.
const ABSURD: u64 = 15_000_000;
/// The run's ceiling.
const CEILING: u64 = 50_000;

/// Claude Code's `--output-format json` result with `text` and the given usage.
fn result(text: &str, input: u64, output: u64) -> String {
    json!({"type": "result", "subtype": "success", "is_error": false, "result": text,
           "usage": {"input_tokens": input, "output_tokens": output},
           "modelUsage": {"claude-stand-in": {"outputTokens": output}}})
    .to_string()
}

/// A directory holding a `claude` that answers the planner with PLAN, every judge with a pass
/// and the synthesis with an answer (modest usage each), and every task with an answer that
/// reports [`ABSURD`] tokens.
fn stand_in(dir: &std::path::Path) {
    for (name, text) in [
        ("plan.json", result(PLAN, 900, 120)),
        (
            "judge.json",
            result(r#"{"decision":"pass","score":0.9,"reason":"ok"}"#, 400, 30),
        ),
        ("answer.json", result("Shipped the login API.", 500, 40)),
        ("task.json", result("designed it", ABSURD - 1_000, 1_000)),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let body = format!(
        "#!/bin/sh\nfor p; do :; done\ncase \"$p\" in\n  *\"Break this request\"*) cat '{d}/plan.json' ;;\n  *\"Judge one task\"*) cat '{d}/judge.json' ;;\n  *\"Write the answer\"*) cat '{d}/answer.json' ;;\n  *) cat '{d}/task.json' ;;\nesac\n",
        d = dir.display()
    );
    crate::procs::executable(&dir.join("claude"), &body);
}

#[test]
fn usage_reported_above_a_reservation_is_clamped_flagged_and_stops_the_run() {
    for format in FORMATS {
        let repo = Repo::new(format);
        let bin = tempfile::tempdir().unwrap();
        stand_in(bin.path());
        let path = format!(
            "{}:{}",
            bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let o = repo
            .forum()
            .env("PATH", &path)
            .args(["--json", "submit", "--claude", "--max-tokens"])
            .arg(CEILING.to_string())
            .arg("ship a login API with docs")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(4), "{format}: {err}");
        let r: J = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["exit"]["name"], "stopped_on_ceiling", "{r}");
        assert_eq!(
            r["git_forum_receipt"]["status"], "stopped_on_ceiling",
            "{r}"
        );
        let log = repo.forum_json(&["log", "--run", "0"]);
        let entries = log["entries"].as_array().unwrap();
        // The task's result: charged what the ceiling allowed, flagged with what it reported.
        let t1 = entries
            .iter()
            .find(|e| e["kind"] == "result" && e["payload"]["id"] == "T1")
            .unwrap_or_else(|| panic!("{log}"));
        let u = &t1["payload"]["usage"];
        let over = &u["over_reservation"];
        assert_eq!(over["reported_tokens"], ABSURD, "{u}");
        assert_eq!(over["reported_prompt_tokens"], ABSURD - 1_000, "{u}");
        let reserved = over["reserved_tokens"].as_u64().unwrap();
        assert!(reserved > 0 && reserved < CEILING, "{u}");
        assert_eq!(over["over_by_tokens"], ABSURD - reserved, "{u}");
        let charged =
            u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap();
        assert!(charged <= CEILING && charged >= reserved, "{u}");
        // The stop names the overrun and the ceiling; the next task's call was refused.
        let budget = entries
            .iter()
            .find(|e| e["kind"] == "budget")
            .unwrap_or_else(|| panic!("{log}"));
        let b = &budget["payload"];
        assert_eq!(b["ceiling"], "max_tokens", "{b}");
        assert_eq!(b["over_reservation"]["reported_tokens"], ABSURD, "{b}");
        assert!(b["tokens"].as_u64().unwrap() <= CEILING, "{b}");
        assert!(
            b["reason"]
                .as_str()
                .unwrap()
                .contains("a call reported 15000000 tokens against the"),
            "{b}"
        );
        let t2 = entries
            .iter()
            .find(|e| e["kind"] == "result" && e["payload"]["id"] == "T2")
            .unwrap_or_else(|| panic!("{log}"));
        assert_eq!(t2["payload"]["error"], "budget", "{t2}");
        assert!(t2["payload"].get("usage").is_none(), "{t2}");
        // Every surface counts what was charged: the summary adds up to the ceiling at most.
        let s = repo.forum_json(&["summary"]);
        let spend = &s["spend"];
        assert!(
            spend["total"]["tokens"].as_u64().unwrap() <= CEILING,
            "{spend}"
        );
        assert_eq!(
            spend["claude-stand-in"]["over_reservation"]["calls"], 1,
            "{spend}"
        );
        assert!(
            r["git_forum_receipt"]["spend"].is_null()
                || r["receipt"]["spend"]["total"]["tokens"].as_u64().unwrap() <= CEILING,
            "{r}"
        );
        let runs = repo.forum_json(&["runs"]);
        assert_eq!(runs["runs"][0]["state"], "stopped_on_ceiling", "{runs}");
        repo.forum_ok(&["verify", "--deep"]);
    }
}
