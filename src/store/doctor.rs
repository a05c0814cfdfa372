//! `git forum doctor`: what is wrong with a ledger's objects and ref, by seq, and the exact
//! repairs that can be made.
//!
//! A ledger commit is a pure function of its entry, its body's presence and its parent, and
//! every object is named by the hash of its content. So a missing commit, tree or body can be
//! put back exactly from any copy of it: the write-ahead log, another repository's object
//! store (a clone or a mirror on disk), a pack file, or a Forum export of the ledger (from which the
//! commits are recomputed). A repair writes an object only when its bytes hash to the id the
//! chain names; it never invents one. A deleted or broken ref is put back on the last tip its
//! reflog recorded, once that commit is whole.
//!
//! A ref overwritten outside git forum (pointed at another commit, or back at an earlier entry)
//! is compared with the tips its reflog recorded since the last redaction: the newest one whose
//! chain verifies and that the ref does not already contain is its *last good tip*. `--repair`
//! puts the ref back there only when that loses nothing: when the last good tip extends what
//! the ref holds now (entries were cut from the tail), or when the ref holds no valid ledger at
//! all. When the ref holds a valid ledger the good tip does not contain (a fork, another
//! ledger's chain), moving the ref would drop entries, so doctor names both and leaves the
//! choice to a person.
//!
//! Doctor also looks for the lock files a killed git leaves (see [`stale`](super::stale)):
//! git's reftable stack lock and table locks, or the ledger's loose ref lock and
//! `packed-refs.lock`. One no live process can hold is reported with its age and removed by
//! `--repair`; one a process holds is only reported.

use std::collections::HashMap;
use std::path::PathBuf;

use gix::ObjectId;
use gix::objs::Kind;

use super::forum_dir;
use super::git::{GitStore, StoreError, commit_bytes, object, parse_commit, tree_bytes};
use super::pack::Obj;
use crate::ledger::Entry;

/// What doctor examines: the tip, a finding about the ref, and one about a forked reflog.
type TipToExamine = (
    Option<ObjectId>,
    Option<DoctorFinding>,
    Option<DoctorFinding>,
);

// The old names, for modules outside the store that still import them.
pub(crate) use self::DoctorFinding as Finding;
pub(crate) use self::RepairSources as Sources;

/// A lock file found in the repository.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct LockFinding {
    pub(crate) path: String,
    /// Seconds since it was last written.
    pub(crate) age_secs: u64,
    /// No live process can hold it (see [`stale`](super::stale)): it blocks writers for good.
    pub(crate) stale: bool,
    /// Processes that hold it or might (`pid (name)`).
    pub(crate) holders: Vec<String>,
    /// True once `--repair` removed it.
    pub(crate) removed: bool,
}

/// Where exact copies of lost objects may be found.
#[derive(Debug, Default, Clone)]
pub(crate) struct RepairSources {
    /// Other repositories whose object stores may hold the objects (`--from-repo`).
    pub(crate) repos: Vec<PathBuf>,
    /// Forum exports of this ledger (`--from-export`): commits are recomputed from them.
    pub(crate) exports: Vec<PathBuf>,
    /// Pack files (`--from-pack`), such as a bundle's pack or one kept from a backup.
    pub(crate) packs: Vec<PathBuf>,
}

/// One thing found wrong.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct DoctorFinding {
    /// The entry it concerns, when known.
    pub(crate) seq: Option<u64>,
    /// `missing-commit`, `missing-tree`, `missing-body` (missing, or unreadable: damaged),
    /// `ref-deleted`, `ref-broken`, `ref-rewound` (the reflog's last good tip extends the
    /// ref), `ref-overwritten` (the ref holds no valid ledger; the reflog has a good tip),
    /// `ref-forked` (the ref holds a valid ledger that does not contain the reflog's last good
    /// tip: not repaired).
    pub(crate) code: &'static str,
    /// The object or ref concerned.
    pub(crate) object: String,
    /// What can be done about it.
    pub(crate) remedy: String,
    /// True when `--repair` can make it right from the sources at hand.
    pub(crate) repairable: bool,
    /// True once this run put it right.
    pub(crate) repaired: bool,
}

/// What doctor found for one ledger.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct LedgerHealth {
    pub(crate) ledger: String,
    pub(crate) findings: Vec<DoctorFinding>,
    /// Objects written back by the repair.
    pub(crate) restored_objects: usize,
}

/// Where the exact bytes of objects can be had.
struct Copies<'a> {
    store: &'a GitStore,
    /// Scratch repositories the given packs are indexed in (removed on drop).
    _scratch: Vec<tempfile::TempDir>,
    /// Objects known by id: the write-ahead log's and those recomputed from exports.
    known: HashMap<ObjectId, Obj>,
    repos: Vec<gix::Repository>,
}

/// A pack given with `--from-pack`, indexed in a scratch repository (removed when the returned
/// directory is dropped) so that its objects can be read.
fn open_pack_copy(
    pack: &std::path::Path,
    hash: gix::hash::Kind,
) -> Result<(gix::Repository, tempfile::TempDir), StoreError> {
    let dir = crate::scratch::dir("git-forum-pack-copy-").map_err(|e| StoreError::Io {
        context: "creating a scratch repository for --from-pack".into(),
        source: e,
    })?;
    let run = |args: &[&str]| -> Result<(), StoreError> {
        let o = super::refs::git_at(dir.path())
            .args(args)
            .output()
            .map_err(super::error::io("running git"))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(StoreError::Invalid(format!(
                "--from-pack {}: {}",
                pack.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            )))
        }
    };
    let init = crate::gitproc::command()
        .args(["init", "-q", "--bare", &format!("--object-format={hash}")])
        .arg(dir.path())
        .output()
        .map_err(super::error::io("running git init"))?;
    if !init.status.success() {
        return Err(StoreError::Git(format!(
            "git init for --from-pack failed: {}",
            String::from_utf8_lossy(&init.stderr).trim()
        )));
    }
    let dest = dir.path().join("objects/pack/pack-from.pack");
    std::fs::copy(pack, &dest)
        .map_err(|e| StoreError::Invalid(format!("--from-pack {}: {e}", pack.display())))?;
    run(&["index-pack", dest.to_str().unwrap_or_default()])?;
    let r = gix::open(dir.path())
        .map_err(|e| StoreError::Invalid(format!("--from-pack {}: {e}", pack.display())))?;
    Ok((r, dir))
}

impl<'a> Copies<'a> {
    fn gather(store: &'a GitStore, sources: &RepairSources) -> Result<Copies<'a>, StoreError> {
        let mut known = HashMap::new();
        for o in store.logged_objects()? {
            known.insert(o.id, o);
        }
        let hash = store.object_hash();
        for dir in &sources.exports {
            let forum = forum_dir::read(dir).map_err(|e| {
                StoreError::Invalid(format!("--from-export {}: {e}", dir.display()))
            })?;
            let empty = object(hash, Kind::Tree, Vec::new())?;
            known.insert(empty.id, empty.clone());
            let mut parent: Option<ObjectId> = None;
            for e in &forum.entries {
                let tree = match forum.payloads.get(&e.payload_hash) {
                    Some(b) => match forum_dir::checked_body(e, b) {
                        Ok(body) => {
                            let blob = object(hash, Kind::Blob, body.into_bytes())?;
                            let tree = object(hash, Kind::Tree, tree_bytes(&blob.id))?;
                            known.insert(blob.id, blob);
                            let id = tree.id;
                            known.insert(id, tree);
                            id
                        }
                        Err(_) => empty.id,
                    },
                    None => empty.id,
                };
                let c = object(hash, Kind::Commit, commit_bytes(e, &tree, parent.as_ref()))?;
                parent = Some(c.id);
                known.insert(c.id, c);
            }
        }
        let mut repos = Vec::new();
        let mut scratch = Vec::new();
        for pack in &sources.packs {
            let (r, dir) = open_pack_copy(pack, hash)?;
            repos.push(r);
            scratch.push(dir);
        }
        for p in &sources.repos {
            let r = gix::open(p).map_err(|e| {
                StoreError::Invalid(format!(
                    "--from-repo {}: not a git repository ({e})",
                    p.display()
                ))
            })?;
            if r.object_hash() != hash {
                return Err(StoreError::Invalid(format!(
                    "--from-repo {}: it uses {} objects, this repository {}",
                    p.display(),
                    r.object_hash(),
                    hash
                )));
            }
            repos.push(r);
        }
        Ok(Copies {
            store,
            _scratch: scratch,
            known,
            repos,
        })
    }

    /// An exact copy of object `id`, checked against its id.
    fn find(&self, id: &ObjectId) -> Option<Obj> {
        if let Some(o) = self.known.get(id) {
            return Some(o.clone());
        }
        let mut buf = Vec::new();
        for r in &self.repos {
            if let Ok(Some(kind)) = super::odb::try_find(r, id, &mut buf) {
                let data = buf.clone();
                if let Ok(o) = object(self.store.object_hash(), kind, data)
                    && o.id == *id
                {
                    return Some(o);
                }
            }
        }
        None
    }

    fn what(&self) -> &'static str {
        if self.known.is_empty() && self.repos.is_empty() {
            "no copy of it is at hand: pass --from-repo PATH (a clone), --from-pack FILE or --from-export DIR (a `git forum export`)"
        } else {
            "none of the given sources holds it: try another clone (--from-repo) or an export (--from-export)"
        }
    }
}

impl GitStore {
    /// The lock files present that can block this ledger's appends or git's own ref updates:
    /// in a reftable repository every `*.lock` under `reftable/` (the stack lock and the table
    /// locks a compaction takes), otherwise the ledger's loose ref lock and `packed-refs.lock`.
    fn lock_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if self.refs_via_git() {
            if let Ok(rd) = std::fs::read_dir(self.common_dir().join("reftable")) {
                out.extend(
                    rd.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|x| x == "lock")),
                );
            }
        } else {
            out.push(self.ref_lock_path());
            out.push(self.common_dir().join("packed-refs.lock"));
        }
        out.retain(|p| p.exists());
        out.sort();
        out
    }

    /// Reports the lock files present, and with `repair` removes those no live process can hold.
    /// The ledger's own ref lock is removed with a record, as a writer removes one a dead
    /// writer left, so verify knows a reflog line that names its value for what it is.
    pub(crate) fn doctor_locks(&self, repair: bool) -> Result<Vec<LockFinding>, StoreError> {
        let held = if repair {
            Some(self.writer_lock()?)
        } else {
            None
        };
        let own = (!self.refs_via_git()).then(|| self.ref_lock_path());
        let mut out = Vec::new();
        for path in self.lock_files() {
            let Some(l) = self.inspect_lock(&path) else {
                continue;
            };
            let stale = l.stale();
            let mut removed = false;
            if stale && let Some(held) = &held {
                removed = if own.as_ref() == Some(&path) {
                    self.remove_ref_lock(&path, held)
                } else {
                    std::fs::remove_file(&path).is_ok()
                };
            }
            out.push(LockFinding {
                path: std::path::absolute(&path)
                    .unwrap_or(path)
                    .display()
                    .to_string(),
                age_secs: l.age.as_secs(),
                stale,
                holders: l.holders,
                removed,
            });
        }
        Ok(out)
    }

    /// Examines the ledger's ref and every object its chain names, and with `repair` puts back
    /// what the sources hold exactly. Never moves a ref to anything but the last tip its
    /// reflog recorded, and only once that commit is whole.
    pub(crate) fn doctor(
        &self,
        sources: &RepairSources,
        repair: bool,
    ) -> Result<LedgerHealth, StoreError> {
        let _held = if repair {
            Some(self.writer_lock()?)
        } else {
            None
        };
        let copies = Copies::gather(self, sources)?;
        let mut health = LedgerHealth {
            ledger: self.name().to_string(),
            findings: Vec::new(),
            restored_objects: 0,
        };
        let (tip, ref_finding, forked) = self.tip_to_examine()?;
        let whole = self.walk_recovering(tip, &copies, &mut health, repair)?;
        if let Some(f) = forked {
            health.findings.insert(0, f);
        }
        if let Some(mut f) = ref_finding {
            if repair
                && whole
                && let Some(t) = tip
            {
                // A restore past a line that named something else starts the reflog afresh for
                // verify (as a redaction does): that line is not in the chain, and never was.
                let message = if matches!(f.code, "ref-rewound" | "ref-overwritten") {
                    format!(
                        "forum: rewrite (doctor --repair: back to the reflog's last good tip {t})"
                    )
                } else {
                    "forum: doctor --repair".to_string()
                };
                self.restore_ref(t, &message)?;
                f.repaired = true;
            } else if !whole {
                f.repairable = false;
                f.remedy.push_str(" (once the objects above are restored)");
            }
            health.findings.insert(0, f);
        }
        if repair && health.restored_objects > 0 {
            self.flush_repository()?;
        }
        Ok(health)
    }

    /// The tip doctor examines: the ref's, or its reflog's last when the ref is gone or broken
    /// (a finding says so), or a better one its reflog knows when the ref was overwritten; and a
    /// finding for a reflog that forked from the chain.
    fn tip_to_examine(&self) -> Result<TipToExamine, StoreError> {
        let reflog_tip = self
            .reflog()
            .iter()
            .rev()
            .find_map(|l| l.new.filter(|id| !id.is_null()));
        let (tip, ref_finding) = match self.tip_id() {
            Ok(Some(t)) => (Some(t), None),
            Ok(None) => match reflog_tip {
                Some(last) => (
                    Some(last),
                    Some(DoctorFinding {
                        seq: None,
                        code: "ref-deleted",
                        object: self.refname().to_string(),
                        remedy: format!(
                            "the ref is gone but its reflog last recorded {last}: --repair puts it back there"
                        ),
                        repairable: true,
                        repaired: false,
                    }),
                ),
                None => return Err(StoreError::NoLedger(self.name().to_string())),
            },
            Err(StoreError::Corrupt(why)) => match reflog_tip {
                Some(last) => (
                    Some(last),
                    Some(DoctorFinding {
                        seq: None,
                        code: "ref-broken",
                        object: self.refname().to_string(),
                        remedy: format!(
                            "{why}; its reflog last recorded {last}: --repair puts it back there"
                        ),
                        repairable: true,
                        repaired: false,
                    }),
                ),
                None => return Err(StoreError::Corrupt(why)),
            },
            Err(e) => return Err(e),
        };
        // The ref may have been overwritten with something else than what it held: its reflog
        // may know a better tip.
        let (tip, ref_finding, forked) = match (tip, ref_finding) {
            (Some(cur), None) => match self.reflog_offer(cur)? {
                Some(Offer::Restore(g, f)) => (Some(g), Some(f), None),
                Some(Offer::Forked(f)) => (Some(cur), None, Some(f)),
                None => (Some(cur), None, None),
            },
            other => (other.0, other.1, None),
        };
        Ok((tip, ref_finding, forked))
    }

    /// Walks the chain from `tip` back, recording each missing or damaged object in `health`
    /// (and writing back an exact copy from `copies` with `repair`). Returns whether every
    /// commit, tree and body is now there.
    fn walk_recovering(
        &self,
        tip: Option<ObjectId>,
        copies: &Copies,
        health: &mut LedgerHealth,
        repair: bool,
    ) -> Result<bool, StoreError> {
        // Walk the chain the ref (or its reflog) names, from the tip back.
        let mut cur = tip;
        let mut child_seq: Option<u64> = None;
        let mut buf = Vec::new();
        let mut whole = true;
        while let Some(id) = cur {
            let seq_hint = child_seq.and_then(|s| s.checked_sub(1));
            let commit = match self.read_stored(&id, &mut buf).ok().flatten() {
                Some(Kind::Commit) => buf.clone(),
                _ => {
                    let missing =
                        format!("{}; the entries before it cannot be read", copies.what());
                    let found =
                        self.recover(copies, health, repair, seq_hint, Kind::Commit, &id, missing)?;
                    match found {
                        Some(data) => data,
                        None => {
                            whole = false;
                            break;
                        }
                    }
                }
            };
            let Some(raw) = parse_commit(&commit, self.object_hash()) else {
                return Err(StoreError::Corrupt(format!(
                    "ledger {}: commit {id} cannot be parsed; run `git forum verify`",
                    self.name()
                )));
            };
            let seq = super::verify::seq_of_message(raw.message).or(seq_hint);
            let parent = raw.parents.first().copied();
            whole &= self.recover_tree_and_body(copies, health, repair, seq, raw.tree)?;
            child_seq = seq;
            cur = parent;
        }
        Ok(whole)
    }

    /// The tree `tree` of entry `seq` and the body it names, recovered as
    /// [`walk_recovering`](Self::walk_recovering) does; whether both are there.
    fn recover_tree_and_body(
        &self,
        copies: &Copies,
        health: &mut LedgerHealth,
        repair: bool,
        seq: Option<u64>,
        tree: ObjectId,
    ) -> Result<bool, StoreError> {
        let mut buf = Vec::new();
        let mut whole = true;
        // The tree and its body.
        let tree_data = match self.read_stored(&tree, &mut buf).ok().flatten() {
            Some(Kind::Tree) => Some(buf.clone()),
            _ => {
                let found = self.recover(
                    copies,
                    health,
                    repair,
                    seq,
                    Kind::Tree,
                    &tree,
                    copies.what().to_string(),
                )?;
                whole &= found.is_some();
                found
            }
        };
        if let Some(t) = tree_data
            && let Some(blob) = blob_of_tree(&t, self.object_hash())
            && !matches!(
                self.read_stored(&blob, &mut buf).ok().flatten(),
                Some(Kind::Blob)
            )
        {
            let missing = format!(
                "{}; if the body is meant to be gone, `git forum redact` records that",
                copies.what()
            );
            let found = self.recover(copies, health, repair, seq, Kind::Blob, &blob, missing)?;
            whole &= found.is_some();
        }
        Ok(whole)
    }

    /// A missing or damaged object `id` of entry `seq`: records the finding and returns the
    /// object's bytes when an exact copy is at hand (written back with `repair`), else `None`
    /// with `missing` as the remedy.
    #[allow(clippy::too_many_arguments)]
    fn recover(
        &self,
        copies: &Copies<'_>,
        health: &mut LedgerHealth,
        repair: bool,
        seq: Option<u64>,
        kind: Kind,
        id: &ObjectId,
        missing: String,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let code = match kind {
            Kind::Commit => "missing-commit",
            Kind::Tree => "missing-tree",
            _ => "missing-body",
        };
        match copies.find(id).filter(|o| o.kind == kind) {
            Some(o) => {
                let mut f = self.finding(seq, code, id, true);
                if repair {
                    self.write_loose_objects(std::slice::from_ref(&o), false, true)?;
                    health.restored_objects += 1;
                    f.repaired = true;
                }
                health.findings.push(f);
                Ok(Some(o.data))
            }
            None => {
                let mut f = self.finding(seq, code, id, false);
                f.remedy = missing;
                health.findings.push(f);
                Ok(None)
            }
        }
    }

    fn finding(
        &self,
        seq: Option<u64>,
        code: &'static str,
        id: &ObjectId,
        can: bool,
    ) -> DoctorFinding {
        DoctorFinding {
            seq,
            code,
            object: id.to_string(),
            remedy: if can {
                "an exact copy is at hand: --repair writes it back".into()
            } else {
                String::new()
            },
            repairable: can,
            repaired: false,
        }
    }

    /// The tips the reflog recorded since its last rewrite, newest first, but `cur` and the
    /// values of updates that never landed (a writer killed after its reflog line, whose lock
    /// was recovered, or an update under way).
    fn reflog_candidates(&self, cur: ObjectId) -> Vec<ObjectId> {
        let reflog = self.reflog();
        let start = reflog
            .iter()
            .rposition(|l| l.rewrite)
            .map(|i| i + 1)
            .unwrap_or(0);
        let never = self.recovered_locks();
        let pending = self.pending_ref_lock();
        let mut candidates: Vec<ObjectId> = Vec::new();
        for id in reflog[start..].iter().rev().filter_map(|l| l.new) {
            if !id.is_null()
                && id != cur
                && !never.contains(&id)
                && Some(id) != pending
                && !candidates.contains(&id)
            {
                candidates.push(id);
            }
        }
        candidates
    }

    /// The newest of `candidates` that verifies whole (a few are looked at) and, when the ref
    /// names an entry (`cur_entry`), comes after it; with its number of entries.
    fn good_reflog_tip(
        &self,
        candidates: Vec<ObjectId>,
        cur_entry: Option<&Entry>,
    ) -> Option<(ObjectId, u64)> {
        let mut buf = Vec::new();
        let mut good = None;
        for g in candidates.into_iter().take(16) {
            if let Some(e) = cur_entry {
                let later = self
                    .read_entry_commit(&g, &mut buf)
                    .is_ok_and(|(ge, _, _)| ge.seq > e.seq);
                if !later {
                    continue;
                }
            }
            if let Ok(r) = self.verify_at(g, true)
                && r.passed()
            {
                good = Some((g, r.entries));
                break;
            }
        }
        good
    }

    /// What the reflog offers for a ref that names `cur` (see the module doc): `None` when the
    /// ref holds everything the reflog's good tips do, or when what is wrong is damage (a
    /// missing object), which the walk reports and repairs instead.
    fn reflog_offer(&self, cur: ObjectId) -> Result<Option<Offer>, StoreError> {
        let candidates = self.reflog_candidates(cur);
        if candidates.is_empty() {
            return Ok(None);
        }
        let mut buf = Vec::new();
        let cur_entry = self
            .read_entry_commit(&cur, &mut buf)
            .ok()
            .map(|(e, _, _)| e);
        if cur_entry.is_none() && self.read_stored(&cur, &mut buf).ok().flatten().is_none() {
            // The tip's commit is missing: damage, not an overwritten ref.
            return Ok(None);
        }
        let good = self.good_reflog_tip(candidates, cur_entry.as_ref());
        let Some((g, g_entries)) = good else {
            return Ok(None);
        };
        let g_seq = g_entries.saturating_sub(1);
        let finding = |code: &'static str, remedy: String, repairable: bool| DoctorFinding {
            seq: Some(g_seq),
            code,
            object: self.refname().to_string(),
            remedy,
            repairable,
            repaired: false,
        };
        let Some(e) = cur_entry else {
            let what = match self.read_stored(&cur, &mut buf) {
                Ok(Some(Kind::Commit)) => "a commit that is no ledger entry".to_string(),
                Ok(Some(k)) => format!("a {k}, not a commit"),
                _ => "an object that cannot be read".to_string(),
            };
            return Ok(Some(Offer::Restore(
                g,
                finding(
                    "ref-overwritten",
                    format!(
                        "the ref names {cur}, {what}, so it holds no ledger; its reflog's last good tip is seq {g_seq} (commit {g}), {g_entries} entries that verify: --repair puts the ref back there"
                    ),
                    true,
                ),
            )));
        };
        let extends = self
            .chain_ids_from(Some(g))
            .is_ok_and(|ids| ids.contains(&cur));
        if extends {
            return Ok(Some(Offer::Restore(
                g,
                finding(
                    "ref-rewound",
                    format!(
                        "the ref holds seq {} (commit {cur}); its reflog's last good tip, seq {g_seq} (commit {g}), verifies and extends it: --repair puts the ref back there ({} entries come back)",
                        e.seq,
                        g_seq - e.seq
                    ),
                    true,
                ),
            )));
        }
        // Another chain. Reported when the ref's own chain is whole (damage is the walk's).
        let whole = self.verify_at(cur, false).is_ok_and(|r| r.chain);
        Ok(whole.then(|| {
            Offer::Forked(finding(
                "ref-forked",
                format!(
                    "the ref holds a valid ledger of {} entries (commit {cur}) that does not contain its reflog's last good tip, seq {g_seq} (commit {g}); moving the ref there would drop entries, so --repair does not: compare `git forum log` at both and move the ref by hand if that is what you want (`git update-ref {} {g}`)",
                    e.seq + 1,
                    self.refname()
                ),
                false,
            ))
        }))
    }

    /// Every object the write-ahead log holds.
    fn logged_objects(&self) -> Result<Vec<Obj>, StoreError> {
        let mut out = Vec::new();
        for rec in self.wal_records()? {
            for (kind, data) in rec.objects {
                out.push(object(self.object_hash(), kind, data)?);
            }
        }
        Ok(out)
    }
}

/// What a ref's reflog offers doctor.
enum Offer {
    /// Put the ref back on this commit (the finding says why that loses nothing).
    Restore(ObjectId, DoctorFinding),
    /// The ref holds a valid ledger the good tip does not contain: reported only.
    Forked(DoctorFinding),
}

/// The blob an entry tree names; `None` for the empty (redacted) tree or any other shape.
fn blob_of_tree(tree: &[u8], hash: gix::hash::Kind) -> Option<ObjectId> {
    let prefix = format!("100644 {}\0", super::git::PAYLOAD_FILE);
    let rest = tree.strip_prefix(prefix.as_bytes())?;
    (rest.len() == hash.len_in_bytes()).then(|| ObjectId::from_bytes_or_panic(rest))
}
