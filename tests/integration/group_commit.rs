//! Durable appends from several processes at once: one flush of the write-ahead log covers
//! every appender waiting on it (group commit), no append is acknowledged before a flush that
//! covers it, and a writer killed between its record and the flush loses only itself.

use std::collections::BTreeSet;

use crate::common::{Repo, on_each_kind};
use crate::storage::{killed_append_of, verify};

const REF: &str = "refs/forum/ledgers/main";

/// `git forum append` of `payload`, its report.
fn append_json(repo: &Repo, payload: &str) -> serde_json::Value {
    let o = repo
        .forum()
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
        .unwrap();
    assert!(
        o.status.success(),
        "append {payload}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Four processes at a time, five appends each, on each kind of repository: every append
/// acknowledged is in the ledger once, with its entry hash, the seqs run without a gap, and
/// deep verify passes.
#[test]
fn appends_from_several_processes_at_once_are_all_in_the_ledger() {
    const WRITERS: usize = 4;
    const EACH: usize = 5;
    on_each_kind(|repo| {
        let acked: Vec<serde_json::Value> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..WRITERS)
                .map(|w| {
                    s.spawn(move || {
                        (0..EACH)
                            .map(|i| append_json(repo, &format!("{{\"w\":{w},\"i\":{i}}}")))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let total = WRITERS * EACH;
        let seqs: BTreeSet<u64> = acked.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs.len(), total, "every acknowledged seq is distinct");
        assert_eq!(
            seqs,
            (0..total as u64).collect(),
            "the seqs run without a gap"
        );
        let log = repo.forum_json(&["log"]);
        let text = log.to_string();
        for r in &acked {
            let hash = r["entry_hash"].as_str().unwrap();
            assert!(text.contains(hash), "acknowledged entry {r} is in the log");
        }
        let v = verify(repo, true);
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(v["entries"], total as u64, "{v}");
        repo.fsck();
    });
}

/// Makes the ledger's write-ahead log look as if it was written before a reboot (its header
/// names another boot), so the next command recovers from it.
fn as_if_rebooted(repo: &Repo) {
    let path = repo.git_dir().join("forum/wal/main.wal");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[24..60].copy_from_slice(b"00000000-0000-0000-0000-000000000000");
    let crc = crc32fast::hash(&bytes[..124]);
    bytes[124..128].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
}

fn loose(repo: &Repo, id: &str) -> std::path::PathBuf {
    repo.git_dir().join("objects").join(&id[..2]).join(&id[2..])
}

/// A writer killed after its record is in the log but before a flush covered it (at
/// `wal-logged`, the writer lock already released, and at `wal-flush`, holding the flush
/// lock) was never acknowledged. The next writer is not held up by the locks it left. If the
/// machine then lost power and the record never reached the disk, the recovery leaves the
/// ledger as it was before that append; if the record did reach it, the append is kept. Either
/// way the ledger verifies.
#[test]
fn a_writer_killed_between_its_record_and_the_flush_is_not_acknowledged() {
    for kind in ["sha1", "sha256"] {
        for point in ["wal-logged", "wal-flush"] {
            for record_lost in [false, true] {
                let at = format!("{kind} {point} record lost: {record_lost}");
                let repo = crate::storage::seeded(kind, 3);
                let wal = repo.git_dir().join("forum/wal/main.wal");
                let before = std::fs::read(&wal).unwrap();
                let reflog = repo.git_dir().join("logs").join(REF);
                let reflog_before = std::fs::read(&reflog).unwrap();
                killed_append_of(&repo, point, "\"killed\"");
                // Its ref moved (every process sees it), but nobody was told it landed.
                let tip = repo.git_ok(&["rev-parse", REF]);
                assert_eq!(
                    repo.git_ok(&["rev-list", "--count", REF]),
                    "4",
                    "{at}: the ref moved before the flush"
                );
                if record_lost {
                    // A power loss image: the log as it was before the killed append, and its
                    // unflushed files (objects, reflog line) gone.
                    let tree = repo.git_ok(&["rev-parse", &format!("{tip}^{{tree}}")]);
                    let blob = repo.git_ok(&["rev-parse", &format!("{tip}:payload.json")]);
                    for id in [&tip, &tree, &blob] {
                        std::fs::remove_file(loose(&repo, id)).unwrap();
                    }
                    std::fs::write(&wal, &before).unwrap();
                    std::fs::write(&reflog, &reflog_before).unwrap();
                }
                as_if_rebooted(&repo);
                let r = verify(&repo, true);
                assert_eq!(r["ok"], true, "{at}: {r}");
                let expect = if record_lost { 3 } else { 4 };
                assert_eq!(r["entries"], expect, "{at}: {r}");
                // The next writer is held by nothing the dead one left.
                let next = append_json(&repo, "\"after\"");
                assert_eq!(next["seq"], expect, "{at}");
                let r = verify(&repo, true);
                assert_eq!(r["ok"], true, "{at}: {r}");
                assert_eq!(r["entries"], expect + 1, "{at}: {r}");
                repo.fsck();
            }
        }
    }
}

/// After a reboot the log puts the ledger's ref back on its last logged tip. A process killed
/// while it holds the ref's lock for that (failpoint `recover-ref-locked`) left a lock no
/// later writer would touch: each append waited on it and gave up. The recovery notes its
/// lock first, as an append does, so the next command removes it and recovers again.
#[test]
fn a_recovery_killed_holding_the_ref_lock_does_not_stop_the_next_writer() {
    for kind in ["sha1", "sha256"] {
        let repo = crate::storage::seeded(kind, 3);
        let _ = append_json(&repo, "\"logged\"");
        let tip = repo.git_ok(&["rev-parse", REF]);
        // The disk lost the ref's last move, as a power loss can: the log holds it still.
        let before = repo.git_ok(&["rev-parse", &format!("{REF}~1")]);
        std::fs::write(repo.git_dir().join(REF), format!("{before}\n")).unwrap();
        as_if_rebooted(&repo);
        let o = repo
            .forum()
            .env("GIT_FORUM_FAILPOINT", "recover-ref-locked")
            .args(["verify"])
            .output()
            .unwrap();
        assert!(
            o.status.code().is_none(),
            "{kind}: the recovery must die: {o:?}"
        );
        assert!(
            repo.git_dir().join(format!("{REF}.lock")).exists(),
            "{kind}"
        );
        let next = append_json(&repo, "\"after\"");
        assert_eq!(next["seq"], 4, "{kind}: {next}");
        assert_eq!(
            repo.git_ok(&["rev-parse", &format!("{REF}~1")]),
            tip,
            "{kind}"
        );
        let r = verify(&repo, true);
        assert_eq!(
            (r["ok"].as_bool(), r["entries"].as_u64()),
            (Some(true), Some(5)),
            "{kind}: {r}"
        );
        repo.fsck();
    }
}
