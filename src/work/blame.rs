//! The repository side of `git forum blame`: the file at a revision, `git blame --porcelain`
//! read into lines, the trailers of the commits it names, and each commit's own diff of the
//! file with its patch id (`git patch-id --stable`), the key by which a change that reached
//! the branch by cherry-pick, rebase or squash merge is found again. Every git output is read
//! up to a bound. Which commit belongs to which entry is the surface's and the report's job.

use std::collections::HashMap;
use std::path::Path;

use super::git::{self, OUTPUT_LIMIT};
use crate::run::WorkError;
use crate::run::workbench::{TRAILER_ENTRY, TRAILER_LEDGER, TRAILER_RUN, TRAILER_TASK};

/// How much of a file git's own binary test reads for a NUL byte.
const BINARY_PROBE: usize = 8000;

/// The file blamed, as the revision holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileAt {
    /// The commit the revision names.
    pub(crate) commit: String,
    /// The path from the repository's top.
    pub(crate) path: String,
    /// Its blob id at that commit.
    pub(crate) blob: String,
    /// How many lines it has.
    pub(crate) lines: u64,
}

/// Why a file cannot be blamed at a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoFile {
    /// The revision names no commit here.
    NoRevision,
    /// The revision does not hold the path as a file.
    NotInRevision,
    /// The file is binary (a NUL byte in its first 8,000 bytes, git's own test).
    Binary,
}

/// One line as `git blame` attributes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlamedLine {
    /// The commit that introduced the line.
    pub(crate) commit: String,
    /// Its number in the file at the revision (1-based).
    pub(crate) line: u64,
    /// Its text, without the line ending.
    pub(crate) text: String,
}

/// What a commit's trailers say ties it to the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Trailers {
    pub(crate) ledger: String,
    pub(crate) run: u64,
    pub(crate) task: u64,
    pub(crate) entry: String,
}

/// One commit's diff of one file: its patch id and the lines it added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FilePatch {
    /// `git patch-id --stable` of the file's part of the commit's diff (none when the commit
    /// did not change the file).
    pub(crate) patch_id: Option<String>,
    /// The lines the diff adds to the file, in order.
    pub(crate) added: Vec<String>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The path `file` (relative to `dir`) from the repository's top.
pub(crate) fn top_path(dir: &Path, file: &str) -> Result<String, WorkError> {
    let prefix = git::ok(dir, &["rev-parse", "--show-prefix"])?;
    let joined = format!("{prefix}{}", file.trim_start_matches("./"));
    // `a/../b` and `./` are folded as git folds a pathspec.
    let mut parts: Vec<&str> = Vec::new();
    for p in joined.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// The file `path` at revision `rev`, or why it cannot be blamed there.
pub(crate) fn file_at(
    dir: &Path,
    rev: &str,
    path: &str,
) -> Result<Result<FileAt, NoFile>, WorkError> {
    let Some(commit) = super::run_diff::commit_of(dir, rev)? else {
        return Ok(Err(NoFile::NoRevision));
    };
    let spec = format!("{commit}:{path}");
    let out = git::run(dir, &["cat-file", "-t", &spec])?;
    if !out.ok || out.text() != "blob" {
        return Ok(Err(NoFile::NotInRevision));
    }
    let blob = git::ok(dir, &["rev-parse", &spec])?;
    let mut cmd = git::git(dir);
    cmd.args(["cat-file", "blob", &blob]);
    let out = git::run_limited(cmd, OUTPUT_LIMIT)?;
    git::ensure(&out, &["cat-file"])?;
    let head = &out.stdout[..out.stdout.len().min(BINARY_PROBE)];
    if head.contains(&0) {
        return Ok(Err(NoFile::Binary));
    }
    let body = &out.stdout;
    let mut lines = body.iter().filter(|b| **b == b'\n').count() as u64;
    if body.last().is_some_and(|b| *b != b'\n') {
        lines += 1;
    }
    Ok(Ok(FileAt {
        commit,
        path: path.to_string(),
        blob,
        lines,
    }))
}

/// `git blame --porcelain` of `path` at `commit`, lines `from..=to`.
pub(crate) fn blame(
    dir: &Path,
    commit: &str,
    path: &str,
    from: u64,
    to: u64,
) -> Result<Vec<BlamedLine>, WorkError> {
    let range = format!("{from},{to}");
    let mut cmd = git::git(dir);
    cmd.args(["blame", "--porcelain", "-L", &range, commit, "--", path]);
    let out = git::run_limited(cmd, OUTPUT_LIMIT)?;
    git::ensure(&out, &["blame"])?;
    Ok(porcelain(&out.stdout))
}

/// The lines of `git blame --porcelain` output: a header `COMMIT ORIG FINAL [COUNT]`, the
/// commit's fields the first time it is named, then the line after a tab.
pub(crate) fn porcelain(out: &[u8]) -> Vec<BlamedLine> {
    let mut lines = Vec::new();
    let mut current: Option<(String, u64)> = None;
    for raw in out.split(|b| *b == b'\n') {
        if let Some(rest) = raw.strip_prefix(b"\t") {
            if let Some((commit, line)) = current.take() {
                lines.push(BlamedLine {
                    commit,
                    line,
                    text: text(rest),
                });
            }
            continue;
        }
        let head = text(raw);
        let mut words = head.split(' ');
        let (Some(id), Some(_orig), Some(fin)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        if id.len() >= 40
            && id.bytes().all(|b| b.is_ascii_hexdigit())
            && let Ok(n) = fin.parse()
        {
            current = Some((id.to_string(), n));
        }
    }
    lines
}

/// Each of `commits`' trailers, when they name a ledger, a run, a task and its entry.
pub(crate) fn trailers(
    dir: &Path,
    commits: &[String],
) -> Result<HashMap<String, Trailers>, WorkError> {
    let mut out = HashMap::new();
    if commits.is_empty() {
        return Ok(out);
    }
    let mut cmd = git::git(dir);
    cmd.args(["show", "-s", "--no-walk=unsorted", "--format=%H%x00%B%x01"]);
    cmd.args(commits);
    let shown = git::run_limited(cmd, OUTPUT_LIMIT)?;
    git::ensure(&shown, &["show"])?;
    for record in shown.stdout.split(|b| *b == 1) {
        let record = text(record);
        let Some((id, message)) = record.trim_start_matches('\n').split_once('\0') else {
            continue;
        };
        if let Some(t) = parse_trailers(message) {
            out.insert(id.to_string(), t);
        }
    }
    Ok(out)
}

/// git forum's trailers in a commit message's last paragraph.
pub(crate) fn parse_trailers(message: &str) -> Option<Trailers> {
    let last = message.trim_end().rsplit("\n\n").next()?;
    let mut found: HashMap<&str, &str> = HashMap::new();
    for line in last.lines() {
        if let Some((k, v)) = line.split_once(':') {
            found.insert(k.trim(), v.trim());
        }
    }
    Some(Trailers {
        ledger: found.get(TRAILER_LEDGER)?.to_string(),
        run: found.get(TRAILER_RUN)?.parse().ok()?,
        task: found.get(TRAILER_TASK)?.parse().ok()?,
        entry: found.get(TRAILER_ENTRY)?.to_string(),
    })
}

/// Which of `ids` are commits in this repository.
pub(crate) fn present(dir: &Path, ids: &[String]) -> Result<Vec<String>, WorkError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut cmd = git::git(dir);
    cmd.args(["cat-file", "--batch-check=%(objectname) %(objecttype)"]);
    let input: String = ids.iter().map(|i| format!("{i}\n")).collect();
    let out = crate::gitproc::output(cmd, Some(input.as_bytes()), OUTPUT_LIMIT as u64)
        .map_err(|e| WorkError::Git(e.to_string()))?;
    Ok(text(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(" commit"))
        .map(str::to_string)
        .collect())
}

/// The blob of `path` in each of `commits` (absent where the commit does not hold it).
pub(crate) fn blobs_at(
    dir: &Path,
    commits: &[String],
    path: &str,
) -> Result<HashMap<String, String>, WorkError> {
    let mut out = HashMap::new();
    if commits.is_empty() {
        return Ok(out);
    }
    let mut cmd = git::git(dir);
    cmd.args(["cat-file", "--batch-check=%(objectname) %(objecttype)"]);
    let input: String = commits.iter().map(|c| format!("{c}:{path}\n")).collect();
    let got = crate::gitproc::output(cmd, Some(input.as_bytes()), OUTPUT_LIMIT as u64)
        .map_err(|e| WorkError::Git(e.to_string()))?;
    for (c, l) in commits.iter().zip(text(&got.stdout).lines()) {
        if let Some(id) = l.strip_suffix(" blob") {
            out.insert(c.clone(), id.to_string());
        }
    }
    Ok(out)
}

/// Each of `commits`' diff of `path` against its first parent: its patch id and the lines it
/// adds. The commits must be in the repository ([`present`]). Two git processes for all of
/// them: `git show` of the file's part of each, then `git patch-id --stable` of that output.
pub(crate) fn file_patches(
    dir: &Path,
    commits: &[String],
    path: &str,
) -> Result<HashMap<String, FilePatch>, WorkError> {
    let mut out: HashMap<String, FilePatch> = HashMap::new();
    if commits.is_empty() {
        return Ok(out);
    }
    let mut cmd = git::git(dir);
    cmd.args([
        "show",
        "--no-walk=unsorted",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--diff-merges=first-parent",
        "--format=commit %H",
        "-p",
    ]);
    cmd.args(commits);
    cmd.args(["--", path]);
    let shown = git::run_limited(cmd, OUTPUT_LIMIT)?;
    git::ensure(&shown, &["show"])?;
    let mut at: Option<String> = None;
    for line in text(&shown.stdout).lines() {
        if let Some(id) = line.strip_prefix("commit ") {
            at = Some(id.to_string());
            out.entry(id.to_string()).or_default();
        } else if let (Some(id), Some(added)) = (&at, line.strip_prefix('+'))
            && !line.starts_with("+++ ")
        {
            out.entry(id.clone())
                .or_default()
                .added
                .push(added.to_string());
        }
    }
    let mut cmd = git::git(dir);
    cmd.args(["patch-id", "--stable"]);
    let ids = crate::gitproc::output(cmd, Some(&shown.stdout), OUTPUT_LIMIT as u64)
        .map_err(|e| WorkError::Git(e.to_string()))?;
    for l in text(&ids.stdout).lines() {
        if let Some((pid, commit)) = l.split_once(' ')
            && let Some(p) = out.get_mut(commit)
        {
            p.patch_id = Some(pid.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_lines_and_trailers_are_read() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let out = format!(
            "{a} 1 1 2\nauthor x\nsummary s\nfilename f\n\tone\n{a} 2 2\n\ttwo\n{b} 5 3 1\nauthor y\nfilename f\n\t\tthree\n"
        );
        let got = porcelain(out.as_bytes());
        let lines: Vec<(&str, u64, &str)> = got
            .iter()
            .map(|l| (&l.commit[..1], l.line, l.text.as_str()))
            .collect();
        assert_eq!(
            lines,
            [("a", 1, "one"), ("a", 2, "two"), ("b", 3, "\tthree")]
        );
        let m =
            "subject\n\nbody\n\nForum-Ledger: main\nForum-Run: 3\nForum-Task: 7\nForum-Entry: ab\n";
        assert_eq!(
            parse_trailers(m),
            Some(Trailers {
                ledger: "main".into(),
                run: 3,
                task: 7,
                entry: "ab".into()
            })
        );
        assert_eq!(parse_trailers("subject\n\nForum-Run: 3\n"), None);
    }
}
