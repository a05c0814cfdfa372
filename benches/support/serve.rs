//! `git forum serve` as the benches start it: a hermetic environment (no user or system git
//! configuration, state and caches under the bench's directory), the daemon on a free port,
//! its address and token read from the two lines it prints, and the process killed on drop.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Clears what would point git or git forum elsewhere and keeps their state under `home`.
pub fn hermetic(c: &mut Command, home: &Path) {
    c.env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_FORUM_LEDGER")
        .env_remove("GIT_FORUM_TIMESTAMP")
        .env("HOME", home)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_FORUM_STATE_DIR", home.join(".forum-state"))
        .env("GIT_FORUM_CACHE_DIR", home.join(".forum-cache"))
        .current_dir(home);
}

/// A started daemon, killed (and reaped) when dropped.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `git forum BEFORE serve --port 0 ARGS` in `dir` (its stderr shown or dropped):
/// the daemon, its address and its token. `GIT_FORUM_BENCH_DAEMON` names another `git-forum`
/// binary to serve with (to compare two builds in alternating runs of one bench binary).
pub fn start(
    dir: &Path,
    before: &[&str],
    args: &[&str],
    stderr: Stdio,
) -> (Daemon, String, String) {
    let bin = std::env::var_os("GIT_FORUM_BENCH_DAEMON")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_git-forum").into());
    let mut c = Command::new(bin);
    hermetic(&mut c, dir);
    c.args(before)
        .args(["serve", "--port", "0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr);
    let mut daemon = Daemon(c.spawn().expect("start git forum serve"));
    let mut out = BufReader::new(daemon.0.stdout.take().unwrap());
    let (mut first, mut second) = (String::new(), String::new());
    out.read_line(&mut first).unwrap();
    out.read_line(&mut second).unwrap();
    let addr = first
        .trim()
        .strip_prefix("listening http://")
        .expect("the listening line")
        .to_string();
    let file = second
        .trim_end_matches('\n')
        .strip_prefix("token-file ")
        .expect("the token-file line");
    let token = std::fs::read_to_string(file).expect("read the token file");
    (daemon, addr, token.trim().to_string())
}
