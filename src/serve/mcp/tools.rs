//! The MCP tools: one row of [`TOOLS`] per tool, naming the dispatcher route it calls, so a tool
//! answers exactly what that route answers over HTTP.

use serde_json::{Map, Value as J, json};

use crate::serve::dispatch::{Dispatcher, Reply, RunHooks};

/// How a tool reaches the dispatcher.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// `GET path`; the tool takes the arguments it lists (most list none), given to the route.
    Get(&'static str),
    /// `GET prefix<seq>`; the tool takes `{seq}`.
    GetSeq(&'static str),
    /// `POST path` with the arguments as the body.
    Post(&'static str),
}

/// One tool: its name, the other names it answers to, its route, description and argument
/// properties (`(name, JSON type, description)`, then the required names).
pub struct Tool {
    /// The name `tools/list` shows.
    pub name: &'static str,
    /// Other names `tools/call` accepts (Forum's spellings).
    pub aliases: &'static [&'static str],
    /// The dispatcher route it calls.
    pub target: Target,
    /// What it does, for the model choosing tools.
    pub(crate) description: &'static str,
    /// Its arguments: `(name, JSON type, description)`.
    pub(crate) properties: &'static [(&'static str, &'static str, &'static str)],
    /// The arguments it cannot do without.
    pub(crate) required: &'static [&'static str],
}

const BUDGETS: [(&str, &str, &str); 4] = [
    (
        "context_token_budget",
        "integer",
        "Run-wide cap on admitted context tokens.",
    ),
    (
        "request_context_token_budget",
        "integer",
        "Cap on request-level context tokens.",
    ),
    (
        "task_context_token_budget",
        "integer",
        "Cap on each task's context tokens.",
    ),
    (
        "upstream_token_budget",
        "integer",
        "Cap on each upstream output injected into a prompt.",
    ),
];

const SUBMIT_PROPS: &[(&str, &str, &str)] = &[
    ("request", "string", "The request to run."),
    (
        "delivery_profile",
        "string",
        "operator, engineer, researcher or executive (default: the route frame's).",
    ),
    (
        "checkpoint_each_wave",
        "boolean",
        "Witness a checkpoint after each wave.",
    ),
    BUDGETS[0],
    BUDGETS[1],
    BUDGETS[2],
    BUDGETS[3],
    (
        "max_model_calls",
        "integer",
        "Stop once this many model calls have started.",
    ),
    (
        "max_seconds",
        "number",
        "Stop after this many seconds (capped by the server).",
    ),
    (
        "gate_waves",
        "array",
        "Waves (0-based) that wait for a human decision.",
    ),
    (
        "use_capsule_context",
        "boolean",
        "Give the planner the ledger's capsule as request context.",
    ),
    (
        "no_repo_context",
        "boolean",
        "Leave the repository (its map and each task's relevant files) out of the context.",
    ),
    (
        "repo_context",
        "boolean",
        "Take the repository (its map and each task's relevant files) in as context (true) or leave it out (false); unset: the runtime config's [context] repo, else true.",
    ),
    (
        "judge_intent",
        "boolean",
        "Ask the orchestrator whether a flagged answer drifted from the request.",
    ),
    (
        "revise",
        "boolean",
        "Ask for a tighter answer when the delivery floor flags it.",
    ),
    (
        "work",
        "boolean",
        "Work in the repository: a worktree per task, changes as commits, checks, a pre-ship gate, the run branch forum/run-SEQ.",
    ),
    (
        "checks",
        "array",
        "Shell commands every change must pass (a --work run).",
    ),
    (
        "allow_cmds",
        "array",
        "Commands the built-in editing worker may run besides the checks (a --work run).",
    ),
    (
        "max_tool_calls",
        "integer",
        "Tool calls each task of the built-in editing worker may make (default 24).",
    ),
    (
        "sandbox",
        "boolean",
        "Confine the workers and checks of a work run with bubblewrap (true: refused without it; false: unconfined, witnessed; absent: the server's [work] sandbox, else confined when bubblewrap works).",
    ),
    (
        "sandbox_net",
        "boolean",
        "Let confined workers and checks use the network (not with sandbox false).",
    ),
    MAX_TOKENS,
    MAX_COST_USD,
];

/// The spend ceilings of submit and resume.
const MAX_TOKENS: (&str, &str, &str) = (
    "max_tokens",
    "integer",
    "Ceiling on the run's prompt plus completion tokens: a call whose worst case does not fit never starts.",
);
const MAX_COST_USD: (&str, &str, &str) = (
    "max_cost_usd",
    "number",
    "Ceiling in dollars on what the run's model calls cost, at the runtime's prices.",
);

const GATE_KEY: [(&str, &str, &str); 3] = [
    (
        "run_seq",
        "integer",
        "The run's first plan entry (GET gates lists it).",
    ),
    ("wave", "integer", "The gated wave (0-based)."),
    ("approver", "string", "Who decides."),
];

const GRADED: &[(&str, &str, &str)] = &[
    (
        "run",
        "integer",
        "The run's request seq (default: the latest run).",
    ),
    (
        "all",
        "boolean",
        "Cover every entry of the ledger, runs together.",
    ),
    (
        "min_checks",
        "integer",
        "Checks needed for a PASS (default 2).",
    ),
];

const SEQ: &[(&str, &str, &str)] = &[("seq", "integer", "The entry's seq.")];

const CAMPAIGN_ID: &[(&str, &str, &str)] = &[(
    "campaign_id",
    "string",
    "The campaign (default: the only one declared).",
)];

/// Every tool. Listed under `name`; `aliases` (Forum's other spellings) are accepted too.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "submit",
        aliases: &["forum.submit"],
        target: Target::Post("/submit"),
        description: "Run a request end to end (route, plan, waves, validation, synthesis) with the server's executors; every step is witnessed in the ledger. Returns {answer, checkpoint, receipt (Forum's action receipt), git_forum_receipt (ours)}.",
        properties: SUBMIT_PROPS,
        required: &["request"],
    },
    Tool {
        name: "resume",
        aliases: &["forum.resume"],
        target: Target::Post("/resume"),
        description: "Continue an unfinished run (the latest, or run: its request seq), holding the gates it was submitted with: an undecided gate is refused. Returns what submit returns.",
        properties: &[
            ("run", "integer", "The run's request seq."),
            (
                "max_model_calls",
                "integer",
                "Stop once this many model calls have started.",
            ),
            ("max_seconds", "number", "Stop after this many seconds."),
            MAX_TOKENS,
            MAX_COST_USD,
        ],
        required: &[],
    },
    Tool {
        name: "halt",
        aliases: &["forum.halt"],
        target: Target::Post("/halt"),
        description: "Halt a running run (run: its request seq; default the latest running one), whichever process drives it: no new task, validation or rung starts, its workers are killed, and it witnesses halted {by, reason}; resume continues it. Waits up to wait_seconds (default 30) for it to stop.",
        properties: &[
            ("run", "integer", "The run's request seq."),
            ("reason", "string", "Why, recorded in the halted entry."),
            ("by", "string", "Who halts (default: http client)."),
            (
                "wait_seconds",
                "number",
                "Seconds to wait for the run to stop (0: do not wait).",
            ),
        ],
        required: &[],
    },
    Tool {
        name: "route",
        aliases: &["forum.route"],
        target: Target::Post("/route"),
        description: "Route a request to a roster lane: the decision, every lane's score and the route frame. No model.",
        properties: &[("text", "string", "The request.")],
        required: &["text"],
    },
    Tool {
        name: "plan",
        aliases: &["forum.plan"],
        target: Target::Post("/plan"),
        description: "Plan a request with the model (nothing is written), or compile a plan document {tasks: [...]} into waves without a model.",
        properties: &[
            ("request", "string", "The request to plan."),
            ("plan", "object", "A plan document to compile instead."),
        ],
        required: &[],
    },
    Tool {
        name: "status",
        aliases: &["forum.ledger.status"],
        target: Target::Get("/status"),
        description: "The ledger's entry count and checkpoint (Merkle root).",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "verify",
        aliases: &["forum.verify"],
        target: Target::Get("/verify"),
        description: "Verify the ledger: the chain, every commit, and every body (deep).",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "checkpoint",
        aliases: &["forum.checkpoint"],
        target: Target::Get("/checkpoint"),
        description: "The current checkpoint: size and Merkle root.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "checkpoint_record",
        aliases: &["forum.checkpoint.record"],
        target: Target::Post("/checkpoint"),
        description: "Verify the ledger, then record its checkpoint as a witness later verifies compare against.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "ledger_get",
        aliases: &["forum.ledger.get"],
        target: Target::GetSeq("/ledger/"),
        description: "One entry's fields (no body).",
        properties: SEQ,
        required: &["seq"],
    },
    Tool {
        name: "ledger_payload",
        aliases: &["forum.ledger.payload"],
        target: Target::GetSeq("/payload/"),
        description: "One entry's body (null when it was redacted).",
        properties: SEQ,
        required: &["seq"],
    },
    Tool {
        name: "ledger_replay",
        aliases: &["forum.ledger.replay", "replay"],
        target: Target::GetSeq("/replay/"),
        description: "Entries with seq up to and including seq, a page at a time: pass the answer's next as after for the following page.",
        properties: &[
            SEQ[0],
            (
                "limit",
                "integer",
                "Entries per page (at most 1000, the default).",
            ),
            (
                "after",
                "integer",
                "Start after this seq (the previous page's next).",
            ),
        ],
        required: &["seq"],
    },
    Tool {
        name: "ledger_why",
        aliases: &["forum.ledger.why", "why"],
        target: Target::GetSeq("/why/"),
        description: "The causal chain of an entry, root first.",
        properties: SEQ,
        required: &["seq"],
    },
    Tool {
        name: "ledger_prove",
        aliases: &["forum.ledger.prove", "prove"],
        target: Target::Post("/prove"),
        description: "A self-contained proof: that entry seq is in the checkpoint, or (consistency_from M) that the checkpoint extends its first M entries. `git forum verify-proof` checks it.",
        properties: &[
            ("seq", "integer", "The entry to prove included."),
            (
                "consistency_from",
                "integer",
                "Prove the ledger extends its first M entries.",
            ),
            (
                "size",
                "integer",
                "Prove against the first N entries (default: all).",
            ),
        ],
        required: &[],
    },
    Tool {
        name: "ledger_append",
        aliases: &["forum.ledger.append", "append"],
        target: Target::Post("/append"),
        description: "Witness one entry in the ledger.",
        properties: &[
            ("actor", "string", "Who wrote it."),
            ("kind", "string", "What it is (note, request, ...)."),
            ("payload", "object", "The body: any JSON value."),
            ("causal_parent", "integer", "The seq it follows from."),
            (
                "idempotency_key",
                "string",
                "A key of your choosing (a UUID): a retry with the same key and entry answers the first seq and writes nothing.",
            ),
        ],
        required: &["actor", "kind", "payload"],
    },
    Tool {
        name: "runs",
        aliases: &["forum.runs"],
        target: Target::Get("/runs"),
        description: "The runs in the ledger and how each stands.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "gate_list",
        aliases: &["forum.gate.list"],
        target: Target::Get("/gates"),
        description: "Gates waiting for a human decision.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "gate_approve",
        aliases: &["forum.gate.approve"],
        target: Target::Post("/gate/approve"),
        description: "Approve a gated wave (then resume the run).",
        properties: &[
            GATE_KEY[0],
            GATE_KEY[1],
            GATE_KEY[2],
            ("note", "string", "A note."),
        ],
        required: &["run_seq", "wave", "approver"],
    },
    Tool {
        name: "gate_edit",
        aliases: &["forum.gate.edit"],
        target: Target::Post("/gate/edit"),
        description: "Approve a gated wave with rewritten instructions {task_id: instruction}.",
        properties: &[
            GATE_KEY[0],
            GATE_KEY[1],
            GATE_KEY[2],
            ("edits", "object", "New instructions by task id."),
            ("note", "string", "A note."),
        ],
        required: &["run_seq", "wave", "approver", "edits"],
    },
    Tool {
        name: "gate_reject",
        aliases: &["forum.gate.reject"],
        target: Target::Post("/gate/reject"),
        description: "Reject a gated wave: the run stops before it.",
        properties: &[
            GATE_KEY[0],
            GATE_KEY[1],
            GATE_KEY[2],
            ("reason", "string", "Why."),
        ],
        required: &["run_seq", "wave", "approver"],
    },
    Tool {
        name: "forum.model.status",
        aliases: &["model_status"],
        target: Target::Get("/model"),
        description: "Whether the local model is installed and running, and its URL.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.runtime.inspect",
        aliases: &["runtime_inspect"],
        target: Target::Get("/runtime"),
        description: "Which executor runs each role, tier and seat on this server, and what would stop a run.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.prose.humanize",
        aliases: &["humanize"],
        target: Target::Post("/humanize"),
        description: "Clean up model prose without adding facts, and check it against a delivery profile.",
        properties: &[
            ("text", "string", "The text."),
            ("audience", "string", "Who it is for (default operator)."),
            (
                "profile",
                "string",
                "operator, engineer, researcher or executive.",
            ),
        ],
        required: &["text"],
    },
    Tool {
        name: "forum.prose.contract",
        aliases: &["prose_contract"],
        target: Target::Post("/prose/contract"),
        description: "The communication contract of a text's route frame (profile may override).",
        properties: &[
            ("text", "string", "The request text."),
            (
                "profile",
                "string",
                "operator, engineer, researcher or executive.",
            ),
        ],
        required: &["text"],
    },
    Tool {
        name: "forum.ledger.summary",
        aliases: &["ledger_summary", "summary"],
        target: Target::Get("/summary"),
        description: "The ledger's summary: entry and task counts, verdicts, quality checks, witnessed model calls per model, payload weight.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.ledger.capsule",
        aliases: &["ledger_capsule", "capsule"],
        target: Target::Get("/capsule"),
        description: "A short, bounded brief of the whole ledger (8 task results, texts cut at 240 characters), to hand a model as context.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.run.receipt",
        aliases: &["receipt"],
        target: Target::Get("/receipt"),
        description: "Forum's action receipt (project-telos.action-receipt/v1) of the latest run: request and answer references, the checkpoint, deep verification, model, budget and context figures.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.ledger.grade",
        aliases: &["grade"],
        target: Target::Get("/grade"),
        description: "The latest run's grade: the share of independent checks (verdicts, verifications, intent judgments by actors that produced no result) that passed, and PASS, FAIL or UNVERIFIABLE.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.run.room",
        aliases: &["run_room", "room"],
        target: Target::Get("/room"),
        description: "The latest run at a glance: request, route, plan, tasks with results and verdicts, answer, quality signals, next actions and a brief.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.context.preflight",
        aliases: &["context_preflight"],
        target: Target::Post("/context/preflight"),
        description: "How much request context a run would admit under a context budget, without a model and without writing anything.",
        properties: &[
            ("request", "string", "The request."),
            (
                "use_capsule_context",
                "boolean",
                "Use the ledger's capsule as the context.",
            ),
            (
                "max_items",
                "integer",
                "Capsule: the most task results (default 8).",
            ),
            (
                "max_text_chars",
                "integer",
                "Capsule: the longest text (default 240).",
            ),
            (
                "repo_context",
                "boolean",
                "Count the repository's map in, as a run would (true) or leave it out (false); unset: the runtime config's [context] repo, else true.",
            ),
            BUDGETS[0],
            BUDGETS[1],
            BUDGETS[2],
            BUDGETS[3],
        ],
        required: &["request"],
    },
    Tool {
        name: "bench",
        aliases: &["forum.bench"],
        target: Target::Post("/bench"),
        description: "Compare two sides (a ledger NAME, a fetched REMOTE/NAME, or run:SEQ of this ledger): both summaries, each metric's delta (B - A) and a diff of the final answers.",
        properties: &[("a", "string", "Side A."), ("b", "string", "Side B.")],
        required: &["a", "b"],
    },
    Tool {
        name: "sync_status",
        aliases: &["forum.sync.status"],
        target: Target::Get("/sync"),
        description: "Push/fetch status: each remote copy fetch adopted, its last verified checkpoint, and how the local ledger stands against it.",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "ledger_log",
        aliases: &["forum.ledger.log", "log"],
        target: Target::Get("/log"),
        description: "The newest entries first (no bodies), as a JSON list in the text content; limit caps how many (at most 1000, the default).",
        properties: &[("limit", "integer", "The most entries to list (1 to 1000).")],
        required: &[],
    },
    Tool {
        name: "forum.import_trace",
        aliases: &["import_trace"],
        target: Target::Post("/import-trace"),
        description: "Fold an agent trace into Forum's forum.flight-recorder/1 record (entries, verified, merkle_root, dangling parents); writes nothing.",
        properties: TRACE_PROPS,
        required: &[],
    },
    Tool {
        name: "forum.mine",
        aliases: &["mine"],
        target: Target::Post("/mine"),
        description: "Fold an agent trace and export it as one graded, sealed forum.gradable-trajectory/1 row; writes nothing.",
        properties: &[
            TRACE_PROPS[0],
            TRACE_PROPS[1],
            TRACE_PROPS[2],
            (
                "min_checks",
                "integer",
                "Independent checks a PASS needs (default 2).",
            ),
        ],
        required: &[],
    },
    Tool {
        name: "campaign_declare",
        aliases: &["forum.campaign.declare"],
        target: Target::Post("/campaign/declare"),
        description: "Validate a campaign (unique feature ids, known dependencies, no cycle) and declare it in the ledger. Returns {declared, seq}.",
        properties: &[(
            "campaign",
            "object",
            "The campaign: {campaign_id, title, projects: [{project_id, owner, priority, features: [{feature_id, title, agent, instruction, priority, depends_on, done_when}]}]}.",
        )],
        required: &["campaign"],
    },
    Tool {
        name: "campaign_status",
        aliases: &["forum.campaign.status"],
        target: Target::Post("/campaign/status"),
        description: "A campaign's room (forum.campaign-room/v1): each feature's status reduced from the ledger, progress, projects, next actions, checkpoint.",
        properties: CAMPAIGN_ID,
        required: &[],
    },
    Tool {
        name: "campaign_next",
        aliases: &["forum.campaign.next"],
        target: Target::Post("/campaign/next"),
        description: "A campaign's next actions: investigate, dispatch_feature, unblock, close_campaign.",
        properties: CAMPAIGN_ID,
        required: &[],
    },
    Tool {
        name: "campaign_ingest_status",
        aliases: &["forum.campaign.ingest-status", "forum.campaign.ingest"],
        target: Target::Post("/campaign/ingest-status"),
        description: "Record the status an outside system reports for one of its features (or its whole project without feature). Nothing runs. Returns {ingested, seq}.",
        properties: &[
            CAMPAIGN_ID[0],
            ("project", "string", "The project."),
            (
                "feature",
                "string",
                "The feature (omit for the whole project).",
            ),
            (
                "status",
                "string",
                "pending, in_progress, blocked, failed or done.",
            ),
            ("source", "string", "Who reports it (external:NAME)."),
            ("reason", "string", "Why."),
        ],
        required: &["project", "status", "source"],
    },
    Tool {
        name: "campaign_run",
        aliases: &["forum.campaign.run"],
        target: Target::Post("/campaign/run"),
        description: "Run a campaign's runnable forum-owned features with the server's executors, round after round until nothing is runnable; every dispatch and status is witnessed. Returns the campaign room.",
        properties: &[
            CAMPAIGN_ID[0],
            (
                "max_parallel",
                "integer",
                "Features of a round that run at the same time.",
            ),
            (
                "max_model_calls",
                "integer",
                "Stop dispatching once this many model calls have started.",
            ),
            (
                "max_seconds",
                "number",
                "Stop dispatching after this many seconds (capped by the server).",
            ),
            (
                "work",
                "boolean",
                "Each feature works in the repository: its change committed, checked, gated and integrated onto the round's run branch forum/run-SEQ.",
            ),
            (
                "checks",
                "array",
                "Shell commands every feature's change must pass (with work).",
            ),
        ],
        required: &[],
    },
    Tool {
        name: "forum.status",
        aliases: &["flagship_status"],
        target: Target::Get("/status/full"),
        description: "What this repository's git forum holds: the ledger's entries and checkpoint, every ledger with its size and tip, the last run and how it stands, the hooks, and whether the runtime can run models (executors, local models probed).",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.doctor",
        aliases: &["flagship_doctor"],
        target: Target::Get("/doctor"),
        description: "Doctor's diagnosis, without repairs: what is wrong with the ledger (by seq), whether it verifies deep, and the install (git, ref storage, hooks, runtime, local models).",
        properties: &[],
        required: &[],
    },
    Tool {
        name: "forum.run.grade",
        aliases: &["grade_run"],
        target: Target::Post("/grade"),
        description: "The grade of one run (default: the latest) or, with all, of the whole ledger: independent checks passed, and PASS, FAIL or UNVERIFIABLE.",
        properties: GRADED,
        required: &[],
    },
    Tool {
        name: "forum.export_gradable",
        aliases: &["export_gradable", "forum.run.gradable"],
        target: Target::Post("/gradable"),
        description: "Forum's gradable-trajectory row (forum.gradable-trajectory/1) of one run: prompt, trajectory, grade, what re-derives the grade, and its row_hash seal.",
        properties: GRADED,
        required: &[],
    },
    Tool {
        name: "witness",
        aliases: &["forum.witness"],
        target: Target::Post("/witness"),
        description: "Act as a witness (needs forum.witnessState and forum.witnessKey): cosign, with a C2SP tlog-cosignature/v1 line, a checkpoint whose consistency proof extends the last one accepted for its origin, or refuse with the reason and the note held.",
        properties: &[
            (
                "proof",
                "string",
                "A consistency proof from the accepted size, as `prove --consistency-from M --tlog` prints.",
            ),
            ("note", "string", "On first contact: the bare signed note."),
        ],
        required: &[],
    },
    Tool {
        name: "apply",
        aliases: &["forum.apply"],
        target: Target::Post("/apply"),
        description: "Bring a --work run's branch (forum/run-SEQ) into the branch checked out where the server runs: fast-forward when possible, else a merge commit; refused when the work tree is dirty or the run has nothing merged. Witnessed as applied.",
        properties: &[(
            "run",
            "integer",
            "The run's request seq (default: the latest run with a branch).",
        )],
        required: &[],
    },
    Tool {
        name: "discard",
        aliases: &["forum.discard"],
        target: Target::Post("/discard"),
        description: "Remove a --work run's worktrees and branch; the record and the change commits under refs/forum/work stay. Witnessed as a note.",
        properties: &[(
            "run",
            "integer",
            "The run's request seq (default: the latest run with a branch).",
        )],
        required: &[],
    },
];

/// The arguments of the flight-recorder tools: the trace (as JSON or as text) and its format.
const TRACE_PROPS: &[(&str, &str, &str)] = &[
    (
        "trace",
        "array",
        "The trace's events as a JSON list (Forum's formats).",
    ),
    (
        "text",
        "string",
        "The trace's text instead, in any format (JSONL and OTLP/JSON included).",
    ),
    (
        "format",
        "string",
        "langsmith, otel, agentops, generic (default), otlp or claude-code.",
    ),
];

/// The tool named `name` (or one of its aliases).
pub fn find_tool(name: &str) -> Option<&'static Tool> {
    TOOLS
        .iter()
        .find(|t| t.name == name || t.aliases.contains(&name))
}

impl Tool {
    /// The tool as `tools/list` shows it, with its input schema.
    pub(crate) fn spec(&self) -> J {
        let mut props = Map::new();
        for (name, ty, desc) in self.properties {
            props.insert(name.to_string(), json!({"type": ty, "description": desc}));
        }
        json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": {
                "type": "object",
                "properties": props,
                "required": self.required,
                "additionalProperties": false,
            },
        })
    }

    /// Calls the tool's route with `args`.
    // Unused once `pub` was narrowed to what outside code needs (issue 16 point 8).
    #[allow(dead_code)]
    pub(crate) fn call(&self, d: &Dispatcher, args: J) -> Reply {
        self.call_raw(d, args, None)
    }

    /// Calls the tool's route with `args`; `raw`, the arguments' JSON text when there is one,
    /// is the body a POST route reads, exactly as an HTTP body.
    // Unused once `pub` was narrowed to what outside code needs (issue 16 point 8).
    #[allow(dead_code)]
    pub(crate) fn call_raw(&self, d: &Dispatcher, args: J, raw: Option<&str>) -> Reply {
        self.call_hooked(d, args, raw, RunHooks::default())
    }

    /// [`Tool::call_raw`] with what a submit or resume gets besides its arguments: the flag
    /// that cancels it and where its progress goes.
    pub(crate) fn call_hooked(
        &self,
        d: &Dispatcher,
        args: J,
        raw: Option<&str>,
        hooks: RunHooks<'_>,
    ) -> Reply {
        match self.target {
            Target::Post(path) => match raw {
                Some(text) => d.handle_hooked("POST", path, text.as_bytes(), None, hooks),
                None if hooks.interrupt.is_some() || hooks.progress.is_some() => {
                    // No arguments: the route reads `{}`, as it does for an empty HTTP body.
                    d.handle_hooked("POST", path, b"", None, hooks)
                }
                None => d.call("POST", path, args),
            },
            Target::Get(path) => match &args {
                J::Object(m) if !m.is_empty() && self.properties.is_empty() => {
                    Reply::error(400, format!("{} takes no arguments", self.name))
                }
                // A GET tool with properties (`ledger_log`) hands them to its route, which
                // refuses the fields it does not know.
                J::Object(_) if !self.properties.is_empty() => d.call("GET", path, args),
                _ => d.call("GET", path, J::Object(Map::new())),
            },
            Target::GetSeq(prefix) => {
                let seq = args
                    .get("seq")
                    .and_then(J::as_u64)
                    .filter(|_| args.get("seq").is_some_and(|v| !v.is_f64()));
                let known: Vec<&str> = self.properties.iter().map(|(n, _, _)| *n).collect();
                let extra = args
                    .as_object()
                    .and_then(|m| m.keys().find(|k| !known.contains(&k.as_str())).cloned());
                match (seq, extra) {
                    (_, Some(k)) => Reply::error(
                        400,
                        format!("unknown field {k:?} (known fields: {})", known.join(", ")),
                    ),
                    (Some(seq), None) => {
                        // The fields besides seq go to the route (a replay page).
                        let mut rest = args.as_object().cloned().unwrap_or_default();
                        rest.remove("seq");
                        d.call("GET", &format!("{prefix}{seq}"), J::Object(rest))
                    }
                    (None, None) => Reply::error(
                        400,
                        "field \"seq\" is required and must be a non-negative integer",
                    ),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_unique_and_targets_are_routes() {
        let mut names: Vec<&str> = Vec::new();
        for t in TOOLS {
            names.push(t.name);
            names.extend(t.aliases);
            let (method, path) = match t.target {
                Target::Get(p) => ("GET", p.to_string()),
                Target::GetSeq(p) => ("GET", format!("{p}0")),
                Target::Post(p) => ("POST", p.to_string()),
            };
            assert!(
                crate::serve::dispatch::allowed_methods(&path).contains(&method),
                "{} -> {method} {path}",
                t.name
            );
            for r in t.required {
                assert!(
                    t.properties.iter().any(|(n, _, _)| n == r),
                    "{}: {r}",
                    t.name
                );
            }
        }
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate tool names");
    }
}
