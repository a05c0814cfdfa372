//! Unit tests of the runtime config: parsing and its located errors, the flags' precedence,
//! resolution and the issues check.

use super::*;
use crate::roster::Roster;

struct Env {
    vars: Vec<&'static str>,
    programs: Vec<&'static str>,
}
impl Facts for Env {
    fn var_is_set(&self, name: &str) -> bool {
        self.vars.contains(&name)
    }
    fn program_found(&self, program: &str) -> bool {
        self.programs.contains(&program)
    }
}
fn env() -> Env {
    Env {
        vars: vec!["OPENAI_API_KEY"],
        programs: vec!["ollama", "claude"],
    }
}

fn parse(text: &str) -> Result<RuntimeConfig, ConfigError> {
    parse_runtime_config(text, ".forum/runtime.toml", Origin::RepoConfig)
}
fn err(text: &str) -> String {
    parse(text).expect_err(text).to_string()
}

const FULL: &str = r#"
[runtime.default]
chat_url = "http://127.0.0.1:8080/v1/chat/completions"
model = "qwen"
is_local = true

[runtime.tiers.cheap]
cmd = "ollama run 'llama3 8b'"
timeout_seconds = 30

[runtime.tiers.capable]
chat_url = "https://api.openai.com/v1/chat/completions"
api_key_env = "OPENAI_API_KEY"

[runtime.tiers.frontier]
api = "anthropic"

[seats]
worker = "capable"
orchestrator = { claude = true, model = "opus" }
"#;

#[test]
fn parses_every_kind_and_the_seats() {
    let c = parse(FULL).unwrap();
    let d = c.default.as_ref().unwrap();
    assert!(d.is_local && d.key_env().is_none() && d.origin == Origin::RepoConfig);
    assert_eq!(d.model(), "qwen");
    let cheap = &c.tiers[&Tier::Cheap];
    assert_eq!(
        cheap.kind,
        ExecutorKind::Command {
            argv: vec!["ollama".into(), "run".into(), "llama3 8b".into()],
            preset: None
        }
    );
    assert_eq!(cheap.timeout_seconds, 30);
    assert_eq!(c.tiers[&Tier::Capable].model(), "capable");
    assert_eq!(c.tiers[&Tier::Capable].key_env(), Some("OPENAI_API_KEY"));
    let f = &c.tiers[&Tier::Frontier];
    assert_eq!(f.model(), DEFAULT_ANTHROPIC_MODEL);
    assert_eq!(f.key_env(), Some(ANTHROPIC_KEY_ENV));
    assert_eq!(c.seats.worker, SeatChoice::Slot(Slot::Tier(Tier::Capable)));
    let SeatChoice::Inline(o) = &c.seats.orchestrator else {
        panic!()
    };
    assert_eq!(o.program(), Some("claude"));
    assert_eq!(o.model(), "opus");
    assert_eq!(o.timeout_seconds, DEFAULT_CLAUDE_TIMEOUT);
    assert!(c.warnings.is_empty());
    // Forum's shape loads: default chat with the default model.
    let f = parse("[runtime.default]\nchat_url = \"https://x.example/v1\"\n").unwrap();
    assert_eq!(f.default.unwrap().model(), "default");
    assert_eq!(parse("").unwrap(), RuntimeConfig::default());
}

#[test]
fn errors_name_file_table_key_line_and_column() {
    let e = err("[runtime.tiers.cheap]\nchat_ur = \"x\"\n");
    assert!(
        e.starts_with(".forum/runtime.toml:2:1: [runtime.tiers.cheap] chat_ur: unknown field"),
        "{e}"
    );
    assert!(e.contains("line 2, column 1"), "{e}");
    let e = err("[runtime.default]\ncmd = 5\n");
    assert!(
        e.starts_with(".forum/runtime.toml:2:7: [runtime.default] cmd: invalid type: integer"),
        "{e}"
    );
    let e = err("[runtime.tiers.medium]\ncmd = \"x\"\n");
    assert!(
        e.contains("[runtime.tiers] medium: unknown field `medium`"),
        "{e}"
    );
    let e = err("[runtime]\ndefualt = {}\n");
    assert!(e.contains("[runtime] defualt: unknown field"), "{e}");
    let e = err("[runtim.default]\n");
    assert!(e.contains("top-level key runtim: unknown field"), "{e}");
    let e = err("[seats]\nworker = { cmd = \"x\", modle = \"y\" }\n");
    assert!(
        e.contains("[seats.worker] modle: unknown field") && e.contains(":2:"),
        "{e}"
    );
    let e = err("[seats]\nworker = 3\n");
    assert!(e.contains("[seats] worker: invalid type"), "{e}");
    let e = err("[runtime.default]\nis_local = \"yes\"\n");
    assert!(
        e.contains("[runtime.default] is_local: invalid type: string"),
        "{e}"
    );
    let e = err("[runtime.default\n");
    assert!(e.contains(":1:"), "{e}");
}

#[test]
fn semantic_errors_are_located_too() {
    for (text, want) in [
        (
            "[runtime.default]\nchat_url = \"http://a/\"\ncmd = \"x\"\n",
            ":3:7: [runtime.default] cmd: one executor per table",
        ),
        (
            "[runtime.default]\nmodel = \"m\"\n",
            ":1:10: [runtime.default]: names no executor",
        ),
        (
            "[runtime.default]\napi = \"openai\"\n",
            ":2:7: [runtime.default] api: unknown api kind \"openai\"",
        ),
        (
            "[seats]\nworker = \"medium\"\n",
            ":2:10: [seats] worker: unknown executor \"medium\"",
        ),
        (
            "[runtime.default]\ncmd = \"'unclosed\"\n",
            "[runtime.default] cmd: cannot split",
        ),
        (
            "[runtime.default]\ncmd = \"   \"\n",
            "[runtime.default] cmd: the command is empty",
        ),
        (
            "[runtime.default]\ncmd = \"x\"\nmodel = \"m\"\n",
            ":3:9: [runtime.default] model: model does not apply to a cmd executor",
        ),
        (
            "[runtime.default]\ncmd = \"x\"\nis_local = true\n",
            "is_local does not apply",
        ),
        (
            "[runtime.default]\napi = \"anthropic\"\nallow_private = true\n",
            "allow_private does not apply",
        ),
        (
            "[runtime.default]\napi = \"anthropic\"\nis_local = true\napi_key_env = \"ANTHROPIC_API_KEY\"\n",
            "is_local = true sends no key",
        ),
        (
            "[runtime.default]\nchat_url = \"http://127.0.0.1/\"\nis_local = true\napi_key_env = \"OPENAI_API_KEY\"\n",
            ":4:15: [runtime.default] api_key_env: is_local = true sends no key",
        ),
        (
            "[runtime.default]\nchat_url = \"https://a/\"\napi_key_env = \"GITHUB_TOKEN\"\n",
            "api_key_env GITHUB_TOKEN is refused",
        ),
        (
            "[runtime.default]\nchat_url = \"https://a/\"\napi_key_env = \"MY-KEY\"\n",
            "not an environment variable name",
        ),
        (
            "[runtime.default]\ncmd = \"x\"\ntimeout_seconds = 0\n",
            "timeout_seconds: must be between 1",
        ),
        (
            "[runtime.default]\ncmd = \"x\"\nmax_response_bytes = 10\n",
            "max_response_bytes: must be between",
        ),
        (
            "[runtime.default]\nchat_url = \"\"\n",
            "chat_url: must not be empty",
        ),
    ] {
        let e = err(text);
        assert!(e.contains(want), "{text:?}\n got {e}\nwant {want}");
    }
    let c =
        parse("[runtime.default]\nchat_url = \"https://a/\"\napi_key_env = \"LLM_KEY\"\n").unwrap();
    assert_eq!(c.warnings.len(), 1);
    assert!(c.warnings[0].contains("LLM_KEY is not a known provider"));
}

fn tier_flags(tier: Tier, tf: TierFlags) -> Flags {
    Flags {
        tiers: BTreeMap::from([(tier, tf)]),
        ..Flags::default()
    }
}

#[test]
fn flags_follow_forums_precedence() {
    let cfg = || Some(parse(FULL).unwrap());
    // --chat-url > --api > --cmd > config default.
    let f = Flags {
        chat_url: Some("http://127.0.0.1:9/v1".into()),
        api: Some("anthropic".into()),
        cmd: Some("ollama run x".into()),
        ..Flags::default()
    };
    let rt = merge(cfg(), &f).unwrap();
    let d = rt.default.as_ref().unwrap();
    assert_eq!(d.origin, Origin::CommandLine);
    assert_eq!(d.model(), "default");
    assert_eq!(rt.warnings.len(), 2);
    let f = Flags {
        api: Some("anthropic".into()),
        cmd: Some("ollama run x".into()),
        model: Some("claude-opus-4".into()),
        ..Flags::default()
    };
    let d = merge(cfg(), &f).unwrap().default.unwrap();
    assert_eq!(d.kind.name(), "anthropic");
    assert_eq!(d.model(), "claude-opus-4");
    let f = Flags {
        cmd: Some("ollama run x".into()),
        ..Flags::default()
    };
    assert_eq!(
        merge(cfg(), &f).unwrap().default.unwrap().program(),
        Some("ollama")
    );
    let f = Flags {
        claude: true,
        ..Flags::default()
    };
    assert_eq!(
        merge(cfg(), &f).unwrap().default.unwrap().kind.name(),
        "claude"
    );
    // No flag: the file's default, still marked as the repository's.
    let rt = merge(cfg(), &Flags::default()).unwrap();
    assert_eq!(rt.default.unwrap().origin, Origin::RepoConfig);
    // Tier flags replace config tiers one by one; a chat URL beats a cmd; model defaults
    // to the tier name.
    let f = tier_flags(
        Tier::Cheap,
        TierFlags {
            cmd: Some("other".into()),
            chat_url: Some("https://x.example/v1".into()),
            ..TierFlags::default()
        },
    );
    let rt = merge(cfg(), &f).unwrap();
    assert_eq!(rt.tiers[&Tier::Cheap].model(), "cheap");
    assert_eq!(rt.tiers[&Tier::Cheap].origin, Origin::CommandLine);
    assert_eq!(rt.tiers[&Tier::Capable].origin, Origin::RepoConfig);
    assert_eq!(
        rt.warnings,
        vec!["--cheap-cmd is ignored: --cheap-chat-url takes precedence"]
    );
}

#[test]
fn bad_flags_are_refused() {
    for (f, want) in [
        (
            Flags {
                api: Some("openai".into()),
                ..Flags::default()
            },
            "unknown api kind",
        ),
        (
            Flags {
                model: Some("m".into()),
                cmd: Some("x".into()),
                ..Flags::default()
            },
            "--model needs",
        ),
        (
            Flags {
                api_key_env: Some("OPENAI_API_KEY".into()),
                ..Flags::default()
            },
            "--api-key-env needs",
        ),
        (
            Flags {
                cmd: Some("'x".into()),
                ..Flags::default()
            },
            "--cmd: cannot split",
        ),
        (
            Flags {
                cmd: Some("x".into()),
                claude: true,
                ..Flags::default()
            },
            "keep one",
        ),
        (
            Flags {
                chat_url: Some("https://a/".into()),
                api_key_env: Some("AWS_SECRET_ACCESS_KEY".into()),
                ..Flags::default()
            },
            "refused",
        ),
        (
            tier_flags(
                Tier::Frontier,
                TierFlags {
                    model: Some("m".into()),
                    ..TierFlags::default()
                },
            ),
            "need --frontier-chat-url",
        ),
    ] {
        let e = merge(None, &f).expect_err(want).to_string();
        assert!(e.starts_with("command line: ") && e.contains(want), "{e}");
    }
}

#[test]
fn allow_private_flag_opens_every_chat_endpoint() {
    let cfg = parse("[runtime.tiers.capable]\nchat_url = \"http://10.0.0.5:8000/v1\"\n").unwrap();
    let rt = merge(Some(cfg.clone()), &Flags::default()).unwrap();
    let roster = Roster::default_roster();
    let all = Env {
        vars: vec![],
        programs: vec![],
    };
    let i = issues(&rt, &roster, &all);
    assert_eq!(i.len(), 1, "{i:?}");
    assert!(i[0].problem.contains("allow_private"), "{}", i[0]);
    let f = Flags {
        allow_private: true,
        ..Flags::default()
    };
    let rt = merge(Some(cfg), &f).unwrap();
    assert!(issues(&rt, &roster, &all).is_empty());
}

#[test]
fn tier_resolution_models_forums_real_fallback() {
    let roster = Roster::default_roster();
    // Only frontier configured: Forum's inspect says "not ready", its submit runs.
    let cfg = parse("[runtime.tiers.frontier]\ncmd = \"ollama run big\"\n").unwrap();
    let rt = merge(Some(cfg), &Flags::default()).unwrap();
    let (via, spec) = rt.for_control().unwrap();
    assert_eq!(via, Via::DefaultFromTier(Tier::Frontier));
    assert_eq!(spec.model(), "ollama");
    assert_eq!(
        rt.for_tier(Tier::Cheap).unwrap().0,
        Via::TierFallsBackToTier(Tier::Cheap, Tier::Frontier)
    );
    assert!(issues(&rt, &roster, &env()).is_empty());
    // capable beats frontier beats cheap.
    let cfg = parse(
        "[runtime.tiers.cheap]\ncmd = \"a\"\n[runtime.tiers.frontier]\ncmd = \"b\"\n[runtime.tiers.capable]\ncmd = \"c\"\n",
    )
    .unwrap();
    let rt = merge(Some(cfg), &Flags::default()).unwrap();
    assert_eq!(rt.effective_default().unwrap().1.model(), "c");
    // With a default, a missing tier falls back to it; agents follow their tier; unknown
    // agents and control roles use the default.
    let cfg =
        parse("[runtime.default]\ncmd = \"d\"\n[runtime.tiers.cheap]\ncmd = \"a\"\n").unwrap();
    let rt = merge(Some(cfg), &Flags::default()).unwrap();
    let cheap = roster
        .agents()
        .iter()
        .find(|a| a.model_tier == Tier::Cheap)
        .unwrap();
    let capable = roster
        .agents()
        .iter()
        .find(|a| a.model_tier == Tier::Capable)
        .unwrap();
    assert_eq!(rt.for_task(&roster, &cheap.name).unwrap().1.model(), "a");
    let (via, s) = rt.for_task(&roster, &capable.name).unwrap();
    assert_eq!(
        (via, s.model()),
        (Via::TierFallsBackToDefault(Tier::Capable), "d")
    );
    assert_eq!(rt.for_task(&roster, "no-such-lane").unwrap().1.model(), "d");
    assert_eq!(rt.for_control().unwrap().1.model(), "d");
}

#[test]
fn seats_pin_the_worker_and_the_orchestrator() {
    let roster = Roster::default_roster();
    let rt = merge(Some(parse(FULL).unwrap()), &Flags::default()).unwrap();
    for a in roster.agents() {
        assert_eq!(rt.for_task(&roster, &a.name).unwrap().1.model(), "capable");
    }
    assert_eq!(rt.for_control().unwrap().0, Via::Seat("orchestrator"));
    // A seat naming an empty slot is an issue, not a silent fallback.
    let cfg = parse("[runtime.default]\ncmd = \"ollama\"\n[seats]\nworker = \"cheap\"\n").unwrap();
    let rt = merge(Some(cfg), &Flags::default()).unwrap();
    let i = issues(&rt, &roster, &env());
    assert_eq!(i.len(), 1, "{i:?}");
    assert!(
        i[0].problem.contains("the worker seat names cheap"),
        "{}",
        i[0]
    );
    // "default" resolves to the stand-in default.
    let cfg =
        parse("[runtime.tiers.frontier]\ncmd = \"ollama\"\n[seats]\norchestrator = \"default\"\n")
            .unwrap();
    let rt = merge(Some(cfg), &Flags::default()).unwrap();
    assert_eq!(
        rt.for_control().unwrap().0,
        Via::DefaultFromTier(Tier::Frontier)
    );
}

#[test]
fn issues_cover_keys_programs_endpoints_and_emptiness() {
    let roster = Roster::default_roster();
    let i = issues(&Runtime::default(), &roster, &env());
    assert!(
        i[0].problem
            .starts_with("no default executor for the control roles"),
        "{i:?}"
    );
    assert_eq!(i.len(), 4, "{i:?}");
    let cfg = parse(
        r#"
[runtime.default]
chat_url = "http://127.0.0.1:8080/v1"
[runtime.tiers.cheap]
cmd = "nope-not-here --x"
[runtime.tiers.capable]
chat_url = "https://api.groq.com/openai/v1/chat/completions"
api_key_env = "GROQ_API_KEY"
[runtime.tiers.frontier]
chat_url = "http://169.254.169.254/"
allow_private = true
"#,
    )
    .unwrap();
    let rt = merge(Some(cfg), &Flags::default()).unwrap();
    let got: Vec<String> = issues(&rt, &roster, &env())
        .iter()
        .map(|i| i.to_string())
        .collect();
    assert_eq!(got.len(), 4, "{got:#?}");
    assert!(
        got[0].starts_with("default: endpoint refused") && got[0].contains("is_local = true"),
        "{}",
        got[0]
    );
    assert!(
        got[1].contains("cheap: program nope-not-here is not on PATH"),
        "{}",
        got[1]
    );
    assert!(
        got[2].contains("capable: the key variable GROQ_API_KEY is not set: export GROQ_API_KEY="),
        "{}",
        got[2]
    );
    assert!(
        got[3].contains("frontier: endpoint refused") && got[3].contains("metadata"),
        "{}",
        got[3]
    );
    // The same loopback URL typed on the command line is the user's choice.
    let f = Flags {
        chat_url: Some("http://127.0.0.1:8080/v1".into()),
        ..Flags::default()
    };
    let rt = merge(None, &f).unwrap();
    assert!(issues(&rt, &roster, &env()).is_empty());
}

#[test]
fn default_checks_and_the_spend_table_are_read_and_refused_when_empty() {
    let cfg = parse(
        "[work]\ndefault_checks = [\"cargo test\"]\n[spend]\nmax_cost_usd = 5.0\nmax_tokens = 2000000\n",
    )
    .unwrap();
    assert_eq!(cfg.work.default_checks, ["cargo test"]);
    assert!(cfg.work.checks.is_empty());
    assert_eq!(
        cfg.spend,
        SpendConfig {
            max_cost_pico: Some(crate::spend::usd_to_pico(5.0)),
            max_tokens: Some(2_000_000),
        }
    );
    assert!(
        err("[work]\ndefault_checks = [\"\"]\n")
            .contains("[work] default_checks: each check must be a non-empty")
    );
    assert!(
        err("[spend]\nmax_cost_usd = 0.0\n")
            .contains("max_cost_usd = 0: give a number of dollars above 0")
    );
    assert!(err("[spend]\nmax_tokens = 0\n").contains("max_tokens = 0 leaves nothing"));
    assert!(err("[spend]\nmax_usd = 1.0\n").contains("max_usd"));
    assert_eq!(parse("").unwrap().spend, SpendConfig::default());
}

#[test]
fn the_work_table_sets_the_default_and_the_checks() {
    let cfg = parse_runtime_config(
        "[work]\nenabled = true\nchecks = [\"python3 -m unittest -q\", \"make lint\"]\n",
        "rt.toml",
        Origin::RepoConfig,
    )
    .unwrap();
    assert!(cfg.work.enabled);
    assert_eq!(cfg.work.checks, ["python3 -m unittest -q", "make lint"]);
    let e = parse_runtime_config("[work]\nchecks = [\"  \"]\n", "rt.toml", Origin::RepoConfig)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[work] checks: each check must be a non-empty"),
        "{e}"
    );
    let e = parse_runtime_config("[work]\nenable = true\n", "rt.toml", Origin::RepoConfig)
        .unwrap_err()
        .to_string();
    assert!(e.contains("enable"), "{e}");
}

#[test]
fn work_attempts_is_a_count_or_one_slot_per_attempt() {
    let cfg = parse("[work]\nattempts = 3\n").unwrap();
    assert_eq!(cfg.work.attempts, Some(3));
    assert!(cfg.work.attempt_slots.is_empty());
    let cfg = parse("[work]\nattempts = [\"cheap\", \"frontier\"]\n").unwrap();
    assert_eq!(cfg.work.attempts, Some(2));
    assert_eq!(
        cfg.work.attempt_slots,
        [Slot::Tier(Tier::Cheap), Slot::Tier(Tier::Frontier)]
    );
    assert!(parse("[work]\n").unwrap().work.attempts.is_none());
    for (text, needle) in [
        (
            "[work]\nattempts = 9\n",
            "attempts = 9: give a number from 1 to 8",
        ),
        (
            "[work]\nattempts = 0\n",
            "attempts = 0: give a number from 1 to 8",
        ),
        (
            "[work]\nattempts = []\n",
            "attempts names 0 slots: give 1 to 8",
        ),
        (
            "[work]\nattempts = [\"cheap\", \"huge\"]\n",
            "unknown slot \"huge\": name default, cheap, capable or frontier",
        ),
    ] {
        let e = err(text);
        assert!(
            e.contains("[work] attempts") && e.contains(needle),
            "{text}: {e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

#[test]
fn count_tokens_names_the_servers_counter_and_only_on_a_chat_executor() {
    let cfg = parse(
        "[runtime.default]\nchat_url = \"http://127.0.0.1:8080/v1/chat/completions\"\nis_local = true\ncount_tokens = \"llama.cpp\"\n",
    )
    .unwrap();
    assert_eq!(
        cfg.default.unwrap().metering.count_tokens,
        Some(TokenCount::LlamaCpp)
    );
    let unset =
        parse("[runtime.default]\nchat_url = \"http://127.0.0.1:8080/v1\"\nis_local = true\n")
            .unwrap();
    assert_eq!(unset.default.unwrap().metering.count_tokens, None);
    let e = err(
        "[runtime.default]\nchat_url = \"http://127.0.0.1:8080/v1\"\nis_local = true\ncount_tokens = \"tiktoken\"\n",
    );
    assert!(
        e.contains("count_tokens")
            && e.contains("names no token counter (\"tiktoken\"); it takes llama.cpp"),
        "{e}"
    );
    let e = err("[runtime.default]\ncmd = \"sh run.sh\"\ncount_tokens = \"llama.cpp\"\n");
    assert!(
        e.contains("count_tokens does not apply to a cmd executor (it applies to chat_url)"),
        "{e}"
    );
}
