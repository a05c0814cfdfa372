//! The entry kinds git forum writes and reads, as constants: one place to find every kind, and
//! a typo becomes a compile error instead of an entry nobody reads.
//!
//! The strings are Forum's (they are part of every entry hash), so they never change.

/// The user's request that starts a run.
pub(crate) const REQUEST: &str = "request";
/// The router's decision for a request.
pub(crate) const ROUTE: &str = "route";
/// The route frame: lanes, contract and the communication rules of a run.
pub(crate) const ROUTE_FRAME: &str = "route_frame";
/// A route claim that both lane vocabularies accept: task, proof lane, domain, scopes.
pub(crate) const LANE_ROUTE: &str = "lane_route";
/// A route claim refused (unknown lane, over-routed scopes, unknown domain), with why.
pub(crate) const LANE_REJECTION: &str = "lane_rejection";
/// A trailing run of undecided routes long enough to say no lane covers the work.
pub(crate) const VOCABULARY_GAP: &str = "vocabulary_gap";
/// The orchestrator's plan (tasks and edges, compiled into waves).
pub(crate) const PLAN: &str = "plan";
/// One task dispatched to a lane.
pub(crate) const TASK: &str = "task";
/// A task's output.
pub(crate) const RESULT: &str = "result";
/// The verifier's verdict on a task's result.
pub(crate) const VERDICT: &str = "verdict";
/// A command-backed verification of a task's result.
pub(crate) const VERIFICATION: &str = "verification";
/// The context handed to a run.
pub(crate) const CONTEXT: &str = "context";
/// What the context budget kept, trimmed or omitted.
pub(crate) const CONTEXT_BUDGET: &str = "context_budget";
/// A budget stop.
pub(crate) const BUDGET: &str = "budget";
/// A gate waiting for a decision.
pub(crate) const GATE_PENDING: &str = "gate_pending";
/// A gate approved as planned.
pub(crate) const GATE_APPROVED: &str = "gate_approved";
/// A gate approved with edits to the plan.
pub(crate) const GATE_EDITED: &str = "gate_edited";
/// A gate rejected: the run stops there.
pub(crate) const GATE_REJECTED: &str = "gate_rejected";
/// A gate that waited past its deadline.
pub(crate) const GATE_EXPIRED: &str = "gate_expired";
/// A move up the executor ladder.
pub(crate) const TIER_ESCALATION: &str = "tier_escalation";
/// A reviser's revision of an answer.
pub(crate) const REVISION: &str = "revision";
/// The model-free intent coverage check.
pub(crate) const INTENT_CHECK: &str = "intent_check";
/// The judge's intent judgment.
pub(crate) const INTENT_JUDGMENT: &str = "intent_judgment";
/// The delivery floor's check.
pub(crate) const DELIVERY_CHECK: &str = "delivery_check";
/// The delivery profile's check.
pub(crate) const DELIVERY_PROFILE_CHECK: &str = "delivery_profile_check";
/// A resumed run.
pub(crate) const RESUME: &str = "resume";
/// A run stopped by a signal or a draining daemon.
pub(crate) const INTERRUPTED: &str = "interrupted";
/// A body removed for good.
pub(crate) const REDACTION: &str = "redaction";
/// A checkpoint recorded as a witness.
pub(crate) const CHECKPOINT: &str = "checkpoint";
/// A free-form note (what people and tests write with `git forum append`; git forum itself
/// writes one when `git forum discard` removes a run's branch).
pub(crate) const NOTE: &str = "note";
/// A run stopped before a wave because its gate was rejected (ours; not in Forum).
pub(crate) const GATE_STOPPED: &str = "gate_stopped";
/// A run stopped because planning or synthesis failed (ours; not in Forum).
pub(crate) const RUN_STOPPED: &str = "run_stopped";
/// A wave in which no task passed validation (ours; not in Forum).
pub(crate) const DEGRADED: &str = "degraded";
/// A classification of the request, by a model (counts as a witnessed model call).
pub(crate) const CLASSIFICATION: &str = "classification";
/// A campaign declared (`git forum campaign declare`).
pub(crate) const CAMPAIGN_DECLARED: &str = "campaign_declared";
/// The features one campaign round dispatches.
pub(crate) const CAMPAIGN_DISPATCH: &str = "campaign_dispatch";
/// A feature's status: a round's outcome, a blocked marking, or an outside system's report.
pub(crate) const FEATURE_STATUS: &str = "feature_status";
/// A project's status as an outside system reported it.
pub(crate) const PROJECT_STATUS: &str = "project_status";
/// The snapshot of a campaign at the end of a round (never trusted by the reduction).
pub(crate) const CAMPAIGN_RESULT: &str = "campaign_result";
/// One synthetic body of `git forum bench-deep-verify` (Forum's kind for its benchmark ledgers).
pub(crate) const PAYLOAD: &str = "payload";
/// What a task changed in the repository: its commit, tree, files and diff (ours; not in Forum).
pub(crate) const CHANGE: &str = "change";
/// One check command run on a task's change or on the run branch (ours; not in Forum).
pub(crate) const CHECK: &str = "check";
/// The pre-ship gate's decision on a change: merge, block, escalate, undetermined (ours).
pub(crate) const SHIP: &str = "ship";
/// A change that did not integrate onto the run branch, with the conflicting paths (ours).
pub(crate) const CONFLICT: &str = "conflict";
/// A change integrated onto the run branch: the change commit, the branch's new tip and its
/// tree, so a strict replay can merge the change again and compare the tree (ours).
pub(crate) const INTEGRATED: &str = "integrated";
/// The choice among a task's attempts (`--attempts`): each attempt side by side, the chosen
/// one and the rule that chose it (`gate`, `smallest_diff`, `cheapest`, `first`) (ours).
pub(crate) const ATTEMPT_CHOICE: &str = "attempt_choice";
/// A run branch brought into a branch by `git forum apply` (ours; not in Forum).
pub(crate) const APPLIED: &str = "applied";
/// Where secrets were replaced by markers in an entry's body before it was hashed (ours).
pub(crate) const SECRET_REDACTED: &str = "secret_redacted";
/// A body refused because it carried a secret; the run stopped there (ours).
pub(crate) const SECRET_BLOCKED: &str = "secret_blocked";
/// One tool call of the built-in editing worker: the tool and its arguments, capped (ours).
pub(crate) const TOOL_CALL: &str = "tool_call";
/// What one tool call of the editing worker gave: ok, refused, the output, capped (ours).
pub(crate) const TOOL_RESULT: &str = "tool_result";
/// A run halted by an operator (`git forum halt`) or a signal: `{by, reason}` (ours).
pub(crate) const HALTED: &str = "halted";
/// The claims of a `--work` run's answer that its record does not hold (a change claimed
/// with none delivered, or a file no delivered change touched): `{answer, delivered, claims}`
/// (ours).
pub(crate) const CLAIM_CHECK: &str = "claim_check";
/// A `--work` task published to the dispatch stream for a worker elsewhere: its attempt id,
/// base commit and subject (ours; not in Forum).
pub(crate) const TASK_DISPATCHED: &str = "task_dispatched";
/// A second result for a dispatched task that already has one (a redelivery after a slow
/// worker came back, or a worker that answered twice): witnessed, never merged (ours).
pub(crate) const DUPLICATE_RESULT: &str = "duplicate_result";
