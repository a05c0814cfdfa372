//! Adapters that keep ledgers on disk.

pub(crate) mod append;
pub(crate) mod capped;
pub(crate) mod codec;
pub mod cosign;
pub(crate) mod doctor;
pub(crate) mod durable;
pub(crate) mod error;
pub mod forum_dir;
mod forum_row;
pub mod git;
pub(crate) mod halt;
pub(crate) mod index;
pub(crate) mod lock;
pub mod note;
pub(crate) mod objects;
pub(crate) mod pack;
pub(crate) mod packread;
pub(crate) mod redact;
pub(crate) mod refs;
pub(crate) mod sign;
pub(crate) mod spill;
pub(crate) mod stale;
pub(crate) mod sync;
pub(crate) mod tiles;
pub(crate) mod verify;
pub(crate) mod wal;
pub(crate) mod witness;
