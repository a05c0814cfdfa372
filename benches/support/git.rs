//! `git` as the benches run it: a hermetic environment (no user or system config, a fixed
//! identity, `HOME` at the directory given) and a panic with git's own words on failure.

use std::path::Path;
use std::process::Command;

/// Clears what would point git elsewhere and pins its configuration and identity.
pub fn hermetic(c: &mut Command, home: &Path) {
    c.env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_FORUM_LEDGER")
        .env("HOME", home)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid");
}

/// Runs `git ARGS` in `dir`, which must succeed.
pub fn git(dir: &Path, args: &[&str]) {
    let mut c = Command::new("git");
    hermetic(&mut c, dir);
    let o = c.current_dir(dir).args(args).output().expect("git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
