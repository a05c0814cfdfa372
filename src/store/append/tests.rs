use std::path::PathBuf;

use super::*;
use crate::ledger::canonical;
use crate::ledger::{Storage as _, StorageError, kind};
use crate::store::handle::APPEND_DEADLINE;
use crate::store::handle::Options;

/// Runs git in `dir` and insists that it succeeds.
fn git(dir: &std::path::Path, args: &[&str]) {
    let out = crate::gitproc::in_dir(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn note(text: &str) -> NewEntry {
    NewEntry {
        actor: "tester".into(),
        kind: kind::NOTE.into(),
        causal_parent: None,
        payload: canonical::parse(&format!("{{\"text\":{text:?}}}")).unwrap(),
        ts: 1_700_000_000.0,
    }
}

#[test]
fn a_lost_compare_and_swap_is_a_conflict_that_carries_the_tip() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    let mut store = GitStore::open(dir.path(), "main", Options::default()).unwrap();
    let first = store.append_entry(&note("one")).unwrap();
    let second = store.append_entry(&note("two")).unwrap();
    // Back to seq 0, so that another writer can move the ref to seq 1 under our feet.
    let refname = store.refname().to_string();
    git(
        dir.path(),
        &["update-ref", &refname, &first.commit.to_string()],
    );
    store.append_deadline = Duration::ZERO;
    let hash = store.object_hash();
    let body = canonical::parse(r#"{"text":"three"}"#).unwrap();
    let new = NewEntry {
        payload: body,
        ..note("three")
    };
    let text = new.validate().unwrap();
    let ph = sha256_hex(text.as_bytes());
    let (before, after) = (first.commit.to_string(), second.commit.to_string());
    let err = store
        .append_with(
            |tip| {
                // Another writer lands seq 1 after this append read the tip at seq 0.
                git(dir.path(), &["update-ref", &refname, &after, &before]);
                let items = [(&new, text.as_bytes(), ph.as_str(), true)];
                let mut built = build_batch(hash, tip, items.into_iter())?;
                built.as_pack = false;
                Ok(built)
            },
            "forum: append note",
        )
        .unwrap_err();
    let StoreError::Conflict(conflict) = &err else {
        panic!("not a conflict: {err:?}");
    };
    assert_eq!(conflict.expected, Some(first.commit));
    assert_eq!(conflict.tip, Some(second.commit));
    assert_eq!(conflict.tip_seq, Some(1));
    let message = err.to_string();
    assert!(!message.contains('\n'), "{message}");
    assert!(
        message.contains(&format!("it stays at seq 1, commit {}", second.commit)),
        "{message}"
    );
    // The ledger's own error type keeps the tip as plain data.
    match StorageError::from(err) {
        StorageError::Conflict { tip_seq, tip, .. } => {
            assert_eq!(tip_seq, Some(1));
            assert_eq!(tip, Some(second.commit.to_string()));
        }
        other => panic!("not a conflict: {other:?}"),
    }
    // Nothing was half written: the ledger is the other writer's, and with time to retry
    // the next append lands on it.
    assert_eq!(store.len().unwrap(), 2);
    store.append_deadline = APPEND_DEADLINE;
    let third = store.append_entry(&note("three")).unwrap();
    assert_eq!(third.entry.seq, 2);
    git(dir.path(), &["fsck", "--strict", "--no-dangling"]);
}

#[test]
fn a_ref_lock_held_by_another_process_gives_a_conflict_at_the_unmoved_tip() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    let mut store = GitStore::open(dir.path(), "main", Options::default()).unwrap();
    let first = store.append_entry(&note("one")).unwrap();
    // A lock some other program holds: fresh, and not one a git-forum writer noted.
    let lock = PathBuf::from(format!("{}.lock", store.ref_path().display()));
    std::fs::write(&lock, format!("{}\n", first.commit)).unwrap();
    store.append_deadline = Duration::ZERO;
    let err = store.append_entry(&note("two")).unwrap_err();
    match &err {
        StoreError::Conflict(c) => {
            assert_eq!(c.expected, Some(first.commit));
            assert_eq!(c.tip, Some(first.commit));
            assert_eq!(c.tip_seq, Some(0));
        }
        other => panic!("not a conflict: {other:?}"),
    }
    assert!(err.to_string().contains(".lock; try again"), "{err}");
    // The lock is never broken: it is not ours to break.
    assert!(lock.exists());
    std::fs::remove_file(&lock).unwrap();
    store.append_deadline = APPEND_DEADLINE;
    assert_eq!(store.append_entry(&note("two")).unwrap().entry.seq, 1);
}
