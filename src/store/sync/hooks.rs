//! The checks behind the hooks: the server-side update check (pre-receive) and the pre-push
//! check, both held to the same consistency rules as `fetch`.

use gix::ObjectId;
use gix::hash::Kind as HashKind;

use super::PRE_PUSH_PREFIX;
use super::chain::{Objects, RepoObjects, read_chain};
use super::consistency::{Checkpoint, Relation, check_bodies, check_redaction_rewrite, relate};
use super::git_cli::{Git, is_zero};
use super::problem::ChainProblem;
use crate::store::git::{
    GitStore, LEDGER_PREFIX, Options, StoreError, git_err, validate_ledger_name,
};

/// One ref update a hook was told about.
#[derive(Debug, Clone)]
pub(crate) struct RefUpdate {
    pub(crate) refname: String,
    pub(crate) old: String,
    pub(crate) new: String,
}

/// Why the receiving side refuses an update of a ledger ref (one line, told to the pusher).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum UpdateRefusal {
    /// A ledger ref deleted.
    #[error("ledgers are append-only; deleting one is not allowed")]
    Delete,
    /// The pushed chain or its bodies are not a valid ledger.
    #[error("the pushed ledger is not valid: {0}")]
    Invalid(#[source] ChainProblem),
    /// A rewrite that is not redaction only.
    #[error(transparent)]
    NotARedaction(ChainProblem),
    /// Fewer entries than before.
    #[error(
        "the update would shorten the ledger from {from} to {to} entries; ledgers are append-only"
    )]
    Shortens { from: usize, to: usize },
    /// Published entries changed.
    #[error(
        "the update rewrites published entries (first difference at seq {first}); ledgers are append-only"
    )]
    Rewrites { first: usize },
}

/// Checks one update of a ledger ref on the receiving side: no deletion; the new chain must be
/// a well-formed ledger; and it must extend the old chain entry for entry, allowing a
/// redaction-only rewrite. `Ok(Err)` is the refusal in one line.
pub(crate) fn check_server_update(
    objects: &mut dyn Objects,
    hash: HashKind,
    update: &RefUpdate,
) -> Result<Result<(), UpdateRefusal>, StoreError> {
    if !update.refname.starts_with(LEDGER_PREFIX) {
        return Ok(Ok(()));
    }
    if is_zero(&update.new) {
        return Ok(Err(UpdateRefusal::Delete));
    }
    let parse =
        |s: &str| ObjectId::from_hex(s.as_bytes()).map_err(|e| git_err("reading an object id", e));
    let new_id = parse(&update.new)?;
    let new = match read_chain(objects, hash, new_id, true)? {
        Ok(c) => c,
        Err(why) => return Ok(Err(UpdateRefusal::Invalid(why))),
    };
    // Bodies too, as `verify --deep` checks them: a commit rebuilt around another blob keeps
    // its message, so the entry chain alone does not show it.
    if let Err(why) = check_bodies(objects, hash, &new)? {
        return Ok(Err(UpdateRefusal::Invalid(why)));
    }
    if is_zero(&update.old) {
        return Ok(Ok(()));
    }
    let old = match read_chain(objects, hash, parse(&update.old)?, false)? {
        Ok(c) => c,
        // The current value is not a readable ledger (it predates the hook, or is damaged):
        // nothing to hold the update to.
        Err(_) => return Ok(Ok(())),
    };
    Ok(match relate(&old, &new) {
        Relation::New | Relation::UpToDate | Relation::Extends => Ok(()),
        Relation::RedactionRewrite => check_redaction_rewrite(objects, hash, &old, &new)?
            .map_err(UpdateRefusal::NotARedaction),
        Relation::Truncated => Err(UpdateRefusal::Shortens {
            from: old.len(),
            to: new.len(),
        }),
        Relation::Rewritten => {
            let first = old
                .iter()
                .zip(&new)
                .position(|(a, b)| a.entry.entry_hash != b.entry.entry_hash)
                .unwrap_or(0);
            Err(UpdateRefusal::Rewrites { first })
        }
    })
}

/// Checks what a pre-push hook was told: each ledger ref about to be published must verify
/// (deep) at the pushed commit, carry no secret in its bodies (under `gate`), and must not
/// rewind or rewrite what the remote has (a redaction-only rewrite excepted). Code refs are
/// looked at only with `scan_code` (the remote's name): the lines their new commits add are
/// scanned. Returns the refusals, one line each.
pub(crate) fn check_pre_push(
    repo: &gix::Repository,
    updates: &[(String, String, String, String)],
    gate: &crate::secrets::Guard,
    scan_code: Option<&str>,
) -> Result<Vec<String>, StoreError> {
    let hash = repo.object_hash();
    let git = Git::for_repo(repo);
    let mut refusals = Vec::new();
    for (local_ref, local_oid, remote_ref, remote_oid) in updates {
        let Some(name) = remote_ref.strip_prefix(LEDGER_PREFIX) else {
            // Every other ref, the change commits of --work runs (refs/forum/work/...) included.
            if let Some(remote) = scan_code {
                refusals.extend(super::secrets::scan_code(
                    &git, remote, remote_ref, local_oid, remote_oid, gate,
                )?);
            }
            continue;
        };
        if is_zero(local_oid) {
            refusals.push(format!(
                "ledger {name}: deleting a published ledger is not allowed; ledgers are append-only"
            ));
            continue;
        }
        let local_id = ObjectId::from_hex(local_oid.as_bytes())
            .map_err(|e| git_err("reading the pushed object id", e))?;
        // Verify the local ledger itself when its ref is what is pushed (so its reflog and
        // recorded checkpoints count); otherwise the pushed commit through a temporary ref.
        let named = local_ref
            .strip_prefix(LEDGER_PREFIX)
            .filter(|n| validate_ledger_name(n).is_ok())
            .map(|n| GitStore::new(repo.clone(), n, Options::default()))
            .transpose()?
            .filter(|s| s.tip_id().ok().flatten() == Some(local_id));
        let report = match named {
            Some(store) => store.verify(true)?,
            None => {
                let temp = format!("{PRE_PUSH_PREFIX}{}-{local_oid}", std::process::id());
                git.update_refs(
                    "forum pre-push: verify",
                    &format!("update {temp} {local_oid}\n"),
                )?;
                let r = GitStore::at_ref(repo.clone(), &temp, Options::default())
                    .and_then(|s| s.verify(true));
                let _ = git.update_refs("forum pre-push: done", &format!("delete {temp}\n"));
                r?
            }
        };
        if !report.passed() {
            let at = report
                .first_bad_seq
                .map(|s| format!(" at seq {s}"))
                .unwrap_or_default();
            refusals.push(format!(
                "ledger {name} does not verify{at}: {} [{}]",
                report.problem.as_deref().unwrap_or("unknown problem"),
                report.code.map_or("", |c| c.as_str())
            ));
            continue;
        }
        refusals.extend(super::secrets::scan_ledger(
            &mut RepoObjects(repo),
            hash,
            name,
            remote_ref,
            local_id,
            gate,
        )?);
        if is_zero(remote_oid) {
            continue;
        }
        refusals.extend(against_remote(repo, name, local_id, remote_oid)?);
    }
    Ok(refusals)
}

/// Why pushing the ledger `name` at `local_id` over the remote's `remote_oid` must be refused
/// (it rewinds or rewrites what the remote has, or the remote's tip is unknown here), if it must.
fn against_remote(
    repo: &gix::Repository,
    name: &str,
    local_id: ObjectId,
    remote_oid: &str,
) -> Result<Option<String>, StoreError> {
    let hash = repo.object_hash();
    let remote_id = ObjectId::from_hex(remote_oid.as_bytes())
        .map_err(|e| git_err("reading the remote object id", e))?;
    let mut objects = RepoObjects(repo);
    let Ok(old) = read_chain(&mut objects, hash, remote_id, false)? else {
        return Ok(Some(format!(
            "ledger {name}: the remote is at {remote_oid}, which this repository does not have; run `git forum fetch` first"
        )));
    };
    let new = match read_chain(&mut objects, hash, local_id, false)? {
        Ok(c) => c,
        Err(why) => return Ok(Some(format!("ledger {name}: {why}"))),
    };
    Ok(match relate(&old, &new) {
        Relation::New | Relation::UpToDate | Relation::Extends => None,
        Relation::RedactionRewrite => check_redaction_rewrite(&mut objects, hash, &old, &new)?
            .err()
            .map(|why| format!("ledger {name}: {why}")),
        Relation::Truncated => Some(format!(
            "ledger {name}: the push would rewind the remote's ledger from {} to {} entries",
            old.len(),
            new.len()
        )),
        Relation::Rewritten => Some(format!(
            "ledger {name}: the push would rewrite entries the remote already has (its checkpoint {} is not a prefix of what is pushed)",
            Checkpoint::of(&old, old.len())
        )),
    })
}
