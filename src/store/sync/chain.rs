//! Reading entry chains without a ref: objects from the repository or through
//! `git cat-file --batch` (which sees a server's quarantined objects), and a ledger's entry
//! chain walked from a commit.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;

use super::git_cli::Git;
use super::problem::ChainProblem;
use crate::ledger::Entry;
use crate::ledger::hash::GENESIS;
use crate::store::git::{StoreError, commit_bytes, entry_from_message, git_err, parse_commit};

/// Reads objects: from the repository itself, or through `git cat-file --batch` (which sees a
/// server's quarantined incoming objects).
pub(crate) trait Objects {
    /// The object `id`, or `None` when it is absent.
    fn read(&mut self, id: &ObjectId) -> Result<Option<(Kind, Vec<u8>)>, StoreError>;
}

/// Objects read with gix.
pub(super) struct RepoObjects<'a>(pub &'a gix::Repository);

impl Objects for RepoObjects<'_> {
    fn read(&mut self, id: &ObjectId) -> Result<Option<(Kind, Vec<u8>)>, StoreError> {
        let mut buf = Vec::new();
        match crate::store::odb::try_find(self.0, id, &mut buf) {
            Ok(Some(kind)) => Ok(Some((kind, buf))),
            Ok(None) => Ok(None),
            Err(e) => Err(git_err(&format!("reading object {id}"), e)),
        }
    }
}

/// Objects read through one long-running `git cat-file --batch`.
pub(crate) struct CatFile {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl CatFile {
    pub(crate) fn start(git: &Git) -> Result<CatFile, StoreError> {
        let mut cmd = git.command();
        // A server hook reads a push's objects while git still holds them in quarantine.
        crate::gitproc::see_quarantined_objects(&mut cmd);
        let mut child = cmd
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| StoreError::from(crate::gitproc::GitProcessError::Spawn(e)))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(CatFile {
            child,
            stdin,
            stdout,
        })
    }
}

impl Objects for CatFile {
    fn read(&mut self, id: &ObjectId) -> Result<Option<(Kind, Vec<u8>)>, StoreError> {
        let broken = |e: &dyn std::fmt::Display| git_err("reading objects with git cat-file", e);
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| broken(&"it was closed"))?;
        writeln!(stdin, "{id}")
            .and_then(|_| stdin.flush())
            .map_err(|e| broken(&e))?;
        let mut header = String::new();
        self.stdout.read_line(&mut header).map_err(|e| broken(&e))?;
        let mut parts = header.split_whitespace();
        let _name = parts.next();
        let kind = match parts.next() {
            Some("missing") | None => return Ok(None),
            Some(k) => Kind::from_bytes(k.as_bytes()).map_err(|e| broken(&e))?,
        };
        let size: usize = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| broken(&format!("unexpected reply {header:?}")))?;
        let mut data = vec![0u8; size + 1];
        self.stdout.read_exact(&mut data).map_err(|e| broken(&e))?;
        data.pop();
        Ok(Some((kind, data)))
    }
}

impl Drop for CatFile {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// One entry of a chain and the commit holding it.
#[derive(Debug, Clone)]
pub(crate) struct ChainLink {
    pub(crate) commit: ObjectId,
    pub(crate) tree: ObjectId,
    pub(crate) entry: Entry,
}

/// Reads the chain ending at `tip`, root first. With `check`, also checks what makes it a
/// ledger: seq from 0 without gaps, each `prev_hash` naming the previous entry, each entry
/// hashing to its `entry_hash`, each commit being exactly the one its entry defines. `Ok(Err)`
/// is a chain problem in one line; `Err` is a failure to read.
pub(super) fn read_chain(
    objects: &mut dyn Objects,
    hash: HashKind,
    tip: ObjectId,
    check: bool,
) -> Result<Result<Vec<ChainLink>, ChainProblem>, StoreError> {
    let mut links = Vec::new();
    let mut cur = Some(tip);
    while let Some(id) = cur {
        let Some((kind, data)) = objects.read(&id)? else {
            return Ok(Err(ChainProblem::CommitMissing(id)));
        };
        if kind != Kind::Commit {
            return Ok(Err(ChainProblem::NotACommit { id, kind }));
        }
        let Some(raw) = parse_commit(&data, hash) else {
            return Ok(Err(ChainProblem::Unparsable(id)));
        };
        let entry = match entry_from_message(raw.message) {
            Ok(e) => e,
            Err(why) => return Ok(Err(ChainProblem::NotAnEntry { id, why })),
        };
        let parent = raw.parents.first().copied();
        if check {
            if raw.parents.len() > 1 {
                return Ok(Err(ChainProblem::Parents {
                    id,
                    parents: raw.parents.len(),
                }));
            }
            if commit_bytes(&entry, &raw.tree, parent.as_ref()) != data {
                return Ok(Err(ChainProblem::NotItsCommit { id, seq: entry.seq }));
            }
            if entry.computed_hash() != entry.entry_hash {
                return Ok(Err(ChainProblem::Edited(entry.seq)));
            }
        }
        links.push(ChainLink {
            commit: id,
            tree: raw.tree,
            entry,
        });
        cur = parent;
    }
    links.reverse();
    if check {
        let mut prev = GENESIS.to_string();
        for (i, l) in links.iter().enumerate() {
            if l.entry.seq != i as u64 {
                return Ok(Err(ChainProblem::Reordered {
                    found: l.entry.seq,
                    at: i,
                }));
            }
            if l.entry.prev_hash != prev {
                return Ok(Err(ChainProblem::Unlinked(i)));
            }
            prev = l.entry.entry_hash.clone();
        }
    }
    Ok(Ok(links))
}
