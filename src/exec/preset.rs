//! The coding-agent presets (`--claude`, `--codex`, `--aider`, or `claude = true`,
//! `codex = true`, `aider = true` in an executor table): the CLIs people already run, each
//! called with the flags that fit where it runs.
//!
//! In a `--work` task's worktree (the thread is [`command::in_workdir`]) the agent may edit
//! files there and only there, and leaves committing to git forum:
//!
//! * Claude Code: `claude -p [--model M] --add-dir WORKTREE --allowedTools Read Edit Write Glob
//!   Grep --permission-mode acceptEdits --output-format json PROMPT` (file tools only, no shell;
//!   its working directory is the worktree);
//! * Codex: `codex exec [--model M] --color never --skip-git-repo-check --sandbox
//!   workspace-write --cd WORKTREE PROMPT`;
//! * aider: `aider [--model M] --yes-always --no-auto-commits --no-dirty-commits --no-gitignore
//!   --no-check-update --no-analytics --no-pretty --chat-history-file /dev/null
//!   --input-history-file /dev/null --message PROMPT`; the tags cache aider leaves at the
//!   worktree's top (`.aider.tags.cache.v*`) is removed before the change is committed.
//!
//! Anywhere else (planning, judging, a run without `--work`) they only answer: Claude Code
//! without edit permissions, Codex in its `read-only` sandbox, aider in `--chat-mode ask`.
//!
//! Environment: like every worker, a preset's CLI gets the allowlisted environment
//! (`crate::exec::command::env`) plus the variables its executor names (`env = [...]` in its
//! table); without that list, its provider's key variables ([`Preset::default_env`]), so
//! `--claude` keeps working under the sandbox, which hides the login in `$HOME`.
//!
//! Each reply names the model the CLI reports: Claude Code's JSON result (`modelUsage`, with
//! its token counts), the `model:` line of Codex's header on stderr, aider's `Model:` (or
//! `Main model:`) line; else `--model`, else the program's name. What the agent changed is
//! never taken from its answer: the run commits the worktree and witnesses that commit.

use std::path::Path;
use std::time::Duration;

use super::{Call, ExecError, Executor, Reply, Usage, command};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parsed {
    /// The answer.
    pub(crate) text: String,
    /// The model the CLI reported, if it did.
    pub(crate) model: Option<String>,
    /// Token counts, if it reported them.
    pub(crate) usage: Option<Usage>,
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
            Preset::Claude => &["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"],
            Preset::Codex => &["OPENAI_API_KEY"],
            Preset::Aider => &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
        }
    }

    /// The argument list shown for it (what runs outside a worktree, before the prompt).
    pub(crate) fn base_argv(self, model: Option<&str>) -> Vec<String> {
        self.argv(model, None)
    }

    /// The argument list for one call (the prompt is appended after it): editing inside
    /// `worktree` when there is one, answering only otherwise.
    pub(crate) fn argv(self, model: Option<&str>, worktree: Option<&Path>) -> Vec<String> {
        let mut v: Vec<String> = vec![self.program().into()];
        let push = |v: &mut Vec<String>, items: &[&str]| {
            v.extend(items.iter().map(|s| s.to_string()));
        };
        match self {
            Preset::Claude => push(&mut v, &["-p"]),
            Preset::Codex => push(&mut v, &["exec"]),
            Preset::Aider => {}
        }
        if let Some(m) = model {
            push(&mut v, &["--model", m]);
        }
        let dir = worktree.map(|p| p.display().to_string());
        match (self, &dir) {
            // --add-dir and --allowedTools take several values: a one-value flag must follow
            // them, so the prompt is never read as a directory or a tool.
            (Preset::Claude, Some(d)) => push(
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
                    "--permission-mode",
                    "acceptEdits",
                    "--output-format",
                    "json",
                ],
            ),
            (Preset::Claude, None) => push(&mut v, &["--output-format", "json"]),
            (Preset::Codex, _) => {
                push(&mut v, &["--color", "never", "--skip-git-repo-check"]);
                match &dir {
                    Some(d) => push(&mut v, &["--sandbox", "workspace-write", "--cd", d]),
                    None => push(&mut v, &["--sandbox", "read-only"]),
                }
            }
            (Preset::Aider, _) => {
                push(
                    &mut v,
                    &[
                        "--yes-always",
                        "--no-auto-commits",
                        "--no-dirty-commits",
                        "--no-gitignore",
                        "--no-check-update",
                        "--no-analytics",
                        "--no-pretty",
                        "--chat-history-file",
                        "/dev/null",
                        "--input-history-file",
                        "/dev/null",
                    ],
                );
                if dir.is_none() {
                    push(&mut v, &["--chat-mode", "ask"]);
                }
                push(&mut v, &["--message"]);
            }
        }
        v
    }

    /// Reads one call's output: the answer, the model and the tokens the CLI reported.
    pub(crate) fn read(self, stdout: &str, stderr: &str) -> Result<Parsed, String> {
        match self {
            Preset::Claude => read_claude(stdout),
            Preset::Codex => Ok(Parsed {
                text: stdout.trim().to_string(),
                model: header_value(stderr, "model:"),
                usage: None,
            }),
            Preset::Aider => Ok(Parsed {
                text: aider_answer(stdout),
                model: aider_model(stdout).or_else(|| aider_model(stderr)),
                usage: None,
            }),
        }
    }
}

/// Claude Code's `--output-format json` result: `{type: "result", is_error, result, usage:
/// {input_tokens, output_tokens}, modelUsage: {MODEL: {...}}}`.
fn read_claude(stdout: &str) -> Result<Parsed, String> {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).map_err(|e| {
        format!("claude printed no JSON result (it was asked for --output-format json): {e}")
    })?;
    if v["type"] != "result" {
        return Err("claude's JSON is not a result object (no \"type\": \"result\")".into());
    }
    let text = v["result"].as_str().unwrap_or("").to_string();
    if v["is_error"] == true {
        let sub = v["subtype"].as_str().unwrap_or("error");
        return Err(format!(
            "claude reported an error ({sub}): {}",
            one_line(&text)
        ));
    }
    // The model that wrote the most; the first one named when none counts.
    let model = v["modelUsage"].as_object().and_then(|m| {
        m.iter()
            .max_by_key(|(_, u)| u["outputTokens"].as_u64().unwrap_or(0))
            .map(|(k, _)| k.clone())
    });
    let usage = v["usage"].as_object().map(|u| Usage {
        estimated: false,
        truncated: false,
        over_reservation: None,
        input_tokens: u.get("input_tokens").and_then(|x| x.as_u64()).unwrap_or(0),
        output_tokens: u.get("output_tokens").and_then(|x| x.as_u64()).unwrap_or(0),
    });
    Ok(Parsed { text, model, usage })
}

fn one_line(s: &str) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.chars().take(200).collect()
}

/// The value of the first `KEY VALUE` line (Codex's header: `model: gpt-5-codex`).
fn header_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(key))
        .map(|v| v.trim().to_string())
        .find(|v| !v.is_empty())
}

/// aider's output without the banner it prints first (version, models, repository, repo map).
fn aider_answer(stdout: &str) -> String {
    const BANNER: [&str; 6] = [
        "Aider v",
        "Main model:",
        "Model:",
        "Weak model:",
        "Git repo:",
        "Repo-map:",
    ];
    let mut lines = stdout.lines().peekable();
    while let Some(l) = lines.peek() {
        let t = l.trim();
        if t.is_empty() || BANNER.iter().any(|b| t.starts_with(b)) {
            lines.next();
        } else {
            break;
        }
    }
    lines.collect::<Vec<_>>().join("\n").trim().to_string()
}

/// aider's `Model: NAME with FORMAT edit format` (`Main model:` in newer versions).
fn aider_model(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim();
        let rest = l
            .strip_prefix("Main model:")
            .or_else(|| l.strip_prefix("Model:"))?;
        rest.split_whitespace().next().map(str::to_string)
    })
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
        }
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

impl Executor for PresetExecutor {
    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError> {
        let dir = command::workdir();
        let argv = self.preset.argv(self.model.as_deref(), dir.as_deref());
        let ran = command::run_with(&argv, &call.flattened(), self.limits, &self.env);
        if let (Preset::Aider, Some(d)) = (self.preset, &dir) {
            clean_aider_state(d);
        }
        let ran = ran?;
        let parsed = self
            .preset
            .read(&ran.stdout, &ran.stderr)
            .map_err(ExecError::Other)?;
        Ok(Reply {
            text: parsed.text,
            model: parsed.model.unwrap_or_else(|| self.model()),
            usage: parsed.usage,
            elapsed: ran.elapsed,
        })
    }

    fn model(&self) -> String {
        self.model
            .clone()
            .unwrap_or_else(|| self.preset.program().to_string())
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
        // A one-value flag comes last, so the prompt is not taken by a list flag.
        assert_eq!(c[c.len() - 2..], ["--output-format", "json"]);
        let c = Preset::Claude.argv(None, None);
        assert_eq!(c, ["claude", "-p", "--output-format", "json"]);
        let x = Preset::Codex.argv(None, Some(wt));
        assert!(x.windows(2).any(|w| w == ["--sandbox", "workspace-write"]));
        assert!(x.windows(2).any(|w| w == ["--cd", "/w/t1"]));
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
            .unwrap_err();
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
}
