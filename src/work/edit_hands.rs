//! The editing worker's hands in one task's worktree: carries out the
//! [`Op`]s of `crate::run::edit_tools` on the file system. Paths arrive already confined as strings
//! (no `..`, not absolute, not `.git`); here each is joined to the worktree and the part of
//! it that exists is resolved (`canonicalize`), so a symlink that leads out of the worktree is
//! refused too. Writes go through a temporary file and a rename. A unified diff is applied by
//! `git apply` (which itself refuses paths beyond a symlink); an allowed command runs through
//! the check runner (`check::run_check`: its own process group, a deadline, the output tail).
//!
//! `search` is a plain substring walk written here: the tree is one task's worktree, small, and
//! pulling a grep crate in for a literal match is not worth it.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::run::edit_tools::{Hands, MODEL_OUTPUT_CAP, Op, Outcome};

/// Files `list_files` names at most.
const MAX_LIST: usize = 500;
/// Matches `search` returns at most.
const MAX_MATCHES: usize = 100;
/// Bytes of one file `read_file` and `search` read at most.
const MAX_FILE_READ: u64 = 2 * 1024 * 1024;

/// Why a file's text cannot be read for the model (the part after `cannot read "PATH": `).
#[derive(Debug, thiserror::Error)]
enum ReadTextError {
    /// Opening or inspecting it failed.
    #[error("{0}")]
    Open(#[source] rustix::io::Errno),
    /// A FIFO, device, directory or socket.
    #[error("not a regular file")]
    NotRegular,
    /// Reading it failed.
    #[error("{0}")]
    Read(#[source] std::io::Error),
    /// Its bytes are not UTF-8.
    #[error("not a UTF-8 text file")]
    NotText,
}

/// The hands of one task: its worktree and the commands it may run.
pub(super) struct TreeHands {
    root: PathBuf,
    /// The worktree's git admin directory as git forum made it: `git apply` is given it (and
    /// the worktree) explicitly, never the `.git` link a command may have rewritten.
    admin: PathBuf,
    commands: Vec<String>,
    deadline: Duration,
    cap: usize,
}

impl TreeHands {
    /// Hands in `root` (resolved once), allowed to run `commands`.
    pub(super) fn new(
        root: &Path,
        admin: &Path,
        commands: Vec<String>,
        deadline: Duration,
        cap: usize,
    ) -> TreeHands {
        TreeHands {
            root: fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
            admin: admin.to_path_buf(),
            commands,
            deadline,
            cap,
        }
    }

    /// `rel` inside the worktree, or a refusal when what exists of it resolves outside.
    fn resolve(&self, rel: &str) -> Result<PathBuf, Outcome> {
        let full = if rel == "." {
            self.root.clone()
        } else {
            self.root.join(rel)
        };
        // The deepest part that exists decides where the path really leads.
        let mut probe = full.clone();
        loop {
            if fs::symlink_metadata(&probe).is_ok() {
                break;
            }
            if !probe.pop() {
                break;
            }
        }
        match fs::canonicalize(&probe) {
            Ok(real) if real.starts_with(&self.root) => Ok(full),
            Ok(_) => Err(Outcome::refused(format!(
                "refused: the path {rel:?} leads out of the worktree through a symlink; give a path inside it"
            ))),
            // A dangling symlink: where it points does not exist, so it cannot be checked.
            Err(_) if probe != full || fs::symlink_metadata(&probe).is_ok() => {
                Err(Outcome::refused(format!(
                    "refused: the path {rel:?} goes through a symlink that cannot be resolved"
                )))
            }
            Err(e) => Err(Outcome::failed(format!("cannot resolve {rel:?}: {e}"))),
        }
    }

    fn list(&self, rel: &str) -> Outcome {
        let dir = match self.resolve(rel) {
            Ok(d) => d,
            Err(o) => return o,
        };
        let mut out = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = fs::read_dir(&d) else { continue };
            let mut names: Vec<_> = rd.filter_map(Result::ok).collect();
            names.sort_by_key(|e| e.file_name());
            for e in names {
                let name = e.file_name();
                if name == ".git" {
                    continue;
                }
                let p = e.path();
                let Ok(ft) = e.file_type() else { continue };
                if ft.is_dir() {
                    stack.push(p);
                } else if let Ok(r) = p.strip_prefix(&self.root) {
                    out.push(r.to_string_lossy().into_owned());
                }
            }
            if out.len() >= MAX_LIST {
                break;
            }
        }
        if out.is_empty() && !dir.is_dir() {
            return Outcome::failed(format!("{rel:?} is not a directory"));
        }
        out.sort();
        let more = out.len() > MAX_LIST;
        out.truncate(MAX_LIST);
        let mut text = out.join("\n");
        if more {
            text.push_str(&format!("\n(only the first {MAX_LIST} files)"));
        }
        Outcome::ok(text)
    }

    /// A regular file's text, at most [`MAX_FILE_READ`] bytes: never a FIFO or device (one a
    /// command left would block the read), never through a final symlink (resolved above).
    fn read_text(path: &Path) -> Result<String, ReadTextError> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(ReadTextError::Open)?;
        let st = rustix::fs::fstat(&fd).map_err(ReadTextError::Open)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(ReadTextError::NotRegular);
        }
        let mut buf = Vec::new();
        fs::File::from(fd)
            .take(MAX_FILE_READ)
            .read_to_end(&mut buf)
            .map_err(ReadTextError::Read)?;
        String::from_utf8(buf).map_err(|_| ReadTextError::NotText)
    }

    fn read(&self, rel: &str, start: usize, end: usize) -> Outcome {
        let p = match self.resolve(rel) {
            Ok(p) => p,
            Err(o) => return o,
        };
        match Self::read_text(&p) {
            Err(e) => Outcome::failed(format!("cannot read {rel:?}: {e}")),
            Ok(text) => {
                let lines: Vec<&str> = text.lines().collect();
                let total = lines.len();
                let from = start.min(total + 1);
                let to = end.min(total);
                let mut out = String::new();
                for (i, l) in lines.iter().enumerate().take(to).skip(from - 1) {
                    out.push_str(&format!("{:>5}  {l}\n", i + 1));
                }
                out.push_str(&format!("({rel}: lines {from}-{to} of {total})"));
                Outcome::ok(out)
            }
        }
    }

    fn search(&self, pattern: &str, rel: &str) -> Outcome {
        let base = match self.resolve(rel) {
            Ok(p) => p,
            Err(o) => return o,
        };
        let mut files = Vec::new();
        if base.is_file() {
            files.push(base);
        } else {
            let mut stack = vec![base];
            while let Some(d) = stack.pop() {
                let Ok(rd) = fs::read_dir(&d) else { continue };
                for e in rd.filter_map(Result::ok) {
                    if e.file_name() == ".git" {
                        continue;
                    }
                    match e.file_type() {
                        Ok(t) if t.is_dir() => stack.push(e.path()),
                        Ok(t) if t.is_file() => files.push(e.path()),
                        _ => {}
                    }
                }
            }
        }
        files.sort();
        let mut hits = Vec::new();
        'files: for f in files {
            let Ok(text) = Self::read_text(&f) else {
                continue;
            };
            let name = f
                .strip_prefix(&self.root)
                .map(|r| r.to_string_lossy().into_owned())
                .unwrap_or_default();
            for (i, l) in text.lines().enumerate() {
                if l.contains(pattern) {
                    hits.push(format!("{name}:{}: {l}", i + 1));
                    if hits.len() >= MAX_MATCHES {
                        hits.push(format!("(only the first {MAX_MATCHES} matches)"));
                        break 'files;
                    }
                }
            }
        }
        if hits.is_empty() {
            Outcome::ok(format!("no line contains {pattern:?}"))
        } else {
            Outcome::ok(hits.join("\n"))
        }
    }

    fn write(&self, rel: &str, content: &str) -> Outcome {
        let p = match self.resolve(rel) {
            Ok(p) => p,
            Err(o) => return o,
        };
        if p.is_dir() {
            return Outcome::failed(format!("{rel:?} is a directory"));
        }
        let written = (|| -> std::io::Result<()> {
            let parent = p.parent().unwrap_or(&self.root);
            fs::create_dir_all(parent)?;
            // Directories just made may not be symlinks, but check where the file lands.
            let real_parent = fs::canonicalize(parent)?;
            if !real_parent.starts_with(&self.root) {
                return Err(std::io::Error::other("leaves the worktree"));
            }
            let mut tmp = tempfile::NamedTempFile::new_in(&real_parent)?;
            tmp.write_all(content.as_bytes())?;
            let target = real_parent.join(p.file_name().unwrap_or_default());
            tmp.persist(&target).map_err(|e| e.error)?;
            Ok(())
        })();
        match written {
            Ok(()) => Outcome::ok(format!("wrote {rel} ({} bytes)", content.len())),
            Err(e) => Outcome::failed(format!("cannot write {rel:?}: {e}")),
        }
    }

    fn diff(&self, diff: &str, paths: &[String]) -> Outcome {
        for p in paths {
            if let Err(o) = self.resolve(p) {
                return o;
            }
        }
        let run = (|| -> std::io::Result<std::process::Output> {
            let mut child = crate::gitproc::command()
                .args([
                    "-c",
                    "core.hooksPath=/dev/null",
                    "-c",
                    "core.fsmonitor=false",
                ])
                .args(["apply", "--whitespace=nowarn", "--recount", "-"])
                .current_dir(&self.root)
                .env("GIT_DIR", &self.admin)
                .env("GIT_WORK_TREE", &self.root)
                .env_remove("GIT_INDEX_FILE")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            let mut text = diff.to_string();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(text.as_bytes())?;
            }
            child.wait_with_output()
        })();
        match run {
            Ok(o) if o.status.success() => {
                Outcome::ok(format!("applied the diff to {}", paths.join(", ")))
            }
            Ok(o) => {
                let err = String::from_utf8_lossy(&o.stderr);
                let (err, _) = crate::run::edit_tools::cap_text(err.trim(), MODEL_OUTPUT_CAP);
                Outcome::failed(format!("the diff does not apply: {err}"))
            }
            Err(e) => Outcome::failed(format!("cannot run git apply: {e}")),
        }
    }

    fn run(&self, command: &str) -> Outcome {
        if !self.commands.iter().any(|c| c == command) {
            return Outcome::refused(format!("refused: {command:?} is not an allowed command"));
        }
        match super::check::run_check(&self.root, command, self.deadline, self.cap) {
            Ok(r) => {
                let exit = r.exit.map_or_else(
                    || "killed (deadline or signal)".to_string(),
                    |c| c.to_string(),
                );
                let text = format!("exit {exit} after {:.1}s\n{}", r.seconds, r.tail);
                if r.ok {
                    Outcome::ok(text)
                } else {
                    Outcome::failed(text)
                }
            }
            Err(e) => Outcome::failed(e.to_string()),
        }
    }
}

impl Hands for TreeHands {
    fn carry(&self, op: &Op) -> Outcome {
        match op {
            Op::List { path } => self.list(path),
            Op::Read { path, start, end } => self.read(path, *start, *end),
            Op::Search { pattern, path } => self.search(pattern, path),
            Op::Write { path, content } => self.write(path, content),
            Op::Diff { diff, paths } => self.diff(diff, paths),
            Op::Run { command } => self.run(command),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_out_are_refused_and_writes_land_inside() {
        let outside = tempfile::tempdir().unwrap();
        let tree = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), tree.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), tree.path().join("lf")).unwrap();
        let h = TreeHands::new(
            tree.path(),
            &tree.path().join(".no-git"),
            vec![],
            Duration::from_secs(5),
            1024,
        );
        for op in [
            Op::Write {
                path: "out/x".into(),
                content: "no".into(),
            },
            Op::Write {
                path: "lf".into(),
                content: "no".into(),
            },
            Op::Read {
                path: "out/x".into(),
                start: 1,
                end: 2,
            },
        ] {
            let o = h.carry(&op);
            assert!(o.refused, "{op:?}: {o:?}");
        }
        assert!(!outside.path().join("x").exists());
        assert!(!outside.path().join("f").exists());
        let o = h.carry(&Op::Write {
            path: "src/a.txt".into(),
            content: "one\ntwo\n".into(),
        });
        assert!(o.ok, "{o:?}");
        let o = h.carry(&Op::Read {
            path: "src/a.txt".into(),
            start: 2,
            end: 9,
        });
        assert!(o.text.contains("two") && !o.text.contains("one"), "{o:?}");
        let o = h.carry(&Op::Search {
            pattern: "tw".into(),
            path: ".".into(),
        });
        assert!(o.text.contains("src/a.txt:2: two"), "{o:?}");
        let o = h.carry(&Op::Run {
            command: "true".into(),
        });
        assert!(o.refused);
    }
}
