//! `git forum doctor` as one operation for every transport: what is wrong with the ledger (by
//! seq) and with the install, and (on the command line only) the exact repairs. `GET /doctor`
//! and the MCP tool `forum.doctor` run it without repairs and without sources: a network
//! client gets to read the diagnosis, never to make the server write.

use serde::Serialize;

use super::status::{LocalModel, Readiness};
use super::{Error, Report, Result};
use crate::store::doctor::{Finding, LockFinding, Sources};
use crate::store::git::{GitStore, Options, StoreError};
use crate::store::refs::RefStorage;
use crate::store::verify::Code;

/// What verify --deep says of the ledger after the diagnosis (and any repair).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct VerifySummary {
    pub(crate) ok: bool,
    pub(crate) entries: u64,
    pub(crate) code: Option<Code>,
    pub(crate) first_bad_seq: Option<u64>,
    pub(crate) problem: Option<String>,
}

/// The ledger's part of the diagnosis.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LedgerDoctor {
    pub(crate) name: String,
    pub(crate) findings: Vec<Finding>,
    /// Objects written back by the repair.
    pub(crate) restored_objects: usize,
    /// Null when the ledger cannot be verified until its problems are repaired.
    pub(crate) verify: Option<VerifySummary>,
}

/// Whether runs can start (doctor's short form of [`Readiness`]).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RuntimeHealth {
    pub(crate) ready: bool,
    pub(crate) problems: Vec<String>,
}

/// The install's part of the diagnosis.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Install {
    /// `git --version`, or `not found`.
    pub(crate) git: String,
    pub(crate) ref_storage: String,
    pub(crate) object_format: String,
    pub(crate) hooks: Vec<String>,
    pub(crate) runtime: RuntimeHealth,
    pub(crate) local_models: Vec<LocalModel>,
}

/// The diagnosis.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DoctorReport {
    pub(crate) schema: &'static str,
    /// Nothing left unrepaired, and the ledger (if there is one) verifies.
    pub(crate) ok: bool,
    /// Null when the ledger does not exist yet.
    pub(crate) ledger: Option<LedgerDoctor>,
    /// Lock files present that can block ref updates: stale ones (no live process can hold
    /// them) make `ok` false until `--repair` removes them.
    pub(crate) locks: Vec<LockFinding>,
    pub(crate) install: Install,
    /// What the command line's doctor cleaned up of `--work` runs that died (absent over the
    /// network, where doctor never writes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) work: Option<WorkCleanup>,
}

/// Work areas (worktrees under the cache's work root, or under `.git/forum/work/` from earlier
/// versions) left by runs that died, and removed.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WorkCleanup {
    pub(crate) removed_stale: Vec<String>,
    /// Why the cleanup could not finish, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) problem: Option<String>,
}

impl<P: AsRef<std::path::Path>> From<Result<Vec<P>>> for WorkCleanup {
    fn from(r: Result<Vec<P>>) -> WorkCleanup {
        match r {
            Ok(removed) => WorkCleanup {
                removed_stale: removed
                    .iter()
                    .map(|p| p.as_ref().display().to_string())
                    .collect(),
                problem: None,
            },
            Err(e) => WorkCleanup {
                removed_stale: Vec::new(),
                problem: Some(e.message),
            },
        }
    }
}

impl Report for DoctorReport {
    const SCHEMA: &'static str = "git-forum.doctor/v1";
}

fn git_version(repo: &gix::Repository) -> String {
    let mut cmd = crate::gitproc::command();
    cmd.arg("--version").current_dir(repo.git_dir());
    crate::gitproc::output(cmd, None, 1 << 16)
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "not found".into())
}

/// Diagnoses `store`'s ledger and the install; `repair` writes back what `sources` (and the
/// write-ahead log) hold exact copies of. `runtime` is [`super::status::readiness`]'s answer.
pub(crate) fn doctor(
    store: &GitStore,
    sources: &Sources,
    repair: bool,
    runtime: Readiness,
) -> Result<DoctorReport> {
    // Locks first: a stale one would block the ref repairs below.
    let locks = store
        .doctor_locks(repair)
        .map_err(super::reports::store_error)?;
    let health = match store.doctor(sources, repair) {
        Ok(h) => Some(h),
        Err(StoreError::NoLedger(_)) => None,
        Err(StoreError::Invalid(m)) => return Err(Error::usage(m)),
        Err(e) => return Err(super::reports::store_error(e)),
    };
    let repo = store.repo();
    // The ledger as verify --deep now sees it, through a fresh handle (a repair may have added
    // packs the old one does not know of).
    let verified = match &health {
        Some(_) => {
            let fresh = gix::open(repo.git_dir())
                .map_err(|e| Error::internal(format!("reopening the repository: {e}")))?;
            GitStore::new(fresh, store.name(), Options::default())
                .and_then(|s| s.verify(true))
                .ok()
        }
        None => None,
    };
    let unrepaired = health
        .as_ref()
        .is_some_and(|h| h.findings.iter().any(|f| !f.repaired));
    let stuck = locks.iter().any(|l| l.stale && !l.removed);
    let ok = !unrepaired && !stuck && verified.as_ref().is_none_or(|v| v.passed());
    let ledger = health.map(|h| LedgerDoctor {
        name: h.ledger,
        findings: h.findings,
        restored_objects: h.restored_objects,
        verify: verified.as_ref().map(|v| VerifySummary {
            ok: v.passed(),
            entries: v.entries,
            code: v.code,
            first_bad_seq: v.first_bad_seq,
            problem: v.problem.clone(),
        }),
    });
    Ok(DoctorReport {
        schema: <DoctorReport as Report>::SCHEMA,
        ok,
        ledger,
        locks,
        install: Install {
            git: git_version(repo),
            ref_storage: RefStorage::of(repo).name().to_string(),
            object_format: repo.object_hash().to_string(),
            hooks: super::status::hooks_installed(repo),
            runtime: RuntimeHealth {
                ready: runtime.ready,
                problems: runtime.problems,
            },
            local_models: runtime.local_models,
        },
        work: None,
    })
}
