//! `fetch`: remote ledgers staged under `refs/forum/incoming/`, judged against the checkpoint
//! last seen from that remote, adopted only when they verify and are consistent; the staging is
//! cleared after every fetch.

use std::path::Path;

use gix::ObjectId;
use gix::hash::Kind as HashKind;

use super::chain::{RepoObjects, read_chain};
use super::consistency::{Checkpoint, Relation, relate};
use super::git_cli::{Git, check_remote_name, failure_line, zero_oid};
use super::{
    ATTEMPTS_PREFIX, QUARANTINE_PREFIX, REMOTE_ATTEMPTS_PREFIX, REMOTE_QUARANTINE_PREFIX,
    REMOTE_WORK_PREFIX, WORK_PREFIX,
};
use super::{
    CHECKPOINTS_PREFIX, INCOMING_PREFIX, INCOMING_SIGNATURES_PREFIX, REMOTE_SIGNATURES_PREFIX,
    REMOTES_PREFIX, SEEN_PREFIX,
};
use crate::ledger::hash::GENESIS;
use crate::store::git::{GitStore, LEDGER_PREFIX, Options, StoreError, validate_ledger_name};

/// What `fetch` decided about one remote ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FetchStatus {
    New,
    UpToDate,
    Updated,
    RedactionRewrite,
    DoesNotVerify,
    Truncated,
    Rewritten,
    /// Another remote was last seen with a different history of the same ledger.
    SplitView,
    Deleted,
}

impl FetchStatus {
    pub(crate) fn label(self) -> &'static str {
        match self {
            FetchStatus::New => "new",
            FetchStatus::UpToDate => "up-to-date",
            FetchStatus::Updated => "updated",
            FetchStatus::RedactionRewrite => "redaction-rewrite",
            FetchStatus::DoesNotVerify => "does-not-verify",
            FetchStatus::Truncated => "truncated",
            FetchStatus::Rewritten => "rewritten",
            FetchStatus::SplitView => "split-view",
            FetchStatus::Deleted => "deleted",
        }
    }

    pub(crate) fn adopted(self) -> bool {
        matches!(
            self,
            FetchStatus::New
                | FetchStatus::UpToDate
                | FetchStatus::Updated
                | FetchStatus::RedactionRewrite
        )
    }
}

/// One remote ledger's outcome, with the evidence.
#[derive(Debug, Clone)]
pub(crate) struct FetchResult {
    pub(crate) ledger: String,
    pub(crate) status: FetchStatus,
    /// The remote copy's checkpoint (size 0 when the remote no longer has the ledger).
    pub(crate) remote: Option<Checkpoint>,
    /// The checkpoint last seen from this remote, before this fetch.
    pub(crate) seen: Option<Checkpoint>,
    /// For a rewrite: the root the remote's first `seen.size` entries give now.
    pub(crate) remote_prefix_root: Option<String>,
    /// For a split view: the other remote and the checkpoint last seen from it, which this
    /// copy contradicts.
    pub(crate) conflict: Option<(String, Checkpoint)>,
    pub(crate) problem: Option<String>,
    pub(crate) code: Option<&'static str>,
    /// What each configured witness said about the remote's latest note (adopted copies only;
    /// src/store/witness.rs).
    pub(crate) witnesses: Vec<crate::store::witness::Asked>,
}

/// Removes the staging refs of `remote`, whatever happens to the fetch.
struct Staging<'a> {
    git: &'a Git,
    prefix: String,
}

impl Staging<'_> {
    fn clear(&self) -> Result<(), StoreError> {
        let refs = self.git.refs_under(&self.prefix)?;
        if refs.is_empty() {
            return Ok(());
        }
        let lines: String = refs.iter().map(|(r, _)| format!("delete {r}\n")).collect();
        self.git.update_refs("forum fetch: clear staging", &lines)
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        let _ = self.clear();
    }
}

/// Fetches every ledger of `remote` into a staging namespace, verifies each copy (deep), checks
/// it against the checkpoint last seen from that remote, and adopts the consistent ones
/// (`refs/forum/remotes/REMOTE/NAME` and `refs/forum/seen/REMOTE/NAME` move together). Refused
/// copies change nothing.
pub(crate) fn fetch(dir: &Path, remote: &str) -> Result<Vec<FetchResult>, StoreError> {
    let repo = crate::store::git::open_repo(dir)?;
    let hash = repo.object_hash();
    let git = Git::for_repo(&repo);
    check_remote_name(&git, remote)?;
    let incoming = format!("{INCOMING_PREFIX}{remote}/");
    let staging = Staging {
        git: &git,
        prefix: incoming.clone(),
    };
    staging.clear()?;
    let incoming_sigs = format!("{INCOMING_SIGNATURES_PREFIX}{remote}/");
    let sig_staging = Staging {
        git: &git,
        prefix: incoming_sigs.clone(),
    };
    sig_staging.clear()?;
    fetch_staged(&git, remote, &incoming, &incoming_sigs)?;
    // A fresh handle sees the refs and objects the fetch wrote.
    let repo = crate::store::git::open_repo(dir)?;
    let fetched = git.refs_under(&incoming)?;
    let seen_prefix = format!("{SEEN_PREFIX}{remote}/");
    let seen_refs = git.refs_under(&seen_prefix)?;
    // What every other configured remote was last seen serving: a copy must agree with each.
    let every_seen = git.refs_under(SEEN_PREFIX)?;
    let others: Vec<String> = git
        .remotes()?
        .into_iter()
        .filter(|r| r != remote && check_remote_name(&git, r).is_ok())
        .collect();
    let mut results = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (refname, _) in &fetched {
        let Some(name) = refname.strip_prefix(&incoming) else {
            continue;
        };
        names.push(name.to_string());
        let seen_ref = format!("{seen_prefix}{name}");
        let seen_tip = seen_refs
            .iter()
            .find(|(r, _)| *r == seen_ref)
            .map(|(_, o)| o.clone());
        let others_seen: Vec<(String, String)> = others
            .iter()
            .filter_map(|o| {
                let r = format!("{SEEN_PREFIX}{o}/{name}");
                every_seen
                    .iter()
                    .find(|(x, _)| *x == r)
                    .map(|(_, oid)| (o.clone(), oid.clone()))
            })
            .collect();
        results.push(judge_fetched(
            &repo,
            &git,
            hash,
            remote,
            name,
            refname,
            seen_tip,
            &others_seen,
        )?);
    }
    results.extend(deleted_ledgers(&repo, remote, &seen_refs, &names)?);
    drop(staging);
    drop(sig_staging);
    results.sort_by(|a, b| a.ledger.cmp(&b.ledger));
    witness_step(dir, remote, &mut results)?;
    Ok(results)
}

/// Fetches `remote`'s ledgers, signed checkpoints and the change commits of its `--work` runs
/// into the staging refs under `incoming` and `incoming_sigs` (the change commits beside the
/// remote's ledgers), and nothing else.
fn fetch_staged(
    git: &Git,
    remote: &str,
    incoming: &str,
    incoming_sigs: &str,
) -> Result<(), StoreError> {
    let refspec = format!("+{LEDGER_PREFIX}*:{incoming}*");
    let sig_refspec = format!("+{CHECKPOINTS_PREFIX}*:{incoming_sigs}*");
    // The change commits of --work runs, beside the ledgers (kept commits, not verified
    // records: a copy's `change` entries are checked against them by its deep verify).
    let work_refspec = format!("+{WORK_PREFIX}*:{REMOTE_WORK_PREFIX}{remote}/*");
    let quarantine_refspec = format!("+{QUARANTINE_PREFIX}*:{REMOTE_QUARANTINE_PREFIX}{remote}/*");
    let attempts_refspec = format!("+{ATTEMPTS_PREFIX}*:{REMOTE_ATTEMPTS_PREFIX}{remote}/*");
    // `--refmap=` keeps git from also moving refs by the remote's configured fetch refspecs
    // (which `init` may have pointed at refs/forum/remotes/) before the copies are checked.
    let o = git.run(&[
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--refmap=",
        "--",
        remote,
        &refspec,
        &sig_refspec,
        &work_refspec,
        &quarantine_refspec,
        &attempts_refspec,
    ])?;
    if !o.status.success() {
        return Err(StoreError::Git(format!(
            "git fetch from {remote} failed: {}; nothing was changed",
            failure_line(&o)
        )));
    }
    Ok(())
}

/// A result for each ledger `remote` served when last fetched (its seen refs `seen_refs`) and
/// no longer serves (it is not among `names`).
fn deleted_ledgers(
    repo: &gix::Repository,
    remote: &str,
    seen_refs: &[(String, String)],
    names: &[String],
) -> Result<Vec<FetchResult>, StoreError> {
    let hash = repo.object_hash();
    let seen_prefix = format!("{SEEN_PREFIX}{remote}/");
    let mut results = Vec::new();
    for (seen_ref, oid) in seen_refs {
        let Some(name) = seen_ref.strip_prefix(&seen_prefix) else {
            continue;
        };
        if names.iter().any(|n| n == name) {
            continue;
        }
        let seen = seen_checkpoint(repo, hash, oid)?;
        results.push(FetchResult {
            ledger: name.to_string(),
            status: FetchStatus::Deleted,
            remote: Some(Checkpoint {
                size: 0,
                root: GENESIS.to_string(),
                commit: None,
            }),
            problem: Some(format!(
                "{remote} no longer has ledger {name}; it had {} entries when last fetched",
                seen.as_ref().map(|s| s.size).unwrap_or(0)
            )),
            seen,
            remote_prefix_root: None,
            conflict: None,
            code: Some("deleted"),
            witnesses: Vec::new(),
        });
    }
    Ok(results)
}

/// Shows the configured witnesses the adopted copies' latest notes (src/store/witness.rs).
fn witness_step(dir: &Path, remote: &str, results: &mut [FetchResult]) -> Result<(), StoreError> {
    let adopted: Vec<String> = results
        .iter()
        .filter(|r| r.status.adopted())
        .map(|r| r.ledger.clone())
        .collect();
    for (name, asked) in crate::store::witness::ask_witnesses(dir, remote, &adopted)? {
        if let Some(r) = results.iter_mut().find(|r| r.ledger == name) {
            r.witnesses = asked;
        }
    }
    Ok(())
}

fn seen_checkpoint(
    repo: &gix::Repository,
    hash: HashKind,
    oid: &str,
) -> Result<Option<Checkpoint>, StoreError> {
    let Ok(id) = ObjectId::from_hex(oid.as_bytes()) else {
        return Ok(None);
    };
    match read_chain(&mut RepoObjects(repo), hash, id, false)? {
        Ok(chain) => Ok(Some(Checkpoint::of(&chain, chain.len()))),
        Err(_) => Ok(None),
    }
}

impl FetchResult {
    /// Records that `remote`'s copy does not verify, as `report` says.
    fn refuse_unverified(
        &mut self,
        remote: &str,
        report: &crate::store::verify::LedgerVerifyReport,
    ) {
        let at = report
            .first_bad_seq
            .map(|s| format!(" at seq {s}"))
            .unwrap_or_default();
        self.problem = Some(format!(
            "{remote}'s copy does not verify{at}: {}",
            report.problem.as_deref().unwrap_or("unknown problem")
        ));
        self.code = report.code.map(|c| c.as_str()).or(Some("does-not-verify"));
    }

    /// A result for ledger `name` before its copy is judged: it does not verify yet.
    fn unjudged(name: &str) -> FetchResult {
        FetchResult {
            ledger: name.to_string(),
            status: FetchStatus::DoesNotVerify,
            remote: None,
            seen: None,
            remote_prefix_root: None,
            conflict: None,
            problem: None,
            code: None,
            witnesses: Vec::new(),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn judge_fetched(
    repo: &gix::Repository,
    git: &Git,
    hash: HashKind,
    remote: &str,
    name: &str,
    staged_ref: &str,
    seen_tip: Option<String>,
    others_seen: &[(String, String)],
) -> Result<FetchResult, StoreError> {
    let mut result = FetchResult::unjudged(name);
    if let Err(e) = validate_ledger_name(name) {
        result.problem = Some(format!("the remote offers a ledger with a bad name: {e}"));
        result.code = Some("invalid-name");
        return Ok(result);
    }
    // The remote's signed checkpoints, fetched beside the copy, are checked with it.
    let staged_sigs = format!("{INCOMING_SIGNATURES_PREFIX}{remote}/{name}");
    let store = GitStore::at_ref(repo.clone(), staged_ref, Options::default())?
        .with_signatures(name, &staged_sigs);
    let report = store.verify(true)?;
    let tip = store.tip_id()?;
    let mut objects = RepoObjects(repo);
    let chain = match tip {
        Some(t) => read_chain(&mut objects, hash, t, false)?.ok(),
        None => None,
    };
    result.remote = chain.as_ref().map(|c| Checkpoint::of(c, c.len()));
    let seen_chain = read_seen_chain(&mut objects, hash, remote, name, seen_tip.as_deref())?;
    result.seen = seen_chain.as_ref().map(|c| Checkpoint::of(c, c.len()));
    if !report.passed() {
        result.refuse_unverified(remote, &report);
        return Ok(result);
    }
    let chain = chain.ok_or_else(|| {
        StoreError::Corrupt(format!(
            "{staged_ref} verified but its chain cannot be read"
        ))
    })?;
    // What is adopted must be what was verified: the staged ref is read twice (by verify, then
    // here), and another fetch of the same remote may have moved it in between.
    let judged = Checkpoint::of(&chain, chain.len());
    if judged.size != report.entries || judged.root != report.checkpoint {
        return Err(StoreError::Contended(format!(
            "{staged_ref} moved while it was being checked (another fetch from {remote}?); nothing was adopted: run `git forum fetch {remote}` again"
        )));
    }
    let old = seen_chain.unwrap_or_default();
    if judge_history(&mut result, remote, &old, &chain) {
        return Ok(result);
    }
    let now = result.remote.clone().expect("set above");
    // Split views: the copy must agree, entry for entry over their common length, with what
    // every other remote was last seen serving of this ledger.
    if let Some((problem, conflict)) = split_view_with(
        &mut objects,
        hash,
        (remote, name),
        &chain,
        &now,
        others_seen,
    )? {
        result.status = FetchStatus::SplitView;
        result.code = Some("split-view");
        result.problem = Some(problem);
        result.conflict = Some(conflict);
        return Ok(result);
    }
    let tip = chain.last().expect("a verified ledger has entries").commit;
    adopt(
        git,
        hash,
        (remote, name),
        tip,
        seen_tip,
        result.status.label(),
    )?;
    Ok(result)
}

/// Sets `result`'s status from how `chain`, the copy `remote` now serves, relates to `old`,
/// the chain last seen there; true when it dropped or rewrote seen entries (`result` then
/// says how).
fn judge_history(
    result: &mut FetchResult,
    remote: &str,
    old: &[super::chain::ChainLink],
    chain: &[super::chain::ChainLink],
) -> bool {
    let seen = result.seen.clone();
    let now = result.remote.clone().expect("set above");
    match relate(old, chain) {
        Relation::Truncated => {
            result.status = FetchStatus::Truncated;
            result.code = Some("truncated");
            result.problem = Some(format!(
                "{remote}'s copy has {} entries but {} were seen before (seen: {}; now: {}): entries were removed from the tail",
                now.size,
                old.len(),
                seen.as_ref().expect("seen"),
                now
            ));
            return true;
        }
        Relation::Rewritten => {
            let prefix = Checkpoint::of(chain, old.len());
            let first = old
                .iter()
                .zip(chain)
                .position(|(a, b)| a.entry.entry_hash != b.entry.entry_hash)
                .unwrap_or(0);
            result.status = FetchStatus::Rewritten;
            result.code = Some("rewritten");
            result.remote_prefix_root = Some(prefix.root.clone());
            result.problem = Some(format!(
                "{remote}'s first {} entries hash to {}, not to the seen root {} (first difference at seq {first}; seen: {}; now: {}): history was rewritten or forked",
                old.len(),
                prefix.root,
                seen.as_ref().expect("seen").root,
                seen.as_ref().expect("seen"),
                now
            ));
            return true;
        }
        Relation::New => result.status = FetchStatus::New,
        Relation::UpToDate => result.status = FetchStatus::UpToDate,
        Relation::Extends => result.status = FetchStatus::Updated,
        Relation::RedactionRewrite => result.status = FetchStatus::RedactionRewrite,
    }
    false
}

/// The chain `remote` was last seen serving of ledger `name` (at `seen_tip`), if it was seen.
fn read_seen_chain(
    objects: &mut RepoObjects<'_>,
    hash: HashKind,
    remote: &str,
    name: &str,
    seen_tip: Option<&str>,
) -> Result<Option<Vec<super::chain::ChainLink>>, StoreError> {
    Ok(match seen_tip {
        Some(oid) => {
            let id = ObjectId::from_hex(oid.as_bytes())
                .map_err(|e| StoreError::Corrupt(format!("{SEEN_PREFIX}{remote}/{name}: {e}")))?;
            match read_chain(objects, hash, id, false)? {
                Ok(c) => Some(c),
                Err(why) => {
                    return Err(StoreError::Corrupt(format!(
                        "{SEEN_PREFIX}{remote}/{name} is unreadable ({why}); delete it with `git update-ref -d {SEEN_PREFIX}{remote}/{name}` to trust the remote afresh"
                    )));
                }
            }
        }
        None => None,
    })
}

/// A split view: what it is, and the other remote with its last seen checkpoint.
type SplitView = (String, (String, Checkpoint));

/// Where `chain`, what `remote` now serves of ledger `name` (checkpoint `now`), forks from
/// what another remote was last seen serving of it (`others_seen`): the problem, and that
/// remote with its checkpoint.
fn split_view_with(
    objects: &mut RepoObjects<'_>,
    hash: HashKind,
    (remote, name): (&str, &str),
    chain: &[super::chain::ChainLink],
    now: &Checkpoint,
    others_seen: &[(String, String)],
) -> Result<Option<SplitView>, StoreError> {
    for (other, oid) in others_seen {
        let seen_ref = format!("{SEEN_PREFIX}{other}/{name}");
        let id = ObjectId::from_hex(oid.as_bytes())
            .map_err(|e| StoreError::Corrupt(format!("{seen_ref}: {e}")))?;
        let their = match read_chain(objects, hash, id, false)? {
            Ok(c) => c,
            Err(why) => {
                return Err(StoreError::Corrupt(format!(
                    "{seen_ref} is unreadable ({why}); delete it with `git update-ref -d {seen_ref}` to trust {other} afresh"
                )));
            }
        };
        let Some(first) = their
            .iter()
            .zip(chain)
            .position(|(a, b)| a.entry.entry_hash != b.entry.entry_hash)
        else {
            continue;
        };
        let theirs = Checkpoint::of(&their, their.len());
        let problem = format!(
            "{remote} and {other} serve different histories of ledger {name} (first difference at seq {first}; {remote} now: {now}; {other} last seen: {theirs}): one of them forked it; if it was {other}, drop its view with `git update-ref -d {seen_ref}` and fetch again"
        );
        return Ok(Some((problem, (other.clone(), theirs))));
    }
    Ok(None)
}

/// Adopts `remote`'s copy of ledger `name` at `tip`: both refs move in one transaction, the
/// seen ref only from the value it was judged against (`seen_tip`), with the copy's signed
/// checkpoints.
fn adopt(
    git: &Git,
    hash: HashKind,
    (remote, name): (&str, &str),
    tip: ObjectId,
    seen_tip: Option<String>,
    label: &str,
) -> Result<(), StoreError> {
    let staged_sigs = format!("{INCOMING_SIGNATURES_PREFIX}{remote}/{name}");
    let old_seen = seen_tip.unwrap_or_else(|| zero_oid(hash));
    let mut lines = format!(
        "update {REMOTES_PREFIX}{remote}/{name} {tip}\nupdate {SEEN_PREFIX}{remote}/{name} {tip} {old_seen}\n"
    );
    if let Some((_, sigs)) = git
        .refs_under(&staged_sigs)?
        .into_iter()
        .find(|(r, _)| *r == staged_sigs)
    {
        lines.push_str(&format!(
            "update {REMOTE_SIGNATURES_PREFIX}{remote}/{name} {sigs}\n"
        ));
    }
    git.update_refs(&format!("forum fetch {remote}: {label}"), &lines)?;
    Ok(())
}
