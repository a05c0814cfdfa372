//! The MCP tools: one row of [`TOOLS`] per tool, naming the dispatcher route it calls, so a tool
//! answers exactly what that route answers over HTTP.

use serde_json::{Map, Value as J, json};

use crate::serve::dispatch::{Dispatcher, Reply, RunHooks};
use crate::surface::request::{
    Spec, attest, blame, fleet, lanes, ledger, prose, replay, reports, runs, spec, tlog, work,
};

/// How a tool reaches the dispatcher.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// `GET path`; the tool takes the arguments it lists (most list none), given to the route.
    Get(&'static str),
    /// `GET prefix<seq>`; the tool takes `{seq}`.
    GetSeq(&'static str),
    /// `POST path` with the arguments as the body.
    Post(&'static str),
    /// `GET prefix<path>`; the tool takes `{path}`, the rest of the route's path.
    GetPath(&'static str),
}

/// One tool: its name, the other names it answers to, its route, and what it takes.
pub struct Tool {
    /// The name `tools/list` shows.
    pub name: &'static str,
    /// Other names `tools/call` accepts (Forum's spellings).
    pub aliases: &'static [&'static str],
    /// The dispatcher route it calls.
    pub target: Target,
    /// What it takes.
    pub input: Input,
}

/// What a tool takes.
#[derive(Debug, Clone, Copy)]
pub enum Input {
    /// No arguments; the text says what the tool does, for the model choosing tools.
    None(&'static str),
    /// The typed request its arguments decode into: its doc comments describe the tool and
    /// each argument.
    Typed(fn() -> Spec),
}

/// Every tool. Listed under `name`; `aliases` (Forum's other spellings) are accepted too.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "submit",
        aliases: &["forum.submit"],
        target: Target::Post("/submit"),
        input: Input::Typed(spec::<runs::Submit>),
    },
    Tool {
        name: "resume",
        aliases: &["forum.resume"],
        target: Target::Post("/resume"),
        input: Input::Typed(spec::<runs::Resume>),
    },
    Tool {
        name: "halt",
        aliases: &["forum.halt"],
        target: Target::Post("/halt"),
        input: Input::Typed(spec::<runs::Halt>),
    },
    Tool {
        name: "route",
        aliases: &["forum.route"],
        target: Target::Post("/route"),
        input: Input::Typed(spec::<prose::Route>),
    },
    Tool {
        name: "lane_check",
        aliases: &[],
        target: Target::Post("/lane/check"),
        input: Input::Typed(spec::<lanes::LaneCheck>),
    },
    Tool {
        name: "lane_gaps",
        aliases: &[],
        target: Target::Post("/lane/gaps"),
        input: Input::Typed(spec::<lanes::LaneGaps>),
    },
    Tool {
        name: "plan",
        aliases: &["forum.plan"],
        target: Target::Post("/plan"),
        input: Input::Typed(spec::<prose::Plan>),
    },
    Tool {
        name: "status",
        aliases: &["forum.ledger.status"],
        target: Target::Get("/status"),
        input: Input::None("The ledger's entry count and checkpoint (Merkle root)."),
    },
    Tool {
        name: "verify",
        aliases: &["forum.verify"],
        target: Target::Get("/verify"),
        input: Input::None("Verify the ledger: the chain, every commit, and every body (deep)."),
    },
    Tool {
        name: "checkpoint",
        aliases: &["forum.checkpoint"],
        target: Target::Get("/checkpoint"),
        input: Input::None("The current checkpoint: size and Merkle root."),
    },
    Tool {
        name: "checkpoint_record",
        aliases: &["forum.checkpoint.record"],
        target: Target::Post("/checkpoint"),
        input: Input::Typed(spec::<ledger::CheckpointRecord>),
    },
    Tool {
        name: "ledger_get",
        aliases: &["forum.ledger.get"],
        target: Target::GetSeq("/ledger/"),
        input: Input::Typed(spec::<ledger::Entry>),
    },
    Tool {
        name: "ledger_payload",
        aliases: &["forum.ledger.payload"],
        target: Target::GetSeq("/payload/"),
        input: Input::Typed(spec::<ledger::Payload>),
    },
    Tool {
        name: "ledger_replay",
        aliases: &["forum.ledger.replay", "replay"],
        target: Target::GetSeq("/replay/"),
        input: Input::Typed(spec::<ledger::Replay>),
    },
    Tool {
        name: "ledger_why",
        aliases: &["forum.ledger.why", "why"],
        target: Target::GetSeq("/why/"),
        input: Input::Typed(spec::<ledger::Why>),
    },
    Tool {
        name: "ledger_prove",
        aliases: &["forum.ledger.prove", "prove"],
        target: Target::Post("/prove"),
        input: Input::Typed(spec::<ledger::Prove>),
    },
    Tool {
        name: "ledger_append",
        aliases: &["forum.ledger.append", "append"],
        target: Target::Post("/append"),
        input: Input::Typed(spec::<work::Append>),
    },
    Tool {
        name: "runs",
        aliases: &["forum.runs"],
        target: Target::Get("/runs"),
        input: Input::None("The runs in the ledger and how each stands."),
    },
    Tool {
        name: "gate_list",
        aliases: &["forum.gate.list"],
        target: Target::Get("/gates"),
        input: Input::None("Gates waiting for a human decision."),
    },
    Tool {
        name: "gate_approve",
        aliases: &["forum.gate.approve"],
        target: Target::Post("/gate/approve"),
        input: Input::Typed(spec::<work::GateApprove>),
    },
    Tool {
        name: "gate_edit",
        aliases: &["forum.gate.edit"],
        target: Target::Post("/gate/edit"),
        input: Input::Typed(spec::<work::GateEdit>),
    },
    Tool {
        name: "gate_reject",
        aliases: &["forum.gate.reject"],
        target: Target::Post("/gate/reject"),
        input: Input::Typed(spec::<work::GateReject>),
    },
    Tool {
        name: "forum.model.status",
        aliases: &["model_status"],
        target: Target::Get("/model"),
        input: Input::None("Whether the local model is installed and running, and its URL."),
    },
    Tool {
        name: "forum.runtime.inspect",
        aliases: &["runtime_inspect"],
        target: Target::Get("/runtime"),
        input: Input::None(
            "Which executor runs each role, tier and seat on this server, and what would stop a run.",
        ),
    },
    Tool {
        name: "forum.prose.humanize",
        aliases: &["humanize"],
        target: Target::Post("/humanize"),
        input: Input::Typed(spec::<prose::Humanize>),
    },
    Tool {
        name: "forum.prose.contract",
        aliases: &["prose_contract"],
        target: Target::Post("/prose/contract"),
        input: Input::Typed(spec::<prose::ProseContract>),
    },
    Tool {
        name: "forum.ledger.summary",
        aliases: &["ledger_summary", "summary"],
        target: Target::Get("/summary"),
        input: Input::None(
            "The ledger's summary: entry and task counts, verdicts, quality checks, witnessed model calls per model, payload weight.",
        ),
    },
    Tool {
        name: "forum.ledger.capsule",
        aliases: &["ledger_capsule", "capsule"],
        target: Target::Get("/capsule"),
        input: Input::None(
            "A short, bounded brief of the whole ledger (8 task results, texts cut at 240 characters), to hand a model as context.",
        ),
    },
    Tool {
        name: "forum.run.receipt",
        aliases: &["receipt"],
        target: Target::Get("/receipt"),
        input: Input::None(
            "Forum's action receipt (project-telos.action-receipt/v1) of the latest run: request and answer references, the checkpoint, deep verification, model, budget and context figures.",
        ),
    },
    Tool {
        name: "forum.ledger.grade",
        aliases: &["grade"],
        target: Target::Get("/grade"),
        input: Input::None(
            "The latest run's grade: the share of independent checks (verdicts, verifications, intent judgments by actors that produced no result) that passed, and PASS, FAIL or UNVERIFIABLE.",
        ),
    },
    Tool {
        name: "forum.run.room",
        aliases: &["run_room", "room"],
        target: Target::Get("/room"),
        input: Input::None(
            "The latest run at a glance: request, route, plan, tasks with results and verdicts, answer, quality signals, next actions and a brief.",
        ),
    },
    Tool {
        name: "forum.context.preflight",
        aliases: &["context_preflight"],
        target: Target::Post("/context/preflight"),
        input: Input::Typed(spec::<reports::Preflight>),
    },
    Tool {
        name: "bench",
        aliases: &["forum.bench"],
        target: Target::Post("/bench"),
        input: Input::Typed(spec::<reports::Bench>),
    },
    Tool {
        name: "sync_status",
        aliases: &["forum.sync.status"],
        target: Target::Get("/sync"),
        input: Input::None(
            "Push/fetch status: each remote copy fetch adopted, its last verified checkpoint, and how the local ledger stands against it.",
        ),
    },
    Tool {
        name: "ledger_log",
        aliases: &["forum.ledger.log", "log"],
        target: Target::Get("/log"),
        input: Input::Typed(spec::<ledger::Log>),
    },
    Tool {
        name: "forum.import_trace",
        aliases: &["import_trace"],
        target: Target::Post("/import-trace"),
        input: Input::Typed(spec::<reports::ImportTrace>),
    },
    Tool {
        name: "forum.mine",
        aliases: &["mine"],
        target: Target::Post("/mine"),
        input: Input::Typed(spec::<reports::Mine>),
    },
    Tool {
        name: "campaign_declare",
        aliases: &["forum.campaign.declare"],
        target: Target::Post("/campaign/declare"),
        input: Input::Typed(spec::<work::CampaignDeclare>),
    },
    Tool {
        name: "campaign_status",
        aliases: &["forum.campaign.status"],
        target: Target::Post("/campaign/status"),
        input: Input::Typed(spec::<work::CampaignStatus>),
    },
    Tool {
        name: "campaign_next",
        aliases: &["forum.campaign.next"],
        target: Target::Post("/campaign/next"),
        input: Input::Typed(spec::<work::CampaignNext>),
    },
    Tool {
        name: "campaign_ingest_status",
        aliases: &["forum.campaign.ingest-status", "forum.campaign.ingest"],
        target: Target::Post("/campaign/ingest-status"),
        input: Input::Typed(spec::<work::CampaignIngest>),
    },
    Tool {
        name: "campaign_run",
        aliases: &["forum.campaign.run"],
        target: Target::Post("/campaign/run"),
        input: Input::Typed(spec::<work::CampaignRun>),
    },
    Tool {
        name: "worker_start",
        aliases: &["forum.worker.start"],
        target: Target::Post("/worker"),
        input: Input::Typed(spec::<fleet::WorkerStart>),
    },
    Tool {
        name: "workers",
        aliases: &["forum.workers"],
        target: Target::Get("/workers"),
        input: Input::None(
            "The workers this server started (worker_start): each one's name, NATS server, remote, state (running, stopping, stopped) and the tasks it did.",
        ),
    },
    Tool {
        name: "worker_stop",
        aliases: &["forum.worker.stop"],
        target: Target::Post("/worker/stop"),
        input: Input::Typed(spec::<fleet::WorkerStop>),
    },
    Tool {
        name: "forum.status",
        aliases: &["flagship_status"],
        target: Target::Get("/status/full"),
        input: Input::None(
            "What this repository's git forum holds: the ledger's entries and checkpoint, every ledger with its size and tip, the last run and how it stands, the hooks, and whether the runtime can run models (executors, local models probed).",
        ),
    },
    Tool {
        name: "forum.doctor",
        aliases: &["flagship_doctor"],
        target: Target::Get("/doctor"),
        input: Input::None(
            "Doctor's diagnosis, without repairs: what is wrong with the ledger (by seq), whether it verifies deep, and the install (git, ref storage, hooks, runtime, local models).",
        ),
    },
    Tool {
        name: "forum.run.grade",
        aliases: &["grade_run"],
        target: Target::Post("/grade"),
        input: Input::Typed(spec::<reports::Grade>),
    },
    Tool {
        name: "forum.export_gradable",
        aliases: &["export_gradable", "forum.run.gradable"],
        target: Target::Post("/gradable"),
        input: Input::Typed(spec::<reports::Gradable>),
    },
    Tool {
        name: "witness",
        aliases: &["forum.witness"],
        target: Target::Post("/witness"),
        input: Input::Typed(spec::<work::Witness>),
    },
    Tool {
        name: "diff",
        aliases: &["forum.diff"],
        target: Target::Post("/diff"),
        input: Input::Typed(spec::<work::Diff>),
    },
    Tool {
        name: "attest",
        aliases: &["forum.attest"],
        target: Target::Post("/attest"),
        input: Input::Typed(spec::<attest::Attest>),
    },
    Tool {
        name: "replay_strict",
        aliases: &["forum.replay.strict"],
        target: Target::Post("/replay"),
        input: Input::Typed(spec::<replay::StrictReplay>),
    },
    Tool {
        name: "reproduce",
        aliases: &["forum.reproduce"],
        target: Target::Post("/reproduce"),
        input: Input::Typed(spec::<replay::Reproduce>),
    },
    Tool {
        name: "blame",
        aliases: &["forum.blame"],
        target: Target::Get("/blame"),
        input: Input::Typed(spec::<blame::Blame>),
    },
    Tool {
        name: "apply",
        aliases: &["forum.apply"],
        target: Target::Post("/apply"),
        input: Input::Typed(spec::<work::Apply>),
    },
    Tool {
        name: "apply_dry_run",
        aliases: &["forum.apply.dry_run"],
        target: Target::Post("/apply/dry-run"),
        input: Input::Typed(spec::<work::ApplyDryRun>),
    },
    Tool {
        name: "discard",
        aliases: &["forum.discard"],
        target: Target::Post("/discard"),
        input: Input::Typed(spec::<work::Discard>),
    },
    Tool {
        name: "tlog_prove",
        aliases: &["forum.tlog.prove"],
        target: Target::Post("/tlog/prove"),
        input: Input::Typed(spec::<tlog::TlogProve>),
    },
    Tool {
        name: "tlog_checkpoint",
        aliases: &["forum.tlog.checkpoint"],
        target: Target::Post("/tlog/checkpoint"),
        input: Input::Typed(spec::<tlog::TlogSign>),
    },
    Tool {
        name: "tlog_read",
        aliases: &["forum.tlog.read", "tlog_tile"],
        target: Target::GetPath("/tlog/"),
        input: Input::Typed(spec::<tlog::TlogRead>),
    },
    Tool {
        name: "hooks_check",
        aliases: &["forum.hooks.check"],
        target: Target::Post("/hooks/check"),
        input: Input::Typed(spec::<tlog::HooksCheck>),
    },
];

/// The tool named `name` (or one of its aliases).
pub fn find_tool(name: &str) -> Option<&'static Tool> {
    TOOLS
        .iter()
        .find(|t| t.name == name || t.aliases.contains(&name))
}

impl Tool {
    /// The tool's request as fields (none for a tool without arguments).
    pub fn spec(&self) -> Spec {
        match self.input {
            Input::None(about) => Spec {
                description: about.to_string(),
                fields: Vec::new(),
            },
            Input::Typed(spec) => spec(),
        }
    }

    /// The tool as `tools/list` shows it, with its input schema.
    pub(crate) fn listing(&self) -> J {
        let spec = self.spec();
        json!({
            "name": self.name,
            "description": spec.description,
            "inputSchema": spec.input_schema(),
        })
    }

    /// Calls the tool's route with `args`; `raw`, the arguments' JSON text when there is one,
    /// is the body a POST route reads, exactly as an HTTP body. `hooks`: what a submit or resume
    /// gets besides its arguments, the flag that cancels it and where its progress goes.
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
                J::Object(m) if !m.is_empty() && matches!(self.input, Input::None(_)) => {
                    Reply::error(400, format!("{} takes no arguments", self.name))
                }
                // A GET tool with properties (`ledger_log`) hands them to its route, which
                // refuses the fields it does not know.
                J::Object(_) if matches!(self.input, Input::Typed(_)) => d.call("GET", path, args),
                _ => d.call("GET", path, J::Object(Map::new())),
            },
            Target::GetPath(prefix) => {
                match crate::surface::request::check_body(&self.spec(), &args) {
                    Ok(fields) => {
                        let path = fields.get("path").and_then(J::as_str).unwrap_or("");
                        d.call("GET", &format!("{prefix}{path}"), J::Object(Map::new()))
                    }
                    Err(e) => e.into(),
                }
            }
            Target::GetSeq(prefix) => {
                let seq = args
                    .get("seq")
                    .and_then(J::as_u64)
                    .filter(|_| args.get("seq").is_some_and(|v| !v.is_f64()));
                let spec = self.spec();
                let known = spec.names();
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
                Target::GetPath(p) => ("GET", format!("{p}checkpoint")),
            };
            assert!(
                crate::serve::dispatch::allowed_methods(&path).contains(&method),
                "{} -> {method} {path}",
                t.name
            );
            let spec = t.spec();
            assert!(!spec.description.is_empty(), "{}", t.name);
            for f in &spec.fields {
                assert!(!f.description.is_empty(), "{}: {}", t.name, f.name);
            }
        }
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate tool names");
    }
}
