//! The repository's configuration, found and loaded once for every caller (the CLI, the
//! daemon, the MCP server): `.forum/roster.toml`, `.forum/policy.toml` and
//! `.forum/runtime.toml` in the work tree, each replaceable by a file named on the command
//! line, with the built-in roster, no policy limits and no runtime config as the defaults.
//!
//! Files are read with a size cap ([`input`]); a file that cannot be read or parsed is one
//! [`Error`] line naming it. Loading warnings go to stderr.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::exec::config::{self, Flags, Runtime};
use crate::exec::endpoint::Origin;
use crate::policy::Policy;
use crate::roster::{DEFAULT_ROSTER_NAME, DEFAULT_ROSTER_TOML, Roster};

pub(crate) mod dirs;
mod facts;
pub(crate) mod input;

pub(crate) use facts::RealFacts;

/// Files larger than this are refused rather than read (rosters, plans, policies).
pub(crate) const MAX_INPUT_BYTES: u64 = 8 * 1024 * 1024;

/// Why configuration could not be loaded; each message is one line naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Error {
    /// A file could not be read: missing, too large, not UTF-8.
    Unreadable(String),
    /// A roster or policy file that does not parse or does not hold together.
    Invalid(String),
    /// A runtime config or executor flags that do not hold together (bad usage).
    Runtime(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unreadable(m) | Error::Invalid(m) | Error::Runtime(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

/// Reads a text file for a command, with the [`MAX_INPUT_BYTES`] cap and a one-line error
/// naming it (`what`: "roster", "plan file").
pub(crate) fn read_text(path: &Path, what: &str) -> Result<String, Error> {
    input::read_limited_text(path, MAX_INPUT_BYTES, what, "")
        .map_err(|e| Error::Unreadable(e.to_string()))
}

/// The repository's `.forum/NAME` file, when `dir` is inside a work tree that has one.
pub(crate) fn forum_config_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let path = workdir_of(dir)?.join(".forum").join(name);
    path.is_file().then_some(path)
}

/// The work tree `dir` is in. Found once per process for the last directory asked about: a
/// run's start loads the roster, the policy and the runtime config from the same work tree,
/// and finding it opens the repository and reads its configuration files each time. A work
/// tree whose `.git` is gone (or none found) is looked for again.
fn workdir_of(dir: &Path) -> Option<PathBuf> {
    static LAST: std::sync::Mutex<Option<(PathBuf, PathBuf)>> = std::sync::Mutex::new(None);
    // Keyed by the directory itself, not by how it was named ("." follows the current one).
    let key = dir.canonicalize().ok()?;
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((d, w)) = &*last
        && *d == key
        && w.join(".git").exists()
    {
        return Some(w.clone());
    }
    let repo = crate::store::git::open_repo(dir).ok()?;
    let w = repo.workdir()?.to_path_buf();
    *last = Some((key, w.clone()));
    Some(w)
}

/// Loads the roster: `flag` (`--roster FILE`), else `.forum/roster.toml`, else the built-in
/// one. Loading warnings go to stderr.
pub(crate) fn load_roster(dir: &Path, flag: Option<&Path>) -> Result<Roster, Error> {
    let path = match flag {
        Some(p) => Some(p.to_path_buf()),
        None => forum_config_file(dir, "roster.toml"),
    };
    let roster = match path {
        Some(p) => {
            let text = read_text(&p, "roster")?;
            Roster::from_toml_str(&text, &p.display().to_string())
        }
        None => Roster::from_toml_str(DEFAULT_ROSTER_TOML, DEFAULT_ROSTER_NAME),
    }
    .map_err(|e| Error::Invalid(e.to_string()))?;
    for w in roster.warnings() {
        eprintln!("warning: {w}");
    }
    Ok(roster)
}

/// Loads the policy: `flag` (`--policy FILE`), else `.forum/policy.toml`, else no limits.
pub(crate) fn load_policy(dir: &Path, flag: Option<&Path>) -> Result<Policy, Error> {
    let path = match flag {
        Some(p) => Some(p.to_path_buf()),
        None => forum_config_file(dir, "policy.toml"),
    };
    match path {
        None => Ok(Policy::default()),
        Some(p) => {
            let text = read_text(&p, "policy")?;
            Policy::from_toml_str(&text, &p.display().to_string())
                .map_err(|e| Error::Invalid(e.to_string()))
        }
    }
}

/// A runtime config as loaded: the merged runtime and where its file came from.
pub(crate) struct Loaded {
    /// The merged runtime.
    pub(crate) runtime: Runtime,
    /// The file read, if any, and how it is trusted.
    pub(crate) source: Option<(PathBuf, Origin)>,
}

/// Reads the runtime config (`file`, from `--runtime-config FILE`, else `.forum/runtime.toml`)
/// and merges `flags` over it. A bad config or bad flags are [`Error::Runtime`]; warnings go
/// to stderr.
pub(crate) fn load_runtime(
    dir: &Path,
    file: Option<&Path>,
    flags: &Flags,
) -> Result<Loaded, Error> {
    let source = match file {
        Some(p) => Some((p.to_path_buf(), Origin::UserFile)),
        None => forum_config_file(dir, "runtime.toml").map(|p| (p, Origin::RepoConfig)),
    };
    let parsed = match &source {
        Some((path, origin)) => {
            let text = read_text(path, "runtime config")?;
            let name = match origin {
                Origin::RepoConfig => config::REPO_CONFIG_PATH.to_string(),
                _ => path.display().to_string(),
            };
            Some(
                config::parse_runtime_config(&text, &name, *origin)
                    .map_err(|e| Error::Runtime(e.to_string()))?,
            )
        }
        None => None,
    };
    let runtime = config::merge(parsed, flags).map_err(|e| Error::Runtime(e.to_string()))?;
    for w in &runtime.warnings {
        eprintln!("warning: {w}");
    }
    Ok(Loaded { runtime, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_repository_the_defaults_apply() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(forum_config_file(dir.path(), "roster.toml"), None);
        let roster = load_roster(dir.path(), None).unwrap();
        assert!(!roster.is_empty());
        assert!(
            load_runtime(dir.path(), None, &Flags::default())
                .unwrap()
                .source
                .is_none()
        );
    }

    #[test]
    fn each_work_tree_finds_its_own_files_however_the_lookups_alternate() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for d in [a.path(), b.path()] {
            let out = crate::gitproc::in_dir(d)
                .args(["init", "-q"])
                .output()
                .unwrap();
            assert!(out.status.success());
            std::fs::create_dir(d.join(".forum")).unwrap();
        }
        std::fs::write(a.path().join(".forum/roster.toml"), "").unwrap();
        std::fs::write(b.path().join(".forum/policy.toml"), "").unwrap();
        let sub = a.path().join("src");
        std::fs::create_dir(&sub).unwrap();
        for _ in 0..2 {
            assert!(forum_config_file(a.path(), "roster.toml").is_some());
            assert!(forum_config_file(&sub, "roster.toml").is_some());
            assert!(forum_config_file(b.path(), "roster.toml").is_none());
            assert!(forum_config_file(b.path(), "policy.toml").is_some());
        }
        // A file removed, or the whole repository, is seen at once.
        std::fs::remove_file(b.path().join(".forum/policy.toml")).unwrap();
        assert!(forum_config_file(b.path(), "policy.toml").is_none());
        assert!(forum_config_file(a.path(), "roster.toml").is_some());
        std::fs::remove_dir_all(a.path().join(".git")).unwrap();
        assert_eq!(forum_config_file(a.path(), "roster.toml"), None);
    }

    #[test]
    fn an_unreadable_file_is_one_line_naming_it_and_its_class_decides_the_code() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let e = load_roster(dir.path(), Some(&missing)).unwrap_err();
        assert!(matches!(e, Error::Unreadable(_)), "{e:?}");
        assert!(e.to_string().contains("nope.toml"), "{e}");
        assert!(!e.to_string().contains('\n'));
        let s: crate::surface::Error = e.into();
        assert_eq!(s.class.exit_code(), 1);
        let bad = dir.path().join("runtime.toml");
        std::fs::write(&bad, "this is = = not toml").unwrap();
        let Err(e) = load_runtime(dir.path(), Some(&bad), &Flags::default()) else {
            panic!("a bad runtime config loaded");
        };
        assert!(matches!(e, Error::Runtime(_)), "{e:?}");
        let s: crate::surface::Error = e.into();
        assert_eq!(s.class.exit_code(), 2);
    }
}
