//! Importing whole ledgers: entries already hashed and held in memory (a folded trace, a
//! benchmark ledger), and Forum directories streamed from disk, each written as one pack on an
//! empty ledger.

use std::path::Path;

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;

use super::append::{Built, ImportError, Imported};
use super::codec::{
    commit_bytes, object, object_id, push_commit_bytes, push_tree_bytes, tree_bytes,
};
use super::error::{StoreError, io};
use super::forum_dir;
use super::handle::GitStore;
use super::objects::unique;
use super::pack::{PackStream, Section};
use crate::ledger::{ChainChecker, ChainProblem, Entry};

impl GitStore {
    /// Writes already-hashed entries held in memory (a folded trace, a benchmark ledger) as one
    /// pack on an empty ledger. Each item is the entry and its canonical body, if present. A
    /// Forum directory is imported with [`GitStore::import_forum_dir`] instead, which streams.
    pub(crate) fn import_entries(
        &mut self,
        items: &[(Entry, Option<String>)],
    ) -> Result<ObjectId, StoreError> {
        if self.tip_id()?.is_some() {
            return Err(StoreError::Invalid(format!(
                "ledger {:?} already exists; import into a new ledger with --ledger NAME",
                self.name
            )));
        }
        if items.is_empty() {
            return Err(StoreError::Invalid(
                "nothing to import: the Forum ledger has no entries".into(),
            ));
        }
        let hash = self.hash;
        let name = self.name.clone();
        let (commits, _) = self.append_with(
            |tip| {
                if tip.is_some() {
                    return Err(StoreError::Invalid(format!(
                        "ledger {name:?} was created while importing"
                    )));
                }
                let mut objects = Vec::with_capacity(items.len() * 3);
                let mut blobs = Vec::new();
                let mut trees = Vec::new();
                let mut commits = Vec::with_capacity(items.len());
                let mut entries = Vec::with_capacity(items.len());
                let empty_tree = object(hash, Kind::Tree, Vec::new())?;
                let mut parent: Option<ObjectId> = None;
                for (entry, body) in items {
                    let tree_id = match body {
                        Some(b) => {
                            let blob = object(hash, Kind::Blob, b.as_bytes().to_vec())?;
                            let tree = object(hash, Kind::Tree, tree_bytes(&blob.id))?;
                            let id = tree.id;
                            blobs.push(blob);
                            trees.push(tree);
                            id
                        }
                        None => empty_tree.id,
                    };
                    let c = object(
                        hash,
                        Kind::Commit,
                        commit_bytes(entry, &tree_id, parent.as_ref()),
                    )?;
                    parent = Some(c.id);
                    commits.push(c.id);
                    objects.push(c);
                    entries.push(entry.clone());
                }
                trees.push(empty_tree);
                objects.extend(trees);
                objects.extend(blobs);
                Ok(Built {
                    objects,
                    commits,
                    entries,
                    as_pack: true,
                    prewritten: None,
                })
            },
            &format!("forum: import {} entries", items.len()),
        )?;
        Ok(*commits.last().expect("non-empty import"))
    }

    /// Starts an import into `objects_dir`: the pack it streams into (holding the empty tree
    /// already) and the temporary file its seq index is written to.
    fn start_import(&self, objects_dir: &Path) -> Result<(ImportRun, RemoveOnDrop), ImportError> {
        let hash = self.hash;
        let level = gix::zlib::Compression::new(IMPORT_LEVEL).expect("a valid level");
        let pack = PackStream::create(objects_dir, hash, level).map_err(io("writing a pack"))?;
        let ids_path = objects_dir.join("pack").join(format!(
            "forum_tmp_ids_{}_{}",
            std::process::id(),
            unique()
        ));
        let ids_file = std::fs::File::create(&ids_path).map_err(io("writing the seq index"))?;
        let ids = RemoveOnDrop(Some(ids_path));
        let empty_tree = object(hash, Kind::Tree, Vec::new())?;
        let mut run = ImportRun {
            hash,
            pack,
            ids: std::io::BufWriter::with_capacity(1 << 16, ids_file),
            empty_tree: empty_tree.id,
            checker: ChainChecker::new(),
            chain_problem: None,
            body_problem: None,
            parent: None,
            last: None,
            absent: 0,
            count: 0,
            rows: forum_dir::order::KeptRows::new(&objects_dir.join("pack")),
            tree_buf: Vec::with_capacity(64),
            commit_buf: String::with_capacity(1024),
        };
        run.pack
            .add(&empty_tree.id, Kind::Tree, &empty_tree.data, Section::Rest)
            .map_err(io("writing a pack"))?;
        Ok((run, ids))
    }

    /// Moves the ledger ref to the imported chain's tip `tip` (entry `last`), whose pack `pack`
    /// holds every object, once nothing else created the ledger meanwhile.
    fn adopt_import(
        &self,
        pack: PackStream,
        tip: ObjectId,
        last: &Entry,
        count: u64,
    ) -> Result<(), StoreError> {
        let mut guard = Some(pack.finish(self.opts.fsync).map_err(io("writing a pack"))?);
        let name = self.name.clone();
        let appended = self.append_with(
            |tip_now| {
                if tip_now.is_some() {
                    return Err(StoreError::Invalid(format!(
                        "ledger {name:?} was created while importing"
                    )));
                }
                Ok(Built {
                    objects: Vec::new(),
                    commits: vec![tip],
                    entries: vec![last.clone()],
                    as_pack: true,
                    prewritten: guard.take(),
                })
            },
            &format!("forum: import {count} entries"),
        );
        if let Some(g) = guard {
            g.release();
        }
        appended?;
        Ok(())
    }

    /// Imports a Forum ledger directory into this new, empty ledger as one pack, streaming: the
    /// payload rows are indexed on disk, the entries read one at a time, and each object is
    /// written to the pack as it is built, so memory stays flat however long the ledger. Every
    /// entry is checked (chain, hashes, bodies) on the way, and any problem leaves the
    /// repository as it was: the half-written pack is removed and no ref moves.
    pub(crate) fn import_forum_dir(
        &mut self,
        dir: &Path,
        limits: &forum_dir::Limits,
    ) -> Result<Imported, ImportError> {
        if self.tip_id()?.is_some() {
            return Err(StoreError::Invalid(format!(
                "ledger {:?} already exists; import into a new ledger with --ledger NAME",
                self.name
            ))
            .into());
        }
        let objects_dir = self.objects_dir();
        let mut src = forum_dir::open_stream(dir, limits, &objects_dir)?;
        let (mut run, ids) = self.start_import(&objects_dir)?;
        read_ahead(&mut src, |row, next| run.take(row, next))?;
        if let Some(refused) = run.refusal(dir) {
            return Err(refused);
        }
        let (Some(tip), Some(last)) = (run.parent, run.last.take()) else {
            return Err(StoreError::Invalid(
                "nothing to import: the Forum ledger has no entries".into(),
            )
            .into());
        };
        let ImportRun {
            pack,
            ids: ids_w,
            checker,
            absent,
            count,
            rows,
            ..
        } = run;
        ids_w
            .into_inner()
            .map_err(|e| io("writing the seq index")(e.into_error()))?;
        self.adopt_import(pack, tip, &last, count)?;
        self.keep_forum_rows(rows)?;
        // The seq index, whole (the append recorded only the tip); it is never trusted, so a
        // failure here only costs a rebuild later.
        let index = self.index_path();
        if let Some(d) = index.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        if let Some(p) = ids.0.as_ref()
            && std::fs::rename(p, &index).is_ok()
        {
            let mut ids = ids;
            ids.0 = None;
        }
        let torn = [src.entries.torn.take(), src.payloads.torn.take()]
            .into_iter()
            .flatten()
            .collect();
        Ok(Imported {
            entries: count,
            checkpoint: checker.root(),
            commit: tip,
            absent_bodies: absent,
            torn,
        })
    }
}

/// One row of a Forum directory read ahead: its position, its entry and what the lookup of
/// its body found.
type Row = (
    usize,
    Entry,
    Result<Option<forum_dir::StreamBody>, forum_dir::ForumDirError>,
);

/// Rows in one hand-off from the reading thread to the importing one.
const AHEAD: usize = 256;

/// Reads `src` (each entry and the lookup of its body) on a thread of its own, a batch of rows
/// at a time, while this thread hands each row to `take` with the entry after it (`None` for
/// the last), in file order: the parsing of both files runs beside the hashing and checking of
/// the entries. Rows are taken exactly as a reading on this thread would take them: an error
/// of reading is returned after the rows before it were taken (the one just before it is not,
/// its successor unknown), and an error of `take` stops the reading. Batches go back to the
/// reader once taken, which drops their rows where it allocated them.
fn read_ahead(
    src: &mut forum_dir::ForumStream,
    mut take: impl FnMut(&mut Row, Option<&Entry>) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    use std::sync::mpsc::sync_channel;
    let (entries, payloads) = (&mut src.entries, &mut src.payloads);
    std::thread::scope(|s| {
        let (tx, rx) = sync_channel::<Vec<Row>>(2);
        let (back, taken_rows) = sync_channel::<Vec<Row>>(4);
        let reader = std::thread::Builder::new()
            .name("forum-read".into())
            .spawn_scoped(s, move || {
                let fresh = || match taken_rows.try_recv() {
                    Ok(mut b) => {
                        b.clear();
                        b
                    }
                    Err(_) => Vec::with_capacity(AHEAD),
                };
                let mut batch = fresh();
                let read = entries.read(|i, e| -> Result<(), ImportError> {
                    let body = payloads.body(&e);
                    batch.push((i, e, body));
                    if batch.len() == AHEAD {
                        // Refused only when the taking stopped on an error of its own.
                        tx.send(std::mem::replace(&mut batch, fresh()))
                            .map_err(|_| {
                                forum_dir::ForumDirError::Invalid("the import stopped".into())
                            })?;
                    }
                    Ok(())
                });
                // The rows read before the end, or before an error of reading.
                let _ = tx.send(batch);
                read
            })
            .map_err(io("starting the import's reader"))?;
        // The batch whose last row waits for the next batch's first entry.
        let mut held: Option<Vec<Row>> = None;
        let mut taken = Ok(());
        for mut batch in rx.iter().filter(|b| !b.is_empty()) {
            if let Some(mut h) = held.take() {
                let last = h.last_mut().expect("held batches are not empty");
                taken = take(last, Some(&batch[0].1));
                let _ = back.try_send(h);
            }
            for k in 1..batch.len() {
                if taken.is_err() {
                    break;
                }
                let (done, rest) = batch.split_at_mut(k);
                taken = take(&mut done[k - 1], Some(&rest[0].1));
            }
            held = Some(batch);
            if taken.is_err() {
                break;
            }
        }
        drop(rx);
        let read = reader.join().unwrap_or_else(|_| {
            Err(StoreError::Invalid("the import's reader panicked".into()).into())
        });
        taken?;
        read?;
        match held.as_mut().and_then(|h| h.last_mut()) {
            Some(last) => take(last, None),
            None => Ok(()),
        }
    })
}

/// zlib level of an import's bodies (its trees and commits are stored): level 1 costs about
/// half the CPU of level 6 on bodies this small, for a pack about as large.
const IMPORT_LEVEL: i32 = 1;

/// A file removed when dropped, unless taken.
struct RemoveOnDrop(Option<std::path::PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The state of one streaming import.
struct ImportRun {
    hash: HashKind,
    pack: PackStream,
    ids: std::io::BufWriter<std::fs::File>,
    empty_tree: ObjectId,
    checker: ChainChecker,
    chain_problem: Option<(usize, ChainProblem)>,
    body_problem: Option<String>,
    parent: Option<ObjectId>,
    last: Option<Entry>,
    absent: usize,
    count: u64,
    /// Forum's rows of the bodies whose keys it did not write sorted.
    rows: forum_dir::order::KeptRows,
    /// The current entry's tree and commit, written into the same buffers for every entry.
    tree_buf: Vec<u8>,
    commit_buf: String,
}

impl ImportRun {
    /// Why the rows read so far cannot be imported from `dir`: the chain or a body does not
    /// verify.
    fn refusal(&self, dir: &Path) -> Option<ImportError> {
        if let Some((i, p)) = &self.chain_problem {
            return Some(ImportError::Refused(format!(
                "{} does not verify at row {i}: {p}; nothing was imported",
                dir.display()
            )));
        }
        let why = self.body_problem.as_ref()?;
        Some(ImportError::Refused(format!(
            "{}: {why}; nothing was imported",
            dir.display()
        )))
    }

    /// Checks entry `e` at row `i` (its successor known, to tell a swap from a deletion) and,
    /// while nothing is wrong, writes its objects with `body` (what the lookup of its body
    /// found). After a problem the rest is only read: a problem found in reading is reported
    /// first, a broken chain before a bad body.
    fn take(&mut self, row: &mut Row, next: Option<&Entry>) -> Result<(), ImportError> {
        let (i, e) = (row.0, &row.1);
        if self.chain_problem.is_none()
            && let Err(p) = self.checker.push(e, next)
        {
            self.chain_problem = Some((i, p));
        }
        if self.chain_problem.is_some() || self.body_problem.is_some() {
            return Ok(());
        }
        let hash = self.hash;
        let tree = match std::mem::replace(&mut row.2, Ok(None)) {
            Ok(Some(b)) => {
                if let Some(body) = &b.forum_order {
                    self.rows.keep(&e.payload_hash, body)?;
                }
                let blob = object_id(hash, Kind::Blob, b.canonical.as_bytes())?;
                push_tree_bytes(&mut self.tree_buf, &blob);
                let tree = object_id(hash, Kind::Tree, &self.tree_buf)?;
                if !b.repeated {
                    self.pack
                        .add(&tree, Kind::Tree, &self.tree_buf, Section::Rest)
                        .and_then(|()| {
                            self.pack
                                .add(&blob, Kind::Blob, b.canonical.as_bytes(), Section::Rest)
                        })
                        .map_err(io("writing a pack"))?;
                }
                tree
            }
            Ok(None) => {
                self.absent += 1;
                self.empty_tree
            }
            Err(forum_dir::ForumDirError::Corrupt(why)) => {
                self.body_problem = Some(why);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        push_commit_bytes(&mut self.commit_buf, e, &tree, self.parent.as_ref());
        let commit = object_id(hash, Kind::Commit, self.commit_buf.as_bytes())?;
        self.pack
            .add(
                &commit,
                Kind::Commit,
                self.commit_buf.as_bytes(),
                Section::Lead,
            )
            .map_err(io("writing a pack"))?;
        std::io::Write::write_all(&mut self.ids, commit.as_slice())
            .map_err(io("writing the seq index"))?;
        self.parent = Some(commit);
        self.count += 1;
        if next.is_none() {
            // Only the last entry is kept: the ledger's tip names it.
            self.last = Some(e.clone());
        }
        Ok(())
    }
}
