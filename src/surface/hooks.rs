//! The hooks as operations: installing and removing the git forum block in a hook file, and
//! the checks the installed hooks run (pre-push: every ledger ref pushed verified and its bodies
//! scanned; pre-receive and update: ledger refs are append-only).
//!
//! Installing writes a block between `# BEGIN git-forum` and `# END git-forum` near the top of
//! the hook file (after its `#!` line), so an existing hook keeps working; the block saves the
//! hook's stdin, hands it to `git forum hook NAME "$@"`, and restores it for the rest of the
//! script. Uninstalling removes only that block, and the file when nothing else is left.
//!
//! On the server side the same check also holds a dispatch worker's push to one new ref under
//! its results prefix ([`worker_push`]); installing the server hook lets clients send the push
//! option that says a push is a worker's (`receive.advertisePushOptions`).

mod worker_push;

use std::path::{Path, PathBuf};

use super::{Error, Result};
use crate::policy::push;
use crate::store::git::{LEDGER_PREFIX, StoreError, open_repo};
use crate::store::sync::{self, CatFile, Git};

pub(crate) use crate::store::sync::RefUpdate;
pub(crate) use worker_push::Pusher;

/// The largest hook file `hooks install` reads to add its block to.
pub(crate) const MAX_HOOK_FILE_BYTES: u64 = 1024 * 1024;

/// The first line of the block.
pub(crate) const BEGIN: &str = "# BEGIN git-forum";
/// The last line of the block.
pub(crate) const END: &str = "# END git-forum";

/// The block that calls `git forum hook NAME`.
pub(crate) fn block(hook: &str) -> String {
    block_calling(hook)
}

/// The block that calls `git forum hook CALL` (the hook's name, and its flags).
fn block_calling(call: &str) -> String {
    let hook = call;
    format!(
        "{BEGIN}
# Added by `git forum hooks install`; `git forum hooks uninstall` removes this block.
# Hands this hook's stdin to git forum, then gives it back to the rest of the script.
forum_in=$(mktemp \"${{TMPDIR:-/tmp}}/git-forum-hook.XXXXXX\") || exit 1
cat >\"$forum_in\"
git forum hook {hook} \"$@\" <\"$forum_in\"
forum_rc=$?
exec <\"$forum_in\"
rm -f \"$forum_in\"
[ \"$forum_rc\" -eq 0 ] || exit \"$forum_rc\"
{END}
"
    )
}

/// A new hook file holding only the block.
pub(crate) fn new_hook_file(hook: &str) -> String {
    format!("#!/bin/sh\n{}", block(hook))
}

/// `text` with the block added (or replaced by the current one), right after the `#!` line.
pub(crate) fn with_block(text: &str, hook: &str) -> String {
    with_block_calling(text, hook)
}

/// [`with_block`] whose block calls `git forum hook CALL`.
fn with_block_calling(text: &str, call: &str) -> String {
    let base = without_block(text);
    if base.trim().is_empty() {
        return format!("#!/bin/sh\n{}", block_calling(call));
    }
    let (head, rest) = match base.strip_prefix("#!") {
        Some(_) => match base.find('\n') {
            Some(i) => base.split_at(i + 1),
            None => (base.as_str(), ""),
        },
        None => ("#!/bin/sh\n", base.as_str()),
    };
    let mut out = head.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&block_calling(call));
    out.push_str(rest);
    out
}

/// `text` without the block (every copy of it).
pub(crate) fn without_block(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end();
        if !inside && bare == BEGIN {
            inside = true;
            continue;
        }
        if inside {
            if bare == END {
                inside = false;
            }
            continue;
        }
        out.push_str(line);
    }
    out
}

/// Whether what is left of a hook file after removing the block does nothing.
fn is_empty_hook(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with("#!"))
}

/// Where git runs hooks from for this repository (`core.hooksPath` honoured), as git reports it.
fn hooks_dir(repo: &gix::Repository) -> Result<PathBuf> {
    let base = repo.workdir().unwrap_or_else(|| repo.git_dir());
    let mut cmd = crate::gitproc::command();
    cmd.current_dir(base)
        .args(["rev-parse", "--path-format=absolute", "--git-path", "hooks"]);
    let o = crate::gitproc::output(cmd, None, 1 << 20)
        .map_err(|e| Error::unavailable(format!("cannot run git ({e}); install git")))?;
    if !o.status.success() {
        return Err(Error::unavailable(format!(
            "cannot find the hooks directory: {}",
            sync::failure_line(&o)
        )));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&o.stdout).trim_end_matches('\n'),
    ))
}

fn io_fail(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::internal(format!("{what} {}: {e}", path.display()))
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| io_fail("reading", path, e))?;
    let mut perm = meta.permissions();
    perm.set_mode(perm.mode() | 0o755);
    std::fs::set_permissions(path, perm).map_err(|e| io_fail("making executable", path, e))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<()> {
    Ok(())
}

/// What `hooks install` or `hooks uninstall` did to one hook file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HookFileChange {
    /// The hook's name: `pre-push` or `pre-receive`.
    pub(crate) hook: &'static str,
    /// The hook file.
    pub(crate) path: PathBuf,
    /// What was done, worded to precede "HOOK hook: PATH" ("installed", "removed the block
    /// from", ...).
    pub(crate) action: &'static str,
    /// The repository's `core.hooksPath`, when it redirects where git runs hooks from.
    pub(crate) hooks_path: Option<String>,
    /// Whether installing the server hook let clients send push options (so a dispatch
    /// worker's `forum-worker` option reaches it).
    pub(crate) push_options: bool,
}

/// Installs (`install`) or removes the git forum block in the pre-push hook (with `server`:
/// the pre-receive hook) of the repository at `dir`. With `scan_code` the installed pre-push
/// block also scans the code pushed.
pub(crate) fn change_hook_file(
    dir: &Path,
    install: bool,
    server: bool,
    scan_code: bool,
) -> Result<HookFileChange> {
    let repo = open_repo(dir)?;
    let hooks = hooks_dir(&repo)?;
    let scan_code = install && scan_code;
    let hook = if server { "pre-receive" } else { "pre-push" };
    let call = if scan_code {
        "pre-push --scan-code"
    } else {
        hook
    };
    let path = hooks.join(hook);
    let existing = read_hook_file(&path)?;
    let hooks_path = repo
        .config_snapshot()
        .string("core.hooksPath")
        .map(|v| v.to_string());
    let action = if install {
        install_block(&hooks, &path, existing.as_deref(), hook, call, scan_code)?
    } else {
        remove_block(&path, existing.as_deref())?
    };
    let push_options = install && server;
    if push_options {
        worker_push::advertise_push_options(&Git::for_repo(&repo))?;
    }
    Ok(HookFileChange {
        hook,
        path,
        action,
        hooks_path,
        push_options,
    })
}

/// The hook file's text, or `None` when there is none.
fn read_hook_file(path: &Path) -> Result<Option<String>> {
    match path.metadata() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_fail("reading", path, e)),
        // A hook is a script; a FIFO or a device there is not one (and would block or not end).
        Ok(m) if !m.is_file() => Err(Error::conflict(format!(
            "hook file {} is not a regular file; move it away and install again",
            path.display()
        ))),
        Ok(_) => Ok(Some(
            crate::config::input::read_limited_text(
                path,
                MAX_HOOK_FILE_BYTES,
                "hook file",
                "move it away and install again",
            )
            .map_err(Error::fail)?,
        )),
    }
}

fn install_block(
    hooks: &Path,
    path: &Path,
    existing: Option<&str>,
    hook: &str,
    call: &str,
    scan_code: bool,
) -> Result<&'static str> {
    let text = match existing {
        Some(t) if scan_code => with_block_calling(t, call),
        Some(t) => with_block(t, hook),
        None if scan_code => with_block_calling("", call),
        None => new_hook_file(hook),
    };
    let action = match existing {
        Some(t) if t == text => "already installed in",
        Some(t) if t.contains(BEGIN) => "updated the block in",
        Some(_) => "added a block to the existing",
        None => "installed",
    };
    std::fs::create_dir_all(hooks).map_err(|e| io_fail("creating", hooks, e))?;
    if existing != Some(text.as_str()) {
        std::fs::write(path, &text).map_err(|e| io_fail("writing", path, e))?;
    }
    make_executable(path)?;
    Ok(action)
}

fn remove_block(path: &Path, existing: Option<&str>) -> Result<&'static str> {
    match existing {
        Some(t) if t.contains(BEGIN) => {
            let rest = without_block(t);
            if is_empty_hook(&rest) {
                std::fs::remove_file(path).map_err(|e| io_fail("removing", path, e))?;
                Ok("removed")
            } else {
                std::fs::write(path, rest).map_err(|e| io_fail("writing", path, e))?;
                Ok("removed the block from")
            }
        }
        _ => Ok("nothing to remove from"),
    }
}

/// The ref updates git hands the pre-receive hook on `input` (ledger refs only).
pub(crate) fn pre_receive_updates(input: &mut impl std::io::BufRead) -> Result<Vec<RefUpdate>> {
    let mut updates = Vec::new();
    ledger_lines(input, "pre-receive", 2, true, &mut |f: &[&str]| {
        if let [old, new, refname, ..] = f {
            updates.push(RefUpdate {
                refname: refname.to_string(),
                old: old.to_string(),
                new: new.to_string(),
            });
        }
    })?;
    Ok(updates)
}

/// The pre-push check of the repository at `dir` pushing to `remote`, reading git's ref-update
/// lines from `input`: the branch rules of `[push]` (no protected branch, no rewrite; `allow`
/// from the push's environment); ledger refs verified and their bodies scanned; with
/// `scan_code`, the code refs' new commits scanned too. Returns why the push is refused, one
/// line each (none: let it through).
pub(crate) fn pre_push(
    dir: &Path,
    input: &mut impl std::io::BufRead,
    remote: &str,
    scan_code: bool,
    allow: push::Allowances,
) -> Result<Vec<String>> {
    let mut updates = Vec::new();
    ledger_lines(input, "pre-push", 2, true, &mut |f: &[&str]| {
        if let [a, b, c, d] = f[..] {
            updates.push((a.to_string(), b.to_string(), c.to_string(), d.to_string()));
        }
    })?;
    if updates.is_empty() {
        return Ok(Vec::new());
    }
    let repo = open_repo(dir)?;
    let policy = crate::config::load_policy(dir, None)?;
    let git = Git::for_repo(&repo);
    let mut refused = match branch_refusals(&git, &policy.push, &updates, remote, allow) {
        Ok(r) => r,
        // Fail closed, as below.
        Err(e) => vec![e.to_string()],
    };
    let scan_code = scan_code.then_some(remote);
    if scan_code.is_none() && !updates.iter().any(|u| u.2.starts_with(LEDGER_PREFIX)) {
        return Ok(refused);
    }
    let gate = sync::gate_guard(&policy.secrets);
    refused.extend(
        match sync::check_pre_push(&repo, &updates, &gate, scan_code) {
            Ok(r) => r,
            // Fail closed: a check that could not read what it should refuses the push.
            Err(e) => vec![e.to_string()],
        },
    );
    Ok(refused)
}

/// The allowances of a push from its environment ([`push::ALLOW_PROTECTED_ENV`],
/// [`push::ALLOW_FORCE_ENV`] set to `1`).
pub(crate) fn allowances_from_env() -> push::Allowances {
    let on = |v: &str| std::env::var(v).is_ok_and(|v| v == "1");
    push::Allowances {
        protected: on(push::ALLOW_PROTECTED_ENV),
        force: on(push::ALLOW_FORCE_ENV),
    }
}

/// The branch rules over git's pre-push lines (`local_ref local_oid remote_ref remote_oid`).
fn branch_refusals(
    git: &Git,
    rules: &push::PushRules,
    updates: &[(String, String, String, String)],
    remote: &str,
    allow: push::Allowances,
) -> std::result::Result<Vec<String>, StoreError> {
    let code: Vec<&(String, String, String, String)> = updates
        .iter()
        .filter(|u| !u.2.starts_with(LEDGER_PREFIX))
        .collect();
    if code.is_empty() {
        return Ok(Vec::new());
    }
    let default = if rules.protected.is_none() {
        remote_default_branch(git, remote)
    } else {
        None
    };
    let protected = rules.protected_with(default.as_deref());
    let mut refs = Vec::new();
    for (_, local, remote_ref, remote_oid) in code {
        refs.push(pushed_ref(git, remote_ref, remote_oid, local)?);
    }
    Ok(push::refusals(
        rules,
        &protected,
        &refs,
        allow,
        remote,
        push::RulesFrom::Client,
    ))
}

/// What git says of one update from `old` to `new` of `refname`.
fn pushed_ref(
    git: &Git,
    refname: &str,
    old: &str,
    new: &str,
) -> std::result::Result<push::PushedRef, StoreError> {
    let zero = |o: &str| !o.is_empty() && o.bytes().all(|b| b == b'0');
    let (deletes, creates) = (zero(new), zero(old));
    let fast_forward = !deletes
        && !creates
        && git
            .run(&["merge-base", "--is-ancestor", old, new])?
            .status
            .success();
    Ok(push::PushedRef {
        remote_ref: refname.to_string(),
        deletes,
        creates,
        fast_forward,
    })
}

/// The remote's default branch: what `refs/remotes/REMOTE/HEAD` points at (a clone sets it),
/// else what the remote itself says (`git ls-remote --symref REMOTE HEAD`); `None` when
/// neither tells (then no branch is protected by default).
fn remote_default_branch(git: &Git, remote: &str) -> Option<String> {
    if !remote.is_empty() && !remote.contains('/') && !remote.starts_with('-') {
        let local = format!("refs/remotes/{remote}/HEAD");
        if let Ok(o) = git.run(&["symbolic-ref", "--quiet", &local])
            && o.status.success()
        {
            let target = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if let Some(b) = target.strip_prefix(&format!("refs/remotes/{remote}/")) {
                return Some(b.to_string());
            }
        }
    }
    if remote.is_empty() || remote.starts_with('-') {
        return None;
    }
    let o = git.run(&["ls-remote", "--symref", remote, "HEAD"]).ok()?;
    if !o.status.success() {
        return None;
    }
    String::from_utf8_lossy(&o.stdout).lines().find_map(|l| {
        l.strip_prefix("ref: refs/heads/")
            .and_then(|rest| rest.split('\t').next())
            .map(str::to_string)
    })
}

/// The longest line a hook reads from git: one ref update is two object ids and a ref name or
/// two, far below this.
pub(crate) const MAX_HOOK_LINE_BYTES: u64 = 64 * 1024;
/// The most lines a hook reads from git: one per ref updated, far more than any push.
pub(crate) const MAX_HOOK_LINES: u64 = 1_000_000;
/// The most ledger refs one push may update (each is verified whole before it is let through).
pub(crate) const MAX_HOOK_LEDGER_REFS: u64 = 100_000;

/// Reads the ref-update lines git hands a hook on `input`, each split on whitespace, and hands
/// `keep` those whose field `ref_field` names a ledger ref (with `all`, every line that names a
/// ref, `refs/...`, as git always does; other lines are not kept, so memory follows the refs
/// pushed). Every line is capped at [`MAX_HOOK_LINE_BYTES`], the count at [`MAX_HOOK_LINES`],
/// and the ledger refs and the other refs kept at [`MAX_HOOK_LEDGER_REFS`] each, so an endless
/// or garbled stdin ends with one line instead of filling memory.
pub(crate) fn ledger_lines(
    input: &mut impl std::io::BufRead,
    hook: &str,
    ref_field: usize,
    all: bool,
    keep: &mut dyn FnMut(&[&str]),
) -> Result<()> {
    use crate::store::capped::{Line, read_line};
    let mut buf = Vec::new();
    let mut n: u64 = 0;
    let mut ledgers: u64 = 0;
    let mut others: u64 = 0;
    loop {
        let read = read_line(input, &mut buf, MAX_HOOK_LINE_BYTES).map_err(|e| {
            Error::internal(format!(
                "git forum hook {hook}: reading standard input: {e}"
            ))
        })?;
        if buf.is_empty() {
            return Ok(());
        }
        n += 1;
        if read == Line::TooLong {
            return Err(Error::fail(format!(
                "git forum hook {hook}: line {n} of standard input is longer than {MAX_HOOK_LINE_BYTES} bytes; \
                 git sends one short line per ref, so give the hook what git gives it"
            )));
        }
        if n > MAX_HOOK_LINES {
            return Err(Error::fail(format!(
                "git forum hook {hook}: standard input holds more than {MAX_HOOK_LINES} lines; \
                 git sends one line per ref, so push fewer refs at a time"
            )));
        }
        let text = String::from_utf8_lossy(&buf);
        let refname = text.split_whitespace().nth(ref_field);
        let is_ledger = refname.is_some_and(|r| r.starts_with(crate::store::git::LEDGER_PREFIX));
        // Git names every ref in full; a line that does not is not one git sends.
        let is_ref = refname.is_some_and(|r| r.starts_with("refs/"));
        let kept = is_ledger || (all && is_ref);
        if !kept {
            if read == Line::Last {
                return Ok(());
            }
            continue;
        }
        let fields: Vec<&str> = text.split_whitespace().collect();
        if std::str::from_utf8(&buf).is_err() {
            return Err(Error::fail(format!(
                "git forum hook {hook}: line {n} of standard input names a ledger ref that is not UTF-8; \
                 ledger names are UTF-8, so this is not a ledger ref git would send"
            )));
        }
        if is_ledger {
            ledgers += 1;
            if ledgers > MAX_HOOK_LEDGER_REFS {
                return Err(Error::fail(format!(
                    "git forum hook {hook}: standard input names more than {MAX_HOOK_LEDGER_REFS} ledger refs; \
                     push fewer ledgers at a time"
                )));
            }
        } else {
            others += 1;
            if others > MAX_HOOK_LEDGER_REFS {
                return Err(Error::fail(format!(
                    "git forum hook {hook}: standard input names more than {MAX_HOOK_LEDGER_REFS} refs that are not ledgers; \
                     push fewer refs at a time"
                )));
            }
        }
        keep(&fields);
        if read == Line::Last {
            return Ok(());
        }
    }
}

/// A ref update the server-side check refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefusedUpdate {
    pub(crate) refname: String,
    pub(crate) why: String,
}

/// The server-side check of the repository at `dir` (pre-receive, update) of a push by
/// `pusher`: deletions and non-append updates of ledger refs are refused, and a dispatch
/// worker's push may only create results refs ([`worker_push`]). Returns the refused updates
/// (none: accept).
pub(crate) fn server_check(
    dir: &Path,
    updates: &[RefUpdate],
    pusher: &Pusher,
) -> Result<Vec<RefusedUpdate>> {
    if updates.is_empty() {
        return Ok(Vec::new());
    }
    let repo = open_repo(dir)?;
    let git = Git::for_repo(&repo);
    let mut refused = worker_push::refusals(&git, pusher, updates)?;
    // A ref the workers' rule refused is not looked at again: one line says why.
    let rest: Vec<RefUpdate> = updates
        .iter()
        .filter(|u| !refused.iter().any(|r| r.refname == u.refname))
        .cloned()
        .collect();
    let updates = rest.as_slice();
    refused.extend(server_branch_refusals(&git, updates)?);
    if !updates.iter().any(|u| u.refname.starts_with(LEDGER_PREFIX)) {
        return Ok(refused);
    }
    let hash = repo.object_hash();
    // `git cat-file` sees the objects of a push still in quarantine.
    let mut objects = CatFile::start(&git)?;
    for u in updates
        .iter()
        .filter(|u| u.refname.starts_with(LEDGER_PREFIX))
    {
        let why = match sync::check_server_update(&mut objects, hash, u) {
            Ok(Ok(())) => continue,
            Ok(Err(why)) => why.to_string(),
            Err(e) => {
                let e: StoreError = e;
                format!("cannot check it: {e}")
            }
        };
        refused.push(RefusedUpdate {
            refname: u.refname.clone(),
            why,
        });
    }
    Ok(refused)
}

/// The branch rules a server opts into with its git config: `forum.protectedBranch` (one value
/// per branch name or `prefix/*`) and `forum.denyForcePush`. Without either, none.
fn server_branch_refusals(git: &Git, updates: &[RefUpdate]) -> Result<Vec<RefusedUpdate>> {
    let config = |args: &[&str]| -> Result<Vec<String>> {
        let o = git.run(args).map_err(Error::from)?;
        Ok(String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect())
    };
    let protected = config(&["config", "--get-all", "forum.protectedBranch"])?;
    let deny_force = config(&["config", "--type=bool", "--get", "forum.denyForcePush"])?
        .last()
        .is_some_and(|v| v == "true");
    if protected.is_empty() && !deny_force {
        return Ok(Vec::new());
    }
    let rules = push::PushRules {
        protected: Some(protected.clone()),
        allow_force: !deny_force,
    };
    let mut refused = Vec::new();
    for u in updates
        .iter()
        .filter(|u| !u.refname.starts_with(LEDGER_PREFIX))
    {
        let r = pushed_ref(git, &u.refname, &u.old, &u.new).map_err(Error::from)?;
        for why in push::refusals(
            &rules,
            &protected,
            &[r],
            push::Allowances::default(),
            "",
            push::RulesFrom::Server,
        ) {
            refused.push(RefusedUpdate {
                refname: u.refname.clone(),
                why,
            });
        }
    }
    Ok(refused)
}

/// One update a hook refuses: the ref (pre-receive names it; pre-push's line says which
/// ledger) and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Refusal {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) refname: Option<String>,
    pub(crate) why: String,
}

/// The answer a hook would give: `ok` when it lets every update through.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct HookAnswer {
    pub(crate) hook: String,
    pub(crate) ok: bool,
    pub(crate) refused: Vec<Refusal>,
}

/// The check the hook `req.hook` runs, on `req.stdin` as git would hand it, in the repository at
/// `dir`; nothing is refused by running a hook, it is only said.
pub(crate) fn check(
    dir: &Path,
    req: &crate::surface::request::tlog::HooksCheck,
) -> Result<HookAnswer> {
    let mut input = req.stdin.as_bytes();
    let refused = if req.hook == "pre-push" {
        let remote = req.remote.clone().unwrap_or_default();
        pre_push(
            dir,
            &mut input,
            &remote,
            req.scan_code,
            push::Allowances::default(),
        )?
        .into_iter()
        .map(|why| Refusal { refname: None, why })
        .collect()
    } else {
        let updates = pre_receive_updates(&mut input)?;
        server_check(dir, &updates, &Pusher::default())?
            .into_iter()
            .map(|r| Refusal {
                refname: Some(r.refname),
                why: r.why,
            })
            .collect::<Vec<_>>()
    };
    Ok(HookAnswer {
        hook: req.hook.clone(),
        ok: refused.is_empty(),
        refused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let o = crate::gitproc::command()
            .current_dir(dir)
            .args(args)
            .output()
            .expect("git runs");
        assert!(o.status.success(), "git {args:?}: {o:?}");
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        dir
    }

    #[test]
    fn shipped_hook_files_are_the_installed_form() {
        assert_eq!(
            include_str!("../../hooks/pre-push"),
            new_hook_file("pre-push")
        );
        assert_eq!(
            include_str!("../../hooks/pre-receive"),
            new_hook_file("pre-receive")
        );
    }

    #[test]
    fn block_goes_after_the_shebang_and_comes_out_cleanly() {
        let user = "#!/bin/bash\necho hi\nexit 0\n";
        let with = with_block(user, "pre-push");
        assert!(with.starts_with("#!/bin/bash\n# BEGIN git-forum\n"));
        assert!(with.ends_with("# END git-forum\necho hi\nexit 0\n"));
        assert_eq!(with_block(&with, "pre-push"), with, "idempotent");
        assert_eq!(without_block(&with), user);
        assert!(is_empty_hook(&without_block(&new_hook_file("pre-push"))));
        assert!(!is_empty_hook(user));
        let no_shebang = "echo hi\n";
        assert!(with_block(no_shebang, "pre-push").starts_with("#!/bin/sh\n# BEGIN"));
    }

    #[test]
    fn install_then_uninstall_leaves_a_user_hook_as_it_was() {
        let dir = repo();
        let first = change_hook_file(dir.path(), true, false, false).unwrap();
        assert_eq!((first.hook, first.action), ("pre-push", "installed"));
        assert_eq!(first.hooks_path, None);
        let text = std::fs::read_to_string(&first.path).unwrap();
        assert_eq!(text, new_hook_file("pre-push"));
        let again = change_hook_file(dir.path(), true, false, false).unwrap();
        assert_eq!(again.action, "already installed in");
        let scan = change_hook_file(dir.path(), true, false, true).unwrap();
        assert_eq!(scan.action, "updated the block in");
        let text = std::fs::read_to_string(&scan.path).unwrap();
        assert!(
            text.contains("git forum hook pre-push --scan-code"),
            "{text}"
        );
        let gone = change_hook_file(dir.path(), false, false, false).unwrap();
        assert_eq!(gone.action, "removed");
        assert!(!gone.path.exists());

        std::fs::write(&gone.path, "#!/bin/sh\necho mine\n").unwrap();
        let added = change_hook_file(dir.path(), true, false, false).unwrap();
        assert_eq!(added.action, "added a block to the existing");
        let kept = change_hook_file(dir.path(), false, false, false).unwrap();
        assert_eq!(kept.action, "removed the block from");
        assert_eq!(
            std::fs::read_to_string(&kept.path).unwrap(),
            "#!/bin/sh\necho mine\n"
        );
        let none = change_hook_file(dir.path(), false, true, false).unwrap();
        assert_eq!(
            (none.hook, none.action),
            ("pre-receive", "nothing to remove from")
        );
    }

    #[test]
    fn a_hook_path_that_is_not_a_file_is_a_conflict() {
        let dir = repo();
        std::fs::create_dir_all(dir.path().join(".git/hooks/pre-push")).unwrap();
        let e = change_hook_file(dir.path(), true, false, false).unwrap_err();
        assert_eq!(e.class, super::super::Class::Conflict);
        assert!(e.message.contains("is not a regular file"), "{}", e.message);
    }

    #[test]
    fn every_ref_is_read_from_the_hooks_stdin_and_only_ledger_refs_when_asked() {
        let zero = "0".repeat(40);
        let one = "1".repeat(40);
        let stdin = format!(
            "{zero} {one} refs/heads/main\n{zero} {one} refs/forum/ledgers/main\n{one} {zero} refs/forum/ledgers/old"
        );
        // The server's branch rules see code refs too.
        let updates = pre_receive_updates(&mut stdin.as_bytes()).unwrap();
        assert_eq!(updates.len(), 3);
        assert_eq!(updates[0].refname, "refs/heads/main");
        assert_eq!(updates[1].refname, "refs/forum/ledgers/main");
        assert_eq!(
            (updates[2].old.as_str(), updates[2].new.as_str()),
            (one.as_str(), zero.as_str())
        );
        let mut ledgers = 0;
        ledger_lines(&mut stdin.as_bytes(), "pre-push", 2, false, &mut |_| {
            ledgers += 1
        })
        .unwrap();
        assert_eq!(ledgers, 2);

        let mut all = 0;
        ledger_lines(&mut stdin.as_bytes(), "pre-push", 2, true, &mut |_| {
            all += 1
        })
        .unwrap();
        assert_eq!(all, 3);
    }

    #[test]
    fn a_garbled_stdin_ends_with_one_line_naming_the_hook() {
        let long = "x".repeat(MAX_HOOK_LINE_BYTES as usize + 1);
        let e = pre_receive_updates(&mut long.as_bytes()).unwrap_err();
        assert!(
            e.message.starts_with("git forum hook pre-receive: line 1 "),
            "{}",
            e.message
        );
        assert!(!e.message.contains('\n'));
        let bad = b"a b refs/forum/ledgers/\xff\n";
        let e = pre_receive_updates(&mut &bad[..]).unwrap_err();
        assert!(e.message.contains("not UTF-8"), "{}", e.message);
    }

    #[test]
    fn a_push_of_nothing_opens_nothing() {
        // Not a repository: nothing is opened, so nothing fails.
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            pre_push(
                dir.path(),
                &mut &b""[..],
                "origin",
                false,
                push::Allowances::default()
            )
            .unwrap(),
            Vec::<String>::new()
        );
        let none: Vec<RefUpdate> = Vec::new();
        assert_eq!(
            server_check(dir.path(), &none, &Pusher::default()).unwrap(),
            Vec::new()
        );
    }

    #[test]
    fn the_server_refuses_deleting_a_ledger_and_lets_code_refs_through() {
        let dir = repo();
        let (zero, one) = ("0".repeat(40), "1".repeat(40));
        let updates = [
            RefUpdate {
                refname: "refs/heads/main".into(),
                old: one.clone(),
                new: zero.clone(),
            },
            RefUpdate {
                refname: "refs/forum/ledgers/main".into(),
                old: one,
                new: zero,
            },
        ];
        let refused = server_check(dir.path(), &updates, &Pusher::default()).unwrap();
        assert_eq!(
            refused,
            vec![RefusedUpdate {
                refname: "refs/forum/ledgers/main".into(),
                why: "ledgers are append-only; deleting one is not allowed".into(),
            }]
        );
    }
}
