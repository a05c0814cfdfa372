//! The walk from the tip: reading and inflating each commit and following first parents.

use super::*;

/// Reads object `id` into `buf`: whole from a pack when it can, else through gix.
pub(super) fn read_object(
    repo: &gix::Repository,
    reader: &mut Reader,
    id: &ObjectId,
    buf: &mut Vec<u8>,
) -> Result<Option<Kind>, StoreError> {
    if let Some(kind) = reader.read(id, buf) {
        return Ok(Some(kind));
    }
    read_gix(repo, id, buf)
}

/// Reads object `id` into `buf` through gix.
pub(super) fn read_gix(
    repo: &gix::Repository,
    id: &ObjectId,
    buf: &mut Vec<u8>,
) -> Result<Option<Kind>, StoreError> {
    crate::store::odb::try_find(repo, id, buf)
        .map_err(|e| git_err(&format!("reading object {id}"), e))
}

/// Walks first parents from `tip`, checking that each object hashes to its name and is a
/// commit, and sends the commits in batches (numbered from the tip) on the first of `chans`,
/// up to the root or to `stop` (not sent); the second gives back batches checked, to fill
/// again. Returns where it stopped early (if it did), the `watch` commits it met, and whether
/// it met `stop`.
pub(super) fn walk(
    repo: &gix::Repository,
    hash: HashKind,
    tip: ObjectId,
    chans: (mpsc::SyncSender<Batch>, mpsc::Receiver<Batch>),
    watch: HashSet<ObjectId>,
    packs: Packs,
    stop: Option<ObjectId>,
) -> Result<(Option<WalkFailure>, HashSet<ObjectId>, bool), StoreError> {
    let (tx, back) = chans;
    let mut reader = Reader::new(packs);
    let mut found = HashSet::new();
    let mut cur = Some(tip);
    let mut buf = Vec::new();
    let mut batch = Batch::with_capacity(BATCH);
    let mut i = 0usize;
    let mut prev_id: Option<ObjectId> = None;
    let mut failure = None;
    let mut met = false;
    while let Some(id) = cur {
        if Some(id) == stop {
            met = true;
            break;
        }
        let fail = |code, message| WalkFailure {
            child_seq_hint: prev_id.and_then(|p| {
                let mut b = Vec::new();
                read_gix(repo, &p, &mut b).ok()??;
                seq_of_message(parse_commit(&b, hash)?.message)
            }),
            code,
            message,
        };
        let parent = match commit_parent(repo, &mut reader, hash, &id, &mut buf)? {
            Ok(parent) => parent,
            Err((code, message)) => {
                failure = Some(fail(code, message));
                break;
            }
        };
        cur = parent;
        prev_id = Some(id);
        if watch.contains(&id) {
            found.insert(id);
        }
        batch.push(i, id, &buf);
        i += 1;
        if batch.items.len() == BATCH {
            let next = back
                .try_recv()
                .unwrap_or_else(|_| Batch::with_capacity(BATCH));
            let full = std::mem::replace(&mut batch, next);
            if tx.send(full).is_err() {
                return Ok((failure, found, met));
            }
        }
    }
    if !batch.items.is_empty() {
        let _ = tx.send(batch);
    }
    Ok((failure, found, met))
}

/// Commit `id` read into `buf` and checked to hash to its name: its parent (`None` for the
/// root), or what is wrong with it.
fn commit_parent(
    repo: &gix::Repository,
    reader: &mut Reader,
    hash: HashKind,
    id: &ObjectId,
    buf: &mut Vec<u8>,
) -> Result<ParentOrProblem, StoreError> {
    let read = match read_object(repo, reader, id, buf) {
        Ok(read) => read,
        Err(e) => {
            return Ok(Err((
                Code::CorruptObject,
                format!("commit {id} cannot be read: {e}"),
            )));
        }
    };
    let Some(kind) = read else {
        return Ok(Err((
            Code::MissingObject,
            format!("commit {id} is missing from the object store"),
        )));
    };
    let actual = object_id(hash, kind, buf)?;
    if actual != *id {
        return Ok(Err((
            Code::CorruptObject,
            format!("object {id} does not hash to its name (its content was replaced)"),
        )));
    }
    let parent = if kind == Kind::Commit {
        first_parent(buf, hash)
    } else {
        None
    };
    let Some(parent) = parent else {
        return Ok(Err((
            Code::NotALedgerCommit,
            format!("object {id} is not a ledger commit"),
        )));
    };
    Ok(Ok(parent))
}

/// A commit's parent (`None` for the root), or what is wrong with the commit.
type ParentOrProblem = Result<Option<ObjectId>, (Code, String)>;

/// A commit's first parent (`Some(None)` for a root commit), or `None` when `data` is not a
/// commit. Reads the leading `tree` and `parent` lines directly, as git writes them, and falls
/// back to a full parse otherwise; the workers check every header of the commit anyway.
pub(super) fn first_parent(data: &[u8], hash: HashKind) -> Option<Option<ObjectId>> {
    let hex = hash.len_in_hex();
    let id_line = |at: usize, tag: &[u8]| -> Option<ObjectId> {
        let rest = data.get(at..)?.strip_prefix(tag)?;
        if rest.get(hex) != Some(&b'\n') {
            return None;
        }
        ObjectId::from_hex(&rest[..hex]).ok()
    };
    let after_tree = 5 + hex + 1;
    if id_line(0, b"tree ").is_some() {
        if let Some(parent) = id_line(after_tree, b"parent ") {
            return Some(Some(parent));
        }
        if data
            .get(after_tree..)
            .is_some_and(|r| r.starts_with(b"author "))
        {
            return Some(None);
        }
    }
    let raw = parse_commit(data, hash)?;
    Some(raw.parents.first().copied())
}

/// The seq in a ledger commit message, if it has one.
pub(crate) fn seq_of_message(message: &[u8]) -> Option<u64> {
    entry_from_message(message).ok().map(|e| e.seq)
}
