//! Proofs as surface operations: `prove` (an inclusion or a consistency proof of the ledger's
//! checkpoint; `git forum prove`, `POST /prove`, MCP `ledger_prove`) and `verify-proof` (a
//! proof file checked without a repository), each answering one typed report.

use std::cell::RefCell;
use std::path::Path;

use serde::Serialize;

use super::{Error, Report, Result};
use crate::ledger::Entry;
use crate::ledger::merkle::{consistency_proof, inclusion_path, merkle_root};
use crate::ledger::proof::{
    CONSISTENCY_SCHEMA, Checkpoint, ConsistencyProof, INCLUSION_SCHEMA, InclusionProof, ProofError,
    Verified, signed_text, verify_text,
};
use crate::store::forum_tree::ForumTree;
use crate::store::git::{GitStore, StoreError};
use crate::store::sign::{self, SignatureCheck, StoredSignature};

/// What to prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// That the entry at this seq is in the checkpoint.
    Inclusion(u64),
    /// That the checkpoint extends the ledger's checkpoint of this size.
    Consistency(u64),
}

/// A proof, written as the proof file itself (`verify-proof` reads it back).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum ProofReport {
    Inclusion(InclusionProof),
    Consistency(ConsistencyProof),
}

impl Report for ProofReport {
    /// The family name; each proof carries its own exact schema (`git-forum.inclusion-proof/v1`,
    /// `git-forum.consistency-proof/v1`) in its `schema` field.
    const SCHEMA: &'static str = "git-forum.proof/v1";
}

/// What a proof is made from: a ledger's entries in memory, or its cache of Forum's tree
/// (`refs/forum/merkle/NAME`), which gives the same hashes from O(log n) small objects.
pub(crate) trait ProofSource {
    /// The ledger's length.
    fn len(&self) -> u64;
    /// The entry at `seq` (below [`Self::len`]).
    fn entry(&self, seq: u64) -> Result<Entry>;
    /// Forum's root of the first `size` entries.
    fn root(&self, size: u64) -> Result<String>;
    /// The audit path of entry `seq` in the tree of the first `size` entries.
    fn inclusion(&self, size: u64, seq: u64) -> Result<Vec<String>>;
    /// The consistency proof of the first `size` entries against the first `old`.
    fn consistency(&self, size: u64, old: u64) -> Result<Vec<String>>;
}

fn hashes(entries: &[Entry], size: u64) -> Vec<&str> {
    entries[..size as usize]
        .iter()
        .map(|e| e.entry_hash.as_str())
        .collect()
}

impl ProofSource for [Entry] {
    fn len(&self) -> u64 {
        <[Entry]>::len(self) as u64
    }
    fn entry(&self, seq: u64) -> Result<Entry> {
        Ok(self[seq as usize].clone())
    }
    fn root(&self, size: u64) -> Result<String> {
        Ok(merkle_root(&hashes(self, size)))
    }
    fn inclusion(&self, size: u64, seq: u64) -> Result<Vec<String>> {
        Ok(inclusion_path(&hashes(self, size), seq as usize))
    }
    fn consistency(&self, size: u64, old: u64) -> Result<Vec<String>> {
        Ok(consistency_proof(&hashes(self, size), old as usize))
    }
}

/// A ledger in git read through its cache of Forum's tree, each entry through the seq index.
pub(crate) struct Cached<'a> {
    store: &'a GitStore,
    tree: RefCell<ForumTree<'a>>,
}

impl<'a> Cached<'a> {
    /// The cache brought up to the ledger's tip (extended or rebuilt when it must be; a
    /// fetched copy's built in memory). `None` when the ledger has no entries yet.
    pub(crate) fn open(store: &'a GitStore) -> Result<Option<Cached<'a>>> {
        if store.tip()?.is_none() {
            return Ok(None);
        }
        Ok(Some(Cached {
            store,
            tree: RefCell::new(store.forum_tree()?),
        }))
    }

    /// Forum's root of every entry: the checkpoint.
    pub(crate) fn checkpoint(&self) -> Checkpoint {
        let t = self.tree.borrow();
        Checkpoint {
            size: t.size,
            root: t.root.clone(),
        }
    }

    /// `f` of the tree; when a chunk it reads turns out corrupt (the checks on opening cover
    /// the chunks a root reads, not every one a proof may), the cache is rebuilt and `f` runs
    /// again.
    fn with<T>(
        &self,
        f: impl Fn(&ForumTree<'a>) -> std::result::Result<T, StoreError>,
    ) -> Result<T> {
        let first = f(&self.tree.borrow());
        match first {
            Err(StoreError::Corrupt(_)) if !self.tree.borrow().rebuilt => {
                let fresh = self.store.rebuild_forum_tree()?;
                *self.tree.borrow_mut() = fresh;
                Ok(f(&self.tree.borrow())?)
            }
            r => Ok(r?),
        }
    }
}

impl ProofSource for Cached<'_> {
    fn len(&self) -> u64 {
        self.tree.borrow().size
    }
    fn entry(&self, seq: u64) -> Result<Entry> {
        let (e, _) = self.store.get_with_commit(seq)?.ok_or_else(|| {
            Error::conflict(format!(
                "entry {seq} cannot be read; run `git forum verify`"
            ))
        })?;
        Ok(e)
    }
    fn root(&self, size: u64) -> Result<String> {
        self.with(|t| t.root_at(size))
    }
    fn inclusion(&self, size: u64, seq: u64) -> Result<Vec<String>> {
        self.with(|t| t.inclusion(size, seq))
    }
    fn consistency(&self, size: u64, old: u64) -> Result<Vec<String>> {
        self.with(|t| t.consistency(size, old))
    }
}

/// A proof of `ask` against the checkpoint of the first `size` entries (all by default) of
/// the ledger in `store`, named `ledger`, from its cache of Forum's tree (O(log n) reads); a
/// checkpoint found among `signed` carries its signature.
pub(crate) fn prove_stored(
    store: &GitStore,
    ledger: &str,
    signed: &[StoredSignature],
    ask: Ask,
    size: Option<u64>,
) -> Result<ProofReport> {
    let cached = Cached::open(store)?;
    prove_from(cached.as_ref(), ledger, signed, ask, size)
}

/// A proof of `ask` from `source` (`None`: a ledger with no entries yet). Proofs from a
/// ledger's entries in memory and from its cache are the same bytes.
pub(crate) fn prove_from<S: ProofSource + ?Sized>(
    source: Option<&S>,
    ledger: &str,
    signed: &[StoredSignature],
    ask: Ask,
    size: Option<u64>,
) -> Result<ProofReport> {
    let len = source.map_or(0, |s| s.len());
    let Some(source) = source.filter(|_| len > 0) else {
        return Err(Error::not_found(format!(
            "ledger {ledger:?} has no entries yet: append one before asking for a proof"
        )));
    };
    let size = size.unwrap_or(len);
    if size == 0 || size > len {
        return Err(Error::usage(format!(
            "size {size} is out of range: ledger {ledger:?} has {len} entries; give a size from 1 to {len}"
        )));
    }
    let checkpoint = Checkpoint {
        size,
        root: source.root(size)?,
    };
    let signature_of = |cp: &Checkpoint| {
        signed
            .iter()
            .find(|s| s.ledger == ledger && s.checkpoint == *cp)
            .map(|s| s.signature.clone())
    };
    Ok(match ask {
        Ask::Inclusion(seq) => {
            if seq >= size {
                return Err(Error::not_found(format!(
                    "ledger {ledger:?} has no entry at seq {seq} within its first {size} entries"
                )));
            }
            ProofReport::Inclusion(InclusionProof {
                schema: INCLUSION_SCHEMA.into(),
                ledger: ledger.to_string(),
                entry: source.entry(seq)?,
                audit_path: source.inclusion(size, seq)?,
                signature: signature_of(&checkpoint),
                checkpoint,
            })
        }
        Ask::Consistency(m) => {
            if m > size {
                return Err(Error::usage(format!(
                    "the consistency proof's old size {m} is larger than the size {size} proved; give an old size of at most {size}"
                )));
            }
            let old = Checkpoint {
                size: m,
                root: source.root(m)?,
            };
            ProofReport::Consistency(ConsistencyProof {
                schema: CONSISTENCY_SCHEMA.into(),
                ledger: ledger.to_string(),
                old_signature: signature_of(&old),
                new_signature: signature_of(&checkpoint),
                old,
                new: checkpoint,
                proof: source.consistency(size, m)?,
            })
        }
    })
}

/// What a proof must show besides holding.
#[derive(Debug, Clone, Default)]
pub(crate) struct Require<'a> {
    /// This checkpoint root.
    pub(crate) root: Option<&'a str>,
    /// This checkpoint size.
    pub(crate) size: Option<u64>,
    /// The allowed-signers file ssh signatures are checked against.
    pub(crate) allowed_signers: Option<&'a Path>,
    /// A signature by a trusted key.
    pub(crate) signature: bool,
}

/// A proof that holds: what it shows, and who signed its checkpoint when that was checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum ProofCheck {
    Inclusion {
        ok: bool,
        kind: &'static str,
        ledger: String,
        seq: u64,
        entry_hash: String,
        size: u64,
        root: String,
        signed: bool,
        signer: Option<String>,
    },
    Consistency {
        ok: bool,
        kind: &'static str,
        ledger: String,
        old: Checkpoint,
        new: Checkpoint,
        signer: Option<String>,
    },
}

impl Report for ProofCheck {
    const SCHEMA: &'static str = "git-forum.proof-check/1";
}

/// A proof that was read but does not hold, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ProofFailure {
    pub(crate) ok: bool,
    pub(crate) problem: String,
}

impl Report for ProofFailure {
    const SCHEMA: &'static str = "git-forum.proof-check/1";
}

impl ProofFailure {
    pub(crate) fn new(problem: impl Into<String>) -> ProofFailure {
        ProofFailure {
            ok: false,
            problem: problem.into(),
        }
    }
}

impl ProofCheck {
    /// The one line `verify-proof` prints when the proof holds.
    pub(crate) fn summary(&self, v: &Verified) -> String {
        match v {
            Verified::Inclusion(p) => format!(
                "ok: seq {} ({} by {}) is in ledger {} at size {}, root {}",
                p.entry.seq,
                p.entry.kind,
                p.entry.actor,
                p.ledger,
                p.checkpoint.size,
                p.checkpoint.root
            ),
            Verified::Consistency(p) => format!(
                "ok: ledger {} at size {} (root {}) extends size {} (root {})",
                p.ledger, p.new.size, p.new.root, p.old.size, p.old.root
            ),
        }
    }

    /// Who signed the checkpoint, when the signature was checked and good.
    pub(crate) fn signer(&self) -> Option<&str> {
        match self {
            ProofCheck::Inclusion { signer, .. } | ProofCheck::Consistency { signer, .. } => {
                signer.as_deref()
            }
        }
    }
}

/// Why a proof does not hold (the line after `proof FILE does not hold: `).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProofRefusal {
    /// The proof itself is malformed or does not verify.
    #[error(transparent)]
    Proof(#[from] ProofError),
    /// `--root` names another root.
    #[error("the proof's checkpoint root is {have}, not the required {want}")]
    Root { have: String, want: String },
    /// `--size` names another size.
    #[error("the proof's checkpoint size is {have}, not the required {want}")]
    Size { have: u64, want: u64 },
    /// `--require-signature` and no signature.
    #[error("the checkpoint is not signed")]
    Unsigned,
    /// The signature does not verify (git's tools say why).
    #[error("the checkpoint signature is not trustworthy: {0}")]
    BadSignature(String),
    /// `--require-signature` and the signature could not be checked (why, in git's words).
    #[error("the checkpoint signature could not be checked: {0}")]
    Unchecked(String),
}

/// Checks the proof `text` (git forum's own JSON proof) and what `need` requires of it; `Err`
/// says why it does not hold. Signatures are checked with git's tools in the current
/// directory (`gpg.ssh.allowedSignersFile`, gpg's keyring) unless `need` names a file.
pub(crate) fn verify_proof(
    text: &str,
    need: &Require<'_>,
) -> std::result::Result<(Verified, ProofCheck), ProofRefusal> {
    let v = verify_text(text)?;
    let cp = match &v {
        Verified::Inclusion(p) => &p.checkpoint,
        Verified::Consistency(p) => &p.new,
    };
    if let Some(r) = need.root
        && r != cp.root
    {
        return Err(ProofRefusal::Root {
            have: cp.root.clone(),
            want: r.to_string(),
        });
    }
    if let Some(s) = need.size
        && s != cp.size
    {
        return Err(ProofRefusal::Size {
            have: cp.size,
            want: s,
        });
    }
    let (ledger, sig) = match &v {
        Verified::Inclusion(p) => (&p.ledger, p.signature.as_ref()),
        Verified::Consistency(p) => (&p.ledger, p.new_signature.as_ref()),
    };
    let signer = match sig {
        None if need.signature => return Err(ProofRefusal::Unsigned),
        None => None,
        Some(sig) => {
            let signed = signed_text(ledger, cp);
            match sign::check(Path::new("."), &signed, sig, need.allowed_signers) {
                SignatureCheck::Good(who) => Some(who),
                SignatureCheck::Bad(why) => return Err(ProofRefusal::BadSignature(why)),
                SignatureCheck::Unchecked(why) if need.signature => {
                    return Err(ProofRefusal::Unchecked(why));
                }
                SignatureCheck::Unchecked(_) => None,
            }
        }
    };
    let check = match &v {
        Verified::Inclusion(p) => ProofCheck::Inclusion {
            ok: true,
            kind: "inclusion",
            ledger: p.ledger.clone(),
            seq: p.entry.seq,
            entry_hash: p.entry.entry_hash.clone(),
            size: p.checkpoint.size,
            root: p.checkpoint.root.clone(),
            signed: p.signature.is_some(),
            signer,
        },
        Verified::Consistency(p) => ProofCheck::Consistency {
            ok: true,
            kind: "consistency",
            ledger: p.ledger.clone(),
            old: p.old.clone(),
            new: p.new.clone(),
            signer,
        },
    };
    Ok((v, check))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{NewEntry, canonical, kind};
    use crate::store::handle::Options;

    fn note(i: usize) -> NewEntry {
        NewEntry {
            actor: "tester".into(),
            kind: kind::NOTE.into(),
            causal_parent: None,
            payload: canonical::parse(&format!("{{\"i\":{i}}}")).unwrap(),
            ts: 1_700_000_000.0,
        }
    }

    fn text(r: &ProofReport) -> String {
        serde_json::to_string_pretty(r).unwrap()
    }

    /// Every proof of a ledger of `entries.len()` entries in `store`, from the cache, is the
    /// very text the same proof from the entries in memory gives.
    fn same_as_in_memory(store: &GitStore, entries: &[Entry]) {
        let n = entries.len() as u64;
        let cached = Cached::open(store).unwrap().expect("entries");
        assert_eq!(cached.checkpoint().root, entries.root(n).unwrap(), "n {n}");
        for size in 1..=n {
            for seq in 0..size {
                let ask = Ask::Inclusion(seq);
                let a = prove_from(Some(&cached), "main", &[], ask, Some(size)).unwrap();
                let b = prove_from(Some(entries), "main", &[], ask, Some(size)).unwrap();
                assert_eq!(text(&a), text(&b), "n {n} size {size} seq {seq}");
            }
            for m in 0..=size {
                let ask = Ask::Consistency(m);
                let a = prove_from(Some(&cached), "main", &[], ask, Some(size)).unwrap();
                let b = prove_from(Some(entries), "main", &[], ask, Some(size)).unwrap();
                assert_eq!(text(&a), text(&b), "n {n} size {size} m {m}");
            }
        }
    }

    /// A ledger in git grown one entry at a time: after each append the cache is extended
    /// (never rebuilt) and every inclusion and consistency proof at every size is the text the
    /// full ledger gives; past 256 entries (a full chunk and a level above it) too.
    #[test]
    fn proofs_from_the_cache_in_git_are_those_of_the_full_ledger_as_it_grows() {
        let dir = tempfile::tempdir().unwrap();
        let o = crate::gitproc::command()
            .args(["init", "-q"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let opts = Options {
            fsync: false,
            ..Options::default()
        };
        let mut store = GitStore::open(dir.path(), "main", opts).unwrap();
        assert!(Cached::open(&store).unwrap().is_none());
        let err = prove_stored(&store, "main", &[], Ask::Inclusion(0), None).unwrap_err();
        assert!(err.to_string().contains("has no entries yet"), "{err}");
        for i in 0..20 {
            store.append_entry(&note(i)).unwrap();
            let entries = store.entries().unwrap();
            same_as_in_memory(&store, &entries);
            assert!(
                !store.forum_tree().unwrap().rebuilt,
                "extended at {}",
                i + 1
            );
        }
        for i in 20..260 {
            store.append_entry(&note(i)).unwrap();
        }
        let entries = store.entries().unwrap();
        let cached = Cached::open(&store).unwrap().unwrap();
        for (size, seq) in [(260, 0), (260, 255), (260, 256), (260, 259), (257, 100)] {
            let ask = Ask::Inclusion(seq);
            let a = prove_from(Some(&cached), "main", &[], ask, Some(size)).unwrap();
            let b = prove_from(Some(&entries[..]), "main", &[], ask, Some(size)).unwrap();
            assert_eq!(text(&a), text(&b), "size {size} seq {seq}");
        }
        for (size, m) in [(260, 1), (260, 256), (260, 257), (259, 128)] {
            let ask = Ask::Consistency(m);
            let a = prove_from(Some(&cached), "main", &[], ask, Some(size)).unwrap();
            let b = prove_from(Some(&entries[..]), "main", &[], ask, Some(size)).unwrap();
            assert_eq!(text(&a), text(&b), "size {size} m {m}");
        }
    }
}
