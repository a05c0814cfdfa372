//! Campaigns against Forum's own outputs (`campaign_vectors.json`, `campaign_ledger/`),
//! through the real binary on real repositories of every format: the imported ledger's room,
//! each declare, status, next and ingest step replayed with Forum's timestamps, a whole
//! campaign run on the scripted executor of the vectors (Forum's entry kinds and parents),
//! a run with a failing feature, and every refusal as one line with Forum's exit code.

use std::path::{Path, PathBuf};

use serde_json::{Value as J, json};

use crate::common::{self, FORMATS, Repo, one_line_error};

struct Vectors {
    dir: PathBuf,
    v: J,
}

impl Vectors {
    fn load() -> Option<Vectors> {
        let dir = common::conformance()?;
        let text = std::fs::read_to_string(dir.join("campaign_vectors.json")).ok()?;
        Some(Vectors {
            v: serde_json::from_str(&text).unwrap(),
            dir,
        })
    }

    fn step(&self, name: &str) -> &J {
        self.v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| panic!("no step {name}"))
    }

    fn stdout(&self, name: &str) -> &str {
        self.step(name)["stdout"].as_str().unwrap()
    }

    fn json(&self, name: &str) -> J {
        serde_json::from_str(self.stdout(name)).unwrap()
    }

    /// Forum's entries after the last step.
    fn entries(&self) -> Vec<J> {
        std::fs::read_to_string(self.dir.join("campaign_ledger/entries.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Writes the campaign files and the scripted executor into `dir`.
    fn files(&self, dir: &Path) -> (String, String, String) {
        let camp = dir.join("camp.json");
        let bad = dir.join("bad.json");
        let fake = dir.join("fake.sh");
        std::fs::write(&camp, self.v["campaign"].to_string()).unwrap();
        std::fs::write(&bad, self.v["cycle_campaign"].to_string()).unwrap();
        write_script(&fake, self.v["executor_script"].as_str().unwrap());
        let s = |p: &Path| p.to_str().unwrap().to_string();
        (s(&camp), s(&bad), s(&fake))
    }
}

fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn forum_at(repo: &Repo, ts: &J, args: &[&str]) -> String {
    let o = repo
        .forum()
        .env("GIT_FORUM_TIMESTAMP", ts.to_string())
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The ledger `ledger` exported as Forum's files: its entries.
fn exported(repo: &Repo, ledger: &str) -> Vec<J> {
    let out = (0..)
        .map(|n| repo.path().join(format!("export-{ledger}-{n}")))
        .find(|p| !p.exists())
        .unwrap();
    repo.forum_ok(&["--ledger", ledger, "export", out.to_str().unwrap()]);
    std::fs::read_to_string(out.join("entries.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn without_checkpoint(mut room: J) -> J {
    room.as_object_mut().unwrap().remove("checkpoint");
    room
}

#[test]
fn the_imported_campaign_ledger_has_forums_room_next_actions_and_text() {
    let Some(vec) = Vectors::load() else { return };
    let want = vec.stdout("status_2");
    let room = vec.json("status_2");
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let dir = vec.dir.join("campaign_ledger");
        repo.forum_ok(&["--ledger", "camp", "import", dir.to_str().unwrap()]);
        let got = repo.forum_ok(&[
            "--ledger",
            "camp",
            "campaign",
            "status",
            "--campaign-id",
            "c-shared",
        ]);
        assert_eq!(got, want, "{kind}: byte for byte");
        // The id may also be given as an argument, or left out when only one is declared.
        let by_arg = repo.forum_ok(&["--ledger", "camp", "campaign", "status", "c-shared"]);
        let only = repo.forum_ok(&["--ledger", "camp", "--json", "campaign", "status"]);
        assert_eq!((by_arg.as_str(), only.as_str()), (want, want), "{kind}");
        let next: J = serde_json::from_str(&repo.forum_ok(&[
            "--ledger",
            "camp",
            "campaign",
            "next",
            "--campaign-id",
            "c-shared",
        ]))
        .unwrap();
        assert_eq!(
            next,
            json!({"next_actions": room["next_actions"]}),
            "{kind}"
        );
        let text = repo.forum_ok(&["--ledger", "camp", "campaign", "status", "--text"]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "Forum campaign room: c-shared",
                "title: Two projects",
                &format!("checkpoint: {}", room["checkpoint"].as_str().unwrap()),
                "verified: True",
                "complete: True",
                "progress: 3/3 done (failed 0, blocked 0, unwitnessed 0)",
                "next actions:",
                "- normal/close_campaign: Close the campaign (every forum-owned feature is witnessed done)",
            ],
            "{kind}"
        );
        repo.fsck();
    }
}

#[test]
fn each_step_replayed_gives_forums_output_and_a_run_writes_forums_kinds_and_parents() {
    let Some(vec) = Vectors::load() else { return };
    let forum = vec.entries();
    let ts = |seq: usize| forum[seq]["ts"].clone();
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let (camp, _, fake) = vec.files(repo.path());
        fn with<'a>(rest: &[&'a str]) -> Vec<&'a str> {
            [&["--ledger", "camp", "campaign"][..], rest].concat()
        }

        let out = forum_at(&repo, &ts(0), &with(&["declare", "--file", &camp]));
        assert_eq!(out, vec.stdout("declare"), "{kind}");
        let id = ["--campaign-id", "c-shared"];
        let status = with(&[&["status"][..], &id].concat());
        assert_eq!(repo.forum_ok(&status), vec.stdout("status_0"), "{kind}");
        let text = with(&[&["status", "--text"][..], &id].concat());
        assert_eq!(repo.forum_ok(&text), vec.stdout("status_0_text"), "{kind}");
        let next = with(&[&["next"][..], &id].concat());
        assert_eq!(repo.forum_ok(&next), vec.stdout("next_0"), "{kind}");
        fn ingest<'a>(extra: &[&'a str]) -> Vec<&'a str> {
            let base = [
                "ingest-status",
                "--campaign-id",
                "c-shared",
                "--project",
                "web",
                "--feature",
                "web-form",
                "--source",
                "external:telos",
            ];
            with(&[&base[..], extra].concat())
        }
        let out = forum_at(
            &repo,
            &ts(1),
            &ingest(&["--status", "in_progress", "--reason", "started"]),
        );
        assert_eq!(out, vec.stdout("ingest_web_in_progress"), "{kind}");
        // Declared and ingested at Forum's moments, the first entries are Forum's own.
        let ours = exported(&repo, "camp");
        for seq in 0..2 {
            assert_eq!(ours[seq], forum[seq], "{kind}: seq {seq}");
        }

        // The run: Forum's room but for the checkpoint (our executor's outputs and clock
        // differ), and Forum's entries but for their timestamps and bodies.
        let run = with(&[&["run", "--cmd", &fake][..], &id].concat());
        let mut args = vec!["--json"];
        args.extend(run.iter().copied());
        let room: J = serde_json::from_str(&repo.forum_ok(&args)).unwrap();
        assert_eq!(
            without_checkpoint(room),
            without_checkpoint(vec.json("run")),
            "{kind}"
        );
        let ours = exported(&repo, "camp");
        assert_eq!(ours.len(), 14, "{kind}");
        for (o, f) in ours.iter().zip(&forum) {
            for field in ["seq", "actor", "kind", "causal_parent"] {
                assert_eq!(o[field], f[field], "{kind}: seq {} {field}", f["seq"]);
            }
        }
        let status_1: J = serde_json::from_str(&repo.forum_ok(&status)).unwrap();
        assert_eq!(
            without_checkpoint(status_1),
            without_checkpoint(vec.json("status_1")),
            "{kind}"
        );
        assert_eq!(repo.forum_ok(&next), vec.stdout("next_1"), "{kind}");
        let out = repo.forum_ok(&ingest(&["--status", "done"]));
        assert_eq!(out, vec.stdout("ingest_web_done"), "{kind}");
        let status_2: J = serde_json::from_str(&repo.forum_ok(&status)).unwrap();
        assert_eq!(
            without_checkpoint(status_2),
            without_checkpoint(vec.json("status_2")),
            "{kind}"
        );
        repo.forum_ok(&["--ledger", "camp", "verify", "--deep"]);
        repo.fsck();
    }
}

#[test]
fn a_cycle_and_an_unknown_campaign_are_one_line_with_forums_exit_code_and_write_nothing() {
    let Some(vec) = Vectors::load() else { return };
    let repo = Repo::new("sha1");
    let (camp, bad, _) = vec.files(repo.path());
    let cycle = vec.step("declare_cycle");
    let o = repo
        .forum()
        .args(["--ledger", "camp2", "campaign", "declare", "--file", &bad])
        .output()
        .unwrap();
    one_line_error(&o, cycle["stderr_first_line"].as_str().unwrap());
    assert_eq!(o.status.code(), cycle["rc"].as_i64().map(|c| c as i32));
    let refs = repo.git_ok(&["for-each-ref", "refs/forum/"]);
    assert!(refs.is_empty(), "nothing written: {refs}");

    repo.forum_ok(&["--ledger", "camp", "campaign", "declare", "--file", &camp]);
    let unknown = vec.step("status_unknown");
    for sub in ["status", "next"] {
        let o = repo
            .forum()
            .args(["--ledger", "camp", "campaign", sub, "--campaign-id", "nope"])
            .output()
            .unwrap();
        let err = one_line_error(&o, unknown["stderr_first_line"].as_str().unwrap());
        assert!(err.contains("declared here: c-shared"), "{err}");
        assert_eq!(o.status.code(), unknown["rc"].as_i64().map(|c| c as i32));
    }
}

#[test]
fn bad_declarations_and_bad_ingests_are_one_line_usage_errors_that_write_nothing() {
    common::on_each_kind(bad_inputs);
}

fn bad_inputs(repo: &Repo) {
    let write = |name: &str, text: &str| {
        let p = repo.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let cases = [
        (write("notjson.json", "{"), "not JSON"),
        (
            write("noid.json", r#"{"title": "x"}"#),
            "has no campaign_id",
        ),
        (
            write(
                "dup.json",
                r#"{"campaign_id": "c", "projects": [{"project_id": "p", "features": [{"feature_id": "a"}, {"feature_id": "a"}]}]}"#,
            ),
            "duplicate feature id: 'a'",
        ),
        (
            write(
                "dep.json",
                r#"{"campaign_id": "c", "projects": [{"project_id": "p", "features": [{"feature_id": "a", "depends_on": ["z"]}]}]}"#,
            ),
            "depends on unknown feature 'z'",
        ),
        ("/nonexistent/camp.json".to_string(), "camp.json"),
    ];
    for (file, needle) in &cases {
        let o = repo
            .forum()
            .args(["campaign", "declare", "--file", file])
            .output()
            .unwrap();
        one_line_error(&o, needle);
        // Forum: 2 for a file that is not a campaign, 1 for a campaign it rejects.
        let want = if needle.contains('\'') { 1 } else { 2 };
        assert_eq!(o.status.code(), Some(want), "{needle}");
    }
    assert!(repo.git_ok(&["for-each-ref", "refs/forum/"]).is_empty());

    let camp = write(
        "camp.json",
        r#"{"campaign_id": "c", "title": "t", "projects": [{"project_id": "web", "owner": "external:telos", "features": [{"feature_id": "form"}]}]}"#,
    );
    repo.forum_ok(&["campaign", "declare", "--file", &camp]);
    let before = repo.forum_ok(&["status", "--json"]);
    for (extra, needle) in [
        (
            &["--project", "nope", "--status", "done"][..],
            "no project \"nope\"",
        ),
        (
            &["--project", "web", "--feature", "x", "--status", "done"][..],
            "no feature \"x\"",
        ),
        (
            &["--project", "web", "--status", "finished"][..],
            "is not one of",
        ),
    ] {
        let o = repo
            .forum()
            .args(["campaign", "ingest-status", "--source", "external:telos"])
            .args(extra)
            .output()
            .unwrap();
        one_line_error(&o, needle);
        assert_eq!(o.status.code(), Some(2), "{needle}");
    }
    assert_eq!(
        repo.forum_ok(&["status", "--json"]),
        before,
        "nothing recorded"
    );
    // A project-level report is a project_status the room shows on the project.
    let out = repo.forum_ok(&[
        "campaign",
        "ingest-status",
        "--project",
        "web",
        "--status",
        "in_progress",
        "--source",
        "external:telos",
        "--reason",
        "sprint 3",
    ]);
    assert_eq!(out, "{\"ingested\": \"project_status\", \"seq\": 1}\n");
    let room: J = serde_json::from_str(&repo.forum_ok(&["campaign", "status"])).unwrap();
    assert_eq!(room["projects"][0]["reported_status"], "in_progress");
    assert_eq!(room["projects"][0]["reported_source"], "external:telos");
    assert_eq!(room["projects"][0]["reported_reason"], "sprint 3");
    // Only external work: nothing of ours to run, so the campaign is not complete.
    assert_eq!(room["complete"], false);
}

#[test]
fn a_failed_feature_blocks_its_dependents_and_the_run_still_reaches_a_fixed_point() {
    let campaign = json!({"campaign_id": "c", "title": "t", "projects": [
        {"project_id": "p", "owner": "forum", "priority": 1, "features": [
            {"feature_id": "bad", "agent": "backend", "instruction": "will FAILME", "priority": 9},
            {"feature_id": "good", "agent": "backend", "instruction": "will pass", "priority": 8},
            {"feature_id": "dependent", "agent": "backend", "instruction": "needs bad", "priority": 7, "depends_on": ["bad"]},
            {"feature_id": "after", "agent": "backend", "instruction": "needs good", "depends_on": ["good"]}
        ]}
    ]});
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let camp = repo.path().join("c.json");
        std::fs::write(&camp, campaign.to_string()).unwrap();
        let fake = repo.path().join("fake.sh");
        write_script(
            &fake,
            "#!/bin/sh\ncase \"$1\" in *FAILME*) echo 'cannot' >&2; exit 3 ;; *) echo \"did it\" ;; esac\n",
        );
        repo.forum_ok(&["campaign", "declare", "--file", camp.to_str().unwrap()]);
        let room: J = serde_json::from_str(&repo.forum_ok(&[
            "--json",
            "campaign",
            "run",
            "--max-parallel",
            "1",
            "--cmd",
            fake.to_str().unwrap(),
        ]))
        .unwrap();
        let by = |id: &str| {
            room["features"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["feature_id"] == id)
                .unwrap()
                .clone()
        };
        assert_eq!(by("bad")["status"], "failed", "{kind}");
        assert!(
            by("bad")["reason"].as_str().unwrap().starts_with("error:"),
            "{kind}: {}",
            by("bad")["reason"]
        );
        assert_eq!(by("good")["status"], "done", "{kind}");
        assert_eq!(by("after")["status"], "done", "{kind}");
        assert_eq!(by("dependent")["status"], "blocked", "{kind}");
        assert_eq!(
            by("dependent")["reason"],
            "blocked: bad is failed",
            "{kind}"
        );
        assert_eq!(room["complete"], false, "{kind}");
        assert_eq!(room["next_actions"], json!([]), "{kind}");
        let entries = exported(&repo, "main");
        let kinds: Vec<&str> = entries
            .iter()
            .map(|e| e["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "campaign_declared",
                // round 1: bad and good, one at a time
                "campaign_dispatch",
                "plan",
                "task",
                "result",
                "task",
                "result",
                "feature_status",
                "feature_status",
                "feature_status",
                "campaign_result",
                // round 2: after
                "campaign_dispatch",
                "plan",
                "task",
                "result",
                "feature_status",
                "campaign_result",
            ],
            "{kind}"
        );
        // A second run finds nothing runnable and writes nothing.
        let size = repo.forum_ok(&["status", "--json"]);
        repo.forum_ok(&["campaign", "run", "--cmd", fake.to_str().unwrap()]);
        assert_eq!(repo.forum_ok(&["status", "--json"]), size, "{kind}");
        repo.fsck();
    }
}

#[test]
fn the_daemon_and_the_mcp_tools_answer_what_the_cli_answers() {
    let Some(vec) = Vectors::load() else { return };
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let (_, _, fake) = vec.files(repo.path());
        let served = repo.serve(
            &["--ledger", "camp", "--cmd", &fake],
            std::process::Stdio::null(),
        );
        let post = |path: &str, body: J| common::http_json(&served.addr, "POST", path, &body);
        let cli = |args: &[&str]| -> J {
            let all = [&["--ledger", "camp", "campaign"][..], args].concat();
            serde_json::from_str(&repo.forum_ok(&all)).unwrap()
        };
        let (code, body) = post("/campaign/declare", json!({"campaign": vec.v["campaign"]}));
        assert_eq!(
            (code, body),
            (200, json!({"declared": "c-shared", "seq": 0})),
            "{kind}"
        );
        let (code, room) = post("/campaign/status", json!({"campaign_id": "c-shared"}));
        assert_eq!(code, 200, "{kind}");
        assert_eq!(room, cli(&["status"]), "{kind}");
        assert_eq!(
            without_checkpoint(room),
            without_checkpoint(vec.json("status_0")),
            "{kind}"
        );
        let (code, next) = post("/campaign/next", json!({}));
        assert_eq!((code, next), (200, vec.json("next_0")), "{kind}");
        let (code, body) = post(
            "/campaign/ingest-status",
            json!({"project": "web", "feature": "web-form", "status": "in_progress", "source": "external:telos", "reason": "started"}),
        );
        assert_eq!(
            (code, body),
            (200, vec.json("ingest_web_in_progress")),
            "{kind}"
        );
        let (code, room) = post("/campaign/run", json!({"campaign_id": "c-shared"}));
        assert_eq!(code, 200, "{kind}: {room}");
        assert_eq!(
            without_checkpoint(room.clone()),
            without_checkpoint(vec.json("run")),
            "{kind}"
        );
        assert_eq!(room, cli(&["status"]), "{kind}");
        // Refusals: an unknown campaign, a cycle, a field that is not the campaign object.
        let (code, body) = post("/campaign/status", json!({"campaign_id": "nope"}));
        assert_eq!(code, 404, "{kind}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("no campaign 'nope'")
        );
        let (code, body) = post(
            "/campaign/declare",
            json!({"campaign": vec.v["cycle_campaign"]}),
        );
        assert_eq!(code, 422, "{kind}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("dependency cycle among features: ['a', 'b']")
        );
        let (code, _) = post("/campaign/declare", json!({"campaign": "camp.json"}));
        assert_eq!(code, 400, "{kind}");
        drop(served);

        let call = |id: u64, name: &str, args: J| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}}).to_string()
        };
        let lines = [
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
            call(2, "campaign_status", json!({"campaign_id": "c-shared"})),
            call(3, "forum.campaign.next", json!({})),
            call(
                4,
                "campaign_ingest_status",
                json!({"project": "web", "feature": "web-form", "status": "done", "source": "external:telos"}),
            ),
        ];
        let (ok, out) = repo.mcp_batch(&["--ledger", "camp"], &lines);
        assert!(ok, "{kind}: {out}");
        let replies: Vec<J> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let result = |id: u64| {
            replies
                .iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("no reply {id}: {out}"))["result"]["structuredContent"]
                .clone()
        };
        let status_1 = vec.json("status_1");
        assert_eq!(
            without_checkpoint(result(2)),
            without_checkpoint(status_1),
            "{kind}"
        );
        assert_eq!(result(3), vec.json("next_1"), "{kind}");
        assert_eq!(result(4), vec.json("ingest_web_done"), "{kind}");
        assert_eq!(
            without_checkpoint(cli(&["status"])),
            without_checkpoint(vec.json("status_2")),
            "{kind}"
        );
        repo.fsck();
    }
}

#[test]
fn a_round_runs_its_features_side_by_side_and_the_model_call_budget_bounds_it() {
    let campaign = json!({"campaign_id": "wide", "title": "t", "projects": [
        {"project_id": "p", "owner": "forum", "priority": 1, "features": [
            {"feature_id": "f1", "agent": "backend", "instruction": "one", "priority": 3},
            {"feature_id": "f2", "agent": "backend", "instruction": "two", "priority": 2},
            {"feature_id": "f3", "agent": "backend", "instruction": "three", "priority": 1}
        ]}
    ]});
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let camp = repo.path().join("c.json");
        std::fs::write(&camp, campaign.to_string()).unwrap();
        let fake = repo.path().join("fake.sh");
        write_script(&fake, "#!/bin/sh\necho done\n");
        let fake = fake.to_str().unwrap();
        for ledger in ["wide", "capped"] {
            repo.forum_ok(&[
                "--ledger",
                ledger,
                "campaign",
                "declare",
                "--file",
                camp.to_str().unwrap(),
            ]);
        }
        let wide: J = serde_json::from_str(&repo.forum_ok(&[
            "--ledger",
            "wide",
            "--json",
            "campaign",
            "run",
            "--max-parallel",
            "3",
            "--cmd",
            fake,
        ]))
        .unwrap();
        assert_eq!(wide["complete"], true, "{kind}");
        let entries = exported(&repo, "wide");
        let count = |k: &str| entries.iter().filter(|e| e["kind"] == k).count();
        assert_eq!(count("campaign_dispatch"), 1, "{kind}: one round");
        assert_eq!((count("task"), count("result")), (3, 3), "{kind}");
        let plan = entries.iter().find(|e| e["kind"] == "plan").unwrap()["seq"].clone();
        for e in &entries {
            match e["kind"].as_str().unwrap() {
                "task" => assert_eq!(e["causal_parent"], plan, "{kind}"),
                "result" => {
                    let parent = &entries[e["causal_parent"].as_u64().unwrap() as usize];
                    assert_eq!(parent["kind"], "task", "{kind}");
                }
                _ => {}
            }
        }
        // One model call allowed: the highest-priority feature runs, the others fail on the
        // budget, and nothing is runnable after.
        let capped: J = serde_json::from_str(&repo.forum_ok(&[
            "--ledger",
            "capped",
            "--json",
            "campaign",
            "run",
            "--max-parallel",
            "1",
            "--max-model-calls",
            "1",
            "--cmd",
            fake,
        ]))
        .unwrap();
        let states: Vec<(&str, &str)> = capped["features"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["feature_id"].as_str().unwrap(),
                    f["status"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            states,
            [("f1", "done"), ("f2", "failed"), ("f3", "failed")],
            "{kind}"
        );
        assert_eq!(
            capped["features"][1]["reason"], "error: budget exceeded",
            "{kind}"
        );
        repo.fsck();
    }
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
    }
}

/// Polls `done` for up to 60 s; panics with `what` if it never holds.
fn poll(done: impl FnMut() -> bool, what: &str) {
    crate::common::wait_until(what, std::time::Duration::from_secs(60), done);
}

#[test]
fn an_interrupted_campaign_run_kills_its_workers_and_a_second_run_finishes_it() {
    use std::io::Read;
    let campaign = json!({"campaign_id": "c", "title": "t", "projects": [
        {"project_id": "p", "owner": "forum", "features": [
            {"feature_id": "a", "agent": "backend", "instruction": "first"},
            {"feature_id": "b", "agent": "backend", "instruction": "second", "depends_on": ["a"]}
        ]}
    ]});
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let camp = repo.path().join("c.json");
        std::fs::write(&camp, campaign.to_string()).unwrap();
        let pidfile = repo.path().join("worker.pid");
        // The first worker says who it is and sleeps a minute; later ones answer.
        let fake = repo.path().join("fake.sh");
        write_script(
            &fake,
            &format!(
                "#!/bin/sh\nif [ ! -e '{p}' ]; then echo $$ > '{p}.tmp'; mv '{p}.tmp' '{p}'; exec sleep 60; fi\necho done\n",
                p = pidfile.display()
            ),
        );
        let fake = fake.to_str().unwrap();
        repo.forum_ok(&["campaign", "declare", "--file", camp.to_str().unwrap()]);
        let mut child = common::Guarded(
            repo.forum()
                .args(["campaign", "run", "--cmd", fake])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        );
        poll(|| pidfile.exists(), "the worker never started");
        let worker: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(alive(worker));
        let pid = rustix::process::Pid::from_child(&child.0);
        rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
        let mut status = None;
        poll(
            || {
                status = child.0.try_wait().unwrap();
                status.is_some()
            },
            "git forum did not exit",
        );
        assert_eq!(status.unwrap().code(), Some(130), "{kind}");
        let mut err = String::new();
        child
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("interrupted by SIGINT"), "{err}");
        poll(|| !alive(worker), "the worker outlived git forum");
        // Nothing was made up after the task: the feature is still pending.
        let room: J = serde_json::from_str(&repo.forum_ok(&["campaign", "status"])).unwrap();
        assert_eq!(room["features"][0]["status"], "pending", "{kind}");
        repo.forum_ok(&["verify", "--deep"]);
        let room: J =
            serde_json::from_str(&repo.forum_ok(&["--json", "campaign", "run", "--cmd", fake]))
                .unwrap();
        assert_eq!(room["complete"], true, "{kind}: {room}");
        repo.fsck();
    }
}
