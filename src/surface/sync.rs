//! Push and fetch status: the remote copies `fetch` adopted and the last verified checkpoint
//! of each, compared with the local ledger of the same name (`GET /sync`, the MCP
//! `sync_status` tool).

use std::collections::BTreeMap;

use serde_json::{Value as J, json};

use super::Result;
use crate::ledger::Entry;
use crate::ledger::merkle::merkle_root;
use crate::store::git::{GitStore, Options};
use crate::store::sync::{Git, REMOTES_PREFIX, SEEN_PREFIX};

/// The remote copies `fetch` adopted (`refs/forum/remotes/REMOTE/NAME`) and the last
/// verified checkpoint of each (`refs/forum/seen/REMOTE/NAME`), each compared with the local
/// ledger of the same name: `ahead` entries here not on the remote copy (to push), `behind`
/// entries there not here.
///
/// `ledger` is the ledger served, of `local_size` entries with root `local_root`.
pub fn sync_status(
    shared: &gix::ThreadSafeRepository,
    ledger: &str,
    local_size: usize,
    local_root: &str,
) -> Result<J> {
    let repo = shared.to_thread_local();
    let git = Git::for_repo(&repo);
    let adopted = git.refs_under(REMOTES_PREFIX)?;
    let seen = git.refs_under(SEEN_PREFIX)?;
    let chain = |refname: &str| -> Result<Vec<Entry>> {
        Ok(GitStore::at_ref(shared.to_thread_local(), refname, Options::default())?.entries()?)
    };
    let cp = |entries: &[Entry], commit: &str| {
        let hashes: Vec<&str> = entries.iter().map(|e| e.entry_hash.as_str()).collect();
        json!({"size": entries.len(), "root": merkle_root(&hashes), "commit": commit})
    };
    let mut locals: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    let mut rows = Vec::new();
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
    for (remote, name) in keys {
        let adopted_ref = format!("{REMOTES_PREFIX}{remote}/{name}");
        let seen_ref = format!("{SEEN_PREFIX}{remote}/{name}");
        let there = match adopted.iter().find(|(r, _)| *r == adopted_ref) {
            Some((r, oid)) => Some((chain(r)?, oid.clone())),
            None => None,
        };
        let seen_cp = match seen.iter().find(|(r, _)| *r == seen_ref) {
            Some((r, oid)) => Some(cp(&chain(r)?, oid)),
            None => None,
        };
        if !locals.contains_key(&name) {
            let local = GitStore::new(shared.to_thread_local(), &name, Options::default())
                .and_then(|s| s.entries())
                .unwrap_or_default();
            locals.insert(name.clone(), local);
        }
        let here = &locals[&name];
        let (relation, ahead, behind) = match &there {
            None => ("not_fetched", J::Null, J::Null),
            Some((t, _)) => {
                let common = here.len().min(t.len());
                let agree = common == 0 || here[common - 1].entry_hash == t[common - 1].entry_hash;
                if !agree {
                    ("diverged", J::Null, J::Null)
                } else if here.len() == t.len() {
                    ("in_sync", json!(0), json!(0))
                } else if here.len() > t.len() {
                    ("ahead", json!(here.len() - t.len()), json!(0))
                } else {
                    ("behind", json!(0), json!(t.len() - here.len()))
                }
            }
        };
        rows.push(json!({
            "remote": remote,
            "ledger": name,
            "adopted": there.as_ref().map(|(t, oid)| cp(t, oid)),
            "seen": seen_cp,
            "local_size": here.len(),
            "relation": relation,
            "ahead": ahead,
            "behind": behind,
        }));
    }
    Ok(json!({
        "ledger": ledger,
        "local": {"size": local_size, "root": local_root},
        "remotes": rows,
    }))
}
