//! Redaction: remove a body from every tree of a ledger while the entry chain, and so every
//! checkpoint and proof, stays exactly the same.
//!
//! `redact` first appends a `redaction` entry naming the payload hash and the reason, then
//! rewrites the ledger's commits so each tree that held the body is the empty tree (only commit
//! ids change), moves the ref with a compare-and-swap, and rewrites the ref's reflog so it names
//! the new commits: nothing keeps the old ones reachable, so `git gc` drops the body once its
//! grace period (or `--prune=now`) allows.

use std::fs;

use gix::ObjectId;
use gix::objs::Kind;

use super::git::{CasOutcome, GitStore, StoreError, commit_bytes, object};
use super::pack;
use crate::ledger::hash::is_hash;
use crate::ledger::{Entry, NewEntry, Value};

/// Schema of a redaction entry's payload.
pub(crate) const REDACTION_SCHEMA: &str = "git-forum.redaction/v1";

/// What a redaction did.
#[derive(Debug, Clone)]
pub(crate) struct Redacted {
    /// The seq of the `redaction` entry.
    pub(crate) seq: u64,
    /// The seqs whose body was removed.
    pub(crate) entries: Vec<u64>,
    pub(crate) old_tip: ObjectId,
    pub(crate) new_tip: ObjectId,
}

/// A chain rewritten without one body: its new tip, the objects to write, each rewritten
/// commit with the one that replaces it, and the seqs whose body was dropped.
struct Rewritten {
    new_tip: ObjectId,
    objects: Vec<super::pack::Obj>,
    map: Vec<(ObjectId, ObjectId)>,
    emptied: Vec<u64>,
}

impl GitStore {
    /// Redacts the body whose payload hash is `payload_hash`. Refuses, changing nothing, when
    /// the hash is malformed, no entry has it, it was already redacted, or the ledger does not
    /// verify.
    pub(crate) fn redact(
        &mut self,
        payload_hash: &str,
        reason: &str,
        actor: &str,
        ts: f64,
    ) -> Result<Redacted, StoreError> {
        if !is_hash(payload_hash) {
            return Err(StoreError::Invalid(format!(
                "{payload_hash:?} is not a payload hash (64 lowercase hex digits; see `git forum show SEQ`)"
            )));
        }
        if reason.trim().is_empty() {
            return Err(StoreError::Invalid(
                "give the reason for the redaction with --reason TEXT".into(),
            ));
        }
        let report = self.verify(false)?;
        if !report.passed() {
            return Err(StoreError::Corrupt(format!(
                "ledger {} does not verify ({}); repair it before redacting",
                self.name(),
                report.problem.unwrap_or_default()
            )));
        }
        let walked = self.walk_back(None)?;
        let holders: Vec<(ObjectId, u64)> = walked
            .iter()
            .filter(|(_, e)| e.payload_hash == payload_hash)
            .map(|(id, e)| (*id, e.seq))
            .collect();
        if holders.is_empty() {
            return Err(StoreError::Invalid(format!(
                "no entry of ledger {} has payload hash {payload_hash}; nothing was changed",
                self.name()
            )));
        }
        if holders
            .iter()
            .all(|(id, _)| matches!(self.body_of_commit(id), Ok(None)))
        {
            return Err(StoreError::Invalid(format!(
                "the body {payload_hash} is already redacted; nothing was changed"
            )));
        }
        let payload = Value::object([
            ("schema".to_string(), Value::str(REDACTION_SCHEMA)),
            ("payload_hash".to_string(), Value::str(payload_hash)),
            ("reason".to_string(), Value::str(reason)),
        ]);
        let parent = holders.iter().map(|(_, s)| *s).max().map(|s| s as i64);
        let appended = self.append_entry(&NewEntry {
            actor: actor.to_string(),
            kind: crate::ledger::kind::REDACTION.into(),
            causal_parent: parent,
            payload,
            ts,
        })?;
        let (old_tip, new_tip, entries, map) = self.rewrite_without(payload_hash)?;
        self.remap_reflog(&map)?;
        // An imported ledger may keep the body in Forum's key order for export: drop it too.
        self.forget_forum_row(payload_hash)?;
        let _ = fs::remove_file(self.index_path());
        Ok(Redacted {
            seq: appended.entry.seq,
            entries,
            old_tip,
            new_tip,
        })
    }

    /// The chain `walked` (tip first) with the body `payload_hash` dropped from every entry
    /// that names it (its tree becomes the empty tree `empty`): the commits from the first
    /// such entry on are rebuilt.
    fn rewritten_chain(
        &self,
        mut walked: Vec<(ObjectId, Entry)>,
        payload_hash: &str,
        empty: ObjectId,
    ) -> Result<Rewritten, StoreError> {
        let hash = self.object_hash();
        walked.reverse();
        let mut parent: Option<ObjectId> = None;
        let mut objects = vec![];
        let mut map = Vec::new();
        let mut emptied = Vec::new();
        let mut buf = Vec::new();
        let mut changed = false;
        for (id, entry) in &walked {
            let (_, original, _) = self.read_entry_commit(id, &mut buf)?;
            let tree = if entry.payload_hash == payload_hash {
                emptied.push(entry.seq);
                empty
            } else {
                original
            };
            changed |= tree != original;
            if !changed {
                parent = Some(*id);
                continue;
            }
            let c = object(
                hash,
                Kind::Commit,
                commit_bytes(entry, &tree, parent.as_ref()),
            )?;
            parent = Some(c.id);
            map.push((*id, c.id));
            objects.push(c);
        }
        Ok(Rewritten {
            new_tip: parent.expect("a ledger has at least one commit"),
            objects,
            map,
            emptied,
        })
    }

    /// Rebuilds the chain with the body's trees emptied and moves the ref (retrying if an
    /// append lands meanwhile). Returns the old and new tips, the seqs emptied, and the map
    /// from old to new commit ids.
    #[allow(clippy::type_complexity)]
    fn rewrite_without(
        &self,
        payload_hash: &str,
    ) -> Result<(ObjectId, ObjectId, Vec<u64>, Vec<(ObjectId, ObjectId)>), StoreError> {
        let held = self.writer_lock()?;
        // The rewrite moves the ref itself: first flush and empty the write-ahead log, which
        // also removes the bodies it holds (packing what it held, but never this body).
        self.checkpoint_wal_forgetting(&super::codec::hex_to_bytes(payload_hash))?;
        let hash = self.object_hash();
        let empty = object(hash, Kind::Tree, Vec::new())?;
        let start = std::time::Instant::now();
        loop {
            let old_tip = self.require_tip()?.commit;
            let walked = self.walk_back(None)?;
            let Rewritten {
                new_tip,
                mut objects,
                map,
                emptied,
            } = self.rewritten_chain(walked, payload_hash, empty.id)?;
            objects.push(empty.clone());
            let guard = pack::write_pack(
                &self.objects_dir(),
                hash,
                &objects,
                gix::zlib::Compression::new(6).expect("level 6 is valid"),
                true,
            )
            .map_err(|e| StoreError::Io {
                context: "writing the rewritten commits".into(),
                source: e,
            })?;
            let outcome = self.cas(
                &held,
                Some(old_tip),
                new_tip,
                &format!("forum: rewrite (redact {payload_hash})"),
            );
            let outcome = match outcome {
                Ok(o) => o,
                Err(e) => {
                    guard.release();
                    return Err(e);
                }
            };
            match outcome {
                CasOutcome::Moved => {
                    let flushed = if self.refs_via_git() {
                        Ok(())
                    } else {
                        self.flush(&[self.reflog_path(), self.ref_path()], false)
                    };
                    guard.release();
                    flushed?;
                    return Ok((old_tip, new_tip, emptied, map));
                }
                CasOutcome::Conflict
                | CasOutcome::Locked(..)
                | CasOutcome::Busy
                | CasOutcome::ObjectsMissing => {
                    guard.release();
                    if start.elapsed() > self.append_deadline {
                        let lock = match outcome {
                            CasOutcome::Locked(l, _) => l,
                            _ => self.ref_lock_path(),
                        };
                        let stale = self
                            .inspect_lock(&lock)
                            .filter(|l| l.stale())
                            .map(|l| l.age);
                        return Err(self.conflict(Some(old_tip), start.elapsed(), lock, stale));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
    }

    /// Rewrites the ref's reflog so every line names the new commit where it named an old one:
    /// the tip history stays readable and nothing keeps the old commits (and the body)
    /// reachable.
    fn remap_reflog(&self, map: &[(ObjectId, ObjectId)]) -> Result<(), StoreError> {
        if self.refs_via_git() {
            // git's own ref storage (reftable) cannot have a reflog line edited; lines naming
            // the old commits would keep the body reachable, so they are expired. The rewrite
            // line itself went with them; the redaction entry is the record of it.
            return super::refs::git_ok(
                self.common_dir(),
                &[
                    "reflog",
                    "expire",
                    "--expire=all",
                    "--expire-unreachable=all",
                    self.refname(),
                ],
            );
        }
        let path = self.reflog_path();
        let Ok(text) = fs::read_to_string(&path) else {
            return Ok(());
        };
        let table: std::collections::HashMap<String, String> = map
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let mut out = String::with_capacity(text.len());
        for line in text.lines() {
            let (head, rest) = line
                .split_once('\t')
                .map(|(h, r)| (h, Some(r)))
                .unwrap_or((line, None));
            let mut parts: Vec<String> = head.splitn(3, ' ').map(str::to_string).collect();
            for p in parts.iter_mut().take(2) {
                if let Some(new) = table.get(p.as_str()) {
                    *p = new.clone();
                }
            }
            out.push_str(&parts.join(" "));
            if let Some(r) = rest {
                out.push('\t');
                out.push_str(r);
            }
            out.push('\n');
        }
        let tmp = path.with_extension("git-forum-tmp");
        fs::write(&tmp, out).map_err(|e| StoreError::Io {
            context: format!("writing {}", tmp.display()),
            source: e,
        })?;
        fs::rename(&tmp, &path).map_err(|e| StoreError::Io {
            context: format!("replacing {}", path.display()),
            source: e,
        })
    }
}
