//! A worker that misbehaves on purpose, through the binary on
//! every repository kind, sandboxed as by default and, where the attack is on git forum's own
//! git rather than on the sandbox, with `--no-sandbox` too. Each case snapshots what belongs to
//! the user (HEAD, the index, every ref outside git forum's, the configuration, the hooks, the
//! status) before and after, and checks that it did not move:
//!
//! * a worker that points its worktree's `.git` link at a repository it made, whose
//!   configuration defines a `clean` filter, and selects that filter for every file: the filter
//!   never runs on the host, and the task fails with the reason recorded;
//! * a worker that points its `.git` link at the user's own git dir: the user's HEAD and index
//!   stay where they were;
//! * a worker's own `.gitattributes` selects no filter, while the filters the user configured
//!   and the base's attributes select still apply;
//! * a nested repository, a FIFO where git would read a `.gitignore`, a Unix socket: refused
//!   before git reads anything (the run does not hang);
//! * a file, a change or a worktree over the limits of `[work]`: refused before any diff;
//! * links out of the worktree: the pre-ship gate blocks the change with the reason recorded;
//! * a change that adds keys: refused before its commit is written, with the file, line, rule
//!   and fingerprint recorded and the key in no object any ref reaches; a key in the plan's
//!   instruction or task id never reaches a commit message or a ref name.

use std::path::Path;

use serde_json::Value as J;

use crate::common::{Repo, on_each_kind};
use crate::work_run::{clean, model, payloads, plan, setup};

/// What belongs to the user and must not move: HEAD, the index's bytes, every ref outside
/// `refs/forum/` and the run branches, the configuration's and the hooks' bytes, the status.
fn user_snapshot(repo: &Repo) -> String {
    let git_dir = repo.git_dir();
    let bytes = |p: &Path| std::fs::read(p).unwrap_or_default();
    let mut hooks: Vec<(String, Vec<u8>)> = std::fs::read_dir(git_dir.join("hooks"))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        bytes(&e.path()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    hooks.sort();
    let refs: Vec<String> = repo
        .git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"])
        .lines()
        .filter(|l| !l.starts_with("refs/forum/") && !l.starts_with("refs/heads/forum/"))
        .map(str::to_string)
        .collect();
    format!(
        "HEAD {} {}\nindex {:?}\nrefs {refs:?}\nconfig {:?}\nhooks {hooks:?}\nstatus {}",
        repo.git_ok(&["symbolic-ref", "HEAD"]),
        repo.git_ok(&["rev-parse", "HEAD"]),
        crate::common::sha256_hex(&bytes(&git_dir.join("index"))),
        String::from_utf8_lossy(&bytes(&git_dir.join("config"))),
        repo.git_ok(&["status", "--porcelain", "--untracked-files=all"]),
    )
}

/// The latest `change` entry of `task`.
fn change_of(repo: &Repo, task: &str) -> J {
    payloads(repo, "change")
        .into_iter()
        .rev()
        .find(|(_, p)| p["task"] == task)
        .map(|(_, p)| p)
        .unwrap_or_else(|| panic!("no change entry for {task}: {:?}", payloads(repo, "change")))
}

/// Runs `submit --work` with `model` as the worker and the checks, plus `extra` flags.
fn submit(repo: &Repo, model: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "submit",
        "--json",
        "--work",
        "--check",
        "python3 -m unittest -q",
    ];
    args.extend_from_slice(extra);
    // The request names what the plans' tasks do (`do T1`, ...), as a planner's plan must.
    args.extend(["--cmd", model, "fix calc: do T1 and the others"]);
    repo.forum().args(&args).output().unwrap()
}

/// A worker shell that does `cases[i].1` when the prompt names task `cases[i].0`'s
/// instruction (each task's instruction is its id).
fn by_task(cases: &[(&str, &str)]) -> String {
    let mut s = String::from("    case \"$p\" in\n");
    for (id, work) in cases {
        s.push_str(&format!("      *\"do {id}\"*) {work} ;;\n"));
    }
    s.push_str("    esac; echo done");
    s
}

/// A plan with one task per case, all in one wave, each instructed `do ID`.
fn plan_of(ids: &[&str]) -> String {
    let tasks: Vec<(String, String)> = ids
        .iter()
        .map(|i| (i.to_string(), format!("do {i}")))
        .collect();
    let refs: Vec<(&str, &str)> = tasks
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    plan(&refs, false)
}

/// Every object reachable from git forum's refs (ledgers, kept and quarantined changes, run
/// branches), as one text: what a `git forum push` could send.
fn forum_objects(repo: &Repo) -> String {
    let listed = repo.git_ok(&[
        "rev-list",
        "--objects",
        "--glob=refs/forum/*",
        "--glob=refs/heads/forum/*",
    ]);
    let ids: String = listed
        .lines()
        .filter_map(|l| l.split(' ').next())
        .map(|id| format!("{id}\n"))
        .collect();
    repo.git_in(&["cat-file", "--batch"], ids.as_bytes())
}

/// What every hostile worker also does: prints a generated key and leaves it in a file.
fn plant(key: &str) -> String {
    format!("echo 'GITHUB_TOKEN={key}'; printf '{key}\\n' > planted.txt; ")
}

/// No object git forum's refs reach, and no ledger body, holds `key`.
fn nowhere(repo: &Repo, key: &str) {
    assert!(
        !forum_objects(repo).contains(key),
        "a planted key is reachable from git forum's refs"
    );
}

#[test]
fn a_rewritten_git_link_runs_no_filter_on_the_host_and_moves_nothing_of_the_users() {
    for sandbox in [None, Some("--no-sandbox")] {
        on_each_kind(|repo| {
            setup(repo);
            let marks = tempfile::tempdir().unwrap();
            let evil = marks.path().join("evil-filter-ran");
            let user_common = repo.git_dir().canonicalize().unwrap();
            let ids = ["T1", "T2"];
            let key = github_token(41);
            let work = by_task(&[
                (
                    "T1",
                    &format!(
                        "{}git init -q evil && git -C evil config filter.x.clean \"touch '{}'; cat\" && printf 'gitdir: %s/evil/.git\\n' \"$PWD\" > .git && printf '* filter=x\\n' > .gitattributes && sed -i 's/return a - b/return a + b/' calc.py",
                        plant(&key),
                        evil.display()
                    ),
                ),
                (
                    "T2",
                    &format!(
                        "printf 'gitdir: {}\\n' > .git && rm -f test_calc.py && sed -i 's/return a - b/return a + b/' calc.py",
                        user_common.display()
                    ),
                ),
            ]);
            let m = model(repo, "model", &plan_of(&ids), "merge", &work);
            let before = user_snapshot(repo);
            let o = submit(repo, &m, sandbox.as_slice());
            assert!(
                o.status.code().is_some(),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(
                !evil.exists(),
                "the worker's filter ran on the host ({sandbox:?})"
            );
            for id in ids {
                let c = change_of(repo, id);
                assert_eq!(c["commit"], J::Null, "{c}");
                assert_eq!(c["refused"], true, "{c}");
                assert!(c["error"].as_str().unwrap().contains(".git link"), "{c}");
            }
            assert_eq!(user_snapshot(repo), before, "{sandbox:?}");
            assert_eq!(
                repo.git_ok(&["for-each-ref", "refs/heads/forum", "refs/forum/work"]),
                ""
            );
            nowhere(repo, &key);
            clean(repo);
        });
    }
}

#[test]
fn attributes_a_worker_writes_select_no_filter_and_the_users_own_still_apply() {
    on_each_kind(|repo| {
        setup(repo);
        let marks = tempfile::tempdir().unwrap();
        let user_mark = marks.path().join("user-filter-ran");
        let worker_mark = marks.path().join("worker-selected-filter-ran");
        // The user's filters, configured before the run: `up` is selected by the base's
        // attributes for *.dat, `up2` by nothing the user wrote.
        for (name, mark) in [("up", &user_mark), ("up2", &worker_mark)] {
            repo.git_ok(&[
                "config",
                &format!("filter.{name}.clean"),
                &format!("sh -c 'touch \"{}\"; cat'", mark.display()),
            ]);
        }
        std::fs::write(repo.path().join(".gitattributes"), "*.dat filter=up\n").unwrap();
        repo.git_ok(&["add", ".gitattributes"]);
        repo.git_ok(&["commit", "-q", "-m", "attributes"]);
        let ids = ["T1", "T2"];
        let work = by_task(&[
            (
                "T1",
                "printf '* filter=up2\\n' > .gitattributes && echo 'x = 1' > extra.py",
            ),
            ("T2", "echo data > new.dat"),
        ]);
        let m = model(repo, "model", &plan_of(&ids), "merge", &work);
        let before = user_snapshot(repo);
        submit(repo, &m, &[]);
        assert!(
            !worker_mark.exists(),
            "a filter the worker's .gitattributes selected ran"
        );
        assert!(user_mark.exists(), "the user's own filter did not run");
        for id in ids {
            let c = change_of(repo, id);
            assert!(c["commit"].is_string(), "{c}");
        }
        assert_eq!(user_snapshot(repo), before);
        clean(repo);
    });
}

#[test]
fn a_nested_repository_a_fifo_and_a_socket_are_refused_before_git_reads_them() {
    on_each_kind(|repo| {
        setup(repo);
        let ids = ["T1", "T2", "T3"];
        let key = github_token(43);
        let vendored = format!(
            "{}git init -q vendored && echo x > vendored/x.txt",
            plant(&key)
        );
        let work = by_task(&[
            ("T1", &vendored),
            ("T2", "rm -f .gitignore && mkfifo .gitignore"),
            (
                "T3",
                "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('agent.sock')\"",
            ),
        ]);
        let m = model(repo, "model", &plan_of(&ids), "merge", &work);
        let before = user_snapshot(repo);
        submit(repo, &m, &[]);
        let why = |id: &str| change_of(repo, id)["error"].as_str().unwrap().to_string();
        assert!(
            why("T1").contains("nested .git at vendored/.git"),
            "{}",
            why("T1")
        );
        assert!(
            why("T2").contains("FIFO") && why("T2").contains(".gitignore"),
            "{}",
            why("T2")
        );
        assert!(why("T3").contains("agent.sock"), "{}", why("T3"));
        for id in ids {
            assert_eq!(change_of(repo, id)["refused"], true);
        }
        assert_eq!(user_snapshot(repo), before);
        nowhere(repo, &key);
        clean(repo);
    });
}

#[test]
fn a_change_over_its_limits_is_refused_before_any_diff() {
    on_each_kind(|repo| {
        setup(repo);
        std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
        std::fs::write(
            repo.path().join(".forum/runtime.toml"),
            "[work]\nmax_file_bytes = 100000\nmax_change_bytes = 150000\nmax_files = 4\nmax_disk_bytes = 1000000\n",
        )
        .unwrap();
        let ids = ["T1", "T2", "T3", "T4"];
        let key = github_token(47);
        let big = format!("{}head -c 200000 /dev/zero > big.bin", plant(&key));
        let work = by_task(&[
            ("T1", &big),
            (
                "T2",
                "head -c 90000 /dev/zero > a.bin && head -c 90000 /dev/zero > b.bin",
            ),
            ("T3", "for i in 1 2 3 4 5 6; do echo $i > f$i.txt; done"),
            (
                "T4",
                "mkdir -p __pycache__ && head -c 2000000 /dev/urandom > __pycache__/junk.bin",
            ),
        ]);
        let m = model(repo, "model", &plan_of(&ids), "merge", &work);
        let before = user_snapshot(repo);
        submit(repo, &m, &[]);
        let why = |id: &str| {
            let c = change_of(repo, id);
            assert_eq!(c["refused"], true, "{c}");
            assert_eq!(c["commit"], J::Null, "{c}");
            c["error"].as_str().unwrap().to_string()
        };
        assert!(
            why("T1").contains("big.bin holds 200000 bytes"),
            "{}",
            why("T1")
        );
        assert!(why("T2").contains("max_change_bytes"), "{}", why("T2"));
        assert!(why("T3").contains("more than 4 files"), "{}", why("T3"));
        assert!(why("T4").contains("max_disk_bytes"), "{}", why("T4"));
        // The limits are on the run's record.
        let req = &payloads(repo, "request")[0].1;
        assert_eq!(req["work"]["limits"]["max_file_bytes"], 100000);
        assert_eq!(req["work"]["limits"]["max_disk_bytes"], 1000000);
        assert_eq!(user_snapshot(repo), before);
        nowhere(repo, &key);
        clean(repo);
    });
}

#[test]
fn links_out_of_the_worktree_are_blocked_by_the_gate_and_never_integrated() {
    on_each_kind(|repo| {
        setup(repo);
        let ids = ["T1", "T2"];
        let work = by_task(&[
            (
                "T1",
                "ln -s /etc/passwd passwd && mkdir -p d && ln -s ../../../../../../.git/hooks/pre-commit d/hook && sed -i 's/return a - b/return a + b/' calc.py",
            ),
            (
                "T2",
                "mkdir -p docs && ln -s ../calc.py docs/calc.py && sed -i 's/return a - b/return a + b/' calc.py",
            ),
        ]);
        let m = model(repo, "model", &plan_of(&ids), "merge", &work);
        let before = user_snapshot(repo);
        submit(repo, &m, &[]);
        let ship: Vec<J> = payloads(repo, "ship").into_iter().map(|(_, p)| p).collect();
        let t1 = ship
            .iter()
            .find(|s| s["task"] == "T1")
            .unwrap_or_else(|| panic!("{ship:?} {:?}", payloads(repo, "change")));
        assert_eq!(t1["decision"], "block", "{t1}");
        assert_eq!(t1["gate"], "guardrail", "{t1}");
        let reason = t1["reason"].as_str().unwrap();
        assert!(
            reason.contains("passwd -> /etc/passwd") && reason.contains("d/hook ->"),
            "{reason}"
        );
        let links = change_of(repo, "T1")["links_out"].clone();
        assert_eq!(links.as_array().unwrap().len(), 2, "{links}");
        // A link that stays inside ships as any change does.
        let t2 = ship.iter().find(|s| s["task"] == "T2").unwrap();
        assert_eq!(t2["decision"], "merge", "{t2}");
        assert!(change_of(repo, "T2").get("links_out").is_none());
        // The blocked change is quarantined, never on the run branch.
        repo.git_ok(&["rev-parse", "refs/forum/quarantine/main/0/T1"]);
        let on_branch = repo.git_ok(&["ls-tree", "-r", "--name-only", "forum/run-0"]);
        assert!(!on_branch.contains("passwd"), "{on_branch}");
        assert!(on_branch.contains("docs/calc.py"), "{on_branch}");
        assert_eq!(user_snapshot(repo), before);
        clean(repo);
    });
}

/// A GitHub token of the real shape (`ghp_` and 36 letters and digits), made at test time.
fn github_token(seed: u64) -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let body: String = (0..36)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            alphabet[(x % alphabet.len() as u64) as usize] as char
        })
        .collect();
    format!("ghp_{body}")
}

/// An AWS access key id of the real shape (`AKIA` and 16 capitals and digits).
fn aws_key(seed: u64) -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut x = seed | 1;
    let body: String = (0..16)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            alphabet[(x % alphabet.len() as u64) as usize] as char
        })
        .collect();
    format!("AKIA{body}")
}

#[test]
fn a_change_that_adds_keys_is_refused_and_no_ref_reaches_them() {
    on_each_kind(|repo| {
        setup(repo);
        // A key the base already had is not the worker's doing: a change beside it ships.
        let old = github_token(1);
        std::fs::write(
            repo.path().join("settings.py"),
            format!("TOKEN = \"{old}\"\n"),
        )
        .unwrap();
        repo.git_ok(&["add", "settings.py"]);
        repo.git_ok(&["commit", "-q", "-m", "settings"]);
        let token = github_token(7);
        let aws = aws_key(11);
        // Task T3's id and instruction carry a key too: neither may reach a ref name or a
        // commit message.
        let id_key = github_token(23);
        let note_key = github_token(29);
        let tasks = [
            ("T1".to_string(), "do T1".to_string()),
            ("T2".to_string(), "do T2".to_string()),
            (id_key.clone(), format!("do T3 with {note_key}")),
        ];
        let refs: Vec<(&str, &str)> = tasks
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let work = by_task(&[
            (
                "T1",
                &format!(
                    "sed -i 's/return a - b/return a + b/' calc.py && printf 'GITHUB = \"{token}\"\\n' >> calc.py && printf 'AWS_ACCESS_KEY_ID={aws}\\n' > .env.local"
                ),
            ),
            ("T2", "printf 'DEBUG = True\\n' >> settings.py"),
            ("T3", "echo '# fine' >> calc.py"),
        ]);
        let m = model(repo, "model", &plan(&refs, false), "merge", &work);
        let before = user_snapshot(repo);
        submit(repo, &m, &[]);
        let c = change_of(repo, "T1");
        assert_eq!(c["commit"], J::Null, "{c}");
        let found = c["secrets"].as_array().unwrap();
        let mut seen: Vec<(String, u64, String)> = found
            .iter()
            .map(|f| {
                assert_eq!(f["fingerprint"].as_str().unwrap().len(), 16, "{f}");
                (
                    f["path"].as_str().unwrap().to_string(),
                    f["line"].as_u64().unwrap(),
                    f["rule"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                (".env.local".to_string(), 1, "aws-access-key".to_string()),
                ("calc.py".to_string(), 7, "github-token".to_string()),
            ]
        );
        // The change beside the base's own key was committed and shipped.
        assert!(change_of(repo, "T2")["commit"].is_string());
        // T3 ran under a name that holds no key, and its commit's message holds none.
        // The record holds the id as the secrets policy writes it: redacted.
        let t3 = change_of(repo, "[REDACTED:github-token]");
        let commit = t3["commit"].as_str().unwrap().to_string();
        let message = repo.git_ok(&["log", "-1", "--format=%B", &commit]);
        assert!(message.contains("[REDACTED:github-token]"), "{message}");
        let kept = repo.git_ok(&["for-each-ref", "--format=%(refname)", "refs/forum/work"]);
        assert!(kept.contains("refs/forum/work/main/0/task-"), "{kept}");
        // No key the worker or the plan planted is reachable from any ref git forum keeps.
        let objects = forum_objects(repo);
        for planted in [&token, &aws, &id_key, &note_key] {
            assert!(
                !objects.contains(planted.as_str()),
                "a planted key is reachable"
            );
            let all_refs = repo.git_ok(&["for-each-ref", "--format=%(refname)"]);
            assert!(!all_refs.contains(planted.as_str()), "{all_refs}");
        }
        assert_eq!(user_snapshot(repo), before);
        clean(repo);
    });
}
