//! What the daemon keeps between requests for its projections (see the parent module).

use std::sync::Mutex;

use crate::report::summary::SummaryFold;
use crate::surface::store::Verified;

/// What the daemon keeps between requests (see the module doc).
#[derive(Default)]
pub(crate) struct Projections {
    /// The last deep verify that passed.
    pub(super) deep: Mutex<Option<Verified>>,
    /// The last chain (not deep) verify that passed, for the summary's `verified`.
    pub(super) chain: Mutex<Option<Verified>>,
    /// The summary's fold and the commit of the last entry it counted.
    pub(super) summary: Mutex<Option<Folded>>,
}

/// A summary fold over the first `len` entries, the last of which is at commit `tip`.
pub(super) struct Folded {
    pub(super) len: usize,
    pub(super) tip: Option<gix::ObjectId>,
    pub(super) fold: SummaryFold,
}
