//! The standard-tree commands: `keygen NAME` (a signed-note key pair), `checkpoint --note` (a
//! signed C2SP checkpoint), `tiles export DIR` (the tree as static C2SP tiles) and `witness`
//! (cosign only trees that extend the last one accepted): their arguments and what is printed.
//! C2SP proofs are written and read by `prove` and `verify-proof` (`cli/proof.rs`). The work is
//! [`crate::surface::tlog`].

use std::path::PathBuf;

use super::{CliError, Ctx};
use crate::surface::tlog as st;

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
    /// Print one file of that layout, as `git forum serve` serves it at GET /tlog/PATH:
    /// `checkpoint` or a tile's raw bytes (with --json, the answer with the bytes in base64).
    Get(crate::surface::request::tlog::TlogRead),
}

/// Act as a witness: cosign an offered checkpoint (C2SP tlog-cosignature/v1) only when it
/// extends the one last accepted for its origin (kept in --state DIR); refuse otherwise, keeping
/// both notes as evidence.
#[derive(Debug, clap::Args)]
pub(crate) struct WitnessArgs {
    /// The offer: a consistency proof (`prove --consistency-from M --tlog`) from the accepted
    /// size, or on first contact a bare signed note (`-` for standard input).
    #[arg(
        required_unless_present_any = ["proof", "note"],
        conflicts_with_all = ["proof", "note"]
    )]
    pub(crate) file: Option<PathBuf>,
    /// The offer as text instead: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: crate::surface::request::work::Witness,
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

pub(crate) fn witness(ctx: &Ctx, args: WitnessArgs) -> Result<(), CliError> {
    use crate::surface::witness as w;
    let offer = match &args.file {
        Some(file) => {
            super::input::read_limited_text(file, super::proof::MAX_PROOF_BYTES, "offer", "")
                .map_err(CliError::usage)?
        }
        None => args.req.offer()?.to_string(),
    };
    let state = args
        .state
        .or_else(|| st::config_value("forum.witnessState").map(PathBuf::from))
        .ok_or_else(|| {
            CliError::usage("no witness state: pass --state DIR or set forum.witnessState")
        })?;
    let key_file = args
        .witness_key
        .or_else(|| st::config_value("forum.witnessKey").map(PathBuf::from))
        .ok_or_else(|| {
            CliError::usage(
                "no witness key: pass --witness-key FILE or set forum.witnessKey (make one with `git forum keygen NAME --witness`)",
            )
        })?;
    let key = st::read_key(&key_file)?;
    let log_keys = if args.note_verifier.is_empty() {
        st::config_values("forum.noteVerifiers")
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

pub(crate) fn keygen(ctx: &Ctx, args: KeygenArgs) -> Result<(), CliError> {
    let pair = st::keygen(&args.name, args.dir, args.witness)?;
    let (kpath, ppath) = (&pair.key_file, &pair.verifier_file);
    if ctx.json {
        ctx.out_json(
            &serde_json::json!({"name": pair.name, "verifier": pair.verifier,
            "key_file": kpath, "verifier_file": ppath}),
        )
    } else {
        eprintln!(
            "wrote {} (keep it secret) and {}",
            kpath.display(),
            ppath.display()
        );
        ctx.out(&pair.verifier)
    }
}

pub(crate) fn tiles(ctx: &Ctx, args: TilesArgs) -> Result<(), CliError> {
    let dir = match args.command {
        TilesCommand::Export { dir } => dir,
        TilesCommand::Get(req) => return tile_get(ctx, &req),
    };
    st::check_export_dir(&dir)?;
    let store = ctx.existing_store()?;
    let done = st::export_tiles(&store, store.signature_ledger(), &dir)?;
    if ctx.json {
        ctx.out_json(&serde_json::json!({"dir": dir, "size": done.size, "files": done.files}))
    } else {
        ctx.out(&format!(
            "wrote {} files for size {} to {}",
            done.files,
            done.size,
            dir.display()
        ))
    }
}

/// `tiles get PATH`: the file's bytes on standard output, exactly as the daemon serves them.
fn tile_get(ctx: &Ctx, req: &crate::surface::request::tlog::TlogRead) -> Result<(), CliError> {
    use std::io::Write as _;
    crate::surface::request::Request::validate(req)?;
    let store = ctx.existing_store()?;
    let file = crate::surface::tlog_layout::read(&store, store.signature_ledger(), &req.path)?;
    if ctx.json {
        return ctx.out_json(
            &serde_json::to_value(&file).map_err(|e| CliError::internal(e.to_string()))?,
        );
    }
    let mut out = std::io::stdout().lock();
    out.write_all(&file.bytes())
        .and_then(|_| out.flush())
        .map_err(|e| CliError::fail(format!("writing standard output: {e}")))
}

pub(crate) fn checkpoint(ctx: &Ctx, args: CheckpointCmd) -> Result<(), CliError> {
    if !args.note {
        return super::verify::checkpoint(ctx, args.base);
    }
    let store = ctx.existing_writer()?;
    let signed = st::checkpoint_note(&store, &ctx.ledger, args.note_key, args.base.no_record)?;
    if ctx.json {
        ctx.out_json(&crate::surface::tlog_layout::note_answer(
            &ctx.ledger,
            &signed,
        ))
    } else {
        print!("{}", signed.note);
        Ok(())
    }
}

/// One line per witness answer under a fetched ledger; a split view adds both notes.
pub(crate) fn print_witnesses(
    ctx: &Ctx,
    r: &crate::surface::sync::FetchResult,
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
