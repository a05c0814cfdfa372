//! What `init` chooses, as pure functions over what it found (the probes are `probe.rs`):
//! the worker seat, the runtime file that names it, and the project's test command.
//!
//! The order in which agents are preferred, first found wins:
//!
//! 1. a coding-agent CLI on `PATH`: `claude` (Claude Code), then `codex`, then `aider`;
//! 2. a provider key in the environment: `ANTHROPIC_API_KEY` (the Anthropic Messages API),
//!    then `OPENAI_API_KEY` (OpenAI's chat completions), each driving the built-in editing
//!    worker;
//! 3. a local OpenAI-compatible server that lists a model at `GET /v1/models`: Ollama (port
//!    11434), llama.cpp's server (8080), LM Studio (1234);
//! 4. else git forum's own local model, which is for trying the record, not for editing code.
//!
//! A paid seat gets prices and a spend ceiling ([`DEFAULT_MAX_COST_USD`]) so that a run is
//! stopped before it costs more than a few dollars.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::exec::config::Preset;

/// The ceiling `init` writes for a paid seat, in dollars (`[spend] max_cost_usd`). A one-line
/// fix by a frontier agent costs cents to about a dollar; five leaves room for a retry and a
/// larger change, and stops a looping agent long before an account's own limit would.
pub(crate) const DEFAULT_MAX_COST_USD: f64 = 5.0;

/// What git forum's own local model may generate in one call (`max_tokens` of its seat). Its
/// server gives each request a 4,096-token context: a reply of up to 4,096 tokens could fill
/// it, and with one slot a thread a reply that long takes minutes. A quarter of it still holds
/// a tool call that writes a small file.
pub(crate) const LOCAL_MODEL_MAX_TOKENS: u32 = 1024;

/// The local servers `init` looks for, in order: the port each listens on by default, and the
/// name `--agent` takes for it.
pub(crate) const SERVERS: [(&str, u16); 3] =
    [("ollama", 11434), ("llama.cpp", 8080), ("lmstudio", 1234)];

/// Every name `--agent` takes.
pub(crate) const AGENT_NAMES: [&str; 10] = [
    "claude",
    "codex",
    "aider",
    "anthropic",
    "openai",
    "ollama",
    "llama.cpp",
    "lmstudio",
    "local",
    "none",
];

/// The key variables `init` looks for, in order.
pub(crate) const KEYS: [&str; 2] = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];

/// What to install for real work, said when only the local model is there.
pub(crate) const INSTALL_HINT: &str = "for real work install Claude Code (npm install -g @anthropic-ai/claude-code), Codex (npm install -g @openai/codex) or aider (pipx install aider-chat), or set ANTHROPIC_API_KEY or OPENAI_API_KEY, then run `git forum init --force`";

/// A coding-agent CLI found on `PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Program {
    /// `claude`, `codex` or `aider`.
    pub(crate) name: String,
    /// Where it was found.
    pub(crate) path: String,
}

/// A local OpenAI-compatible server that answered `GET /v1/models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Server {
    /// `ollama`, `llama.cpp` or `lmstudio` (the usual server on that port).
    pub(crate) name: String,
    pub(crate) port: u16,
    /// The models it lists, in its order.
    pub(crate) models: Vec<String>,
}

/// What `init` found on this machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Found {
    /// The coding-agent CLIs on `PATH`, in preference order.
    pub(crate) programs: Vec<Program>,
    /// The provider key variables that are set (names only, never values).
    pub(crate) keys: Vec<String>,
    /// The local servers that listed at least one model, in preference order.
    pub(crate) servers: Vec<Server>,
}

/// The worker seat `init` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Agent {
    /// A coding-agent CLI (`claude = true`, ...).
    Preset(Preset),
    /// The Anthropic Messages API with `ANTHROPIC_API_KEY`.
    Anthropic,
    /// OpenAI's chat completions with `OPENAI_API_KEY`.
    OpenAi,
    /// A local server and the model it listed first.
    Server(Server),
    /// git forum's own local model.
    Local,
}

impl Agent {
    /// Its `--agent` name.
    pub(crate) fn name(&self) -> String {
        match self {
            Agent::Preset(p) => p.name().to_string(),
            Agent::Anthropic => "anthropic".into(),
            Agent::OpenAi => "openai".into(),
            Agent::Server(s) => s.name.clone(),
            Agent::Local => "local".into(),
        }
    }

    /// Whether its calls cost money (and so get prices and a ceiling).
    pub(crate) fn paid(&self) -> bool {
        matches!(self, Agent::Preset(_) | Agent::Anthropic | Agent::OpenAi)
    }

    /// What it is, for the one line `init` prints.
    pub(crate) fn describe(&self, found: &Found) -> String {
        match self {
            Agent::Preset(p) => {
                let what = match p {
                    Preset::Claude => "Claude Code",
                    Preset::Codex => "Codex",
                    Preset::Aider => "aider",
                };
                match found.programs.iter().find(|f| f.name == p.name()) {
                    Some(f) => format!("{what} ({})", f.path),
                    None => what.to_string(),
                }
            }
            Agent::Anthropic => {
                "the Anthropic API (ANTHROPIC_API_KEY) with the built-in editing worker".into()
            }
            Agent::OpenAi => {
                "OpenAI's API (OPENAI_API_KEY) with the built-in editing worker".into()
            }
            Agent::Server(s) => format!(
                "{} at http://127.0.0.1:{}/v1, model {}, with the built-in editing worker",
                s.name,
                s.port,
                s.models.first().map_or("default", String::as_str)
            ),
            Agent::Local => "git forum's local model".into(),
        }
    }
}

/// Why `--agent NAME` names no agent to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoSuchAgent {
    /// A known agent that this machine does not have (`what`: what is missing).
    #[error("--agent {name}: {what}; found: {found} (or --agent local)")]
    NotFound {
        name: String,
        what: String,
        found: String,
    },
    /// A name git forum does not know.
    #[error("--agent {name}: not an agent git forum knows; give one of {known}", known = AGENT_NAMES.join(", "))]
    Unknown { name: String },
}

/// The agent for `asked` (`--agent NAME`), or the first that `found` holds in the order of the
/// module doc. A name that is not one of [`AGENT_NAMES`], or names something not found, is
/// refused with one line saying what was found.
pub(crate) fn choose(found: &Found, asked: Option<&str>) -> Result<Agent, NoSuchAgent> {
    let Some(asked) = asked else {
        return Ok(first_found(found));
    };
    let name = asked.trim().to_ascii_lowercase();
    let missing = |what: String| {
        Err(NoSuchAgent::NotFound {
            name: name.clone(),
            what,
            found: found_line(found),
        })
    };
    match name.as_str() {
        "local" | "none" => Ok(Agent::Local),
        "anthropic" | "openai" => {
            let key = if name == "anthropic" {
                KEYS[0]
            } else {
                KEYS[1]
            };
            if found.keys.iter().any(|k| k == key) {
                Ok(if name == "anthropic" {
                    Agent::Anthropic
                } else {
                    Agent::OpenAi
                })
            } else {
                missing(format!("{key} is not set"))
            }
        }
        n => {
            if let Some(p) = Preset::ALL.into_iter().find(|p| p.name() == n) {
                return if found.programs.iter().any(|f| f.name == n) {
                    Ok(Agent::Preset(p))
                } else {
                    missing(format!("`{n}` is not on PATH"))
                };
            }
            let wanted = if n == "llamacpp" { "llama.cpp" } else { n };
            if let Some((_, port)) = SERVERS.iter().find(|(s, _)| *s == wanted) {
                return match found.servers.iter().find(|s| s.name == wanted) {
                    Some(s) => Ok(Agent::Server(s.clone())),
                    None => missing(format!(
                        "no server lists a model at http://127.0.0.1:{port}/v1/models"
                    )),
                };
            }
            Err(NoSuchAgent::Unknown {
                name: asked.to_string(),
            })
        }
    }
}

fn first_found(found: &Found) -> Agent {
    for p in Preset::ALL {
        if found.programs.iter().any(|f| f.name == p.name()) {
            return Agent::Preset(p);
        }
    }
    if found.keys.iter().any(|k| k == KEYS[0]) {
        return Agent::Anthropic;
    }
    if found.keys.iter().any(|k| k == KEYS[1]) {
        return Agent::OpenAi;
    }
    match found.servers.first() {
        Some(s) => Agent::Server(s.clone()),
        None => Agent::Local,
    }
}

/// What was found, on one line (`claude, ANTHROPIC_API_KEY, ollama` or `nothing`).
pub(crate) fn found_line(found: &Found) -> String {
    let all: Vec<String> = found
        .programs
        .iter()
        .map(|p| p.name.clone())
        .chain(found.keys.iter().cloned())
        .chain(found.servers.iter().map(|s| s.name.clone()))
        .collect();
    if all.is_empty() {
        "nothing".into()
    } else {
        all.join(", ")
    }
}

/// A model and its list prices (dollars per million tokens in and out), for a paid seat.
struct Priced {
    model: Option<&'static str>,
    price_in: f64,
    price_out: f64,
    /// Said in the file beside the prices.
    note: &'static str,
}

/// The model and prices written for a paid agent. Claude Code and aider are pinned to the
/// model they are priced at; Codex keeps its own default model, priced as GPT-5.
fn priced(agent: &Agent, found: &Found) -> Option<Priced> {
    let sonnet = |model| Priced {
        model: Some(model),
        price_in: 3.0,
        price_out: 15.0,
        note: "Claude Sonnet's list prices",
    };
    let has = |k: &str| found.keys.iter().any(|f| f == k);
    Some(match agent {
        Agent::Preset(Preset::Claude) => sonnet("sonnet"),
        Agent::Anthropic => sonnet(crate::exec::config::DEFAULT_ANTHROPIC_MODEL),
        Agent::Preset(Preset::Codex) => Priced {
            model: None,
            price_in: 1.25,
            price_out: 10.0,
            note: "GPT-5's list prices (Codex's own default model; set model to pin another and change the prices with it)",
        },
        Agent::Preset(Preset::Aider) if has(KEYS[0]) || !has(KEYS[1]) => sonnet("sonnet"),
        Agent::Preset(Preset::Aider) | Agent::OpenAi => Priced {
            model: Some("gpt-4.1"),
            price_in: 2.0,
            price_out: 8.0,
            note: "GPT-4.1's list prices",
        },
        Agent::Server(_) | Agent::Local => return None,
    })
}

/// A TOML basic string.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `.forum/runtime.toml` for `agent`: every role on it (the worker edits, the
/// orchestrator plans and reviews), its prices and a ceiling when it is paid, and `checks` as
/// the default checks of a `--work` run. `local_url` is the base URL of git forum's model.
pub(crate) fn runtime_toml(
    agent: &Agent,
    found: &Found,
    local_url: &str,
    checks: &[String],
) -> String {
    let mut t = format!(
        "# Written by `git forum init`, which found: {}.\n\
         # Every role runs on the default executor below: the worker edits each task's worktree,\n\
         # the orchestrator plans and reviews. Another agent: `git forum init --force --agent NAME`\n\
         # (NAME: {}),\n\
         # or edit this file (git forum's docs/sandbox-and-agents.md).\n",
        found_line(found),
        AGENT_NAMES[..9].join(", ")
    );
    let price = priced(agent, found);
    t.push_str(&default_table(agent, local_url));
    if let Some(p) = &price {
        if let Some(m) = p.model {
            t.push_str(&format!("model = {}\n", quoted(m)));
        }
        t.push_str(&format!(
            "# {}, in dollars per million tokens: what the spend ceiling counts.\nprice_in_per_mtok = {:?}\nprice_out_per_mtok = {:?}\n",
            p.note, p.price_in, p.price_out
        ));
    }
    t.push_str("\n[seats]\nworker = \"default\"\n");
    if agent.paid() {
        t.push_str(&format!(
            "\n# A paid seat: a run stops once its calls cost this many dollars (--max-cost-usd N\n\
             # for one run).\n[spend]\nmax_cost_usd = {DEFAULT_MAX_COST_USD:?}\n"
        ));
    }
    if !checks.is_empty() {
        let list: Vec<String> = checks.iter().map(|c| quoted(c)).collect();
        t.push_str(&format!(
            "\n# The checks of a --work run given no --check: the project's tests.\n[work]\ndefault_checks = [{}]\n",
            list.join(", ")
        ));
    }
    t
}

/// The `[runtime.default]` table (with its comments) for `agent`.
fn default_table(agent: &Agent, local_url: &str) -> String {
    let mut t = String::new();
    match agent {
        Agent::Preset(p) => {
            t.push_str(&format!("[runtime.default]\n{} = true\n", p.name()));
        }
        Agent::Anthropic => {
            t.push_str(
                "[runtime.default]\napi = \"anthropic\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n",
            );
        }
        Agent::OpenAi => {
            t.push_str(
                "[runtime.default]\nchat_url = \"https://api.openai.com/v1/chat/completions\"\napi_key_env = \"OPENAI_API_KEY\"\n",
            );
        }
        Agent::Server(s) => {
            t.push_str(&format!(
                "[runtime.default]\nchat_url = \"http://127.0.0.1:{}/v1/chat/completions\"\nmodel = {}\nis_local = true\ntimeout_seconds = 600\n",
                s.port,
                quoted(s.models.first().map_or("default", String::as_str))
            ));
        }
        Agent::Local => {
            t.push_str(&format!(
                "# git forum's local model is for trying the record, not for editing code: {INSTALL_HINT}.\n\
                 # It is a small llama.cpp server git forum manages (`git forum model install`, then\n\
                 # `git forum model start`; `submit` starts it when it is installed).\n\
                 [runtime.default]\n\
                 chat_url = {}\n\
                 model = {}\n\
                 is_local = true\n\
                 timeout_seconds = 600\n\
                 # One reply may not fill the server's 4,096-token context.\n\
                 max_tokens = {LOCAL_MODEL_MAX_TOKENS}\n\
                 # A call reserves the prompt tokens the server counts, not one a byte.\n\
                 count_tokens = \"llama.cpp\"\n",
                quoted(&crate::model::chat_url(local_url)),
                quoted(crate::model::DEFAULT_MODEL.name),
            ));
        }
    }
    t
}

/// The ids of the models a `GET /v1/models` answer lists (`{"data": [{"id": ...}, ...]}`, as
/// OpenAI, Ollama, llama.cpp and LM Studio answer), or `None` when it is not such an answer.
pub(crate) fn models_of(body: &str) -> Option<Vec<String>> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let data = v.get("data")?.as_array()?;
    Some(
        data.iter()
            .filter_map(|m| m.get("id")?.as_str())
            .filter(|id| !id.trim().is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// A project's test command and what it was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TestCommand {
    /// The command, as `--check` takes it.
    pub(crate) command: String,
    /// The file (or folder) that said so.
    pub(crate) because: String,
}

/// What test-command detection reads of a project: the names at its top (folders with a
/// trailing `/`), the start of a few files (see [`SMALL_FILES`]), and the Python test files of
/// its `tests/` or `test/` folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProjectFiles {
    pub(crate) names: BTreeSet<String>,
    /// The first bytes of each of [`SMALL_FILES`] that exists.
    pub(crate) texts: BTreeMap<String, String>,
    /// Whether `tests/` or `test/` holds a `test_*.py` or `*_test.py` file.
    pub(crate) python_tests_dir: bool,
}

/// The files detection reads the start of.
pub(crate) const SMALL_FILES: [&str; 9] = [
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "package.json",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "requirements-dev.txt",
    "requirements.txt",
];

/// The project's test command: pytest (its configuration, a mention in `pyproject.toml`, a
/// `conftest.py`, or a `tests/` folder of `test_*.py`), else `python3 -m unittest` for
/// `test_*.py` files at the top, else `cargo test` (`Cargo.toml`), `npm test` (`package.json`
/// with a test script other than npm's placeholder), `go test ./...` (`go.mod`), `make test`
/// (a Makefile with a `test:` target), `tox` (`tox.ini`), `nox` (`noxfile.py`).
pub(crate) fn test_command(p: &ProjectFiles) -> Option<TestCommand> {
    let found = |command: &str, because: &str| {
        Some(TestCommand {
            command: command.into(),
            because: because.into(),
        })
    };
    let text = |name: &str| p.texts.get(name).map(String::as_str);
    let has = |name: &str| p.names.contains(name);
    const PYTEST: &str = "python3 -m pytest -q";
    if has("pytest.ini") {
        return found(PYTEST, "pytest.ini");
    }
    for (file, mark) in [
        ("pyproject.toml", "pytest"),
        ("setup.cfg", "[tool:pytest]"),
        ("tox.ini", "[pytest]"),
    ] {
        if text(file).is_some_and(|t| t.contains(mark)) {
            return found(PYTEST, file);
        }
    }
    if has("conftest.py") {
        return found(PYTEST, "conftest.py");
    }
    if p.python_tests_dir {
        let dir = if has("tests/") { "tests/" } else { "test/" };
        return found(PYTEST, dir);
    }
    if let Some(t) = p
        .names
        .iter()
        .find(|n| n.starts_with("test_") && n.ends_with(".py"))
    {
        return found("python3 -m unittest -q", t);
    }
    if has("Cargo.toml") {
        return found("cargo test", "Cargo.toml");
    }
    if let Some(t) = text("package.json")
        && npm_test_script(t)
    {
        return found("npm test", "package.json");
    }
    if has("go.mod") {
        return found("go test ./...", "go.mod");
    }
    for file in ["GNUmakefile", "makefile", "Makefile"] {
        if text(file).is_some_and(make_test_target) {
            return found("make test", file);
        }
    }
    if has("tox.ini") {
        return found("tox", "tox.ini");
    }
    if has("noxfile.py") {
        return found("nox", "noxfile.py");
    }
    None
}

/// Whether `package.json` has a test script that is not the one `npm init` writes.
fn npm_test_script(text: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    v.get("scripts")
        .and_then(|s| s.get("test"))
        .and_then(|t| t.as_str())
        .is_some_and(|t| !t.trim().is_empty() && !t.contains("no test specified"))
}

/// Whether a Makefile has a rule for `test` (`test:` or `test other:`, not `test := x`).
fn make_test_target(text: &str) -> bool {
    text.lines().any(|l| {
        if l.starts_with(['\t', ' ', '#']) {
            return false;
        }
        let Some((targets, rest)) = l.split_once(':') else {
            return false;
        };
        !rest.starts_with('=') && targets.split_whitespace().any(|t| t == "test")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(name: &str) -> Program {
        Program {
            name: name.into(),
            path: format!("/usr/bin/{name}"),
        }
    }

    fn server(name: &str, port: u16) -> Server {
        Server {
            name: name.into(),
            port,
            models: vec!["qwen2.5-coder:7b".into()],
        }
    }

    fn everything() -> Found {
        Found {
            programs: vec![program("claude"), program("codex"), program("aider")],
            keys: KEYS.iter().map(|k| k.to_string()).collect(),
            servers: vec![server("ollama", 11434), server("lmstudio", 1234)],
        }
    }

    #[test]
    fn the_first_found_wins_in_the_documented_order() {
        let mut f = everything();
        let mut order = Vec::new();
        loop {
            let a = choose(&f, None).unwrap();
            order.push(a.name());
            match a {
                Agent::Preset(_) => {
                    f.programs.remove(0);
                }
                Agent::Anthropic | Agent::OpenAi => {
                    f.keys.remove(0);
                }
                Agent::Server(_) => {
                    f.servers.remove(0);
                }
                Agent::Local => break,
            }
        }
        assert_eq!(
            order,
            [
                "claude",
                "codex",
                "aider",
                "anthropic",
                "openai",
                "ollama",
                "lmstudio",
                "local"
            ]
        );
        assert_eq!(choose(&Found::default(), None), Ok(Agent::Local));
    }

    #[test]
    fn an_asked_agent_must_have_been_found() {
        let f = Found {
            programs: vec![program("aider")],
            keys: vec!["OPENAI_API_KEY".into()],
            servers: vec![server("llama.cpp", 8080)],
        };
        assert_eq!(choose(&f, Some("Aider")), Ok(Agent::Preset(Preset::Aider)));
        assert_eq!(choose(&f, Some("openai")), Ok(Agent::OpenAi));
        assert_eq!(
            choose(&f, Some("llamacpp")),
            Ok(Agent::Server(server("llama.cpp", 8080)))
        );
        assert_eq!(choose(&f, Some("none")), Ok(Agent::Local));
        assert_eq!(choose(&f, Some("local")), Ok(Agent::Local));
        assert_eq!(
            choose(&f, Some("claude")).unwrap_err().to_string(),
            "--agent claude: `claude` is not on PATH; found: aider, OPENAI_API_KEY, llama.cpp (or --agent local)"
        );
        assert_eq!(
            choose(&f, Some("anthropic")).unwrap_err().to_string(),
            "--agent anthropic: ANTHROPIC_API_KEY is not set; found: aider, OPENAI_API_KEY, llama.cpp (or --agent local)"
        );
        assert_eq!(
            choose(&Found::default(), Some("ollama"))
                .unwrap_err()
                .to_string(),
            "--agent ollama: no server lists a model at http://127.0.0.1:11434/v1/models; found: nothing (or --agent local)"
        );
        assert!(
            choose(&f, Some("gpt"))
                .unwrap_err()
                .to_string()
                .starts_with(
                    "--agent gpt: not an agent git forum knows; give one of claude, codex"
                )
        );
    }

    /// Each written file loads, names the seat it chose, and carries a ceiling only when paid.
    #[test]
    fn each_runtime_file_loads_with_its_seat_prices_ceiling_and_checks() {
        use crate::exec::config::{ExecutorKind, SeatChoice, Slot, parse_runtime_config};
        use crate::exec::endpoint::Origin;
        let f = everything();
        let checks = vec!["python3 -m pytest -q".to_string()];
        let agents = [
            Agent::Preset(Preset::Claude),
            Agent::Preset(Preset::Codex),
            Agent::Preset(Preset::Aider),
            Agent::Anthropic,
            Agent::OpenAi,
            Agent::Server(server("ollama", 11434)),
            Agent::Local,
        ];
        for a in agents {
            let text = runtime_toml(&a, &f, "http://127.0.0.1:18080/v1", &checks);
            let cfg = parse_runtime_config(&text, "rt.toml", Origin::RepoConfig)
                .unwrap_or_else(|e| panic!("{}: {e}\n{text}", a.name()));
            let d = cfg.default.as_ref().unwrap();
            assert_eq!(cfg.seats.worker, SeatChoice::Slot(Slot::Default), "{text}");
            assert_eq!(cfg.work.default_checks, checks);
            assert!(cfg.work.checks.is_empty());
            assert_eq!(
                cfg.spend.max_cost_pico,
                a.paid()
                    .then(|| crate::spend::usd_to_pico(DEFAULT_MAX_COST_USD)),
                "{text}"
            );
            assert_eq!(d.metering.price.is_some(), a.paid(), "{text}");
            match (&a, &d.kind) {
                (Agent::Preset(p), ExecutorKind::Command { preset, .. }) => {
                    assert_eq!(Some(*p), *preset)
                }
                (Agent::Anthropic, ExecutorKind::Anthropic { .. }) => {}
                (Agent::OpenAi, ExecutorKind::Chat { url, .. }) => {
                    assert_eq!(url, "https://api.openai.com/v1/chat/completions")
                }
                (Agent::Server(_), ExecutorKind::Chat { url, model, .. }) => {
                    // Which server answers on a port is not known, so none is asked to count.
                    assert_eq!(d.metering.count_tokens, None);
                    assert_eq!(url, "http://127.0.0.1:11434/v1/chat/completions");
                    assert_eq!(model, "qwen2.5-coder:7b");
                }
                (Agent::Local, ExecutorKind::Chat { url, .. }) => {
                    assert_eq!(url, "http://127.0.0.1:18080/v1/chat/completions");
                    assert_eq!(d.metering.max_tokens, Some(LOCAL_MODEL_MAX_TOKENS));
                    assert_eq!(
                        d.metering.count_tokens,
                        Some(crate::exec::config::TokenCount::LlamaCpp)
                    );
                    assert!(text.contains("not for editing code"));
                }
                (a, k) => panic!("{}: {k:?}", a.name()),
            }
        }
        // No test command: no [work] table.
        let text = runtime_toml(
            &Agent::Local,
            &Found::default(),
            "http://127.0.0.1:18080/v1",
            &[],
        );
        assert!(!text.contains("[work]"), "{text}");
        assert!(text.contains("found: nothing"), "{text}");
    }

    #[test]
    fn a_models_answer_lists_its_ids() {
        assert_eq!(
            models_of(
                r#"{"object":"list","data":[{"id":"llama3:8b","object":"model"},{"id":"qwen"}]}"#
            ),
            Some(vec!["llama3:8b".to_string(), "qwen".to_string()])
        );
        assert_eq!(models_of(r#"{"data":[]}"#), Some(vec![]));
        assert_eq!(models_of("<html>not found</html>"), None);
        assert_eq!(models_of(r#"{"models":[]}"#), None);
    }

    fn project(names: &[&str], texts: &[(&str, &str)]) -> ProjectFiles {
        ProjectFiles {
            names: names.iter().map(|s| s.to_string()).collect(),
            texts: texts
                .iter()
                .map(|(n, t)| (n.to_string(), t.to_string()))
                .collect(),
            python_tests_dir: false,
        }
    }

    fn command(p: &ProjectFiles) -> Option<(String, String)> {
        test_command(p).map(|t| (t.command, t.because))
    }

    fn is(p: ProjectFiles, cmd: &str, because: &str) {
        assert_eq!(
            command(&p),
            Some((cmd.to_string(), because.to_string())),
            "{p:?}"
        );
    }

    #[test]
    fn each_ecosystem_has_its_test_command() {
        let pytest = "python3 -m pytest -q";
        is(project(&["pytest.ini"], &[]), pytest, "pytest.ini");
        is(
            project(
                &["pyproject.toml"],
                &[(
                    "pyproject.toml",
                    "[tool.pytest.ini_options]\naddopts = \"-q\"\n",
                )],
            ),
            pytest,
            "pyproject.toml",
        );
        is(
            project(
                &["setup.cfg"],
                &[("setup.cfg", "[metadata]\n[tool:pytest]\n")],
            ),
            pytest,
            "setup.cfg",
        );
        is(
            project(&["tox.ini"], &[("tox.ini", "[pytest]\n")]),
            pytest,
            "tox.ini",
        );
        is(
            project(&["conftest.py", "src/"], &[]),
            pytest,
            "conftest.py",
        );
        let mut tests_dir = project(
            &["tests/", "pyproject.toml"],
            &[("pyproject.toml", "[project]\n")],
        );
        tests_dir.python_tests_dir = true;
        is(tests_dir, pytest, "tests/");
        is(
            project(&["calc.py", "test_calc.py"], &[]),
            "python3 -m unittest -q",
            "test_calc.py",
        );
        is(
            project(&["Cargo.toml", "src/"], &[]),
            "cargo test",
            "Cargo.toml",
        );
        is(
            project(
                &["package.json"],
                &[("package.json", r#"{"scripts":{"test":"vitest run"}}"#)],
            ),
            "npm test",
            "package.json",
        );
        is(project(&["go.mod"], &[]), "go test ./...", "go.mod");
        is(
            project(
                &["Makefile"],
                &[("Makefile", "CC := cc\n\nall: build\n\ntest: all\n\t./run\n")],
            ),
            "make test",
            "Makefile",
        );
        is(
            project(&["tox.ini"], &[("tox.ini", "[tox]\nenvlist = py312\n")]),
            "tox",
            "tox.ini",
        );
        is(project(&["noxfile.py"], &[]), "nox", "noxfile.py");
    }

    #[test]
    fn what_is_not_a_test_command_is_not_taken() {
        assert_eq!(command(&ProjectFiles::default()), None);
        // npm init's placeholder, a package.json without scripts, broken JSON.
        for text in [
            r#"{"scripts":{"test":"echo \"Error: no test specified\" && exit 1"}}"#,
            r#"{"name":"x"}"#,
            "{",
        ] {
            assert_eq!(
                command(&project(&["package.json"], &[("package.json", text)])),
                None
            );
        }
        // A variable named test, a recipe line, a comment, a target that only mentions test.
        let make = "test := 1\n\techo test:\n# test:\ntests: x\nunit-test: y\n";
        assert_eq!(
            command(&project(&["Makefile"], &[("Makefile", make)])),
            None
        );
        // Two targets on one rule count.
        assert!(make_test_target("check test: build\n"));
        // A pyproject that does not mention pytest, without tests, is no Python test command.
        assert_eq!(
            command(&project(
                &["pyproject.toml"],
                &[("pyproject.toml", "[project]\nname = \"x\"\n")]
            )),
            None
        );
        // Python first when a project has both.
        is(
            project(&["Cargo.toml", "pytest.ini"], &[]),
            "python3 -m pytest -q",
            "pytest.ini",
        );
    }
}
