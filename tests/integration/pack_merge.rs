//! Pack merges (`git repack --geometric=2`, once a repository holds more than `MAX_PACKS`
//! packs) run after the writer lock is released, one at a time, while other writers go on:
//! nothing acknowledged is lost, the repository stays whole and packs do not pile up.

use std::collections::BTreeSet;

use git_forum::ledger::{NewEntry, Value};
use git_forum::store::git::{GitStore, MAX_PACKS};

use crate::common::{Repo, on_each_kind};
use crate::storage::verify;

fn note(actor: &str, n: i64) -> NewEntry {
    NewEntry {
        actor: actor.into(),
        kind: "note".into(),
        causal_parent: None,
        payload: Value::int(n),
        ts: 1000.0,
    }
}

fn pack_count(repo: &Repo) -> usize {
    std::fs::read_dir(repo.git_dir().join("objects/pack"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "idx")
        })
        .count()
}

/// Three threads append batches (a pack each, so merges start once there are more than
/// `MAX_PACKS`) while three `git forum append` processes append single entries. Every
/// acknowledged entry is in the ledger once, `verify --deep` and `git fsck` pass, and a last
/// batch, alone, leaves at most `MAX_PACKS + 1` packs where 60 batches made 60.
#[test]
fn packs_merge_while_other_writers_append_and_nothing_is_lost() {
    const BATCHES: i64 = 20;
    const SINGLES: usize = 8;
    on_each_kind(|repo| {
        let acked: Vec<(u64, String)> = std::thread::scope(|s| {
            let mut handles = Vec::new();
            for t in 0..3i64 {
                handles.push(s.spawn(move || {
                    let mut store =
                        GitStore::open(repo.path(), "main", Default::default()).unwrap();
                    let mut acks = Vec::new();
                    for b in 0..BATCHES {
                        let batch = [
                            note("batch", t * 1000 + b * 2),
                            note("batch", t * 1000 + b * 2 + 1),
                        ];
                        for a in store.append_entries(&batch).unwrap() {
                            acks.push((a.entry.seq, a.entry.entry_hash));
                        }
                    }
                    acks
                }));
            }
            for p in 0..3 {
                handles.push(s.spawn(move || {
                    (0..SINGLES)
                        .map(|i| {
                            let v = repo.forum_json(&[
                                "append",
                                "--actor",
                                "single",
                                "--kind",
                                "note",
                                "--payload",
                                &format!("{{\"p\":{p},\"i\":{i}}}"),
                            ]);
                            (
                                v["seq"].as_u64().unwrap(),
                                v["entry_hash"].as_str().unwrap().to_string(),
                            )
                        })
                        .collect::<Vec<_>>()
                }));
            }
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let total = (3 * BATCHES * 2) as usize + 3 * SINGLES;
        assert_eq!(acked.len(), total);
        let seqs: BTreeSet<u64> = acked.iter().map(|a| a.0).collect();
        assert_eq!(
            seqs,
            (0..total as u64).collect(),
            "each seq acknowledged once, no gap"
        );
        let log = repo.forum_json(&["log"]).to_string();
        for (seq, hash) in &acked {
            assert!(
                log.contains(hash.as_str()),
                "acknowledged seq {seq} is in the ledger"
            );
        }
        let v = verify(repo, true);
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(v["entries"], total as u64, "{v}");
        repo.fsck();
        // Alone, the next batch merges whatever a merge running at the end left behind.
        let mut store = GitStore::open(repo.path(), "main", Default::default()).unwrap();
        store.append_entries(&[note("last", 0)]).unwrap();
        drop(store);
        let packs = pack_count(repo);
        assert!(packs <= MAX_PACKS + 1, "{packs} packs after 61 batches");
        let v = verify(repo, true);
        assert_eq!(v["ok"], true, "{v}");
        repo.fsck();
        // No merge is left running, and none was left holding its lock.
        let lock = repo.git_dir().join("forum/locks/.pack-merge.lock");
        let f = std::fs::File::open(&lock).unwrap();
        assert!(f.try_lock_shared().is_ok(), "the merge lock is free");
    });
}
