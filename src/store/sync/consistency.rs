//! The split-view check: a ledger's checkpoint, how a new copy relates to the one seen
//! before (extends, redaction-only rewrite, truncated, rewritten), and the checks that a
//! redaction-only rewrite and the bodies of new entries are what they claim.

use std::collections::HashSet;

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;

use super::chain::{ChainLink, Objects};
use super::problem::ChainProblem;
use crate::ledger::hash;
use crate::ledger::merkle::merkle_root;
use crate::ledger::{canonical, kind};
use crate::store::git::StoreError;

/// A ledger's size and Merkle root, and the commit at its tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub(crate) size: u64,
    pub(crate) root: String,
    pub(crate) commit: Option<ObjectId>,
}

impl Checkpoint {
    /// The checkpoint of the first `size` links of `chain`.
    pub(crate) fn of(chain: &[ChainLink], size: usize) -> Checkpoint {
        let size = size.min(chain.len());
        let hashes: Vec<&str> = chain[..size]
            .iter()
            .map(|l| l.entry.entry_hash.as_str())
            .collect();
        Checkpoint {
            size: size as u64,
            root: merkle_root(&hashes),
            commit: size.checked_sub(1).map(|i| chain[i].commit),
        }
    }

    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "size": self.size,
            "root": self.root,
            "commit": self.commit.map(|c| c.to_string()),
        })
    }
}

impl std::fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "size {} root {}", self.size, self.root)
    }
}

/// How a newer copy of a ledger relates to an older one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Relation {
    /// There was no older copy.
    New,
    /// Same commits, same length.
    UpToDate,
    /// The older copy's commits, then more entries.
    Extends,
    /// The same entries (and maybe more) in different commits: bodies were redacted.
    RedactionRewrite,
    /// Fewer entries than the older copy.
    Truncated,
    /// The first entries hash differently: history was rewritten, or the ledger forked.
    Rewritten,
}

/// How `new` relates to `old` (both root first).
pub(super) fn relate(old: &[ChainLink], new: &[ChainLink]) -> Relation {
    let Some(last) = old.last() else {
        return Relation::New;
    };
    if new.len() < old.len() {
        return Relation::Truncated;
    }
    if old
        .iter()
        .zip(new)
        .any(|(a, b)| a.entry.entry_hash != b.entry.entry_hash)
    {
        return Relation::Rewritten;
    }
    if new[old.len() - 1].commit != last.commit {
        Relation::RedactionRewrite
    } else if new.len() == old.len() {
        Relation::UpToDate
    } else {
        Relation::Extends
    }
}

/// The payload hashes named by the redaction entries of `chain` (read from their bodies).
fn redaction_targets(
    objects: &mut dyn Objects,
    hash: HashKind,
    chain: &[ChainLink],
) -> Result<HashSet<String>, StoreError> {
    let mut out = HashSet::new();
    for l in chain.iter().filter(|l| l.entry.kind == kind::REDACTION) {
        if l.tree == ObjectId::empty_tree(hash) {
            continue;
        }
        let Some((Kind::Tree, tree)) = objects.read(&l.tree)? else {
            continue;
        };
        let prefix = format!("100644 {}\0", crate::store::git::PAYLOAD_FILE);
        let Some(blob) = tree
            .strip_prefix(prefix.as_bytes())
            .filter(|b| b.len() == hash.len_in_bytes())
            .map(ObjectId::from_bytes_or_panic)
        else {
            continue;
        };
        let Some((Kind::Blob, body)) = objects.read(&blob)? else {
            continue;
        };
        let target = std::str::from_utf8(&body)
            .ok()
            .and_then(|t| canonical::parse(t).ok())
            .and_then(|v| v.get("payload_hash")?.as_str().map(str::to_string));
        if let Some(t) = target.filter(|t| hash::is_hash(t)) {
            out.insert(t);
        }
    }
    Ok(out)
}

/// The body blob of `l`, whose tree is not the empty tree: `Ok(Err)` names in one line what
/// is missing or malformed (the tree, the blob). `prefix` is the entry tree's one line before
/// its blob id (`100644 payload.json\0`).
pub(super) fn entry_body(
    objects: &mut dyn Objects,
    hash: HashKind,
    prefix: &str,
    l: &ChainLink,
) -> Result<Result<(ObjectId, Vec<u8>), ChainProblem>, StoreError> {
    let seq = l.entry.seq;
    let tree = match objects.read(&l.tree)? {
        Some((Kind::Tree, t)) => t,
        Some((kind, _)) => {
            return Ok(Err(ChainProblem::TreeIsNot {
                seq,
                id: l.tree,
                kind,
            }));
        }
        None => return Ok(Err(ChainProblem::TreeMissing { seq, id: l.tree })),
    };
    let Some(blob) = tree
        .strip_prefix(prefix.as_bytes())
        .filter(|b| b.len() == hash.len_in_bytes())
        .map(ObjectId::from_bytes_or_panic)
    else {
        return Ok(Err(ChainProblem::NotAnEntryTree { seq, id: l.tree }));
    };
    match objects.read(&blob)? {
        Some((Kind::Blob, b)) => Ok(Ok((blob, b))),
        Some((kind, _)) => Ok(Err(ChainProblem::BodyIsNot {
            seq,
            id: blob,
            kind,
        })),
        None => Ok(Err(ChainProblem::BodyMissing { seq, blob })),
    }
}

/// Checks every body of `chain` as `verify --deep` does: each entry's tree is the empty tree
/// (the body is absent) or a ledger entry tree whose one blob hashes (SHA-256) to the entry's
/// `payload_hash`; an absent body must be named by a redaction entry of the chain (whose own
/// body is present and checked). A tree already checked is not read again. `Ok(Err)` is the
/// problem in one line.
pub(super) fn check_bodies(
    objects: &mut dyn Objects,
    hash: HashKind,
    chain: &[ChainLink],
) -> Result<Result<(), ChainProblem>, StoreError> {
    let empty = ObjectId::empty_tree(hash);
    let prefix = format!("100644 {}\0", crate::store::git::PAYLOAD_FILE);
    let mut checked: std::collections::HashMap<ObjectId, &str> = std::collections::HashMap::new();
    let mut named = HashSet::new();
    let mut absent = Vec::new();
    for l in chain {
        let seq = l.entry.seq;
        let want = l.entry.payload_hash.as_str();
        let redaction = l.entry.kind == kind::REDACTION;
        if l.tree == empty {
            absent.push(l);
            continue;
        }
        if !redaction && let Some(had) = checked.get(&l.tree) {
            if *had != want {
                return Ok(Err(ChainProblem::Replaced(seq)));
            }
            continue;
        }
        let (blob, body) = match entry_body(objects, hash, &prefix, l)? {
            Ok(b) => b,
            Err(why) => return Ok(Err(why)),
        };
        if hash::sha256_hex(&body) != want {
            return Ok(Err(ChainProblem::BlobReplaced { seq, blob }));
        }
        checked.insert(l.tree, want);
        if redaction
            && let Some(t) = std::str::from_utf8(&body)
                .ok()
                .and_then(|t| canonical::parse(t).ok())
                .and_then(|v| v.get("payload_hash")?.as_str().map(str::to_string))
                .filter(|t| hash::is_hash(t))
        {
            named.insert(t);
        }
    }
    if let Some(l) = absent
        .iter()
        .find(|l| !named.contains(&l.entry.payload_hash))
    {
        return Ok(Err(ChainProblem::AbsentUnnamed {
            seq: l.entry.seq,
            payload_hash: l.entry.payload_hash.clone(),
        }));
    }
    Ok(Ok(()))
}

/// For a redaction-only rewrite: every commit that changed may only have lost its body, and
/// only a body a redaction entry of the new chain names.
pub(super) fn check_redaction_rewrite(
    objects: &mut dyn Objects,
    hash: HashKind,
    old: &[ChainLink],
    new: &[ChainLink],
) -> Result<Result<(), ChainProblem>, StoreError> {
    let named = redaction_targets(objects, hash, new)?;
    for (a, b) in old.iter().zip(new) {
        if a.tree == b.tree {
            continue;
        }
        if b.tree != ObjectId::empty_tree(hash) {
            return Ok(Err(ChainProblem::TreeChanged(b.entry.seq)));
        }
        if !named.contains(&b.entry.payload_hash) {
            return Ok(Err(ChainProblem::RemovedUnnamed {
                seq: b.entry.seq,
                payload_hash: b.entry.payload_hash.clone(),
            }));
        }
    }
    Ok(Ok(()))
}
