//! The sandbox of a worker's tasks: the worker's jail (bubblewrap, resolved once when the
//! worker starts, from its clone's `.forum/runtime.toml` and its flags as a local `--work` run
//! resolves its own) confined to each task's worktree, showing what a local task's sandbox
//! shows of the repository (`crate::work::view`: the worktree's admin directory, the objects
//! and refs, a configuration stripped of credentials and commands, all read-only); and what a
//! result says of it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::git_line;
use crate::exec::sandbox::Record;
use crate::exec::sandbox::probe::Jail;

/// What a result's `confinement` says for a worker whose sandbox `record` describes: `bwrap`
/// (`bwrap+net` when its commands keep the network), or `unconfined: REASON`.
pub(crate) fn claim(record: &Record) -> String {
    match record {
        Record::Confined { net: false, .. } => "bwrap".into(),
        Record::Confined { net: true, .. } => "bwrap+net".into(),
        Record::Unconfined { reason } => format!("unconfined: {reason}"),
    }
}

/// The jail a task's commands in the worktree `tree` (whose admin directory is `admin`) of
/// the clone `repo` run in (`None`: the worker runs unconfined); the stripped configuration
/// it shows is written into `private`, a folder outside the worktree that nothing inside sees.
pub(crate) fn jail_for(
    jail: Option<&Arc<Jail>>,
    repo: &Path,
    tree: &Path,
    admin: &Path,
    private: &Path,
) -> Result<Option<Arc<Jail>>, String> {
    let Some(jail) = jail else {
        return Ok(None);
    };
    let common = absolute(repo, &git_line(repo, &["rev-parse", "--git-common-dir"])?)?;
    let admin = absolute(tree, &admin.to_string_lossy())?;
    std::fs::create_dir_all(private)
        .map_err(|e| format!("cannot make {}: {e}", private.display()))?;
    let config = crate::work::view::write_config(&common, private).map_err(|e| e.to_string())?;
    let shows = crate::work::view::binds(&common, &admin, &config);
    Ok(Some(Arc::new(jail.for_tree(tree, &shows))))
}

/// `path` as git printed it in `dir`, made absolute and canonical.
fn absolute(dir: &Path, path: &str) -> Result<PathBuf, String> {
    let p = Path::new(path);
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    };
    full.canonicalize()
        .map_err(|e| format!("cannot find {}: {e}", full.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_names_the_sandbox_or_why_there_was_none() {
        let confined = |net| Record::Confined {
            net,
            read: Vec::new(),
            allow_hosts: Vec::new(),
            bound: Vec::new(),
        };
        assert_eq!(claim(&confined(false)), "bwrap");
        assert_eq!(claim(&confined(true)), "bwrap+net");
        let off = Record::Unconfined {
            reason: "--no-sandbox".into(),
        };
        assert_eq!(claim(&off), "unconfined: --no-sandbox");
    }
}
