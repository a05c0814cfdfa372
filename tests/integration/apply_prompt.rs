//! `apply` on a terminal shows what it would bring in and asks: driven through a
//! pseudo-terminal as its standard input, an `n` leaves the branch, the tree and the ledger as
//! they were, a `y` applies; `--yes` applies without asking, and with standard input not a
//! terminal apply never asks (scripts keep working).

use std::io::Write;
use std::process::Stdio;

use crate::common::Repo;
use crate::work_apply::{one_change, seeded_run};

/// A new pseudo-terminal: its controller (what a terminal emulator holds) and its device (what
/// a program's standard input is).
pub(crate) fn pty() -> (std::fs::File, std::fs::File) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let controller = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&controller).unwrap();
    unlockpt(&controller).unwrap();
    let name = ptsname(&controller, Vec::new()).unwrap();
    let device = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    (std::fs::File::from(controller), device)
}

/// `git-forum ARGS` in `repo` with a terminal as standard input that types `answer`; its exit
/// code, stdout and stderr.
fn on_a_terminal(repo: &Repo, args: &[&str], answer: &str) -> (Option<i32>, String, String) {
    let (mut controller, device) = pty();
    let child = repo
        .forum()
        .args(args)
        .stdin(Stdio::from(device))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The terminal holds the line until the program reads it.
    controller.write_all(answer.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn ledger_len(repo: &Repo) -> u64 {
    repo.forum_json(&["status"])["entries"].as_u64().unwrap()
}

#[test]
fn apply_on_a_terminal_shows_the_stat_and_asks() {
    let repo = Repo::new("sha1");
    let run = seeded_run(&repo);
    let c = one_change(&repo, run, "a.txt", "one\nTWO\nthree\n", true);
    let head = repo.git_ok(&["rev-parse", "HEAD"]);
    let before = ledger_len(&repo);
    let run_s = run.to_string();

    // No: nothing changes, and it says so.
    let (code, out, err) = on_a_terminal(&repo, &["apply", &run_s], "n\n");
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(out, "");
    assert!(
        err.contains(&format!("run {run}: forum/run-{run} into "))
            && err.contains("(fast-forward)"),
        "{err}"
    );
    assert!(err.contains(" a.txt | "), "{err}");
    assert!(
        err.contains("1 file changed, 2 insertions(+), 1 deletion(-)"),
        "{err}"
    );
    assert!(err.contains("Apply? [y/N] "), "{err}");
    assert!(err.contains("not applied; nothing changed"), "{err}");
    assert_eq!(repo.git_ok(&["rev-parse", "HEAD"]), head);
    assert_eq!(repo.git_ok(&["status", "--porcelain"]), "");
    assert_eq!(ledger_len(&repo), before);
    // The end of input (Ctrl-D at the start of a line) is no as well.
    let (code, _, _) = on_a_terminal(&repo, &["apply", &run_s], "\x04");
    assert_eq!(code, Some(1));
    assert_eq!(repo.git_ok(&["rev-parse", "HEAD"]), head);

    // Yes: applied and witnessed.
    let (code, out, err) = on_a_terminal(&repo, &["apply", &run_s], "y\n");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with(&format!("applied run {run} to ")), "{out}");
    assert_eq!(repo.git_ok(&["rev-parse", "HEAD"]), c);
    assert_eq!(ledger_len(&repo), before + 1);
}

#[test]
fn apply_with_yes_or_without_a_terminal_does_not_ask() {
    for args in [&["apply", "--yes"][..], &["apply"][..]] {
        let repo = Repo::new("sha1");
        let run = seeded_run(&repo);
        let c = one_change(&repo, run, "a.txt", "one\nTWO\n", true);
        let (code, out, err) = if args.len() == 2 {
            on_a_terminal(&repo, args, "")
        } else {
            let o = repo
                .forum()
                .args(args)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        };
        assert_eq!(code, Some(0), "{args:?}: {out}{err}");
        assert!(!err.contains("Apply?"), "{args:?}: {err}");
        assert_eq!(repo.git_ok(&["rev-parse", "HEAD"]), c, "{args:?}");
    }
}
