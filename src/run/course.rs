//! What the driver holds a run to, shared by the driver, the resume and the synthesis.

use crate::plan::CompiledPlan;
use crate::route::RouteFrame;

use super::GatePolicy;

/// What the driver holds a run to: its request, route frame, plan and gates.
pub(super) struct Course<'c> {
    /// The request text.
    pub(super) request: &'c str,
    /// The run's `request` entry (the run's id).
    pub(super) request_seq: u64,
    /// The route frame.
    pub(super) frame: &'c RouteFrame,
    /// The plan being run.
    pub(super) plan: &'c CompiledPlan,
    /// The latest `plan` entry: what tasks, degraded waves and checkpoints chain to.
    pub(super) plan_seq: u64,
    /// The run's first `plan` entry: the key of its gates.
    pub(super) run_seq: u64,
    /// The gated waves.
    pub(super) gates: &'c GatePolicy,
    /// A solo run (`solo.rs`): no validation, and the answer is written from the record.
    pub(super) solo: bool,
}
