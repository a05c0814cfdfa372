//! `git forum worker` and SIGINT/SIGTERM: the first signal makes it finish the task it holds
//! (delivered, merged, its directory removed) and then exit 0; a second one ends it at once,
//! killing the task's commands and removing the task's directory, with 128 + the signal's
//! number; `--spawn K` passes signals on; what a worker killed outright left, the next one
//! removes. Each test starts its own `nats-server` (see `dispatch_nats.rs`) and stops it with
//! everything else it starts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{Repo, on_each_kind, poll_until, wait_until};
use crate::dispatch_nats::{
    Killed, NatsServer, Submitted, clone, finish, logs, model, shared, submit, worker_command,
};

/// One task, writing one file.
const ONE: &str = r#"{"tasks":[
{"id":"T1","agent":"backend","instruction":"write f1.txt","depends_on":[],"done_when":["the file is there"]}]}"#;

/// A model that, for the task, writes its process id and its directory's parent (the task's
/// directory) to `mark`, then holds until `mark.go` exists (at most a minute) before doing what
/// `model` does. The planner's and judges' calls go straight to `model`.
fn holding_model(dir: &Path, model: &str, mark: &Path) -> String {
    let path = dir.join("holding.sh");
    let body = format!(
        "#!/bin/sh\ncase \"$1\" in *'write f1.txt'*) ;; *) exec '{model}' \"$@\" ;; esac\n\
         echo \"$$ $(dirname \"$PWD\")\" > '{m}.tmp' && mv '{m}.tmp' '{m}'\n\
         i=0\nwhile [ ! -e '{m}.go' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n\
         exec '{model}' \"$@\"\n",
        m = mark.display(),
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// The model's process id and the task's directory, once the task has started.
fn started(mark: &Path, clone: &tempfile::TempDir) -> (u32, PathBuf) {
    if !poll_until(Duration::from_secs(60), || mark.exists()) {
        panic!("the worker never started the task:\n{}", logs(&[clone]));
    }
    let text = std::fs::read_to_string(mark).unwrap();
    let (pid, dir) = text.trim().split_once(' ').expect("pid and directory");
    (pid.parse().unwrap(), PathBuf::from(dir))
}

fn signal(w: &Killed, name: &str) {
    let ok = std::process::Command::new("kill")
        .args([&format!("-{name}"), &w.0.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Waits (at most `limit`) for the worker to exit: its exit code.
fn exited(w: &mut Killed, limit: Duration, clone: &tempfile::TempDir) -> Option<i32> {
    let mut status = None;
    poll_until(limit, || {
        status = w.0.try_wait().unwrap();
        status.is_some()
    });
    match status {
        Some(s) => s.code(),
        None => panic!("the worker did not exit:\n{}", logs(&[clone])),
    }
}

/// A worker (started with `extra` flags) holding the one task of a dispatched run: the
/// processes, in the order they are stopped when it is dropped, and what the task's model
/// said when it started.
struct Holding {
    w: Killed,
    run: Submitted,
    c: tempfile::TempDir,
    mark: PathBuf,
    /// The task's model process.
    pid: u32,
    /// The task's directory.
    dir: PathBuf,
    _bare: tempfile::TempDir,
    server: NatsServer,
}

/// `git forum worker` in `clone` on `server` with `cmd` as its seat and `extra` flags, its
/// temporary folder `clone/tmp`: other tests' workers, which remove what killed workers of
/// this user left in theirs, never see this one's task directories.
fn worker_here(
    repo: &Repo,
    clone: &Path,
    server: &NatsServer,
    cmd: &str,
    extra: &[&str],
) -> Killed {
    let tmp = clone.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = worker_command(repo, clone, &server.url(), cmd, extra);
    Killed(c.env("TMPDIR", &tmp).spawn().unwrap())
}

/// Starts a server, a worker in a clone with `extra` flags (`ready` is called once it is
/// started, before the run) and a one-task dispatched run, and waits for the task to start.
fn holding(repo: &Repo, extra: &[&str], ready: impl FnOnce(&Killed)) -> Holding {
    let server = NatsServer::start();
    let (bare, url) = shared(repo);
    let m = model(repo, ONE);
    let c = clone(&url);
    let mark = c.path().join("started");
    let held = holding_model(c.path(), &m, &mark);
    let mut args = vec!["--name", "w", "--no-sandbox"];
    args.extend_from_slice(extra);
    let w = worker_here(repo, c.path(), &server, &held, &args);
    ready(&w);
    let run = submit(repo, &server, &m);
    let (pid, dir) = started(&mark, &c);
    Holding {
        w,
        run,
        c,
        mark,
        pid,
        dir,
        _bare: bare,
        server,
    }
}

#[test]
fn a_worker_told_to_stop_finishes_its_task_delivers_it_and_exits_clean() {
    on_each_kind(|repo: &Repo| {
        let mut h = holding(repo, &[], |_| {});
        signal(&h.w, "TERM");
        // It holds its task: still running a while later, the task's directory there.
        std::thread::sleep(Duration::from_millis(1500));
        assert!(h.w.0.try_wait().unwrap().is_none(), "{}", logs(&[&h.c]));
        assert!(h.dir.exists());
        std::fs::write(h.mark.with_extension("go"), "").unwrap();
        let (ok, j, err) = finish(h.run);
        let answer = j["answer"].as_str().unwrap_or_default();
        assert!(
            ok && answer.contains("- T1: merged"),
            "{answer}\n{err}\n{}",
            logs(&[&h.c])
        );
        assert_eq!(exited(&mut h.w, Duration::from_secs(30), &h.c), Some(0));
        let said = logs(&[&h.c]);
        assert!(
            said.contains("SIGTERM: finishing the tasks it holds")
                && said.contains("1 task(s) done"),
            "{said}"
        );
        assert!(!h.dir.exists(), "{} is left\n{said}", h.dir.display());
        repo.forum_ok(&["verify", "--deep"]);
    });
}

#[test]
fn a_worker_told_twice_stops_at_once_kills_the_task_and_leaves_no_directory() {
    on_each_kind(|repo: &Repo| {
        let mut h = holding(repo, &[], |_| {});
        signal(&h.w, "INT");
        // A second signal within a second is taken as the first one's echo.
        std::thread::sleep(Duration::from_millis(1300));
        signal(&h.w, "INT");
        assert_eq!(exited(&mut h.w, Duration::from_secs(10), &h.c), Some(130));
        let said = logs(&[&h.c]);
        assert!(said.contains("SIGINT again: stopped at once"), "{said}");
        assert!(!h.dir.exists(), "{} is left\n{said}", h.dir.display());
        wait_until(
            "the task's model to be killed",
            Duration::from_secs(10),
            || !Path::new(&format!("/proc/{}", h.pid)).exists(),
        );
    });
}

/// The live processes whose parent is `parent`.
fn children_of(parent: u32) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: the fields after the last `)`.
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let mut f = rest.split(' ');
        let (state, ppid) = (f.next(), f.next());
        if state != Some("Z") && ppid == Some(&parent.to_string()) {
            n += 1;
        }
    }
    n
}

/// The processes (workers, and the reapers they fork) whose command line names `script`
/// (their `--cmd`).
fn workers_running(script: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmd
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a == "worker") && args.iter().any(|a| a == script) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_worker_that_spawned_workers_passes_a_signal_on_and_waits_for_them() {
    let repo = Repo::new("sha1");
    let mut first = 0;
    let mut h = holding(&repo, &["--spawn", "2"], |w| {
        first = w.0.id();
        wait_until("two workers to start", Duration::from_secs(30), || {
            children_of(first) == 2
        });
    });
    let held = h.c.path().join("holding.sh").display().to_string();
    // Only the process started first is told.
    signal(&h.w, "TERM");
    // The idle worker stops; the one holding the task goes on, and the first waits for it.
    if !poll_until(Duration::from_secs(10), || children_of(first) == 1) {
        panic!("the idle worker did not stop:\n{}", logs(&[&h.c]));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(h.w.0.try_wait().unwrap().is_none(), "{}", logs(&[&h.c]));
    assert_eq!(children_of(first), 1, "{}", logs(&[&h.c]));
    std::fs::write(h.mark.with_extension("go"), "").unwrap();
    let (ok, j, err) = finish(h.run);
    assert!(ok, "{j}\n{err}\n{}", logs(&[&h.c]));
    assert_eq!(exited(&mut h.w, Duration::from_secs(30), &h.c), Some(0));
    let said = logs(&[&h.c]);
    // Both workers write to one file at once, and a line goes out in pieces (the signal's name
    // is one): count the piece that is written whole.
    assert_eq!(
        said.matches(": finishing the tasks it holds, then stopping")
            .count(),
        2,
        "{said}"
    );
    assert!(workers_running(&held).is_empty(), "{said}");
    assert!(!h.dir.exists(), "{} is left\n{said}", h.dir.display());
}

/// A worker killed outright (SIGKILL) leaves its task's directory; the next worker started
/// in that clone removes it and the clone's record of the worktree, and does the task once its
/// lease runs out.
#[test]
fn the_next_worker_removes_what_a_worker_killed_outright_left() {
    let repo = Repo::new("sha1");
    let mut h = holding(&repo, &[], |_| {});
    h.w.0.kill().unwrap();
    h.w.0.wait().unwrap();
    assert!(h.dir.exists(), "SIGKILL leaves the directory");
    let listed = |c: &tempfile::TempDir| {
        std::process::Command::new("git")
            .args(["worktree", "list", "--porcelain"])
            .current_dir(c.path().join("c"))
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap()
    };
    let tree = h.dir.join("tree").display().to_string();
    assert!(listed(&h.c).contains(&tree), "{}", listed(&h.c));
    // The killed worker's model, orphaned, may go on; nothing listens to it.
    std::fs::write(h.mark.with_extension("go"), "").unwrap();
    let held = h.c.path().join("holding.sh").display().to_string();
    let _next = worker_here(
        &repo,
        h.c.path(),
        &h.server,
        &held,
        &["--name", "next", "--no-sandbox"],
    );
    wait_until(
        "the next worker to remove it",
        Duration::from_secs(30),
        || !h.dir.exists(),
    );
    let (ok, j, err) = finish(h.run);
    assert!(ok, "{j}\n{err}\n{}", logs(&[&h.c]));
    let said = logs(&[&h.c]);
    assert!(
        said.contains("removed the directories of 1 task(s) left by workers killed outright"),
        "{said}"
    );
    assert!(!listed(&h.c).contains(&tree), "{}", listed(&h.c));
}
