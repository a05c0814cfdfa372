//! The quality floors: Forum's intent and delivery vectors matched byte for byte, its profile
//! and humanize vectors matched in everything but the wording (finding details, edit labels,
//! the not-verified note), which is our own; then `git forum check` and `git forum humanize`
//! through the real binary.

use git_forum::ledger::Value;
use git_forum::ledger::canonical;
use git_forum::quality::delivery::assess;
use git_forum::quality::humanize::{
    EDIT_KEPT, EDIT_PREAMBLE, EDIT_SIMPLIFIED, NOT_VERIFIED, humanize_text,
};
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

/// A member whose text is wording, ours rather than Forum's: a finding's `detail`, a
/// humanization's `edits` and `not_verified`.
const WORDING: [&str; 3] = ["detail", "edits", "not_verified"];

/// Forum's edit labels and ours, edit for edit.
const EDIT_LABELS: [(&str, &str); 3] = [
    ("removed model preamble", EDIT_PREAMBLE),
    ("simplified phrasing", EDIT_SIMPLIFIED),
    ("kept wording", EDIT_KEPT),
];

/// One wording member: Forum's value and ours.
struct Reworded {
    key: String,
    forum: Value,
    ours: Value,
}

/// `forum` with every [`WORDING`] member taken from `ours` instead, where the two have the
/// same shape around it (same keys in the same order, arrays of the same length); the swaps
/// are recorded in `swaps`. Where the shapes differ `forum` is kept, so comparing the result
/// with `ours` still fails.
fn reword(forum: &Value, ours: &Value, swaps: &mut Vec<Reworded>) -> Value {
    match (forum, ours) {
        (Value::Object(f), Value::Object(o))
            if f.len() == o.len() && f.iter().zip(o).all(|((a, _), (b, _))| a == b) =>
        {
            Value::Object(
                f.iter()
                    .zip(o)
                    .map(|((k, fv), (_, ov))| {
                        if WORDING.contains(&k.as_str()) {
                            swaps.push(Reworded {
                                key: k.clone(),
                                forum: fv.clone(),
                                ours: ov.clone(),
                            });
                            (k.clone(), ov.clone())
                        } else {
                            (k.clone(), reword(fv, ov, swaps))
                        }
                    })
                    .collect(),
            )
        }
        (Value::Array(f), Value::Array(o)) if f.len() == o.len() => Value::Array(
            f.iter()
                .zip(o)
                .map(|(fv, ov)| reword(fv, ov, swaps))
                .collect(),
        ),
        _ => forum.clone(),
    }
}

fn strings(v: &Value) -> Vec<&str> {
    let Value::Array(items) = v else {
        panic!("not an array: {}", v.python_dumps());
    };
    items
        .iter()
        .map(|i| i.as_str().expect("a string"))
        .collect()
}

/// What a Forum detail carries that ours must carry too: a quoted phrase, numbers, the profile
/// name.
fn carried(forum: &str) -> Vec<&str> {
    let mut out = Vec::new();
    if let (Some(a), Some(b)) = (forum.find('\''), forum.rfind('\''))
        && a < b
    {
        out.push(&forum[a..=b]);
    }
    out.extend(forum.split_whitespace().filter(|w| {
        w.parse::<f64>().is_ok() || ["operator", "engineer", "researcher", "executive"].contains(w)
    }));
    out
}

/// Each swapped wording member is ours, not Forum's: details differ but carry Forum's data,
/// edit labels are ours for the same edits, the not-verified note is ours.
fn assert_our_wording(swaps: &[Reworded], what: &str) {
    for swap in swaps {
        match swap.key.as_str() {
            "detail" => {
                let (f, o) = (swap.forum.as_str().unwrap(), swap.ours.as_str().unwrap());
                assert_ne!(o, f, "{what}: a detail copied from Forum");
                for piece in carried(f) {
                    let found = if piece.contains(' ') {
                        o.contains(piece)
                    } else {
                        o.split_whitespace()
                            .any(|w| w.trim_end_matches([';', ',', '.']) == piece)
                    };
                    assert!(found, "{what}: {o:?} lacks {piece:?} of {f:?}");
                }
            }
            "edits" => {
                let (f, o) = (strings(&swap.forum), strings(&swap.ours));
                assert!(!f.is_empty(), "{what}");
                let mapped: Vec<&str> = f
                    .iter()
                    .map(|label| {
                        EDIT_LABELS
                            .iter()
                            .find(|(forum, _)| forum == label)
                            .unwrap_or_else(|| panic!("{what}: unknown Forum label {label:?}"))
                            .1
                    })
                    .collect();
                assert_eq!(o, mapped, "{what}: edit labels");
                assert!(o.iter().all(|l| !f.contains(l)), "{what}: {o:?}");
            }
            "not_verified" => {
                let (f, o) = (strings(&swap.forum), strings(&swap.ours));
                assert_eq!(o, [NOT_VERIFIED], "{what}");
                assert_eq!(f.len(), 1, "{what}");
                assert_ne!(f[0], NOT_VERIFIED, "{what}");
            }
            other => unreachable!("{other}"),
        }
    }
}

/// The same as Forum's payload in everything but the wording, which is ours; returns how
/// many wording members were swapped.
fn assert_same_but_wording(ours: &Value, forum: &Value, what: &str) -> usize {
    let mut swaps = Vec::new();
    let want = reword(forum, ours, &mut swaps);
    assert_same(ours, &want, what);
    assert_our_wording(&swaps, what);
    swaps.len()
}

#[test]
fn our_wording_checks_reject_forum_wording() {
    let forum = canonical::parse(
        r#"{"n": 1, "findings": [{"code": "x", "detail": "word count 156 exceeds 120"}]}"#,
    )
    .unwrap();
    let ours = canonical::parse(
        r#"{"n": 1, "findings": [{"code": "x", "detail": "156 words; the profile allows 120"}]}"#,
    )
    .unwrap();
    assert_eq!(assert_same_but_wording(&ours, &forum, "ok"), 1);
    assert_eq!(carried("text starts with 'as an ai'"), ["'as an ai'"]);
    assert_eq!(
        carried("engineer profile requires evidence language"),
        ["engineer"]
    );
    for (bad, why) in [
        (
            r#"{"n": 1, "findings": [{"code": "x", "detail": "word count 156 exceeds 120"}]}"#,
            "copied",
        ),
        (
            r#"{"n": 1, "findings": [{"code": "x", "detail": "156 words; too many"}]}"#,
            "lacks 120",
        ),
        (
            r#"{"n": 2, "findings": [{"code": "x", "detail": "156 words; the limit is 120"}]}"#,
            "a number differs",
        ),
        (
            r#"{"n": 1, "findings": [{"code": "y", "detail": "156 words; the limit is 120"}]}"#,
            "a code differs",
        ),
        (r#"{"n": 1, "findings": []}"#, "a finding is missing"),
    ] {
        let ours = canonical::parse(bad).unwrap();
        let caught = std::panic::catch_unwind(|| assert_same_but_wording(&ours, &forum, why));
        assert!(caught.is_err(), "{why}");
    }
}

#[test]
fn conformance_quality_intent_delivery_checks() {
    let Some(rows) = jsonl("intent_delivery_checks.jsonl") else {
        return;
    };
    assert_eq!(rows.len(), 12);
    let mut payloads = 0;
    let mut details = 0;
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
            let ours = assess_profile(answer, profile).payload();
            let swapped = assert_same_but_wording(&ours, want, &format!("{ctx}: profile {name}"));
            let Value::Array(findings) = member(want, "findings") else {
                panic!("{ctx}: findings is not an array");
            };
            assert_eq!(swapped, findings.len(), "{ctx}: profile {name}");
            details += swapped;
            payloads += 1;
        }
    }
    assert_eq!(payloads, 12 * 6);
    assert!(details >= 11, "{details} details compared");
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
    let mut swapped = 0;
    for case in &cases {
        let text = s(case, "text");
        let profile = member(case, "profile").as_str();
        let ours = humanize_text(text, None, profile).expect("humanizes");
        let forum = member(case, "output");
        let n = assert_same_but_wording(&ours.payload(), forum, &format!("{text:?}"));
        // edits, not_verified and one detail per finding of the profile check.
        let Value::Array(findings) = member(member(forum, "profile_check"), "findings") else {
            panic!("{text:?}: findings is not an array");
        };
        assert_eq!(n, 2 + findings.len(), "{text:?}");
        swapped += n;
    }
    assert_eq!(swapped, 4 * 2 + 1);
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

/// Every vector through `git forum check --json --profile P`: the three payloads are Forum's
/// (the profile check's details in our words), printed as Python's `json.dumps(indent=2)`
/// would (ASCII escapes, Python floats).
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
        let ours = canonical::parse(&out).expect("the output parses");
        assert_same_but_wording(&ours, &want, &format!("{request:?}"));
        let want = reword(&want, &ours, &mut Vec::new());
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
        lines.contains(
            &"  model_preamble: the answer opens by announcing it comes from a language model"
        ),
        "{out}"
    );
    assert!(
        lines.contains(
            &"  banned_start: the answer opens with 'as an ai', which no profile accepts"
        ),
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
        let ours = canonical::parse(&out).expect("the output parses");
        let forum = member(case, "output");
        assert_same_but_wording(&ours, forum, &format!("{text:?}"));
        let want = reword(forum, &ours, &mut Vec::new());
        assert_eq!(out, format!("{}\n", want.python_pretty()), "{text:?}");
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
    assert_eq!(v["edits"], serde_json::json!([EDIT_SIMPLIFIED]));
    assert_eq!(v["not_verified"], serde_json::json!([NOT_VERIFIED]));
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
