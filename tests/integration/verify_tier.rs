//! The verification tier per seat, through the binary: `runtime inspect`
//! shows each seat's tier and what it implies (text and JSON); a `--work` run on a small or
//! local seat (`tier = 3`) is refused without a check and, with one, gates every change and
//! records its tier; a hosted frontier seat lightened with `verify = "light"` merges a change
//! whose checks passed without asking the gate; a tier-3 seat cannot be lightened.

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind, one_line_error};
use crate::work_run::{clean, payloads, setup};

const CHECK: &str = "python3 -m unittest -q";

/// A scripted model: two tasks (T1 fixes `add`, T2 adds a file on top of it), a gate that
/// answers `ship`.
fn model(repo: &Repo, ship: &str) -> String {
    let path = repo.path().join("model.sh");
    let plan = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"fix add","depends_on":[],"done_when":["the tests pass"]},{"id":"T2","agent":"backend","instruction":"add extra","depends_on":["T1"],"done_when":["it exists"]}]}"#;
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) echo '{{\"decision\":\"{ship}\",\"reason\":\"scripted\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Done.' ;;\n  *\"fix add\"*) sed -i 's/return a - b/return a + b/' calc.py; echo fixed ;;\n  *) echo 'X = 1' > extra.py; echo added ;;\nesac\n"
    );
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// `.forum/runtime.toml` with the model as the default and `worker` as the worker seat's
/// extra keys.
fn runtime(repo: &Repo, m: &str, worker: &str) {
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!("[runtime.default]\ncmd = \"{m}\"\n\n[seats.worker]\ncmd = \"{m}\"\n{worker}"),
    )
    .unwrap();
}

#[test]
fn runtime_inspect_shows_each_seats_tier_and_what_it_implies() {
    let repo = Repo::new("sha1");
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        "[runtime.default]\nchat_url = \"http://127.0.0.1:9/v1/chat/completions\"\nis_local = true\n\n[seats.worker]\ncmd = \"sh\"\ntier = 1\nverify = \"light\"\n",
    )
    .unwrap();
    let j: J = repo.forum_json(&["runtime", "inspect"]);
    let w = &j["seats"]["worker"]["executor"]["verification"];
    assert_eq!(w["tier"], 1);
    assert_eq!(w["verify"], "light");
    assert_eq!(w["gate_every_change"], false);
    let o = &j["seats"]["orchestrator"]["executor"]["verification"];
    assert_eq!(o["tier"], 3, "{o}");
    assert_eq!(o["checks_required"], true);
    assert_eq!(o["judge_intent"], true);
    assert_eq!(
        o["implies"],
        "tier 3 (full): every change gated, checks required, intent judge on"
    );
    // The worker seat is pinned, so a run's tasks are checked at its tier.
    assert_eq!(j["verification"]["tier"], 1);
    let text = repo.forum_ok(&["runtime", "inspect"]);
    for needle in [
        "verification:",
        "  worker        tier 1 (light): changes with passing checks merge without the gate, checks optional, intent judge as asked",
        "  orchestrator  tier 3 (full): every change gated, checks required, intent judge on",
        "  a --work run  tier 1 (light)",
    ] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
}

#[test]
fn a_local_seats_work_run_needs_a_check_and_gates_every_change() {
    on_each_kind(|repo| {
        setup(repo);
        let m = model(repo, "merge");
        runtime(repo, &m, "tier = 3\n");
        let o = repo
            .forum()
            .args(["submit", "--work", "fix calc"])
            .output()
            .unwrap();
        one_line_error(&o, "tier 3 (small or local), whose changes need a check");
        assert_eq!(repo.git_ok(&["for-each-ref", "refs/forum"]), "");
        let j = repo.forum_json(&["submit", "--work", "--check", CHECK, "fix calc"]);
        assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
        let v = &payloads(repo, "request")[0].1["work"]["verification"];
        assert_eq!(v["tier"], 3, "{v}");
        assert_eq!(v["gate_every_change"], true);
        assert_eq!(v["judge_intent"], true);
        // Every change with a commit went to the gate, which the orchestrator seat answered.
        let changes: Vec<J> = payloads(repo, "change")
            .into_iter()
            .map(|(_, c)| c)
            .filter(|c| !c["commit"].is_null())
            .collect();
        assert_eq!(changes.len(), 2, "{changes:?}");
        let ships = payloads(repo, "ship");
        assert_eq!(ships.len(), 2, "{ships:?}");
        for (_, s) in &ships {
            assert_eq!(s["decision"], "merge", "{s}");
            assert_eq!(s["model"], m.as_str(), "{s}");
            assert!(s.get("gate").is_none(), "{s}");
        }
        clean(repo);
    });
}

#[test]
fn a_light_frontier_seat_merges_a_passing_change_without_the_gate() {
    let repo = Repo::new("sha1");
    setup(&repo);
    // The gate would block everything: a light seat never asks it about a passing change.
    let m = model(&repo, "block");
    runtime(&repo, &m, "tier = 1\nverify = \"light\"\n");
    let j = repo.forum_json(&["submit", "--work", "--check", CHECK, "fix calc"]);
    assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
    let ships = payloads(&repo, "ship");
    assert_eq!(ships.len(), 2, "{ships:?}");
    for (_, s) in &ships {
        assert_eq!(s["decision"], "merge", "{s}");
        assert_eq!(s["gate"], "skipped", "{s}");
        assert!(s["model"].is_null(), "{s}");
    }
    assert_eq!(
        payloads(&repo, "request")[0].1["work"]["verification"]["verify"],
        "light"
    );
    clean(&repo);
}

#[test]
fn a_local_seat_cannot_be_lightened() {
    let repo = Repo::new("sha1");
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    for (extra, needle) in [
        ("tier = 3\nverify = \"light\"\n", "always checked in full"),
        ("verify = \"light\"\n", "add tier = 1"),
        ("tier = 7\n", "tier = 7: give 1"),
        ("verify = \"heavy\"\n", "unknown level \"heavy\""),
    ] {
        std::fs::write(
            repo.path().join(".forum/runtime.toml"),
            format!("[seats.worker]\ncmd = \"sh\"\n{extra}"),
        )
        .unwrap();
        let o = repo.forum().args(["runtime", "inspect"]).output().unwrap();
        one_line_error(&o, needle);
    }
}
