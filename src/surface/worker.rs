//! `git forum worker` and the dispatch settings of `submit --dispatch`: the one place that
//! turns what a transport was given into the NATS settings, the writer's dispatcher and a
//! worker's loop (`crate::fleet`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{Error, Result};
use crate::exec::Seats;
use crate::exec::sandbox::probe::Jail;
use crate::exec::sandbox::profile::Profile;
use crate::exec::sandbox::{INSTALL_HINT, Record};
use crate::fleet::nats::Settings;
use crate::roster::Roster;

/// How to reach the NATS server (`--dispatch`/`--nats` and the credentials and TLS flags).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NatsFlags {
    /// `nats://HOST:PORT`.
    pub(crate) url: String,
    /// A `.creds` file.
    pub(crate) credentials: Option<PathBuf>,
    /// Require TLS.
    pub(crate) tls: bool,
    /// Certificate authorities to trust (PEM).
    pub(crate) tls_ca: Option<PathBuf>,
    /// Copies a clustered server keeps of the streams created here (`[dispatch] replicas`;
    /// 0: one).
    pub(crate) replicas: usize,
}

impl NatsFlags {
    fn settings(&self, name: &str) -> Settings {
        Settings {
            url: self.url.clone(),
            credentials: self.credentials.clone(),
            tls: self.tls,
            tls_ca: self.tls_ca.clone(),
            name: name.to_string(),
            timeout: None,
            replicas: self.replicas,
        }
    }
}

/// Where a `submit --work --dispatch` run sends its tasks.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DispatchSpec {
    pub(crate) nats: NatsFlags,
    /// The git remote workers fetch bases from and push results to (`--dispatch-remote`;
    /// `None`: `[dispatch] remote`, else `origin`).
    pub(crate) remote: Option<String>,
}

impl DispatchSpec {
    /// Dispatch to the server at `url`, every other setting from `[dispatch]` or its default.
    pub(crate) fn at(url: &str) -> DispatchSpec {
        DispatchSpec {
            nats: NatsFlags {
                url: url.to_string(),
                ..NatsFlags::default()
            },
            remote: None,
        }
    }

    /// These settings, with what they leave unset taken from `[dispatch]` in `c`.
    pub(crate) fn filled(&self, c: &crate::exec::config::DispatchConfig) -> DispatchSpec {
        DispatchSpec {
            nats: NatsFlags {
                url: self.nats.url.clone(),
                credentials: self.nats.credentials.clone().or(c.credentials.clone()),
                tls: self.nats.tls || c.tls,
                tls_ca: self.nats.tls_ca.clone().or(c.tls_ca.clone()),
                replicas: c.replicas.unwrap_or(self.nats.replicas),
            },
            remote: self.remote.clone().or(c.remote.clone()),
        }
    }
}

/// What `git forum worker` was asked.
#[derive(Debug, Clone)]
pub(crate) struct WorkerRequest {
    pub(crate) nats: NatsFlags,
    /// The git remote shared with the writer.
    pub(crate) remote: String,
    /// The slot every task runs on (`None`: the worker seat of the task's lane).
    pub(crate) seat: Option<String>,
    /// Tasks at a time (1 to 64).
    pub(crate) concurrency: usize,
    /// Seconds a task may go without progress before the server delivers it again.
    pub(crate) lease_seconds: f64,
    /// The worker's name in results (default: host and process id).
    pub(crate) name: Option<String>,
    /// Stop after this many tasks.
    pub(crate) max_tasks: Option<u64>,
    /// Publish each result twice (a fault for tests).
    pub(crate) answer_twice: bool,
    /// `--no-sandbox`: run tasks unconfined (else confined, or the worker is refused where
    /// bubblewrap is not usable, unless `[work] sandbox = false`).
    pub(crate) no_sandbox: bool,
    /// `--sandbox-net`: confined seats and checks keep the network.
    pub(crate) sandbox_net: bool,
    /// `--sandbox-read PATH`: more paths they may read (after `[work] sandbox_read`).
    pub(crate) sandbox_read: Vec<PathBuf>,
    /// `--sandbox-allow-host HOST[:PORT]`: more hosts a confined coding agent's egress admits
    /// (after `[work] sandbox_allow_host`).
    pub(crate) sandbox_allow_host: Vec<String>,
}

impl WorkerRequest {
    /// The worker `r` asks for, reaching its server with `nats` (the URL `r` names, with the
    /// credentials and TLS settings the caller has). Only the command line adds more paths to
    /// read (`--sandbox-read`) or answers twice.
    pub(crate) fn of(r: &super::request::fleet::WorkerStart, nats: NatsFlags) -> WorkerRequest {
        WorkerRequest {
            nats,
            remote: r.remote.clone(),
            seat: r.seat.clone(),
            concurrency: usize::try_from(r.concurrency).unwrap_or(usize::MAX),
            lease_seconds: r.lease,
            name: r.name.clone(),
            max_tasks: r.max_tasks,
            answer_twice: false,
            no_sandbox: r.no_sandbox,
            sandbox_net: r.sandbox_net,
            sandbox_read: Vec::new(),
            sandbox_allow_host: r.sandbox_allow_host.clone(),
        }
    }
}

/// The sandbox a worker runs every task in, from its flags and its clone's `[work]` table
/// (`work`), as a local `--work` run's: the jail (`None`: unconfined) and what results say of
/// it. A worker runs tasks others sent it, so where neither `--no-sandbox` nor `[work] sandbox
/// = false` says otherwise it is confined or refused: a machine without a usable bubblewrap is
/// one line, before anything connects.
fn sandbox(
    dir: &Path,
    req: &WorkerRequest,
    work: &crate::exec::config::WorkConfig,
) -> Result<(Option<Arc<Jail>>, String)> {
    let flag = if req.no_sandbox {
        Some(false)
    } else if work.sandbox == Some(false) {
        None
    } else {
        Some(true)
    };
    let opts = super::run::RunOptions {
        sandbox: flag,
        sandbox_net: req.sandbox_net,
        sandbox_read: req.sandbox_read.clone(),
        sandbox_allow_host: req.sandbox_allow_host.clone(),
        ..Default::default()
    };
    let (mut record, jail) = opts.sandboxing(work, false)?.resolve().map_err(|e| {
        Error::usage(format!(
            "a worker runs its tasks under bubblewrap, which is not usable here ({}): {INSTALL_HINT}",
            e.why
        ))
    })?;
    // The clone's own environment (its venv, node_modules, toolchains), as a local run's.
    let jail = jail.map(|j| {
        let profile = Profile::resolve(dir, &|k| std::env::var(k).ok());
        if let Record::Confined { bound, .. } = &mut record {
            *bound = profile.listed();
        }
        Arc::new(j.with_profile(profile))
    });
    Ok((jail, crate::fleet::worker::confine::claim(&record)))
}

/// A worker's switch (raise `stop` and it finishes the tasks it holds, pulls no more and
/// returns) and its count of tasks done.
pub(crate) use crate::fleet::worker::Control;

/// Serves dispatched tasks of `ledger` from the clone at `dir` with `seats`, under the sandbox
/// its flags and `work` (the clone's `[work]` table) ask for, until `control` says stop or
/// `max_tasks` are done; returns how many it did.
pub(crate) fn worker(
    dir: &Path,
    ledger: &str,
    req: &WorkerRequest,
    work: &crate::exec::config::WorkConfig,
    seats: Arc<dyn Seats>,
    roster: Roster,
    control: Arc<Control>,
) -> Result<u64> {
    let o = worker_options(dir, ledger, req, work, seats, roster, control)?;
    crate::fleet::worker::serve(o).map_err(Error::unavailable)
}

/// For a worker process about to end at once: kills every command its tasks run (with their
/// process groups) and removes the directories their checkouts are in; returns how many
/// tasks' directories there were. Their messages are not acknowledged, so the server gives
/// the tasks out again once their leases run out.
pub(crate) fn abandon_tasks() -> usize {
    crate::exec::command::stop_all();
    crate::scratch::remove_tracked()
}

/// The options of a worker `req` asks for, checked (its numbers, the ledger, the sandbox),
/// with `control` as its switch and count.
pub(crate) fn worker_options(
    dir: &Path,
    ledger: &str,
    req: &WorkerRequest,
    work: &crate::exec::config::WorkConfig,
    seats: Arc<dyn Seats>,
    roster: Roster,
    control: Arc<crate::fleet::worker::Control>,
) -> Result<crate::fleet::worker::WorkerOptions> {
    if !(1..=64).contains(&req.concurrency) {
        return Err(Error::usage(format!(
            "--concurrency {} must be from 1 to 64",
            req.concurrency
        )));
    }
    if !(req.lease_seconds.is_finite() && req.lease_seconds >= 1.0) {
        return Err(Error::usage(format!(
            "--lease {} must be a number of seconds, 1 or more",
            req.lease_seconds
        )));
    }
    crate::store::git::validate_ledger_name(ledger).map_err(|e| Error::usage(e.to_string()))?;
    let (jail, confinement) = sandbox(dir, req, work)?;
    let name = req
        .name
        .clone()
        .unwrap_or_else(crate::fleet::worker::default_name);
    let o = crate::fleet::worker::WorkerOptions {
        settings: req.nats.settings(&format!("git forum worker {name}")),
        ledger: ledger.to_string(),
        repo: dir.to_path_buf(),
        remote: req.remote.clone(),
        name,
        concurrency: req.concurrency,
        lease: Duration::from_secs_f64(req.lease_seconds),
        seat: req.seat.clone(),
        seats,
        roster,
        max_tasks: req.max_tasks,
        answer_twice: req.answer_twice,
        jail,
        confinement,
        control,
    };
    Ok(o)
}

/// The dispatcher of a `submit --dispatch` run: connected, its stream there, the remote
/// named. An unreachable server, bad credentials or a stream of another ledger is one line.
pub(crate) fn dispatcher(
    dir: &Path,
    ledger: &str,
    nats: &NatsFlags,
    remote: Option<&str>,
) -> Result<Arc<dyn crate::run::Dispatch>> {
    let remote = remote.unwrap_or("origin");
    let d = crate::fleet::writer::NatsDispatch::open(
        &nats.settings("git forum submit"),
        ledger,
        dir,
        remote,
    )
    .map_err(Error::unavailable)?;
    Ok(Arc::new(d))
}

/// `git forum worker --spawn K`: starts `k` worker processes of this program with `args` (the
/// command line without `--spawn`), each named `NAME-i` when `name` is given, and waits for
/// them. Fails when one could not start or ended with an error.
pub(crate) fn spawn(
    k: usize,
    args: &[String],
    name: Option<&str>,
    started: impl FnOnce(Vec<u32>),
) -> Result<()> {
    if !(1..=256).contains(&k) {
        return Err(Error::usage(format!("--spawn {k} must be from 1 to 256")));
    }
    let exe = std::env::current_exe()
        .map_err(|e| Error::internal(format!("cannot find this program to start workers: {e}")))?;
    let mut children = Vec::new();
    for i in 1..=k {
        let mut c = std::process::Command::new(&exe);
        c.args(args);
        if let Some(n) = name {
            c.args(["--name", &format!("{n}-{i}")]);
        }
        match c.spawn() {
            Ok(child) => children.push(child),
            Err(e) => {
                for mut c in children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(Error::internal(format!("cannot start worker {i}: {e}")));
            }
        }
    }
    started(children.iter().map(std::process::Child::id).collect());
    let failed = children
        .into_iter()
        .filter_map(|mut c| c.wait().ok())
        .filter(|s| !s.success())
        .count();
    if failed > 0 {
        return Err(Error::failed(format!(
            "{failed} of {k} workers ended with an error"
        )));
    }
    Ok(())
}

/// The dispatch `[dispatch]` in `.forum/runtime.toml` configures, when it names a `url`.
pub(crate) fn configured(c: &crate::exec::config::DispatchConfig) -> Option<DispatchSpec> {
    Some(DispatchSpec {
        nats: NatsFlags {
            url: c.url.clone()?,
            credentials: c.credentials.clone(),
            tls: c.tls,
            tls_ca: c.tls_ca.clone(),
            replicas: c.replicas.unwrap_or(1),
        },
        remote: c.remote.clone(),
    })
}

/// How a dispatched run stands on its NATS server (`git forum status`, the daemon's status).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct DispatchStatus {
    /// The server the run's request records.
    pub(crate) server: String,
    /// The ledger's work-queue stream.
    pub(crate) stream: String,
    /// Why the figures below are not there (the server could not be read); `None` when read.
    pub(crate) error: Option<String>,
    /// The run's tasks still on the stream: waiting for a worker or in flight.
    pub(crate) run_tasks: u64,
    /// The workers' consumer, over every run of the ledger: tasks no worker took yet.
    pub(crate) pending: u64,
    /// ... tasks a worker holds and has not acknowledged.
    pub(crate) in_flight: u64,
    /// ... tasks given out more than once and not yet acknowledged.
    pub(crate) redelivered: u64,
    /// The run's results on the stream its writer has not witnessed yet.
    pub(crate) results_waiting: u64,
    /// Each worker's last progress, by name.
    pub(crate) workers: Vec<WorkerProgress>,
}

/// A worker's last word on the server.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct WorkerProgress {
    pub(crate) worker: String,
    pub(crate) run: u64,
    pub(crate) task: String,
    pub(crate) attempt: String,
    /// `working`, `done` or `halted`.
    pub(crate) state: String,
    /// Seconds since the server got it.
    pub(crate) age_seconds: u64,
}

/// How long `status` waits for a dispatched run's server.
const STATUS_CONNECT: Duration = Duration::from_secs(2);

/// Run `run` of `ledger`, dispatched to `server`, as the server holds it, reached with
/// `[dispatch]`'s credentials and TLS settings. A server that cannot be read gives the
/// reason in `error`, not a failed status.
pub(crate) fn dispatch_status(
    ledger: &str,
    run: u64,
    server: &str,
    c: &crate::exec::config::DispatchConfig,
) -> DispatchStatus {
    let mut out = DispatchStatus {
        server: server.to_string(),
        stream: crate::fleet::protocol::stream_name(ledger),
        error: None,
        run_tasks: 0,
        pending: 0,
        in_flight: 0,
        redelivered: 0,
        results_waiting: 0,
        workers: Vec::new(),
    };
    let settings = Settings {
        url: server.to_string(),
        credentials: c.credentials.clone(),
        tls: c.tls,
        tls_ca: c.tls_ca.clone(),
        name: "git forum status".into(),
        timeout: Some(STATUS_CONNECT),
        replicas: 1,
    };
    let figures = crate::fleet::nats::Connection::connect(&settings, ledger)
        .and_then(|conn| conn.figures(run));
    let f = match figures {
        Ok(f) => f,
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    out.run_tasks = f.run_tasks;
    out.pending = f.pending;
    out.in_flight = f.in_flight;
    out.redelivered = f.redelivered;
    out.results_waiting = f.results_waiting;
    out.workers = f
        .progress
        .iter()
        .filter_map(|(bytes, at)| {
            let m = crate::fleet::protocol::ProgressMessage::parse(bytes).ok()?;
            Some(WorkerProgress {
                worker: m.worker,
                run: m.run,
                task: m.task,
                attempt: m.attempt,
                state: m.state,
                age_seconds: (now - at).max(0) as u64,
            })
        })
        .collect();
    out
}
