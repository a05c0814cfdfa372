//! The git store as the transports hold it: a transport opens the repository and the ledger
//! once (the CLI per command, the daemon per request) and hands the store to each operation.
//! These are the store's names a transport needs for that, and the only way `cli/` and
//! `serve/` reach `crate::store`.

pub(crate) use crate::store::append::ImportError;
pub(crate) use crate::store::doctor::Sources;
pub(crate) use crate::store::forum_dir;
pub(crate) use crate::store::git::{
    Appended, GitStore, LEDGER_PREFIX, Options, StoreError, open_repo, validate_ledger_name,
};
pub(crate) use crate::store::stale::age_text;
pub(crate) use crate::store::verify::Verified;
