//! `git forum diff`: a run's change against the commit it started from, read from the
//! repository with `git diff` (no external diff, no textconv, no colour: the command line
//! colours it). Which commits to compare is the surface's choice; this side resolves refs,
//! says whether a commit is present, and diffs.

use std::path::Path;

use super::git;
use crate::run::{FileChange, WorkError};

/// The most of a run's patch read into memory; past it the patch is cut and says so.
pub(crate) const PATCH_CAP: usize = 8 << 20;

/// A run's change between two commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunDiff {
    /// The files changed, sorted by path, with their lines.
    pub(crate) files: Vec<FileChange>,
    /// The unified diff (empty when not asked for).
    pub(crate) patch: String,
    /// Whether the patch was cut at [`PATCH_CAP`].
    pub(crate) truncated: bool,
}

/// The commit `rev` names in the repository at `repo`, or `None` when it names none here.
pub(crate) fn commit_of(repo: &Path, rev: &str) -> Result<Option<String>, WorkError> {
    let spec = format!("{rev}^{{commit}}");
    let out = git::run(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ],
    )?;
    Ok((out.ok && !out.stdout.is_empty()).then(|| out.text()))
}

/// Whether commit `a` is an ancestor of (or is) commit `b`.
pub(crate) fn contains(repo: &Path, a: &str, b: &str) -> Result<bool, WorkError> {
    let out = git::run(repo, &["merge-base", "--is-ancestor", a, b])?;
    match out.code {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => git::ensure(&out, &["merge-base"]).map(|_| false),
    }
}

/// The change from commit `base` to commit `tip` in the repository at `repo`, limited to
/// `paths` (git pathspecs, relative to `repo`) when any are given; with `patch`, the unified
/// diff too, read up to [`PATCH_CAP`].
pub(crate) fn diff(
    repo: &Path,
    base: &str,
    tip: &str,
    paths: &[String],
    patch: bool,
) -> Result<RunDiff, WorkError> {
    let mut cmd = git::git(repo);
    cmd.args(super::STAT_DIFF);
    if patch {
        cmd.arg("--patch");
    }
    cmd.args([base, tip, "--"]);
    cmd.args(paths);
    let (stats, out) = git::run_split(cmd, PATCH_CAP)?;
    if !out.cut {
        git::ensure(&out, &["diff"])?;
    }
    let (text, cut) = git::cut_text(&out.stdout, PATCH_CAP);
    Ok(RunDiff {
        files: super::diff::files(&stats),
        patch: if patch { text } else { String::new() },
        truncated: patch && (cut || out.cut),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = crate::gitproc::command()
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    #[test]
    fn a_diff_lists_its_files_and_lines_and_honours_paths() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q", "-b", "main"]);
        std::fs::write(d.join("a.txt"), "one\n").unwrap();
        std::fs::write(d.join("b.txt"), "two\n").unwrap();
        git(d, &["add", "."]);
        git(d, &["commit", "-q", "-m", "base"]);
        let base = git(d, &["rev-parse", "HEAD"]);
        std::fs::write(d.join("a.txt"), "one\nmore\n").unwrap();
        std::fs::remove_file(d.join("b.txt")).unwrap();
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "change"]);
        let tip = git(d, &["rev-parse", "HEAD"]);

        let all = diff(d, &base, &tip, &[], true).unwrap();
        let got: Vec<(&str, &str, u64, u64)> = all
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.status.as_str(), f.added, f.removed))
            .collect();
        assert_eq!(got, [("a.txt", "M", 1, 0), ("b.txt", "D", 0, 1)]);
        assert!(all.patch.contains("+more\n"), "{}", all.patch);
        assert!(!all.truncated);

        let some = diff(d, &base, &tip, &["b.txt".into()], false).unwrap();
        assert_eq!(some.files.len(), 1);
        assert_eq!(some.files[0].path, "b.txt");
        assert_eq!(some.patch, "");

        assert_eq!(commit_of(d, &tip).unwrap().as_deref(), Some(tip.as_str()));
        assert_eq!(commit_of(d, "refs/heads/nope").unwrap(), None);
        assert!(contains(d, &base, &tip).unwrap());
        assert!(!contains(d, &tip, &base).unwrap());
    }
}
