//! A lost compare-and-swap on the ledger ref, through the real binary: the append gives up
//! with one line that says where the ledger stays, and nothing is half written.

use crate::common::{Repo, one_line_error};

#[test]
fn an_append_that_cannot_move_a_locked_ref_says_where_the_ledger_stays() {
    let repo = Repo::new("sha1");
    repo.append("a", "note", "\"one\"");
    let tip = repo.git_ok(&["rev-parse", "refs/forum/ledgers/main"]);
    let tip = tip.trim();
    // git's ref lock, taken by a program that is not git forum (as `git update-ref --stdin`
    // holds one open): git forum never breaks it, so the append keeps losing until it gives up.
    let lock = repo.git_dir().join("refs/forum/ledgers/main.lock");
    std::fs::write(&lock, format!("{tip}\n")).unwrap();
    let o = repo
        .forum()
        .args([
            "append",
            "--actor",
            "b",
            "--kind",
            "note",
            "--payload",
            "\"two\"",
        ])
        .output()
        .unwrap();
    let err = one_line_error(&o, &format!("(it stays at seq 0, commit {tip})"));
    assert!(err.contains("main.lock; try again"), "{err}");
    assert!(lock.exists(), "the other program's lock was broken");
    // Nothing moved, and once the other program lets go the next append lands.
    assert_eq!(
        repo.git_ok(&["rev-parse", "refs/forum/ledgers/main"])
            .trim(),
        tip
    );
    std::fs::remove_file(&lock).unwrap();
    assert_eq!(repo.append("b", "note", "\"two\"")["seq"], 1);
    repo.fsck();
}
