//! The record survives what git and crashes do around it: reftable repositories, `git gc`
//! beside appenders, a deleted ref, a writer killed at every step of an append, and ref locks
//! that belong to someone else.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use crate::common::{FORMATS, Repo};

const REF: &str = "refs/forum/ledgers/main";

/// When this machine booted, in seconds since the epoch.
pub fn boot_time_secs() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Runs one append that kills itself (SIGKILL) at step `point`; asserts it died that way.
pub fn killed_append(repo: &Repo, point: &str) {
    killed_append_of(repo, point, "\"lost?\"");
}

/// `git forum append --actor a --kind k --payload PAYLOAD` in `repo`, to run or to spawn.
pub fn append_command(repo: &Repo, payload: &str) -> Command {
    let mut c = repo.forum();
    c.args([
        "append",
        "--actor",
        "a",
        "--kind",
        "k",
        "--payload",
        payload,
    ]);
    c
}

/// Runs one append of `payload` that kills itself (SIGKILL) at step `point`.
pub fn killed_append_of(repo: &Repo, point: &str, payload: &str) {
    let o = append_command(repo, payload)
        .env("GIT_FORUM_FAILPOINT", point)
        .output()
        .unwrap();
    assert!(
        !o.status.success() && o.status.code().is_none(),
        "the append must die at {point}: {o:?}"
    );
}

/// The steps of an append a writer can be killed at (`GIT_FORUM_FAILPOINT`). git's own ref
/// storage (reftable) takes its lock and writes its reflog in one step.
pub fn failpoints(kind: &str) -> &'static [&'static str] {
    if kind == "reftable" {
        &["objects-written", "cas-start", "cas-moved"]
    } else {
        &[
            "objects-written",
            "cas-start",
            "cas-locked",
            "cas-reflog",
            "cas-moved",
        ]
    }
}

pub fn verify(repo: &Repo, deep: bool) -> serde_json::Value {
    let mut args = vec!["verify"];
    if deep {
        args.push("--deep");
    }
    repo.forum_json(&args)
}

pub fn seeded(kind: &str, n: usize) -> Repo {
    let repo = Repo::new(kind);
    for i in 0..n {
        repo.append("agent", "note", &format!("{{\"i\":{i}}}"));
    }
    repo
}

#[test]
fn a_reftable_ledger_is_seen_by_git_and_survives_gc_prune_now() {
    let repo = seeded("reftable", 5);
    assert!(repo.is_reftable());
    // git itself sees the ledger ref and its reflog; no loose ref file was written.
    assert!(!repo.git_dir().join(REF).exists());
    let listed = repo.git_ok(&["for-each-ref", "--format=%(refname)", "refs/forum/ledgers/"]);
    assert_eq!(listed, REF);
    let reflog = repo.git_ok(&["reflog", "show", "--format=%H", REF]);
    assert_eq!(reflog.lines().count(), 5);
    repo.git_ok(&["gc", "--prune=now", "-q"]);
    let r = verify(&repo, true);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["entries"], 5);
    repo.fsck();
    // Appends go on after gc, and a rewind through git is caught from git's reflog.
    repo.append("agent", "note", "{\"i\":5}");
    let ids: Vec<String> = repo
        .git_ok(&["rev-list", "--first-parent", REF])
        .lines()
        .map(str::to_string)
        .collect();
    repo.git_ok(&["update-ref", REF, &ids[2]]);
    let r = verify(&repo, false);
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["code"], "rewound", "{r}");
}

#[test]
fn a_writer_killed_at_any_step_leaves_no_false_alarm_and_no_stuck_lock() {
    for kind in FORMATS {
        for &point in failpoints(kind) {
            let repo = seeded(kind, 3);
            killed_append(&repo, point);
            // The next reader settles the interrupted append: no rewound, no ref-moved.
            let r = verify(&repo, false);
            assert_eq!(r["ok"], true, "{kind} {point}: {r}");
            let n = r["entries"].as_u64().unwrap();
            // The killed append's outcome is unknown to its caller: present at most once.
            let expect = if point == "cas-moved" { 4 } else { 3 };
            assert_eq!(n, expect, "{kind} {point}: {r}");
            let c = repo.forum_json(&["checkpoint"]);
            assert_eq!(c["size"], expect, "{kind} {point}: {c}");
            // The next writer is not blocked by anything the dead one left.
            repo.append("agent", "note", "{\"after\":true}");
            let r = verify(&repo, true);
            assert_eq!(r["ok"], true, "{kind} {point}: {r}");
            assert_eq!(r["entries"], expect + 1, "{kind} {point}: {r}");
            assert!(!repo.git_dir().join(format!("{REF}.lock")).exists());
            repo.fsck();
        }
    }
}

/// A writer killed holding the ref lock, then the next writer killed just before it takes its
/// own: the third still knows the lock for a dead writer's and lands, instead of waiting on it
/// until the deadline.
#[test]
fn a_second_writer_killed_after_the_first_leaves_no_stuck_lock() {
    for kind in FORMATS.iter().filter(|k| **k != "reftable") {
        let repo = seeded(kind, 2);
        // Different payloads: two writers whose entries were the same commit would note the
        // same value, and the third could not tell them apart.
        killed_append_of(&repo, "cas-locked", "\"first\"");
        killed_append_of(&repo, "cas-start", "\"second\"");
        let lock = repo.git_dir().join(format!("{REF}.lock"));
        repo.append("agent", "note", "{\"after\":true}");
        assert!(!lock.exists(), "{kind}");
        let r = verify(&repo, true);
        assert_eq!(r["ok"], true, "{kind}: {r}");
        assert_eq!(r["entries"], 3, "{kind}: {r}");
        repo.fsck();
    }
}

/// A ref transaction that `git update-ref --stdin` holds prepared (its lock taken) is never
/// broken: the append waits, git's own commit then succeeds, and the append lands after it.
#[test]
fn a_lock_held_by_git_update_ref_is_never_broken() {
    let repo = seeded("sha1", 2);
    let tip = repo.git_ok(&["rev-parse", REF]);
    let mut git = Command::new("git")
        .current_dir(repo.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .args(["update-ref", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = git.stdin.take().unwrap();
    let mut out = BufReader::new(git.stdout.take().unwrap());
    writeln!(stdin, "start\nupdate {REF} {tip} {tip}\nprepare").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "start: ok");
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "prepare: ok");
    let lock = repo.git_dir().join(format!("{REF}.lock"));
    assert!(lock.exists(), "git holds the ref lock");
    let mut child = append_command(&repo, "\"waits\"")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Longer than any age rule a lock breaker could use. Kept: the point is that time passes
    // and nothing happens (the lock stays, the append keeps waiting).
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(
        lock.exists(),
        "a live git transaction's lock must not be broken"
    );
    assert!(child.try_wait().unwrap().is_none(), "the append waits");
    writeln!(stdin, "commit").unwrap();
    drop(stdin);
    let status = git.wait().unwrap();
    assert!(status.success(), "git's own commit succeeds");
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let r = verify(&repo, true);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["entries"], 3);
}

#[test]
fn a_deleted_ref_is_not_an_empty_ledger() {
    for kind in ["sha1", "sha256"] {
        let repo = seeded(kind, 3);
        let tip = repo.git_ok(&["rev-parse", REF]);
        std::fs::remove_file(repo.git_dir().join(REF)).unwrap();
        let o = append_command(&repo, "1").output().unwrap();
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("seq 2") && err.contains(&tip), "{err}");
        assert!(
            err.contains("git update-ref") && err.contains("doctor --repair"),
            "{err}"
        );
        // Nothing was written: the ref is still absent.
        assert!(!repo.git_dir().join(REF).exists());
        // The way back the message names works, and the chain is whole.
        repo.git_ok(&["update-ref", REF, &tip]);
        repo.append("a", "k", "1");
        let r = verify(&repo, true);
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["entries"], 4);
    }
    // `git update-ref -d` deletes the reflog with the ref: that is a deliberate deletion, and a
    // new ledger may start there.
    for kind in FORMATS {
        let repo = seeded(kind, 2);
        repo.git_ok(&["update-ref", "-d", REF]);
        repo.append("a", "k", "1");
        assert_eq!(verify(&repo, false)["entries"], 1);
    }
}

/// How many appends each appender makes beside each maintenance loop (CI runs a small loop;
/// `GIT_FORUM_RELIABILITY_N=500 cargo nextest run -E 'test(beside_gc)'` runs a longer one).
fn reliability_n(default: usize) -> usize {
    std::env::var("GIT_FORUM_RELIABILITY_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// git's maintenance commands the appenders run beside.
pub const MAINTENANCE: [&[&str]; 5] = [
    &["gc", "--prune=now", "-q"],
    &["repack", "-a", "-d", "-q"],
    &[
        "-c",
        "gc.auto=1",
        "-c",
        "gc.autoPackLimit=1",
        "-c",
        "gc.autoDetach=false",
        "gc",
        "--auto",
        "-q",
    ],
    &[
        "-c",
        "maintenance.auto=false",
        "maintenance",
        "run",
        "--quiet",
    ],
    &["prune", "--expire=now"],
];

/// Two appenders (`n` appends each) beside `git ARGS` run in a loop: every append is
/// acknowledged, and every acknowledged entry is in the ledger, exactly once, with its body.
/// Returns a line of figures.
pub fn beside_maintenance(kind: &str, args: &[&str], n: usize) -> Result<String, String> {
    let repo = seeded(kind, 2);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (failed, acked, rounds) = std::thread::scope(|s| {
        let gc = s.spawn(|| {
            let mut rounds = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = repo.git(args);
                rounds += 1;
            }
            rounds
        });
        let appenders: Vec<_> = (0..2)
            .map(|w| {
                let repo = &repo;
                s.spawn(move || {
                    let mut failed = Vec::new();
                    let mut acked = Vec::new();
                    for i in 0..n {
                        let o = repo
                            .forum()
                            .args([
                                "append",
                                "--actor",
                                "w",
                                "--kind",
                                "note",
                                "--payload",
                                &format!("{{\"w\":{w},\"i\":{i}}}"),
                                "--json",
                            ])
                            .output()
                            .unwrap();
                        if o.status.success() {
                            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
                            acked.push(v["entry_hash"].as_str().unwrap().to_string());
                        } else {
                            failed.push(String::from_utf8_lossy(&o.stderr).to_string());
                        }
                    }
                    (failed, acked)
                })
            })
            .collect();
        let mut failed = Vec::new();
        let mut acked = Vec::new();
        for a in appenders {
            let (f, k) = a.join().unwrap();
            failed.extend(f);
            acked.extend(k);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (failed, acked, gc.join().unwrap())
    });
    let label = format!("{kind} git {}", args.join(" "));
    if !failed.is_empty() {
        return Err(format!("{label}: failed appends: {failed:?}"));
    }
    // One more maintenance run after the appenders stopped, then every acknowledged
    // entry must be there with its body.
    // A prune whose walk began before an append moved the ref can delete that
    // append's objects after the fact: readers put them back from the write-ahead log.
    let _ = repo.git(args);
    let r = verify(&repo, true);
    if r["ok"] != true {
        return Err(format!("{label}: {r}"));
    }
    let log = repo.forum_json(&["log"]);
    let have: std::collections::HashMap<String, usize> =
        log.as_array()
            .unwrap()
            .iter()
            .fold(Default::default(), |mut m, e| {
                *m.entry(e["entry_hash"].as_str().unwrap().to_string())
                    .or_default() += 1;
                m
            });
    for h in &acked {
        if have.get(h) != Some(&1) {
            return Err(format!("{label}: acknowledged {h} lost or doubled"));
        }
    }
    let fsck = repo.git(&["fsck", "--strict", "--no-progress"]);
    if !fsck.status.success() {
        return Err(format!(
            "{label}: fsck: {}",
            String::from_utf8_lossy(&fsck.stderr)
        ));
    }
    Ok(format!(
        "{label}: {} appends, 0 failed, 0 lost, {rounds} maintenance runs",
        acked.len()
    ))
}

/// Where git keeps the refs (reftable), `git update-ref` refuses to name a commit that a racing
/// prune deleted. Written loose again, the objects could be deleted again on every attempt (a
/// prune run in a loop did that until the append gave up); the next attempt writes them into a
/// pack, which no prune deletes.
#[test]
fn objects_a_prune_deleted_before_git_named_them_come_back_in_a_pack() {
    let repo = seeded("reftable", 2);
    let o = append_command(&repo, "\"pruned\"")
        .env("GIT_FORUM_FAILPOINT", "objects-written")
        .env("GIT_FORUM_FAILPOINT_RUN", "git prune --expire=now")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let tip = repo.git_ok(&["rev-parse", REF]);
    let loose = repo
        .git_dir()
        .join("objects")
        .join(&tip[..2])
        .join(&tip[2..]);
    assert!(
        !loose.exists(),
        "the second attempt wrote the commit loose again"
    );
    repo.git_ok(&["cat-file", "-e", &tip]);
    let r = verify(&repo, true);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["entries"], 3);
    repo.fsck();
}

#[test]
fn appenders_beside_gc_repack_prune_and_maintenance_lose_nothing() {
    let n = reliability_n(12);
    for kind in FORMATS {
        for args in MAINTENANCE {
            let line = beside_maintenance(kind, args, n).unwrap_or_else(|e| panic!("{e}"));
            eprintln!("{line}");
        }
    }
}

/// An object deleted from the store while the write-ahead log still holds it is put back by
/// the next reader, byte for byte, and verify says so; once the log is gone
/// the same damage is reported as a missing object.
#[test]
fn a_deleted_object_the_log_holds_is_restored_and_reported() {
    for kind in FORMATS {
        let repo = seeded(kind, 3);
        let id = repo.git_ok(&["rev-parse", &format!("{REF}~1")]);
        let loose = repo.git_dir().join("objects").join(&id[..2]).join(&id[2..]);
        std::fs::remove_file(&loose).unwrap();
        let r = verify(&repo, true);
        assert_eq!(r["ok"], true, "{kind}: {r}");
        assert!(
            r["notes"].to_string().contains("restored 1 object"),
            "{kind}: {r}"
        );
        assert!(loose.exists());
        repo.fsck();
        drop_log(&repo);
        std::fs::remove_file(&loose).unwrap();
        let r = verify(&repo, false);
        assert_eq!(r["code"], "missing-object", "{kind}: {r}");
        assert_eq!(r["first_bad_seq"], 1, "{kind}: {r}");
    }
}

/// Removes the ledger's write-ahead log, the copy that would otherwise put back an object a
/// test deletes (emptying the log packs its objects, so no git forum command does this).
pub fn drop_log(repo: &Repo) {
    match std::fs::remove_file(repo.git_dir().join("forum/wal/main.wal")) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{e}"),
        _ => {}
    }
}

pub fn loose(repo: &Repo, id: &str) -> std::path::PathBuf {
    repo.git_dir().join("objects").join(&id[..2]).join(&id[2..])
}

fn doctor(repo: &Repo, args: &[&str]) -> (bool, serde_json::Value) {
    let mut a = vec!["doctor", "--json"];
    a.extend_from_slice(args);
    let o = repo.forum().args(&a).output().unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("doctor {args:?}: {e}: {o:?}"));
    assert_eq!(v["ok"], o.status.success(), "{v}");
    (o.status.success(), v)
}

/// Damage done outside git forum (a pruned commit, a damaged object, a deleted ref) is named
/// by seq, and `doctor --repair` puts back exactly what a copy holds: a clone, a Forum export,
/// the write-ahead log. It never writes what no source holds.
#[test]
fn doctor_names_damage_by_seq_and_repairs_it_exactly() {
    for kind in FORMATS {
        // A pruned commit the log no longer holds: a clone holds it.
        let repo = seeded(kind, 5);
        let clone = tempfile::tempdir().unwrap();
        let mirror = clone.path().join("m.git");
        repo.git_ok(&["clone", "-q", "--mirror", ".", mirror.to_str().unwrap()]);
        let export = clone.path().join("export");
        repo.forum_ok(&["export", export.to_str().unwrap()]);
        drop_log(&repo);
        let c2 = repo.git_ok(&["rev-parse", &format!("{REF}~2")]);
        std::fs::remove_file(loose(&repo, &c2)).unwrap();
        let (ok, v) = doctor(&repo, &[]);
        assert!(!ok);
        let f = &v["ledger"]["findings"][0];
        assert_eq!(f["code"], "missing-commit", "{kind}: {v}");
        assert_eq!(f["seq"], 2, "{kind}: {v}");
        assert_eq!(f["repairable"], false, "{kind}: {v}");
        assert_eq!(
            v["install"]["ref_storage"],
            if kind == "reftable" {
                "reftable"
            } else {
                "files"
            }
        );
        // --repair with nothing to copy from changes nothing.
        let (ok, _) = doctor(&repo, &["--repair"]);
        assert!(!ok);
        assert!(!loose(&repo, &c2).exists());
        let (ok, v) = doctor(
            &repo,
            &["--repair", "--from-repo", mirror.to_str().unwrap()],
        );
        assert!(ok, "{kind}: {v}");
        assert_eq!(v["ledger"]["findings"][0]["repaired"], true, "{kind}: {v}");
        assert_eq!(v["ledger"]["verify"]["ok"], true, "{kind}: {v}");
        repo.fsck();

        // A damaged body (the object file overwritten), restored from the export.
        let tree = repo.git_ok(&["rev-parse", &format!("{REF}~1^{{tree}}")]);
        let blob = repo.git_ok(&["rev-parse", &format!("{tree}:payload.json")]);
        let path = loose(&repo, &blob);
        let mut p = std::fs::metadata(&path).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        p.set_readonly(false);
        std::fs::set_permissions(&path, p).unwrap();
        std::fs::write(&path, b"not an object").unwrap();
        let (ok, v) = doctor(&repo, &[]);
        assert!(!ok);
        let f = &v["ledger"]["findings"][0];
        assert_eq!(
            (f["code"].as_str(), f["seq"].as_u64()),
            (Some("missing-body"), Some(3)),
            "{kind}: {v}"
        );
        // An export of another ledger holds no exact copy: nothing is invented.
        let other = seeded(kind, 2);
        let other_export = clone.path().join("other");
        other.forum_ok(&["export", other_export.to_str().unwrap()]);
        let (ok, _) = doctor(
            &repo,
            &["--repair", "--from-export", other_export.to_str().unwrap()],
        );
        assert!(!ok);
        let (ok, v) = doctor(
            &repo,
            &["--repair", "--from-export", export.to_str().unwrap()],
        );
        assert!(ok, "{kind}: {v}");
        assert_eq!(verify(&repo, true)["ok"], true);
        repo.fsck();

        // A pruned tree, restored from a pack file (made before the damage).
        let pack_dir = clone.path().join("pack");
        std::fs::create_dir_all(&pack_dir).unwrap();
        let objects = repo.git_ok(&["rev-list", "--objects", REF]);
        let prefix = pack_dir.join("p");
        repo.git_in(
            &["pack-objects", "-q", prefix.to_str().unwrap()],
            objects.as_bytes(),
        );
        let pack = std::fs::read_dir(&pack_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "pack"))
            .unwrap();
        drop_log(&repo);
        let t4 = repo.git_ok(&["rev-parse", &format!("{REF}^{{tree}}")]);
        std::fs::remove_file(loose(&repo, &t4)).unwrap();
        let (ok, v) = doctor(&repo, &[]);
        assert!(!ok);
        let f = &v["ledger"]["findings"][0];
        assert_eq!(
            (f["code"].as_str(), f["seq"].as_u64()),
            (Some("missing-tree"), Some(4)),
            "{kind}: {v}"
        );
        let (ok, v) = doctor(&repo, &["--repair", "--from-pack", pack.to_str().unwrap()]);
        assert!(ok, "{kind}: {v}");

        // A deleted ref (files: its reflog survives) is put back on its reflog's last tip.
        if kind != "reftable" {
            let tip = repo.git_ok(&["rev-parse", REF]);
            std::fs::remove_file(repo.git_dir().join(REF)).unwrap();
            let (ok, v) = doctor(&repo, &[]);
            assert!(!ok);
            assert_eq!(v["ledger"]["findings"][0]["code"], "ref-deleted", "{v}");
            let (ok, v) = doctor(&repo, &["--repair"]);
            assert!(ok, "{v}");
            assert_eq!(repo.git_ok(&["rev-parse", REF]), tip);
            let r = verify(&repo, true);
            assert_eq!(r["ok"], true, "{r}");
            assert_eq!(r["entries"], 5);
            repo.append("a", "k", "1");
        }
        // Objects the write-ahead log holds come back without any source.
        let fresh = seeded(kind, 3);
        let c1 = fresh.git_ok(&["rev-parse", &format!("{REF}~1")]);
        std::fs::remove_file(loose(&fresh, &c1)).unwrap();
        let (ok, v) = doctor(&fresh, &["--repair"]);
        assert!(ok, "{kind}: {v}");
        assert_eq!(v["ledger"]["restored_objects"], 1, "{kind}: {v}");
    }
}

/// doctor reports the install: git, ref storage, object format, hooks, runtime readiness and
/// whether the configured local model accepts connections.
#[test]
fn doctor_reports_the_install() {
    let repo = seeded("sha256", 1);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::fs::create_dir_all(repo.path().join(".forum")).unwrap();
    std::fs::write(
        repo.path().join(".forum/runtime.toml"),
        format!(
            "[runtime.default]\nchat_url = \"http://127.0.0.1:{port}/v1/chat/completions\"\nmodel = \"m\"\nis_local = true\n"
        ),
    )
    .unwrap();
    repo.forum_ok(&["hooks", "install"]);
    let (_, v) = doctor(&repo, &[]);
    let install = &v["install"];
    assert!(
        install["git"].as_str().unwrap().starts_with("git version"),
        "{v}"
    );
    assert_eq!(install["ref_storage"], "files");
    assert_eq!(install["object_format"], "sha256");
    assert!(install["hooks"].to_string().contains("pre-push"), "{v}");
    assert_eq!(install["local_models"][0]["answers"], true, "{v}");
    drop(listener);
    let (_, v) = doctor(&repo, &[]);
    assert_eq!(v["install"]["local_models"][0]["answers"], false, "{v}");
    let text = repo.forum_ok(&["doctor"]);
    assert!(text.contains("local model: http://127.0.0.1:"), "{text}");
    assert!(text.contains("does not answer"), "{text}");
}

/// Starts `git update-ref --stdin` in `repo` with a transaction on `refname` prepared (its lock
/// taken) and returns the process, still running.
fn prepared_transaction(repo: &Repo, refname: &str) -> std::process::Child {
    let tip = repo.git_ok(&["rev-parse", REF]);
    let mut git = Command::new("git")
        .current_dir(repo.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .args(["update-ref", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = git.stdin.take().unwrap();
    writeln!(stdin, "start\nupdate {refname} {tip}\nprepare").unwrap();
    stdin.flush().unwrap();
    let mut out = BufReader::new(git.stdout.take().unwrap());
    for want in ["start: ok", "prepare: ok"] {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), want);
    }
    // Kept open until the caller is done with the process.
    std::mem::forget(stdin);
    std::mem::forget(out);
    git
}

/// Makes `path` look `secs` seconds old.
fn age(path: &std::path::Path, secs: u64) {
    let t = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// The lock that guards the ledger ref: git's reftable stack lock, or the loose ref's own.
fn guarding_lock(repo: &Repo) -> std::path::PathBuf {
    if repo.is_reftable() {
        repo.git_dir().join("reftable/tables.list.lock")
    } else {
        repo.git_dir().join(format!("{REF}.lock"))
    }
}

/// A git killed while it held the lock that guards the ledger ref leaves it behind. The next
/// append says, in one line, which lock blocks it (git's `reftable/tables.list.lock` in a
/// reftable repository, never a loose ref lock that does not exist there), how old it is and
/// how to clear it, without waiting out its deadline; doctor reports it with its age and exits
/// 1; `doctor --repair` removes it; appends go on.
#[test]
fn a_lock_left_by_a_killed_git_is_named_reported_and_repaired() {
    for kind in FORMATS {
        let repo = seeded(kind, 2);
        let tip = repo.git_ok(&["rev-parse", REF]);
        let lock = guarding_lock(&repo);
        let mut git = prepared_transaction(&repo, REF);
        assert!(lock.exists(), "{kind}: git holds {}", lock.display());
        crate::reliability::kill(&mut git);
        assert!(lock.exists(), "{kind}: the killed git left its lock");
        age(&lock, 300);
        let o = append_command(&repo, "1").output().unwrap();
        let err = crate::common::one_line_error(&o, &lock.display().to_string());
        assert!(err.contains("no process holds it"), "{kind}: {err}");
        assert!(err.contains("5m old"), "{kind}: {err}");
        assert!(err.contains("git forum doctor --repair"), "{kind}: {err}");
        if kind == "reftable" {
            assert!(!err.contains("main.lock"), "{kind}: {err}");
        }
        assert_eq!(
            repo.git_ok(&["rev-parse", REF]),
            tip,
            "{kind}: the ref moved"
        );
        // doctor names it with its age and fails; without --repair nothing changes.
        let (ok, v) = doctor(&repo, &[]);
        assert!(!ok, "{kind}: {v}");
        let l = &v["locks"][0];
        assert_eq!(l["path"], lock.display().to_string(), "{kind}: {v}");
        assert_eq!(l["stale"], true, "{kind}: {v}");
        assert!(l["age_secs"].as_u64().unwrap() >= 300, "{kind}: {v}");
        assert_eq!(l["removed"], false, "{kind}: {v}");
        assert!(lock.exists());
        let text = repo.forum().arg("doctor").output().unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(
            text.contains(&format!(
                "lock {}: 5m old and no process holds it",
                lock.display()
            )),
            "{kind}: {text}"
        );
        let (ok, v) = doctor(&repo, &["--repair"]);
        assert!(ok, "{kind}: {v}");
        assert_eq!(v["locks"][0]["removed"], true, "{kind}: {v}");
        assert!(!lock.exists(), "{kind}: --repair removed it");
        repo.append("a", "k", "1");
        let r = verify(&repo, true);
        assert_eq!(r["ok"], true, "{kind}: {r}");
        assert_eq!(r["entries"], 3, "{kind}: {r}");
        repo.fsck();
    }
}

/// A lock a live git holds is reported as held and never removed, however old it looks; the
/// append waits for it and lands once git lets go.
/// Where git keeps the refs (reftable), git moves the ledger ref in its own process. A writer
/// killed while its `git update-ref` runs leaves the ledger's writer lock held until that git
/// exits: otherwise the next writer could read the ref before the dead writer's update landed
/// and its reflog after, and take a ledger being created for a deleted one.
#[test]
fn a_writer_killed_while_git_moves_its_ref_keeps_the_lock_until_git_is_done() {
    use std::time::Duration;
    let repo = seeded("reftable", 2);
    let (inside, gate) = (repo.path().join("inside"), repo.path().join("gate"));
    // git's reference-transaction hook: once the ledger's update is prepared (git holds its
    // stack lock), it says so and waits for the gate (at most a minute, and no longer than the
    // repository is there).
    let hooks = repo.git_dir().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("reference-transaction");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\n[ \"$1\" = prepared ] || exit 0\ngrep -q '{REF}' || exit 0\n: > '{i}'\nn=0\nwhile [ ! -e '{g}' ] && [ -e '{i}' ] && [ $n -lt 3000 ]; do sleep 0.02; n=$((n+1)); done\n",
            i = inside.display(),
            g = gate.display()
        ),
    )
    .unwrap();
    let chmod = Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    assert!(chmod.success());
    let mut writer = append_command(&repo, "\"killed\"")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // However the test ends, the hook stops waiting (else its git would outlive the test).
    struct Open<'a>(&'a std::path::Path);
    impl Drop for Open<'_> {
        fn drop(&mut self) {
            let _ = std::fs::write(self.0, "");
        }
    }
    let _open = Open(&gate);
    let waited = Duration::from_secs(60);
    crate::common::wait_until("git's update of the ledger ref prepared", waited, || {
        inside.exists()
    });
    writer.kill().unwrap();
    writer.wait().unwrap();
    // The writer is gone and its git is in the middle of the update: the lock stays held.
    let lock = std::fs::File::open(repo.git_dir().join("forum/locks/main.lock")).unwrap();
    assert!(
        matches!(lock.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
        "the writer lock was free while the dead writer's git was still moving the ref"
    );
    // Once git is done the update has landed, and the lock is free.
    std::fs::write(&gate, "").unwrap();
    crate::common::wait_until("the writer lock freed once git is done", waited, || {
        lock.try_lock().is_ok()
    });
    lock.unlock().unwrap();
    std::fs::remove_file(&hook).unwrap();
    repo.append("a", "k", "\"after\"");
    let r = verify(&repo, true);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["entries"], 4, "the killed writer's update landed: {r}");
    repo.fsck();
}

#[test]
fn a_lock_a_live_git_holds_is_left_alone() {
    for kind in ["sha1", "reftable"] {
        let repo = seeded(kind, 2);
        let lock = guarding_lock(&repo);
        let mut git = prepared_transaction(&repo, REF);
        age(&lock, 300);
        let (ok, v) = doctor(&repo, &["--repair"]);
        assert!(ok, "{kind}: a held lock is no failure: {v}");
        let l = &v["locks"][0];
        assert_eq!(l["stale"], false, "{kind}: {v}");
        assert_eq!(l["removed"], false, "{kind}: {v}");
        assert!(
            l["holders"].to_string().contains(&git.id().to_string()),
            "{kind}: {v}"
        );
        assert!(lock.exists(), "{kind}: a live git's lock was removed");
        let mut child = append_command(&repo, "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Kept: the point is that time passes and the append still waits (there is no event
        // to wait for when nothing happens).
        std::thread::sleep(std::time::Duration::from_secs(2));
        assert!(
            child.try_wait().unwrap().is_none(),
            "{kind}: the append waits"
        );
        assert!(lock.exists(), "{kind}: the append broke a live git's lock");
        // The transaction is abandoned (its stdin closes): git removes its lock and exits.
        drop(git.stdin.take());
        crate::reliability::kill(&mut git);
        if lock.exists() {
            // Killed before it could roll back: nobody holds it now.
            std::fs::remove_file(&lock).unwrap();
        }
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{kind}: {o:?}");
        assert_eq!(verify(&repo, true)["entries"], 3, "{kind}");
    }
}

/// A ref overwritten outside git forum: doctor names the reflog's last tip that verifies, and
/// `--repair` puts the ref back there when that loses nothing (the tip extends what the ref
/// holds, or the ref holds no valid ledger); a ref that holds another valid chain is reported
/// and left for a person to decide.
#[test]
fn doctor_offers_the_reflogs_last_good_tip_after_the_ref_was_overwritten() {
    for kind in FORMATS {
        // Rewound: the ref put back two entries.
        let repo = seeded(kind, 5);
        let tip = repo.git_ok(&["rev-parse", REF]);
        let back = repo.git_ok(&["rev-parse", &format!("{REF}~2")]);
        repo.git_ok(&["update-ref", REF, &back]);
        assert_eq!(verify(&repo, false)["code"], "rewound", "{kind}");
        let (ok, v) = doctor(&repo, &[]);
        assert!(!ok, "{kind}: {v}");
        let f = &v["ledger"]["findings"][0];
        assert_eq!(f["code"], "ref-rewound", "{kind}: {v}");
        assert_eq!(f["seq"], 4, "{kind}: {v}");
        assert_eq!(f["repairable"], true, "{kind}: {v}");
        assert!(f["remedy"].as_str().unwrap().contains(&tip), "{kind}: {v}");
        assert_eq!(
            repo.git_ok(&["rev-parse", REF]),
            back,
            "{kind}: doctor moved the ref"
        );
        let (ok, v) = doctor(&repo, &["--repair"]);
        assert!(ok, "{kind}: {v}");
        assert_eq!(v["ledger"]["findings"][0]["repaired"], true, "{kind}: {v}");
        assert_eq!(repo.git_ok(&["rev-parse", REF]), tip, "{kind}");
        let r = verify(&repo, true);
        assert_eq!(
            (r["ok"].clone(), r["entries"].clone()),
            (true.into(), 5.into()),
            "{kind}: {r}"
        );
        assert_eq!(repo.append("a", "k", "1")["seq"], 5, "{kind}");
        repo.fsck();

        // Overwritten with a commit that is no ledger entry at all.
        let repo = seeded(kind, 3);
        let tip = repo.git_ok(&["rev-parse", REF]);
        repo.git_ok(&["commit", "-q", "--allow-empty", "-m", "code"]);
        let code = repo.git_ok(&["rev-parse", "HEAD"]);
        repo.git_ok(&["update-ref", REF, &code]);
        let (ok, v) = doctor(&repo, &[]);
        assert!(!ok, "{kind}: {v}");
        let f = &v["ledger"]["findings"][0];
        assert_eq!(f["code"], "ref-overwritten", "{kind}: {v}");
        assert_eq!(f["seq"], 2, "{kind}: {v}");
        assert!(f["remedy"].as_str().unwrap().contains(&code), "{kind}: {v}");
        let (ok, v) = doctor(&repo, &["--repair"]);
        assert!(ok, "{kind}: {v}");
        assert_eq!(repo.git_ok(&["rev-parse", REF]), tip, "{kind}");
        assert_eq!(verify(&repo, true)["ok"], true, "{kind}");
        assert_eq!(repo.append("a", "k", "1")["seq"], 3, "{kind}");
        repo.fsck();

        // Pointed at another ledger's valid chain: putting the ref back would drop its
        // entries, so doctor reports both and changes nothing.
        let repo = seeded(kind, 3);
        let tip = repo.git_ok(&["rev-parse", REF]);
        for i in 0..2 {
            repo.forum_ok(&[
                "--ledger",
                "other",
                "append",
                "--actor",
                "o",
                "--kind",
                "k",
                "--payload",
                &i.to_string(),
            ]);
        }
        let other = repo.git_ok(&["rev-parse", "refs/forum/ledgers/other"]);
        repo.git_ok(&["update-ref", REF, &other]);
        let (ok, v) = doctor(&repo, &["--repair"]);
        assert!(!ok, "{kind}: {v}");
        let f = &v["ledger"]["findings"][0];
        assert_eq!(f["code"], "ref-forked", "{kind}: {v}");
        assert_eq!(f["repairable"], false, "{kind}: {v}");
        assert_eq!(f["repaired"], false, "{kind}: {v}");
        let remedy = f["remedy"].as_str().unwrap();
        assert!(
            remedy.contains(&tip) && remedy.contains(&other),
            "{kind}: {v}"
        );
        assert_eq!(
            repo.git_ok(&["rev-parse", REF]),
            other,
            "{kind}: the ref moved"
        );
    }
}
