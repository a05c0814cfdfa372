//! The standard-tree commands: `keygen NAME` (a signed-note key pair), `checkpoint --note` (a
//! signed C2SP checkpoint), `prove --tlog-proof` / `prove --consistency-from M --tlog` (C2SP
//! proofs), `tiles export DIR` (the tree as static C2SP tiles), `witness` (cosign only trees
//! that extend the last one accepted), and reading those proofs back in `verify-proof`.

use std::path::{Path, PathBuf};

use super::proof::{ProveArgs, VerifyProofArgs};
use super::{CliError, Ctx};
use crate::ledger::tlog::{self, Tree};
use crate::store::git::GitStore;
use crate::store::note::{self, NoteCheckpoint};
use crate::store::tiles::Tiled;

/// Write a signed-note key pair: NAME.key (private, mode 0600) and NAME.pub (the verifier key).
#[derive(Debug, clap::Args)]
pub(crate) struct KeygenArgs {
    /// The key's name, as it appears in signatures (no spaces or '+'), e.g. example.com/forum.
    pub(crate) name: String,
    /// Where to write the two files (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// A witness key: NAME.pub holds the cosignature verifier key (C2SP tlog-cosignature/v1,
    /// type 0x04) that `forum.witnessVerifiers` and `verify --witness-verifier` take.
    #[arg(long)]
    pub(crate) witness: bool,
}

/// `checkpoint` with the standard-note flags beside its own.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckpointCmd {
    #[command(flatten)]
    pub(crate) base: super::verify::CheckpointArgs,
    /// Print (and store) the checkpoint as a C2SP signed note over the standard tree, Forum's
    /// root riding along as an extension line.
    #[arg(long, conflicts_with = "sign")]
    pub(crate) note: bool,
    /// The signed-note signer key file (default: `forum.noteKey`).
    #[arg(long, value_name = "FILE", requires = "note")]
    pub(crate) note_key: Option<PathBuf>,
}

/// The standard tree as C2SP tlog-tiles.
#[derive(Debug, clap::Args)]
pub(crate) struct TilesArgs {
    #[command(subcommand)]
    pub(crate) command: TilesCommand,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum TilesCommand {
    /// Write the static layout (`checkpoint`, `tile/...`) of the latest signed note into DIR,
    /// new or empty, for any static web host to serve to tlog clients.
    Export {
        /// The directory to write (must be absent or empty).
        dir: PathBuf,
    },
}

/// Act as a witness: cosign an offered checkpoint (C2SP tlog-cosignature/v1) only when it
/// extends the one last accepted for its origin (kept in --state DIR); refuse otherwise, keeping
/// both notes as evidence.
#[derive(Debug, clap::Args)]
pub(crate) struct WitnessArgs {
    /// The offer: a consistency proof (`prove --consistency-from M --tlog`) from the accepted
    /// size, or on first contact a bare signed note (`-` for standard input).
    pub(crate) file: PathBuf,
    /// The witness's own directory: the accepted note per origin, and evidence of refusals
    /// (default: `forum.witnessState`).
    #[arg(long, value_name = "DIR")]
    pub(crate) state: Option<PathBuf>,
    /// The witness's signed-note signer key file (`keygen NAME --witness`; default:
    /// `forum.witnessKey`).
    #[arg(long, value_name = "FILE")]
    pub(crate) witness_key: Option<PathBuf>,
    /// The log's verifier key (`name+hash+base64`); repeatable (default: `forum.noteVerifiers`).
    #[arg(long, value_name = "KEY")]
    pub(crate) note_verifier: Vec<String>,
}

/// One git config value of the repository here (none outside a repository).
fn config_value(key: &str) -> Option<String> {
    config_values(key).pop()
}

fn config_values(key: &str) -> Vec<String> {
    std::process::Command::new("git")
        .args(["config", "--get-all", key])
        .output()
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

pub(crate) fn witness(ctx: &Ctx, args: WitnessArgs) -> Result<(), CliError> {
    use crate::surface::witness as w;
    let offer =
        super::input::read_limited_text(&args.file, super::proof::MAX_PROOF_BYTES, "offer", "")
            .map_err(CliError::usage)?;
    let state = args
        .state
        .or_else(|| config_value("forum.witnessState").map(PathBuf::from))
        .ok_or_else(|| {
            CliError::usage("no witness state: pass --state DIR or set forum.witnessState")
        })?;
    let key_file = args
        .witness_key
        .or_else(|| config_value("forum.witnessKey").map(PathBuf::from))
        .ok_or_else(|| {
            CliError::usage(
                "no witness key: pass --witness-key FILE or set forum.witnessKey (make one with `git forum keygen NAME --witness`)",
            )
        })?;
    let key = read_key(&key_file)?;
    let log_keys = if args.note_verifier.is_empty() {
        config_values("forum.noteVerifiers")
    } else {
        args.note_verifier
    };
    let opts = w::WitnessOptions {
        state: &state,
        key: &key,
        log_keys: &log_keys,
        now: w::now_seconds(),
    };
    let r = w::witness(&opts, &offer)?;
    if ctx.json {
        ctx.out_json(&serde_json::to_value(&r).map_err(|e| CliError::fail(e.to_string()))?)?;
        return if r.ok {
            Ok(())
        } else {
            Err(CliError::silent(1))
        };
    }
    if r.ok {
        print!("{}", r.cosigned.as_deref().unwrap_or(""));
        return Ok(());
    }
    // The note the witness holds is in the `--json` report, which is what `fetch` reads from a
    // `cmd:` witness to prove from its size or to show a split view.
    Err(CliError::fail(w::refusal_line(&r)))
}

fn write_new(path: &Path, text: &str, private: bool) -> Result<(), CliError> {
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
            CliError::usage(format!(
                "{} already exists; remove it or pass --dir to write the key pair elsewhere",
                path.display()
            ))
        } else {
            CliError::fail(format!("writing {}: {e}", path.display()))
        }
    })?;
    f.write_all(format!("{text}\n").as_bytes())
        .map_err(|e| CliError::fail(format!("writing {}: {e}", path.display())))
}

pub(crate) fn keygen(ctx: &Ctx, args: KeygenArgs) -> Result<(), CliError> {
    let (skey, vkey) = note::keygen(&args.name).map_err(CliError::usage)?;
    let vkey = if args.witness {
        crate::store::cosign::vkey_of_note_vkey(&vkey).map_err(CliError::fail)?
    } else {
        vkey
    };
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    let file = args.name.replace(['/', '\\', ':'], "_");
    let (kpath, ppath) = (
        dir.join(format!("{file}.key")),
        dir.join(format!("{file}.pub")),
    );
    if ppath.exists() {
        return Err(CliError::usage(format!(
            "{} already exists; remove it or pass --dir to write the key pair elsewhere",
            ppath.display()
        )));
    }
    write_new(&kpath, &skey, true)?;
    if let Err(e) = write_new(&ppath, &vkey, false) {
        let _ = std::fs::remove_file(&kpath);
        return Err(e);
    }
    if ctx.json {
        ctx.out_json(&serde_json::json!({"name": args.name, "verifier": vkey,
            "key_file": kpath, "verifier_file": ppath}))
    } else {
        eprintln!(
            "wrote {} (keep it secret) and {}",
            kpath.display(),
            ppath.display()
        );
        ctx.out(&vkey)
    }
}

/// The standard tree and Forum's root over the first `size` entries (all when `None`).
struct Trees {
    tree: Tree,
    hashes: Vec<String>,
}

fn raw_hashes(trees: &Trees) -> Result<Vec<[u8; 32]>, CliError> {
    trees
        .hashes
        .iter()
        .map(|h| tlog::entry_hash_bytes(h).map_err(|e| CliError::fail(e.to_string())))
        .collect()
}

pub(crate) fn tiles(ctx: &Ctx, args: TilesArgs) -> Result<(), CliError> {
    let TilesCommand::Export { dir } = args.command;
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", dir.display())))?
            .next()
            .is_some()
    {
        return Err(CliError::usage(format!(
            "{} is not empty; give a new or empty directory",
            dir.display()
        )));
    }
    let store = ctx.existing_store()?;
    let (signed, cp, _) = note_for(&store, None, &ctx.ledger)?;
    // The export is every tile, so it is derived from every entry (and checked against the
    // note) rather than read back tile by tile.
    let trees = Trees::load(&store)?;
    if trees.tree.root(cp.size).ok() != Some(cp.root) {
        return Err(CliError::fail(format!(
            "the stored note of size {} names a root the ledger does not have; the ledger was rewritten",
            cp.size
        )));
    }
    let files = crate::store::tiles::tile_files(&trees.tree, cp.size, &raw_hashes(&trees)?)
        .map_err(CliError::fail)?;
    // Written beside DIR and renamed into place, so a failure leaves no half layout.
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = tempfile::tempdir_in(parent)
        .map_err(|e| CliError::fail(format!("cannot write in {}: {e}", parent.display())))?;
    let mut all = files;
    all.push(("checkpoint".into(), signed.into_bytes()));
    crate::store::tiles::write_layout(tmp.path(), &all)
        .map_err(|e| CliError::fail(format!("writing tiles: {e}")))?;
    if dir.exists() {
        std::fs::remove_dir(&dir)
            .map_err(|e| CliError::fail(format!("replacing {}: {e}", dir.display())))?;
    }
    let staged = tmp.keep();
    std::fs::rename(&staged, &dir).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staged);
        CliError::fail(format!("moving the tiles to {}: {e}", dir.display()))
    })?;
    if ctx.json {
        ctx.out_json(&serde_json::json!({"dir": dir, "size": cp.size, "files": all.len()}))
    } else {
        ctx.out(&format!(
            "wrote {} files for size {} to {}",
            all.len(),
            cp.size,
            dir.display()
        ))
    }
}

impl Trees {
    fn load(store: &GitStore) -> Result<Trees, CliError> {
        let hashes: Vec<String> = store.entries()?.into_iter().map(|e| e.entry_hash).collect();
        let tree = Tree::from_entry_hashes(hashes.iter().map(String::as_str))
            .map_err(|e| CliError::fail(e.to_string()))?;
        Ok(Trees { tree, hashes })
    }
}

fn read_key(path: &Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read note key {}: {e}", path.display())))?;
    Ok(text.trim().to_string())
}

/// Signs and stores the standard checkpoint of the whole (tiled) ledger; returns the note.
fn sign_note(store: &GitStore, key_file: &Path, tiled: &Tiled) -> Result<String, CliError> {
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
        .map_err(|e| CliError::usage(format!("{}: {e}", key_file.display())))?;
    store.store_note(&signed, &cp)?;
    Ok(signed)
}

pub(crate) fn checkpoint(ctx: &Ctx, args: CheckpointCmd) -> Result<(), CliError> {
    if !args.note {
        return super::verify::checkpoint(ctx, args.base);
    }
    let store = ctx.existing_store()?;
    let key = args.note_key.or_else(|| store.note_key_file()).ok_or_else(|| {
        CliError::usage(
            "no note key: pass --note-key FILE or set forum.noteKey (make one with `git forum keygen NAME`)",
        )
    })?;
    // Read the key before anything is written, so a bad key leaves nothing behind.
    note::sign_text("check\n", &read_key(&key)?)
        .map_err(|e| CliError::usage(format!("{}: {e}", key.display())))?;
    // Tiles current or extended on the same chain (the new entries checked one by one) need no
    // walk; when they had to be rebuilt, the whole ledger is verified before anything is signed.
    let tiled = match store.fresh_tiles() {
        Ok(t) if !t.rebuilt => t,
        other => {
            let r = store.verify(false)?;
            if !r.passed() {
                return Err(CliError::fail(format!(
                    "ledger {} does not verify ({}); refusing to sign a checkpoint of it",
                    ctx.ledger,
                    r.problem.unwrap_or_default()
                )));
            }
            other?
        }
    };
    let signed = sign_note(&store, &key, &tiled)?;
    if !args.base.no_record {
        store.record_checkpoint(tiled.size, &tiled.forum_root)?;
    }
    if ctx.json {
        ctx.out_json(
            &serde_json::json!({"ledger": ctx.ledger, "size": tiled.size,
            "root": tiled.forum_root, "note": signed}),
        )
    } else {
        print!("{signed}");
        Ok(())
    }
}

/// The stored note of size `size` whose root is the one re-derived here (the latest note when
/// `size` is `None`). A stored note is never trusted: its size and root must match the ledger.
fn note_for(
    store: &GitStore,
    size: Option<u64>,
    ledger: &str,
) -> Result<(String, NoteCheckpoint, Tiled), CliError> {
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
        return Err(CliError::fail(match size {
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
        return Err(CliError::fail(format!(
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
        return Err(CliError::fail(format!(
            "the stored note of size {} names a root the ledger does not have; the ledger was rewritten",
            cp.size
        )));
    }
    Ok((n, cp, tiled))
}

/// Reads from the tiles; a tile that does not match its parents or root (changed in git) sends
/// them to be rebuilt from every entry, and the read is made once more from the rebuilt ones.
fn from_tiles<T>(
    store: &GitStore,
    tiled: Tiled,
    read: impl Fn(&Tiled) -> Result<T, crate::store::git::StoreError>,
) -> Result<T, CliError> {
    match read(&tiled) {
        Ok(v) => Ok(v),
        Err(_) if !tiled.rebuilt => {
            store.drop_tiles()?;
            Ok(read(&store.fresh_tiles()?)?)
        }
        Err(e) => Err(e.into()),
    }
}

pub(crate) fn prove(ctx: &Ctx, args: &ProveArgs) -> Result<String, CliError> {
    let store = ctx.existing_store()?;
    let (new_note, cp, tiled) = note_for(&store, args.size, &ctx.ledger)?;
    if let Some(m) = args.consistency_from {
        if m == 0 || m > cp.size {
            return Err(CliError::usage(format!(
                "--consistency-from {m} is out of range: it must be between 1 and the size {} proved",
                cp.size
            )));
        }
        let (old_note, _, _) = note_for(&store, Some(m), &ctx.ledger)?;
        let path = from_tiles(&store, tiled, |t| t.consistency_proof(&store, m, cp.size))?;
        Ok(note::consistency_text(
            m, cp.size, &path, &old_note, &new_note,
        ))
    } else {
        let seq = args
            .seq
            .expect("clap requires SEQ without --consistency-from");
        if seq >= cp.size {
            return Err(CliError::fail(format!(
                "ledger {:?} has no entry at seq {seq} within its signed note of size {}",
                ctx.ledger, cp.size
            )));
        }
        let path = from_tiles(&store, tiled, |t| t.inclusion_proof(&store, seq, cp.size))?;
        if !ctx.json {
            let (entry, _) = store.get_with_commit(seq)?.ok_or_else(|| {
                CliError::fail(format!("ledger {:?} has no entry {seq}", ctx.ledger))
            })?;
            eprintln!(
                "entry {seq}: entry_hash {} (pass it to verify-proof --entry-hash)",
                entry.entry_hash
            );
        }
        Ok(note::tlog_proof_text(seq, &path, &new_note))
    }
}

/// Trusted verifier keys: the flags, else `forum.noteVerifiers` of the repository here.
fn trusted_keys(args: &VerifyProofArgs) -> Vec<String> {
    if !args.note_verifier.is_empty() {
        return args.note_verifier.clone();
    }
    let o = std::process::Command::new("git")
        .args(["config", "--get-all", "forum.noteVerifiers"])
        .output();
    match o {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|k| !k.is_empty())
            .map(String::from)
            .collect(),
        _ => Vec::new(),
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

/// Checks a tlog-proof or a consistency proof with the trusted keys.
pub(crate) fn check_text(
    text: &str,
    keys: &[String],
    entry_hash: Option<&str>,
) -> Result<Checked, String> {
    if keys.is_empty() {
        return Err(
            "no trusted note verifier: pass --note-verifier KEY or set forum.noteVerifiers".into(),
        );
    }
    let v = note::verifiers(keys)?;
    if text.starts_with(note::TLOG_PROOF_HEADER) {
        let (seq, path, n) = note::parse_tlog_proof(text)?;
        let opened = note::open(n, &v)?;
        let eh = entry_hash.ok_or("a tlog-proof names no entry: pass --entry-hash HEX")?;
        let leaf = tlog::leaf_hash(eh).map_err(|e| e.to_string())?;
        let cp = opened.checkpoint;
        if seq >= cp.size {
            return Err(format!(
                "index {seq} is not below the checkpoint size {}",
                cp.size
            ));
        }
        if !tlog::check_inclusion(&path, cp.size, cp.root, seq, leaf) {
            return Err(format!(
                "the audit path does not lead from entry {seq} to the signed root"
            ));
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
            return Err("the two notes are of different logs (origins differ)".into());
        }
        if (old.checkpoint.size, new.checkpoint.size) != (p.old, p.new) {
            return Err("the notes' sizes are not the proof's sizes".into());
        }
        if !tlog::check_consistency(
            &p.path,
            p.new,
            new.checkpoint.root,
            p.old,
            old.checkpoint.root,
        ) {
            return Err(format!(
                "the tree of size {} does not extend the tree of size {}",
                p.new, p.old
            ));
        }
        Ok(Checked::Consistency {
            old: old.checkpoint,
            new: new.checkpoint,
            signers: new.signers,
        })
    }
}

fn b64(h: &tlog::Hash) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(h.0)
}

pub(crate) fn verify_proof(ctx: &Ctx, args: &VerifyProofArgs, text: &str) -> Result<(), CliError> {
    let keys = trusted_keys(args);
    match check_text(text, &keys, args.entry_hash.as_deref()) {
        Ok(Checked::Inclusion { seq, cp, signers }) => {
            if ctx.json {
                ctx.out_json(&serde_json::json!({"ok": true, "kind": "tlog-inclusion",
                    "origin": cp.origin, "seq": seq, "size": cp.size, "root": b64(&cp.root),
                    "forum_root": cp.forum_root, "signers": signers}))
            } else {
                ctx.out(&format!(
                    "ok: seq {seq} is in {} at size {}, root {}, signed by {}",
                    cp.origin,
                    cp.size,
                    b64(&cp.root),
                    signers.join(", ")
                ))
            }
        }
        Ok(Checked::Consistency { old, new, signers }) => {
            if ctx.json {
                ctx.out_json(&serde_json::json!({"ok": true, "kind": "tlog-consistency",
                    "origin": new.origin, "old": {"size": old.size, "root": b64(&old.root)},
                    "new": {"size": new.size, "root": b64(&new.root)}, "signers": signers}))
            } else {
                ctx.out(&format!(
                    "ok: {} at size {} extends size {}, signed by {}",
                    new.origin,
                    new.size,
                    old.size,
                    signers.join(", ")
                ))
            }
        }
        Err(why) => super::proof::does_not_hold(ctx, &args.file, &why),
    }
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

/// One line per witness answer under a fetched ledger; a split view adds both notes.
pub(crate) fn print_witnesses(
    ctx: &Ctx,
    r: &crate::store::sync::FetchResult,
) -> Result<(), CliError> {
    for a in &r.witnesses {
        if a.status == "cosigned" {
            ctx.out(&format!("  {}", a.message))?;
        } else {
            eprintln!("{}: {}", r.ledger, a.message);
        }
        if let (Some(h), Some(o)) = (&a.held, &a.offered) {
            let holder = if a.witness == "local ledger" {
                "the local ledger carries"
            } else {
                "the witness holds"
            };
            ctx.out(&format!("  the note {holder}:\n{}", indent(h)))?;
            ctx.out(&format!("  the note the remote serves:\n{}", indent(o)))?;
        }
    }
    Ok(())
}

fn indent(note: &str) -> String {
    note.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
