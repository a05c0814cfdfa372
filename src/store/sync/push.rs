//! `push`: the local ledgers sent to a remote fast-forward only, with what happened to each.

use super::git_cli::{Git, failure_line};
use crate::store::git::{GitStore, LEDGER_PREFIX, Options, StoreError};

/// What happened to one ledger in a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PushStatus {
    /// The remote had it; it now has the new entries.
    Pushed,
    /// The remote did not have it.
    Created,
    UpToDate,
    /// git or the remote refused the update; the reason as git gave it.
    Rejected(String),
    /// It does not verify locally, so nothing was pushed.
    Refused(String),
    /// Not pushed because another ledger of the same push does not verify.
    Held,
}

impl PushStatus {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            PushStatus::Pushed => "pushed",
            PushStatus::Created => "created",
            PushStatus::UpToDate => "up-to-date",
            PushStatus::Rejected(_) => "rejected",
            PushStatus::Refused(_) => "does-not-verify",
            PushStatus::Held => "held",
        }
    }

    pub(crate) fn ok(&self) -> bool {
        matches!(
            self,
            PushStatus::Pushed | PushStatus::Created | PushStatus::UpToDate
        )
    }
}

/// One ledger's outcome.
#[derive(Debug, Clone)]
pub(crate) struct PushResult {
    pub(crate) ledger: String,
    pub(crate) status: PushStatus,
    pub(crate) entries: u64,
    pub(crate) checkpoint: String,
}

/// Names of every local ledger.
pub(crate) fn local_ledgers(git: &Git) -> Result<Vec<String>, StoreError> {
    Ok(git
        .refs_under(LEDGER_PREFIX)?
        .into_iter()
        .filter_map(|(r, _)| r.strip_prefix(LEDGER_PREFIX).map(str::to_string))
        .collect())
}

/// Verifies `ledgers` (deep), scans their bodies for secrets under `gate`, and, when every one
/// verifies and carries none, pushes them to `remote` without force. When one does not
/// verify, or carries a secret, nothing is pushed.
pub(crate) fn push(
    repo: &gix::Repository,
    remote: &str,
    ledgers: &[String],
    gate: &crate::secrets::Guard,
) -> Result<Vec<PushResult>, StoreError> {
    let git = Git::for_repo(repo);
    check_push_remote(&git, remote)?;
    let mut results = Vec::with_capacity(ledgers.len());
    for name in ledgers {
        results.push(check_before_push(repo, name, gate)?);
    }
    if results.iter().any(|r| !r.status.ok()) {
        for r in &mut results {
            if r.status.ok() {
                r.status = PushStatus::Held;
            }
        }
        return Ok(results);
    }
    let refspecs = push_refspecs(repo, &git, ledgers)?;
    let mut args = vec!["push", "--porcelain", "--", remote];
    args.extend(refspecs.iter().map(String::as_str));
    let o = git.run(&args)?;
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let remote_says: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("remote:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut seen_any = false;
    for line in stdout.lines() {
        let mut parts = line.splitn(3, '\t');
        let (Some(flag), Some(spec), Some(summary)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Some((_, to)) = spec.split_once(':') else {
            continue;
        };
        let Some(name) = to.strip_prefix(LEDGER_PREFIX) else {
            continue;
        };
        let Some(r) = results.iter_mut().find(|r| r.ledger == name) else {
            continue;
        };
        seen_any = true;
        r.status = match flag {
            "*" => PushStatus::Created,
            "=" => PushStatus::UpToDate,
            " " | "+" => PushStatus::Pushed,
            _ => {
                let mut reason = summary.to_string();
                if let Some(extra) = remote_says.iter().find(|l| l.contains(to)) {
                    reason.push_str(&format!(": {extra}"));
                } else if let Some(first) = remote_says.first() {
                    reason.push_str(&format!(": {first}"));
                }
                PushStatus::Rejected(reason)
            }
        };
    }
    if !seen_any {
        let why = stderr
            .lines()
            .map(str::trim)
            .find(|l| l.contains("git forum"))
            .map(str::to_string)
            .unwrap_or_else(|| failure_line(&o));
        return Err(StoreError::Git(format!(
            "git push to {remote} failed: {why}"
        )));
    }
    Ok(results)
}

/// What pushing ledger `name` would carry, checked first: it must verify (deep) and hold no
/// secret. The status is `Pushed` when it may go, else `Refused` with why.
fn check_before_push(
    repo: &gix::Repository,
    name: &str,
    gate: &crate::secrets::Guard,
) -> Result<PushResult, StoreError> {
    let store = GitStore::new(repo.clone(), name, Options::default())?;
    if !store.exists()? {
        return Err(StoreError::NoLedger(name.to_string()));
    }
    let r = store.verify(true)?;
    let found = if r.passed() {
        match store.tip_id()? {
            Some(tip) => super::secrets::scan_ledger(
                &mut super::chain::RepoObjects(repo),
                repo.object_hash(),
                name,
                &format!("{LEDGER_PREFIX}{name}"),
                tip,
                gate,
            )?,
            None => Vec::new(),
        }
    } else {
        Vec::new()
    };
    let status = if !found.is_empty() {
        PushStatus::Refused(format!(
            "it carries {} secret{} (each line says where and how to fix it):\n  {}",
            found.len(),
            if found.len() == 1 { "" } else { "s" },
            found.join("\n  ")
        ))
    } else if r.passed() {
        PushStatus::Pushed
    } else {
        let at = r
            .first_bad_seq
            .map(|s| format!(" at seq {s}"))
            .unwrap_or_default();
        PushStatus::Refused(format!(
            "it does not verify{at}: {} [{}]; run `git forum --ledger {name} verify --deep`",
            r.problem.as_deref().unwrap_or("unknown problem"),
            r.code.map_or("", |c| c.as_str())
        ))
    };
    Ok(PushResult {
        ledger: name.to_string(),
        status,
        entries: r.entries,
        checkpoint: r.checkpoint,
    })
}

/// The refspecs that push `ledgers`: each ledger, its signed checkpoints and the change
/// commits of its `--work` runs, all without `+` (fast-forward only).
fn push_refspecs(
    repo: &gix::Repository,
    git: &Git,
    ledgers: &[String],
) -> Result<Vec<String>, StoreError> {
    let mut refspecs: Vec<String> = ledgers
        .iter()
        .map(|n| format!("{LEDGER_PREFIX}{n}:{LEDGER_PREFIX}{n}"))
        .collect();
    // Signed checkpoints travel with their ledger (fast-forward only, like the ledger).
    for n in ledgers {
        let sigs = crate::store::sign::checkpoints_ref(n);
        if crate::store::sign::ref_target(repo.git_dir(), &sigs)?.is_some() {
            refspecs.push(format!("{sigs}:{sigs}"));
        }
    }
    // The change commits of --work runs travel with their ledger (never forced).
    for n in ledgers {
        for prefix in [
            super::WORK_PREFIX,
            super::QUARANTINE_PREFIX,
            super::ATTEMPTS_PREFIX,
        ] {
            let under = format!("{prefix}{n}/");
            if !git.refs_under(&under)?.is_empty() {
                refspecs.push(format!("{under}*:{under}*"));
            }
        }
    }
    Ok(refspecs)
}

/// A push target may be a configured remote or a URL; a bare word must be configured.
fn check_push_remote(git: &Git, remote: &str) -> Result<(), StoreError> {
    if remote.is_empty() || remote.starts_with('-') {
        return Err(StoreError::Invalid(format!(
            "invalid remote {remote:?}; name a configured remote or a URL"
        )));
    }
    let looks_like_url = remote.contains(':') || remote.contains('/');
    if !looks_like_url && git.remote_url(remote)?.is_none() {
        return Err(StoreError::Invalid(format!(
            "no remote named {remote:?} is configured; add it with `git remote add {remote} URL` (see `git remote -v`)"
        )));
    }
    Ok(())
}
