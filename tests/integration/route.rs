//! Router, route frame and `git forum route`: Forum's 42 recorded decisions, then the CLI.

use std::path::PathBuf;

use git_forum::ledger::Value;
use git_forum::ledger::canonical;
use git_forum::roster::Roster;
use git_forum::route::{Router, derive_route_frame};
use serde_json::Value as J;

fn conformance_dir() -> Option<PathBuf> {
    crate::common::conformance()
}

fn forum_roster(dir: &std::path::Path) -> Roster {
    let path = dir.join("forum-default-roster.toml");
    let text = std::fs::read_to_string(&path).expect("read Forum's roster");
    Roster::from_toml_str(&text, &path.display().to_string()).expect("Forum's roster loads")
}

/// Our payload for a request, keys in our order.
fn our_value(text: &str, roster: &Roster) -> Value {
    let decision = Router::default().route(text, roster.agents());
    let frame = derive_route_frame(text, &decision, roster);
    decision.to_value(&frame)
}

/// Our JSON for a request, as serde_json (floats parse back exactly).
fn our_output(text: &str, roster: &Roster) -> J {
    our_value(text, roster).to_serde()
}

fn member<'a>(v: &'a mut Value, key: &str) -> &'a mut Value {
    match v {
        Value::Object(m) => &mut m.iter_mut().find(|(k, _)| k == key).unwrap().1,
        _ => panic!("not an object"),
    }
}

/// Replaces our prose fields with Forum's, leaving every decision field as we computed it.
fn swap_prose(ours: &mut Value, forum: &Value) {
    let ff = forum.get("frame").unwrap();
    let fc = ff.get("communication_contract").unwrap();
    let frame = member(ours, "frame");
    *member(frame, "human_contract") = ff.get("human_contract").unwrap().clone();
    let contract = member(frame, "communication_contract");
    for f in CONTRACT_PROSE {
        *member(contract, f) = fc.get(f).unwrap().clone();
    }
}

const FRAME_DECISION_FIELDS: [&str; 11] = [
    "schema",
    "agent",
    "domain",
    "intent",
    "posture",
    "delivery_profile",
    "model_tier",
    "executor",
    "proof_lane",
    "domain_lane",
    "signals",
];

const CONTRACT_DECISION_FIELDS: [&str; 10] = [
    "schema",
    "domain",
    "intent",
    "posture",
    "profile",
    "proof_lane",
    "domain_lane",
    "structure",
    "avoid",
    "required_moves",
];

/// Prose fields: ours, so they must exist and must not be Forum's sentences.
const FRAME_PROSE: [&str; 1] = ["human_contract"];
const CONTRACT_PROSE: [&str; 3] = ["lead", "evidence", "human_contract"];

#[test]
fn conformance_router_decisions() {
    let Some(dir) = conformance_dir() else { return };
    let roster = forum_roster(&dir);
    let text = std::fs::read_to_string(dir.join("router_decisions.jsonl")).unwrap();
    let mut count = 0;
    let mut rules = std::collections::BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let row: J = serde_json::from_str(line).unwrap();
        let request = row["request"].as_str().unwrap();
        let want = &row["decision"];
        let got = our_output(request, &roster);
        let ctx = format!("request {request:?}");

        // Decision fields.
        assert_eq!(got["decided"], want["decided"], "{ctx}");
        assert_eq!(got["needs_escalation"], want["needs_escalation"], "{ctx}");
        assert_eq!(
            got["confidence"].as_f64().unwrap().to_bits(),
            want["confidence"].as_f64().unwrap().to_bits(),
            "{ctx}: confidence {} vs {}",
            got["confidence"],
            want["confidence"]
        );
        // Candidates: same agents, same order, bit-identical scores.
        let gc = got["candidates"].as_array().unwrap();
        let wc = want["candidates"].as_array().unwrap();
        assert_eq!(gc.len(), wc.len(), "{ctx}");
        for (g, w) in gc.iter().zip(wc) {
            assert_eq!(g["agent"], w["agent"], "{ctx}");
            assert_eq!(
                g["score"].as_f64().unwrap().to_bits(),
                w["score"].as_f64().unwrap().to_bits(),
                "{ctx}: score of {}",
                w["agent"]
            );
        }

        // Frame: every decision field identical (key order is checked byte-for-byte below).
        let (gf, wf) = (&got["frame"], &want["frame"]);
        for f in FRAME_DECISION_FIELDS {
            assert_eq!(gf[f], wf[f], "{ctx}: frame.{f}");
        }
        for f in FRAME_PROSE {
            assert!(
                gf[f].as_str().is_some_and(|s| !s.is_empty()),
                "{ctx}: frame.{f}"
            );
            assert_ne!(gf[f], wf[f], "{ctx}: frame.{f} must be our own words");
        }
        let (gcc, wcc) = (&gf["communication_contract"], &wf["communication_contract"]);
        for f in CONTRACT_DECISION_FIELDS {
            assert_eq!(gcc[f], wcc[f], "{ctx}: communication_contract.{f}");
        }
        for f in CONTRACT_PROSE {
            assert!(!gcc[f].is_null(), "{ctx}: contract.{f}");
            assert_ne!(gcc[f], wcc[f], "{ctx}: contract.{f} must be our own words");
        }
        // The contract repeats the frame's human contract.
        assert_eq!(gcc["human_contract"], gf["human_contract"], "{ctx}");
        // Byte-level: with Forum's prose put in place of ours, our payload prints exactly
        // as Forum's (key order, Python float repr, nulls, lists).
        let mut ours = our_value(request, &roster);
        let forum_row = canonical::parse(line).unwrap();
        let forum = forum_row.get("decision").unwrap().clone();
        swap_prose(&mut ours, &forum);
        assert_eq!(ours.python_dumps(), forum.python_dumps(), "{ctx}");
        rules.insert(row["annotation_branch"].as_str().unwrap_or("").to_string());
        count += 1;
    }
    assert_eq!(count, 42, "router_decisions.jsonl holds 42 requests");
    assert_eq!(rules.len(), 4, "all four rules are exercised: {rules:?}");
}

#[test]
fn conformance_forum_roster_loads_unchanged() {
    use git_forum::roster::Tier;
    let Some(dir) = conformance_dir() else { return };
    let r = forum_roster(&dir);
    assert_eq!(r.len(), 28);
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    let tiers = |t| r.agents().iter().filter(|a| a.model_tier == t).count();
    assert_eq!(
        (
            tiers(Tier::Cheap),
            tiers(Tier::Capable),
            tiers(Tier::Frontier)
        ),
        (6, 15, 7)
    );
    assert_eq!(r.get("project-telos").unwrap().keywords.len(), 37);
    assert!(
        r.agents()
            .iter()
            .all(|a| a.max_turns == 10 && a.executor == "cli")
    );
}

#[test]
fn conformance_rules_match_annotations() {
    use git_forum::route::RouteRule;
    let Some(dir) = conformance_dir() else { return };
    let roster = forum_roster(&dir);
    let text = std::fs::read_to_string(dir.join("router_decisions.jsonl")).unwrap();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let row: J = serde_json::from_str(line).unwrap();
        let request = row["request"].as_str().unwrap();
        let d = Router::default().route(request, roster.agents());
        let want = match row["annotation_branch"].as_str().unwrap().split(':').next() {
            Some("1") => RouteRule::Confident,
            Some("2") => RouteRule::HitLeader,
            Some("3") => RouteRule::TopScoreHits,
            _ => RouteRule::Escalated,
        };
        assert_eq!(d.rule, want, "request {request:?}");
    }
}

#[test]
fn conformance_order_of_forum_roster_does_not_matter() {
    let Some(dir) = conformance_dir() else { return };
    let roster = forum_roster(&dir);
    let mut reversed: Vec<_> = roster.agents().to_vec();
    reversed.reverse();
    let reversed = Roster::new(reversed).unwrap();
    let text = std::fs::read_to_string(dir.join("router_decisions.jsonl")).unwrap();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let row: J = serde_json::from_str(line).unwrap();
        let request = row["request"].as_str().unwrap();
        assert_eq!(
            our_output(request, &roster),
            our_output(request, &reversed),
            "request {request:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// The command line.

use crate::common::Repo;

fn run(repo: &Repo, args: &[&str]) -> (i32, String, String) {
    let o = repo.forum().args(args).output().expect("run git-forum");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every one of Forum's requests through `git forum route --json` with Forum's roster: with
/// our prose swapped for Forum's, stdout is byte-for-byte Forum's `json.dumps(indent=2)`
/// output (key order, ASCII escapes, Python floats), punctuation-only requests included.
#[test]
fn cli_route_json_matches_forum_output() {
    let Some(dir) = conformance_dir() else { return };
    let roster_path = dir.join("forum-default-roster.toml");
    let roster_arg = roster_path.to_str().unwrap();
    let repo = Repo::new("sha1");
    let text = std::fs::read_to_string(dir.join("router_decisions.jsonl")).unwrap();
    let mut count = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let row = canonical::parse(line).unwrap();
        let request = row.get("request").unwrap().as_str().unwrap();
        let forum = row.get("decision").unwrap();
        let (code, out, err) = run(
            &repo,
            &["route", "--json", "--roster", roster_arg, "--", request],
        );
        assert_eq!(code, 0, "{request:?}: {err}");
        count += 1;
        assert!(out.is_ascii(), "ASCII-escaped like Forum");
        let mut ours = canonical::parse(out.trim_end()).unwrap();
        swap_prose(&mut ours, forum);
        assert_eq!(ours.python_dumps(), forum.python_dumps(), "{request:?}");
        // And the indentation is Python's indent=2.
        assert!(out.starts_with("{\n  \"decided\": "), "{out}");
    }
    assert_eq!(count, 42);
}

#[test]
fn cli_route_text_output_and_default_roster() {
    let repo = Repo::new("sha1");
    let out = repo.forum_ok(&["route", "fix", "the", "flaky", "integration", "tests"]);
    assert!(
        out.starts_with("decided: tests (confidence 0.5)\n"),
        "{out}"
    );
    assert!(out.contains("\ncandidates:\n"), "{out}");
    assert!(
        out.contains("frame: validation / validate, posture reviewer, profile engineer"),
        "{out}"
    );
    // Every lane of the default roster is listed with its score.
    let roster = Roster::default_roster();
    for name in roster.names() {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{name} "))),
            "{name}"
        );
    }
    let out = repo.forum_ok(&["route", "hello there"]);
    assert!(out.starts_with("escalate: "), "{out}");
    let json = repo.forum_json(&["route", "hello there"]);
    assert_eq!(json["needs_escalation"], true);
    assert_eq!(json["frame"]["domain"], "general");
    assert_eq!(json["candidates"].as_array().unwrap().len(), roster.len());
}

#[test]
fn cli_route_sends_a_request_with_no_words_to_no_lane() {
    let repo = Repo::new("sha1");
    let lanes = Roster::default_roster().len();
    for text in ["???", "", "   ", "?!", "... --- ...", "— … ☕"] {
        let (code, out, err) = run(&repo, &["route", "--json", "--", text]);
        assert_eq!(code, 0, "{text:?}: {err}");
        let v: J = serde_json::from_str(&out).unwrap();
        assert_eq!(v["decided"], J::Null, "{text:?}");
        assert_eq!(v["needs_escalation"], true, "{text:?}");
        assert_eq!(v["confidence"], 0.0, "{text:?}");
        assert_eq!(v["frame"]["agent"], J::Null, "{text:?}");
        assert_eq!(v["frame"]["domain"], "general", "{text:?}");
        assert_eq!(v["candidates"].as_array().unwrap().len(), lanes);
        let (code, out, _) = run(&repo, &["route", "--", text]);
        assert_eq!(code, 0);
        assert!(out.starts_with("escalate: "), "{out}");
    }
    // Writing such a request down is refused, as submit refuses it, and nothing is written.
    let before = repo.snapshot();
    for bad in ["", "   ", "???"] {
        let (code, out, err) = run(&repo, &["route", "--record", "--", bad]);
        assert_eq!(code, 2, "{bad:?}");
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: the request "), "{err}");
    }
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn cli_route_roster_errors_are_one_line() {
    let repo = Repo::new("sha1");
    let write = |name: &str, text: &str| {
        let p = repo.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let lane = "[[agent]]\nname = \"a\"\ncategory = \"c\"\ndomain = \"d\"\nkeywords = [\"x\"]\nmodel_tier = \"cheap\"\nexecutor = \"cli\"\n";
    let cases = [
        (
            "bad.toml",
            "[[agent]]\nname = \"a\nkeywords = []\n".to_string(),
            "invalid TOML at line 2, column",
        ),
        ("empty.toml", "# nothing\n".to_string(), "no agents"),
        (
            "dup.toml",
            format!("{lane}{lane}"),
            "agent #2 \"a\": duplicate name",
        ),
        (
            "tier.toml",
            lane.replace("cheap", "gigantic"),
            "agent #1 \"a\": field \"model_tier\" is \"gigantic\"",
        ),
        (
            "kw.toml",
            lane.replace("[\"x\"]", "[]"),
            "field \"keywords\" is empty",
        ),
        (
            "type.toml",
            lane.replace("\"cli\"", "true"),
            "field \"executor\" must be a string, found boolean",
        ),
        (
            "key.toml",
            format!("{lane}colour = \"red\"\n"),
            "unknown field \"colour\"",
        ),
    ];
    for (name, text, want) in cases {
        let path = write(name, &text);
        let (code, out, err) = run(&repo, &["route", "--roster", &path, "x"]);
        assert_eq!(code, 1, "{name}: {err}");
        assert!(out.is_empty(), "{name}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(
            err.starts_with(&format!("error: {path}: ")),
            "{name}: {err}"
        );
        assert!(err.contains(want), "{name}: {err}");
    }
    let (code, _, err) = run(
        &repo,
        &["route", "--roster", "/nonexistent/roster.toml", "x"],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot read roster /nonexistent/roster.toml"),
        "{err}"
    );
}

#[test]
fn cli_route_uses_the_repository_roster_and_the_flag_overrides_it() {
    let repo = Repo::new("sha1");
    std::fs::create_dir(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/roster.toml"),
        "[[agent]]\nname = \"gardener\"\ncategory = \"c\"\ndomain = \"d\"\nkeywords = [\"weeds\"]\nmodel_tier = \"frontier\"\nexecutor = \"shovel\"\n",
    )
    .unwrap();
    let json = repo.forum_json(&["route", "pull the weeds"]);
    assert_eq!(json["decided"], "gardener");
    assert_eq!(json["frame"]["model_tier"], "frontier");
    assert_eq!(json["frame"]["executor"], "shovel");
    // From a subdirectory too.
    std::fs::create_dir(repo.path().join("sub")).unwrap();
    let o = repo
        .forum()
        .current_dir(repo.path().join("sub"))
        .args(["route", "--json", "weeds"])
        .output()
        .unwrap();
    let v: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["decided"], "gardener");
    // --roster wins over .forum/roster.toml.
    let Some(dir) = conformance_dir() else { return };
    let forum = dir.join("forum-default-roster.toml");
    let json = repo.forum_json(&[
        "route",
        "--roster",
        forum.to_str().unwrap(),
        "pull the weeds",
    ]);
    assert_eq!(json["candidates"].as_array().unwrap().len(), 28);
}

#[test]
fn cli_route_record_witnesses_one_route_entry_that_is_not_a_run() {
    use git_forum::store::git::{GitStore, Options};
    let repo = Repo::new("sha256");
    let text = "rebase the branch and resolve the merge conflict";
    let (code, out, err) = run(&repo, &["route", "--record", text]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("decided: git "), "{out}");
    assert!(err.contains("recorded route as seq 0"), "{err}");
    let store = GitStore::open(
        repo.path(),
        "main",
        Options {
            fsync: false,
            ..Options::default()
        },
    )
    .unwrap();
    let entries = store.entries().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (entries[0].kind.as_str(), entries[0].actor.as_str()),
        ("route", "router")
    );
    assert_eq!(entries[0].causal_parent, None);
    assert_eq!(entries[0].ts, 1000.0);
    // Forum's `route` payload: task, decided, confidence and the frame the library derives.
    let roster = Roster::default_roster();
    let decision = Router::default().route(text, roster.agents());
    let frame = derive_route_frame(text, &decision, &roster);
    let stored = store.payload_at(0).unwrap().unwrap();
    assert_eq!(stored.get("task").and_then(Value::as_str), Some(text));
    assert_eq!(stored.get("decided").and_then(Value::as_str), Some("git"));
    assert_eq!(
        stored.get("confidence"),
        Some(&Value::Float(decision.confidence))
    );
    assert_eq!(
        git_forum::ledger::payload_hash(stored.get("frame").unwrap()),
        git_forum::ledger::payload_hash(&frame.payload())
    );

    // Not a run: runs lists none, receipt finds none, the room has no request or answer.
    assert_eq!(repo.forum_json(&["runs"])["runs"], serde_json::json!([]));
    let o = repo.forum().args(["receipt"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("no run in this ledger"), "{e}");
    let room: serde_json::Value =
        serde_json::from_str(&repo.forum_ok(&["room", "--json"])).unwrap();
    assert_eq!(room["request"], serde_json::Value::Null, "{room}");
    assert_eq!(room["answer"], serde_json::Value::Null, "{room}");

    // --parent attaches the route to an existing entry.
    let (code, _, err) = run(
        &repo,
        &[
            "route",
            "--record",
            "--parent",
            "0",
            "--json",
            "bump the version",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let entries = store.entries().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].kind, "route");
    assert_eq!(entries[1].causal_parent, Some(0));
    assert_eq!(repo.forum_json(&["runs"])["runs"], serde_json::json!([]));
    repo.fsck();
    // --parent without --record is a usage error.
    let (code, _, _) = run(&repo, &["route", "--parent", "0", "x"]);
    assert_eq!(code, 2);
}

#[test]
fn cli_route_record_outside_a_repository_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_git-forum"))
        .current_dir(dir.path())
        .env("GIT_CEILING_DIRECTORIES", dir.path().parent().unwrap())
        .env_remove("GIT_DIR")
        .args(["route", "--record", "add an api endpoint"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    // Without --record no repository is needed.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_git-forum"))
        .current_dir(dir.path())
        .env("GIT_CEILING_DIRECTORIES", dir.path().parent().unwrap())
        .env_remove("GIT_DIR")
        .args(["route", "add an api endpoint"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
