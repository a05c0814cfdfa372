//! Adapters that keep ledgers on disk.

pub(crate) mod append;
pub(crate) mod capped;
pub(crate) mod codec;
pub mod doctor;
pub(crate) mod durable;
pub(crate) mod error;
pub mod forum_dir;
pub mod git;
pub(crate) mod index;
pub(crate) mod lock;
pub mod note;
pub(crate) mod objects;
pub mod pack;
pub(crate) mod packread;
pub mod redact;
pub mod refs;
pub mod sign;
pub mod sync;
pub mod tiles;
pub mod verify;
pub(crate) mod wal;
