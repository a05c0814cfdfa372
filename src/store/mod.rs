//! Adapters that keep ledgers on disk.

pub mod pack;
pub mod git;
pub mod forum_dir;
