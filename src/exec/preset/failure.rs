//! Why an agent CLI's call did not do its work, read from its own output.

/// Why a call's output does not count as work done, in the agent CLI's own words (each
/// message is the line the task's result records).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentFailure {
    /// Claude Code printed nothing that parses as its result.
    #[error("claude printed no JSON result (it was asked for --output-format stream-json): {0}")]
    NoResult(String),
    /// Claude Code printed JSON, but not its result object.
    #[error("claude's JSON is not a result object (no \"type\": \"result\")")]
    NotAResult,
    /// The CLI said it failed; `kind` is Claude Code's subtype.
    #[error("{agent} reported an error{}: {message}", kind.as_ref().map(|k| format!(" ({k})")).unwrap_or_default())]
    Reported {
        agent: &'static str,
        kind: Option<String>,
        message: String,
    },
    /// Claude Code refused tool uses; `what` names the first three.
    #[error("claude was refused {count} tool use(s), so its work is not done: {}", what.join("; "))]
    Refused { count: usize, what: Vec<String> },
    /// An edit (or a patch) the CLI tried was not made; `detail` is what it said.
    #[error("{agent}'s {what} failed, so its change is not made: {detail}")]
    EditFailed {
        agent: &'static str,
        what: &'static str,
        detail: String,
    },
    /// aider could not apply an edit its model sent.
    #[error("aider could not make its edit: {0}")]
    AiderEdit(String),
}

#[cfg(test)]
mod tests {
    use super::AgentFailure;

    /// Each failure reads as the line the task's result has always recorded.
    #[test]
    fn each_failure_reads_as_the_recorded_line() {
        let cases = [
            (
                AgentFailure::NoResult("EOF while parsing".into()),
                "claude printed no JSON result (it was asked for --output-format stream-json): EOF while parsing",
            ),
            (
                AgentFailure::NotAResult,
                "claude's JSON is not a result object (no \"type\": \"result\")",
            ),
            (
                AgentFailure::Reported {
                    agent: "claude",
                    kind: Some("error_max_turns".into()),
                    message: "too many turns".into(),
                },
                "claude reported an error (error_max_turns): too many turns",
            ),
            (
                AgentFailure::Reported {
                    agent: "codex",
                    kind: None,
                    message: "stream disconnected".into(),
                },
                "codex reported an error: stream disconnected",
            ),
            (
                AgentFailure::Refused {
                    count: 2,
                    what: vec!["Bash rm -rf /".into(), "Edit /x".into()],
                },
                "claude was refused 2 tool use(s), so its work is not done: Bash rm -rf /; Edit /x",
            ),
            (
                AgentFailure::EditFailed {
                    agent: "codex",
                    what: "patch",
                    detail: "calc.py: no match".into(),
                },
                "codex's patch failed, so its change is not made: calc.py: no match",
            ),
            (
                AgentFailure::AiderEdit("Unable to apply".into()),
                "aider could not make its edit: Unable to apply",
            ),
        ];
        for (failure, line) in cases {
            assert_eq!(failure.to_string(), line);
        }
    }
}
