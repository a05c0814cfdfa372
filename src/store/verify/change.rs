//! `verify --deep` on the `change` entries of `--work` runs: the record and the code must point
//! at each other. For each `change` entry that names a commit, the commit must exist, its tree
//! must be the entry's `tree`, and its trailers (`Forum-Task: SEQ`, `Forum-Entry: HASH`) must
//! name an earlier entry of this ledger by its seq and entry hash.
//!
//! The claim (commit and tree) is read from the body on the worker threads, where the body is
//! already in hand (`body::change_claim`); the commits are looked up after the chain and the
//! bodies passed.

use gix::ObjectId;
use gix::objs::Kind;

use super::body::Rec;
use super::code::{Code, Problem};
use crate::ledger::hash;
use crate::store::git::{GitStore, StoreError, parse_commit};

/// The trailer naming the task entry's seq (as `crate::run::workbench` writes it).
const TASK_TRAILER: &str = "Forum-Task";
/// The trailer naming the task entry's hash.
const ENTRY_TRAILER: &str = "Forum-Entry";

/// The value of the last `KEY: value` line of a message's final paragraph.
fn trailer<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    let last = message.trim_end().rsplit("\n\n").next()?;
    last.lines()
        .rev()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

/// The first `change` entry among `recs` from index `from` whose commit does not match it (the
/// entries it names may be anywhere before it).
pub(super) fn check_changes(
    store: &GitStore,
    recs: &[Rec],
    from: usize,
) -> Result<Option<Problem>, StoreError> {
    let hash_kind = store.object_hash();
    let mut buf = Vec::new();
    for (i, r) in recs.iter().enumerate().skip(from) {
        let Some(claim) = r.extra.as_ref().and_then(|x| x.change.as_ref()) else {
            continue;
        };
        let seq = i as u64;
        let Ok(id) = ObjectId::from_hex(claim.commit.as_bytes()) else {
            return Ok(Some((
                seq,
                Code::ChangeCommitMissing,
                format!("its commit {:?} is not an object id", claim.commit),
            )));
        };
        let missing = |what: &str| {
            Ok(Some((
                seq,
                Code::ChangeCommitMissing,
                format!(
                    "its change commit {id} {what}; fetch the run's refs/forum/work refs (git forum fetch) or restore the commit"
                ),
            )))
        };
        if id.kind() != hash_kind {
            return missing("is not an object id of this repository's hash");
        }
        match store.read_raw(&id, &mut buf)? {
            Some(Kind::Commit) => {}
            Some(_) => return missing("is not a commit"),
            None => return missing("is not in the repository"),
        }
        let Some(raw) = parse_commit(&buf, hash_kind) else {
            return missing("cannot be read as a commit");
        };
        if ObjectId::from_hex(claim.tree.as_bytes()).ok() != Some(raw.tree) {
            return Ok(Some((
                seq,
                Code::ChangeTreeMismatch,
                format!(
                    "its change commit {id} has tree {}, but the entry says {}: the commit or the entry was altered",
                    raw.tree, claim.tree
                ),
            )));
        }
        let message = String::from_utf8_lossy(raw.message);
        let task = trailer(&message, TASK_TRAILER).and_then(|s| s.parse::<u64>().ok());
        let entry = trailer(&message, ENTRY_TRAILER);
        let names = match (task, entry) {
            (Some(t), Some(h)) if t < seq => recs
                .get(t as usize)
                .is_some_and(|task_rec| hash::hex(&task_rec.entry_hash) == h),
            _ => false,
        };
        if !names {
            return Ok(Some((
                seq,
                Code::ChangeUntied,
                format!(
                    "its change commit {id} does not name an earlier entry of this ledger in its {TASK_TRAILER} and {ENTRY_TRAILER} trailers"
                ),
            )));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::super::body::{ChangeClaim, change_claim};
    use super::*;

    #[test]
    fn the_claim_and_the_trailers_are_read() {
        assert_eq!(
            change_claim(br#"{"commit":"ab","tree":"cd"}"#),
            Some(ChangeClaim {
                commit: "ab".into(),
                tree: "cd".into()
            })
        );
        assert_eq!(change_claim(br#"{"commit":null,"tree":"cd"}"#), None);
        let m = "subject\n\nbody\n\nForum-Ledger: main\nForum-Task: 3\nForum-Entry: ff\n";
        assert_eq!(trailer(m, "Forum-Task"), Some("3"));
        assert_eq!(trailer(m, "Forum-Entry"), Some("ff"));
        assert_eq!(trailer("no trailers", "Forum-Task"), None);
    }
}
