//! Adapters that keep ledgers on disk.
//!
//! The modules form one dependency order: each names only modules before it in this list
//! (read left to right, top to bottom), so each can be read knowing only what comes before
//! it. A test (`order_tests`) fails naming any import that goes against it.
//!
//! ```text
//! stale → error → capped → spill → forum_row → forum_dir → packread → checksum → pack → codec
//! failpoint → odb → own_writes → handle → durable → refs → objects → lock → merge → index → wal → append → import → git
//! side_refs → forum_rows → note → sign → verify → cosign → witness → tiles → forum_tree → sync
//! halt → redact → doctor
//! ```
//!
//! The leaves on the first line know nothing of a repository. [`handle`] holds the ledger
//! handle, [`GitStore`](git::GitStore), and its settings; [`refs`] reads and moves the ledger
//! ref, [`objects`] reads and writes git objects (looking them up through [`odb`], which
//! survives gix panicking in a race with `git repack`), [`lock`] holds the writer lock and the
//! compare-and-swap, [`wal`] is the write-ahead log and [`append`] the append loop that writes
//! through it, [`import`] writes whole ledgers; [`git`] reads entries back and is the `Storage`
//! the ledger core sees. Above them sit the side refs (signed checkpoints, notes, tiles),
//! [`verify`], sharing with remotes ([`sync`]) and maintenance.
//!
//! Every module adds methods to the one handle, so a method may call one written further down
//! the list; the order holds for what a module names: types, functions and constants.

pub(crate) mod append;
pub(crate) mod capped;
pub(crate) mod checksum;
pub(crate) mod codec;
pub mod cosign;
pub(crate) mod doctor;
pub(crate) mod durable;
pub(crate) mod error;
pub(crate) mod failpoint;
pub mod forum_dir;
mod forum_row;
pub(crate) mod forum_rows;
pub(crate) mod forum_tree;
pub mod git;
pub(crate) mod halt;
pub(crate) mod handle;
pub(crate) mod import;
pub(crate) mod index;
pub(crate) mod lock;
pub(crate) mod merge;
pub mod note;
pub(crate) mod objects;
pub(crate) mod odb;
mod own_writes;
pub(crate) mod pack;
pub(crate) mod packread;
pub(crate) mod redact;
pub(crate) mod refs;
pub(crate) mod side_refs;
pub(crate) mod sign;
pub(crate) mod spill;
pub(crate) mod stale;
pub(crate) mod sync;
pub(crate) mod tiles;
pub(crate) mod verify;
pub(crate) mod wal;
pub(crate) mod witness;

#[cfg(test)]
mod order_tests;
