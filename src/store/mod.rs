//! Adapters that keep ledgers on disk.

pub(crate) mod capped;
pub mod doctor;
pub mod forum_dir;
pub mod git;
pub mod note;
pub mod pack;
pub(crate) mod packread;
pub mod redact;
pub mod refs;
pub mod sign;
pub mod sync;
pub mod tiles;
pub mod verify;
pub(crate) mod wal;
