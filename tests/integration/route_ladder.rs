//! The routing ladder of the one-task path, through the binary on every repository format:
//! `git forum fix` on a request the keyword router cannot place asks the orchestrator seat
//! for a lane, witnessed as `route` then `classification` under it, and the task runs on that
//! lane; an answer naming no lane is witnessed as such and stops the run, with no lane
//! guessed (`resume` asks again); a request the router places asks nothing and writes neither entry; a ceiling too
//! small for the classifier's call stops the run on it, and `resume` asks it under the same
//! `route`; and the daemon's and MCP's one-task
//! submit climb the same ladder.

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind, one_line_error};
use crate::solo::calls;
use crate::work_run::{clean, entries, kinds, payloads, setup};

const CHECK: &str = "python3 -m unittest -q";

/// A request the keyword router cannot place on the default roster (it escalates).
pub(crate) const UNPLACED: &str = "fix the failing test";

/// A request the keyword router places on `tests`.
const PLACED: &str = "fix the failing unit test coverage";

/// The worker's fix of `add`, with its report.
const FIX_ADD: &str =
    "    sed -i 's/return a - b/return a + b/' calc.py; echo 'Fixed add in calc.py'";

/// A scripted model whose classifier answers `classifier` (a JSON text, written to a file so
/// no quoting is needed), whose pre-ship gate merges and whose worker fixes `add`; it appends
/// `classifier` or `gate` to `calls.log` when asked as one.
pub(crate) fn model(repo: &Repo, classifier: &str) -> String {
    let answer = repo.path().join("classifier.json");
    std::fs::write(&answer, classifier).unwrap();
    let log = repo.path().join("calls.log");
    let (answer, log) = (answer.display(), log.display());
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Choose the one lane\"*) echo classifier >> '{log}'; cat '{answer}' ;;\n  *\"Decide whether to ship\"*) echo gate >> '{log}'; echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *)\n{FIX_ADD}\n  ;;\nesac\n"
    );
    crate::procs::executable(&repo.path().join("model.sh"), &body)
}

/// `git forum fix` of `request` with the check and the scripted model, and `extra` flags.
pub(crate) fn fix(repo: &Repo, m: &str, request: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["fix", "--check", CHECK, "--cmd", m];
    args.extend(extra);
    args.push(request);
    repo.forum().args(&args).output().unwrap()
}

/// The entry of `kind` (exactly one), as `log` lists it.
fn only(repo: &Repo, kind: &str) -> J {
    let all: Vec<J> = entries(repo)
        .into_iter()
        .filter(|e| e["kind"] == kind)
        .collect();
    assert_eq!(all.len(), 1, "{kind}: {all:?}");
    all[0].clone()
}

/// The payload of the entry at `seq`.
fn body(repo: &Repo, seq: &J) -> J {
    let seq = seq.as_u64().unwrap().to_string();
    repo.forum_json(&["show", &seq, "--payload"])["payload"].clone()
}

/// Forum's `route` entry of an escalated request: actor `router`, under the request, with
/// `{task, decided: null, confidence, frame}`; returns its seq.
fn escalated_route(repo: &Repo, request: &str) -> J {
    let req = only(repo, "request");
    let route = only(repo, "route");
    assert_eq!(route["actor"], "router");
    assert_eq!(route["causal_parent"], req["seq"]);
    let b = body(repo, &route["seq"]);
    let keys: Vec<&String> = b.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["confidence", "decided", "frame", "task"], "{b}");
    assert_eq!(b["task"], request);
    assert_eq!(b["decided"], J::Null);
    assert_eq!(b["frame"]["schema"], "forum.route-frame/v1");
    route["seq"].clone()
}

/// The `classification` entry: actor `classifier`, its causal parent the `route` entry; its
/// body with `usage` (what the seat counted) taken out.
fn classification(repo: &Repo, route_seq: &J) -> J {
    let c = only(repo, "classification");
    assert_eq!(c["actor"], "classifier");
    assert_eq!(&c["causal_parent"], route_seq);
    let mut b = body(repo, &c["seq"]);
    b.as_object_mut().unwrap().remove("usage");
    b
}

#[test]
fn fix_on_a_request_the_router_cannot_place_runs_on_the_lane_the_classifier_names() {
    on_each_kind(|repo| {
        setup(repo);
        let m = model(
            repo,
            r#"{"agent": "tests", "confidence": 0.8, "reason": "the request is about a failing test"}"#,
        );
        let o = fix(repo, &m, UNPLACED, &["--json"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(calls(repo), ["classifier", "gate"]);
        let route = escalated_route(repo, UNPLACED);
        assert_eq!(
            classification(repo, &route),
            json!({"task": UNPLACED, "agent": "tests", "confidence": 0.8, "reason": "the request is about a failing test"})
        );
        // The task runs on that lane, and its change is committed as that lane's.
        let plan = &payloads(repo, "plan")[0].1;
        assert_eq!(plan["tasks"][0]["agent"], "tests");
        assert_eq!(payloads(repo, "task")[0].1["agent"], "tests");
        let k = kinds(repo);
        let at = |kind: &str| k.iter().position(|x| x == kind).unwrap();
        assert!(at("route") < at("classification") && at("classification") < at("plan"));
        let author = repo.git_ok(&["log", "-1", "--format=%an", "forum/run-0"]);
        assert!(author.starts_with("tests"), "{author}");
        clean(repo);
    });
}

#[test]
fn an_answer_naming_no_lane_is_witnessed_as_such_and_stops_the_run() {
    on_each_kind(|repo| {
        setup(repo);
        // A near name (the lane is `tests`) is not taken for it.
        let answer = r#"{"agent": "Tests", "confidence": 0.9, "reason": "close enough"}"#;
        let m = model(repo, answer);
        let o = fix(repo, &m, UNPLACED, &[]);
        let err = one_line_error(&o, "the classifier named none");
        assert!(err.contains("\"Tests\""), "{err}");
        assert!(err.contains("git forum route"), "{err}");
        assert_eq!(calls(repo), ["classifier"]);
        let route = escalated_route(repo, UNPLACED);
        assert_eq!(
            classification(repo, &route),
            json!({
                "task": UNPLACED,
                "agent": null,
                "confidence": 0.0,
                "reason": "no lane was chosen: the answer names \"Tests\", which is not a lane of the roster",
                "answer": answer
            })
        );
        // The stop is witnessed under the classification; no lane was given the task.
        let stop = only(repo, "run_stopped");
        assert_eq!(stop["causal_parent"], only(repo, "classification")["seq"]);
        let s = body(repo, &stop["seq"]);
        assert_eq!(s["stage"], "route");
        assert!(s["reason"].as_str().unwrap().contains("Tests"), "{s}");
        let k = kinds(repo);
        for absent in ["plan", "task", "result", "change"] {
            assert!(!k.contains(&absent.to_string()), "{absent}: {k:?}");
        }
        assert_eq!(
            calc(repo),
            "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n"
        );
        // `resume` asks again under the same route; a lane named this time runs the task.
        let good = r#"{"agent": "tests", "confidence": 0.6, "reason": "a failing test"}"#;
        std::fs::write(repo.path().join("classifier.json"), good).unwrap();
        let o = repo.forum().args(["resume", "--json"]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(calls(repo), ["classifier", "classifier", "gate"]);
        assert_eq!(only(repo, "route")["seq"], route);
        let agents: Vec<J> = entries(repo)
            .iter()
            .filter(|e| e["kind"] == "classification")
            .map(|e| body(repo, &e["seq"])["agent"].clone())
            .collect();
        assert_eq!(agents, [J::Null, json!("tests")]);
        assert_eq!(payloads(repo, "task")[0].1["agent"], "tests");
        clean(repo);
    });
}

/// The user's `calc.py`.
fn calc(repo: &Repo) -> String {
    std::fs::read_to_string(repo.path().join("calc.py")).unwrap()
}

#[test]
fn a_malformed_answer_is_witnessed_with_what_came_back() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let m = model(&repo, "I would give it to the Python people.");
    let o = fix(&repo, &m, UNPLACED, &[]);
    one_line_error(&o, "the answer holds no JSON object");
    let route = escalated_route(&repo, UNPLACED);
    let c = classification(&repo, &route);
    assert_eq!(c["agent"], J::Null);
    assert_eq!(c["answer"], "I would give it to the Python people.");
    assert_eq!(
        c["reason"],
        "no lane was chosen: the answer holds no JSON object"
    );
    assert_eq!(
        body(&repo, &only(&repo, "run_stopped")["seq"])["stage"],
        "route"
    );
    assert!(!kinds(&repo).contains(&"plan".to_string()));
    clean(&repo);
}

#[test]
fn a_request_the_router_places_asks_no_classifier_and_writes_neither_entry() {
    on_each_kind(|repo| {
        setup(repo);
        let m = model(repo, "never read");
        let o = fix(repo, &m, PLACED, &["--json"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(calls(repo), ["gate"]);
        let k = kinds(repo);
        assert!(!k.contains(&"route".to_string()), "{k:?}");
        assert!(!k.contains(&"classification".to_string()), "{k:?}");
        // The run's entries are the ones a placed solo run always wrote.
        assert_eq!(&k[..3], ["request", "route_frame", "plan"], "{k:?}");
        assert_eq!(payloads(repo, "plan")[0].1["tasks"][0]["agent"], "tests");
        clean(repo);
    });
}

#[test]
fn a_ceiling_too_small_for_the_classifier_stops_the_run_on_it() {
    on_each_kind(|repo| {
        setup(repo);
        let m = model(
            repo,
            r#"{"agent": "tests", "confidence": 0.8, "reason": "never asked"}"#,
        );
        let o = fix(repo, &m, UNPLACED, &["--max-tokens", "50"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(4), "{err}");
        assert!(
            err.starts_with("run 0 stopped on its max_tokens ceiling"),
            "{err}"
        );
        // The call never started: nothing was asked, nothing classified, no task ran.
        assert!(calls(repo).is_empty());
        escalated_route(repo, UNPLACED);
        let k = kinds(repo);
        for absent in ["classification", "plan", "task"] {
            assert!(!k.contains(&absent.to_string()), "{absent}: {k:?}");
        }
        let b = body(repo, &only(repo, "budget")["seq"]);
        assert_eq!(b["ceiling"], "max_tokens", "{b}");
        assert_eq!(b["stage"], "classifier", "{b}");
        assert_eq!(b["tokens"], 0, "{b}");
        assert!(
            b["detail"]
                .as_str()
                .unwrap()
                .ends_with("50 are left of --max-tokens"),
            "{b}"
        );
        // Resumed with a fresh allowance, the run asks the classifier under the same route
        // and goes on to run the task on the lane it names.
        let o = repo
            .forum()
            .args(["resume", "--json", "--max-tokens", "100000"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(calls(repo), ["classifier", "gate"]);
        let route = escalated_route(repo, UNPLACED);
        assert_eq!(classification(repo, &route)["agent"], "tests");
        assert_eq!(payloads(repo, "task")[0].1["agent"], "tests");
        clean(repo);
    });
}

#[test]
fn the_daemons_and_mcps_one_task_submit_climb_the_same_ladder() {
    let repo = Repo::new("sha1");
    setup(&repo);
    let m = model(
        &repo,
        r#"{"agent": "tests", "confidence": 0.7, "reason": "Python"}"#,
    );
    let args = json!({"request": UNPLACED, "work": true, "solo": true, "checks": [CHECK]});
    let served = repo.serve(&["--cmd", &m], std::process::Stdio::null());
    let (code, reply) = crate::common::http_json(&served.addr, "POST", "/submit", &args);
    assert_eq!(code, 200, "{reply}");
    drop(served);
    let reply = repo.mcp_call(&["--cmd", &m], "submit", args);
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    // Each run: its route under its request, its classification under its route, its task on
    // the lane named.
    let all = entries(&repo);
    let of = |kind: &str| -> Vec<J> { all.iter().filter(|e| e["kind"] == kind).cloned().collect() };
    let (requests, routes, classes) = (of("request"), of("route"), of("classification"));
    assert_eq!((requests.len(), routes.len(), classes.len()), (2, 2, 2));
    for i in 0..2 {
        assert_eq!(routes[i]["causal_parent"], requests[i]["seq"]);
        assert_eq!(classes[i]["causal_parent"], routes[i]["seq"]);
        assert_eq!(body(&repo, &classes[i]["seq"])["agent"], "tests");
    }
    assert!(
        payloads(&repo, "task")
            .iter()
            .all(|(_, t)| t["agent"] == "tests")
    );
    assert_eq!(calls(&repo), ["classifier", "gate", "classifier", "gate"]);
    repo.forum_ok(&["verify", "--deep"]);
}

/// On Forum's router vectors, the ladder asks the classifier for exactly the requests Forum's
/// router leaves undecided, and takes the router's lane for every other.
#[test]
fn forums_undecided_router_vectors_are_the_requests_that_go_to_the_classifier() {
    use git_forum::roster::Roster;
    use git_forum::route::{Rung, first_rung, route_request};
    let Some(dir) = crate::common::conformance() else {
        return;
    };
    let path = dir.join("forum-default-roster.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let roster = Roster::from_toml_str(&text, &path.display().to_string()).unwrap();
    let vectors = std::fs::read_to_string(dir.join("router_decisions.jsonl")).unwrap();
    let mut asked = 0;
    for line in vectors.lines().filter(|l| !l.trim().is_empty()) {
        let row: J = serde_json::from_str(line).unwrap();
        let request = row["request"].as_str().unwrap();
        let (decision, _) = route_request(request, &roster);
        let want = match row["decision"]["decided"].as_str() {
            Some(lane) => Rung::Decided(lane.to_string()),
            None => {
                asked += 1;
                Rung::Classify
            }
        };
        assert_eq!(first_rung(&decision), want, "{request:?}");
    }
    assert_eq!(asked, 15, "Forum's vectors leave 15 requests undecided");
}
