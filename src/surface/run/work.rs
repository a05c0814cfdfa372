//! The work area of a `--work` run as the surface builds it: the git workbench
//! ([`crate::work::GitWork`]) over the repository, opened by the engine once the run's request
//! seq is known (at HEAD for a new run, at its recorded base for a resumed one).

use std::path::PathBuf;
use std::sync::Arc;

use crate::run::{OpenWork, Workbench};
use crate::work::GitWork;

/// Opens the git workbench of a run in the repository at `repo`, for ledger `ledger`.
pub(crate) fn git_opener(repo: PathBuf, ledger: String) -> OpenWork {
    Arc::new(move |run_seq, base| {
        let w = match base {
            Some(b) => GitWork::open_at(&repo, &ledger, run_seq, b)?,
            None => GitWork::open(&repo, &ledger, run_seq)?,
        };
        Ok(Arc::new(w) as Arc<dyn Workbench>)
    })
}
