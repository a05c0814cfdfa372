//! Bounded reads of what git or a user hands git forum line by line: the ref-update lines a
//! hook reads on stdin, and a Forum directory's `entries.jsonl` / `payloads.jsonl` read by
//! `import` and `doctor --from-export`. An endless source (a device, a FIFO, a child writing
//! forever) or an overlong line ends in one clear line and a non-zero exit, within a fixed
//! address-space limit, with nothing written.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::{Repo, one_line_error};

/// Address space allowed to a bounded command (KiB): far above what a capped read needs, far
/// below what reading an endless source would take.
const MEMORY_KIB: u64 = 1 << 20;

/// `git forum ARGS` in `repo` under a [`MEMORY_KIB`] address-space limit (`ulimit -v`), so a
/// read that does not stop fails on allocation instead of growing without end.
fn bounded(repo: &Repo, args: &[&str]) -> Command {
    let mut c = repo.forum();
    let bin = c.get_program().to_owned();
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("ulimit -v {MEMORY_KIB} && exec \"$0\" \"$@\""))
        .arg(bin)
        .args(args)
        .current_dir(repo.path());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    // `c` is only a template for the environment; it never runs.
    let _ = c.stdin(Stdio::null());
    sh
}

/// Runs `cmd` with a child writing `line` forever on its stdin; stops the writer afterwards.
fn fed_forever(mut cmd: Command, line: &str) -> Output {
    let mut writer = Command::new("yes")
        .arg(line)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start yes");
    let out = cmd
        .stdin(Stdio::from(writer.stdout.take().unwrap()))
        .output()
        .expect("run the hook");
    let _ = writer.kill();
    let _ = writer.wait();
    out
}

fn with_stdin(mut cmd: Command, input: Stdio) -> Output {
    cmd.stdin(input).output().expect("run git forum")
}

#[test]
fn hook_stdin_is_read_within_limits() {
    let repo = Repo::new("sha1");
    repo.append("a", "k", "\"one\"");
    let before = repo.snapshot();
    // An endless line: /dev/zero never sends a newline.
    for hook in [
        &["hook", "pre-push", "origin", "url"][..],
        &["hook", "pre-receive"],
    ] {
        let zero = std::fs::File::open("/dev/zero").unwrap();
        let o = with_stdin(bounded(&repo, hook), Stdio::from(zero));
        one_line_error(&o, "line 1 of standard input is longer than 65536 bytes");
    }
    // One overlong line after an honest one.
    let long = format!(
        "refs/heads/a {} refs/heads/a {}\n{}\n",
        "1".repeat(40),
        "0".repeat(40),
        "x".repeat(65537)
    );
    let mut c = bounded(&repo, &["hook", "pre-push", "origin", "url"]);
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        // The hook may stop reading before the end; a broken pipe here is expected then.
        let _ = stdin.write_all(long.as_bytes());
    }
    let o = child.wait_with_output().unwrap();
    one_line_error(&o, "line 2 of standard input is longer than 65536 bytes");
    // A child writing ref lines forever: ledger refs are capped at 100000 ...
    let o = fed_forever(
        bounded(&repo, &["hook", "pre-receive"]),
        &format!(
            "{} {} refs/forum/ledgers/main",
            "0".repeat(40),
            "1".repeat(40)
        ),
    );
    one_line_error(&o, "names more than 100000 ledger refs");
    // ... and lines of any ref at a million.
    let o = fed_forever(
        bounded(&repo, &["hook", "pre-push", "origin", "url"]),
        "a 1 b 2",
    );
    one_line_error(&o, "standard input holds more than 1000000 lines");
    assert_eq!(repo.snapshot(), before);
    // An honest stdin still passes: code refs only, or nothing.
    let o = with_stdin(
        bounded(&repo, &["hook", "pre-push", "origin", "url"]),
        Stdio::null(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn hooks_install_reads_an_existing_hook_within_limits() {
    let repo = Repo::new("sha1");
    let hook = repo.git_dir().join("hooks/pre-push");
    let o = Command::new("mkfifo").arg(&hook).output().unwrap();
    assert!(o.status.success());
    let o = with_stdin(bounded(&repo, &["hooks", "install"]), Stdio::null());
    one_line_error(
        &o,
        "pre-push is not a regular file; move it away and install again",
    );
    std::fs::remove_file(&hook).unwrap();
    // A hook file that is larger than any script (sparse, 2 MiB): left exactly as it was.
    std::fs::File::create(&hook)
        .unwrap()
        .set_len(2 << 20)
        .unwrap();
    let o = with_stdin(bounded(&repo, &["hooks", "install"]), Stdio::null());
    one_line_error(
        &o,
        "pre-push is longer than the 1048576 byte limit; move it away and install again",
    );
    assert_eq!(std::fs::metadata(&hook).unwrap().len(), 2 << 20);
    std::fs::remove_file(&hook).unwrap();
    repo.forum_ok(&["hooks", "install"]);
    assert!(
        std::fs::read_to_string(&hook)
            .unwrap()
            .contains("git forum hook pre-push")
    );
}

/// A valid two-entry Forum directory in `dir` (written by `git forum export`).
fn forum_dir(dir: &Path) {
    let src = Repo::new("sha1");
    src.append("a", "k", "{\"n\": 1}");
    src.append("a", "k", "{\"n\": 2}");
    src.forum_ok(&["export", dir.to_str().unwrap()]);
}

#[test]
fn forum_directory_reads_are_bounded() {
    let repo = Repo::new("sha1");
    let work = tempfile::tempdir().unwrap();
    let good = work.path().join("good");
    forum_dir(&good);
    let before = repo.snapshot();
    let import = |dir: &Path, extra: &[&str]| {
        let mut args = vec!["import", dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        with_stdin(bounded(&repo, &args), Stdio::null())
    };
    let copy = |name: &str| {
        let d = work.path().join(name);
        std::fs::create_dir(&d).unwrap();
        for f in ["entries.jsonl", "payloads.jsonl"] {
            std::fs::copy(good.join(f), d.join(f)).unwrap();
        }
        d
    };
    // entries.jsonl, then payloads.jsonl, a symlink to /dev/zero.
    for f in ["entries.jsonl", "payloads.jsonl"] {
        let d = copy(&format!("zero-{f}"));
        std::fs::remove_file(d.join(f)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.join(f)).unwrap();
        one_line_error(&import(&d, &[]), &format!("{f} is not a regular file"));
    }
    // A FIFO nobody writes to: refused, not waited on.
    let d = copy("fifo");
    std::fs::remove_file(d.join("payloads.jsonl")).unwrap();
    let o = Command::new("mkfifo")
        .arg(d.join("payloads.jsonl"))
        .output()
        .unwrap();
    assert!(o.status.success());
    one_line_error(&import(&d, &[]), "payloads.jsonl is not a regular file");
    // A regular file whose first line never ends (1 TiB, sparse): stopped at the line limit
    // by counting bytes read, whatever the size says.
    let d = copy("sparse");
    std::fs::File::create(d.join("entries.jsonl"))
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    one_line_error(
        &import(&d, &[]),
        "entries.jsonl: the line at row 0 is longer than the 67108864 byte line limit",
    );
    // An overlong line after good rows, in payloads.jsonl.
    let d = copy("long-line");
    let mut text = std::fs::read_to_string(good.join("payloads.jsonl")).unwrap();
    text.push_str(&"x".repeat((64 << 20) + 1));
    text.push('\n');
    std::fs::write(d.join("payloads.jsonl"), text).unwrap();
    one_line_error(
        &import(&d, &[]),
        "payloads.jsonl: the line at row 2 is longer than the 67108864 byte line limit",
    );
    // The total: both files together, counted as read; --max-bytes raises it.
    let total: u64 = ["entries.jsonl", "payloads.jsonl"]
        .iter()
        .map(|f| std::fs::metadata(good.join(f)).unwrap().len())
        .sum();
    let small = (total - 1).to_string();
    one_line_error(
        &import(&good, &["--max-bytes", &small]),
        &format!("holds more than the {small} byte limit (both files together); pass --max-bytes"),
    );
    assert_eq!(
        repo.snapshot(),
        before,
        "nothing imported by a refused read"
    );
    // doctor --from-export reads the same way.
    let d = work.path().join("zero-payloads.jsonl");
    let o = with_stdin(
        bounded(&repo, &["doctor", "--from-export", d.to_str().unwrap()]),
        Stdio::null(),
    );
    one_line_error(&o, "payloads.jsonl is not a regular file");
    // Within the limits the same directory imports, with exactly its bytes as the limit.
    let o = import(&good, &["--max-bytes", &total.to_string()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    repo.forum_ok(&["verify", "--deep"]);
}

/// A remote that talks without end (its hook prints to stderr for ever, which git relays as
/// `remote:` lines) cannot make `git forum push` grow without bound: past the limit on git's
/// output the push is stopped with one line.
#[test]
fn a_remote_that_talks_without_end_is_cut_off() {
    let repo = crate::common::Repo::new("sha1");
    repo.append("a", "k", "1");
    let remote = tempfile::tempdir().unwrap();
    let bare = remote.path().join("r.git");
    repo.git_ok(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    let hook = bare.join("hooks/pre-receive");
    // 30 MB of noise: far past the limit set below, and finite, so the remote side ends by
    // itself once the push is stopped.
    std::fs::write(
        &hook,
        "#!/bin/sh\nhead -c 30000000 /dev/zero | tr '\\0' x >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = repo
        .forum()
        .env("GIT_FORUM_GIT_OUTPUT_LIMIT", "200000")
        .args(["push", bare.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("printed more than"), "{err}");
    // Nothing arrived: the hook never let the push through.
    let refs = repo.git_ok(&["ls-remote", bare.to_str().unwrap()]);
    assert!(refs.is_empty(), "{refs}");
    // The remote side (receive-pack and its hook, started by the push) is gone too.
    let alive = || {
        let o = Command::new("pgrep")
            .args(["-f", bare.to_str().unwrap()])
            .output()
            .unwrap();
        !o.stdout.is_empty()
    };
    crate::common::poll_until(std::time::Duration::from_secs(30), || !alive());
    assert!(
        !alive(),
        "the remote side of the stopped push is still running"
    );
}
