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

use crate::store::handle::{REMOTE_SIGNATURES_PREFIX, REMOTES_PREFIX};

/// The file `store`'s ref lives in when `repo` keeps its refs as files, so that a daemon can
/// tell cheaply whether its cached tip is current; `None` for reftable, where there is no such
/// file to read.
pub(crate) fn loose_ref_file(
    repo: &gix::Repository,
    store: &GitStore,
) -> Option<std::path::PathBuf> {
    use crate::store::handle::RefStorage;
    (RefStorage::of(repo) == RefStorage::Files).then(|| store.ref_path())
}

/// A reader's `--ledger`: a ledger of this repository (`NAME`), or the copy of ledger `NAME`
/// that `git forum fetch REMOTE` adopted (`REMOTE:NAME`; `:` is never part of a name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LedgerSpec<'a> {
    /// `refs/forum/ledgers/NAME`.
    Local(&'a str),
    /// `refs/forum/remotes/REMOTE/NAME`, read-only.
    Fetched { remote: &'a str, name: &'a str },
}

impl<'a> LedgerSpec<'a> {
    /// Reads `spec`; the parts are checked as ledger names when the ledger is opened.
    pub(crate) fn parse(spec: &'a str) -> LedgerSpec<'a> {
        match spec.split_once(':') {
            Some((remote, name)) => LedgerSpec::Fetched { remote, name },
            None => LedgerSpec::Local(spec),
        }
    }
}

/// A handle on `spec` in `repo` (see [`LedgerSpec`]) that need not exist: the ledger
/// `refs/forum/ledgers/NAME`, or the fetched copy `refs/forum/remotes/REMOTE/NAME` with its
/// signed checkpoints beside it. A daemon serving a fetched copy opens one per read.
pub(crate) fn open_spec(
    repo: gix::Repository,
    spec: &str,
    opts: Options,
) -> Result<GitStore, StoreError> {
    match LedgerSpec::parse(spec) {
        LedgerSpec::Fetched { remote, name } => {
            for part in [remote, name] {
                validate_ledger_name(part)?;
            }
            Ok(
                GitStore::at_ref(repo, &format!("{REMOTES_PREFIX}{remote}/{name}"), opts)?
                    .with_signatures(name, &format!("{REMOTE_SIGNATURES_PREFIX}{remote}/{name}")),
            )
        }
        LedgerSpec::Local(name) => GitStore::new(repo, name, opts),
    }
}

/// Opens `spec` for reading in `repo` (see [`LedgerSpec`]). A fetched copy reads its signed
/// checkpoints from beside it. A bare `REMOTE/NAME` that names no ledger here but a fetched
/// copy is refused with the form that reads it, instead of reading as an empty ledger.
pub(crate) fn open_reader(
    repo: gix::Repository,
    spec: &str,
    opts: Options,
) -> Result<GitStore, crate::surface::Error> {
    use crate::surface::Error;
    match LedgerSpec::parse(spec) {
        LedgerSpec::Fetched { remote, name } => {
            for part in [remote, name] {
                validate_ledger_name(part).map_err(|e| {
                    Error::usage(format!(
                        "--ledger {spec:?}: {e}; a fetched copy is named REMOTE:NAME"
                    ))
                })?;
            }
            let store = open_spec(repo, spec, opts)?;
            if !store.exists()? {
                return Err(Error::not_found(format!(
                    "no copy of ledger {name:?} fetched from {remote:?} (refs/forum/remotes/{remote}/{name} does not exist); run `git forum fetch {remote}` first"
                )));
            }
            Ok(store)
        }
        LedgerSpec::Local(name) => {
            let store = GitStore::new(repo.clone(), name, opts)?;
            if let Some((remote, rest)) = name.split_once('/')
                && !store.exists()?
            {
                let copy =
                    GitStore::at_ref(repo, &format!("{REMOTES_PREFIX}{name}"), Options::default())?;
                if copy.exists()? {
                    return Err(Error::not_found(format!(
                        "no ledger named {name:?} here; the copy fetched from {remote:?} is read with --ledger {remote}:{rest}"
                    )));
                }
            }
            Ok(store)
        }
    }
}
