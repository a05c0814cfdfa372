//! The refs git forum keeps beside a ledger (signed checkpoints, checkpoint notes, tiles): each
//! a chain of commits written and read through `git` itself, so that every ref storage git has
//! (files, packed refs, reftable) holds them.

use std::path::Path;

use super::error::StoreError;

/// The commit `refname` names in the repository at `git_dir`, or `None` when there is no such
/// ref. Asked of git itself (`git rev-parse --verify`), never of gix: gix cannot read a reftable
/// repository's refs, where a signatures ref would look absent and so never travel or verify.
pub(crate) fn ref_target(git_dir: &Path, refname: &str) -> Result<Option<String>, StoreError> {
    let o = super::refs::git_at(git_dir)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(refname)
        .output()
        .map_err(super::error::io("cannot run git rev-parse"))?;
    if o.status.success() {
        let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
        return Ok((!id.is_empty()).then_some(id));
    }
    if o.stderr.is_empty() {
        return Ok(None);
    }
    Err(StoreError::Git(format!(
        "cannot read {refname}: {}",
        String::from_utf8_lossy(&o.stderr)
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("git rev-parse failed")
            .trim()
    )))
}

pub(crate) fn git_ok(
    dir: &Path,
    args: &[&str],
    input: Option<&[u8]>,
) -> Result<String, StoreError> {
    let mut cmd = crate::gitproc::in_dir(dir);
    cmd.args(args);
    let out = crate::gitproc::output(cmd, input, crate::gitproc::OUTPUT_LIMIT)?;
    if !out.status.success() {
        return Err(StoreError::Git(format!(
            "git {} failed: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The first-parent history of `refname` in the git directory `gd`, oldest first, one
/// `COMMIT SUBJECT` line per commit: how signed checkpoints and notes are listed.
pub(crate) fn ref_history(gd: &str, refname: &str) -> Result<String, StoreError> {
    git_ok(
        Path::new("."),
        &[
            "--git-dir",
            gd,
            "log",
            "--first-parent",
            "--reverse",
            "--format=%H %s",
            refname,
            "--",
        ],
        None,
    )
}

/// Writes `files` (name, content) as one commit on `refname` in the git directory `gd`, on top
/// of its current tip (compare-and-swap: a ref moved meanwhile refuses the update), with
/// `message` and the reflog line `why`. Signed checkpoints and checkpoint notes are stored so.
pub(crate) fn commit_on_ref(
    gd: &str,
    refname: &str,
    files: &[(&str, &[u8])],
    message: &str,
    why: &str,
) -> Result<(), StoreError> {
    let git = |args: &[&str], input: Option<&[u8]>| git_ok(Path::new("."), args, input);
    let mut tree_text = String::new();
    for (name, content) in files {
        let blob = git(
            &["--git-dir", gd, "hash-object", "-w", "--stdin"],
            Some(content),
        )?;
        tree_text.push_str(&format!("100644 blob {blob}\t{name}\n"));
    }
    let tree = git(&["--git-dir", gd, "mktree"], Some(tree_text.as_bytes()))?;
    let parent = git(
        &["--git-dir", gd, "rev-parse", "--verify", "-q", refname],
        None,
    )
    .ok();
    let mut args = vec![
        "--git-dir",
        gd,
        "-c",
        "user.name=git-forum",
        "-c",
        "user.email=ledger@git-forum.invalid",
        "commit-tree",
        &tree,
    ];
    if let Some(p) = &parent {
        args.extend(["-p", p.as_str()]);
    }
    let commit = git(&args, Some(message.as_bytes()))?;
    let zero = "0".repeat(commit.len());
    git(
        &[
            "--git-dir",
            gd,
            "update-ref",
            "-m",
            why,
            refname,
            &commit,
            parent.as_deref().unwrap_or(&zero),
        ],
        None,
    )?;
    Ok(())
}
