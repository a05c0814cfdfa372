//! Scratch directories: temporary directories that only this user can read.
//!
//! A worker's task checkout, the worktrees `reproduce` replays in, the objects a replay merges
//! into, a pack copied for `doctor --from-pack` and the egress proxy's sockets all hold the
//! repository's files or a way into the user's network. `tempfile` makes a directory with the
//! process's default mode (0755 under the usual umask), so anyone on the machine could read
//! what lay in `/tmp` while it was there, or after a process killed outright left it behind.
//! Every such directory is made here instead, with mode 0700 from its creation on (no window
//! between a wider mkdir and a chmod). A structure test (`scratch_dirs`) keeps other code from
//! making one another way.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use tempfile::TempDir;

/// A new private (0700) directory in the system's temporary folder, named `PREFIX…`, removed
/// when the returned value is dropped.
pub(crate) fn dir(prefix: &str) -> std::io::Result<TempDir> {
    dir_in(prefix, &std::env::temp_dir())
}

/// A new private (0700) directory in `parent`, named `PREFIX…`, removed when dropped.
pub(crate) fn dir_in(prefix: &str, parent: &Path) -> std::io::Result<TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_scratch_directory_is_the_owners_alone_and_goes_when_dropped() {
        let parent = tempfile::tempdir().unwrap();
        let d = super::dir_in("forum-test-", parent.path()).unwrap();
        let name = d.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("forum-test-"), "{name}");
        let mode = std::fs::metadata(d.path()).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{mode:o}");
        let path = d.path().to_path_buf();
        drop(d);
        assert!(!path.exists());
        let t = super::dir("forum-test-").unwrap();
        assert!(t.path().starts_with(std::env::temp_dir()));
        let mode = std::fs::metadata(t.path()).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{mode:o}");
    }
}
