//! A worker's environment is an allowlist, through the binary, sandboxed
//! and with `--no-sandbox`, on each repository kind: git forum is started with
//! `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN` and an
//! unrelated `MY_DB_PASSWORD` set to values generated here; its `--work` worker prints `env`
//! and writes it into a file of its change, and its check prints `env`. None of the values
//! reaches the worker or the check (the file the worker committed and the check's output
//! show what they had: `PATH` and the rest of the allowlist, no `GIT_*`), none is in any ledger
//! body, and no object reachable from any ref (`refs/forum/*`, the run branch, the user's
//! branches) holds one. An executor that names one variable (`env = ["OPENAI_API_KEY"]` in
//! `.forum/runtime.toml`) gets exactly that one (its worker proves it holds the right value by
//! its hash), its check still gets none, and its value, printed into a body, is redacted there
//! and in no object either.

use std::collections::BTreeSet;

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};
use crate::work_run::{clean, payloads, setup};

/// The variables git forum is started with, none of which a worker may see unless named.
const SECRETS: [&str; 5] = [
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "MY_DB_PASSWORD",
];

/// Variables a worker may have: the allowlist of `exec::command::env`, and what the shell
/// sets itself.
fn may_have(name: &str) -> bool {
    const NAMES: [&str; 38] = [
        "PATH",
        "LANG",
        "LANGUAGE",
        "TERM",
        "NO_COLOR",
        "TZ",
        "USER",
        "LOGNAME",
        "SHELL",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "GOROOT",
        "GOPATH",
        "JAVA_HOME",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "COLUMNS",
        "LINES",
        "HOME",
        "TMPDIR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
        // The task's own caches under the sandbox (places, never credentials).
        "GOCACHE",
        "CARGO_TARGET_DIR",
        "npm_config_cache",
        "PIP_CACHE_DIR",
    ];
    NAMES.contains(&name) || name.starts_with("LC_")
}

/// A value for each of [`SECRETS`], random for this run, in no provider's format (so no rule
/// of the scanner would hide it if it leaked: only the worker's environment decides).
fn generated() -> Vec<(&'static str, String)> {
    use rand_core::RngCore;
    SECRETS
        .iter()
        .map(|name| {
            let mut b = [0u8; 24];
            rand_core::OsRng.fill_bytes(&mut b);
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            (*name, format!("gfenv{hex}"))
        })
        .collect()
}

/// The scripted model: it plans one task, merges, passes it, answers; its worker (any other
/// prompt) writes the names of its environment, and the environment itself unless `named`,
/// into files of its change, and the hash of `$named` when one is named; then prints `env`.
fn model(repo: &Repo, named: Option<&str>) -> String {
    let path = repo.path().join("model.sh");
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"report the environment","depends_on":[],"done_when":[]}]}"#;
    let files = match named {
        Some(n) => format!("printf %s \"${n}\" | sha256sum | cut -c1-64 > named.sha"),
        None => "env > env.txt".to_string(),
    };
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"merge\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Reported.' ;;\n  *)\n    env | cut -d= -f1 | sort > env-names.txt\n    {files}\n    echo 'the worker environment:'; env\n  ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// Every object reachable from any ref, as one byte string.
fn reachable_objects(repo: &Repo) -> Vec<u8> {
    let list = repo.git_ok(&["rev-list", "--objects", "--all"]);
    let ids: String = list
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!ids.is_empty());
    use std::io::Write;
    let mut child = std::process::Command::new("git")
        .current_dir(repo.path())
        .args(["cat-file", "--batch"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = std::thread::spawn(move || {
        stdin.write_all(ids.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    });
    let out = child.wait_with_output().unwrap();
    feed.join().unwrap();
    assert!(out.status.success());
    out.stdout
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Runs one `--work` submit with the generated secrets in git forum's environment; `named` is
/// the variable the executor names (in `.forum/runtime.toml`), if any.
fn run_case(repo: &Repo, sandbox: bool, named: Option<&str>) {
    setup(repo);
    let secrets = generated();
    let m = model(repo, named);
    let mut args: Vec<String> = vec![
        "submit".into(),
        "--json".into(),
        "--work".into(),
        "--check".into(),
        "echo 'the check environment:'; env".into(),
        if sandbox { "--sandbox" } else { "--no-sandbox" }.into(),
    ];
    match named {
        Some(n) => {
            let forum = repo.path().join(".forum");
            std::fs::create_dir_all(&forum).unwrap();
            std::fs::write(
                forum.join("runtime.toml"),
                format!("[runtime.default]\ncmd = \"{m}\"\nenv = [\"{n}\"]\n"),
            )
            .unwrap();
            // The configuration is the user's own, not part of the run's change.
            std::fs::write(repo.git_dir().join("info/exclude"), ".forum/\n").unwrap();
        }
        None => args.extend(["--cmd".into(), m.clone()]),
    }
    args.push("report the environment".into());
    let o = repo
        .forum()
        .envs(secrets.iter().map(|(k, v)| (*k, v.as_str())))
        .args(&args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let report: J = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["exit"]["name"], "answered", "{report}");
    let confined = &payloads(repo, "request")[0].1["work"]["sandbox"]["confined"];
    assert_eq!(confined, &J::Bool(sandbox));

    // What the worker had: its change's files.
    let change = &payloads(repo, "change")[0].1;
    let commit = change["commit"]
        .as_str()
        .unwrap_or_else(|| panic!("{change}"));
    let names: BTreeSet<String> = repo
        .git_ok(&["show", &format!("{commit}:env-names.txt")])
        .lines()
        .map(str::to_string)
        .collect();
    assert!(names.contains("PATH"), "{names:?}");
    for n in &names {
        assert!(
            may_have(n) || Some(n.as_str()) == named,
            "the worker was handed {n}: {names:?}"
        );
    }
    // HOME is the sandbox's scratch one, or the user's.
    assert!(names.contains("HOME"), "{names:?}");
    match named {
        Some(n) => {
            assert!(names.contains(n), "{n} was named but not handed: {names:?}");
            let value = &secrets.iter().find(|(k, _)| *k == n).unwrap().1;
            let sha = repo.git_ok(&["show", &format!("{commit}:named.sha")]);
            use sha2::Digest;
            let want: String = sha2::Sha256::digest(value.as_bytes())
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect();
            assert_eq!(sha, want, "the worker got another value for {n}");
        }
        None => {
            let env = repo.git_ok(&["show", &format!("{commit}:env.txt")]);
            assert!(env.contains("PATH="), "{env}");
            for (k, v) in &secrets {
                assert!(
                    !env.contains(v.as_str()),
                    "{k}'s value is in the worker's env"
                );
            }
        }
    }
    // What the check had: its output, in its entry.
    let checks = payloads(repo, "check");
    assert!(!checks.is_empty());
    for (_, c) in &checks {
        let out = c["output"].as_str().unwrap();
        assert!(
            out.contains("the check environment:") && out.contains("PATH="),
            "{c}"
        );
        for name in SECRETS.iter().chain(&["GIT_DIR", "GIT_FORUM_STATE_DIR"]) {
            assert!(
                !out.contains(&format!("{name}=")),
                "the check got {name}: {out}"
            );
        }
    }
    // The worker's answer printed its environment: the named value only, redacted.
    let result = &payloads(repo, "result")[0].1;
    let printed = result["output"].as_str().unwrap();
    assert!(printed.contains("the worker environment:"), "{result}");
    if let Some(n) = named {
        assert!(
            printed.contains(&format!("{n}=[REDACTED:api-key-env]")),
            "{printed}"
        );
    }
    // No value in any body, nor in any object any ref reaches.
    let log = repo.forum_ok(&["log", "--json"]);
    let objects = reachable_objects(repo);
    for (k, v) in &secrets {
        assert!(!log.contains(v.as_str()), "{k}'s value is in the ledger");
        assert!(
            !contains(&objects, v),
            "{k}'s value is in a reachable object"
        );
    }
    clean(repo);
}

fn bwrap_works() -> bool {
    std::process::Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn no_inherited_credential_reaches_an_unconfined_worker_or_check() {
    on_each_kind(|repo| run_case(repo, false, None));
}

#[test]
fn no_inherited_credential_reaches_a_sandboxed_worker_or_check() {
    assert!(
        bwrap_works(),
        "this test needs a working bwrap (apt install bubblewrap)"
    );
    on_each_kind(|repo| run_case(repo, true, None));
}

#[test]
fn a_variable_the_executor_names_reaches_its_worker_alone_and_is_never_recorded() {
    assert!(
        bwrap_works(),
        "this test needs a working bwrap (apt install bubblewrap)"
    );
    on_each_kind(|repo| run_case(repo, false, Some("OPENAI_API_KEY")));
    let repo = Repo::new("sha1");
    run_case(&repo, true, Some("OPENAI_API_KEY"));
}

#[test]
fn an_env_list_that_names_git_or_sits_on_a_chat_endpoint_is_refused_in_one_line() {
    for (table, needle) in [
        (
            "[runtime.default]\ncmd = \"true\"\nenv = [\"GIT_DIR\"]\n",
            "GIT_* variables point git at a repository",
        ),
        (
            "[runtime.default]\ncmd = \"true\"\nenv = [\"A-B\"]\n",
            "is not an environment variable name",
        ),
        (
            "[runtime.default]\nchat_url = \"https://api.openai.com/v1/chat/completions\"\nenv = [\"OPENAI_API_KEY\"]\n",
            "env does not apply to a chat_url executor",
        ),
    ] {
        let repo = Repo::new("sha1");
        let forum = repo.path().join(".forum");
        std::fs::create_dir_all(&forum).unwrap();
        std::fs::write(forum.join("runtime.toml"), table).unwrap();
        let before = repo.snapshot();
        let o = repo.forum().args(["submit", "hi"]).output().unwrap();
        crate::common::one_line_error(&o, needle);
        assert_eq!(o.status.code(), Some(2), "{table}");
        assert_eq!(repo.snapshot(), before);
    }
}

#[test]
fn runtime_inspect_names_the_variables_each_program_is_handed() {
    for (table, want) in [
        (
            "[runtime.default]\ncmd = \"true\"\nenv = [\"OPENAI_API_KEY\"]\n",
            serde_json::json!(["OPENAI_API_KEY"]),
        ),
        (
            "[runtime.default]\nclaude = true\n",
            serde_json::json!([
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
                "ANTHROPIC_BASE_URL",
                "ANTHROPIC_MODEL"
            ]),
        ),
        ("[runtime.default]\nclaude = true\nenv = []\n", J::Null),
        ("[runtime.default]\ncmd = \"true\"\n", J::Null),
    ] {
        let repo = Repo::new("sha1");
        let forum = repo.path().join(".forum");
        std::fs::create_dir_all(&forum).unwrap();
        std::fs::write(forum.join("runtime.toml"), table).unwrap();
        let o = repo
            .forum()
            .args(["runtime", "inspect", "--json"])
            .output()
            .unwrap();
        let j: J = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["default"]["executor"]["env"], want, "{table}: {j}");
    }
}
