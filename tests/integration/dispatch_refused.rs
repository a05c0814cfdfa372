//! What the writer of a dispatched run does when a task's change cannot come in: a change it
//! refuses (the results ref is gone, or holds another commit than the result names) sends the
//! task out again under a new attempt, up to a bound; a worktree that fails to open on the
//! writer's side ends its task with one line; a base push the remote refuses fails the tasks
//! of its batch before anything of them is published; a writer killed while a refused
//! change's retry is out is resumed and takes the retry up. Each test starts its own
//! `nats-server` and stops it, with every worker it starts.

use std::path::Path;

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{
    NatsServer, TWO, clone, finish, logs, model, release, shared, spawned, submit, task_results,
    worker,
};
use crate::work_run::payloads;

/// Installs `hook` (a shell script's body) as the `name` hook of the bare repository `bare`.
pub(crate) fn install_hook(bare: &Path, name: &str, body: &str) {
    let path = bare.join("hooks").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A post-receive hook that spoils the results refs workers push, counted in `count`: the
/// first `deleted` pushes are deleted, the next `moved` are moved to the parent of the commit
/// pushed (the task's base). git runs it before the push returns, so the worker's result goes
/// out after its ref was spoiled.
pub(crate) fn spoil_results(bare: &Path, deleted: u32, moved: u32) {
    let count = bare.join("spoiled");
    install_hook(
        bare,
        "post-receive",
        &format!(
            "while read old new ref; do\n  case \"$ref\" in refs/forum/results/*)\n    n=$(cat '{c}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{c}'\n    if [ $n -le {deleted} ]; then git update-ref -d \"$ref\"\n    elif [ $n -le {last} ]; then git update-ref \"$ref\" \"$new^\"\n    fi ;;\n  esac\ndone\n",
            c = count.display(),
            last = deleted + moved,
        ),
    );
}

/// The `change` entries the writer refused: their bodies.
fn refused_changes(repo: &Repo) -> Vec<J> {
    payloads(repo, "change")
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| p["refused"] == true)
        .collect()
}

#[test]
fn a_change_the_writer_refused_is_sent_out_again_under_a_new_attempt_and_merged_once() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (bare, url) = shared(repo);
        // The first results ref pushed is deleted, the second moved to the task's base.
        spoil_results(bare.path(), 1, 1);
        let m = model(repo, TWO);
        // One worker: its pushes, and so the hook's count, come one after another.
        let w = clone(&url);
        let _w = worker(
            repo,
            w.path(),
            &server,
            &m,
            &["--name", "w", "--no-sandbox"],
        );
        let (ok, j, err) = finish(submit(repo, &server, &m));
        assert!(ok, "{err}\n{}", logs(&[&w]));
        let answer = j["answer"].as_str().unwrap_or_default();
        for t in ["T1", "T2"] {
            assert!(
                answer.contains(&format!("- {t}: merged")),
                "{answer}\n{err}"
            );
        }
        // Two changes refused, one for each way a results ref can be wrong, each naming its
        // attempt and why in one line.
        let refused = refused_changes(repo);
        assert_eq!(refused.len(), 2, "{refused:?}");
        let why: Vec<&str> = refused
            .iter()
            .map(|p| p["error"].as_str().unwrap())
            .collect();
        assert!(
            why.iter()
                .any(|e| e.starts_with("cannot fetch the worker's commit")),
            "{why:?}"
        );
        assert!(
            why.iter()
                .any(|e| e.contains("not the commit") && e.contains("the result names")),
            "{why:?}"
        );
        assert!(why.iter().all(|e| !e.contains('\n')), "{why:?}");
        // Each refusal sent its task out again: four attempts in all, each answered once,
        // and each retry names the attempt refused, the refused change and its try.
        let sent = payloads(repo, "task_dispatched");
        assert_eq!(sent.len(), 4, "{sent:?}");
        let attempts: std::collections::BTreeSet<&str> = sent
            .iter()
            .map(|(_, p)| p["attempt"].as_str().unwrap())
            .collect();
        assert_eq!(attempts.len(), 4, "every try has an attempt id of its own");
        let retries: Vec<&J> = sent.iter().filter_map(|(_, p)| p.get("retry")).collect();
        assert_eq!(retries.len(), 2, "{sent:?}");
        for r in &retries {
            assert!(r["try"].as_u64().unwrap() >= 2, "{r}");
            assert_eq!(r["at_most"], 3, "{r}");
        }
        for p in &refused {
            let of: Vec<&&J> = retries.iter().filter(|r| r["of"] == p["attempt"]).collect();
            assert_eq!(
                of.len(),
                1,
                "the refused attempt {p} was sent out again once"
            );
        }
        assert_eq!(task_results(repo).len(), 4);
        assert!(payloads(repo, "duplicate_result").is_empty());
        // Each task merged once.
        assert_eq!(
            repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
            "2"
        );
        assert_eq!(repo.git_ok(&["show", "forum/run-0:f1.txt"]), "f1.txt");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

/// A plan of one task, writing `f1.txt`.
const ONE: &str = r#"{"tasks":[
{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]}]}"#;

#[test]
fn a_change_refused_at_every_attempt_fails_its_task_after_the_bound() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (bare, url) = shared(repo);
        // Every results ref pushed is deleted.
        spoil_results(bare.path(), 1000, 0);
        let m = model(repo, ONE);
        let w = clone(&url);
        let _w = worker(
            repo,
            w.path(),
            &server,
            &m,
            &["--name", "w", "--no-sandbox"],
        );
        let (_, j, err) = finish(submit(repo, &server, &m));
        let said = format!("{err}\n{}", logs(&[&w]));
        let answer = j["answer"].as_str().unwrap_or_default();
        assert!(answer.contains("- T1: "), "{answer}\n{said}");
        assert!(!answer.contains("- T1: merged"), "{answer}\n{said}");
        // Its task answered each time: the run ends with nothing delivered.
        assert_eq!(j["exit"]["name"], "nothing_delivered", "{}", j["exit"]);
        // Three attempts (the bound without --attempts), each refused in one line.
        let sent = payloads(repo, "task_dispatched");
        assert_eq!(sent.len(), 3, "{sent:?}\n{said}");
        let tries: Vec<u64> = sent
            .iter()
            .map(|(_, p)| p["retry"]["try"].as_u64().unwrap_or(1))
            .collect();
        assert_eq!(tries, [1, 2, 3]);
        let refused = refused_changes(repo);
        assert_eq!(refused.len(), 3, "{refused:?}");
        for (p, (_, s)) in refused.iter().zip(&sent) {
            assert_eq!(p["attempt"], s["attempt"], "{p}");
            let e = p["error"].as_str().unwrap();
            assert!(e.starts_with("cannot fetch the worker's commit"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        assert_eq!(task_results(repo).len(), 3);
        // Nothing of it is on a run branch: none was made.
        let branch = repo.git_ok(&["for-each-ref", "refs/heads/forum/run-0"]);
        assert_eq!(branch, "", "{branch}");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn a_dispatched_task_whose_worktree_fails_to_open_ends_with_one_line_and_the_run_goes_on() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (_bare, url) = shared(repo);
        let m = model(repo, TWO);
        let w = clone(&url);
        let _w = worker(
            repo,
            w.path(),
            &server,
            &m,
            &["--name", "w", "--no-sandbox"],
        );
        // A run checked in full: the writer runs the checks itself, in a worktree of its own.
        crate::dispatch_claimed::checked_in_full(repo, &m);
        // The first dispatched task's worktree fails to open, after its task was published.
        let mut c = repo.forum();
        // (The seat is the runtime file's, not `--cmd`, so its `verify` holds.)
        c.env("GIT_FORUM_FAILPOINT_FAIL", "task-worktree")
            .args(["submit", "--work", "--no-sandbox", "--check", "true"])
            .args(["--dispatch", &server.url(), "--json"])
            .arg("write the files");
        let (_, j, err) = finish(spawned(c));
        let said = format!("{err}\n{}", logs(&[&w]));
        let answer = j["answer"].as_str().unwrap_or_default();
        // The worker did both tasks; their results are witnessed.
        let results = task_results(repo);
        assert_eq!(results.len(), 2, "{results:?}\n{said}");
        assert_eq!(payloads(repo, "task_dispatched").len(), 2, "not sent again");
        // One of them could not come in: a refused change, one line naming why.
        let refused = refused_changes(repo);
        assert_eq!(refused.len(), 1, "{refused:?}\n{said}");
        let e = refused[0]["error"].as_str().unwrap();
        assert!(
            e.starts_with("cannot open the task's worktree") && e.contains("task-worktree"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        assert_eq!(refused[0]["commit"], J::Null);
        // The checks are the writer's own, run in its worktree: none is a worker's claim.
        let checks = payloads(repo, "check");
        assert!(!checks.is_empty(), "{said}");
        assert!(
            checks.iter().all(|(_, c)| c.get("claimed_by").is_none()),
            "{checks:?}"
        );
        // The run went on: the other task merged.
        let failed = refused[0]["task"].as_str().unwrap();
        let other = if failed == "T1" { "T2" } else { "T1" };
        assert!(
            answer.contains(&format!("- {other}: merged")),
            "{answer}\n{said}"
        );
        assert!(!answer.contains(&format!("- {failed}: merged")), "{answer}");
        // A run that delivered a change answers, as one whose other task failed does.
        assert_eq!(j["exit"]["name"], "answered", "{}", j["exit"]);
        assert_eq!(
            repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
            "1"
        );
        // Nothing of the failed task was brought in: only the merged task's results ref was
        // fetched here.
        let fetched = repo.git_ok(&["for-each-ref", "--format=%(refname)", "refs/forum/results"]);
        assert_eq!(fetched.lines().count(), 1, "{fetched}");
        assert!(fetched.contains(&format!("/{other}/")), "{fetched}");
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn a_base_push_the_remote_refuses_fails_each_task_of_the_batch_with_one_line_and_publishes_none() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (bare, url) = shared(repo);
        install_hook(
            bare.path(),
            "pre-receive",
            "while read old new ref; do\n  case \"$ref\" in refs/forum/bases/*) echo 'bases are closed here' >&2; exit 1 ;; esac\ndone\n",
        );
        let m = model(repo, TWO);
        let (_, j, err) = finish(submit(repo, &server, &m));
        let answer = j["answer"].as_str().unwrap_or_default();
        // No task was dispatched or published, and the remote holds no base.
        assert!(payloads(repo, "task_dispatched").is_empty(), "{err}");
        let info = server.request("$JS.API.STREAM.INFO.FORUM_main", &serde_json::json!({}));
        assert_eq!(info["state"]["messages"].as_u64().unwrap_or(0), 0, "{info}");
        let bases = repo.git_ok(&["ls-remote", &url, "refs/forum/bases/*"]);
        assert_eq!(bases, "", "{bases}");
        // Each task of the batch ended with the same one line.
        let failed: Vec<J> = payloads(repo, "result")
            .into_iter()
            .map(|(_, p)| p)
            .filter(|p| p["error"] == "unpublished")
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}\n{err}");
        let lines: std::collections::BTreeSet<&str> = failed
            .iter()
            .map(|p| p["output"].as_str().unwrap())
            .collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = lines.into_iter().next().unwrap();
        assert!(
            line.starts_with("error: cannot push the task's base to the remote")
                && line.contains("bases are closed here")
                && !line.contains('\n'),
            "{line}"
        );
        for t in ["T1", "T2"] {
            assert!(
                !answer.contains(&format!("- {t}: merged")),
                "{answer}\n{err}"
            );
        }
        // The run ends failed, as a run whose every task failed does.
        assert_eq!(j["exit"]["name"], "failed", "{}", j["exit"]);
        repo.forum_ok(&["verify", "--deep"]);
    });
}

/// A worker seat that does the first call for `f1.txt` at once and holds on each later one
/// (it touches `mark`, then waits until the test creates `release(mark)`, at most a minute).
/// A file beside the script says the first call was made.
fn holds_on_the_retry(dir: &Path, model: &str, mark: &Path) -> String {
    let path = dir.join("retry.sh");
    let first = dir.join("first-done");
    let body = format!(
        "#!/bin/sh\ncase \"$1\" in *'write f1.txt'*)\n  if [ -e '{f}' ]; then\n    touch '{m}'\n    i=0\n    while [ ! -e '{r}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n  else touch '{f}'; fi ;;\nesac\nexec '{model}' \"$@\"\n",
        f = first.display(),
        m = mark.display(),
        r = release(mark).display()
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn a_writer_killed_while_a_refused_changes_retry_is_out_is_resumed_and_merges_the_retry_once() {
    on_each_kind(|repo| {
        let server = NatsServer::start();
        let (bare, url) = shared(repo);
        // The first results ref pushed is deleted: the writer refuses that change and sends
        // the task out again.
        spoil_results(bare.path(), 1, 0);
        let m = model(repo, ONE);
        let w = clone(&url);
        let mark = w.path().join("retry-started");
        let seat = holds_on_the_retry(w.path(), &m, &mark);
        let wk = worker(
            repo,
            w.path(),
            &server,
            &seat,
            &["--name", "w", "--no-sandbox"],
        );
        // The writer is killed (SIGKILL) once the worker holds the retry: the retry is
        // witnessed and published, its result not yet sent.
        let mut run = submit(repo, &server, &m);
        if !crate::common::poll_until(std::time::Duration::from_secs(90), || mark.exists()) {
            let _ = run.child.0.kill();
            let (_, _, err) = finish(run);
            let ledger: String = repo.forum_ok(&["log"]).chars().take(8000).collect();
            let status = repo.forum().args(["status", "--json"]).output().unwrap();
            let stacks = std::process::Command::new("gdb")
                .args([
                    "-p",
                    &wk.0.id().to_string(),
                    "-batch",
                    "-ex",
                    "thread apply all bt 25",
                ])
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .chars()
                        .take(20000)
                        .collect::<String>()
                })
                .unwrap_or_default();
            let procs = std::process::Command::new("ps")
                .args(["-eo", "pid,ppid,stat,etime,args"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            eprintln!(
                "worker {} stacks:\n{stacks}\nprocesses:\n{procs}",
                wk.0.id()
            );
            panic!(
                "the worker did not start the refused change's retry within 90 s\nwriter: {err}\nworkers: {}\nthe first call made: {}\nstatus: {}\nledger:\n{ledger}",
                logs(&[&w]),
                w.path().join("first-done").exists(),
                String::from_utf8_lossy(&status.stdout),
            );
        }
        run.child.0.kill().unwrap();
        run.child.0.wait().unwrap();
        let before = payloads(repo, "task_dispatched");
        assert_eq!(before.len(), 2, "{before:?}\n{}", logs(&[&w]));
        let (retry_seq, retry) = before[1].clone();
        assert_eq!(retry["retry"]["of"], before[0].1["attempt"], "{retry}");
        assert_eq!(retry["retry"]["try"], 2, "{retry}");
        assert_eq!(refused_changes(repo).len(), 1);
        assert_eq!(
            task_results(repo).len(),
            1,
            "only the refused attempt answered"
        );
        // The worker finishes the retry while no writer listens; the resumed writer takes
        // the retry up from the record and hears its result on the run's durable consumer.
        std::fs::write(release(&mark), "").unwrap();
        let mut c = repo.forum();
        c.args(["resume", "0", "--no-sandbox", "--cmd", &m, "--json"]);
        let (ok, j, err) = finish(spawned(c));
        let said = format!("{err}\n{}", logs(&[&w]));
        assert!(ok, "{j}\n{said}");
        let answer = j["answer"].as_str().unwrap_or_default();
        assert!(answer.contains("- T1: merged"), "{answer}\n{said}");
        // The newest attempt was taken up (not sent out afresh): one more `task_dispatched`,
        // of the retry's attempt, naming the retry's entry.
        let after = payloads(repo, "task_dispatched");
        assert_eq!(after.len(), 3, "{after:?}\n{said}");
        let (_, taken) = &after[2];
        assert_eq!(taken["attempt"], retry["attempt"], "{taken}");
        assert_eq!(taken["resumed_from"], retry_seq, "{taken}");
        // Nothing lost: each attempt answered once, the first refused, the retry's result
        // witnessed after the resume; nothing duplicated.
        let results = task_results(repo);
        let answered: Vec<&J> = results.iter().map(|(_, r)| &r["attempt"]).collect();
        assert_eq!(
            answered,
            [&before[0].1["attempt"], &retry["attempt"]],
            "{results:?}"
        );
        assert_eq!(results[1].1["worker"], "w");
        assert!(payloads(repo, "duplicate_result").is_empty(), "{said}");
        assert_eq!(refused_changes(repo).len(), 1, "{said}");
        // Merged once, the retry's change.
        assert_eq!(
            repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
            "1"
        );
        assert_eq!(repo.git_ok(&["show", "forum/run-0:f1.txt"]), "f1.txt");
        assert_eq!(
            crate::dispatch_ops::on_stream(&server, "writer-main-0"),
            0,
            "a result is left unacknowledged"
        );
        repo.forum_ok(&["verify", "--deep"]);
    });
}
