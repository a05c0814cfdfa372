//! Sharing ledgers through ordinary git remotes: `push`, `fetch` with consistency checks against
//! the last checkpoint seen from each remote, and the checks behind the pre-push and server-side
//! hooks.
//!
//! Network work is done by spawning `git` (gix cannot push, and spawning git keeps credential
//! helpers, ssh config and `insteadOf` exactly as the user has them). Refs involved:
//!
//! * `refs/forum/ledgers/NAME`: the local ledger, pushed without `+` (fast-forward only);
//! * `refs/forum/incoming/REMOTE/NAME`: a staging copy fetched with `+`, so a rewritten remote
//!   ledger can be looked at instead of being refused by git unseen; deleted after every fetch;
//! * `refs/forum/remotes/REMOTE/NAME`: the remote's ledger as last adopted (by `fetch` only);
//! * `refs/forum/unverified/REMOTE/NAME`: where plain `git fetch` puts it (the refspec `init`
//!   adds), unverified and read by nothing;
//! * `refs/forum/seen/REMOTE/NAME`: the tip commit of the last copy that verified and was
//!   consistent; its size and Merkle root are the checkpoint the next fetch is held to;
//! * `refs/forum/work/NAME/...`, `refs/forum/quarantine/NAME/...` and
//!   `refs/forum/attempts/NAME/...`: the change commits of `--work` runs, pushed with their
//!   ledger (never forced); fetched (with `+`) into `refs/forum/remote-work/REMOTE/NAME/...`,
//!   `refs/forum/remote-quarantine/REMOTE/...` and `refs/forum/remote-attempts/REMOTE/...`.
//!
//! "Consistent" means the entry chain extends the seen one entry for entry. A copy whose commit
//! ids differ but whose entry hashes are identical is a redaction-only rewrite (a redaction
//! changes trees, never entries) and is accepted; a shorter copy (truncated) or one whose first
//! entries hash differently (rewritten or forked) is reported with both checkpoints and never
//! adopted.
//!
//! The work is split by job: `git_cli.rs` runs git with bounded output, `chain.rs` reads entry
//! chains, `consistency.rs` is the split-view check, `push.rs` and `fetch.rs` are the two
//! directions (fetch with its unverified staging), `hooks.rs` the checks behind the hooks,
//! `secrets.rs` the secret gate of push and the pre-push hook.

mod chain;
mod consistency;
mod fetch;
mod git_cli;
mod hooks;
mod problem;
mod push;
mod secrets;

pub(crate) use chain::CatFile;
pub(crate) use fetch::{FetchResult, FetchStatus, fetch};
pub(crate) use git_cli::{Git, check_remote_name, failure_line};
pub(crate) use hooks::{RefUpdate, check_pre_push, check_server_update};
pub(crate) use push::{PushStatus, local_ledgers, push};
pub(crate) use secrets::gate_guard;

/// Where fetched copies wait while they are checked.
pub(crate) const INCOMING_PREFIX: &str = "refs/forum/incoming/";
/// Where a remote's signed checkpoints are staged while its ledgers are checked.
pub(crate) const INCOMING_SIGNATURES_PREFIX: &str = "refs/forum/incoming-checkpoints/";
pub(crate) use super::handle::{REMOTE_SIGNATURES_PREFIX, REMOTES_PREFIX};
/// Where a repository keeps its own signed checkpoints.
pub(crate) const CHECKPOINTS_PREFIX: &str = "refs/forum/checkpoints/";
/// Where plain `git fetch` leaves a remote's ledgers (the refspec `init` adds): copies nobody
/// verified, which nothing reads; only `git forum fetch` adopts into [`REMOTES_PREFIX`].
pub(crate) const UNVERIFIED_PREFIX: &str = "refs/forum/unverified/";
/// Where the pre-push hook briefly points a ref at a pushed commit that is not a ledger's tip,
/// to verify it.
pub(crate) const PRE_PUSH_PREFIX: &str = "refs/forum/pre-push/";
/// Where the last verified checkpoint of each remote ledger is kept (as its tip commit).
pub(crate) const SEEN_PREFIX: &str = "refs/forum/seen/";
/// Where `--work` runs keep their change commits (`refs/forum/work/LEDGER/RUN/TASK`); they
/// travel with their ledger on push.
pub(crate) const WORK_PREFIX: &str = "refs/forum/work/";
/// Where `--work` runs keep the changes their pre-ship gate blocked; they travel too.
pub(crate) const QUARANTINE_PREFIX: &str = "refs/forum/quarantine/";
/// Where `fetch` puts a remote's change commits (`refs/forum/remote-work/REMOTE/LEDGER/...`),
/// beside its adopted ledgers, so `verify --deep` of a fetched copy finds the commits its
/// `change` entries name.
pub(crate) const REMOTE_WORK_PREFIX: &str = "refs/forum/remote-work/";
/// Where `fetch` puts a remote's quarantined changes.
pub(crate) const REMOTE_QUARANTINE_PREFIX: &str = "refs/forum/remote-quarantine/";
/// Where `--work` runs keep the attempts not chosen of a task run several times
/// (`refs/forum/attempts/LEDGER/RUN/TASK/N`); they travel too, so a copy's deep verify finds
/// the commit of every attempt's `change` entry.
pub(crate) const ATTEMPTS_PREFIX: &str = "refs/forum/attempts/";
/// Where `fetch` puts a remote's attempts.
pub(crate) const REMOTE_ATTEMPTS_PREFIX: &str = "refs/forum/remote-attempts/";
