//! Strict replay as a surface operation: `git forum replay RUN --strict` runs a recorded run
//! again through the engine with every reply and clock reading answered from the record
//! ([`crate::run::replay`]) and reports the first decision that differs.
//!
//! It runs only where the process has no network: in a network namespace holding nothing but
//! loopback. A process that has one runs itself again inside a fresh one (`bwrap
//! --unshare-net`, else `unshare -rn`, else `unshare -n`), so no reply can come from
//! anywhere but the record; where none of them works it says so and refuses.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::{Error, Report, Result};
use crate::exec::Fleet;
use crate::run::replay::{self as engine, ReplayError, rules};
use crate::store::git::GitStore;

/// Set in the environment of the process that runs inside the namespace, so it never tries
/// to unshare again.
pub(crate) const UNSHARED_MARK: &str = "GIT_FORUM_REPLAY_UNSHARED";

/// What a strict replay found: `git forum replay RUN --strict --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StrictReport {
    /// The run (its request seq).
    pub(crate) run: u64,
    /// How many entries the record holds for the run.
    pub(crate) recorded: usize,
    /// How many the replay wrote.
    pub(crate) recomputed: usize,
    /// SHA-256 of the recorded final answer.
    pub(crate) answer_sha256: Option<String>,
    /// SHA-256 of the replay's final answer.
    pub(crate) recomputed_answer_sha256: Option<String>,
    /// The first divergence: its seq, what the record holds and what the replay decided.
    pub(crate) divergence: Option<Divergence>,
    /// Calls the replay made that the record holds no reply for.
    pub(crate) unanswered: Vec<String>,
    /// What the replay answered from the record rather than decide again, one line each (a
    /// worker's commit this repository lacks, a result recorded before it named its commit).
    #[serde(default)]
    pub(crate) from_record: Vec<String>,
    /// The git forum version that recorded the run; `None`: recorded before versions were
    /// recorded.
    pub(crate) recorded_by: Option<String>,
    /// This git forum's version.
    pub(crate) replayed_by: String,
    /// How the network was unshared: `bwrap`, `unshare -rn`, `unshare -n`, or `none` when
    /// the process had no network to begin with.
    pub(crate) network: String,
    /// Where the rules the replay ran under came from: the roster, the policy, the executors
    /// and the limits, each `recorded` or the file proven the same by its digest.
    pub(crate) rules: rules::Sources,
}

/// The first decision that differs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Divergence {
    /// The recorded entry's seq.
    pub(crate) seq: u64,
    /// What the record holds, on one line.
    pub(crate) recorded: String,
    /// What the replay decided, on one line.
    pub(crate) recomputed: String,
}

impl Report for StrictReport {
    const SCHEMA: &'static str = "git-forum.strict-replay/1";
}

/// The interfaces this process's network namespace has, from `/proc/self/net/dev`; `None`
/// when that cannot be read.
fn interfaces() -> Option<Vec<String>> {
    let text = std::fs::read_to_string("/proc/self/net/dev").ok()?;
    Some(
        text.lines()
            .skip(2)
            .filter_map(|l| l.split(':').next())
            .map(|n| n.trim().to_string())
            .collect(),
    )
}

/// Whether this process has no network but loopback.
pub(crate) fn network_unshared() -> bool {
    interfaces().is_some_and(|names| names.iter().all(|n| n == "lo"))
}

/// The ways to run a program in a fresh network namespace, in the order they are tried, with
/// the name each is reported by.
fn wrappers() -> Vec<(&'static str, Vec<OsString>)> {
    let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
    let mut out = Vec::new();
    if let Ok(bwrap) = crate::exec::sandbox::probe::find_bwrap() {
        let mut argv = vec![bwrap.into_os_string()];
        argv.extend(os(&[
            "--unshare-net",
            "--die-with-parent",
            "--dev-bind",
            "/",
            "/",
            "--",
        ]));
        out.push(("bwrap", argv));
    }
    out.push(("unshare -rn", os(&["unshare", "-rn", "--"])));
    out.push(("unshare -n", os(&["unshare", "-n", "--"])));
    out
}

/// The first wrapper that starts a program with no network here.
fn working_wrapper() -> Result<(&'static str, Vec<OsString>)> {
    let mut tried = Vec::new();
    for (name, argv) in wrappers() {
        let ok = Command::new(&argv[0])
            .args(&argv[1..])
            .args(["cat", "/proc/self/net/dev"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .is_ok_and(|o| {
                o.status.success()
                    && String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .skip(2)
                        .all(|l| l.trim_start().starts_with("lo:"))
            });
        if ok {
            return Ok((name, argv));
        }
        tried.push(name);
    }
    Err(Error::unavailable(format!(
        "strict replay runs only without a network, and no way to unshare it works here (tried {}): install bubblewrap or allow user namespaces",
        tried.join(", ")
    )))
}

/// Runs this program again with `args` inside a fresh network namespace, its output going
/// where this process's goes; returns its exit code.
pub(crate) fn rerun_unshared(args: Vec<OsString>) -> Result<i32> {
    if std::env::var_os(UNSHARED_MARK).is_some() {
        return Err(Error::unavailable(
            "strict replay was started in a network namespace that still has a network: it refuses to run with one",
        ));
    }
    let (name, argv) = working_wrapper()?;
    let exe = std::env::current_exe()
        .map_err(|e| Error::internal(format!("cannot find this program to run it again: {e}")))?;
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .arg(exe)
        .args(args)
        .env(UNSHARED_MARK, name)
        .status()
        .map_err(|e| Error::internal(format!("cannot start {name}: {e}")))?;
    Ok(status.code().unwrap_or(1))
}

/// Replays run `run` of the ledger in `store` (this process must have no network: see
/// [`network_unshared`]) under the rules the run recorded; `dir` is the repository whose
/// files stand in for rules an older run did not record, where its record proves them the
/// same (see [`crate::run::replay::rules`]).
pub(crate) fn strict(store: &GitStore, dir: &Path, run: u64) -> Result<StrictReport> {
    if !network_unshared() {
        return Err(Error::unavailable(
            "strict replay runs only without a network: run it as `git forum replay RUN --strict`, which unshares it",
        ));
    }
    let entries = run_to_replay(store, run)?;
    let roster = || crate::config::load_roster(dir, None).map_err(|e| e.to_string());
    let policy = || crate::config::load_policy(dir, None).map_err(|e| e.to_string());
    let current = rules::Current {
        roster: &roster,
        policy: &policy,
    };
    // Refusals of a run another git forum recorded name that version.
    let (seq, request) = (entries[0].seq, &entries[0].payload);
    let refuse = |m: String| Error::conflict(engine::with_version(seq, request, m));
    let rules = rules::resolve(&entries, current).map_err(refuse)?;
    let real = metering(&entries, &rules.options).map_err(refuse)?;
    let real = real.as_ref().map(|f| f as &dyn crate::exec::Seats);
    // A --work run's changes are merged again here, into a scratch object directory.
    let merges = match entries[0].payload.get("work") {
        Some(_) => crate::work::ScratchMerges::open(dir)
            .map(|m| std::sync::Arc::new(m) as std::sync::Arc<dyn engine::Merges>)
            .map_err(|e| {
                Error::unavailable(format!(
                    "strict replay cannot merge run {run}'s changes again: {e}"
                ))
            })
            .map(Some)?,
        None => None,
    };
    let r = engine::strict_metered(store, run, &rules.roster, &rules.options, real, merges);
    let r = r.map_err(|e| match e {
        ReplayError::Refused(m) => Error::conflict(m),
        ReplayError::Ledger(e) => Error::internal(format!("ledger: {e}")),
    })?;
    Ok(StrictReport {
        run: r.run,
        recorded: r.recorded,
        recomputed: r.recomputed,
        answer_sha256: r.answer_sha256,
        recomputed_answer_sha256: r.recomputed_answer_sha256,
        divergence: r.divergence.map(|d| Divergence {
            seq: d.seq,
            recorded: d.recorded,
            recomputed: d.recomputed,
        }),
        unanswered: r.unanswered,
        from_record: r.from_record,
        recorded_by: r.recorded_by,
        replayed_by: r.replayed_by,
        network: std::env::var(UNSHARED_MARK).unwrap_or_else(|_| "none".into()),
        rules: rules.sources,
    })
}

/// The executors the run recorded, built (never called) so the replay reserves each call as
/// the run did: needed only under a spend ceiling, where a run that recorded none is refused.
fn metering(
    entries: &[engine::Recorded],
    opts: &crate::run::Options,
) -> std::result::Result<Option<Fleet>, String> {
    if !rules::under_a_ceiling(entries, opts) {
        return Ok(None);
    }
    let request = &entries[0];
    let seq = request.seq;
    let Some(record) = request.payload.get("runtime").filter(|r| !r.is_null()) else {
        return Err(format!(
            "run {seq} ran under a spend ceiling and recorded no executors, whose reservations decided where it stopped: strict replay refuses rather than reserve its calls otherwise"
        ));
    };
    let refuse = |e: String| {
        format!(
            "run {seq} ran under a spend ceiling, and the executors it recorded cannot be rebuilt to reserve its calls as it did ({e}): strict replay refuses"
        )
    };
    let runtime =
        crate::exec::config::record::from_record(record).map_err(|e| refuse(e.to_string()))?;
    Fleet::new(runtime)
        .map(Some)
        .map_err(|e| refuse(e.to_string()))
}

/// The entries of run `run`, refused in one line when `run` names no run's request or a run
/// a live process still drives.
pub(crate) fn run_to_replay(store: &GitStore, run: u64) -> Result<Vec<engine::Recorded>> {
    let all = engine::read_all(store).map_err(|e| Error::internal(format!("ledger: {e}")))?;
    match all.iter().find(|(e, _)| e.seq == run) {
        Some((e, _)) if e.kind == crate::ledger::kind::REQUEST => {}
        _ => {
            return Err(Error::not_found(format!(
                "seq {run} is not a run's request: name a run as `git forum runs` lists it"
            )));
        }
    }
    if store.halts().is_running(run)? {
        return Err(Error::conflict(format!(
            "run {run} is still running: replay it once it has ended (`git forum runs` shows when)"
        )));
    }
    let request = all
        .iter()
        .find(|(e, _)| e.seq == run)
        .and_then(|(_, b)| b.clone())
        .unwrap_or_default();
    engine::run_entries(&all, run)
        .map_err(|m| Error::conflict(engine::with_version(run, &request, m)))
}

/// What a replay run in a fresh network namespace for the daemon or MCP hands back: its
/// report, or its refusal with the HTTP status of the refusal's class.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ConfinedAnswer {
    /// The report, when the replay ran.
    pub(crate) report: Option<StrictReport>,
    /// The refusal's HTTP status, when it did not.
    pub(crate) status: Option<u16>,
    /// The refusal, on one line.
    pub(crate) error: Option<String>,
}

impl Report for ConfinedAnswer {
    const SCHEMA: &'static str = "git-forum.strict-replay-confined/1";
}

/// The replay of run `run` as the process in the namespace answers it
/// (`git forum __replay-confined RUN`): see [`strict_confined`].
pub(crate) fn confined_answer(store: &GitStore, dir: &Path, run: u64) -> ConfinedAnswer {
    match strict(store, dir, run) {
        Ok(r) => ConfinedAnswer {
            report: Some(r),
            status: None,
            error: None,
        },
        Err(e) => ConfinedAnswer {
            report: None,
            status: Some(e.class.http_status()),
            error: Some(e.message),
        },
    }
}

/// The class whose HTTP status is `status` (internal for any other).
fn class_of(status: u16) -> super::Class {
    super::TABLE
        .iter()
        .find(|(_, _, s)| *s == status)
        .map_or(super::Class::Internal, |(c, _, _)| *c)
}

/// Strict replay for a process that has a network (the daemon, the MCP server): run `run` of
/// ledger `ledger` in the repository at `dir` is replayed by this program started again in a
/// fresh network namespace, the same way the command line confines itself, and its report
/// (or refusal) comes back as if made here. Where no namespace can be made it refuses, saying
/// so: it never replays with the network.
pub(crate) fn strict_confined(
    store: &GitStore,
    dir: &Path,
    ledger: &str,
    run: u64,
) -> Result<StrictReport> {
    // Bad input is refused here, before a process is started for it.
    run_to_replay(store, run)?;
    if network_unshared() {
        return strict(store, dir, run);
    }
    let exe = std::env::current_exe()
        .map_err(|e| Error::internal(format!("cannot find this program to run it again: {e}")))?;
    // A library caller's process is not this program: it cannot be started for the replay.
    if !exe
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("git-forum"))
    {
        return Err(Error::unavailable(format!(
            "strict replay runs in a git-forum process started without a network, and this process ({}) is not git-forum: run `git forum replay RUN --strict`",
            exe.display()
        )));
    }
    let (name, argv) = working_wrapper()?;
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .arg(exe)
        .arg("-C")
        .arg(dir)
        .args(["--ledger", ledger, "__replay-confined", &run.to_string()])
        .env(UNSHARED_MARK, name)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::internal(format!("cannot start {name}: {e}")))?;
    match serde_json::from_slice::<ConfinedAnswer>(&out.stdout) {
        Ok(ConfinedAnswer {
            report: Some(r), ..
        }) => Ok(r),
        Ok(a) => Err(Error::new(
            class_of(a.status.unwrap_or(500)),
            a.error
                .unwrap_or_else(|| "the confined replay gave no answer".into()),
        )),
        Err(_) => {
            let err = String::from_utf8_lossy(&out.stderr);
            let line = err.lines().last().unwrap_or("").trim();
            Err(Error::internal(format!(
                "the replay in a network namespace ({name}) failed ({}): {}",
                out.status,
                line.strip_prefix("error: ").unwrap_or(line)
            )))
        }
    }
}
