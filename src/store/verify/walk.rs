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

/// Walks first parents from `tip`, checking that each object is a commit, and sends the
/// commits in batches (numbered from the tip) on the first of `chans`, up to the root or to
/// `stop` (not sent); the second gives back batches checked, to fill again. Whether each
/// commit hashes to its name is checked by the workers ([`BadIds`]): the walk stops soon after
/// one reports a commit that does not, and everything from that commit on is dropped. Returns
/// where the walk stopped early (if it did, with the walk position there), the `watch` commits
/// it met with their positions, and the position where it met `stop`, if it did.
#[allow(clippy::too_many_arguments)]
pub(super) fn walk(
    repo: &gix::Repository,
    hash: HashKind,
    tip: ObjectId,
    chans: (mpsc::SyncSender<Batch>, mpsc::Receiver<Batch>),
    watch: HashSet<ObjectId>,
    packs: Packs,
    stop: Option<ObjectId>,
    bad: &BadIds,
) -> Result<Walk, StoreError> {
    let (tx, back) = chans;
    let mut reader = Reader::new(packs);
    let mut walked = Walk::default();
    let mut cur = Some(tip);
    let mut buf = Vec::new();
    let mut batch = Batch::with_capacity(BATCH);
    let mut i = 0usize;
    let mut prev_id: Option<ObjectId> = None;
    while let Some(id) = cur {
        if bad.any() {
            break;
        }
        if Some(id) == stop {
            walked.met = Some(i);
            break;
        }
        let parent = match commit_parent(repo, &mut reader, hash, &id, &mut buf)? {
            Ok(parent) => parent,
            Err((code, message)) => {
                let hint = child_seq_hint(repo, hash, prev_id);
                walked.failure = Some((i, WalkFailure::new(hint, code, message)));
                break;
            }
        };
        cur = parent;
        if watch.contains(&id) {
            walked.found.push((i, id));
        }
        batch.push(i, id, prev_id, &buf);
        prev_id = Some(id);
        i += 1;
        if batch.items.len() == BATCH {
            let next = back
                .try_recv()
                .unwrap_or_else(|_| Batch::with_capacity(BATCH));
            let full = std::mem::replace(&mut batch, next);
            if tx.send(full).is_err() {
                return Ok(walked);
            }
        }
    }
    if !batch.items.is_empty() {
        let _ = tx.send(batch);
    }
    Ok(walked)
}

/// What [`walk`] met: where it stopped early (walk position and why), the `watch` commits it
/// passed (with their positions), and the position where it met `stop`.
#[derive(Default)]
pub(super) struct Walk {
    pub(super) failure: Option<(usize, WalkFailure)>,
    pub(super) found: Vec<(usize, ObjectId)>,
    pub(super) met: Option<usize>,
}

impl Walk {
    /// What counts of a walk (`walked`, with `first_err`, the error a worker met at the lowest
    /// position) when a worker found the commit at walk position `cut` not to hash to its name
    /// (`usize::MAX` when none did): nothing at or past it, since a walk that hashed each commit
    /// before following its parent stopped there.
    pub(super) fn kept(
        first_err: Option<(usize, StoreError)>,
        walked: Result<Walk, StoreError>,
        cut: usize,
    ) -> Result<Walk, StoreError> {
        match (first_err.filter(|(i, _)| *i < cut), walked) {
            (Some((_, e)), _) => Err(e),
            (None, Err(e)) if cut == usize::MAX => Err(e),
            (None, Err(_)) => Ok(Walk::default()),
            (None, Ok(w)) => Ok(w),
        }
    }

    /// Where the walk stopped early, the `watch` commits it met and whether it met `stop`,
    /// as a walk that hashed each commit first would have them: cut at the first commit `bad`
    /// names, whose records past it are dropped from `slots`.
    pub(super) fn cut(
        self,
        bad: BadIds,
        slots: &mut Vec<Option<Rec>>,
        repo: &gix::Repository,
        hash: HashKind,
    ) -> (Option<WalkFailure>, HashSet<ObjectId>, bool) {
        let Some((at, id, prev)) = bad.first() else {
            let found = self.found.into_iter().map(|f| f.1).collect();
            return (self.failure.map(|f| f.1), found, self.met.is_some());
        };
        slots.truncate(at);
        let (code, message) = replaced(&id);
        let failure = WalkFailure::new(child_seq_hint(repo, hash, prev), code, message);
        let found = self.found.into_iter().filter(|f| f.0 < at).map(|f| f.1);
        (
            Some(failure),
            found.collect(),
            self.met.is_some_and(|i| i <= at),
        )
    }
}

/// The seq of commit `prev` (the child of a commit the walk stopped at), read through gix.
pub(super) fn child_seq_hint(
    repo: &gix::Repository,
    hash: HashKind,
    prev: Option<ObjectId>,
) -> Option<u64> {
    let mut b = Vec::new();
    read_gix(repo, &prev?, &mut b).ok()??;
    seq_of_message(parse_commit(&b, hash)?.message)
}

/// Commit `id` read into `buf`: its parent (`None` for the root), or what is wrong with it.
/// A commit whose parent can be read is not hashed here: the workers check that it hashes to
/// its name. Anything else is hashed at once, so an object whose content was replaced is
/// reported as that, as before, rather than as not a commit.
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
    let parent = if kind == Kind::Commit {
        first_parent(buf, hash)
    } else {
        None
    };
    if let Some(parent) = parent {
        return Ok(Ok(parent));
    }
    if object_id(hash, kind, buf)? != *id {
        return Ok(Err(replaced(id)));
    }
    Ok(Err((
        Code::NotALedgerCommit,
        format!("object {id} is not a ledger commit"),
    )))
}

/// The problem of commit `id`, read but not hashing to its name.
pub(super) fn replaced(id: &ObjectId) -> (Code, String) {
    (
        Code::CorruptObject,
        format!("object {id} does not hash to its name (its content was replaced)"),
    )
}

/// The first commit (by walk position) that a worker found not to hash to its name, shared by
/// the walker and the workers. Checking each commit's id on the workers rather than on the
/// walker takes the hash (SHA-1 with collision detection) off the one thread that must read
/// every commit in turn; the walker follows parents read from bytes not yet checked, and stops
/// soon after a worker reports one (at most the batches in flight later), so what it read past
/// a replaced commit is dropped and the verdict is the one a walk that hashed first gives.
#[derive(Default)]
pub(super) struct BadIds {
    /// The lowest position reported, `usize::MAX` while none.
    first: std::sync::atomic::AtomicUsize,
    /// That commit's id and the id of the commit before it in the walk (its child).
    at: Mutex<Option<(usize, ObjectId, Option<ObjectId>)>>,
}

impl BadIds {
    pub(super) fn new() -> BadIds {
        BadIds {
            first: std::sync::atomic::AtomicUsize::new(usize::MAX),
            at: Mutex::new(None),
        }
    }

    /// Whether any commit was reported.
    pub(super) fn any(&self) -> bool {
        self.before() != usize::MAX
    }

    /// The lowest position reported (`usize::MAX` while none).
    pub(super) fn before(&self) -> usize {
        self.first.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Reports commit `id` at walk position `i` (its child `prev`) as not hashing to its name.
    pub(super) fn report(&self, i: usize, id: ObjectId, prev: Option<ObjectId>) {
        let mut at = self.at.lock().unwrap_or_else(|e| e.into_inner());
        if at.is_none_or(|(j, _, _)| i < j) {
            *at = Some((i, id, prev));
            self.first
                .fetch_min(i, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The first commit reported: its position, its id and its child's id.
    pub(super) fn first(self) -> Option<(usize, ObjectId, Option<ObjectId>)> {
        self.at.into_inner().unwrap_or_else(|e| e.into_inner())
    }
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
