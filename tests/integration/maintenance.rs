//! No acknowledged entry is lost beside git's maintenance (`git prune --expire=now`, `git gc
//! --prune=now`, `git repack -ad`), on files/SHA-1, files/SHA-256 and reftable repositories.
//!
//! `git prune` lists what the refs reach, then deletes every other loose object; with
//! `--expire=now` it spares none, however new. A prune that listed the refs between an
//! append's object write and its ref move therefore deletes the append's objects after the
//! move, whenever it gets to them. The fast tests below stage that race exactly, through the
//! failpoint hook (`GIT_FORUM_FAILPOINT=STEP` with `GIT_FORUM_FAILPOINT_RUN=COMMAND` runs the
//! command at that step instead of killing the writer): at `objects-written` the command takes
//! a *stale view*, a git dir that shares the repository's objects but copies its refs and
//! reflogs as they stand then (the list such a prune made); later, `git --git-dir VIEW prune
//! --expire=now` (or `gc --prune=now`) deletes what that list did not reach, as the prune
//! would.
//!
//! The long runs (several appenders through the CLI, the daemon and MCP beside loops of prune,
//! gc and repack for tens of seconds) are the `heavy_` tests at the end; `cargo bench --bench
//! reliability` runs them at length.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{FORMATS, Repo, one_line_error};

const REF: &str = "refs/forum/ledgers/main";

/// The shell command that makes `view` a stale view of the repository it runs in (see the
/// module doc): refs, reflogs, `packed-refs` or `reftable/`, HEAD and config copied, objects
/// shared.
pub fn snapshot_command(view: &Path) -> String {
    let v = view.display();
    format!(
        "set -e; mkdir -p '{v}'; cp .git/HEAD .git/config '{v}/'; \
         for d in refs logs reftable packed-refs; do \
           if [ -e .git/$d ]; then cp -R .git/$d '{v}/'; fi; \
         done; \
         find '{v}' -name '*.lock' -delete; \
         ln -s \"$PWD/.git/objects\" '{v}/objects'"
    )
}

/// Runs `git --git-dir VIEW ARGS` in `repo` and insists that it succeeds.
pub fn git_in_view(repo: &Repo, view: &Path, args: &[&str]) {
    let mut all = vec!["--git-dir", view.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = repo.git(&all);
    assert!(
        o.status.success(),
        "git {all:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// One append of `payload` with `command` run at `step` (see the module doc).
fn append_with_command(repo: &Repo, step: &str, command: &str, payload: &str) -> Output {
    repo.forum()
        .env("GIT_FORUM_FAILPOINT", step)
        .env("GIT_FORUM_FAILPOINT_RUN", command)
        .args([
            "append",
            "--actor",
            "a",
            "--kind",
            "note",
            "--payload",
            payload,
            "--json",
        ])
        .output()
        .unwrap()
}

/// Appends `payload` while a stale view is taken between its object write and its ref move;
/// returns the acknowledged commit and the view.
fn append_seen_stale(repo: &Repo, scratch: &Path, payload: &str) -> (String, PathBuf) {
    let view = scratch.join("view.git");
    let o = append_with_command(repo, "objects-written", &snapshot_command(&view), payload);
    assert!(
        o.status.success(),
        "the append failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(view.join("objects").exists(), "the view was not taken");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    (v["commit"].as_str().unwrap().to_string(), view)
}

/// What is wrong with the acknowledged entry `commit`, asked of git alone (no git forum command
/// runs, so nothing is put back first): its commit, tree and body must be present and, with
/// `fsck`, `git fsck --strict` clean. `None` when all is well.
pub fn damage(repo: &Repo, commit: &str, fsck: bool) -> Option<String> {
    let missing: Vec<String> = [
        commit.to_string(),
        format!("{commit}^{{tree}}"),
        format!("{commit}:payload.json"),
    ]
    .into_iter()
    .filter(|spec| !repo.git(&["cat-file", "-e", spec]).status.success())
    .collect();
    let complaints: Vec<String> = if fsck {
        let o = repo.git(&["fsck", "--strict", "--no-dangling", "--no-progress"]);
        let mut c: Vec<String> = String::from_utf8_lossy(&o.stderr)
            .lines()
            .chain(String::from_utf8_lossy(&o.stdout).lines())
            .filter(|l| !l.starts_with("notice:"))
            .map(str::to_string)
            .collect();
        if !o.status.success() && c.is_empty() {
            c.push(format!("exit {:?}", o.status.code()));
        }
        c
    } else {
        Vec::new()
    };
    if missing.is_empty() && complaints.is_empty() {
        return None;
    }
    Some(format!(
        "missing {missing:?}; fsck: {}",
        complaints.join(" | ")
    ))
}

/// Runs `case` on the three kinds of repository and fails naming every kind it failed on.
fn on_each_kind(what: &str, case: impl Fn(&str) -> Result<(), String>) {
    let failures: Vec<String> = FORMATS
        .iter()
        .filter_map(|kind| case(kind).err().map(|e| format!("{kind}: {e}")))
        .collect();
    assert!(failures.is_empty(), "{what}:\n{}", failures.join("\n"));
}

/// The next append and `verify --deep` go through, and fsck is clean.
fn goes_on(repo: &Repo, entries: u64) -> Result<(), String> {
    repo.append("b", "note", "{\"after\":true}");
    let r = crate::storage::verify(repo, true);
    if r["ok"] != true || r["entries"] != entries {
        return Err(format!("verify --deep: {r}"));
    }
    repo.fsck();
    Ok(())
}

/// A prune (or gc) that runs whole between the object write and the ref move deletes the new
/// objects before the ref names them: the append writes them again and lands.
fn whole_maintenance_between_write_and_move(kind: &str, command: &str) -> Result<(), String> {
    let repo = crate::storage::seeded(kind, 3);
    let o = append_with_command(&repo, "objects-written", command, "{\"raced\":true}");
    if !o.status.success() {
        return Err(format!(
            "the append failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    if let Some(d) = damage(&repo, v["commit"].as_str().unwrap(), true) {
        return Err(format!("acknowledged, then: {d}"));
    }
    goes_on(&repo, 5)
}

#[test]
fn a_prune_between_the_object_write_and_the_ref_move_loses_nothing() {
    on_each_kind("git prune --expire=now at objects-written", |kind| {
        whole_maintenance_between_write_and_move(kind, "git prune --expire=now")
    });
}

#[test]
fn a_gc_between_the_object_write_and_the_ref_move_loses_nothing() {
    on_each_kind("git gc --prune=now at objects-written", |kind| {
        whole_maintenance_between_write_and_move(kind, "git gc --prune=now -q")
    });
}

/// The loss the review saw: a prune that listed the refs between an append's object write and
/// its ref move deletes the objects later, after the write-ahead log was emptied (today by
/// `git forum sync`, a full log, a batch or a redaction). Now `sync` leaves the log its
/// records, and emptying the log packs what it held first: a prune never deletes from a pack.
/// `before` runs at the object write too (a gc's repack, which lists the refs as it starts,
/// before the prune that follows it does); `between` runs after the append and before the late
/// prune; `then` says what must hold afterwards.
fn late_prune(
    kind: &str,
    before: &str,
    between: impl Fn(&Repo),
    then: impl Fn(&Repo, &str) -> Result<(), String>,
) -> Result<(), String> {
    let repo = crate::storage::seeded(kind, 3);
    let scratch = tempfile::tempdir().unwrap();
    let view = scratch.path().join("view.git");
    let o = append_with_command(
        &repo,
        "objects-written",
        &format!("{before}{}", snapshot_command(&view)),
        "{\"raced\":true}",
    );
    if !o.status.success() {
        return Err(format!(
            "the append failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let commit = v["commit"].as_str().unwrap().to_string();
    between(&repo);
    git_in_view(&repo, &view, &["prune", "--expire=now"]);
    then(&repo, &commit)
}

/// After `sync` and the late prune, the log still holds what the prune deleted: the next
/// reader puts it back.
fn restored_by_the_next_reader(repo: &Repo, commit: &str) -> Result<(), String> {
    let r = crate::storage::verify(repo, true);
    if r["ok"] != true || r["entries"] != 4 {
        return Err(format!("verify --deep after sync and the late prune: {r}"));
    }
    if let Some(d) = damage(repo, commit, true) {
        return Err(format!("after verify put back what the log holds: {d}"));
    }
    goes_on(repo, 5)
}

#[test]
fn a_prune_that_listed_the_refs_before_the_move_loses_nothing_across_sync() {
    on_each_kind("a late prune after sync", |kind| {
        late_prune(
            kind,
            "",
            |repo| {
                repo.forum_ok(&["sync"]);
            },
            restored_by_the_next_reader,
        )
    });
}

#[test]
fn a_gc_that_began_before_the_move_loses_nothing_across_sync() {
    on_each_kind("a gc whose prune ends after sync", |kind| {
        late_prune(
            kind,
            "git gc --prune=now -q; ",
            |repo| {
                repo.forum_ok(&["sync"]);
            },
            restored_by_the_next_reader,
        )
    });
}

/// A redaction empties the log: what it held is packed first, so the late prune finds
/// nothing to delete (git alone sees the entry whole).
#[test]
fn a_late_prune_deletes_nothing_once_a_redaction_empties_the_log() {
    on_each_kind("a late prune after a redaction", |kind| {
        late_prune(
            kind,
            "",
            |repo| {
                let hash = repo.forum_json(&["show", "0"])["payload_hash"]
                    .as_str()
                    .unwrap()
                    .to_string();
                repo.forum_ok(&["redact", &hash, "--reason", "test"]);
            },
            |repo, _| {
                // The redaction rewrote the commits: the raced entry is seq 3 of the new chain.
                let commit = repo.git_ok(&["rev-parse", &format!("{REF}~1")]);
                if let Some(d) = damage(repo, &commit, true) {
                    return Err(format!("after the redaction and the late prune: {d}"));
                }
                goes_on(repo, 6)
            },
        )
    });
}

/// Incompressible text of about `n` bytes (hex of a xorshift stream), so a few appends fill a
/// small write-ahead log.
fn noise(seed: u64, n: usize) -> String {
    let mut x = seed.max(1);
    let mut s = String::with_capacity(n);
    while s.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!("{x:016x}"));
    }
    s
}

/// The same race when the log empties because it is full, not because of `sync`.
#[test]
fn a_late_prune_deletes_nothing_once_a_full_log_is_emptied() {
    on_each_kind("a late prune after the log filled", |kind| {
        let repo = crate::storage::seeded(kind, 1);
        repo.git_ok(&["config", "forum.walSize", "64k"]);
        let scratch = tempfile::tempdir().unwrap();
        let (commit, view) = append_seen_stale(&repo, scratch.path(), "{\"raced\":true}");
        // 16 KiB of noise deflates to about 8 KiB: ten appends overflow 64 KiB.
        for i in 0..10 {
            repo.append("filler", "note", &format!("{:?}", noise(i + 1, 16 << 10)));
        }
        // The late prune also deletes the fillers, which the new generation of the log holds:
        // the next append puts back what it builds on, verify the rest.
        git_in_view(&repo, &view, &["prune", "--expire=now"]);
        if let Some(d) = damage(&repo, &commit, false) {
            return Err(format!("after the log filled and a late prune: {d}"));
        }
        goes_on(&repo, 13)
    });
}

/// A late prune that deleted part of the newest entry (its tree and body: a prune walks the
/// object directories in order and may reach some of an append's objects before the rest) is
/// put right by the next append before it builds on that entry.
#[test]
fn the_next_append_puts_back_what_a_late_prune_deleted_before_building_on_it() {
    on_each_kind("an append after a late partial prune", |kind| {
        let repo = crate::storage::seeded(kind, 3);
        let c = repo.git_ok(&["rev-parse", REF]);
        let ids: Vec<String> = [format!("{c}^{{tree}}"), format!("{c}:payload.json")]
            .iter()
            .map(|spec| repo.git_ok(&["rev-parse", spec]))
            .collect();
        for id in &ids {
            std::fs::remove_file(crate::storage::loose(&repo, id)).unwrap();
        }
        repo.append("b", "note", "{\"after\":true}");
        if let Some(d) = damage(&repo, &c, true) {
            return Err(format!("the next append built on a damaged entry: {d}"));
        }
        let r = crate::storage::verify(&repo, true);
        if r["ok"] != true || r["entries"] != 4 {
            return Err(format!("verify --deep: {r}"));
        }
        repo.fsck();
        Ok(())
    });
}

/// With no copy anywhere (the log is gone too), the append refuses in one line naming the
/// damage and `git forum doctor`, and appends nothing.
#[test]
fn an_append_refuses_to_build_on_an_entry_nothing_can_restore() {
    for kind in FORMATS {
        let repo = crate::storage::seeded(kind, 3);
        let c = repo.git_ok(&["rev-parse", REF]);
        let tree = repo.git_ok(&["rev-parse", &format!("{c}^{{tree}}")]);
        std::fs::remove_file(crate::storage::loose(&repo, &tree)).unwrap();
        std::fs::remove_file(repo.git_dir().join("forum/wal/main.wal")).unwrap();
        let o = repo
            .forum()
            .args(["append", "--actor", "a", "--kind", "k", "--payload", "1"])
            .output()
            .unwrap();
        let err = one_line_error(&o, "git forum doctor");
        assert!(
            err.contains(&tree) && err.contains("seq 2"),
            "{kind}: {err}"
        );
        assert!(err.contains("nothing was appended"), "{kind}: {err}");
        assert_eq!(repo.git_ok(&["rev-parse", REF]), c, "{kind}: the ref moved");
        // doctor names it by seq.
        let d = repo.forum().args(["doctor", "--json"]).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap();
        assert_eq!(v["ledger"]["findings"][0]["code"], "missing-tree", "{v}");
        assert_eq!(v["ledger"]["findings"][0]["seq"], 2, "{v}");
    }
}

/// git's maintenance commands the long runs loop beside the appenders.
pub const LOOPS: [&[&str]; 3] = [
    &["prune", "--expire=now"],
    &["gc", "--prune=now", "-q"],
    &["repack", "-a", "-d", "-q"],
];

/// What one long run saw.
#[derive(Debug, Default, Clone)]
pub struct LoopFigures {
    /// Appends acknowledged through the CLI, the daemon and MCP.
    pub cli: usize,
    pub daemon: usize,
    pub mcp: usize,
    /// Acknowledged entries missing from the ledger afterwards (0, or the run failed).
    pub lost: usize,
    /// How many times each of [`LOOPS`] ran.
    pub iterations: Vec<usize>,
    /// Objects git found missing before any git forum command ran afterwards: deleted by a
    /// prune that listed the refs before an append moved its ref, and put back from the
    /// write-ahead log by the next reader.
    pub holes_seen: usize,
    pub entries: u64,
    pub seconds: f64,
}

impl LoopFigures {
    pub fn acknowledged(&self) -> usize {
        self.cli + self.daemon + self.mcp
    }

    /// One line of figures.
    pub fn line(&self) -> String {
        let loops: Vec<String> = LOOPS
            .iter()
            .zip(&self.iterations)
            .map(|(args, n)| format!("{n}× git {}", args.join(" ")))
            .collect();
        format!(
            "{} appends acknowledged ({} CLI, {} daemon, {} MCP), {} lost, {} entries, {}; {} object(s) a late prune deleted put back from the log; verify --deep and fsck --strict clean; {:.1}s",
            self.acknowledged(),
            self.cli,
            self.daemon,
            self.mcp,
            self.lost,
            self.entries,
            loops.join(", "),
            self.holes_seen,
            self.seconds
        )
    }
}

/// Appenders through the CLI (two processes at a time), the daemon and MCP, for `secs`
/// seconds beside a loop of each of [`LOOPS`] on a `kind` repository whose write-ahead log is
/// small (64 KiB, so it fills and is emptied many times). Afterwards: every
/// acknowledged append is in the ledger exactly once, `verify --deep` passes and `git fsck
/// --strict` is clean. Any failed append fails the run.
pub fn beside_loops(kind: &str, secs: f64) -> Result<LoopFigures, String> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let repo = crate::storage::seeded(kind, 2);
    // A small write-ahead log fills (and so is emptied) every hundred-odd appends: the run
    // empties it many times while the loops delete what they can.
    repo.git_ok(&["config", "forum.walSize", "64k"]);
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let stop = AtomicBool::new(false);
    let mut figures = LoopFigures::default();
    // Per client: its source and its acknowledged (payload, entry hash) pairs, or why it failed.
    type Outcome = Result<(String, Vec<(String, String)>), String>;
    let (iterations, outcomes): (Vec<usize>, Vec<Outcome>) = std::thread::scope(|s| {
        let loops: Vec<_> = LOOPS
            .iter()
            .map(|args| {
                let (repo, stop) = (&repo, &stop);
                s.spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let _ = repo.git(args);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let body = |src: &str, i: usize| format!("{{\"src\":\"{src}\",\"i\":{i}}}");
        let mut clients = Vec::new();
        for name in ["cli0", "cli1"] {
            let repo = &repo;
            clients.push(s.spawn(move || {
                let mut acked = Vec::new();
                let mut i = 0;
                while Instant::now() < until {
                    let key = body(name, i);
                    let o = repo
                        .forum()
                        .args([
                            "append",
                            "--actor",
                            name,
                            "--kind",
                            "note",
                            "--payload",
                            &key,
                            "--json",
                        ])
                        .output()
                        .unwrap();
                    if !o.status.success() {
                        return Err(format!(
                            "{name} append {i} failed: {}",
                            String::from_utf8_lossy(&o.stderr).trim()
                        ));
                    }
                    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
                    acked.push((key, v["entry_hash"].as_str().unwrap().to_string()));
                    i += 1;
                }
                Ok(("cli".to_string(), acked))
            }));
        }
        {
            let repo = &repo;
            clients.push(s.spawn(move || {
                let served = crate::reliability::start_daemon(repo);
                let mut acked = Vec::new();
                let mut i = 0;
                while Instant::now() < until {
                    let key = body("http", i);
                    let request =
                        format!("{{\"actor\":\"http\",\"kind\":\"note\",\"payload\":{key}}}");
                    match crate::reliability::post_append(&served.addr, &request) {
                        Some((200, text)) => {
                            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                            acked.push((key, v["entry_hash"].as_str().unwrap().to_string()));
                        }
                        other => return Err(format!("POST /append {i}: {other:?}")),
                    }
                    i += 1;
                }
                drop(served);
                Ok(("daemon".to_string(), acked))
            }));
        }
        {
            let repo = &repo;
            clients.push(s.spawn(move || {
                let mut mcp = crate::reliability::start_mcp(repo);
                let mut acked = Vec::new();
                let mut i = 0;
                let mut failure = None;
                while Instant::now() < until {
                    let key = body("mcp", i);
                    match mcp.append(i + 1, "mcp", &key, Duration::from_secs(60)) {
                        Some(Ok(h)) => acked.push((key, h)),
                        other => {
                            failure = Some(format!("MCP append {i}: {other:?}"));
                            break;
                        }
                    }
                    i += 1;
                }
                crate::reliability::kill(&mut mcp.child);
                match failure {
                    Some(f) => Err(f),
                    None => Ok(("mcp".to_string(), acked)),
                }
            }));
        }
        let outcomes: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        let iterations = loops.into_iter().map(|l| l.join().unwrap()).collect();
        (iterations, outcomes)
    });
    figures.iterations = iterations;
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut errors = Vec::new();
    for o in outcomes {
        match o {
            Ok((source, a)) => {
                match source.as_str() {
                    "cli" => figures.cli += a.len(),
                    "daemon" => figures.daemon += a.len(),
                    _ => figures.mcp += a.len(),
                }
                acked.extend(a);
            }
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(format!("{kind}: failed appends: {errors:?}"));
    }
    // What git alone sees before any git forum command runs: holes a late prune left.
    let fsck = repo.git(&[
        "fsck",
        "--connectivity-only",
        "--no-dangling",
        "--no-progress",
    ]);
    figures.holes_seen = String::from_utf8_lossy(&fsck.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&fsck.stderr).lines())
        .filter(|l| l.starts_with("missing "))
        .count();
    let r = crate::storage::verify(&repo, true);
    if r["ok"] != true {
        return Err(format!("{kind}: verify --deep: {r}"));
    }
    // Every acknowledged entry once, with its hash (the log reads through the write-ahead
    // log where a late prune deleted something).
    let o = repo.forum().args(["log", "--json"]).output().unwrap();
    let log: serde_json::Value = serde_json::from_slice(&o.stdout).map_err(|_| {
        format!(
            "{kind}: git forum log: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )
    })?;
    let mut have: std::collections::HashMap<String, usize> = Default::default();
    for e in log.as_array().unwrap() {
        *have
            .entry(e["entry_hash"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    figures.entries = log.as_array().unwrap().len() as u64;
    let missing: Vec<&(String, String)> = acked
        .iter()
        .filter(|(_, h)| have.get(h) != Some(&1))
        .collect();
    figures.lost = missing.len();
    if !missing.is_empty() {
        return Err(format!(
            "{kind}: {} acknowledged entries lost or doubled, first {:?}",
            missing.len(),
            missing[0]
        ));
    }
    if figures.entries as usize != acked.len() + 2 {
        return Err(format!(
            "{kind}: the ledger holds {} entries, {} were acknowledged (plus 2 seeded)",
            figures.entries,
            acked.len()
        ));
    }

    let fsck = repo.git(&["fsck", "--strict", "--no-progress"]);
    let err = String::from_utf8_lossy(&fsck.stderr);
    if !fsck.status.success() || err.contains("error") || err.contains("warning") {
        return Err(format!("{kind}: fsck --strict: {err}"));
    }
    figures.seconds = start.elapsed().as_secs_f64();
    Ok(figures)
}

/// How long each long run lasts (`GIT_FORUM_LOOP_SECONDS`, default 25: the review lost entries
/// within 20 to 30 seconds).
pub fn loop_seconds() -> f64 {
    std::env::var("GIT_FORUM_LOOP_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25.0)
}

#[test]
fn heavy_appenders_beside_prune_gc_and_repack_loops_lose_nothing() {
    let secs = loop_seconds();
    let mut failures = Vec::new();
    for kind in FORMATS {
        match beside_loops(kind, secs) {
            Ok(f) => eprintln!("{kind}: {}", f.line()),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
