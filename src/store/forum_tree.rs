//! Forum's own Merkle tree (leaves 0x00, nodes 0x01 over hex) as a cache of subtree hashes on
//! `refs/forum/merkle/NAME`, beside the tiles, so Forum-format proofs and checkpoints read
//! O(log n) small objects instead of every entry.
//!
//! The ref is one commit with no parent whose tree holds the chunks of
//! [`chunks`](crate::ledger::merkle::chunks): `L/N` is chunk `N` of stored level `L` (0 for the
//! leaf hashes, 8, 16, ...; `N` written in three-digit groups, the leading ones prefixed with `x`,
//! as C2SP tiles name theirs), each a run of raw 32-byte SHA-256 hashes, 256 in a full chunk.
//! The commit's message records the size, Forum's root of that size, the ledger commit of the
//! last entry covered and the newest `checkpoint` entry seen among them.
//!
//! It is a cache, never a source of truth: `verify` never reads it. Each use checks it: a full
//! chunk read must hash to the hash its parent chunk holds for it, the partial chunks must give
//! the recorded root, the last covered entry must still be on the ledger's chain, and the newest
//! `checkpoint` entry's root must be the root the cache gives at that size. When the ledger grew,
//! only the new entries are read (each checked to continue the chain) and the chunks they touch
//! are rewritten; anything that does not read or does not agree is rebuilt from every entry. A
//! fetched copy (`REMOTE:NAME`) is never written to: its tree is built in memory for one answer.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use gix::ObjectId;

use super::git::{GitStore, StoreError};
use super::handle::Tip;
use crate::ledger::kind;
use crate::ledger::merkle::chunks::{
    self, Builder, Chunk, SPAN, Subtrees, WIDTH, chunk_width, count_at, hashes_of,
    perfect_from_chunk, stored_levels,
};

/// Where a ledger's cache of Forum's tree lives.
pub(crate) fn forum_tree_ref(ledger: &str) -> String {
    format!("refs/forum/merkle/{ledger}")
}

/// The path of chunk `index` of stored level `level` in the cache's tree.
fn chunk_path(level: u32, index: u64) -> String {
    let mut groups = Vec::new();
    let mut n = index;
    loop {
        groups.push(n % 1000);
        n /= 1000;
        if n == 0 {
            break;
        }
    }
    let last = groups.len() - 1;
    let parts: Vec<String> = groups
        .iter()
        .rev()
        .enumerate()
        .map(|(k, g)| {
            if k < last {
                format!("x{g:03}")
            } else {
                format!("{g:03}")
            }
        })
        .collect();
    format!("{level}/{}", parts.join("/"))
}

fn corrupt(why: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("the cache of Forum's tree: {why}"))
}

/// Chunks by (stored level, index in that level).
type Chunks = HashMap<(u32, u64), Vec<[u8; 32]>>;

/// Where the chunks are read from.
enum Source<'a> {
    /// A tree in the repository.
    Git(&'a gix::Repository, ObjectId),
    /// Chunks built for one answer and never written.
    Memory(Chunks),
}

/// The chunks of Forum's tree over the first `size` entries, each read at most once and each
/// full one checked against the hash its parent chunk holds.
pub(crate) struct ForumTree<'a> {
    /// The entries the tree covers (the ledger's length when it was opened).
    pub(crate) size: u64,
    /// Forum's root of them: the checkpoint.
    pub(crate) root: String,
    /// Whether the cache was rebuilt from every entry (missing, unreadable or disagreeing).
    pub(crate) rebuilt: bool,
    source: Source<'a>,
    read: RefCell<Chunks>,
}

impl<'a> ForumTree<'a> {
    fn new(size: u64, source: Source<'a>) -> Self {
        ForumTree {
            size,
            root: String::new(),
            rebuilt: false,
            source,
            read: RefCell::default(),
        }
    }

    /// Chunk `index` of stored level `level`, as long as the size says and, when full, hashing
    /// to its parent's hash for it.
    fn chunk(&self, level: u32, index: u64) -> Result<Vec<[u8; 32]>, StoreError> {
        if let Some(c) = self.read.borrow().get(&(level, index)) {
            return Ok(c.clone());
        }
        let width = chunk_width(self.size, level, index);
        let path = chunk_path(level, index);
        let hashes = match &self.source {
            Source::Memory(m) => m.get(&(level, index)).cloned(),
            Source::Git(repo, tree) => read_blob(repo, *tree, &path).and_then(|b| hashes_of(&b)),
        }
        .ok_or_else(|| corrupt(format!("{path} is missing or unreadable")))?;
        if width == 0 || hashes.len() != width {
            return Err(corrupt(format!(
                "{path} holds {} hashes where {width} belong",
                hashes.len()
            )));
        }
        if width == WIDTH {
            let parent = self.chunk(level + SPAN, index >> SPAN)?;
            let at = (index - ((index >> SPAN) << SPAN)) as usize;
            if parent.get(at) != Some(&chunks::fold(&hashes)) {
                return Err(corrupt(format!(
                    "{path} does not hash to its parent's hash"
                )));
            }
        }
        self.read
            .borrow_mut()
            .insert((level, index), hashes.clone());
        Ok(hashes)
    }

    /// Forum's root of the first `size` entries.
    pub(crate) fn root_at(&self, size: u64) -> Result<String, StoreError> {
        chunks::root_from(self, size)
    }

    /// The audit path of entry `seq` in the tree of the first `size` entries.
    pub(crate) fn inclusion(&self, size: u64, seq: u64) -> Result<Vec<String>, StoreError> {
        chunks::inclusion_from(self, size, seq)
    }

    /// The consistency proof of the first `size` entries against the first `old`.
    pub(crate) fn consistency(&self, size: u64, old: u64) -> Result<Vec<String>, StoreError> {
        chunks::consistency_from(self, size, old)
    }

    /// The last partial chunk of each stored level (empty where the level's chunks are full).
    fn partial_chunks(&self) -> Result<Vec<Vec<[u8; 32]>>, StoreError> {
        stored_levels(self.size)
            .into_iter()
            .map(|l| {
                let idx = count_at(self.size, l) >> SPAN;
                match chunk_width(self.size, l, idx) {
                    0 => Ok(Vec::new()),
                    _ => self.chunk(l, idx),
                }
            })
            .collect()
    }
}

impl Subtrees for ForumTree<'_> {
    type Error = StoreError;
    fn perfect(&self, level: u32, index: u64) -> Result<[u8; 32], StoreError> {
        let stored = level - level % SPAN;
        let chunk_index = (index << (level - stored)) >> SPAN;
        let c = self.chunk(stored, chunk_index)?;
        perfect_from_chunk(&c, chunk_index, level, index)
            .ok_or_else(|| corrupt(format!("no subtree {index} at level {level}")))
    }
}

fn read_blob(repo: &gix::Repository, tree: ObjectId, path: &str) -> Option<Vec<u8>> {
    let tree = repo.find_tree(tree).ok()?;
    let entry = tree.lookup_entry_by_path(path).ok()??;
    let object = entry.object().ok()?;
    (object.kind == gix::object::Kind::Blob).then(|| object.detach().data)
}

/// What the cache's commit records about itself (its message).
struct State {
    size: u64,
    root: String,
    /// The ledger commit of entry `size - 1`.
    tip: ObjectId,
    /// The newest `checkpoint` entry among the entries covered, when one was seen.
    checkpoint: Option<u64>,
    tree: ObjectId,
    commit: ObjectId,
}

fn state_message(size: u64, root: &str, tip: &ObjectId, checkpoint: Option<u64>) -> String {
    let mut m = format!("forum-tree {size} {root}\n\nhash sha256\ntip {tip}\n");
    if let Some(seq) = checkpoint {
        m.push_str(&format!("checkpoint {seq}\n"));
    }
    m
}

fn parse_state(
    message: &str,
    tree: ObjectId,
    commit: ObjectId,
    kind: gix::hash::Kind,
) -> Option<State> {
    let mut lines = message.lines();
    let mut head = lines.next()?.strip_prefix("forum-tree ")?.split(' ');
    let size: u64 = head.next()?.parse().ok()?;
    let root = head.next()?.to_string();
    if !crate::ledger::hash::is_hash(&root) || head.next().is_some() {
        return None;
    }
    let (mut tip, mut checkpoint, mut sha256) = (None, None, false);
    for l in lines {
        if let Some(t) = l.strip_prefix("tip ") {
            tip = ObjectId::from_hex(t.as_bytes())
                .ok()
                .filter(|id| id.kind() == kind);
        } else if let Some(c) = l.strip_prefix("checkpoint ") {
            checkpoint = Some(c.parse().ok()?);
        } else if l == "hash sha256" {
            sha256 = true;
        }
    }
    (sha256 && checkpoint.is_none_or(|c| c < size)).then_some(State {
        size,
        root,
        tip: tip?,
        checkpoint,
        tree,
        commit,
    })
}

impl GitStore {
    /// Whether this handle reads a copy fetched from a remote, which only `fetch` writes.
    fn is_fetched_copy(&self) -> bool {
        self.refname().starts_with("refs/forum/remotes/")
    }

    /// The commit the cache's ref names, if any, and what its message records, when it reads.
    fn forum_tree_state(&self) -> (Option<ObjectId>, Option<State>) {
        let refname = forum_tree_ref(self.signature_ledger());
        let id = if self.refs_via_git() {
            super::sign::ref_target(self.repo().git_dir(), &refname)
                .ok()
                .flatten()
                .and_then(|hex| ObjectId::from_hex(hex.as_bytes()).ok())
        } else {
            self.repo()
                .try_find_reference(refname.as_str())
                .ok()
                .flatten()
                .and_then(|mut r| r.peel_to_id().ok().map(|id| id.detach()))
        };
        (id, id.and_then(|id| self.state_of(id)))
    }

    fn state_of(&self, id: ObjectId) -> Option<State> {
        let commit = self.repo().find_commit(id).ok()?;
        let tree = commit.tree_id().ok()?.detach();
        let message = String::from_utf8_lossy(commit.message_raw_sloppy()).to_string();
        parse_state(&message, tree, id, self.object_hash())
    }

    /// Forum's tree over every entry, from the cache: used as it is when current, extended by
    /// the new entries when the ledger grew on the same chain, rebuilt from every entry when it
    /// is missing, unreadable or disagrees. A fetched copy's is built in memory.
    pub(crate) fn forum_tree(&self) -> Result<ForumTree<'_>, StoreError> {
        self.forum_tree_or_rebuild(false)
    }

    /// [`Self::forum_tree`] rebuilt from every entry, whatever the cache holds: for a caller
    /// that found a chunk that does not read or does not hash to its parent's hash.
    pub(crate) fn rebuild_forum_tree(&self) -> Result<ForumTree<'_>, StoreError> {
        self.forum_tree_or_rebuild(true)
    }

    fn forum_tree_or_rebuild(&self, rebuild: bool) -> Result<ForumTree<'_>, StoreError> {
        let tip = self.require_tip()?;
        let len = tip.entry.seq + 1;
        if self.is_fetched_copy() {
            return self.forum_tree_in_memory(&tip);
        }
        let (current, old) = self.forum_tree_state();
        if !rebuild
            && let Some(s) = &old
            && s.size > 0
            && s.size <= len
            && self.commit_at(s.size - 1).ok().flatten() == Some(s.tip)
            && let Ok(t) = self.reuse_forum_tree(s, &tip)
        {
            return Ok(t);
        }
        let all = self.chain_hashes(&tip)?;
        let mut b = Builder::default();
        let mut hex = String::with_capacity(64);
        for h in &all {
            hex.clear();
            crate::ledger::hash::push_hex(&mut hex, h);
            b.push(&hex);
        }
        let mut t = self.write_forum_tree(None, &b, &tip, None, current)?;
        t.rebuilt = true;
        Ok(t)
    }

    fn forum_tree_in_memory(&self, tip: &Tip) -> Result<ForumTree<'_>, StoreError> {
        let all = self.chain_hashes(tip)?;
        let mut b = Builder::default();
        let mut hex = String::with_capacity(64);
        for h in &all {
            hex.clear();
            crate::ledger::hash::push_hex(&mut hex, h);
            b.push(&hex);
        }
        let memory = b
            .chunks()
            .into_iter()
            .map(|c| ((c.level, c.index), c.hashes))
            .collect();
        let mut t = ForumTree::new(b.size(), Source::Memory(memory));
        t.root = t.root_at(t.size)?;
        t.rebuilt = true;
        Ok(t)
    }

    /// The cache of `s` checked, then extended to the ledger's `tip` when the ledger grew.
    fn reuse_forum_tree(&self, s: &State, tip: &Tip) -> Result<ForumTree<'_>, StoreError> {
        let mut t = ForumTree::new(s.size, Source::Git(self.repo(), s.tree));
        t.root = t.root_at(s.size)?;
        if t.root != s.root {
            return Err(corrupt("its chunks do not give the root it records"));
        }
        if let Some(seq) = s.checkpoint {
            self.check_against_checkpoint(&t, seq)?;
        }
        let len = tip.entry.seq + 1;
        if s.size == len {
            return Ok(t);
        }
        // The ledger grew: only the new entries are read, each checked to continue the chain
        // from the last one the cache covers.
        let (last, _) = self
            .get_with_commit(s.size - 1)?
            .ok_or_else(|| corrupt("its last entry is gone"))?;
        if t.perfect(0, s.size - 1)? != chunks::leaf_of(&last.entry_hash) {
            return Err(corrupt("its last leaf is not the ledger's entry"));
        }
        let mut b = Builder::resume(s.size, t.partial_chunks()?)
            .ok_or_else(|| corrupt("a partial chunk of the wrong length"))?;
        let (mut prev, mut checkpoint) = (last.entry_hash, s.checkpoint);
        for seq in s.size..len {
            let (e, _) = self
                .get_with_commit(seq)?
                .ok_or_else(|| corrupt(format!("entry {seq} is missing")))?;
            if e.seq != seq || e.prev_hash != prev || e.computed_hash() != e.entry_hash {
                return Err(StoreError::Corrupt(format!(
                    "entry {seq} does not continue the chain; run `git forum verify`"
                )));
            }
            if e.kind == kind::CHECKPOINT {
                checkpoint = Some(seq);
            }
            b.push(&e.entry_hash);
            prev = e.entry_hash;
        }
        let t = self.write_forum_tree(Some(s.tree), &b, tip, checkpoint, Some(s.commit))?;
        if let Some(seq) = checkpoint.filter(|&c| c >= s.size) {
            self.check_against_checkpoint(&t, seq)?;
        }
        Ok(t)
    }

    /// The root the cache gives at the size of the `checkpoint` entry at `seq` (the entries
    /// before it) must be the root that entry records.
    fn check_against_checkpoint(&self, t: &ForumTree<'_>, seq: u64) -> Result<(), StoreError> {
        let (e, id) = self
            .get_with_commit(seq)?
            .ok_or_else(|| corrupt(format!("its checkpoint entry {seq} is gone")))?;
        if e.kind != kind::CHECKPOINT {
            return Err(corrupt(format!("entry {seq} is not a checkpoint")));
        }
        let Some(body) = self.body_of_commit(&id)? else {
            // A redacted checkpoint body records nothing to compare against.
            return Ok(());
        };
        let recorded = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("root").and_then(|r| r.as_str()).map(str::to_string));
        match recorded {
            Some(root) if root == t.root_at(seq)? => Ok(()),
            Some(_) => Err(corrupt(format!(
                "it disagrees with the checkpoint entry {seq}"
            ))),
            // A checkpoint entry of another shape says nothing about the root.
            None => Ok(()),
        }
    }

    /// Writes the chunks `b` changed over the tree `base` (none: an empty tree) and points the
    /// ref at a commit recording them (compare-and-swap against `old_commit`). When the objects
    /// cannot be written the answer is still given, from memory.
    fn write_forum_tree(
        &self,
        base: Option<ObjectId>,
        b: &Builder,
        tip: &Tip,
        checkpoint: Option<u64>,
        old_commit: Option<ObjectId>,
    ) -> Result<ForumTree<'_>, StoreError> {
        let written = self.write_chunks(base, &b.chunks());
        let mut t = match written {
            Ok(tree) => ForumTree::new(b.size(), Source::Git(self.repo(), tree)),
            Err(_) if base.is_none() => {
                let memory = b
                    .chunks()
                    .into_iter()
                    .map(|c| ((c.level, c.index), c.hashes))
                    .collect();
                ForumTree::new(b.size(), Source::Memory(memory))
            }
            Err(e) => return Err(e),
        };
        t.root = t.root_at(b.size())?;
        if let Ok(tree) = written {
            let message = state_message(b.size(), &t.root, &tip.commit, checkpoint);
            // Another process may have moved the ref meanwhile; the answer stands either way.
            let _ = self.commit_forum_tree(tree, &message, old_commit);
        }
        Ok(t)
    }

    fn write_chunks(
        &self,
        base: Option<ObjectId>,
        chunks: &[Chunk],
    ) -> Result<ObjectId, StoreError> {
        let repo = self.repo();
        let edit_err = |e: &dyn std::fmt::Display| corrupt(format!("cannot edit its tree: {e}"));
        let mut ed = match base {
            Some(t) => repo.edit_tree(t),
            None => repo.empty_tree().edit(),
        }
        .map_err(|e| edit_err(&e))?;
        for c in chunks {
            let blob = repo
                .write_blob(c.bytes())
                .map_err(|e| StoreError::Git(format!("writing a chunk of Forum's tree: {e}")))?;
            ed.upsert(
                chunk_path(c.level, c.index).as_str(),
                gix::object::tree::EntryKind::Blob,
                blob.detach(),
            )
            .map_err(|e| edit_err(&e))?;
        }
        Ok(ed.write().map_err(|e| edit_err(&e))?.detach())
    }

    fn commit_forum_tree(
        &self,
        tree: ObjectId,
        message: &str,
        old_commit: Option<ObjectId>,
    ) -> Result<(), StoreError> {
        let repo = self.repo();
        let commit =
            super::tiles::standalone_commit(repo, tree, message, "the commit of Forum's tree")?;
        if old_commit == Some(commit) {
            return Ok(());
        }
        let gd = repo.git_dir().to_string_lossy().to_string();
        let refname = forum_tree_ref(self.signature_ledger());
        let zero = ObjectId::null(repo.object_hash()).to_string();
        let expect = old_commit.map_or(zero, |c| c.to_string());
        super::sign::git_ok(
            Path::new("."),
            &[
                "--git-dir",
                &gd,
                "update-ref",
                "-m",
                "forum: merkle cache",
                &refname,
                &commit.to_string(),
                &expect,
            ],
            None,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_paths_group_digits_as_tiles_do() {
        assert_eq!(chunk_path(0, 0), "0/000");
        assert_eq!(chunk_path(8, 44), "8/044");
        assert_eq!(chunk_path(0, 1234), "0/x001/234");
        assert_eq!(chunk_path(16, 1_002_003), "16/x001/x002/003");
    }

    #[test]
    fn a_state_message_reads_back_and_a_wrong_one_does_not() {
        let kind = gix::hash::Kind::Sha1;
        let tip = ObjectId::null(kind);
        let root = "ab".repeat(32);
        let m = state_message(7, &root, &tip, Some(3));
        let s = parse_state(&m, tip, tip, kind).expect("its own message");
        assert_eq!(
            (s.size, s.root.as_str(), s.checkpoint),
            (7, root.as_str(), Some(3))
        );
        assert!(parse_state(&m, tip, tip, gix::hash::Kind::Sha256).is_none());
        assert!(parse_state(&m.replace("sha256", "sha1"), tip, tip, kind).is_none());
        assert!(parse_state(&m.replace("forum-tree 7", "forum-tree x"), tip, tip, kind).is_none());
        assert!(parse_state(&state_message(3, &root, &tip, Some(3)), tip, tip, kind).is_none());
    }
}
