//! A worker delivers a task (pushes its change, publishes its result) while it already works
//! on its next one: the push of one task overlaps the next task's model call. Shown without a
//! clock: the remote's hook holds every push of a result until the worker's seat has started
//! a second task, so a worker that delivered before pulling again would hold its own push
//! until the hook gave up and refused it.

use std::path::Path;

use crate::common::{Repo, on_each_kind};
use crate::dispatch_nats::{
    NatsServer, TWO, clone, finish, logs, model, shared, submit, task_results, worker,
};

/// A `pre-receive` hook for the bare remote at `bare`: a push that writes a results ref waits
/// (at most 30 s) for `mark`, and is refused when it never comes; every other push goes on.
fn holding_hook(bare: &Path, mark: &Path) {
    let hook = bare.join("hooks").join("pre-receive");
    let body = format!(
        "#!/bin/sh\nresults=no\nwhile read old new ref; do case \"$ref\" in refs/forum/results/*) results=yes ;; esac; done\n[ $results = yes ] || exit 0\ni=0\nwhile [ ! -e '{m}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n[ -e '{m}' ] || {{ echo 'the worker did not start its next task while this push waited' >&2; exit 1; }}\n",
        m = mark.display()
    );
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `model` behind a script that, when called in a worker's worktree, notes its first task
/// (`first`) and marks (`mark`) the start of its second.
fn marking_model(dir: &Path, model: &str, first: &Path, mark: &Path) -> String {
    let path = dir.join("marking.sh");
    let body = format!(
        "#!/bin/sh\ncase \"$PWD\" in *forum-worker-*) if [ -e '{f}' ]; then touch '{m}'; else touch '{f}'; fi ;; esac\nexec '{model}' \"$@\"\n",
        f = first.display(),
        m = mark.display()
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// Both tasks of [`TWO`] answered ok and merged onto the run branch (`err`: the submit's
/// stderr, for a failure's message).
fn both_done_and_merged(repo: &Repo, err: &str) {
    let results = task_results(repo);
    assert_eq!(results.len(), 2, "{err}");
    for (_, r) in &results {
        assert_eq!(r["ok"], true, "{r}");
    }
    assert_eq!(
        repo.git_ok(&["rev-list", "--count", "main..forum/run-0"]),
        "2"
    );
}

#[test]
fn a_worker_starts_its_next_task_while_the_last_ones_change_is_still_being_pushed() {
    on_each_kind(|repo: &Repo| {
        let server = NatsServer::start();
        let (bare, url) = shared(repo);
        let marks = tempfile::tempdir().unwrap();
        let (first, mark) = (marks.path().join("first"), marks.path().join("second"));
        holding_hook(bare.path(), &mark);
        let m = marking_model(marks.path(), &model(repo, TWO), &first, &mark);
        let c = clone(&url);
        let _w = worker(
            repo,
            c.path(),
            &server,
            &m,
            &["--no-sandbox", "--concurrency", "1"],
        );
        let (ok, _, err) = finish(submit(repo, &server, &m));
        assert!(ok, "{err}\n{}", logs(&[&c]));
        assert!(mark.exists(), "the seat never started a second task");
        both_done_and_merged(repo, &err);
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn a_worker_given_a_seat_runs_every_task_on_that_slot_of_its_runtime_config() {
    let repo = Repo::new(crate::common::FORMATS[0]);
    let server = NatsServer::start();
    let (_bare, url) = shared(&repo);
    let m = model(&repo, TWO);
    let c = clone(&url);
    let clone_dir = c.path().join("c");
    // Its default slot fails every call; its cheap slot is the scripted model.
    std::fs::create_dir_all(clone_dir.join(".forum")).unwrap();
    std::fs::write(
        clone_dir.join(".forum/runtime.toml"),
        format!("[runtime.default]\ncmd = \"false\"\n\n[runtime.tiers.cheap]\ncmd = \"{m}\"\n"),
    )
    .unwrap();
    std::fs::write(clone_dir.join(".git/info/exclude"), ".forum/\n").unwrap();
    let mut w = repo.forum();
    w.current_dir(&clone_dir)
        .args(["worker", "--nats", &server.url(), "--lease", "2"])
        .args(["--no-sandbox", "--seat", "cheap"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(c.path().join("worker.log")).unwrap());
    let _w = crate::dispatch_nats::Killed(w.spawn().unwrap());
    let (ok, _, err) = finish(submit(&repo, &server, &m));
    assert!(ok, "{err}\n{}", logs(&[&c]));
    both_done_and_merged(&repo, &err);
}
