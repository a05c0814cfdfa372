//! No acknowledged entry is lost beside git's maintenance (`git prune --expire=now`, `git gc
//! --prune=now`, `git repack -ad`), on files/SHA-1, files/SHA-256 and reftable repositories.
//!
//! The fast tests put a prune or a gc at one chosen step of an append through the failpoint
//! hook (`GIT_FORUM_FAILPOINT=STEP` with `GIT_FORUM_FAILPOINT_RUN=COMMAND`, which runs the
//! command there instead of killing the writer). Two moments matter:
//!
//! - between the object write and the ref move, a plain prune or gc: it sees the new objects
//!   unreachable and deletes them before the ref names them;
//! - after the ref move and before the acknowledgement, a prune or gc in a *stale view*: a git
//!   dir that shares the repository's objects but holds its refs as they were before the append
//!   began. That is exactly what a prune whose walk listed the objects as unreachable before the
//!   ref moved does when it deletes them after.
//!
//! After the acknowledgement, and before any other git forum command can put anything back,
//! every object of the entry must be in the repository and `git fsck --strict` clean.
//!
//! The long runs (several appenders through the CLI, the daemon and MCP beside loops of prune,
//! gc and repack for tens of seconds) are the `heavy_` tests at the end, and `cargo bench
//! --bench reliability` runs them at length.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{FORMATS, Repo};

const REF: &str = "refs/forum/ledgers/main";

/// A git dir at `dir` that shares `repo`'s objects but holds a copy of its refs, reflogs and
/// config as they are now (files or reftable). git run there later sees the ledger where it is
/// now, whatever happens to the real refs meanwhile.
pub fn stale_view(repo: &Repo, dir: &Path) -> PathBuf {
    let src = repo.git_dir();
    let view = dir.join("view.git");
    std::fs::create_dir_all(&view).unwrap();
    for name in ["HEAD", "config", "packed-refs"] {
        if src.join(name).exists() {
            std::fs::copy(src.join(name), view.join(name)).unwrap();
        }
    }
    for name in ["refs", "logs", "reftable"] {
        if src.join(name).exists() {
            copy_tree(&src.join(name), &view.join(name));
        }
    }
    std::os::unix::fs::symlink(src.join("objects"), view.join("objects")).unwrap();
    view
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else if !e.file_name().to_string_lossy().ends_with(".lock") {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
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

/// What is wrong with the acknowledged entry `commit`, asked of git alone (no git forum command
/// runs, so nothing is put back first): its commit, tree and body must be present, the ref must
/// name it, and `git fsck --strict` must be clean. `None` when all is well.
pub fn damage_after_ack(repo: &Repo, commit: &str) -> Option<String> {
    let mut missing = Vec::new();
    for spec in [
        commit.to_string(),
        format!("{commit}^{{tree}}"),
        format!("{commit}:payload.json"),
    ] {
        if !repo.git(&["cat-file", "-e", &spec]).status.success() {
            missing.push(spec);
        }
    }
    let at = repo.git(&["rev-parse", "--verify", "--quiet", REF]);
    let tip = String::from_utf8_lossy(&at.stdout).trim().to_string();
    let fsck = repo.git(&["fsck", "--strict", "--no-dangling", "--no-progress"]);
    let fsck_out = format!(
        "{}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    let fsck_bad = fsck_out
        .lines()
        .filter(|l| !l.starts_with("notice:"))
        .collect::<Vec<_>>();
    if missing.is_empty() && tip == commit && fsck.status.success() && fsck_bad.is_empty() {
        return None;
    }
    Some(format!(
        "missing {missing:?}; ref at {tip:?} (acknowledged {commit}); fsck: {}",
        fsck_bad.join(" | ")
    ))
}

/// Runs the append with `command` at `step` on a ledger of three entries, then checks the
/// acknowledged entry with git alone, then that the next append and `verify --deep` pass.
fn survives(kind: &str, step: &str, command: impl Fn(&Path) -> String) -> Result<(), String> {
    let repo = crate::storage::seeded(kind, 3);
    let scratch = tempfile::tempdir().unwrap();
    let command = command(&stale_view(&repo, scratch.path()));
    let o = append_with_command(&repo, step, &command, "{\"raced\":true}");
    if !o.status.success() {
        return Err(format!(
            "the append failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let commit = v["commit"].as_str().unwrap().to_string();
    if let Some(d) = damage_after_ack(&repo, &commit) {
        return Err(format!("acknowledged at seq {}, then: {d}", v["seq"]));
    }
    repo.append("b", "note", "{\"after\":true}");
    let r = crate::storage::verify(&repo, true);
    if r["ok"] != true || r["entries"] != 5 {
        return Err(format!("verify --deep: {r}"));
    }
    repo.fsck();
    Ok(())
}

/// Runs `case` on the three kinds of repository and fails naming every kind it failed on.
fn on_each_kind(what: &str, case: impl Fn(&str) -> Result<(), String>) {
    let failures: Vec<String> = FORMATS
        .iter()
        .filter_map(|kind| case(kind).err().map(|e| format!("{kind}: {e}")))
        .collect();
    assert!(failures.is_empty(), "{what}:\n{}", failures.join("\n"));
}

#[test]
fn a_prune_between_the_object_write_and_the_ref_move_loses_nothing() {
    on_each_kind("git prune --expire=now at objects-written", |kind| {
        survives(kind, "objects-written", |_| {
            "git prune --expire=now".to_string()
        })
    });
}

#[test]
fn a_gc_between_the_object_write_and_the_ref_move_loses_nothing() {
    on_each_kind("git gc --prune=now at objects-written", |kind| {
        survives(kind, "objects-written", |_| {
            "git gc --prune=now -q".to_string()
        })
    });
}

#[test]
fn a_prune_that_listed_the_objects_before_the_ref_moved_deletes_nothing_after() {
    on_each_kind("a stale-view prune after the ref moved", |kind| {
        survives(kind, "appended", |view| {
            format!("git --git-dir '{}' prune --expire=now", view.display())
        })
    });
}

#[test]
fn a_gc_that_listed_the_objects_before_the_ref_moved_deletes_nothing_after() {
    on_each_kind("a stale-view gc after the ref moved", |kind| {
        survives(kind, "appended", |view| {
            format!("git --git-dir '{}' gc --prune=now -q", view.display())
        })
    });
}
