//! The work area of a `--work` run as the surface builds it: the git workbench
//! (`crate::work::GitWork`) over the repository, opened by the engine once the run's request
//! seq is known.

use std::path::PathBuf;
use std::sync::Arc;

use crate::run::{OpenWork, Workbench};

/// Opens the git workbench of run SEQ in the repository at `repo`, for ledger `ledger`.
pub fn git_opener(repo: PathBuf, ledger: String) -> OpenWork {
    Arc::new(move |run_seq| {
        let _ = (&repo, &ledger, run_seq);
        Err::<Arc<dyn Workbench>, _>(crate::run::WorkError::Io(
            "this build has no git workbench yet (src/work/ is being written): run without --work"
                .into(),
        ))
    })
}
