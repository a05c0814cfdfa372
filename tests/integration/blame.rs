//! `git forum blame` through the binary, on every repository kind: one file changed by three
//! runs (the editing worker on a loopback chat stub, applied by fast-forward; a command worker,
//! applied with a merge after the user committed; a command worker's two tasks, squash-merged
//! by hand) and by the user. Each line's task, model, tool call and tokens are the record's,
//! `--verify` passes here and in a clone that fetched the pushed ledger and branch; a forged
//! trailer and an altered change entry each make `--verify` fail naming the line. Bad input
//! (a file not in the revision, a range past the end, a binary file) gets one line each.

use serde_json::{Value as J, json};

use crate::common::{FORMATS, Repo, one_line_error};
use crate::edit_worker::{Stub, chat_answer, fleet, tool_turn};
use crate::work_run::{model, payloads, plan, setup};

const CHECK: &str = "python3 -m unittest -q";

const FIXED: &str = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n";

/// The editing worker: writes the fix, then says so.
fn writer(turn: usize, _: &J) -> (u16, J) {
    let a = match turn {
        0 => tool_turn(
            "c1",
            "write_file",
            json!({"path": "calc.py", "content": FIXED}),
        ),
        _ => chat_answer(json!("Fixed add in calc.py."), None),
    };
    (200, a)
}

/// The seq of the latest run (its request entry).
fn last_run(repo: &Repo) -> u64 {
    payloads(repo, "request").last().unwrap().0
}

fn ok(o: &std::process::Output) {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Run 1: the editing worker fixes add; applied by fast-forward. Returns its seq.
fn first_run(repo: &Repo) -> u64 {
    setup(repo);
    let stub = Stub::start(fleet(writer));
    let url = stub.url("/v1/chat/completions");
    let o = repo
        .forum()
        .args([
            "submit",
            "--json",
            "--work",
            "--check",
            CHECK,
            "--chat-url",
            &url,
        ])
        .args([
            "--model",
            "stub-coder",
            "make the failing test in calc pass",
        ])
        .output()
        .unwrap();
    ok(&o);
    let r1 = last_run(repo);
    repo.forum_ok(&["apply", &r1.to_string()]);
    r1
}

/// The three runs and the user's commits; returns the runs' seqs.
fn history(repo: &Repo) -> [u64; 3] {
    let r1 = first_run(repo);
    // Run 2: a command worker makes mul multiply; the user adds a header meanwhile; merged.
    let m2 = model(
        repo,
        "m2",
        &plan(&[("T1", "make mul multiply")], false),
        "merge",
        "    sed -i '6s/a + b/a * b/' calc.py; echo 'mul multiplies'",
    );
    repo.forum_ok(&[
        "submit", "--quiet", "--work", "--check", CHECK, "--cmd", &m2, "fix mul",
    ]);
    let r2 = last_run(repo);
    let calc = repo.path().join("calc.py");
    let text = std::fs::read_to_string(&calc).unwrap();
    std::fs::write(&calc, format!("# calc\n{text}")).unwrap();
    repo.git_ok(&["commit", "-q", "-am", "a header"]);
    repo.forum_ok(&["apply", &r2.to_string()]);
    // Run 3: two tasks of a command worker, squash-merged by hand.
    let work = "    case \"$p\" in\n      *\"add sub\"*) printf '\\n\\ndef sub(a, b):\\n    return a - b\\n' >> calc.py; echo 'added sub' ;;\n      *) sed -i '1a # adds and multiplies' calc.py; echo 'noted' ;;\n    esac";
    let m3 = model(
        repo,
        "m3",
        &plan(
            &[("T1", "write the calc note"), ("T2", "add sub to calc")],
            false,
        ),
        "merge",
        work,
    );
    repo.forum_ok(&[
        "submit",
        "--quiet",
        "--work",
        "--check",
        CHECK,
        "--cmd",
        &m3,
        "tidy calc: a note, sub",
    ]);
    let r3 = last_run(repo);
    repo.git_ok(&["merge", "-q", "--squash", &format!("forum/run-{r3}")]);
    repo.git_ok(&["commit", "-q", "-m", "tidy calc (squashed)"]);
    [r1, r2, r3]
}

/// The task entry of task `id` of run `run`.
fn task_seq(repo: &Repo, run: u64, id: &str) -> u64 {
    let all = crate::work_run::entries(repo);
    let root = |mut s: u64| loop {
        let e = &all[s as usize];
        match e["causal_parent"].as_u64() {
            Some(p) => s = p,
            None => return s,
        }
    };
    payloads(repo, "task")
        .into_iter()
        .find(|(s, p)| p["id"] == id && root(*s) == run)
        .unwrap()
        .0
}

/// The usage the record witnessed on the results of task `id`.
fn result_of(repo: &Repo, id: &str, model: Option<&str>) -> J {
    payloads(repo, "result")
        .into_iter()
        .map(|(_, p)| p)
        .find(|p| p["id"] == id && model.is_none_or(|m| p["model"] == m))
        .unwrap()
}

/// Every line is the record's.
fn lines_are_right(repo: &Repo, r: &J, runs: [u64; 3]) {
    let lines = r["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 12, "{r}");
    let task_of = |n: usize| lines[n - 1]["task"].as_u64();
    let via = |n: usize| lines[n - 1]["via"].clone();
    for n in [1, 3, 5, 6, 7] {
        assert_eq!(task_of(n), None, "line {n}: {r}");
    }
    let t1 = task_seq(repo, runs[0], "T1");
    let t2 = task_seq(repo, runs[1], "T1");
    let (t3a, t3b) = (task_seq(repo, runs[2], "T1"), task_seq(repo, runs[2], "T2"));
    assert_eq!((task_of(4), via(4)), (Some(t1), json!("trailers")), "{r}");
    assert_eq!((task_of(8), via(8)), (Some(t2), json!("trailers")), "{r}");
    assert_eq!((task_of(2), via(2)), (Some(t3a), json!("content")), "{r}");
    for n in 9..=12 {
        assert_eq!((task_of(n), via(n)), (Some(t3b), json!("content")), "{r}");
    }
    // The editing worker's line has its tool call; the command worker's are the task's.
    assert_eq!(lines[3]["tool_call"]["tool"], "write_file", "{r}");
    let call = payloads(repo, "tool_call")[0].0;
    assert_eq!(lines[3]["tool_call"]["seq"], call);
    assert!(lines[7]["tool_call"].is_null() && lines[1]["tool_call"].is_null());
    let task = |seq: u64| {
        r["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["seq"] == seq)
            .unwrap()
            .clone()
    };
    let edit = task(t1);
    let res = result_of(repo, "T1", Some("stub-coder"));
    assert_eq!(edit["model"], "stub-coder");
    assert_eq!(edit["worker"], "tools");
    assert_eq!(edit["prompt_tokens"], res["usage"]["prompt_tokens"]);
    assert_eq!(edit["completion_tokens"], res["usage"]["completion_tokens"]);
    assert_eq!(edit["ship"]["decision"], "merge");
    let checks = &edit["changes"][0]["checks"];
    assert!(checks.as_array().is_some_and(|c| !c.is_empty()), "{edit}");
    assert!(checks.as_array().unwrap().iter().all(|c| c["ok"] == true));
    assert!(edit["changes"][0]["blob"].is_string(), "{edit}");
    assert_eq!(edit["proof"]["entry"]["seq"], t1);
    let cmd = task(t2);
    assert_eq!(cmd["worker"], "task");
    assert_eq!(cmd["run"], runs[1]);
    assert!(cmd["model"].is_string(), "{cmd}");
}

/// A commit like `commit` whose Forum-Entry is forged; returns its id.
fn forged(repo: &Repo, commit: &str) -> String {
    let text = repo.git_ok(&["cat-file", "commit", commit]) + "\n";
    let entry = crate::work_run::trailer(repo, commit, "Forum-Entry");
    let fake = "0".repeat(entry.len());
    crate::common::write_commit(repo, &text.replace(&entry, &fake))
}

/// Run 1's change entry with another body, the chain re-linked (its entry hash unchanged).
fn alter_change(repo: &Repo) -> u64 {
    let (seq, body) = payloads(repo, "change")[0].clone();
    let mut altered = body.clone();
    altered["blobs"]["calc.py"] =
        json!("1".repeat(body["blobs"]["calc.py"].as_str().unwrap().len()));
    let blob = repo.git_in(
        &["hash-object", "-w", "--stdin"],
        altered.to_string().as_bytes(),
    );
    let tree = repo.git_in(
        &["mktree"],
        format!("100644 blob {blob}\tpayload.json\n").as_bytes(),
    );
    let mut texts = crate::common::commit_texts(repo, crate::common::LEDGER_REF);
    let old = texts[seq as usize].lines().next().unwrap().to_string();
    texts[seq as usize] = texts[seq as usize].replacen(&old, &format!("tree {tree}"), 1);
    crate::common::rechain(repo, &texts);
    seq
}

#[test]
fn blame_names_each_lines_task_model_tool_and_cost_and_verifies_in_a_fetched_clone() {
    for kind in FORMATS {
        let a = Repo::new(kind);
        let runs = history(&a);
        let r = a.forum_json(&["blame", "calc.py", "--verify"]);
        assert_eq!(r["verified"], true, "{kind}: {r}");
        lines_are_right(&a, &r, runs);
        // The text fits 80 columns before the line, and numbers every line.
        let text = a.forum_ok(&["blame", "calc.py"]);
        for (i, l) in text.lines().enumerate() {
            let prefix = l.split_once(") ").unwrap().0;
            assert!(prefix.chars().count() < 80, "{l}");
            assert!(prefix.ends_with(&format!(" {}", i + 1)), "{l}");
        }
        assert!(
            text.lines().nth(3).unwrap().contains("stub-coder"),
            "{text}"
        );
        // -L: only those lines.
        let some = a.forum_json(&["blame", "-L", "4,8", "calc.py"]);
        assert_eq!(some["lines"].as_array().unwrap().len(), 5);

        // Pushed, then fetched into a clone with nothing of this machine.
        let (_bare, url) = crate::common::bare_origin(&a, kind);
        a.forum_ok(&["push"]);
        a.git_ok(&["push", "-q", "origin", "main"]);
        let b = Repo::new(kind);
        b.git_ok(&["remote", "add", "origin", &url]);
        b.forum_ok(&["fetch"]);
        b.git_ok(&["fetch", "-q", "origin"]);
        let theirs = b.forum_json(&[
            "--ledger",
            "origin:main",
            "blame",
            "calc.py",
            "origin/main",
            "--verify",
        ]);
        assert_eq!(theirs["verified"], true, "{kind}: {theirs}");
        assert_eq!(theirs["lines"], r["lines"], "{kind}");

        // A forged trailer: the line it claims fails, named.
        let c1 = payloads(&a, "change")[0].1["commit"]
            .as_str()
            .unwrap()
            .to_string();
        let f = forged(&a, &c1);
        let o = a
            .forum()
            .args(["blame", "calc.py", &f, "--verify"])
            .output()
            .unwrap();
        let t1 = task_seq(&a, runs[0], "T1");
        one_line_error(
            &o,
            &format!(
                "line 2: commit {}'s Forum-Entry 00000000 is not the hash of task entry {t1}",
                &f[..8]
            ),
        );
        // An altered ledger entry: run 1's change entry's body.
        let seq = alter_change(&a);
        let o = a
            .forum()
            .args(["blame", "calc.py", "--verify"])
            .output()
            .unwrap();
        one_line_error(
            &o,
            &format!(
                "line 4: the record of task entry {t1}'s run is damaged: the body of seq {seq} "
            ),
        );
    }
}

#[test]
fn blame_refuses_a_missing_file_a_range_past_the_end_and_a_binary_file_in_one_line() {
    let repo = Repo::new("sha1");
    setup(&repo);
    std::fs::write(repo.path().join("bin.dat"), b"a\0b\n").unwrap();
    repo.git_ok(&["add", "bin.dat"]);
    repo.git_ok(&["commit", "-q", "-m", "binary"]);
    let refused = |args: &[&str], needle: &str| {
        let o = repo.forum().arg("blame").args(args).output().unwrap();
        one_line_error(&o, needle);
    };
    refused(&["nope.py"], "nope.py is not a file in HEAD");
    refused(
        &["-L", "2,99", "calc.py"],
        "lines 2,99 are out of range: calc.py has 6 lines",
    );
    refused(&["-L", "3,1", "calc.py"], "lines \"3,1\" is not a range");
    refused(&["bin.dat"], "bin.dat is a binary file in HEAD");
    refused(
        &["calc.py", "no-such-rev"],
        "\"no-such-rev\" names no commit",
    );
    // A repository with no ledger: every line is no run's change.
    let r = repo.forum_json(&["blame", "calc.py"]);
    assert_eq!(r["lines"].as_array().unwrap().len(), 6);
    assert!(
        r["lines"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["task"].is_null())
    );
}

#[test]
fn blame_answers_the_same_over_the_cli_http_and_mcp() {
    let repo = Repo::new("sha1");
    first_run(&repo);
    let cli = repo.forum_json(&["blame", "calc.py", "-L", "1,3", "--verify"]);
    assert_eq!(cli["verified"], true, "{cli}");
    let served = repo.serve(&[], std::process::Stdio::null());
    let (code, body) = crate::common::http_json(
        &served.addr,
        "GET",
        "/blame?file=calc.py&lines=1,3&verify=true",
        &J::Null,
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, cli);
    let (code, body) =
        crate::common::http_json(&served.addr, "GET", "/blame?file=nope.py", &J::Null);
    assert_eq!(code, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("nope.py is not a file in HEAD")
    );
    drop(served);
    let reply = repo.mcp_call(
        &[],
        "blame",
        json!({"file": "calc.py", "lines": "1,3", "verify": true}),
    );
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    let body: J = serde_json::from_str(text).unwrap();
    assert_eq!(body, cli);
}

#[test]
fn a_cherry_picked_change_is_found_by_its_patch_id_and_verifies() {
    let repo = Repo::new("sha1");
    first_run(&repo);
    let change = payloads(&repo, "change")[0].1["commit"]
        .as_str()
        .unwrap()
        .to_string();
    // Another branch from the first commit, with a commit of the user's first, then the
    // change picked onto it (a new commit, its message without the trailers).
    repo.git_ok(&["checkout", "-q", "-b", "picked", "main~1"]);
    std::fs::write(repo.path().join("notes.md"), "notes\n").unwrap();
    repo.git_ok(&["add", "notes.md"]);
    repo.git_ok(&["commit", "-q", "-m", "notes"]);
    repo.git_ok(&["cherry-pick", "--no-commit", &change]);
    repo.git_ok(&["commit", "-q", "-m", "picked the fix"]);
    let r = repo.forum_json(&["blame", "calc.py", "--verify"]);
    assert_eq!(r["verified"], true, "{r}");
    let line = &r["lines"][1];
    assert_eq!(line["via"], "patch_id", "{r}");
    assert_ne!(line["commit"], json!(change));
    assert_eq!(line["tool_call"]["tool"], "write_file", "{r}");
}
