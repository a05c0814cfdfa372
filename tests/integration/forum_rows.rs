//! Forum's rows as git forum writes and reads them: `tier_escalation` naming its tiers, the
//! OpenAI chat seat's structured-output allowlist, and `export` of an imported Forum ledger.

use crate::common::on_each_kind;
use crate::work_run::{kinds, model, payloads, plan, setup};

/// The fix of `add`, as a worker does it in its working directory.
const FIX_ADD: &str = "    sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'";
const CHECK: &str = "python3 -m unittest -q";

#[test]
fn an_escalation_names_the_tiers_it_moves_between_and_the_model() {
    on_each_kind(|repo| {
        setup(repo);
        // The task goes to `backend`, a capable lane; its checks fail, and the frontier
        // command fixes it.
        let p = plan(&[("T1", "make add in calc.py add")], false);
        let weak = model(repo, "weak", &p, "merge", "    echo 'did nothing'");
        let strong = model(repo, "strong", &p, "merge", FIX_ADD);
        repo.forum_ok(&[
            "submit",
            "--work",
            "--check",
            CHECK,
            "--cmd",
            &weak,
            "--frontier-cmd",
            &strong,
            "make the failing test in calc pass",
        ]);
        assert!(kinds(repo).contains(&"tier_escalation".to_string()));
        let esc = &payloads(repo, "tier_escalation")[0].1;
        assert_eq!(
            esc,
            &serde_json::json!({"id": "T1", "to": strong, "reason": "checks failed",
                                "from_tier": "capable", "to_tier": "frontier"})
        );
        let log = repo.forum_ok(&["log", "--run", "0"]);
        assert!(
            log.contains(&format!("T1 → {strong} (capable → frontier)")),
            "{log}"
        );
    });
}

/// Forum's own ledgers that `import` then `export` must give back byte for byte.
const FORUM_LEDGERS: [&str; 5] = [
    "ledger1",
    "run1",
    "campaign_ledger",
    "gradable_ledger0",
    "gradable_ledger1",
];

#[test]
fn an_imported_forum_ledger_exports_byte_identical_rows() {
    let Some(dir) = crate::common::conformance() else {
        return;
    };
    on_each_kind(|repo| {
        for name in FORUM_LEDGERS {
            let from = dir.join(name);
            repo.forum_ok(&["--ledger", name, "import", from.to_str().unwrap()]);
            let out = repo.path().join(format!("export-{name}"));
            repo.forum_ok(&["--ledger", name, "export", out.to_str().unwrap()]);
            for file in ["entries.jsonl", "payloads.jsonl"] {
                let want = std::fs::read(from.join(file)).unwrap();
                let got = std::fs::read(out.join(file)).unwrap();
                assert!(want == got, "{name}/{file} differs after import and export");
            }
        }
    });
}

#[test]
fn a_redacted_body_leaves_no_row_kept_in_forums_order() {
    let Some(dir) = crate::common::conformance() else {
        return;
    };
    // run1's plan-waves body, which Forum wrote with its keys unsorted.
    let waves = "ca7dea5e17e6383d4be7162942e11b4266c52ec0e134427516764eb1a12d818d";
    on_each_kind(|repo| {
        repo.forum_ok(&["import", dir.join("run1").to_str().unwrap()]);
        let kept = |repo: &crate::common::Repo| {
            repo.git_ok(&["cat-file", "blob", "refs/forum/rows/main:payloads.jsonl"])
        };
        assert!(kept(repo).contains(waves));
        repo.forum_ok(&["redact", waves, "--reason", "a key was pasted"]);
        assert!(!kept(repo).contains(waves), "{}", kept(repo));
        // The rows ref keeps no history that would still hold the body.
        assert_eq!(
            repo.git_ok(&["rev-list", "--count", "refs/forum/rows/main"]),
            "1"
        );
        let out = repo.path().join("export");
        repo.forum_ok(&["export", out.to_str().unwrap()]);
        let rows = std::fs::read_to_string(out.join("payloads.jsonl")).unwrap();
        let row = format!("{{\"hash\": \"{waves}\"");
        assert!(!rows.lines().any(|l| l.starts_with(&row)), "{rows}");
        // The other rows still come back in Forum's order.
        let forum = std::fs::read_to_string(dir.join("run1/payloads.jsonl")).unwrap();
        let want: String = forum
            .lines()
            .filter(|l| !l.contains(waves))
            .map(|l| format!("{l}\n"))
            .collect();
        let rest = rows
            .strip_prefix(&want)
            .expect("Forum's rows first, in Forum's order");
        assert!(
            rest.lines().count() == 1 && rest.contains("git-forum.redaction/v1"),
            "{rest}"
        );
    });
}

const OPENAI_CHAT: &str = "https://api.openai.com/v1/chat/completions";

/// `git forum ARGS` in `repo` with a (fake) OpenAI key set, so the key is not what is refused.
fn with_key(repo: &crate::common::Repo, args: &[&str]) -> std::process::Output {
    repo.forum()
        .env("OPENAI_API_KEY", "sk-not-a-real-key")
        .args(args)
        .output()
        .unwrap()
}

/// The flags of a default executor on OpenAI's chat endpoint with `model`.
fn openai(model: &str) -> Vec<&str> {
    vec![
        "--chat-url",
        OPENAI_CHAT,
        "--model",
        model,
        "--api-key-env",
        "OPENAI_API_KEY",
    ]
}

#[test]
fn openais_chat_endpoint_refuses_a_model_without_json_schema_in_one_line() {
    let repo = crate::common::Repo::new("sha1");
    let mut inspect = vec!["runtime", "inspect"];
    inspect.extend(openai("gpt-3.5-turbo"));
    let o = with_key(&repo, &inspect);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    for needle in [
        "\"gpt-3.5-turbo\"",
        "json_schema",
        "json_schema = true",
        "--json-schema",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    // A run refuses it before it starts, with the same line.
    let mut submit = vec!["submit"];
    submit.extend(openai("gpt-3.5-turbo"));
    submit.push("add a health endpoint");
    let o = with_key(&repo, &submit);
    let err = crate::common::one_line_error(&o, "is not known to support json_schema");
    assert!(err.contains("--json-schema"), "{err}");
    assert!(
        repo.git_ok(&["for-each-ref", "refs/forum/ledgers"])
            .is_empty()
    );
}

#[test]
fn the_override_and_known_models_and_other_servers_pass() {
    let repo = crate::common::Repo::new("sha1");
    let ready = |args: &[&str]| {
        let mut all = vec!["runtime", "inspect"];
        all.extend_from_slice(args);
        let o = with_key(&repo, &all);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    ready(&openai("gpt-4o-mini"));
    ready(&openai("gpt-4.1-2025-04-14"));
    let mut flagged = openai("gpt-3.5-turbo");
    flagged.push("--json-schema");
    ready(&flagged);
    // A local OpenAI-compatible server (llama.cpp, Ollama) is never refused for its model.
    ready(&[
        "--chat-url",
        "http://127.0.0.1:8080/v1/chat/completions",
        "--model",
        "llama3",
    ]);
    // The override in the runtime file.
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    let file = format!(
        "[runtime.default]\nchat_url = \"{OPENAI_CHAT}\"\nmodel = \"gpt-3.5-turbo\"\napi_key_env = \"OPENAI_API_KEY\"\njson_schema = true\n"
    );
    std::fs::write(repo.path().join(".forum/runtime.toml"), &file).unwrap();
    ready(&[]);
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        file.replace("json_schema = true\n", ""),
    )
    .unwrap();
    let o = with_key(&repo, &["runtime", "inspect"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"gpt-3.5-turbo\""));
    // json_schema belongs to chat executors only.
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        "[runtime.default]\ncmd = \"echo\"\njson_schema = true\n",
    )
    .unwrap();
    let o = with_key(&repo, &["runtime", "inspect"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("json_schema"));
}
