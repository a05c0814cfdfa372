//! The daemon's credential: a 256-bit random token in a file only the user can read, outside
//! the repository's git dir and every path a `--work` sandbox shows.
//!
//! A worker confined to its worktree still sees the repository's git metadata (its worktree's
//! `.git` link leads there), so a token under `.git/` is a token the worker holds. The file
//! lives instead under git forum's state root ([`crate::config::dirs::state_root`]: usually
//! `$XDG_RUNTIME_DIR/git-forum`), in the clone's own directory
//! ([`crate::config::dirs::clone_dir`], mode 0700), as `serve-token` (mode 0600). Every daemon
//! of one clone shares it: the first one to start makes it, later ones (and restarts) read it,
//! so a client that read the file once keeps working. Deleting the file and restarting the
//! daemons makes a new one.
//!
//! The file is trusted only when it is a regular file (never followed through a symlink), owned
//! by this user, readable by nobody else, and holds exactly 64 lowercase hex digits: anything
//! else is replaced by a fresh token, since a token others could read is no secret. A token
//! file left by older versions under `.git/forum/serve-token` is removed on sight.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::config::dirs;

/// The token file's name in the clone's state directory.
pub const FILE: &str = "serve-token";

/// Where earlier versions kept the token (inside the git dir, where a sandboxed worker could
/// read it), relative to the git common dir.
const LEGACY: &str = "forum/serve-token";

/// Hex digits in a token (256 bits).
const LEN: usize = 64;

/// Why the token file's place cannot be had. Each message is one line naming the path and
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum TokenPathError {
    /// No state root is configured or derivable.
    #[error(transparent)]
    NoRoot(#[from] dirs::NoRootError),
    /// The clone's directory under the state root could not be made.
    #[error(
        "cannot make the token directory under {}: {source} (set {} to a directory of yours)",
        root.display(),
        dirs::STATE_ENV
    )]
    MakeDir {
        root: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The directory's metadata could not be read.
    #[error("cannot read {}: {source}", dir.display())]
    ReadDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The directory is a link, a file, or another user's.
    #[error(
        "{} is not a directory of this user: the daemon's token cannot be kept there (set {} to a directory of yours)",
        dir.display(),
        dirs::STATE_ENV
    )]
    NotOurs { dir: PathBuf },
    /// The directory could not be narrowed to 0700.
    #[error("cannot make {} private: {source}", dir.display())]
    MakePrivate {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// No repository contains the directory given.
    #[error(transparent)]
    Repo(#[from] crate::surface::store::StoreError),
    /// The git common dir could not be made absolute.
    #[error("cannot resolve the git dir {}: {source}", common.display())]
    ResolveCommon {
        common: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The token file of the clone whose git common dir is `common` (absolute), with its directory
/// made private (created 0700; an existing one of this user narrowed to 0700). Errors are one
/// line naming the path and what to do.
pub fn path_for(common: &Path) -> Result<PathBuf, TokenPathError> {
    let root = dirs::state_root()?;
    let dir = dirs::clone_dir(&root, common)
        .map_err(|source| TokenPathError::MakeDir { root, source })?;
    let meta = std::fs::symlink_metadata(&dir).map_err(|source| TokenPathError::ReadDir {
        dir: dir.clone(),
        source,
    })?;
    if !meta.is_dir() || meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(TokenPathError::NotOurs { dir });
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| TokenPathError::MakePrivate {
                dir: dir.clone(),
                source,
            },
        )?;
    }
    Ok(dir.join(FILE))
}

/// The token file of the repository that contains `dir` (as [`path_for`] its common dir).
pub fn path_for_repo(dir: &Path) -> Result<PathBuf, TokenPathError> {
    let repo = crate::surface::store::open_repo(dir)?;
    path_for(&common_dir(&repo)?)
}

/// The absolute git common dir of `repo`.
pub(crate) fn common_dir(repo: &gix::Repository) -> Result<PathBuf, TokenPathError> {
    let common = repo.common_dir();
    std::fs::canonicalize(common).map_err(|source| TokenPathError::ResolveCommon {
        common: common.to_path_buf(),
        source,
    })
}

/// Removes the token file older versions wrote under the git dir, where a sandboxed worker
/// can read it. Returns its path when there was one.
pub(crate) fn remove_legacy(common: &Path) -> Option<PathBuf> {
    let p = common.join(LEGACY);
    std::fs::symlink_metadata(&p).ok()?;
    std::fs::remove_file(&p).ok()?;
    Some(p)
}

/// Whether `text` is a token as [`new_token`] writes it.
fn well_formed(text: &str) -> bool {
    text.len() == LEN
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Reads the token at `path`: `Ok(None)` when there is no file, or one that cannot be trusted
/// (not a regular file of this user, readable by others, or not a token).
pub fn read(path: &Path) -> std::io::Result<Option<String>> {
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // A symlink (ELOOP) or something else in the way: not ours to trust.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    if !meta.is_file()
        || meta.uid() != rustix::process::geteuid().as_raw()
        || meta.mode() & 0o077 != 0
    {
        return Ok(None);
    }
    let mut text = String::new();
    if f.take(LEN as u64 + 2).read_to_string(&mut text).is_err() {
        return Ok(None);
    }
    let t = text.strip_suffix('\n').unwrap_or(&text);
    Ok(well_formed(t).then(|| t.to_string()))
}

/// A fresh 256-bit token from the operating system's generator, as 64 hex digits.
pub(crate) fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The token at `path`, made first when there is none that can be trusted. A new file appears
/// whole (written beside it, then hard-linked into place), so a daemon starting at the same
/// moment reads either nothing or the whole token, and the two end up sharing one.
pub fn load_or_create(path: &Path) -> std::io::Result<String> {
    for _ in 0..4 {
        if let Some(t) = read(path)? {
            return Ok(t);
        }
        // Something untrusted (or nothing) is there: replace it.
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let token = new_token()?;
        let tmp = path.with_file_name(format!(".{FILE}.{}.{}", std::process::id(), &token[..8]));
        let written = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(format!("{token}\n").as_bytes())?;
            f.sync_all()?;
            std::fs::hard_link(&tmp, path)
        })();
        let _ = std::fs::remove_file(&tmp);
        match written {
            Ok(()) => {
                if let Some(dir) = path.parent()
                    && let Ok(d) = std::fs::File::open(dir)
                {
                    let _ = d.sync_all();
                }
                return Ok(token);
            }
            // Another daemon made it first: read theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!(
        "{} keeps changing under us",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_made_once_private_and_shared() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE);
        assert_eq!(read(&p).unwrap(), None);
        let t = load_or_create(&p).unwrap();
        assert!(well_formed(&t), "{t}");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), format!("{t}\n"));
        // A second daemon reads the same one.
        assert_eq!(load_or_create(&p).unwrap(), t);
        assert_ne!(new_token().unwrap(), t);
        // Only the token file is left: the temporary one is gone.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(FILE)]);
    }

    #[test]
    fn an_untrusted_token_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(FILE);
        // Readable by others: no longer a secret.
        let t = load_or_create(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read(&p).unwrap(), None);
        let t2 = load_or_create(&p).unwrap();
        assert_ne!(t2, t);
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Not a token.
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "guessable\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read(&p).unwrap(), None);
        assert!(well_formed(&load_or_create(&p).unwrap()));
        // A symlink to someone else's file is never followed.
        let other = dir.path().join("other");
        std::fs::write(&other, format!("{}\n", "a".repeat(64))).unwrap();
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&other, &p).unwrap();
        assert_eq!(read(&p).unwrap(), None);
        let t3 = load_or_create(&p).unwrap();
        assert_ne!(t3, "a".repeat(64));
        assert!(!std::fs::symlink_metadata(&p).unwrap().is_symlink());
    }
}
