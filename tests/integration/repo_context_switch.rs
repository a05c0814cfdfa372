//! The repository-as-context switch and its preflight through the binary:
//! `[context] repo` in .forum/runtime.toml sets the default, `--repo-context` and
//! `--no-repo-context` override it both ways, HTTP `/submit` and MCP `forum.submit` take the
//! same `repo_context` boolean; and `context preflight` counts the repository's map exactly as
//! the run then witnesses it in its `context` entry.

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo, http_json};
use crate::repo_context::{entries, setup};

const REQUEST: &str = "make divide safe";

/// How many `context` entries the ledger holds now.
fn contexts(repo: &Repo) -> usize {
    let ledger = repo.git(&["rev-parse", "--verify", "-q", "refs/forum/ledgers/main"]);
    if !ledger.status.success() {
        return 0;
    }
    entries(repo).0.iter().filter(|k| *k == "context").count()
}

fn write_runtime(repo: &Repo, text: &str) {
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(repo.path().join(".forum/runtime.toml"), text).unwrap();
}

/// Submits with `flags` and says whether the run took the repository in (its request and
/// task `context` entries, or none).
fn submit_took_repo(repo: &Repo, model: &str, flags: &[&str]) -> bool {
    let before = contexts(repo);
    let mut args = vec!["submit", "--cmd", model, "--quiet"];
    args.extend_from_slice(flags);
    args.push(REQUEST);
    repo.forum_ok(&args);
    match contexts(repo) - before {
        0 => false,
        2 => true,
        n => panic!("{n} context entries for one run ({flags:?})"),
    }
}

#[test]
fn the_runtime_config_sets_the_default_and_the_flags_override_it_on_every_format() {
    for kind in FORMATS {
        let (repo, _logs, model) = setup(kind);
        assert!(submit_took_repo(&repo, &model, &[]), "{kind}: default");
        write_runtime(&repo, "[context]\nrepo = false\n");
        assert!(
            !submit_took_repo(&repo, &model, &[]),
            "{kind}: repo = false"
        );
        assert!(
            submit_took_repo(&repo, &model, &["--repo-context"]),
            "{kind}: --repo-context over repo = false"
        );
        // The last of the two flags wins.
        assert!(
            !submit_took_repo(&repo, &model, &["--repo-context", "--no-repo-context"]),
            "{kind}: --no-repo-context given last"
        );
        write_runtime(&repo, "[context]\nrepo = true\n");
        assert!(submit_took_repo(&repo, &model, &[]), "{kind}: repo = true");
        assert!(
            !submit_took_repo(&repo, &model, &["--no-repo-context"]),
            "{kind}: --no-repo-context over repo = true"
        );
        repo.forum_ok(&["verify", "--deep"]);
    }
}

#[test]
fn a_bad_context_table_is_one_line_and_runs_nothing() {
    let (repo, _logs, model) = setup("sha1");
    for (text, needle) in [
        ("[context]\nrepo = \"yes\"\n", "[context]"),
        ("[context]\nrepos = true\n", "repos"),
    ] {
        write_runtime(&repo, text);
        let o = repo
            .forum()
            .args(["submit", "--cmd", &model, "--quiet", REQUEST])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{text}: {err}");
        assert_eq!(err.lines().count(), 1, "{text}: {err}");
        assert!(
            err.contains("runtime.toml") && err.contains(needle),
            "{text}: {err}"
        );
        let o = repo
            .forum()
            .args(["context", "preflight", REQUEST])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{text}");
    }
    assert!(
        repo.git(&["rev-parse", "--verify", "-q", "refs/forum/ledgers/main"])
            .stdout
            .is_empty(),
        "a refused submit wrote a ledger"
    );
}

#[test]
fn http_submit_and_mcp_submit_take_the_same_boolean() {
    for kind in FORMATS {
        let (repo, _logs, model) = setup(kind);
        write_runtime(&repo, "[context]\nrepo = false\n");
        let served = repo.serve(&["--cmd", &model], std::process::Stdio::null());
        let mut took = Vec::new();
        for body in [
            json!({"request": REQUEST}),
            json!({"request": REQUEST, "repo_context": true}),
            json!({"request": REQUEST, "repo_context": false}),
            json!({"request": REQUEST, "no_repo_context": false}),
        ] {
            let before = contexts(&repo);
            let (code, r) = http_json(&served.addr, "POST", "/submit", &body);
            assert_eq!(code, 200, "{kind}: {body}: {r}");
            took.push(contexts(&repo) - before);
        }
        let (code, r) = http_json(
            &served.addr,
            "POST",
            "/submit",
            &json!({"request": REQUEST, "repo_context": true, "no_repo_context": true}),
        );
        assert_eq!(code, 400, "{kind}: {r}");
        let (code, r) = http_json(
            &served.addr,
            "POST",
            "/submit",
            &json!({"request": REQUEST, "repo_context": "yes"}),
        );
        assert_eq!(code, 400, "{kind}: {r}");
        drop(served);
        assert_eq!(took, [0, 2, 0, 2], "{kind}");

        let call = |id: u64, args: J| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "forum.submit", "arguments": args}})
            .to_string()
        };
        for (args, want) in [
            (json!({"request": REQUEST, "repo_context": true}), 2),
            (json!({"request": REQUEST}), 0),
        ] {
            let before = contexts(&repo);
            let (_, out) = repo.mcp_batch(&["--cmd", &model], &[call(1, args.clone())]);
            let reply: J = out
                .lines()
                .filter_map(|l| serde_json::from_str::<J>(l).ok())
                .find(|m| m["id"] == 1)
                .unwrap_or_else(|| panic!("{kind}: no reply: {out}"));
            assert_eq!(reply["result"]["isError"], false, "{kind}: {reply}");
            assert_eq!(contexts(&repo) - before, want, "{kind}: {args}");
        }
        repo.forum_ok(&["verify", "--deep"]);
    }
}

/// The `context` entry a run witnessed for the request (the first after its request).
fn request_context_of_last_run(repo: &Repo) -> String {
    let (_, payloads) = entries(repo);
    payloads
        .iter()
        .rev()
        .filter(|p| p.get("schema").is_none() && p.get("task").is_none())
        .find_map(|p| p["context"].as_str().map(str::to_string))
        .expect("a request context entry")
}

fn tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

#[test]
fn preflight_counts_the_repository_as_the_run_then_witnesses_it() {
    for kind in FORMATS {
        let (repo, _logs, model) = setup(kind);
        let ctx = repo.path().join("ctx.sh");
        std::fs::write(
            &ctx,
            "#!/bin/sh\n[ \"$1\" = request ] && printf 'from the command'\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ctx, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ctx = ctx.to_str().unwrap();
        for (flags, source) in [
            (vec![], "repo"),
            (vec!["--request-context-token-budget", "5"], "repo"),
            (vec!["--context-cmd", ctx], "command+repo"),
            (
                vec!["--context-cmd", ctx, "--context-token-budget", "30"],
                "command+repo",
            ),
        ] {
            let mut pre = vec!["context", "preflight"];
            pre.extend_from_slice(&flags);
            pre.push(REQUEST);
            let p = repo.forum_json(&pre);
            let c = &p["context"];
            assert_eq!(c["source"], source, "{kind} {flags:?}: {p}");
            let mut sub = vec!["submit", "--cmd", &model, "--quiet"];
            sub.extend_from_slice(&flags);
            sub.push(REQUEST);
            repo.forum_ok(&sub);
            let witnessed = request_context_of_last_run(&repo);
            assert!(
                witnessed.contains("Repository map (3 tr"),
                "{kind}: {witnessed}"
            );
            assert_eq!(
                c["admitted_tokens"].as_u64(),
                Some(tokens(&witnessed)),
                "{kind} {flags:?}: preflight {p} against the run's context {witnessed:?}"
            );
            if flags.is_empty() {
                // Alone, the repository's part is the whole context, before and after.
                assert_eq!(c["repo_tokens"], c["original_tokens"], "{kind}: {p}");
                assert_eq!(c["action"], "retained", "{kind}: {p}");
            }
            if flags.first() == Some(&"--request-context-token-budget") {
                assert_eq!(c["action"], "trimmed", "{kind}: {p}");
                assert_eq!(c["admitted_tokens"], 5, "{kind}: {p}");
            }
        }
        // Without the repository, the preflight is Forum's payload as it was.
        let p = repo.forum_json(&["context", "preflight", "--no-repo-context", REQUEST]);
        assert_eq!(
            p["context"],
            json!({"source": "none", "action": "none", "reason": "no_context",
                   "original_tokens": 0, "admitted_tokens": 0, "tokens_saved": 0}),
            "{kind}"
        );
        // The text output says how much of it is the repository.
        let text = repo.forum_ok(&["context", "preflight", REQUEST]);
        assert!(
            text.contains("of which the repository's map: about"),
            "{text}"
        );
        // The daemon's preflight is the command line's, with the same switch.
        let served = repo.serve(&[], std::process::Stdio::null());
        for (body, flag) in [
            (json!({"request": REQUEST}), None),
            (
                json!({"request": REQUEST, "repo_context": false}),
                Some("--no-repo-context"),
            ),
        ] {
            let (code, http) = http_json(&served.addr, "POST", "/context/preflight", &body);
            assert_eq!(code, 200, "{kind}: {http}");
            let mut args = vec!["context", "preflight"];
            args.extend(flag);
            args.push(REQUEST);
            assert_eq!(http, repo.forum_json(&args), "{kind}: {body}");
        }
        drop(served);
    }
}
