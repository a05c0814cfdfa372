//! The standard tree as operations: signed-note key pairs, C2SP signed checkpoints, C2SP
//! inclusion and consistency proofs (tlog-proof), the tree as static tlog tiles, and checking
//! those proofs with trusted keys. A stored note or tile is never trusted: each is re-derived
//! from the ledger before it is signed over, proved against or exported.

use std::path::{Path, PathBuf};

use super::{Error, Result};
use crate::ledger::tlog::{self, Tree};
use crate::store::git::GitStore;
use crate::store::note::{self, NoteCheckpoint};
use crate::store::tiles::Tiled;

pub(crate) use crate::store::note::{CONSISTENCY_HEADER, TLOG_PROOF_HEADER, parse_consistency};

/// One git config value of the repository here (none outside a repository).
pub(crate) fn config_value(key: &str) -> Option<String> {
    config_values(key).pop()
}

/// The most output a `git config --get-all` of keys is read to (a list of public keys).
const CONFIG_OUTPUT_LIMIT: u64 = 1 << 20;

pub(crate) fn config_values(key: &str) -> Vec<String> {
    let mut cmd = crate::gitproc::command();
    cmd.args(["config", "--get-all", key]);
    crate::gitproc::output(cmd, None, CONFIG_OUTPUT_LIMIT)
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|k| !k.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Trusted verifier keys: `flags` when given, else `forum.noteVerifiers` of the repository here.
pub(crate) fn trusted_keys(flags: &[String]) -> Vec<String> {
    if !flags.is_empty() {
        return flags.to_vec();
    }
    let mut cmd = crate::gitproc::command();
    cmd.args(["config", "--get-all", "forum.noteVerifiers"]);
    let o = crate::gitproc::output(cmd, None, CONFIG_OUTPUT_LIMIT);
    match o {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|k| !k.is_empty())
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    }
}

fn write_new(path: &Path, text: &str, private: bool) -> Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let _ = private;
    let mut f = o.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Error::usage(format!(
                "{} already exists; remove it or pass --dir to write the key pair elsewhere",
                path.display()
            ))
        } else {
            Error::fail(format!("writing {}: {e}", path.display()))
        }
    })?;
    f.write_all(format!("{text}\n").as_bytes())
        .map_err(|e| Error::fail(format!("writing {}: {e}", path.display())))
}

/// A key pair `keygen` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyPair {
    /// The key's name.
    pub(crate) name: String,
    /// The verifier key (a cosignature verifier key for a witness).
    pub(crate) verifier: String,
    /// The private key's file (mode 0600).
    pub(crate) key_file: PathBuf,
    /// The verifier key's file.
    pub(crate) verifier_file: PathBuf,
}

/// Writes a signed-note key pair named `name` into `dir` (the current directory when `None`):
/// NAME.key (private) and NAME.pub (the verifier key; with `witness`, the cosignature verifier
/// key). Neither file is overwritten.
pub(crate) fn keygen(name: &str, dir: Option<PathBuf>, witness: bool) -> Result<KeyPair> {
    let (skey, vkey) = note::keygen(name).map_err(Error::usage)?;
    let vkey = if witness {
        crate::store::cosign::vkey_of_note_vkey(&vkey).map_err(Error::fail)?
    } else {
        vkey
    };
    let dir = dir.unwrap_or_else(|| PathBuf::from("."));
    if !dir.exists() {
        // A new folder for keys is private: only its owner may list or open it.
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                Error::usage(format!(
                    "cannot create {}: {e}; pass --dir a folder you can write",
                    dir.display()
                ))
            })?;
    }
    let file = name.replace(['/', '\\', ':'], "_");
    let (kpath, ppath) = (
        dir.join(format!("{file}.key")),
        dir.join(format!("{file}.pub")),
    );
    if ppath.exists() {
        return Err(Error::usage(format!(
            "{} already exists; remove it or pass --dir to write the key pair elsewhere",
            ppath.display()
        )));
    }
    write_new(&kpath, &skey, true)?;
    if let Err(e) = write_new(&ppath, &vkey, false) {
        let _ = std::fs::remove_file(&kpath);
        return Err(e);
    }
    Ok(KeyPair {
        name: name.to_string(),
        verifier: vkey,
        key_file: kpath,
        verifier_file: ppath,
    })
}

/// The standard tree and Forum's root over the first `size` entries (all when `None`).
struct Trees {
    tree: Tree,
    hashes: Vec<String>,
}

fn raw_hashes(trees: &Trees) -> Result<Vec<[u8; 32]>> {
    trees
        .hashes
        .iter()
        .map(|h| tlog::entry_hash_bytes(h).map_err(|e| Error::fail(e.to_string())))
        .collect()
}

impl Trees {
    fn load(store: &GitStore) -> Result<Trees> {
        let hashes: Vec<String> = store.entries()?.into_iter().map(|e| e.entry_hash).collect();
        let tree = Tree::from_entry_hashes(hashes.iter().map(String::as_str))
            .map_err(|e| Error::fail(e.to_string()))?;
        Ok(Trees { tree, hashes })
    }
}

/// Refuses an export directory that exists and is not empty.
pub(crate) fn check_export_dir(dir: &Path) -> Result<()> {
    if dir.exists()
        && std::fs::read_dir(dir)
            .map_err(|e| Error::usage(format!("cannot read {}: {e}", dir.display())))?
            .next()
            .is_some()
    {
        return Err(Error::usage(format!(
            "{} is not empty; give a new or empty directory",
            dir.display()
        )));
    }
    Ok(())
}

/// What `tiles export` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TilesExported {
    /// The size of the latest signed note, which the layout serves.
    pub(crate) size: u64,
    /// How many files were written (the tiles and `checkpoint`).
    pub(crate) files: usize,
}

/// Writes the static tlog-tiles layout of the latest signed note of `store` into `dir` (checked
/// first with [`check_export_dir`]), all at once: a failure leaves no half layout.
pub(crate) fn export_tiles(store: &GitStore, ledger: &str, dir: &Path) -> Result<TilesExported> {
    let (signed, cp, _) = note_for(store, None, ledger)?;
    // The export is every tile, so it is derived from every entry (and checked against the
    // note) rather than read back tile by tile.
    let trees = Trees::load(store)?;
    if trees.tree.root(cp.size).ok() != Some(cp.root) {
        return Err(Error::fail(format!(
            "the stored note of size {} names a root the ledger does not have; the ledger was rewritten",
            cp.size
        )));
    }
    let files = crate::store::tiles::tile_files(&trees.tree, cp.size, &raw_hashes(&trees)?)
        .map_err(|e| Error::fail(e.to_string()))?;
    // Written beside DIR and renamed into place, so a failure leaves no half layout.
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = tempfile::tempdir_in(parent)
        .map_err(|e| Error::fail(format!("cannot write in {}: {e}", parent.display())))?;
    let mut all = files;
    all.push(("checkpoint".into(), signed.into_bytes()));
    crate::store::tiles::write_layout(tmp.path(), &all)
        .map_err(|e| Error::fail(format!("writing tiles: {e}")))?;
    if dir.exists() {
        std::fs::remove_dir(dir)
            .map_err(|e| Error::fail(format!("replacing {}: {e}", dir.display())))?;
    }
    let staged = tmp.keep();
    std::fs::rename(&staged, dir).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staged);
        Error::fail(format!("moving the tiles to {}: {e}", dir.display()))
    })?;
    Ok(TilesExported {
        size: cp.size,
        files: all.len(),
    })
}

pub(crate) fn read_key(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("cannot read note key {}: {e}", path.display())))?;
    Ok(text.trim().to_string())
}

/// Signs and stores the standard checkpoint of the whole (tiled) ledger; returns the note.
fn sign_note(store: &GitStore, key_file: &Path, tiled: &Tiled) -> Result<String> {
    let (size, root) = (tiled.size, tiled.root);
    let cp = NoteCheckpoint {
        origin: store.note_origin(),
        size,
        root,
        forum_root: Some(tiled.forum_root.clone()),
    };
    let text = note::checkpoint_text(
        &cp.origin,
        size,
        &root,
        cp.forum_root.as_deref().unwrap_or(""),
    );
    let signed = note::sign_text(&text, &read_key(key_file)?)
        .map_err(|e| Error::usage(format!("{}: {e}", key_file.display())))?;
    store.store_note(&signed, &cp)?;
    Ok(signed)
}

/// A signed checkpoint as `checkpoint --note` made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NoteSigned {
    /// The number of entries the note covers.
    pub(crate) size: u64,
    /// Forum's root over them.
    pub(crate) forum_root: String,
    /// The signed note.
    pub(crate) note: String,
}

/// Signs and stores the C2SP checkpoint of the whole ledger in `store` (`ledger` names it in
/// errors) with the signer key in `key` (else `forum.noteKey`); unless `no_record`, a
/// `checkpoint` entry is appended too. A ledger that does not verify is never signed.
pub(crate) fn checkpoint_note(
    store: &GitStore,
    ledger: &str,
    key: Option<PathBuf>,
    no_record: bool,
) -> Result<NoteSigned> {
    let key = key.or_else(|| store.note_key_file()).ok_or_else(|| {
        Error::usage(
            "no note key: pass --note-key FILE or set forum.noteKey (make one with `git forum keygen NAME`)",
        )
    })?;
    // Read the key before anything is written, so a bad key leaves nothing behind.
    note::sign_text("check\n", &read_key(&key)?)
        .map_err(|e| Error::usage(format!("{}: {e}", key.display())))?;
    // Tiles current or extended on the same chain (the new entries checked one by one) need no
    // walk; when they had to be rebuilt, the whole ledger is verified before anything is signed.
    let tiled = match store.fresh_tiles() {
        Ok(t) if !t.rebuilt => t,
        other => {
            let r = store.verify(false)?;
            if !r.passed() {
                return Err(Error::fail(format!(
                    "ledger {} does not verify ({}); refusing to sign a checkpoint of it",
                    ledger,
                    r.problem.unwrap_or_default()
                )));
            }
            other?
        }
    };
    let signed = sign_note(store, &key, &tiled)?;
    if !no_record {
        store.record_checkpoint(tiled.size, &tiled.forum_root)?;
    }
    Ok(NoteSigned {
        size: tiled.size,
        forum_root: tiled.forum_root,
        note: signed,
    })
}

/// The stored note of size `size` whose root is the one re-derived here (the latest note when
/// `size` is `None`). A stored note is never trusted: its size and root must match the ledger.
pub(crate) fn note_for(
    store: &GitStore,
    size: Option<u64>,
    ledger: &str,
) -> Result<(String, NoteCheckpoint, Tiled)> {
    let notes = store.stored_notes()?;
    let mut parsed = Vec::new();
    for n in notes {
        let text = n.split_once("\n\n").map(|(t, _)| format!("{t}\n"));
        if let Some(cp) = text.and_then(|t| note::parse_checkpoint(&t).ok()) {
            parsed.push((n, cp));
        }
    }
    let pick = match size {
        Some(s) => parsed.into_iter().rev().find(|(_, cp)| cp.size == s),
        None => parsed.pop(),
    };
    let Some((n, cp)) = pick else {
        return Err(Error::fail(match size {
            Some(s) => format!(
                "ledger {ledger:?} has no signed note of size {s}: run `git forum checkpoint --note` when it has {s} entries, or prove against a size that has one"
            ),
            None => format!(
                "ledger {ledger:?} has no signed note: run `git forum checkpoint --note` first"
            ),
        }));
    };
    // Only with a note to prove against are the tiles brought up to date (a refusal writes
    // nothing).
    let tiled = store.fresh_tiles()?;
    if cp.size > tiled.size {
        return Err(Error::fail(format!(
            "the stored note of size {} is larger than ledger {ledger:?}; the ledger was truncated",
            cp.size
        )));
    }
    let mut tiled = tiled;
    let mut root = tiled.root_at(store, cp.size);
    if root.as_ref().ok() != Some(&cp.root) && !tiled.rebuilt {
        // Tiles are a cache: before saying the ledger disagrees, derive them again.
        store.drop_tiles()?;
        tiled = store.fresh_tiles()?;
        root = tiled.root_at(store, cp.size);
    }
    if root? != cp.root {
        return Err(Error::fail(format!(
            "the stored note of size {} names a root the ledger does not have; the ledger was rewritten",
            cp.size
        )));
    }
    Ok((n, cp, tiled))
}

/// Reads from the tiles; a tile that does not match its parents or root (changed in git) sends
/// them to be rebuilt from every entry, and the read is made once more from the rebuilt ones.
pub(crate) fn from_tiles<T>(
    store: &GitStore,
    tiled: Tiled,
    read: impl Fn(&Tiled) -> std::result::Result<T, crate::store::git::StoreError>,
) -> Result<T> {
    match read(&tiled) {
        Ok(v) => Ok(v),
        Err(_) if !tiled.rebuilt => {
            store.drop_tiles()?;
            Ok(read(&store.fresh_tiles()?)?)
        }
        Err(e) => Err(e.into()),
    }
}

/// A C2SP proof asked of a ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TlogAsk {
    /// Entry `seq` is in the tree of the signed note.
    Inclusion(u64),
    /// The tree of the signed note extends the tree of size M (which has a signed note too).
    Consistency(u64),
}

/// A C2SP proof and, for an inclusion proof, the entry's hash a checker needs beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlogProof {
    /// The proof's text (tlog-proof, or the consistency proof with both notes).
    pub(crate) text: String,
    /// The entry proved and its `entry_hash`, when `with_entry_hash` asked for it.
    pub(crate) entry: Option<(u64, String)>,
}

/// Proves `ask` against the stored signed note of size `size` (the latest when `None`) of the
/// ledger in `store`. With `with_entry_hash`, an inclusion proof also reads the entry's hash.
pub(crate) fn prove(
    store: &GitStore,
    ledger: &str,
    size: Option<u64>,
    ask: TlogAsk,
    with_entry_hash: bool,
) -> Result<TlogProof> {
    let (new_note, cp, tiled) = note_for(store, size, ledger)?;
    match ask {
        TlogAsk::Consistency(m) => {
            if m == 0 || m > cp.size {
                return Err(Error::usage(format!(
                    "--consistency-from {m} is out of range: it must be between 1 and the size {} proved",
                    cp.size
                )));
            }
            let (old_note, _, _) = note_for(store, Some(m), ledger)?;
            let path = from_tiles(store, tiled, |t| t.consistency_proof(store, m, cp.size))?;
            Ok(TlogProof {
                text: note::consistency_text(m, cp.size, &path, &old_note, &new_note),
                entry: None,
            })
        }
        TlogAsk::Inclusion(seq) => {
            if seq >= cp.size {
                return Err(Error::fail(format!(
                    "ledger {ledger:?} has no entry at seq {seq} within its signed note of size {}",
                    cp.size
                )));
            }
            let path = from_tiles(store, tiled, |t| t.inclusion_proof(store, seq, cp.size))?;
            let entry = if with_entry_hash {
                let (entry, _) = store
                    .get_with_commit(seq)?
                    .ok_or_else(|| Error::fail(format!("ledger {ledger:?} has no entry {seq}")))?;
                Some((seq, entry.entry_hash))
            } else {
                None
            };
            Ok(TlogProof {
                text: note::tlog_proof_text(seq, &path, &new_note),
                entry,
            })
        }
    }
}

/// What a standard proof showed.
pub(crate) enum Checked {
    Inclusion {
        seq: u64,
        cp: NoteCheckpoint,
        signers: Vec<String>,
    },
    Consistency {
        old: NoteCheckpoint,
        new: NoteCheckpoint,
        signers: Vec<String>,
    },
}

/// Why a C2SP proof does not hold (the line after `proof FILE does not hold: `).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlogProofRefusal {
    /// No key to open the notes with.
    #[error("no trusted note verifier: pass --note-verifier KEY or set forum.noteVerifiers")]
    NoVerifier,
    /// A key or a note does not open.
    #[error(transparent)]
    Note(#[from] note::NoteError),
    /// The proof's text is malformed.
    #[error(transparent)]
    Text(#[from] note::ProofTextError),
    /// A tlog-proof without `--entry-hash`.
    #[error("a tlog-proof names no entry: pass --entry-hash HEX")]
    NoEntryHash,
    /// The entry hash is not one.
    #[error(transparent)]
    Leaf(#[from] tlog::TlogError),
    /// The index is past the checkpoint.
    #[error("index {seq} is not below the checkpoint size {size}")]
    IndexPastSize { seq: u64, size: u64 },
    /// The audit path does not verify.
    #[error("the audit path does not lead from entry {0} to the signed root")]
    PathDoesNotLead(u64),
    /// The two notes are of different logs.
    #[error("the two notes are of different logs (origins differ)")]
    OtherLogs,
    /// The notes' sizes are not the ones the proof is between.
    #[error("the notes' sizes are not the proof's sizes")]
    OtherSizes,
    /// The consistency path does not verify.
    #[error("the tree of size {new} does not extend the tree of size {old}")]
    NotExtending { new: u64, old: u64 },
}

/// Checks a tlog-proof or a consistency proof with the trusted keys.
pub(crate) fn check_text(
    text: &str,
    keys: &[String],
    entry_hash: Option<&str>,
) -> std::result::Result<Checked, TlogProofRefusal> {
    if keys.is_empty() {
        return Err(TlogProofRefusal::NoVerifier);
    }
    let v = note::verifiers(keys)?;
    if text.starts_with(note::TLOG_PROOF_HEADER) {
        let (seq, path, n) = note::parse_tlog_proof(text)?;
        let opened = note::open(n, &v)?;
        let eh = entry_hash.ok_or(TlogProofRefusal::NoEntryHash)?;
        let leaf = tlog::leaf_hash(eh)?;
        let cp = opened.checkpoint;
        if seq >= cp.size {
            return Err(TlogProofRefusal::IndexPastSize { seq, size: cp.size });
        }
        if !tlog::check_inclusion(&path, cp.size, cp.root, seq, leaf) {
            return Err(TlogProofRefusal::PathDoesNotLead(seq));
        }
        Ok(Checked::Inclusion {
            seq,
            cp,
            signers: opened.signers,
        })
    } else {
        let p = note::parse_consistency(text)?;
        let old = note::open(p.old_note, &v)?;
        let new = note::open(p.new_note, &v)?;
        if old.checkpoint.origin != new.checkpoint.origin {
            return Err(TlogProofRefusal::OtherLogs);
        }
        if (old.checkpoint.size, new.checkpoint.size) != (p.old, p.new) {
            return Err(TlogProofRefusal::OtherSizes);
        }
        if !tlog::check_consistency(
            &p.path,
            p.new,
            new.checkpoint.root,
            p.old,
            old.checkpoint.root,
        ) {
            return Err(TlogProofRefusal::NotExtending {
                new: p.new,
                old: p.old,
            });
        }
        Ok(Checked::Consistency {
            old: old.checkpoint,
            new: new.checkpoint,
            signers: new.signers,
        })
    }
}

pub(crate) fn b64(h: &tlog::Hash) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(h.0)
}

/// Whether the witnesses' answers let a fetch succeed: never with a split view, and with
/// `--require-witness` only when every witness cosigned every adopted ledger.
pub(crate) fn witness_outcome(results: &[crate::store::sync::FetchResult], require: bool) -> bool {
    results
        .iter()
        .flat_map(|r| &r.witnesses)
        .all(|a| a.status != "split-view" && (!require || a.status == "cosigned"))
        && (!require
            || results
                .iter()
                .filter(|r| r.status.adopted())
                .all(|r| !r.witnesses.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{NewEntry, canonical, kind};
    use crate::store::git::Options;

    fn note_entry(text: &str) -> NewEntry {
        NewEntry {
            actor: "tester".into(),
            kind: kind::NOTE.into(),
            causal_parent: None,
            payload: canonical::parse(&format!("{{\"text\":{text:?}}}")).unwrap(),
            ts: 1_700_000_000.0,
        }
    }

    /// A repository with a ledger of `n` entries, and a signer key pair beside it.
    fn ledger(n: usize) -> (tempfile::TempDir, GitStore, KeyPair) {
        let dir = tempfile::tempdir().unwrap();
        let o = crate::gitproc::command()
            .args(["init", "-q"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let mut store = GitStore::open(dir.path(), "main", Options::default()).unwrap();
        for i in 0..n {
            store.append_entry(&note_entry(&format!("n{i}"))).unwrap();
        }
        let keys = dir.path().join("keys");
        std::fs::create_dir(&keys).unwrap();
        let pair = keygen("example.com/log", Some(keys), false).unwrap();
        (dir, store, pair)
    }

    #[test]
    fn keygen_writes_a_pair_once_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let pair = keygen("example.com/log", Some(dir.path().into()), false).unwrap();
        assert_eq!(pair.key_file, dir.path().join("example.com_log.key"));
        assert_eq!(pair.verifier_file, dir.path().join("example.com_log.pub"));
        assert!(
            pair.verifier.starts_with("example.com/log+"),
            "{}",
            pair.verifier
        );
        let on_disk = std::fs::read_to_string(&pair.verifier_file).unwrap();
        assert_eq!(on_disk, format!("{}\n", pair.verifier));
        let e = keygen("example.com/log", Some(dir.path().into()), false).unwrap_err();
        assert_eq!(e.class, super::super::Class::Usage);
        assert!(e.message.contains("already exists"), "{}", e.message);
        let e = keygen("bad name", Some(dir.path().into()), false).unwrap_err();
        assert_eq!(e.class, super::super::Class::Usage);
    }

    #[test]
    fn an_export_directory_must_be_new_or_empty() {
        let dir = tempfile::tempdir().unwrap();
        check_export_dir(&dir.path().join("absent")).unwrap();
        check_export_dir(dir.path()).unwrap();
        std::fs::write(dir.path().join("x"), "x").unwrap();
        let e = check_export_dir(dir.path()).unwrap_err();
        assert!(
            e.message
                .ends_with("is not empty; give a new or empty directory")
        );
    }

    #[test]
    fn a_signed_checkpoint_proves_inclusion_and_consistency_that_check_with_its_key() {
        let (_dir, store, pair) = ledger(3);
        let keys = vec![pair.verifier.clone()];
        let e = prove(&store, "main", None, TlogAsk::Inclusion(0), false).unwrap_err();
        assert!(e.message.contains("has no signed note"), "{}", e.message);

        let first = checkpoint_note(&store, "main", Some(pair.key_file.clone()), true).unwrap();
        assert_eq!(first.size, 3);
        assert!(first.note.contains("\n\n"), "{}", first.note);
        let mut store = store;
        for i in 3..5 {
            store.append_entry(&note_entry(&format!("n{i}"))).unwrap();
        }
        let second = checkpoint_note(&store, "main", Some(pair.key_file.clone()), false).unwrap();
        assert_eq!(second.size, 5);

        let inc = prove(&store, "main", None, TlogAsk::Inclusion(4), true).unwrap();
        let (seq, hash) = inc.entry.clone().expect("the entry hash was asked for");
        assert_eq!(seq, 4);
        match check_text(&inc.text, &keys, Some(&hash)).unwrap() {
            Checked::Inclusion { seq, cp, signers } => {
                assert_eq!((seq, cp.size), (4, 5));
                assert_eq!(signers, vec!["example.com/log".to_string()]);
            }
            Checked::Consistency { .. } => panic!("an inclusion proof checked as consistency"),
        }
        // Another entry's hash does not lead to the signed root.
        let other = store.get_with_commit(0).unwrap().unwrap().0.entry_hash;
        assert!(check_text(&inc.text, &keys, Some(&other)).is_err());

        let con = prove(&store, "main", None, TlogAsk::Consistency(3), false).unwrap();
        assert_eq!(con.entry, None);
        match check_text(&con.text, &keys, None).unwrap() {
            Checked::Consistency { old, new, .. } => assert_eq!((old.size, new.size), (3, 5)),
            Checked::Inclusion { .. } => panic!("a consistency proof checked as inclusion"),
        }
        let e = prove(&store, "main", None, TlogAsk::Consistency(4), false).unwrap_err();
        assert!(
            e.message.contains("no signed note of size 4"),
            "{}",
            e.message
        );
        let e = prove(&store, "main", None, TlogAsk::Consistency(6), false).unwrap_err();
        assert_eq!(e.class, super::super::Class::Usage);
        assert_eq!(
            check_text(&con.text, &[], None)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("no trusted note verifier: pass --note-verifier KEY or set forum.noteVerifiers")
        );
    }

    #[test]
    fn exported_tiles_serve_the_latest_note() {
        let (dir, store, pair) = ledger(2);
        checkpoint_note(&store, "main", Some(pair.key_file.clone()), true).unwrap();
        let out = dir.path().join("tiles");
        let done = export_tiles(&store, "main", &out).unwrap();
        assert_eq!(done.size, 2);
        let checkpoint = std::fs::read_to_string(out.join("checkpoint")).unwrap();
        assert!(checkpoint.starts_with(&store.note_origin()), "{checkpoint}");
        assert!(out.join("tile").is_dir());
    }
}
