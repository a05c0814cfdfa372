//! Push and fetch status: the remote copies `fetch` adopted and the last verified checkpoint
//! of each, compared with the local ledger of the same name (`GET /sync`, the MCP
//! `sync_status` tool).

use std::collections::BTreeMap;

use serde::Serialize;

use super::Result;
use crate::ledger::Entry;
use crate::ledger::merkle::merkle_root;
use crate::store::git::{GitStore, Options};

/// The sync machinery's names the transports use to push, fetch and print what happened.
pub(crate) use crate::store::sync::{
    FetchResult, FetchStatus, Git, PushStatus, REMOTES_PREFIX, SEEN_PREFIX, UNVERIFIED_PREFIX,
    check_remote_name, failure_line, fetch, gate_guard, local_ledgers, push,
};

/// A checkpoint of a copy: its size, Merkle root and the commit of its tip.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CopyCheckpoint {
    pub(crate) size: usize,
    pub(crate) root: String,
    pub(crate) commit: String,
}

/// How the local ledger stands against a remote copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Relation {
    /// `fetch` recorded a checkpoint but adopted no copy.
    NotFetched,
    /// The two chains disagree at the last entry they share.
    Diverged,
    InSync,
    /// Entries here that the copy lacks (to push).
    Ahead,
    /// Entries there that are not here.
    Behind,
}

/// One remote copy of one ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RemoteRow {
    pub(crate) remote: String,
    pub(crate) ledger: String,
    /// The copy `fetch` adopted (`refs/forum/remotes/REMOTE/NAME`).
    pub(crate) adopted: Option<CopyCheckpoint>,
    /// The last verified checkpoint (`refs/forum/seen/REMOTE/NAME`).
    pub(crate) seen: Option<CopyCheckpoint>,
    /// Entries in the local ledger of the same name.
    pub(crate) local_size: usize,
    pub(crate) relation: Relation,
    /// Entries here not on the copy; null when that has no meaning (not fetched, diverged).
    pub(crate) ahead: Option<usize>,
    /// Entries there not here; null as `ahead`.
    pub(crate) behind: Option<usize>,
}

/// The served ledger's size and root.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Local {
    pub(crate) size: usize,
    pub(crate) root: String,
}

/// Push and fetch status (`GET /sync`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SyncReport {
    pub(crate) ledger: String,
    pub(crate) local: Local,
    pub(crate) remotes: Vec<RemoteRow>,
}

impl super::Report for SyncReport {
    const SCHEMA: &'static str = "git-forum.sync-status/1";
}

/// The remote copies `fetch` adopted (`refs/forum/remotes/REMOTE/NAME`) and the last
/// verified checkpoint of each (`refs/forum/seen/REMOTE/NAME`), each compared with the local
/// ledger of the same name: `ahead` entries here not on the remote copy (to push), `behind`
/// entries there not here.
///
/// `ledger` is the ledger served, of `local_size` entries with root `local_root`.
pub(crate) fn sync_status(
    shared: &gix::ThreadSafeRepository,
    ledger: &str,
    local_size: usize,
    local_root: &str,
) -> Result<SyncReport> {
    let repo = shared.to_thread_local();
    let git = Git::for_repo(&repo);
    let adopted = git.refs_under(REMOTES_PREFIX)?;
    let seen = git.refs_under(SEEN_PREFIX)?;
    let chain = |refname: &str| -> Result<Vec<Entry>> {
        Ok(GitStore::at_ref(shared.to_thread_local(), refname, Options::default())?.entries()?)
    };
    let mut locals: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    let mut rows = Vec::new();
    for (remote, name) in remote_ledgers(&adopted, &seen) {
        let adopted_ref = format!("{REMOTES_PREFIX}{remote}/{name}");
        let seen_ref = format!("{SEEN_PREFIX}{remote}/{name}");
        let there = match adopted.iter().find(|(r, _)| *r == adopted_ref) {
            Some((r, oid)) => Some((chain(r)?, oid.clone())),
            None => None,
        };
        let seen_cp = match seen.iter().find(|(r, _)| *r == seen_ref) {
            Some((r, oid)) => Some(checkpoint(&chain(r)?, oid)),
            None => None,
        };
        if !locals.contains_key(&name) {
            let local = GitStore::new(shared.to_thread_local(), &name, Options::default())
                .and_then(|s| s.entries())
                .unwrap_or_default();
            locals.insert(name.clone(), local);
        }
        let here = &locals[&name];
        let (relation, ahead, behind) = relation(here, there.as_ref().map(|(t, _)| t.as_slice()));
        rows.push(RemoteRow {
            remote,
            ledger: name,
            adopted: there.as_ref().map(|(t, oid)| checkpoint(t, oid)),
            seen: seen_cp,
            local_size: here.len(),
            relation,
            ahead,
            behind,
        });
    }
    Ok(SyncReport {
        ledger: ledger.to_string(),
        local: Local {
            size: local_size,
            root: local_root.to_string(),
        },
        remotes: rows,
    })
}

/// The (remote, ledger) pairs with an adopted or a seen ref, sorted, each once.
fn remote_ledgers(
    adopted: &[(String, String)],
    seen: &[(String, String)],
) -> Vec<(String, String)> {
    let mut keys: Vec<(String, String)> = adopted
        .iter()
        .chain(seen.iter())
        .filter_map(|(r, _)| {
            let rest = r
                .strip_prefix(REMOTES_PREFIX)
                .or_else(|| r.strip_prefix(SEEN_PREFIX))?;
            let (remote, name) = rest.split_once('/')?;
            Some((remote.to_string(), name.to_string()))
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// A copy's size, Merkle root and commit.
fn checkpoint(entries: &[Entry], commit: &str) -> CopyCheckpoint {
    let hashes: Vec<&str> = entries.iter().map(|e| e.entry_hash.as_str()).collect();
    CopyCheckpoint {
        size: entries.len(),
        root: merkle_root(&hashes),
        commit: commit.to_string(),
    }
}

/// How the local chain stands to the remote's copy (none when not fetched), with how many
/// entries each has that the other lacks when they agree.
fn relation(here: &[Entry], there: Option<&[Entry]>) -> (Relation, Option<usize>, Option<usize>) {
    let Some(t) = there else {
        return (Relation::NotFetched, None, None);
    };
    let common = here.len().min(t.len());
    let agree = common == 0 || here[common - 1].entry_hash == t[common - 1].entry_hash;
    if !agree {
        (Relation::Diverged, None, None)
    } else if here.len() == t.len() {
        (Relation::InSync, Some(0), Some(0))
    } else if here.len() > t.len() {
        (Relation::Ahead, Some(here.len() - t.len()), Some(0))
    } else {
        (Relation::Behind, Some(0), Some(t.len() - here.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_sync_report_is_the_json_it_was() {
        let r = SyncReport {
            ledger: "main".into(),
            local: Local {
                size: 2,
                root: "ab".into(),
            },
            remotes: vec![RemoteRow {
                remote: "origin".into(),
                ledger: "main".into(),
                adopted: None,
                seen: Some(CopyCheckpoint {
                    size: 1,
                    root: "cd".into(),
                    commit: "ef".into(),
                }),
                local_size: 2,
                relation: Relation::NotFetched,
                ahead: None,
                behind: None,
            }],
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"ledger": "main", "local": {"size": 2, "root": "ab"}, "remotes": [{
                "remote": "origin", "ledger": "main", "adopted": null,
                "seen": {"size": 1, "root": "cd", "commit": "ef"}, "local_size": 2,
                "relation": "not_fetched", "ahead": null, "behind": null}]})
        );
    }
}
