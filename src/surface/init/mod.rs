//! `init`: the refspecs that make plain `git fetch` (and, on request, `git push`) carry
//! ledgers, and the `.forum/` configuration directory, with a runtime file whose worker seat is
//! the agent this machine has (`choose.rs` says which, in what order; `probe.rs` looks) and
//! whose default checks are the project's tests. Safe to run again: nothing present is added
//! twice, and no existing file is overwritten (but `.forum/runtime.toml` with `--force`).

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::store::open_repo;
use super::sync::{self, Git};
use super::{Error, Report, Result};

pub(crate) mod choose;
pub(crate) mod probe;

pub(crate) use choose::{AGENT_NAMES, Found, INSTALL_HINT, TestCommand};

/// What `init` is asked to do.
#[derive(Debug, Clone, Default)]
pub(crate) struct InitOptions {
    /// Only these remotes (each must be configured); empty: every configured remote.
    pub(crate) remotes: Vec<String>,
    /// Also make plain `git push` push ledgers.
    pub(crate) push: bool,
    /// `--agent NAME`: this worker seat instead of the first found.
    pub(crate) agent: Option<String>,
    /// `--check CMD`: these default checks instead of the detected test command.
    pub(crate) checks: Vec<String>,
    /// `--force`: rewrite `.forum/runtime.toml` when it exists.
    pub(crate) force: bool,
}

/// The `.forum/README` that `init` writes.
pub(crate) const FORUM_README: &str = "\
This directory configures git forum for this repository.

roster.toml   the agent lanes requests are routed to. It starts as a copy of the
              roster built into git forum; edit it freely. `git forum route` and
              `git forum plan` read it (or a file given with --roster).
runtime.toml  who does the work: the worker seat init found on this machine, its
              spend ceiling when it is paid, and the project's test command as the
              default check of --work runs. `git forum init --force --agent NAME`
              writes it again; `git forum runtime inspect` shows what would run.

The record itself is not here: every ledger lives in git, on refs/forum/ledgers/NAME.
Share ledgers with `git forum push` and `git forum fetch`; `git forum hooks install`
adds a pre-push hook that refuses to publish a ledger that does not verify.
";

/// The fetch refspec for ledgers of `remote`: forced, because it only stages (a rewritten remote
/// ledger must not make every plain `git fetch` fail; `git forum fetch` judges it).
pub(crate) fn fetch_refspec(remote: &str) -> String {
    format!(
        "+refs/forum/ledgers/*:{}{remote}/*",
        sync::UNVERIFIED_PREFIX
    )
}

/// The fetch refspecs older versions of `init` added, which let plain `git fetch` move the
/// adopted copies (`refs/forum/remotes/REMOTE/*`) to whatever the remote served.
pub(crate) fn old_fetch_refspecs(remote: &str) -> [String; 2] {
    let old = format!("refs/forum/ledgers/*:{}{remote}/*", sync::REMOTES_PREFIX);
    [format!("+{old}"), old]
}

/// The push refspec for ledgers (never forced).
pub(crate) const PUSH_REFSPEC: &str = "refs/forum/ledgers/*:refs/forum/ledgers/*";

/// The values of git config `key` (none when it is unset).
pub(crate) fn config_values(git: &Git, key: &str) -> Result<Vec<String>> {
    let o = git.run(&["config", "--get-all", key])?;
    // Exit 1 means "no such key".
    if !o.status.success() && o.status.code() != Some(1) {
        return Err(Error::unavailable(format!(
            "reading git config {key} failed: {}",
            sync::failure_line(&o)
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .collect())
}

fn config_add(git: &Git, key: &str, value: &str) -> Result<()> {
    git.run_ok(
        &["config", "--add", key, value],
        &format!("git config --add {key}"),
    )?;
    Ok(())
}

/// Writes `path` with `text`: only when it does not exist, unless `replace`. Returns whether
/// it wrote.
fn write_file(path: &Path, text: &str, replace: bool) -> Result<bool> {
    if replace {
        // A new file beside it, then a rename: a failure leaves the old file whole.
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| Error::internal(format!("creating a file in {}: {e}", dir.display())))?;
        tmp.write_all(text.as_bytes())
            .and_then(|_| tmp.as_file().sync_all())
            .map_err(|e| Error::internal(format!("writing {}: {e}", path.display())))?;
        tmp.persist(path)
            .map_err(|e| Error::internal(format!("writing {}: {}", path.display(), e.error)))?;
        return Ok(true);
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(mut f) => {
            f.write_all(text.as_bytes())
                .and_then(|_| f.sync_all())
                .map_err(|e| Error::internal(format!("writing {}: {e}", path.display())))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Error::internal(format!("creating {}: {e}", path.display()))),
    }
}

/// What `init` did to one remote's refspecs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RemoteChange {
    pub(crate) remote: String,
    /// The ledger fetch refspec.
    #[serde(rename = "fetch_refspec")]
    pub(crate) spec: String,
    /// Whether the fetch refspec was added (false: it was already present).
    pub(crate) fetch_added: bool,
    /// The push refspecs added.
    pub(crate) push_added: Vec<&'static str>,
    /// The older fetch refspecs removed.
    #[serde(rename = "fetch_removed")]
    pub(crate) replaced: Vec<String>,
}

/// The runtime file `init` wrote: the worker seat it chose and what goes with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RuntimeWritten {
    /// The seat, as `--agent` names it (`claude`, `anthropic`, `ollama`, `local`, ...).
    pub(crate) agent: String,
    /// What it is, for a person.
    pub(crate) describe: String,
    /// Whether its calls cost money.
    pub(crate) paid: bool,
    /// The spend ceiling written for a paid seat (`[spend] max_cost_usd`).
    pub(crate) max_cost_usd: Option<f64>,
    /// The local model's base URL, when the seat is git forum's local model.
    pub(crate) local_model: Option<String>,
    /// The command that gets the local model running, when the seat is the local model.
    pub(crate) next: Option<&'static str>,
    /// The default checks written (`[work] default_checks`).
    pub(crate) default_checks: Vec<String>,
}

/// What `init` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct InitReport {
    pub(crate) schema: &'static str,
    pub(crate) remotes: Vec<RemoteChange>,
    /// The `.forum/` files written, and those kept because they exist.
    pub(crate) written: Vec<String>,
    pub(crate) kept: Vec<String>,
    /// The `.forum/` directory; `None` in a bare repository.
    pub(crate) forum_dir: Option<String>,
    /// The runtime file written; `None` when one was kept.
    pub(crate) runtime: Option<RuntimeWritten>,
    /// What this machine has.
    pub(crate) found: Found,
    /// The project's test command as detected (`None`: none found, or `--check` given).
    pub(crate) test_command: Option<TestCommand>,
}

impl Report for InitReport {
    const SCHEMA: &'static str = "git-forum.init/v1";
}

/// Sets up the repository at `dir` for git forum.
///
/// Adds `+refs/forum/ledgers/*:refs/forum/unverified/REMOTE/*` to each remote's fetch refspecs
/// (plain `git fetch` then brings ledgers, to a namespace nothing trusts; only `git forum fetch`
/// adopts a copy into `refs/forum/remotes/REMOTE/` after verifying it), replacing the refspec
/// older versions added, and writes `.forum/roster.toml`, `.forum/README` and
/// `.forum/runtime.toml` when they are absent (the runtime file also with `force`).
pub(crate) fn init(dir: &Path, opts: &InitOptions) -> Result<InitReport> {
    let repo = open_repo(dir)?;
    let git = Git::for_repo(&repo);
    let remotes = chosen_remotes(&git, &opts.remotes)?;
    let forum_dir = repo.workdir().map(|w| w.join(".forum"));
    let found = probe::found();
    // Everything that can be refused is refused before anything changes.
    let plan = match (&forum_dir, repo.workdir()) {
        (Some(d), Some(w)) => Some(plan_runtime(d, w, opts, &found)?),
        _ => None,
    };
    let mut remote_report = Vec::new();
    for r in &remotes {
        remote_report.push(set_up_remote(&git, r, opts.push)?);
    }
    let mut report = InitReport {
        schema: InitReport::SCHEMA,
        remotes: remote_report,
        written: Vec::new(),
        kept: Vec::new(),
        forum_dir: forum_dir.as_ref().map(|d| d.display().to_string()),
        runtime: None,
        found,
        test_command: None,
    };
    if let (Some(d), Some(plan)) = (&forum_dir, plan) {
        write_forum_dir(d, plan, opts.force, &mut report)?;
    }
    Ok(report)
}

/// The runtime file `init` would write, worked out before anything is written.
struct RuntimePlan {
    text: String,
    written: RuntimeWritten,
    test_command: Option<TestCommand>,
}

/// The runtime file for the agent chosen from `found` (or asked for), with the project's test
/// command (or the `--check` commands) as its default checks. Asking for an agent or checks
/// while a runtime file exists, without `--force`, is refused: it would not be written.
fn plan_runtime(
    forum_dir: &Path,
    work_tree: &Path,
    opts: &InitOptions,
    found: &Found,
) -> Result<RuntimePlan> {
    if !opts.force
        && forum_dir.join("runtime.toml").exists()
        && (opts.agent.is_some() || !opts.checks.is_empty())
    {
        return Err(Error::usage(format!(
            ".forum/runtime.toml exists and init does not overwrite it: add --force to write it again with {}",
            if opts.agent.is_some() {
                "the agent --agent names"
            } else {
                "the --check commands"
            }
        )));
    }
    for c in &opts.checks {
        if c.trim().is_empty() || c.contains('\0') || c.len() > crate::exec::config::MAX_CHECK_BYTES
        {
            return Err(Error::usage(format!(
                "--check {c:?}: give a non-empty shell command of at most {} bytes",
                crate::exec::config::MAX_CHECK_BYTES
            )));
        }
    }
    let agent =
        choose::choose(found, opts.agent.as_deref()).map_err(|e| Error::usage(e.to_string()))?;
    let test_command = if opts.checks.is_empty() {
        choose::test_command(&probe::project_files(work_tree))
    } else {
        None
    };
    let checks: Vec<String> = if opts.checks.is_empty() {
        test_command.iter().map(|t| t.command.clone()).collect()
    } else {
        opts.checks.iter().map(|c| c.trim().to_string()).collect()
    };
    let local_url = super::model::local_url()?;
    let text = choose::runtime_toml(&agent, found, &local_url, &checks);
    let local = agent == choose::Agent::Local;
    Ok(RuntimePlan {
        text,
        written: RuntimeWritten {
            agent: agent.name(),
            describe: agent.describe(found),
            paid: agent.paid(),
            max_cost_usd: agent.paid().then_some(choose::DEFAULT_MAX_COST_USD),
            local_model: local.then(|| local_url.clone()),
            next: local.then_some(super::model::GET_IT_RUNNING),
            default_checks: checks,
        },
        test_command,
    })
}

/// The remotes to set up: those asked for (each must be configured) or every configured one;
/// every name is checked before anything changes.
fn chosen_remotes(git: &Git, asked: &[String]) -> Result<Vec<String>> {
    let configured = git.remotes()?;
    let remotes = if asked.is_empty() {
        configured.clone()
    } else {
        for r in asked {
            if !configured.contains(r) {
                return Err(Error::usage(format!(
                    "no remote named {r:?} is configured; add it with `git remote add {r} URL` (see `git remote -v`)"
                )));
            }
        }
        asked.to_vec()
    };
    // Check every name before changing anything.
    for r in &remotes {
        sync::check_remote_name(git, r)?;
    }
    Ok(remotes)
}

/// Adds the ledger fetch refspec to remote `r` (and, with `push`, the push refspecs), and
/// removes the fetch refspecs older versions added.
fn set_up_remote(git: &Git, r: &str, push: bool) -> Result<RemoteChange> {
    let fetch_key = format!("remote.{r}.fetch");
    let spec = fetch_refspec(r);
    let present = config_values(git, &fetch_key)?;
    let fetch_added = if present.contains(&spec) {
        false
    } else {
        config_add(git, &fetch_key, &spec)?;
        true
    };
    let mut replaced = Vec::new();
    for old in old_fetch_refspecs(r) {
        if present.contains(&old) {
            git.run_ok(
                &["config", "--fixed-value", "--unset-all", &fetch_key, &old],
                &format!("git config --unset-all {fetch_key}"),
            )?;
            replaced.push(old);
        }
    }
    let mut push_added = Vec::new();
    if push {
        let push_key = format!("remote.{r}.push");
        let existing = config_values(git, &push_key)?;
        if existing.is_empty() {
            config_add(git, &push_key, "HEAD")?;
            push_added.push("HEAD");
        }
        if !existing.iter().any(|v| v == PUSH_REFSPEC) {
            config_add(git, &push_key, PUSH_REFSPEC)?;
            push_added.push(PUSH_REFSPEC);
        }
    }
    Ok(RemoteChange {
        remote: r.to_string(),
        spec,
        fetch_added,
        push_added,
        replaced,
    })
}

/// Creates `.forum/` and writes the roster, README and runtime files that are absent (the
/// runtime file also when `force`).
fn write_forum_dir(
    dir: &Path,
    plan: RuntimePlan,
    force: bool,
    report: &mut InitReport,
) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::internal(format!("creating {}: {e}", dir.display())))?;
    for (file, text, replace) in [
        ("roster.toml", crate::roster::DEFAULT_ROSTER_TOML, false),
        ("README", FORUM_README, false),
        ("runtime.toml", plan.text.as_str(), force),
    ] {
        let name = format!(".forum/{file}");
        if write_file(&dir.join(file), text, replace)? {
            report.written.push(name);
            if file == "runtime.toml" {
                report.runtime = Some(plan.written.clone());
            }
        } else {
            report.kept.push(name);
        }
    }
    report.test_command = plan.test_command;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forced_write_replaces_and_a_plain_one_keeps() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("runtime.toml");
        assert!(write_file(&p, "one", false).unwrap());
        assert!(!write_file(&p, "two", false).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "one");
        assert!(write_file(&p, "three", true).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "three");
    }
}
