//! The requests that change the record or the repository: append, gates, work runs' branches,
//! the witness, campaigns.

use serde::Deserialize;
use serde_json::{Map, Value as J};

use super::{Request, non_blank, via_value};
use crate::surface::Error;

/// An entry's body as the ledger's own parser reads it: any JSON value, numbers keeping their
/// identity (`1` is not `1.0`, integers of any width stay exact) and Python's `NaN` and
/// `Infinity` taken, so hashes match Forum's. Over serde it comes from a JSON value whose
/// numbers keep their text; the daemon reads a body it received again with the same parser.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload(pub crate::ledger::canonical::Value);

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Payload, D::Error> {
        let v = J::deserialize(d)?;
        Ok(Payload(crate::ledger::canonical::Value::from_serde(&v)))
    }
}

/// A payload that was given, `null` included (an absent one is `None`).
fn given_payload<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Payload>, D::Error> {
    Payload::deserialize(d).map(Some)
}

/// A payload given as JSON text.
fn payload_arg(text: &str) -> Result<Payload, PayloadError> {
    crate::ledger::canonical::parse(text.trim_end_matches(['\n', '\r']))
        .map(Payload)
        .map_err(PayloadError)
}

/// JSON text the ledger's parser refused.
#[derive(Debug, thiserror::Error)]
#[error("not valid JSON: {0}")]
pub struct PayloadError(crate::ledger::canonical::ParseError);

/// Witness one entry in the ledger.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Append {
    /// Who wrote the entry (an agent, a role, a person).
    #[arg(long)]
    pub actor: String,
    /// What the entry is (request, plan, result, verdict, note, ...).
    #[arg(long)]
    pub kind: String,
    /// The body: any JSON value.
    // The command line may read it from a file instead (--payload-file).
    #[arg(long, value_parser = payload_arg, required_unless_present = "payload_file", conflicts_with = "payload_file")]
    #[schemars(with = "Map<String, J>", extend("x-any" = true))]
    #[serde(default, deserialize_with = "given_payload")]
    pub payload: Option<Payload>,
    /// The seq this entry follows from (its causal parent).
    // Signed, as Forum's entries hold it: a negative one is refused as naming no entry, in
    // the same words on every transport.
    #[arg(
        long,
        visible_alias = "parent",
        value_name = "SEQ",
        allow_negative_numbers = true
    )]
    #[serde(default)]
    pub causal_parent: Option<i64>,
    /// A key of your choosing (a UUID): a retry with the same key and entry answers the first seq and writes nothing.
    // A retry over the network needs it; the command line has no retry to tell apart.
    #[arg(long, hide = true)]
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

impl Request for Append {
    fn validate(&self) -> Result<(), Error> {
        non_blank("actor", &self.actor)?;
        non_blank("kind", &self.kind)?;
        if self.payload.is_none() {
            return Err(Error::usage("field \"payload\" is required"));
        }
        Ok(())
    }
}

/// Which pending gate a decision is about, and who decides. Each part may be left out when
/// it is plain: the run of the only pending gate, the run's pending wave, and as approver the
/// repository's `user.name` (else `$USER`).
#[derive(Debug, Clone, Default, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct GateKey {
    /// The run, by its request seq (default: the run of the only pending gate).
    #[arg(long, value_name = "SEQ")]
    #[serde(default, deserialize_with = "via_value")]
    pub run: Option<u64>,
    /// The run, by its first plan entry (GET gates lists it); another way to name it.
    // The command line names a run by its request seq (--run), as `runs` lists it.
    #[arg(long, hide = true)]
    #[serde(default, deserialize_with = "via_value")]
    pub run_seq: Option<u64>,
    /// The gated wave, 0-based (default: the run's pending wave).
    #[arg(long, value_name = "N")]
    #[serde(default, deserialize_with = "via_value")]
    pub wave: Option<u64>,
    /// Who decides (default: git config user.name, else $USER).
    #[arg(long)]
    #[serde(default)]
    pub approver: Option<String>,
}

impl GateKey {
    fn validate(&self) -> Result<(), Error> {
        match &self.approver {
            Some(a) => non_blank("approver", a),
            None => Ok(()),
        }
    }
}

/// Approve a gated wave (then resume the run).
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct GateApprove {
    /// The gate.
    #[command(flatten)]
    #[serde(flatten)]
    pub key: GateKey,
    /// A note kept with the decision.
    #[arg(long)]
    #[serde(default)]
    pub note: Option<String>,
}

impl Request for GateApprove {
    fn validate(&self) -> Result<(), Error> {
        self.key.validate()
    }
}

/// Approve a gated wave with rewritten instructions {task_id: instruction}.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct GateEdit {
    /// The gate.
    #[command(flatten)]
    #[serde(flatten)]
    pub key: GateKey,
    /// New instructions by task id.
    // The command line takes them as --edit TASK_ID=INSTRUCTION, repeatable.
    #[arg(long, hide = true, default_value = "{}", value_parser = super::json_arg::<Map<String, J>>)]
    #[schemars(
        with = "Map<String, J>",
        extend("x-refusal" = "field \"edits\" must be a non-empty object {task_id: instruction}")
    )]
    pub edits: Map<String, J>,
    /// A note kept with the decision.
    #[arg(long)]
    #[serde(default)]
    pub note: Option<String>,
}

impl GateEdit {
    /// The edits as (task id, instruction) pairs.
    pub(crate) fn pairs(&self) -> Vec<(String, String)> {
        self.edits
            .iter()
            .map(|(id, text)| (id.clone(), text.as_str().unwrap_or_default().to_string()))
            .collect()
    }

    /// Adds the command line's `--edit TASK_ID=INSTRUCTION` flags to the edits.
    pub(crate) fn with_flags(mut self, flags: &[String]) -> Result<GateEdit, Error> {
        for e in flags {
            match e.split_once('=') {
                Some((id, text)) if !id.trim().is_empty() && !text.trim().is_empty() => {
                    self.edits
                        .insert(id.trim().to_string(), J::String(text.to_string()));
                }
                _ => {
                    return Err(Error::usage(format!(
                        "--edit {e:?} must be TASK_ID=INSTRUCTION"
                    )));
                }
            }
        }
        if self.edits.is_empty() {
            return Err(Error::usage(
                "gate edit needs at least one --edit TASK_ID=INSTRUCTION",
            ));
        }
        Ok(self)
    }
}

impl Request for GateEdit {
    fn validate(&self) -> Result<(), Error> {
        self.key.validate()?;
        if self.edits.is_empty() {
            return Err(Error::usage(
                "field \"edits\" must be a non-empty object {task_id: instruction}",
            ));
        }
        for (id, text) in &self.edits {
            if text.as_str().is_none_or(|s| s.trim().is_empty()) {
                return Err(Error::usage(format!(
                    "edits[{id:?}] must be a non-empty instruction string"
                )));
            }
        }
        Ok(())
    }
}

/// Reject a gated wave: the run stops before it.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
pub struct GateReject {
    /// The gate.
    #[command(flatten)]
    #[serde(flatten)]
    pub key: GateKey,
    /// Why.
    #[arg(long)]
    #[serde(default)]
    pub reason: Option<String>,
}

impl Request for GateReject {
    fn validate(&self) -> Result<(), Error> {
        self.key.validate()
    }
}

/// Bring a --work run's branch (forum/run-SEQ) into the branch checked out where the server runs: fast-forward when possible, else a merge commit; refused when the work tree is dirty or the run has nothing merged. Witnessed as applied.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Apply {
    /// The run's request seq (default: the latest run with a branch).
    #[arg(value_name = "RUN")]
    #[serde(default)]
    pub run: Option<u64>,
}

impl Request for Apply {}

/// What apply would do with a --work run against the branch checked out where the server runs, without doing it: fast-forward, a clean merge or a conflict (naming the files), and the diff that branch would receive; found without touching the work tree, the index or any ref. Returns {run, branch, run_branch, ours, theirs, outcome, conflicts, dirty, would_apply, files, added, removed, patch, truncated}.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyDryRun {
    /// The run's request seq (default: the latest run with a branch).
    #[arg(value_name = "RUN")]
    #[serde(default)]
    pub run: Option<u64>,
}

impl Request for ApplyDryRun {}

/// A --work run's change against the commit it started from, as git diff shows it: its run branch (forum/run-SEQ; for a fetched ledger REMOTE:NAME, the remote's branch), else the change commit it merged. Returns {run, base, tip, source, files, added, removed, patch, truncated}.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Diff {
    /// The run's request seq (default: the latest --work run).
    #[arg(value_name = "RUN")]
    #[serde(default)]
    pub run: Option<u64>,
    /// Only the files changed and their lines added and removed, no patch.
    #[arg(long, conflicts_with = "name_only")]
    #[serde(default)]
    pub stat: bool,
    /// Only the paths changed, no patch.
    #[arg(long)]
    #[serde(default)]
    pub name_only: bool,
    /// Limit the diff to these paths (git pathspecs; on the command line after --).
    #[arg(last = true, value_name = "PATH")]
    #[serde(default)]
    #[schemars(extend("x-refusal" = "field \"paths\" must be a list of paths (strings)"))]
    pub paths: Vec<String>,
}

impl Request for Diff {
    fn validate(&self) -> Result<(), Error> {
        if self.stat && self.name_only {
            return Err(Error::usage(
                "give stat or name_only, not both: each replaces the patch",
            ));
        }
        Ok(())
    }
}

/// Remove a --work run's worktrees and branch; the record and the change commits under refs/forum/work stay. Witnessed as a note.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Discard {
    /// The run's request seq (default: the latest run with a branch).
    #[arg(value_name = "RUN")]
    #[serde(default)]
    pub run: Option<u64>,
}

impl Request for Discard {}

/// Act as a witness (needs forum.witnessState and forum.witnessKey): cosign, with a C2SP tlog-cosignature/v1 line, a checkpoint whose consistency proof extends the last one accepted for its origin, or refuse with the reason and the note held.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Witness {
    /// A consistency proof from the accepted size, as `prove --consistency-from M --tlog` prints.
    // The command line reads the offer from a file; it takes these two too.
    #[arg(long, hide = true)]
    #[serde(default)]
    pub proof: Option<String>,
    /// On first contact: the bare signed note.
    #[arg(long, hide = true)]
    #[serde(default)]
    pub note: Option<String>,
}

impl Witness {
    /// The offer to cosign: the proof, else the note. Given both, the note must be the
    /// proof's new note.
    pub(crate) fn offer(&self) -> Result<&str, Error> {
        self.validate()?;
        let (note, proof) = (self.note.as_deref(), self.proof.as_deref());
        if let (Some(n), Some(p)) = (note, proof) {
            let inside = crate::surface::tlog::parse_consistency(p).map(|c| c.new_note == n);
            if inside != Ok(true) {
                return Err(Error::usage(
                    "\"note\" is not the new note of \"proof\"; send the proof alone",
                ));
            }
        }
        Ok(proof.or(note).unwrap_or_default())
    }
}

impl Request for Witness {
    fn validate(&self) -> Result<(), Error> {
        if self.proof.is_none() && self.note.is_none() {
            return Err(Error::usage(
                "give the offer: {\"proof\": <prove --consistency-from M --tlog>} or, on first contact, {\"note\": <signed note>}",
            ));
        }
        Ok(())
    }
}

/// Validate a campaign (unique feature ids, known dependencies, no cycle) and declare it in the ledger. Returns {declared, seq}.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CampaignDeclare {
    /// The campaign: {campaign_id, title, projects: [{project_id, owner, priority, features: [{feature_id, title, agent, instruction, priority, depends_on, done_when}]}]}.
    #[arg(long, hide = true, value_parser = super::json_arg::<Map<String, J>>)]
    #[schemars(
        with = "Map<String, J>",
        extend("x-refusal" = "field \"campaign\" must be the campaign object {campaign_id, title, projects}")
    )]
    pub campaign: Map<String, J>,
}

impl Request for CampaignDeclare {}

/// A campaign's room (forum.campaign-room/v1): each feature's status reduced from the ledger, progress, projects, next actions, checkpoint.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CampaignStatus {
    /// The campaign (default: the only one declared).
    #[arg(long, value_name = "ID")]
    #[serde(default)]
    pub campaign_id: Option<String>,
}

impl Request for CampaignStatus {}

/// A campaign's next actions: investigate, dispatch_feature, unblock, close_campaign.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CampaignNext {
    /// The campaign (default: the only one declared).
    #[arg(long, value_name = "ID")]
    #[serde(default)]
    pub campaign_id: Option<String>,
}

impl Request for CampaignNext {}

/// Record the status an outside system reports for one of its features (or its whole project without feature). Nothing runs. Returns {ingested, seq}.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CampaignIngest {
    /// The campaign (default: the only one declared).
    #[arg(long, value_name = "ID")]
    #[serde(default)]
    pub campaign_id: Option<String>,
    /// The project.
    #[arg(long, value_name = "ID")]
    pub project: String,
    /// The feature (omit it to report on the whole project).
    #[arg(long, value_name = "ID")]
    #[serde(default)]
    pub feature: Option<String>,
    /// pending, in_progress, blocked, failed or done.
    #[arg(long)]
    pub status: String,
    /// Who reports it (for an outside system's feature, by convention its owner, external:NAME).
    #[arg(long)]
    pub source: String,
    /// Why.
    #[arg(long)]
    #[serde(default)]
    pub reason: Option<String>,
}

impl Request for CampaignIngest {
    fn validate(&self) -> Result<(), Error> {
        non_blank("project", &self.project)?;
        non_blank("status", &self.status)?;
        non_blank("source", &self.source)
    }
}

/// Run a campaign's runnable forum-owned features with the server's executors, round after round until nothing is runnable; every dispatch and status is witnessed. Returns the campaign room.
#[derive(Debug, Clone, clap::Args, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CampaignRun {
    /// The campaign (default: the only one declared).
    #[arg(long, value_name = "ID")]
    #[serde(default)]
    pub campaign_id: Option<String>,
    /// How many features of a round run at the same time (default: the policy's, else 6).
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub max_parallel: Option<u64>,
    /// Stop dispatching once this many model calls have started (the features left fail with "budget exceeded").
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub max_model_calls: Option<u64>,
    /// Stop dispatching after this many seconds (a server caps it).
    #[arg(long, value_name = "S")]
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_seconds: Option<f64>,
    /// Each feature works in the repository, as submit's work does: its own worktree, its change committed, checked, gated and integrated onto the round's run branch forum/run-SEQ.
    #[arg(long)]
    #[serde(default)]
    pub work: bool,
    /// Shell commands every feature's change must pass, after [work] checks (repeatable; needs work).
    #[arg(long, visible_alias = "check", value_name = "CMD")]
    #[serde(default)]
    pub checks: Vec<String>,
    /// Send each round's features to `git forum worker` processes through the NATS JetStream server at this URL (nats://HOST:PORT) instead of running them here; this process stays the only ledger writer. Only this turns it on for a campaign; `[dispatch]` in .forum/runtime.toml gives the remote, credentials and TLS settings. Needs work.
    #[arg(long, value_name = "URL")]
    #[serde(default)]
    pub dispatch: Option<String>,
}

impl Request for CampaignRun {
    fn validate(&self) -> Result<(), Error> {
        if self.max_parallel == Some(0) {
            return Err(Error::usage("max_parallel must be at least 1"));
        }
        Ok(())
    }
}
