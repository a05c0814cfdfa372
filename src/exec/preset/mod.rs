//! The coding-agent presets (`--claude`, `--codex`, `--aider`, or `claude = true`,
//! `codex = true`, `aider = true` in an executor table): the CLIs people already run, each
//! called with the flags that fit where it runs.
//!
//! In a `--work` task's worktree (the thread is [`command::in_workdir`]) the agent may edit
//! files there and only there, and leaves committing to git forum. Each CLI runs
//! non-interactively, with machine-readable output, and with telemetry, update checks and
//! plugins off:
//!
//! * Claude Code: `claude -p [--model M] --add-dir WORKTREE --allowedTools Read Edit Write Glob
//!   Grep --permission-mode acceptEdits --output-format stream-json --verbose PROMPT` (file
//!   tools only, no shell; its working directory is the worktree), with
//!   `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`, `DISABLE_TELEMETRY`, `DISABLE_AUTOUPDATER` and
//!   `DISABLE_ERROR_REPORTING` set;
//! * Codex: `codex exec --json [--model M] --color never --skip-git-repo-check -c
//!   analytics.enabled=false -c feedback.enabled=false -c otel.exporter="none" -c
//!   check_for_update_on_startup=false --disable plugins --sandbox workspace-write --cd
//!   WORKTREE PROMPT` (`--sandbox danger-full-access` when git forum's sandbox confines it,
//!   rather than a second sandbox nested inside), with a writable `CODEX_HOME` of its own and,
//!   when `OPENAI_BASE_URL` names the seat's endpoint, that endpoint as a `model_providers`
//!   entry speaking the Responses API (Codex itself ignores the variable);
//! * aider: `aider [--model M] --yes-always --no-auto-commits --no-dirty-commits --no-gitignore
//!   --no-check-update --no-analytics --no-show-model-warnings --no-detect-urls
//!   --no-show-release-notes --no-pretty --chat-history-file /dev/null --input-history-file
//!   /dev/null --message PROMPT` with `LITELLM_LOCAL_MODEL_COST_MAP=True`; the tags cache aider
//!   leaves at the worktree's top (`.aider.tags.cache.v*`) is removed before the change is
//!   committed.
//!
//! Each agent's settings and login are copied into a private state folder per task
//! ([`state`]).
//!
//! Progress: while a CLI runs, its output is read line by line and each tool call it reports
//! (a read, an edit, a command, with whether it failed) goes to whoever watches the thread's
//! agents ([`command::in_live`]: the run, for a `--work` task), cleaned for a terminal
//! ([`live`]); the whole output is still read as below once it exits.
//!
//! Failure is failure: a CLI that exits non-zero, reports an error, was refused a tool use
//! (Claude Code's `permission_denials`), made an edit that failed while exiting 0 (Claude
//! Code's Edit or Write whose tool result was an error, Codex's failed `file_change`, a patch
//! its session log shows refused, a write the sandbox refused) or could not apply its edit
//! (aider) fails its task with its own words ([`edits`]).
//!
//! Anywhere else (planning, judging, a run without `--work`) they only answer: Claude Code
//! without edit permissions, Codex in its `read-only` sandbox, aider in `--chat-mode ask`.
//!
//! Environment: like every worker, a preset's CLI gets the allowlisted environment
//! (`crate::exec::command::env`) plus the variables its executor names (`env = [...]` in its
//! table); without that list, its provider's key variables ([`Preset::default_env`]), so
//! `--claude` keeps working under the sandbox, which hides the login in `$HOME`.
//!
//! Each reply names the model and the tokens the CLI reports: Claude Code's result
//! (`modelUsage`, `usage`), Codex's events (`turn.completed`'s `usage`; else the `model:` line
//! of its header on stderr), aider's `Main model:` and `Tokens:` lines; else `--model`, else
//! the program's name. What the agent changed is
//! never taken from its answer: the run commits the worktree and witnesses that commit.

use std::path::Path;
use std::time::Duration;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{Call, ExecError, Executor, Reply, Usage, command};

mod edits;
pub(crate) mod egress;
mod failure;
mod live;
mod read;
pub(crate) use failure::AgentFailure;
mod state;

/// Which coding agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Preset {
    /// Claude Code (`claude -p`).
    Claude,
    /// OpenAI Codex CLI (`codex exec`).
    Codex,
    /// aider (`aider --message`).
    Aider,
}

/// What a preset's output said.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parsed {
    /// The answer.
    pub(crate) text: String,
    /// The model the CLI reported, if it did.
    pub(crate) model: Option<String>,
    /// Token counts, if it reported them.
    pub(crate) usage: Option<Usage>,
    /// The cost in dollars it reported, if it did (Claude Code's `total_cost_usd`, aider's
    /// session cost): its own pricing, which may not be the seat's.
    pub(crate) cost_usd: Option<f64>,
}

impl Preset {
    /// Every preset, in flag order.
    pub(crate) const ALL: [Preset; 3] = [Preset::Claude, Preset::Codex, Preset::Aider];

    /// The name of its flag and config key (`claude`, `codex`, `aider`); also the program.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Preset::Claude => "claude",
            Preset::Codex => "codex",
            Preset::Aider => "aider",
        }
    }

    /// The program it runs.
    pub(crate) fn program(self) -> &'static str {
        self.name()
    }

    /// The variables its CLI is handed when its executor names none (`env` unset): the keys of
    /// the provider it calls. Claude Code reads an API key or a long-lived token made by
    /// `claude setup-token`; Codex an OpenAI key; aider either provider's key, whichever its
    /// model needs.
    pub(crate) fn default_env(self) -> &'static [&'static str] {
        match self {
            Preset::Claude => &[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
                "ANTHROPIC_BASE_URL",
                "ANTHROPIC_MODEL",
            ],
            Preset::Codex => &["OPENAI_API_KEY"],
            Preset::Aider => &[
                "ANTHROPIC_API_KEY",
                "OPENAI_API_KEY",
                "OPENAI_API_BASE",
                "ANTHROPIC_BASE_URL",
                "AIDER_MODEL",
            ],
        }
    }

    /// The variables of [`Preset::default_env`] that name a place or a model, not a
    /// credential: their values are not secrets.
    pub(crate) fn settings_env(self) -> &'static [&'static str] {
        &[
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_MODEL",
            "OPENAI_API_BASE",
            "AIDER_MODEL",
        ]
    }

    /// The argument list shown for it (what runs outside a worktree, before the prompt).
    pub(crate) fn base_argv(self, model: Option<&str>) -> Vec<String> {
        self.argv(model, None)
    }

    /// The argument list for one call (the prompt is appended after it): editing inside
    /// `worktree` when there is one, answering only otherwise. `confined`: the call runs under
    /// git forum's sandbox, so an agent's own sandbox (Codex's) would only be a second, weaker
    /// one inside it.
    pub(crate) fn argv(self, model: Option<&str>, worktree: Option<&Path>) -> Vec<String> {
        self.argv_in(model, worktree, false, &[])
    }

    /// [`Preset::argv`], saying whether the call is confined and which shell commands the
    /// agent may run itself (Claude Code takes them as `Bash(COMMAND)` rules).
    pub(crate) fn argv_in(
        self,
        model: Option<&str>,
        worktree: Option<&Path>,
        confined: bool,
        allowed: &[String],
    ) -> Vec<String> {
        let mut v: Vec<String> = vec![self.program().into()];
        let push = |v: &mut Vec<String>, items: &[&str]| {
            v.extend(items.iter().map(|s| s.to_string()));
        };
        match self {
            Preset::Claude => push(&mut v, &["-p"]),
            Preset::Codex => push(&mut v, &["exec", "--json"]),
            Preset::Aider => {}
        }
        if let Some(m) = model {
            push(&mut v, &["--model", m]);
        }
        let dir = worktree.map(|p| p.display().to_string());
        match (self, &dir) {
            // --add-dir and --allowedTools take several values: a one-value flag must follow
            // them, so the prompt is never read as a directory or a tool.
            (Preset::Claude, Some(d)) => {
                push(
                    &mut v,
                    &[
                        "--add-dir",
                        d,
                        "--allowedTools",
                        "Read",
                        "Edit",
                        "Write",
                        "Glob",
                        "Grep",
                    ],
                );
                // The task's checks and allowed commands, each exactly, and no other shell.
                v.extend(allowed.iter().map(|c| format!("Bash({c})")));
                push(
                    &mut v,
                    &[
                        "--permission-mode",
                        "acceptEdits",
                        "--output-format",
                        "stream-json",
                        "--verbose",
                    ],
                )
            }
            (Preset::Claude, None) => {
                push(&mut v, &["--output-format", "stream-json", "--verbose"])
            }
            (Preset::Codex, _) => v.extend(codex_flags(dir.as_deref(), confined)),
            (Preset::Aider, _) => v.extend(aider_flags(dir.is_some())),
        }
        v
    }

    /// Codex's provider for the seat's endpoint, when the user points it at one
    /// (`OPENAI_BASE_URL`, which Codex itself ignores): `-c` settings that make it a
    /// `model_providers` entry speaking the Responses API, with its key in `OPENAI_API_KEY`.
    pub(crate) fn provider_args(self, base_url: Option<&str>) -> Vec<String> {
        let (Preset::Codex, Some(url)) = (self, base_url) else {
            return Vec::new();
        };
        let quoted = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
        [
            format!("model_provider={}", quoted("git-forum")),
            format!(
                "model_providers.git-forum.name={}",
                quoted("git forum seat")
            ),
            format!("model_providers.git-forum.base_url={}", quoted(url)),
            format!(
                "model_providers.git-forum.env_key={}",
                quoted("OPENAI_API_KEY")
            ),
            format!("model_providers.git-forum.wire_api={}", quoted("responses")),
        ]
        .into_iter()
        .flat_map(|c| ["-c".to_string(), c])
        .collect()
    }

    /// The fixed settings its CLI runs with: telemetry, error reports and update checks off.
    pub(crate) fn quiet_env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Preset::Claude => &[
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                ("DISABLE_TELEMETRY", "1"),
                ("DISABLE_AUTOUPDATER", "1"),
                ("DISABLE_ERROR_REPORTING", "1"),
            ],
            Preset::Codex => &[],
            Preset::Aider => &[("LITELLM_LOCAL_MODEL_COST_MAP", "True")],
        }
    }

    /// Reads one call's output: the answer, the model and the tokens the CLI reported. An
    /// error the CLI reports, an edit it was refused (`editing`: the call was in a worktree),
    /// or a patch that failed although it exited 0 is an error: the task fails with the CLI's
    /// own words.
    #[cfg(test)]
    pub(crate) fn read(self, stdout: &str, stderr: &str) -> Result<Parsed, AgentFailure> {
        self.read_in(stdout, stderr, false)
    }

    /// [`Preset::read`], saying whether the call edited a worktree.
    pub(crate) fn read_in(
        self,
        stdout: &str,
        stderr: &str,
        editing: bool,
    ) -> Result<Parsed, AgentFailure> {
        match self {
            Preset::Claude => read::read_claude(stdout),
            Preset::Codex => read::read_codex(stdout, stderr),
            Preset::Aider => read::read_aider(stdout, stderr, editing),
        }
    }
}

/// Codex's flags after `exec --json [--model M]`: quiet (telemetry, feedback, update checks
/// and plugins off: with plugins on, every run dials the vendor's servers whatever the
/// provider), then its own sandbox: `workspace-write` in a worktree, nothing (`danger-full-
/// access`) when git forum's sandbox confines it, `read-only` elsewhere.
fn codex_flags(dir: Option<&str>, confined: bool) -> Vec<String> {
    let mut v: Vec<String> = ["--color", "never", "--skip-git-repo-check"]
        .map(String::from)
        .to_vec();
    for c in [
        "analytics.enabled=false",
        "feedback.enabled=false",
        "otel.exporter=\"none\"",
        "check_for_update_on_startup=false",
    ] {
        v.extend(["-c".to_string(), c.to_string()]);
    }
    v.extend(["--disable".to_string(), "plugins".to_string()]);
    let tail: Vec<&str> = match (dir, confined) {
        (Some(d), true) => vec!["--sandbox", "danger-full-access", "--cd", d],
        (Some(d), false) => vec!["--sandbox", "workspace-write", "--cd", d],
        (None, _) => vec!["--sandbox", "read-only"],
    };
    v.extend(tail.into_iter().map(String::from));
    v
}

/// aider's flags after `[--model M]`, ending with `--message` (the prompt follows): in a
/// worktree it edits; elsewhere it only answers (`--chat-mode ask`).
fn aider_flags(editing: bool) -> Vec<String> {
    let mut v: Vec<String> = [
        "--yes-always",
        "--no-auto-commits",
        "--no-dirty-commits",
        "--no-gitignore",
        // git forum commits the worktree; aider's own git writes (its config, its commits)
        // would fail under the sandbox's read-only git dir.
        "--no-git",
        "--no-fancy-input",
        "--no-check-update",
        "--no-analytics",
        "--no-show-model-warnings",
        "--no-detect-urls",
        "--no-show-release-notes",
        "--no-pretty",
        "--chat-history-file",
        "/dev/null",
        "--input-history-file",
        "/dev/null",
    ]
    .map(String::from)
    .to_vec();
    if !editing {
        v.extend(["--chat-mode".to_string(), "ask".to_string()]);
    }
    v.push("--message".into());
    v
}

/// A preset as an executor.
#[derive(Debug, Clone)]
pub(crate) struct PresetExecutor {
    preset: Preset,
    model: Option<String>,
    limits: command::Limits,
    describe: String,
    /// The variables its CLI is handed beyond the allowlist.
    env: Vec<String>,
    /// Whether a confined call reaches the network only through the egress (the proxy and
    /// the metering forwarder); off when the run keeps the whole network (`--sandbox-net`).
    egress: bool,
    /// The seat's prices and output cap (`price_in_per_mtok`, `price_out_per_mtok`,
    /// `max_tokens`): the forwarder prices each answer's usage at them.
    metering: super::Metering,
}

impl PresetExecutor {
    /// The preset with `--model` (if given), the limits of each call and the variables its CLI
    /// is handed beyond the allowlist.
    pub(crate) fn new(
        preset: Preset,
        model: Option<String>,
        timeout: Duration,
        max_stdout: usize,
        env: Vec<String>,
    ) -> PresetExecutor {
        let line = shlex::try_join(
            preset
                .base_argv(model.as_deref())
                .iter()
                .map(|s| s.as_str()),
        )
        .unwrap_or_default();
        PresetExecutor {
            preset,
            model,
            limits: command::Limits {
                timeout,
                max_stdout,
                max_stderr: 64 * 1024,
            },
            describe: format!("{}: {line}", preset.name()),
            env,
            egress: true,
            metering: super::Metering::default(),
        }
    }

    /// The same preset priced and capped as `metering` says (the seat's configuration).
    pub(crate) fn with_metering(mut self, metering: super::Metering) -> Self {
        self.metering = metering;
        self
    }
}

/// Codex's provider URL (it ignores `OPENAI_BASE_URL` itself): the metered endpoint when the
/// call is confined (the last such variable set for it), else the one the user's environment
/// names.
fn codex_base_url(set: &[(String, String)]) -> Option<String> {
    set.iter()
        .rev()
        .find(|(k, _)| k == "OPENAI_BASE_URL")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("OPENAI_BASE_URL").ok())
        .filter(|u| !u.is_empty())
}

/// Stops a call's egress and notes on the thread what it saw (for the task's record) and what
/// its forwarder counted (for the spend).
fn finish_egress(
    egress: Option<egress::Egress>,
) -> (Option<egress::Seen>, Option<command::Metered>) {
    let seen = egress.map(egress::Egress::finish);
    let metered = seen.as_ref().map(egress::Seen::metered);
    if let Some(s) = &seen {
        command::note_egress_seen(s.payload());
    }
    if let Some(m) = metered {
        command::note_metered(m);
    }
    (seen, metered)
}

/// Keeps what the CLI said it spent beside what the forwarder counted (aider's tokens are its
/// own tokenizer's, and Claude Code prices a model it does not know at a default rate).
fn note_reported(parsed: &Parsed) {
    let mut reported = serde_json::Map::new();
    if let Some(u) = &parsed.usage {
        reported.insert("prompt_tokens".into(), u.input_tokens.into());
        reported.insert("completion_tokens".into(), u.output_tokens.into());
    }
    if let Some(c) = parsed.cost_usd {
        reported.insert("cost_usd".into(), c.into());
    }
    if !reported.is_empty() {
        command::note_agent_reported(serde_json::Value::Object(reported));
    }
}

/// Removes what aider keeps for itself at the top of a worktree (its tags cache), so it is
/// not committed as part of the change.
fn clean_aider_state(worktree: &Path) {
    let Ok(entries) = std::fs::read_dir(worktree) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if name.to_string_lossy().starts_with(".aider.tags.cache.v")
            && e.file_type().is_ok_and(|t| t.is_dir())
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl PresetExecutor {
    /// The egress of one confined call (see [`egress`]), or `None` when the call is not
    /// confined or keeps the host's network; `stop` is set when its meter reaches a ceiling.
    fn start_egress(
        &self,
        confined: bool,
        stop: &Arc<AtomicBool>,
    ) -> Result<Option<egress::Egress>, ExecError> {
        if !(confined && self.egress && !command::jail_shares_net()) {
            return Ok(None);
        }
        let on_hit: Arc<dyn Fn() + Send + Sync> = {
            let stop = Arc::clone(stop);
            Arc::new(move || stop.store(true, Ordering::SeqCst))
        };
        let prices = self.metering.price.map(|p| {
            let (input, output) = p.usd_per_mtok();
            crate::egress::Prices {
                input_usd_per_mtok: input,
                output_usd_per_mtok: output,
            }
        });
        let mut ceilings = command::allowance();
        if prices.is_none() {
            // An agent with no price costs nothing by the configuration: only tokens hold it.
            ceilings.max_cost_usd = None;
        }
        // Beside the model's endpoint, the hosts the run's sandbox policy names.
        let allow = command::jail_allowed_hosts();
        egress::start(self.preset, &allow, ceilings, prices, on_hit)
            .map(Some)
            .map_err(|e| {
                ExecError::Other(format!(
                    "{}: the egress for its sandbox: {e}",
                    self.preset.name()
                ))
            })
    }
}

impl PresetExecutor {
    /// The error of a call the metering forwarder stopped at a ceiling.
    fn stopped_at(&self, hit: &crate::egress::CeilingHit) -> ExecError {
        let spent = match hit.cost_usd {
            Some(c) if hit.ceiling == "cost_usd" => {
                format!("${c:.6} spent of ${:.6}", hit.max_cost_usd.unwrap_or(0.0))
            }
            _ => format!(
                "{} tokens used of {}",
                hit.used_tokens,
                hit.max_tokens.unwrap_or(0)
            ),
        };
        ExecError::Ceiling(format!(
            "{} was stopped by the metering forwarder at its {} ceiling ({spent}; the totals pass it by at most the model turn in flight when it was reached)",
            self.preset.name(),
            hit.ceiling,
        ))
    }
}

impl PresetExecutor {
    /// Runs the CLI (`argv`, then `prompt`) with `set` added to its environment, stopped when
    /// `stop` is set, under the egress bridge that `listens` says. Each tool call it prints goes,
    /// as it prints it, to whoever watches this thread's agents (the run's progress for its
    /// task), with paths inside `dir` shown relative to it.
    fn run_cli(
        &self,
        argv: &[String],
        prompt: &str,
        set: &[(String, String)],
        stop: &Arc<AtomicBool>,
        listens: Vec<String>,
        dir: Option<&Path>,
    ) -> Result<command::Ran, command::CommandError> {
        let mut watch = command::live_sink().map(|sink| {
            let mut w = live::Watch::new(self.preset, dir.map(Path::to_path_buf));
            move |line: &str| {
                for c in w.line(line) {
                    let _ = sink.send(c);
                }
            }
        });
        let on_line = watch.as_mut().map(|f| f as command::OnLine<'_>);
        command::in_stopper(Arc::clone(stop), || {
            command::in_bridge(listens, || {
                command::run_watching(argv, prompt, self.limits, &self.env, set, on_line)
            })
        })
    }
}

impl Executor for PresetExecutor {
    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError> {
        let dir = command::workdir();
        let confined = dir.is_some() && command::jail_shows().is_some();
        let allowed = command::allowed_commands();
        let mut argv =
            self.preset
                .argv_in(self.model.as_deref(), dir.as_deref(), confined, &allowed);
        let mut set: Vec<(String, String)> = self
            .preset
            .quiet_env()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let state = dir
            .as_deref()
            .and_then(|d| state::prepare(self.preset, d).ok());
        if let Some(s) = &state {
            set.extend(s.vars());
        }
        // Nothing of an earlier call on this thread is taken for this one's.
        command::take_metered();
        command::take_agent_reported();
        // Confined, the agent reaches its model through the metering forwarder and nothing
        // else through the proxy; a ceiling the meter reaches stops its whole process tree.
        let stop = Arc::new(AtomicBool::new(false));
        let egress = self.start_egress(confined, &stop)?;
        if let Some(e) = &egress {
            set.extend(e.vars.iter().cloned());
        }
        argv.extend(self.preset.provider_args(codex_base_url(&set).as_deref()));
        let listens = egress
            .as_ref()
            .map(|e| e.listens.clone())
            .unwrap_or_default();
        let started = std::time::SystemTime::now();
        let ran = self.run_cli(
            &argv,
            &call.flattened(),
            &set,
            &stop,
            listens,
            dir.as_deref(),
        );
        if let (Preset::Aider, Some(d)) = (self.preset, &dir) {
            clean_aider_state(d);
        }
        if let Some(s) = &state {
            s.write_back();
        }
        let (seen, metered) = finish_egress(egress);
        if let Some(hit) = seen.as_ref().and_then(|s| s.hit.as_ref()) {
            return Err(self.stopped_at(hit));
        }
        let ran = ran?;
        let parsed = self
            .preset
            .read_in(&ran.stdout, &ran.stderr, dir.is_some())?;
        // Codex tells only its model of a patch that did not apply; its session log shows it.
        let vars = state.as_ref().map(state::State::vars).unwrap_or_default();
        edits::codex_session_check(&vars, started)?;
        let model = parsed.model.clone().unwrap_or_else(|| self.model());
        note_reported(&parsed);
        // The forwarder's count is the one the run goes by when there is one.
        let usage = match metered {
            Some(m) if m.seen => Some(Usage {
                input_tokens: m.input_tokens,
                output_tokens: m.output_tokens,
                estimated: false,
                truncated: false,
                over_reservation: None,
            }),
            _ => parsed.usage,
        };
        Ok(Reply {
            text: parsed.text,
            model,
            usage,
            elapsed: ran.elapsed,
        })
    }

    fn model(&self) -> String {
        self.model
            .clone()
            .unwrap_or_else(|| self.preset.program().to_string())
    }

    fn metering(&self) -> super::Metering {
        self.metering
    }

    fn metered_live(&self) -> bool {
        self.egress
            && command::workdir().is_some()
            && command::jail_shows().is_some()
            && !command::jail_shares_net()
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_edits_only_in_a_worktree() {
        let wt = Path::new("/w/t1");
        let c = Preset::Claude.argv(Some("opus"), Some(wt));
        assert_eq!(c[..4], ["claude", "-p", "--model", "opus"]);
        assert!(
            c.windows(2)
                .any(|w| w == ["--permission-mode", "acceptEdits"])
        );
        assert!(c.windows(2).any(|w| w == ["--add-dir", "/w/t1"]));
        // A one-value flag follows the list flags, so the prompt is not taken by one.
        assert_eq!(
            c[c.len() - 3..],
            ["--output-format", "stream-json", "--verbose"]
        );
        let c = Preset::Claude.argv(None, None);
        assert_eq!(
            c,
            [
                "claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose"
            ]
        );
        let x = Preset::Codex.argv(None, Some(wt));
        assert_eq!(x[..3], ["codex", "exec", "--json"]);
        assert!(x.windows(2).any(|w| w == ["--sandbox", "workspace-write"]));
        assert!(x.windows(2).any(|w| w == ["--cd", "/w/t1"]));
        assert!(x.windows(2).any(|w| w == ["--disable", "plugins"]));
        assert!(x.windows(2).any(|w| w == ["-c", "analytics.enabled=false"]));
        // Under git forum's sandbox, Codex's own is not nested inside it.
        let c = Preset::Claude.argv_in(None, Some(wt), false, &["python3 -m unittest -q".into()]);
        assert!(
            c.contains(&"Bash(python3 -m unittest -q)".to_string()),
            "{c:?}"
        );
        assert!(
            c.windows(2)
                .any(|w| w == ["Bash(python3 -m unittest -q)", "--permission-mode"])
        );
        let x = Preset::Codex.argv_in(None, Some(wt), true, &[]);
        assert!(
            x.windows(2)
                .any(|w| w == ["--sandbox", "danger-full-access"])
        );
        let p = Preset::Codex.provider_args(Some("http://127.0.0.1:9/v1"));
        assert!(
            p.contains(&"model_providers.git-forum.base_url=\"http://127.0.0.1:9/v1\"".to_string()),
            "{p:?}"
        );
        assert!(
            p.contains(&"model_providers.git-forum.wire_api=\"responses\"".to_string()),
            "{p:?}"
        );
        assert!(Preset::Claude.provider_args(Some("http://x")).is_empty());
        let x = Preset::Codex.argv(None, None);
        assert!(x.windows(2).any(|w| w == ["--sandbox", "read-only"]));
        let a = Preset::Aider.argv(Some("gpt-4o"), Some(wt));
        assert_eq!(a.last().unwrap(), "--message");
        assert!(a.contains(&"--no-auto-commits".to_string()));
        assert!(!a.contains(&"ask".to_string()));
        assert!(Preset::Aider.argv(None, None).contains(&"ask".to_string()));
    }

    #[test]
    fn outputs_name_the_model_the_cli_reports() {
        let j = r#"{"type":"result","subtype":"success","is_error":false,"result":"done",
            "usage":{"input_tokens":12,"output_tokens":3},
            "modelUsage":{"claude-haiku-x":{"outputTokens":1},"claude-sonnet-y":{"outputTokens":9}}}"#;
        let p = Preset::Claude.read(j, "").unwrap();
        assert_eq!(p.text, "done");
        assert_eq!(p.model.as_deref(), Some("claude-sonnet-y"));
        assert_eq!(p.usage.unwrap().output_tokens, 3);
        let e = Preset::Claude
            .read(
                r#"{"type":"result","is_error":true,"subtype":"error_max_turns","result":"x"}"#,
                "",
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("error_max_turns"), "{e}");
        assert!(Preset::Claude.read("plain text", "").is_err());
        let err = "OpenAI Codex v0.50.0 (research preview)\n--------\nworkdir: /w\nmodel: gpt-5-codex\nprovider: openai\n--------\n";
        let p = Preset::Codex.read("fixed it\n", err).unwrap();
        assert_eq!(
            (p.text.as_str(), p.model.as_deref()),
            ("fixed it", Some("gpt-5-codex"))
        );
        let out = "Aider v0.86.1\nMain model: anthropic/claude-x with diff edit format\n\nApplied edit to a.py\n";
        let p = Preset::Aider.read(out, "").unwrap();
        assert_eq!(p.model.as_deref(), Some("anthropic/claude-x"));
        assert_eq!(p.text, "Applied edit to a.py");
        assert_eq!(Preset::Aider.read("no header", "").unwrap().model, None);
    }

    #[test]
    fn a_refused_edit_a_failed_patch_and_a_refused_aider_edit_are_errors() {
        let stream = concat!(
            r#"{"type":"system","subtype":"init","model":"claude-x"}"#,
            "\n",
            r#"{"type":"result","subtype":"success","is_error":false,"result":"I could not edit","usage":{"input_tokens":5,"output_tokens":2},"permission_denials":[{"tool_name":"Edit","tool_use_id":"t1","tool_input":{"file_path":"/w/.git/x/calc.py"}}]}"#,
            "\n"
        );
        let e = Preset::Claude.read(stream, "").unwrap_err().to_string();
        assert!(
            e.contains("refused 1 tool use") && e.contains("Edit /w/.git/x/calc.py"),
            "{e}"
        );
        let ok = stream.replace(r#""permission_denials":[{"tool_name":"Edit","tool_use_id":"t1","tool_input":{"file_path":"/w/.git/x/calc.py"}}]"#, r#""permission_denials":[]"#);
        let p = Preset::Claude.read(&ok, "").unwrap();
        assert_eq!(p.model.as_deref(), Some("claude-x"));
        assert_eq!(p.usage.unwrap().input_tokens, 5);
        let codex = concat!(
            r#"{"type":"thread.started","thread_id":"x"}"#,
            "\n",
            r#"{"type":"item.completed","item":{"id":"i1","type":"file_change","status":"failed","changes":[{"path":"calc.py","kind":"update"}]}}"#,
            "\n",
            r#"{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":3}}"#,
            "\n"
        );
        let e = Preset::Codex.read(codex, "").unwrap_err().to_string();
        assert!(e.contains("patch failed") && e.contains("calc.py"), "{e}");
        let fine = codex.replace("\"failed\"", "\"completed\"").replace(
            r#"{"type":"turn.completed""#,
            "{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"done\"}}\n{\"type\":\"turn.completed\"",
        );
        let p = Preset::Codex.read(&fine, "").unwrap();
        assert_eq!(p.text, "done");
        assert_eq!(p.usage.unwrap().output_tokens, 3);
        let e = Preset::Codex
            .read(
                r#"{"type":"turn.failed","error":{"message":"stream disconnected"}}"#,
                "",
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("stream disconnected"), "{e}");
        let aider = "Aider v0.86.2\nMain model: openai/m with whole edit format\n\nThe LLM did not conform to the edit format.\nTokens: 2.1k sent, 36 received.\n";
        let e = Preset::Aider
            .read_in(aider, "", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not conform"), "{e}");
        let p = Preset::Aider
            .read_in(
                "Applied edit to calc.py\nTokens: 2.1k sent, 36 received. Cost: $0.01 message.\n",
                "",
                true,
            )
            .unwrap();
        let u = p.usage.unwrap();
        assert_eq!((u.input_tokens, u.output_tokens), (2100, 36));
    }
}
