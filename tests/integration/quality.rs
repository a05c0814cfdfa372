//! The quality floors: Forum's intent, delivery, profile and humanize vectors matched byte for
//! byte, then `git forum check` and `git forum humanize` through the real binary.

use git_forum::ledger::Value;
use git_forum::ledger::canonical;
use git_forum::quality::delivery::assess;
use git_forum::quality::humanize::humanize_text;
use git_forum::quality::intent::{
    DEFAULT_THRESHOLD, coverage, intent_check_payload, salient_terms,
};
use git_forum::quality::profile::{DeliveryProfile, assess_profile};

use crate::common::{Repo, conformance};

/// The rows of a JSONL vector file, read with our own parser (floats stay floats).
fn jsonl(name: &str) -> Option<Vec<Value>> {
    let dir = conformance()?;
    let text = std::fs::read_to_string(dir.join(name)).expect("read vector file");
    Some(
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| canonical::parse(l).expect("vector row parses"))
            .collect(),
    )
}

fn json(name: &str) -> Option<Value> {
    let dir = conformance()?;
    let text = std::fs::read_to_string(dir.join(name)).expect("read vector file");
    Some(canonical::parse(&text).expect("vector file parses"))
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("missing string {k}"))
}

fn member<'a>(v: &'a Value, k: &str) -> &'a Value {
    v.get(k).unwrap_or_else(|| panic!("missing member {k}"))
}

/// Same value, same key order, same float spelling.
fn assert_same(ours: &Value, forum: &Value, what: &str) {
    assert_eq!(ours.python_dumps(), forum.python_dumps(), "{what}");
    assert_eq!(ours.canonical(), forum.canonical(), "{what}");
}

#[test]
fn conformance_quality_intent_delivery_checks() {
    let Some(rows) = jsonl("intent_delivery_checks.jsonl") else {
        return;
    };
    assert_eq!(rows.len(), 12);
    let mut payloads = 0;
    for row in &rows {
        let request = s(row, "request");
        let answer = s(row, "answer");
        let ctx = format!("request {request:?} / answer {answer:?}");

        let terms: Vec<Value> = salient_terms(request).into_iter().map(Value::Str).collect();
        assert_same(
            &Value::Array(terms),
            member(row, "salient_request_terms"),
            &ctx,
        );

        let (score, _) = coverage(request, answer);
        let Value::Float(want) = member(row, "coverage_unrounded") else {
            panic!("{ctx}: coverage_unrounded is not a float");
        };
        assert_eq!(score.to_bits(), want.to_bits(), "{ctx}: unrounded coverage");

        assert_same(
            &intent_check_payload(request, answer, DEFAULT_THRESHOLD),
            member(row, "intent_check"),
            &format!("{ctx}: intent_check"),
        );
        assert_same(
            &assess(answer).payload(),
            member(row, "delivery_check"),
            &format!("{ctx}: delivery_check"),
        );
        payloads += 2;

        let Value::Object(profiles) = member(row, "delivery_profiles") else {
            panic!("{ctx}: delivery_profiles is not an object");
        };
        assert_eq!(profiles.len(), 4);
        for (name, want) in profiles {
            let profile = DeliveryProfile::parse(name).expect("a known profile");
            assert_same(
                &assess_profile(answer, profile).payload(),
                want,
                &format!("{ctx}: profile {name}"),
            );
            payloads += 1;
        }
    }
    assert_eq!(payloads, 12 * 6);
}

#[test]
fn conformance_quality_every_finding_code_is_exercised() {
    let Some(rows) = jsonl("intent_delivery_checks.jsonl") else {
        return;
    };
    let mut codes = std::collections::BTreeSet::new();
    for row in &rows {
        let Value::Object(profiles) = member(row, "delivery_profiles") else {
            panic!()
        };
        for (_, p) in profiles {
            let Value::Array(findings) = member(p, "findings") else {
                panic!()
            };
            for f in findings {
                codes.insert(s(f, "code").to_string());
            }
        }
    }
    // Every code but model_disclaimer (not in Forum's vectors; covered by unit tests).
    assert_eq!(codes.len(), 11, "{codes:?}");
}

#[test]
fn conformance_quality_humanize_vectors() {
    let Some(Value::Array(cases)) = json("humanize_vectors.json") else {
        return;
    };
    assert_eq!(cases.len(), 4);
    for case in &cases {
        let text = s(case, "text");
        let profile = member(case, "profile").as_str();
        let ours = humanize_text(text, None, profile).expect("humanizes");
        assert_same(
            &ours.payload(),
            member(case, "output"),
            &format!("{text:?}"),
        );
    }
}

// The command line.

fn run(repo: &Repo, args: &[&str]) -> (i32, String, String) {
    let o = repo.forum().args(args).output().expect("run git-forum");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn run_stdin(repo: &Repo, args: &[&str], input: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = repo
        .forum()
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn git-forum");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// An error: nothing on stdout, one `error: …` line on stderr, exit 2.
fn assert_usage_error(out: (i32, String, String), needle: &str) {
    let (code, stdout, stderr) = out;
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(needle), "{stderr}");
}

/// Every vector through `git forum check --json --profile P`: the three payloads are Forum's,
/// printed as Python's `json.dumps(indent=2)` would (ASCII escapes, Python floats).
#[test]
fn cli_quality_check_json_matches_forum_payloads() {
    let Some(rows) = jsonl("intent_delivery_checks.jsonl") else {
        return;
    };
    let repo = Repo::new("sha1");
    let profiles = ["operator", "engineer", "researcher", "executive"];
    for (n, row) in rows.iter().enumerate() {
        let request = s(row, "request");
        let answer = s(row, "answer");
        let profile = profiles[n % 4];
        let (code, out, err) = run(
            &repo,
            &[
                "check",
                "--json",
                "--request",
                request,
                "--answer",
                answer,
                "--profile",
                profile,
            ],
        );
        assert_eq!(code, 0, "{request:?}: {err}");
        assert!(out.is_ascii());
        let want = Value::object([
            (
                "intent_check".to_string(),
                member(row, "intent_check").clone(),
            ),
            (
                "delivery_check".to_string(),
                member(row, "delivery_check").clone(),
            ),
            (
                "delivery_profile_check".to_string(),
                member(member(row, "delivery_profiles"), profile).clone(),
            ),
        ]);
        assert_eq!(out, format!("{}\n", want.python_pretty()), "{request:?}");
    }
}

#[test]
fn cli_quality_check_text_summary_and_fail_on_flag() {
    let repo = Repo::new("sha1");
    let args = [
        "check",
        "--request",
        "explain how the ledger verifies its hash chain",
        "--answer",
        "As an AI language model, I think it is basically just really simple. It seems the chain is clearly fine.",
        "--profile",
        "Engineer",
    ];
    let (code, out, err) = run(&repo, &args);
    assert_eq!(code, 0, "flags are findings, not errors: {err}");
    assert!(err.is_empty(), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "intent check: flagged, coverage 0.1667 (flagged below 0.5); missing: explain, hash, how, ledger, verifies"
    );
    assert!(
        lines[1].starts_with("delivery check: flagged, 20 words in 2 sentences"),
        "{out}"
    );
    assert_eq!(lines[2], "delivery profile engineer (--profile): flagged");
    assert!(
        lines.contains(&"  model_preamble: text starts with a model preamble"),
        "{out}"
    );
    assert!(
        lines.contains(&"  banned_start: text starts with 'as an ai'"),
        "{out}"
    );

    let mut failing = args.to_vec();
    failing.push("--fail-on-flag");
    let (code, out2, _) = run(&repo, &failing);
    assert_eq!(code, 1);
    assert_eq!(out2, out, "the report is printed before the exit");

    // A clean answer passes the gate.
    let (code, out, err) = run(
        &repo,
        &[
            "check",
            "--fail-on-flag",
            "--request",
            "ship a login API",
            "--answer",
            "Shipped the login API.",
            "--profile",
            "operator",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("intent check: ok, coverage 0.6667"), "{out}");
    assert!(
        out.contains("delivery profile operator (--profile): ok"),
        "{out}"
    );
}

/// Without --profile, the profile is the one the request's route frame picks (as in a run).
#[test]
fn cli_quality_check_profile_defaults_to_the_route_frame() {
    let repo = Repo::new("sha1");
    let request = "fix the flaky integration tests";
    let (_, frame_out, _) = run(&repo, &["route", "--json", "--", request]);
    let frame: serde_json::Value = serde_json::from_str(&frame_out).unwrap();
    let routed = frame["frame"]["delivery_profile"]
        .as_str()
        .unwrap()
        .to_string();
    let check: serde_json::Value = repo.forum_json(&[
        "check",
        "--request",
        request,
        "--answer",
        "Fixed the flaky tests.",
    ]);
    assert_eq!(check["delivery_profile_check"]["profile"], routed.as_str());
    let out = repo.forum_ok(&["check", "--request", request, "--answer", "Fixed."]);
    assert!(
        out.contains(&format!("delivery profile {routed} (from the route frame)")),
        "{out}"
    );
}

#[test]
fn cli_quality_check_reads_files_and_stdin() {
    let repo = Repo::new("sha1");
    let answer = repo.path().join("answer.txt");
    std::fs::write(
        &answer,
        "Built the auth endpoint. Verified by the test output.\n",
    )
    .unwrap();
    let a = repo.forum_json(&[
        "check",
        "--request",
        "build the auth endpoint",
        "--answer-file",
        answer.to_str().unwrap(),
        "--profile",
        "engineer",
    ]);
    let (code, out, err) = run_stdin(
        &repo,
        &[
            "check",
            "--json",
            "--request-file",
            "-",
            "--answer-file",
            answer.to_str().unwrap(),
            "--profile",
            "engineer",
        ],
        "build the auth endpoint",
    );
    assert_eq!(code, 0, "{err}");
    let b: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(a, b);
    assert_eq!(a["intent_check"]["missing"], serde_json::json!(["build"]));
    assert_eq!(a["delivery_check"]["sentences"], 2);
    assert_eq!(a["delivery_profile_check"]["flagged"], false);

    let (code, out, err) = run_stdin(
        &repo,
        &[
            "check",
            "--json",
            "--request",
            "x",
            "--answer-file",
            "-",
            "--profile",
            "operator",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["delivery_profile_check"]["findings"][0]["code"],
        "empty_text"
    );
}

#[test]
fn cli_quality_check_bad_input() {
    let repo = Repo::new("sha1");
    assert_usage_error(
        run(&repo, &["check", "--request", "build it"]),
        "no answer: give it with --answer TEXT or --answer-file FILE",
    );
    assert_usage_error(run(&repo, &["check", "--answer", "done"]), "no request");
    assert_usage_error(
        run(
            &repo,
            &[
                "check",
                "--request",
                "r",
                "--answer",
                "a",
                "--answer-file",
                "f",
            ],
        ),
        "not both",
    );
    assert_usage_error(
        run(
            &repo,
            &[
                "check",
                "--request",
                "r",
                "--answer",
                "a",
                "--profile",
                "boss",
            ],
        ),
        "unknown delivery profile 'boss'; valid profiles: operator, engineer, researcher, executive",
    );
    assert_usage_error(
        run(
            &repo,
            &["check", "--request-file", "-", "--answer-file", "-"],
        ),
        "standard input",
    );
    assert_usage_error(
        run(
            &repo,
            &[
                "check",
                "--request",
                "r",
                "--answer",
                "a",
                "--intent-threshold",
                "1.5",
            ],
        ),
        "--intent-threshold",
    );
    let (code, out, err) = run(
        &repo,
        &[
            "check",
            "--request",
            "r",
            "--answer-file",
            "no-such-file.txt",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no-such-file.txt"), "{err}");
}

#[test]
fn cli_quality_humanize_text_and_json() {
    let repo = Repo::new("sha1");
    let out = repo.forum_ok(&[
        "humanize",
        "As an AI language model, it is important to note that we utilize the methodology in order to provide assistance prior to launch",
    ]);
    assert_eq!(out, "We use the method to help before launch.\n");
    // Several arguments are joined with spaces.
    let out = repo.forum_ok(&["humanize", "already", "fine"]);
    assert_eq!(out, "Already fine.\n");

    let Some(Value::Array(cases)) = json("humanize_vectors.json") else {
        return;
    };
    for case in &cases {
        let text = s(case, "text");
        let mut args = vec!["humanize", "--json"];
        if let Some(p) = member(case, "profile").as_str() {
            args.extend(["--profile", p]);
        }
        args.extend(["--", text]);
        let (code, out, err) = run(&repo, &args);
        assert_eq!(code, 0, "{text:?}: {err}");
        assert_eq!(
            out,
            format!("{}\n", member(case, "output").python_pretty()),
            "{text:?}"
        );
    }
}

#[test]
fn cli_quality_humanize_reads_a_file_and_records_the_audience() {
    let repo = Repo::new("sha1");
    let (code, out, err) = run_stdin(
        &repo,
        &[
            "humanize",
            "--file",
            "-",
            "--json",
            "--audience",
            "board",
            "--profile",
            "executive",
        ],
        "  prior to   launch\n",
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["output"], "Before launch.");
    assert_eq!(v["audience"], "board");
    assert_eq!(v["profile"], "executive");
    assert_eq!(v["input_chars"], 20);
    assert_eq!(v["edits"], serde_json::json!(["simplified phrasing"]));
}

#[test]
fn cli_quality_humanize_bad_input() {
    let repo = Repo::new("sha1");
    assert_usage_error(run(&repo, &["humanize"]), "nothing to humanize");
    assert_usage_error(
        run(&repo, &["humanize", "--", "  \n "]),
        "nothing to humanize",
    );
    assert_usage_error(
        run_stdin(&repo, &["humanize", "--file", "-"], "\n\n"),
        "nothing to humanize",
    );
    assert_usage_error(
        run(&repo, &["humanize", "fine", "--profile", "boss"]),
        "unknown delivery profile 'boss'",
    );
    assert_usage_error(
        run(&repo, &["humanize", "fine", "--file", "x.txt"]),
        "not both",
    );
}
