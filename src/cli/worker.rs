//! `git forum worker`: its flags, the seats it works with (its own runtime config and executor
//! flags, as `submit` reads them), and the line it ends with. The operation is
//! [`crate::surface::worker`].

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::exec_flags::ExecutorArgs;
use super::{CliError, Ctx};
use crate::surface::run::Fleet;
use crate::surface::worker::{Control, NatsFlags, WorkerRequest};

/// How to reach a NATS server: credentials and TLS.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct NatsArgs {
    /// A NATS credentials file (.creds: the user JWT and NKey seed) the server asks for.
    #[arg(long, value_name = "FILE")]
    pub(crate) nats_creds: Option<PathBuf>,
    /// Require TLS to the NATS server (a tls:// URL requires it too).
    #[arg(long)]
    pub(crate) nats_tls: bool,
    /// Certificate authorities (PEM) to trust for the NATS server's TLS certificate.
    #[arg(long, value_name = "FILE")]
    pub(crate) nats_ca: Option<PathBuf>,
}

impl NatsArgs {
    /// The settings for the server at `url`.
    pub(crate) fn flags(&self, url: &str) -> NatsFlags {
        NatsFlags {
            url: url.to_string(),
            credentials: self.nats_creds.clone(),
            tls: self.nats_tls,
            tls_ca: self.nats_ca.clone(),
            replicas: 1,
        }
    }
}

/// Do the tasks `git forum submit --work --dispatch` publishes: pull a task of this ledger,
/// fetch its base from the git remote, run this clone's worker seat on it in a worktree of its
/// own, run its checks, push the change commit to refs/forum/results/ on the remote, publish
/// the result and acknowledge the task. While a task runs its lease is extended; a worker
/// that dies stops renewing it and the task goes to another worker. A worker never writes
/// the ledger. Runs until --max-tasks are done or it is told to stop: the first SIGINT or
/// SIGTERM (Ctrl-C, systemctl stop) makes it finish and deliver the tasks it holds, then exit
/// 0; a second one stops it at once (its tasks' commands killed, their worktrees removed; the
/// tasks go to another worker when their leases run out).
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    /// The worker: the request the daemon and MCP take.
    #[command(flatten)]
    pub(crate) req: crate::surface::request::fleet::WorkerStart,
    /// Start K worker processes with these flags (named NAME-1 ... when --name is given) and
    /// wait for them: a fleet on one machine.
    #[arg(long, value_name = "K")]
    pub(crate) spawn: Option<usize>,
    /// Publish each result twice (a fault the tests inject: the writer witnesses the second
    /// as a duplicate and never merges it).
    #[arg(long, hide = true)]
    pub(crate) answer_twice: bool,
    /// One more path confined seats and checks may read (repeatable), after [work]
    /// sandbox_read.
    #[arg(long = "sandbox-read", value_name = "PATH")]
    pub(crate) sandbox_read: Vec<PathBuf>,
    /// Roster file (default: .forum/roster.toml, else the built-in roster).
    #[arg(long, value_name = "FILE")]
    pub(crate) roster: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) tls: NatsArgs,
    #[command(flatten)]
    pub(crate) exec: ExecutorArgs,
}

/// `git forum worker`.
pub(crate) fn run(ctx: &Ctx, a: WorkerArgs) -> Result<(), CliError> {
    if let Some(k) = a.spawn {
        // Watched before the workers start, so none is left behind by a signal meanwhile.
        let pids = Arc::new(std::sync::Mutex::new(Vec::new()));
        pass_signals_on(Arc::clone(&pids))?;
        let started = |p: Vec<u32>| *pids.lock().unwrap_or_else(|e| e.into_inner()) = p;
        crate::surface::worker::spawn(k, &without_spawn(), a.req.name.as_deref(), started)?;
        return Ok(());
    }
    let roster = crate::config::load_roster(&ctx.dir, a.roster.as_deref())?;
    let loaded = crate::config::load_runtime(
        &ctx.dir,
        a.exec.runtime_config.as_deref(),
        &a.exec.to_flags(),
    )?;
    let work = loaded.runtime.work.clone();
    let mut nats = a.tls.flags(&a.req.nats);
    nats.replicas = loaded.runtime.dispatch.replicas.unwrap_or(1);
    let fleet =
        Fleet::new(loaded.runtime).map_err(|e| CliError::usage(format!("cannot work: {e}")))?;
    let req = WorkerRequest {
        answer_twice: a.answer_twice,
        sandbox_read: a.sandbox_read.clone(),
        ..WorkerRequest::of(&a.req, nats)
    };
    let control = Arc::new(Control::default());
    let stopping = Arc::clone(&control);
    super::submit::signals::watch(
        move |name| {
            stopping.stop.store(true, Ordering::SeqCst);
            eprintln!(
                "git forum worker: {name}: finishing the tasks it holds, then stopping (send it again to stop at once)"
            );
        },
        None,
        |name| {
            let n = crate::surface::worker::abandon_tasks();
            eprintln!(
                "git forum worker: {name} again: stopped at once; {n} task(s) left undone go to another worker when their leases run out"
            );
            std::process::exit(128 + i32::from(super::submit::signals::signal_number(name)));
        },
    )?;
    let n = crate::surface::worker::worker(
        &ctx.dir,
        &ctx.ledger,
        &req,
        &work,
        Arc::new(fleet),
        roster,
        control,
    )?;
    if ctx.json {
        println!("{}", serde_json::json!({"tasks": n}));
    } else {
        eprintln!("git forum worker: {n} task(s) done");
    }
    Ok(())
}

/// For `--spawn K`: a SIGINT or SIGTERM this process gets is passed on to each worker it
/// started (which finish their tasks at the first and stop at once at the second) while it
/// waits for them; at the second it exits too. A terminal's Ctrl-C reaches the workers
/// directly as well, and they take the copy passed on as the same press.
fn pass_signals_on(pids: Arc<std::sync::Mutex<Vec<u32>>>) -> Result<(), CliError> {
    fn send(pids: &std::sync::Mutex<Vec<u32>>, name: &str) {
        let sig = match name {
            "SIGINT" => rustix::process::Signal::INT,
            _ => rustix::process::Signal::TERM,
        };
        for p in pids.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            if let Some(pid) = rustix::process::Pid::from_raw(*p as i32) {
                let _ = rustix::process::kill_process(pid, sig);
            }
        }
    }
    let again = Arc::clone(&pids);
    super::submit::signals::watch(
        move |name| send(&pids, name),
        None,
        move |name| {
            send(&again, name);
            std::process::exit(128 + i32::from(super::submit::signals::signal_number(name)));
        },
    )
}

/// This process's arguments without `--spawn K` and `--name NAME` (each child gets its own).
fn without_spawn() -> Vec<String> {
    let mut out = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--spawn" || a == "--name" {
            args.next();
        } else if !(a.starts_with("--spawn=") || a.starts_with("--name=")) {
            out.push(a);
        }
    }
    out
}
