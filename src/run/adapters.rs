//! The command-backed seams: the context provider behind `--context-cmd`, the verifier
//! behind `--verify-cmd` (programs run without a shell, in their own process group), and the
//! ledger-rendered context behind `--use-capsule-context`.

use std::time::Duration;

use crate::exec::{ExecError, command};
use crate::ledger::Storage;

use super::{ContextFailure, ContextProvider, Verification, Verifier, VerifierConclusion};

/// Bytes of a context command's stdout kept (the rest is drained and dropped).
pub const MAX_CONTEXT_COMMAND_BYTES: usize = 4 * 1024 * 1024;

/// Bytes of a verifier command's stdout kept.
pub const MAX_VERIFIER_COMMAND_BYTES: usize = 64 * 1024;

/// Code points of a verifier's detail kept in the ledger.
pub const MAX_VERIFICATION_DETAIL_CHARS: usize = 1000;

/// The default deadline of a context or verifier command.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The context provider behind `--context-cmd`: a program run without a shell, in its own
/// process group, killed with the group at its deadline.
///
/// * request context: `CMD... request REQUEST`
/// * per-task context: `CMD... task TASK_ID INSTRUCTION`
///
/// What it prints on stdout (UTF-8, surrounding whitespace trimmed) is the context; nothing
/// means no context. A non-zero exit, a timeout, a program that cannot start or output that
/// is not UTF-8 is a [`ContextFailure`].
#[derive(Debug, Clone)]
pub struct CommandContext {
    argv: Vec<String>,
    timeout: Duration,
}

impl CommandContext {
    /// A provider running `argv` (program first), each run bounded by `timeout`.
    pub fn new(argv: Vec<String>, timeout: Duration) -> CommandContext {
        CommandContext { argv, timeout }
    }

    fn run(&self, extra: &[&str], last: &str) -> Result<String, ContextFailure> {
        let mut argv = self.argv.clone();
        argv.extend(extra.iter().map(|s| s.to_string()));
        let limits = command::Limits {
            timeout: self.timeout,
            max_stdout: MAX_CONTEXT_COMMAND_BYTES,
            ..command::Limits::default()
        };
        match command::run(&argv, last, limits) {
            Ok(ran) => Ok(ran.stdout.trim().to_string()),
            Err(e) => {
                let message = e.to_string();
                Err(ContextFailure {
                    code: ExecError::Command(e).code().to_string(),
                    message,
                })
            }
        }
    }
}

impl ContextProvider for CommandContext {
    fn request_context(&self, request: &str, _: &dyn Storage) -> Result<String, ContextFailure> {
        self.run(&["request"], request)
    }

    fn task_context(
        &self,
        task_id: &str,
        instruction: &str,
    ) -> Option<Result<String, ContextFailure>> {
        Some(self.run(&["task", task_id], instruction))
    }

    fn describe(&self) -> String {
        format!("command: {}", command_line(&self.argv))
    }
}

/// A renderer's error is its own type; only its message is witnessed.
type RenderError = Box<dyn std::error::Error + Send + Sync>;

type Render = dyn Fn(&dyn Storage) -> Result<String, RenderError> + Send + Sync;

/// Request context rendered from the run's own ledger (for `--use-capsule-context`: the
/// ledger's capsule text). It has no per-task context.
pub struct LedgerContext {
    name: String,
    render: Box<Render>,
}

impl LedgerContext {
    /// A provider named `name` whose request context is `render(ledger)`; an `Err` is
    /// witnessed as a failure with code `render`.
    pub(crate) fn new(
        name: &str,
        render: impl Fn(&dyn Storage) -> Result<String, RenderError> + Send + Sync + 'static,
    ) -> LedgerContext {
        LedgerContext {
            name: name.to_string(),
            render: Box::new(render),
        }
    }
}

impl ContextProvider for LedgerContext {
    fn request_context(&self, _: &str, ledger: &dyn Storage) -> Result<String, ContextFailure> {
        (self.render)(ledger).map_err(|e| ContextFailure {
            code: "render".into(),
            message: e.to_string(),
        })
    }

    fn task_context(&self, _: &str, _: &str) -> Option<Result<String, ContextFailure>> {
        None
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}

/// The verifier behind `--verify-cmd`: a program run without a shell, in its own process
/// group, as `CMD... REQUEST ANSWER` (the answer is the last argument, the request the one
/// before it). Exit 0 is verified, exit 1 refuted; any other exit, a signal, a timeout, a
/// program that cannot start or stdout that is not UTF-8 is could-not-decide. The detail is
/// what it printed: stdout on exit 0, stderr on exit 1 (cut to
/// [`MAX_VERIFICATION_DETAIL_CHARS`]).
#[derive(Debug, Clone)]
pub struct CommandVerifier {
    argv: Vec<String>,
    timeout: Duration,
}

impl CommandVerifier {
    /// A verifier running `argv` (program first), bounded by `timeout`.
    pub fn new(argv: Vec<String>, timeout: Duration) -> CommandVerifier {
        CommandVerifier { argv, timeout }
    }
}

impl Verifier for CommandVerifier {
    fn verify(&self, request: &str, answer: &str) -> Verification {
        let mut argv = self.argv.clone();
        argv.push(request.to_string());
        let limits = command::Limits {
            timeout: self.timeout,
            max_stdout: MAX_VERIFIER_COMMAND_BYTES,
            ..command::Limits::default()
        };
        let (outcome, detail) = match command::run(&argv, answer, limits) {
            Ok(ran) => {
                let said = ran.stdout.trim();
                (
                    VerifierConclusion::Verified,
                    if said.is_empty() {
                        "the verifier exited 0".to_string()
                    } else {
                        said.to_string()
                    },
                )
            }
            Err(command::CommandError::Failed { status, stderr, .. })
                if status.code() == Some(1) =>
            {
                let said = stderr.trim();
                (
                    VerifierConclusion::Refuted,
                    if said.is_empty() {
                        "the verifier exited 1".to_string()
                    } else {
                        said.to_string()
                    },
                )
            }
            Err(e) => (
                VerifierConclusion::Undecided,
                format!("could not decide: {e}"),
            ),
        };
        Verification {
            outcome,
            detail: cut_chars(&detail, MAX_VERIFICATION_DETAIL_CHARS),
            source: self.source(),
        }
    }

    fn source(&self) -> String {
        format!("command: {}", command_line(&self.argv))
    }
}

fn command_line(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}

/// The first `n` code points of `text`, with `…` when it was longer.
fn cut_chars(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
