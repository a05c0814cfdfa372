//! `git forum runtime inspect` through the real binary: the merged policy, the fallback Forum's
//! inspect omits, and one clear line with a non-zero exit for each kind of bad input.

use crate::common::Repo;

fn repo_with(config: &str) -> Repo {
    let r = Repo::new("sha1");
    std::fs::create_dir_all(r.path().join(".forum")).unwrap();
    std::fs::write(r.path().join(".forum/runtime.toml"), config).unwrap();
    r
}

/// Runs inspect; returns (exit code, stdout, stderr).
fn inspect(r: &Repo, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = r.forum();
    c.env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c
        .args(["runtime", "inspect"])
        .args(args)
        .output()
        .expect("run git-forum");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[test]
fn runtime_inspect_tier_only_config_is_ready_via_the_real_fallback() {
    let r = repo_with("[runtime.tiers.frontier]\ncmd = \"sh -c 'cat'\"\n");
    let (code, out, err) = inspect(&r, &["--json"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let v = json(&out);
    assert_eq!(v["ready"], true);
    assert_eq!(v["default"]["configured"], false);
    assert_eq!(v["default"]["via"]["slot"], "frontier");
    assert_eq!(v["tiers"]["frontier"]["status"], "configured");
    assert_eq!(v["tiers"]["cheap"]["status"], "fallback");
    assert_eq!(v["tiers"]["capable"]["fallback"]["slot"], "frontier");
    assert!(
        !v["tiers"]["capable"]["demanded_by"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(v["config"]["origin"], "repository");
    assert_eq!(v["seats"]["orchestrator"]["via"]["slot"], "frontier");
    let (code, out, _) = inspect(&r, &[], &[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("ready: yes") && out.contains("frontier stands in"),
        "{out}"
    );
}

#[test]
fn runtime_inspect_nothing_configured_is_not_ready() {
    let r = Repo::new("sha1");
    let (code, out, err) = inspect(&r, &["--json"], &[]);
    assert_eq!(code, 1, "{err}");
    let v = json(&out);
    assert_eq!(v["ready"], false);
    assert!(
        v["issues"][0]["problem"]
            .as_str()
            .unwrap()
            .contains("no default executor for the control roles")
    );
    assert!(err.lines().all(|l| l.starts_with("error: ")), "{err}");
}

#[test]
fn runtime_inspect_flags_override_and_typed_loopback_is_local() {
    let r = repo_with("[runtime.default]\nchat_url = \"http://127.0.0.1:8080/v1\"\n");
    // From the repository's config, loopback without is_local is refused.
    let (code, out, err) = inspect(&r, &["--json"], &[]);
    assert_eq!(code, 1);
    assert!(
        json(&out)["default"]["executor"]["endpoint"]
            .as_str()
            .unwrap()
            .contains("refused")
    );
    assert!(err.contains("is_local = true"), "{err}");
    // The same URL typed on the command line is the user's explicit choice.
    let (code, out, err) = inspect(
        &r,
        &["--json", "--chat-url", "http://127.0.0.1:8080/v1"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["default"]["executor"]["origin"], "command-line");
    assert_eq!(v["default"]["executor"]["endpoint"], "allowed");
    // A tier flag replaces that tier only.
    let (code, out, _) = inspect(
        &r,
        &["--json", "--claude", "--cheap-cmd", "sh"],
        &[("PATH", "/usr/bin:/bin")],
    );
    let v = json(&out);
    assert_eq!(v["tiers"]["cheap"]["executor"]["kind"], "command");
    assert_eq!(v["default"]["executor"]["kind"], "claude");
    // claude is (almost certainly) not on this PATH: not ready, named.
    if v["default"]["executor"]["program_found"] == false {
        assert_eq!(code, 1);
    }
}

#[test]
fn runtime_inspect_seats_and_user_config_file() {
    let r = Repo::new("sha1");
    let file = r.path().join("my-runtime.toml");
    std::fs::write(
        &file,
        "[runtime.default]\ncmd = \"sh\"\n[runtime.tiers.capable]\ncmd = \"sh -c x\"\n[seats]\nworker = \"capable\"\norchestrator = { cmd = \"sh -c y\", timeout_seconds = 5 }\n",
    )
    .unwrap();
    let (code, out, err) = inspect(
        &r,
        &["--json", "--runtime-config", file.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["config"]["origin"], "runtime-config");
    assert_eq!(v["seats"]["worker"]["set"], "capable");
    assert_eq!(v["seats"]["worker"]["via"]["slot"], "capable");
    assert_eq!(v["seats"]["orchestrator"]["set"], "inline");
    assert_eq!(v["seats"]["orchestrator"]["executor"]["timeout_seconds"], 5);
    assert_eq!(v["tiers"]["cheap"]["used_for_tasks"], false);
}

#[test]
fn runtime_inspect_missing_key_is_named_and_never_printed() {
    // A model OpenAI's endpoint answers with json_schema, so the key is the one issue.
    let cfg = "[runtime.default]\nchat_url = \"https://api.openai.com/v1/chat/completions\"\nmodel = \"gpt-4o-mini\"\napi_key_env = \"OPENAI_API_KEY\"\n";
    let r = repo_with(cfg);
    let (code, out, err) = inspect(&r, &[], &[]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("OPENAI_API_KEY is not set: export OPENAI_API_KEY="),
        "{err}"
    );
    let (code, out, err) = inspect(
        &r,
        &["--json"],
        &[("OPENAI_API_KEY", "sk-test-do-not-print")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("sk-test-do-not-print") && !err.contains("sk-test-do-not-print"));
    assert_eq!(json(&out)["default"]["executor"]["key_set"], true);
}

#[test]
fn runtime_inspect_bad_input_is_one_line_and_non_zero() {
    let cases: &[(&str, &[&str], i32, &str)] = &[
        // A wrong type, with line and column.
        (
            "[runtime.default]\ncmd = 5\n",
            &[],
            2,
            ".forum/runtime.toml:2:7: [runtime.default] cmd: invalid type",
        ),
        // An unknown key, with line and column.
        (
            "[runtime.tiers.cheap]\ncmd = \"sh\"\nmodle = \"x\"\n",
            &[],
            2,
            ":3:1: [runtime.tiers.cheap] modle: unknown field",
        ),
        // An unknown executor name.
        (
            "[seats]\nworker = \"medium\"\n",
            &[],
            2,
            "[seats] worker: unknown executor \"medium\"",
        ),
        // An unknown executor kind, in the file and as a flag.
        (
            "[runtime.default]\napi = \"openai\"\n",
            &[],
            2,
            "unknown api kind \"openai\"",
        ),
        ("", &["--api=openai"], 2, "--api=openai: unknown api kind"),
        // A --cmd whose program does not exist.
        (
            "",
            &["--cmd", "no-such-model-runner-xyz run"],
            1,
            "default: program no-such-model-runner-xyz is not on PATH",
        ),
        (
            "",
            &["--cmd", "/nonexistent/llm"],
            1,
            "program /nonexistent/llm does not exist",
        ),
        // A refused key variable name.
        (
            "",
            &[
                "--chat-url",
                "https://a.example/v1",
                "--api-key-env",
                "GITHUB_TOKEN",
            ],
            2,
            "GITHUB_TOKEN is refused",
        ),
        // The cloud metadata address, even with --allow-private.
        (
            "",
            &[
                "--chat-url",
                "http://[::ffff:a9fe:a9fe]/",
                "--allow-private",
            ],
            1,
            "metadata",
        ),
    ];
    for (cfg, args, want_code, want) in cases {
        let r = repo_with(cfg);
        let (code, out, err) = inspect(&r, args, &[]);
        assert_eq!(code, *want_code, "{cfg:?} {args:?}: {out}{err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{cfg:?} {args:?}: {err}");
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains(want),
            "{cfg:?} {args:?}\n got {err}\nwant {want}"
        );
    }
}

/// A name this machine resolves to loopback (or, failing that, to another address a
/// repository's config may not reach): its host name, else a common alias from /etc/hosts.
fn name_resolving_off_limits() -> String {
    use std::net::ToSocketAddrs;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let candidates = [
        host.as_str(),
        "localhost.localdomain",
        "ip6-localhost",
        "ip6-loopback",
    ];
    let resolved = |n: &str| -> Vec<std::net::IpAddr> {
        if n.is_empty() || n.ends_with(".localhost") || n == "localhost" {
            return Vec::new();
        }
        (n, 0u16)
            .to_socket_addrs()
            .map(|a| a.map(|s| s.ip()).collect())
            .unwrap_or_default()
    };
    let loopback = |a: &std::net::IpAddr| a.is_loopback();
    let not_global = |a: &std::net::IpAddr| match a {
        std::net::IpAddr::V4(v) => v.is_loopback() || v.is_private() || v.is_link_local(),
        std::net::IpAddr::V6(v) => v.is_loopback() || (v.segments()[0] & 0xfe00) == 0xfc00,
    };
    for pick in [&loopback as &dyn Fn(&std::net::IpAddr) -> bool, &not_global] {
        for n in candidates {
            let addrs = resolved(n);
            if !addrs.is_empty() && addrs.iter().all(pick) {
                return n.to_string();
            }
        }
    }
    panic!(
        "no name on this machine resolves to loopback or a private address: tried {candidates:?}"
    )
}

#[test]
fn runtime_inspect_vets_a_resolved_name_as_submit_does() {
    let name = name_resolving_off_limits();
    let url = format!("http://{name}:9/v1/chat/completions");
    let r = repo_with(&format!(
        "[runtime.default]\nchat_url = \"{url}\"\nmodel = \"m\"\n"
    ));
    let (code, out, err) = inspect(&r, &["--json"], &[]);
    assert_eq!(code, 1, "{out}{err}");
    let v = json(&out);
    assert_eq!(v["ready"], false);
    let verdict = v["default"]["executor"]["endpoint"].as_str().unwrap();
    assert!(
        verdict.starts_with("refused: ") && verdict.contains("resolves only to addresses"),
        "{verdict}"
    );
    assert!(err.contains(&format!("{name} resolves only to")), "{err}");
    // submit applies the same rule before calling anything, and writes nothing.
    let before = r.snapshot();
    let o = r
        .forum()
        .args(["submit", "say hello"])
        .output()
        .expect("run git-forum");
    assert_eq!(o.status.code(), Some(2));
    let serr = String::from_utf8_lossy(&o.stderr);
    assert!(serr.contains(&format!("{name} resolves only to")), "{serr}");
    assert_eq!(r.snapshot(), before);
    // With is_local, a name that resolves to loopback itself is allowed.
    let r = repo_with(
        "[runtime.default]\nchat_url = \"http://localhost:9/v1\"\nmodel = \"m\"\nis_local = true\n",
    );
    let (code, out, err) = inspect(&r, &["--json"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(json(&out)["default"]["executor"]["endpoint"], "allowed");
}

#[test]
fn is_local_refuses_addresses_that_only_embed_loopback() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    for host in [
        "[64:ff9b::7f00:1]",
        "[64:ff9b:1::7f00:1]",
        "[2002:7f00:1::]",
        "[2001:0:7f00:1::f7f7:f7f7]",
        "[::127.0.0.1]",
    ] {
        let url = format!("http://{host}:{port}/v1");
        let r = repo_with(&format!(
            "[runtime.default]\nchat_url = \"{url}\"\nmodel = \"m\"\nis_local = true\n"
        ));
        let (code, out, err) = inspect(&r, &[], &[]);
        assert_eq!(code, 1, "{host}: {out}{err}");
        assert!(
            err.contains("is_local = true needs a host that is loopback itself"),
            "{host}: {err}"
        );
        let before = r.snapshot();
        let o = r
            .forum()
            .args(["submit", "say hello"])
            .output()
            .expect("run git-forum");
        let serr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{host}: {serr}");
        assert!(
            serr.contains("is_local = true needs a host"),
            "{host}: {serr}"
        );
        assert_eq!(r.snapshot(), before, "{host}");
    }
    // The mapped spelling really is loopback: it is allowed.
    let r = repo_with(&format!(
        "[runtime.default]\nchat_url = \"http://[::ffff:127.0.0.1]:{port}/v1\"\nmodel = \"m\"\nis_local = true\n"
    ));
    let (code, out, err) = inspect(&r, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    drop(listener);
}
