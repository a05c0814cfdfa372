//! Where git forum keeps what belongs to the user rather than to one repository: the task
//! worktrees of `--work` runs and the daemon's credentials.
//!
//! Neither may live inside the repository's git dir: agents such as Claude Code refuse to edit
//! any path under `.git/`, and whatever sits there is visible to a worker that can read the git
//! metadata of its own worktree. Both roots are per user and made mode 0700.
//!
//! * The cache root: `$GIT_FORUM_CACHE_DIR`, else `$XDG_CACHE_HOME/git-forum`, else
//!   `$HOME/.cache/git-forum`.
//! * The state root, for secrets such as the daemon's token: `$GIT_FORUM_STATE_DIR`, else
//!   `$XDG_RUNTIME_DIR/git-forum` (a per-user tmpfs that ends with the session), else
//!   `$XDG_STATE_HOME/git-forum`, else `$HOME/.local/state/git-forum`.
//!
//! Each clone gets its own directory under a root, named by [`clone_key`]: the clone's
//! directory name (for a person looking) and a hash of its git common dir's absolute path (so
//! two clones never share one), with the common dir's path written in a `clone` file beside it
//! so a clone that no longer exists can be recognised and its directory removed.

use std::path::{Path, PathBuf};

use crate::ledger::hash::sha256_hex;

/// The variable that overrides the cache root.
pub(crate) const CACHE_ENV: &str = "GIT_FORUM_CACHE_DIR";
/// The variable that overrides the state root.
pub(crate) const STATE_ENV: &str = "GIT_FORUM_STATE_DIR";
/// The file in each clone's directory that names the clone's git common dir.
pub(crate) const CLONE_FILE: &str = "clone";

fn var(k: &str) -> Option<PathBuf> {
    std::env::var_os(k)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// None of the variables that name a root is set to an absolute path: `what` the root is for,
/// and the variables, in the order they are tried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no directory for {what}: set one of {} to an absolute path", .names.join(", "))]
pub struct NoRootError {
    what: &'static str,
    names: Vec<&'static str>,
}

/// The first of `candidates` that is set, joined with its suffix, or the error naming them.
fn first(
    candidates: &[(&'static str, &[&str])],
    what: &'static str,
) -> Result<PathBuf, NoRootError> {
    for (name, suffix) in candidates {
        if let Some(mut p) = var(name) {
            for s in *suffix {
                p.push(s);
            }
            return Ok(p);
        }
    }
    Err(NoRootError {
        what,
        names: candidates.iter().map(|(n, _)| *n).collect(),
    })
}

/// The cache root (see the module doc); not created.
pub(crate) fn cache_root() -> Result<PathBuf, NoRootError> {
    first(
        &[
            (CACHE_ENV, &[]),
            ("XDG_CACHE_HOME", &["git-forum"]),
            ("HOME", &[".cache", "git-forum"]),
        ],
        "git forum's cache",
    )
}

/// The state root (see the module doc); not created.
pub(crate) fn state_root() -> Result<PathBuf, NoRootError> {
    first(
        &[
            (STATE_ENV, &[]),
            ("XDG_RUNTIME_DIR", &["git-forum"]),
            ("XDG_STATE_HOME", &["git-forum"]),
            ("HOME", &[".local", "state", "git-forum"]),
        ],
        "git forum's state",
    )
}

/// The directory name of the clone whose git common dir is `common` (absolute): its work
/// tree's name (or the common dir's own), cut to 40 safe characters, then 16 hex digits of the
/// SHA-256 of the common dir's path.
pub(crate) fn clone_key(common: &Path) -> String {
    let named = if common.file_name().is_some_and(|n| n == ".git") {
        common.parent().and_then(Path::file_name)
    } else {
        common.file_name()
    };
    let name: String = named
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    use std::os::unix::ffi::OsStrExt;
    let hash = sha256_hex(common.as_os_str().as_bytes());
    let name = name.trim_start_matches(['-', '_']);
    if name.is_empty() {
        hash[..16].to_string()
    } else {
        format!("{name}-{}", &hash[..16])
    }
}

/// Creates `dir` and its missing parents, each new one mode 0700.
pub(crate) fn create_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The directory of the clone whose common dir is `common` under `root`, created (0700), with
/// its `clone` file naming `common`.
pub(crate) fn clone_dir(root: &Path, common: &Path) -> std::io::Result<PathBuf> {
    let dir = root.join(clone_key(common));
    create_private(&dir)?;
    let file = dir.join(CLONE_FILE);
    use std::os::unix::ffi::OsStrExt;
    let want = common.as_os_str().as_bytes();
    if std::fs::read(&file).ok().as_deref() != Some(want) {
        let tmp = dir.join(format!(".{CLONE_FILE}.{}", std::process::id()));
        std::fs::write(&tmp, want)?;
        std::fs::rename(&tmp, &file)?;
    }
    Ok(dir)
}

/// The clone a directory made by [`clone_dir`] belongs to (its common dir), when its `clone`
/// file names one.
pub(crate) fn clone_of(dir: &Path) -> Option<PathBuf> {
    let bytes =
        crate::config::input::read_limited(&dir.join(CLONE_FILE), 4096, "clone file", "").ok()?;
    use std::os::unix::ffi::OsStringExt;
    let p = PathBuf::from(std::ffi::OsString::from_vec(bytes));
    p.is_absolute().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_key_names_the_clone_and_hashes_its_path() {
        let a = clone_key(Path::new("/home/u/src/my repo/.git"));
        assert!(a.starts_with("my_repo-"), "{a}");
        assert_eq!(a.len(), "my_repo-".len() + 16);
        assert_ne!(a, clone_key(Path::new("/home/v/src/my repo/.git")));
        assert!(clone_key(Path::new("/srv/x.git")).starts_with("x_git-"));
        assert_eq!(clone_key(Path::new("/.git")).len(), 16);
    }
}
