//! One entry's commit rebuilt and checked, and its body read and hashed (`--deep`), into a
//! compact record for the chain pass.

use super::*;

/// What a deep check found about one entry's body.
pub(super) enum Body {
    Present,
    /// The tree is empty: the body is absent.
    Absent,
    Bad(Box<(Code, String)>),
}

/// One entry as the workers leave it for the chain pass (kept compact: a 100,000-entry ledger
/// keeps 100,000 of these, 88 bytes each; what few entries need beyond that is boxed).
pub(super) struct Rec {
    /// Meaningful only when `readable`.
    pub(super) seq: u64,
    pub(super) entry_hash: [u8; 32],
    pub(super) prev_hash: [u8; 32],
    pub(super) extra: Option<Box<Extra>>,
    /// False when the commit message holds no readable entry (`extra.local` says why).
    pub(super) readable: bool,
    pub(super) edited: bool,
    pub(super) body: BodyState,
}

// The chain pass holds one per entry: keep it small.
const _: () = assert!(std::mem::size_of::<Rec>() <= 88);

/// The rarer parts of a [`Rec`].
#[derive(Default)]
pub(super) struct Extra {
    /// The payload hash, kept only when the body is absent (to match it against redactions).
    pub(super) absent_payload: Option<[u8; 32]>,
    /// A problem found in the commit on its own.
    pub(super) local: Option<(Code, String)>,
    /// The payload hash a redaction entry names.
    pub(super) redacts: Option<[u8; 32]>,
    /// What is wrong with the body, when `body` is [`BodyState::Bad`].
    pub(super) bad_body: Option<(Code, String)>,
    /// The commit and tree a `change` entry names (deep only), checked after the walk.
    pub(super) change: Option<ChangeClaim>,
}

/// What a `change` entry's body says about its commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ChangeClaim {
    pub(super) commit: String,
    pub(super) tree: String,
}

/// The claim of a `change` body, `None` when it names no commit (the task changed nothing).
/// A body whose `commit` or `tree` is not text keeps what it has, so the check reports it.
pub(super) fn change_claim(body: &[u8]) -> Option<ChangeClaim> {
    let v = canonical::parse(std::str::from_utf8(body).ok()?).ok()?;
    let commit = match v.get("commit") {
        None | Some(canonical::Value::Null) => return None,
        Some(c) => c.as_str().unwrap_or("").to_string(),
    };
    let tree = v
        .get("tree")
        .and_then(canonical::Value::as_str)
        .unwrap_or("")
        .to_string();
    Some(ChangeClaim { commit, tree })
}

/// [`Body`] without its problem (kept in [`Extra::bad_body`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum BodyState {
    /// Not checked (shallow verify).
    Unchecked,
    Present,
    Absent,
    Bad,
}

impl Rec {
    /// A record of a commit not read yet.
    fn unread() -> Rec {
        Rec {
            seq: 0,
            entry_hash: [0; 32],
            prev_hash: [0; 32],
            extra: None,
            readable: false,
            edited: false,
            body: BodyState::Unchecked,
        }
    }

    pub(super) fn seq(&self) -> Option<u64> {
        self.readable.then_some(self.seq)
    }

    pub(super) fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Box::default)
    }

    pub(super) fn local(&self) -> Option<&(Code, String)> {
        self.extra.as_ref()?.local.as_ref()
    }

    pub(super) fn set_local(&mut self, code: Code, message: String) {
        self.extra_mut().local = Some((code, message));
    }

    pub(super) fn set_body(&mut self, body: Body) {
        self.body = match body {
            Body::Present => BodyState::Present,
            Body::Absent => BodyState::Absent,
            Body::Bad(problem) => {
                self.extra_mut().bad_body = Some(*problem);
                BodyState::Bad
            }
        };
    }
}

/// The outcome of [`GitStore::verify`].
#[derive(Debug, Default, Clone)]
pub struct LedgerVerifyReport {
    pub(crate) ok: bool,
    pub(crate) chain: bool,
    /// `Some(true)` when deep checks ran and passed.
    pub(crate) deep_ok: Option<bool>,
    pub entries: u64,
    pub(crate) checkpoint: String,
    pub(crate) first_bad_seq: Option<u64>,
    pub(crate) problem: Option<String>,
    /// A stable identifier of the problem class (`entry-edited`, `body-edited`, ...).
    pub(crate) code: Option<Code>,
    /// Entries whose bodies are absent under a redaction entry: (seq, payload hash).
    pub(crate) redacted: Vec<(u64, String)>,
    pub(crate) reflog_lines: usize,
    pub(crate) checkpoints_checked: usize,
    /// Signed checkpoints that verified: (size, root, signer).
    pub(crate) signatures: Vec<(u64, String, String)>,
    pub(crate) notes: Vec<String>,
}

impl LedgerVerifyReport {
    pub(super) fn fail(&mut self, seq: Option<u64>, code: Code, problem: String) {
        self.ok = false;
        self.first_bad_seq = seq;
        self.code = Some(code);
        self.problem = Some(problem);
    }

    /// Whether every requested check passed.
    pub fn passed(&self) -> bool {
        self.problem.is_none()
    }
}

pub(super) fn bad(code: Code, message: String) -> Body {
    Body::Bad(Box::new((code, message)))
}

/// A checker thread's buffers, reused from one commit to the next rather than allocated per
/// entry: the objects read, and the texts rebuilt to compare (the commit's head, the entry's
/// hash preimage).
#[derive(Default)]
pub(super) struct Scratch {
    pub(super) buf: Vec<u8>,
    pub(super) text: String,
}

/// Checks one commit (already known to hash to its name) on its own.
#[allow(clippy::too_many_arguments)]
pub(super) fn check_commit(
    repo: &gix::Repository,
    reader: &mut Reader,
    hash: HashKind,
    id: ObjectId,
    data: &[u8],
    deep: bool,
    seen: &mut SeenTrees,
    scratch: &mut Scratch,
) -> Result<Rec, StoreError> {
    let Scratch { buf, text } = scratch;
    let mut rec = Rec::unread();
    let Some(raw) = parse_commit(data, hash) else {
        rec.set_local(
            Code::NotALedgerCommit,
            format!("object {id} is not a ledger commit"),
        );
        return Ok(rec);
    };
    let (entry, line_canonical) = match entry_from_message_checked(raw.message) {
        Ok(e) => e,
        Err(why) => {
            rec.set_local(Code::NotALedgerCommit, format!("commit {id}: {why}"));
            return Ok(rec);
        }
    };
    if let Some((code, why)) = commit_problem(id, data, &entry, &raw, line_canonical, text) {
        rec.set_local(code, why);
    }
    rec.seq = entry.seq;
    rec.readable = true;
    rec.entry_hash = hex_to_bytes(&entry.entry_hash);
    rec.prev_hash = hex_to_bytes(&entry.prev_hash);
    let payload_hash = hex_to_bytes(&entry.payload_hash);
    rec.edited = !entry.hash_matches_in(text);
    let redaction = entry.kind == crate::ledger::kind::REDACTION;
    let change = entry.kind == crate::ledger::kind::CHANGE;
    if deep
        && !redaction
        && !change
        && let Some(known) = seen.get(&raw.tree)
    {
        rec.set_body(if known == payload_hash {
            Body::Present
        } else {
            body_edited()
        });
        return Ok(rec);
    }
    if deep || redaction {
        let body = read_body(repo, reader, hash, &raw.tree, &payload_hash, buf)?;
        if matches!(body, Body::Present) {
            seen.insert(raw.tree, payload_hash);
        }
        if matches!(body, Body::Absent) {
            rec.extra_mut().absent_payload = Some(payload_hash);
        }
        if entry.kind == crate::ledger::kind::REDACTION && matches!(body, Body::Present) {
            rec.extra_mut().redacts = redaction_target(buf);
        }
        if deep && change && matches!(body, Body::Present) {
            rec.extra_mut().change = change_claim(buf);
        }
        if deep {
            rec.set_body(body);
        }
    }
    Ok(rec)
}

/// What is wrong with commit `id` (bytes `data`, parsed as `raw`) as the commit of `entry`:
/// more than one parent, or any byte other than those its entry defines. The commit's head is
/// rebuilt in `text`.
fn commit_problem(
    id: ObjectId,
    data: &[u8],
    entry: &crate::ledger::Entry,
    raw: &super::super::codec::RawCommit<'_>,
    line_canonical: bool,
    text: &mut String,
) -> Option<(Code, String)> {
    let parent = raw.parents.first();
    if let n @ 2.. = raw.parents.len() {
        let why = format!("commit {id} has {n} parents; ledger commits have one");
        return Some((Code::MergeCommit, why));
    }
    if is_commit_of(data, entry, &raw.tree, parent, line_canonical, text) {
        return None;
    }
    Some((
        Code::CommitAltered,
        format!(
            "commit {id} is not the commit its entry defines (author, date, message or headers were changed)"
        ),
    ))
}

pub(super) fn body_edited() -> Body {
    bad(
        Code::BodyEdited,
        "its body does not hash to its payload_hash: the body was edited".into(),
    )
}

/// The payload hash a redaction entry's body names, if readable.
pub(super) fn redaction_target(body: &[u8]) -> Option<[u8; 32]> {
    let v = canonical::parse(std::str::from_utf8(body).ok()?).ok()?;
    let h = v.get("payload_hash")?.as_str()?;
    hash::is_hash(h).then(|| hex_to_bytes(h))
}

/// How an entry's tree starts: the one entry's mode and name (its blob id follows).
pub(super) const TREE_PREFIX: &[u8] = b"100644 payload.json\0";

/// The problem with object `id` (a `what`: "tree", "body blob") read as `got`, when it is
/// not a `want`.
fn kind_problem(
    got: Result<Option<Kind>, impl std::fmt::Display>,
    want: Kind,
    what: &str,
    id: &ObjectId,
) -> Option<Body> {
    match got {
        Ok(Some(k)) if k == want => None,
        Ok(Some(_)) => Some(bad(Code::NotALedgerTree, format!("{id} is not a {want}"))),
        Ok(None) => Some(bad(
            Code::MissingObject,
            format!("{what} {id} is missing from the object store"),
        )),
        Err(e) => Some(bad(
            Code::CorruptObject,
            format!("{what} {id} cannot be read: {e}"),
        )),
    }
}

/// Reads and checks an entry's tree and body. When the verdict is [`Body::Present`], `buf`
/// holds the body.
pub(super) fn read_body(
    repo: &gix::Repository,
    reader: &mut Reader,
    hash: HashKind,
    tree_id: &ObjectId,
    payload_hash: &[u8; 32],
    buf: &mut Vec<u8>,
) -> Result<Body, StoreError> {
    if *tree_id == ObjectId::empty_tree(hash) {
        return Ok(Body::Absent);
    }
    // The tree is read into `buf`, checked and its one blob id taken, before the blob is
    // read into the same buffer (no copy of either).
    let got = read_object(repo, reader, tree_id, buf);
    if let Some(problem) = kind_problem(got, Kind::Tree, "tree", tree_id) {
        return Ok(problem);
    }
    let Some(blob) = buf
        .strip_prefix(TREE_PREFIX)
        .filter(|b| b.len() == hash.len_in_bytes())
        .map(ObjectId::from_bytes_or_panic)
    else {
        return Ok(bad(
            Code::NotALedgerTree,
            format!("tree {tree_id} is not a ledger entry tree"),
        ));
    };
    if object_id(hash, Kind::Tree, buf).ok() != Some(*tree_id) {
        return Ok(bad(
            Code::CorruptObject,
            format!("tree {tree_id} does not hash to its name"),
        ));
    }
    let got = read_object(repo, reader, &blob, buf);
    if let Some(problem) = kind_problem(got, Kind::Blob, "body blob", &blob) {
        return Ok(problem);
    }
    // The digest compared as bytes, straight from the buffer.
    if <sha2::Sha256 as sha2::Digest>::digest(buf.as_slice()).as_slice() != payload_hash.as_slice()
    {
        return Ok(body_edited());
    }
    if object_id(hash, Kind::Blob, buf).ok() != Some(blob) {
        return Ok(bad(
            Code::CorruptObject,
            format!("blob {blob} does not hash to its name"),
        ));
    }
    Ok(Body::Present)
}
