//! `hooks install|uninstall` and the entry points the installed hooks call
//! (`hook pre-push`, `hook pre-receive`, `hook update`).
//!
//! Installing writes a block between `# BEGIN git-forum` and `# END git-forum` near the top of
//! the hook file (after its `#!` line), so an existing hook keeps working; the block saves the
//! hook's stdin, hands it to `git forum hook NAME "$@"`, and restores it for the rest of the
//! script. Uninstalling removes only that block, and the file when nothing else is left.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{CliError, Ctx};
use crate::store::git::{StoreError, open_repo};
use crate::store::sync::{self, CatFile, Git, RefUpdate};

/// The largest hook file `hooks install` reads to add its block to.
pub(crate) const MAX_HOOK_FILE_BYTES: u64 = 1024 * 1024;

/// The first line of the block.
pub(crate) const BEGIN: &str = "# BEGIN git-forum";
/// The last line of the block.
pub(crate) const END: &str = "# END git-forum";

/// Install or remove the git forum hooks.
#[derive(Debug, clap::Args)]
pub(crate) struct HooksArgs {
    #[command(subcommand)]
    pub(crate) action: HooksAction,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum HooksAction {
    /// Add the git forum block to the pre-push hook (with --server: the pre-receive hook).
    Install(InstallArgs),
    /// Remove the git forum block (and the hook file if nothing else is in it).
    Uninstall(UninstallArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct UninstallArgs {
    /// The server-side hook (pre-receive: ledgers are append-only) instead of pre-push.
    #[arg(long)]
    pub(crate) server: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct InstallArgs {
    /// The server-side hook (pre-receive: ledgers are append-only) instead of pre-push.
    #[arg(long)]
    pub(crate) server: bool,
    /// The pre-push hook also scans the code being pushed: the lines that the pushed commits
    /// add are scanned for secrets, and a push that adds one is refused (ledger bodies are
    /// always scanned).
    #[arg(long, conflicts_with = "server")]
    pub(crate) scan_code: bool,
}

/// Entry points called by installed hooks.
#[derive(Debug, clap::Args)]
pub(crate) struct HookArgs {
    #[command(subcommand)]
    pub(crate) hook: HookName,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum HookName {
    /// Verify every ledger ref being pushed and scan its bodies for secrets (stdin as git
    /// gives it to pre-push).
    PrePush {
        /// Also scan the lines the pushed code commits add.
        #[arg(long)]
        scan_code: bool,
        /// The remote's name.
        remote: Option<String>,
        /// The remote's URL.
        url: Option<String>,
    },
    /// Refuse deletions and non-append updates of ledger refs (stdin as git gives it).
    PreReceive,
    /// The same check for one ref, as git's update hook is called.
    Update {
        refname: String,
        old: String,
        new: String,
    },
}

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
fn hooks_dir(repo: &gix::Repository) -> Result<PathBuf, CliError> {
    let base = repo.workdir().unwrap_or_else(|| repo.git_dir());
    let o = Command::new("git")
        .current_dir(base)
        .args(["rev-parse", "--path-format=absolute", "--git-path", "hooks"])
        .output()
        .map_err(|e| CliError::unavailable(format!("cannot run git ({e}); install git")))?;
    if !o.status.success() {
        return Err(CliError::unavailable(format!(
            "cannot find the hooks directory: {}",
            sync::failure_line(&o)
        )));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&o.stdout).trim_end_matches('\n'),
    ))
}

fn io_fail(what: &str, path: &Path, e: std::io::Error) -> CliError {
    CliError::internal(format!("{what} {}: {e}", path.display()))
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<(), CliError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| io_fail("reading", path, e))?;
    let mut perm = meta.permissions();
    perm.set_mode(perm.mode() | 0o755);
    std::fs::set_permissions(path, perm).map_err(|e| io_fail("making executable", path, e))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<(), CliError> {
    Ok(())
}

pub(crate) fn hooks(ctx: &Ctx, args: HooksArgs) -> Result<(), CliError> {
    let repo = open_repo(&ctx.dir)?;
    let dir = hooks_dir(&repo)?;
    let (install, server, scan_code) = match &args.action {
        HooksAction::Install(a) => (true, a.server, a.scan_code),
        HooksAction::Uninstall(a) => (false, a.server, false),
    };
    let hook = if server { "pre-receive" } else { "pre-push" };
    let call = if scan_code {
        "pre-push --scan-code"
    } else {
        hook
    };
    let path = dir.join(hook);
    let existing = match path.metadata() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_fail("reading", &path, e)),
        // A hook is a script; a FIFO or a device there is not one (and would block or not end).
        Ok(m) if !m.is_file() => {
            return Err(CliError::conflict(format!(
                "hook file {} is not a regular file; move it away and install again",
                path.display()
            )));
        }
        Ok(_) => Some(
            super::input::read_limited_text(
                &path,
                MAX_HOOK_FILE_BYTES,
                "hook file",
                "move it away and install again",
            )
            .map_err(CliError::fail)?,
        ),
    };
    let redirected = repo
        .config_snapshot()
        .string("core.hooksPath")
        .map(|v| v.to_string());
    let action;
    if install {
        let text = match &existing {
            Some(t) if scan_code => with_block_calling(t, call),
            Some(t) => with_block(t, hook),
            None if scan_code => with_block_calling("", call),
            None => new_hook_file(hook),
        };
        action = match &existing {
            Some(t) if *t == text => "already installed in",
            Some(t) if t.contains(BEGIN) => "updated the block in",
            Some(_) => "added a block to the existing",
            None => "installed",
        };
        std::fs::create_dir_all(&dir).map_err(|e| io_fail("creating", &dir, e))?;
        if existing.as_deref() != Some(text.as_str()) {
            std::fs::write(&path, &text).map_err(|e| io_fail("writing", &path, e))?;
        }
        make_executable(&path)?;
    } else {
        match &existing {
            Some(t) if t.contains(BEGIN) => {
                let rest = without_block(t);
                if is_empty_hook(&rest) {
                    std::fs::remove_file(&path).map_err(|e| io_fail("removing", &path, e))?;
                    action = "removed";
                } else {
                    std::fs::write(&path, rest).map_err(|e| io_fail("writing", &path, e))?;
                    action = "removed the block from";
                }
            }
            _ => action = "nothing to remove from",
        }
    }
    if ctx.json {
        ctx.out_json(&serde_json::json!({
            "hook": hook,
            "path": path.display().to_string(),
            "action": action,
            "hooks_path": redirected,
        }))
    } else {
        ctx.out(&format!("{action} {hook} hook: {}", path.display()))?;
        if let Some(p) = redirected {
            ctx.out(&format!(
                "note: core.hooksPath is set ({p}); git runs hooks from there, so that is where the hook went"
            ))?;
        }
        if install {
            ctx.out(
                "the hook runs `git forum`, so git-forum must be on PATH wherever git runs it",
            )?;
        }
        Ok(())
    }
}

pub(crate) fn hook(ctx: &Ctx, args: HookArgs) -> Result<(), CliError> {
    match args.hook {
        HookName::PrePush {
            scan_code, remote, ..
        } => pre_push(ctx, scan_code.then(|| remote.unwrap_or_default())),
        HookName::PreReceive => {
            let mut updates = Vec::new();
            ledger_lines(
                &mut std::io::stdin().lock(),
                "pre-receive",
                2,
                false,
                &mut |f: &[&str]| {
                    if let [old, new, refname, ..] = f {
                        updates.push(RefUpdate {
                            refname: refname.to_string(),
                            old: old.to_string(),
                            new: new.to_string(),
                        });
                    }
                },
            )?;
            server_check(ctx, &updates)
        }
        HookName::Update { refname, old, new } => {
            server_check(ctx, &[RefUpdate { refname, old, new }])
        }
    }
}

/// The pre-push check: ledger refs verified and their bodies scanned; with `scan_code` (the
/// remote's name), the code refs' new commits scanned too.
fn pre_push(ctx: &Ctx, scan_code: Option<String>) -> Result<(), CliError> {
    let mut updates = Vec::new();
    ledger_lines(
        &mut std::io::stdin().lock(),
        "pre-push",
        2,
        scan_code.is_some(),
        &mut |f: &[&str]| {
            if let [a, b, c, d] = f[..] {
                updates.push((a.to_string(), b.to_string(), c.to_string(), d.to_string()));
            }
        },
    )?;
    // Without --scan-code, code refs are never looked at, and a push without ledger refs
    // never opens anything.
    if scan_code.is_none()
        && !updates
            .iter()
            .any(|u| u.2.starts_with(crate::store::git::LEDGER_PREFIX))
    {
        return Ok(());
    }
    if updates.is_empty() {
        return Ok(());
    }
    let repo = open_repo(&ctx.dir)?;
    let gate = sync::gate_guard(&crate::config::load_policy(&ctx.dir, None)?.secrets);
    let refusals = match sync::check_pre_push(&repo, &updates, &gate, scan_code.as_deref()) {
        Ok(r) => r,
        // Fail closed: a check that could not read what it should refuses the push.
        Err(e) => vec![e.to_string()],
    };
    if refusals.is_empty() {
        return Ok(());
    }
    for r in &refusals {
        eprintln!("git forum pre-push: refusing the push: {r}");
    }
    Err(CliError::silent(1))
}

/// The longest line a hook reads from git: one ref update is two object ids and a ref name or
/// two, far below this.
pub(crate) const MAX_HOOK_LINE_BYTES: u64 = 64 * 1024;
/// The most lines a hook reads from git: one per ref updated, far more than any push.
pub(crate) const MAX_HOOK_LINES: u64 = 1_000_000;
/// The most ledger refs one push may update (each is verified whole before it is let through).
pub(crate) const MAX_HOOK_LEDGER_REFS: u64 = 100_000;

/// Reads the ref-update lines git hands a hook on `input`, each split on whitespace, and hands
/// `keep` those whose field `ref_field` names a ledger ref (the only ones checked; others are
/// not kept, so memory follows the ledger refs pushed; with `all`, every line is kept). Every
/// line is capped at
/// [`MAX_HOOK_LINE_BYTES`], the count at [`MAX_HOOK_LINES`] and the ledger refs at
/// [`MAX_HOOK_LEDGER_REFS`], so an endless or garbled stdin
/// ends with one line instead of filling memory.
fn ledger_lines(
    input: &mut impl std::io::BufRead,
    hook: &str,
    ref_field: usize,
    all: bool,
    keep: &mut dyn FnMut(&[&str]),
) -> Result<(), CliError> {
    use crate::store::capped::{Line, read_line};
    let mut buf = Vec::new();
    let mut n: u64 = 0;
    let mut ledgers: u64 = 0;
    loop {
        let read = read_line(input, &mut buf, MAX_HOOK_LINE_BYTES).map_err(|e| {
            CliError::internal(format!(
                "git forum hook {hook}: reading standard input: {e}"
            ))
        })?;
        if buf.is_empty() {
            return Ok(());
        }
        n += 1;
        if read == Line::TooLong {
            return Err(CliError::fail(format!(
                "git forum hook {hook}: line {n} of standard input is longer than {MAX_HOOK_LINE_BYTES} bytes; \
                 git sends one short line per ref, so give the hook what git gives it"
            )));
        }
        if n > MAX_HOOK_LINES {
            return Err(CliError::fail(format!(
                "git forum hook {hook}: standard input holds more than {MAX_HOOK_LINES} lines; \
                 git sends one line per ref, so push fewer refs at a time"
            )));
        }
        let text = String::from_utf8_lossy(&buf);
        let is_ledger = text
            .split_whitespace()
            .nth(ref_field)
            .is_some_and(|r| r.starts_with(crate::store::git::LEDGER_PREFIX));
        if !is_ledger && !all {
            if read == Line::Last {
                return Ok(());
            }
            continue;
        }
        let fields: Vec<&str> = text.split_whitespace().collect();
        if std::str::from_utf8(&buf).is_err() {
            return Err(CliError::fail(format!(
                "git forum hook {hook}: line {n} of standard input names a ledger ref that is not UTF-8; \
                 ledger names are UTF-8, so this is not a ledger ref git would send"
            )));
        }
        ledgers += 1;
        if ledgers > MAX_HOOK_LEDGER_REFS {
            return Err(CliError::fail(format!(
                "git forum hook {hook}: standard input names more than {MAX_HOOK_LEDGER_REFS} ledger refs; \
                 push fewer ledgers at a time"
            )));
        }
        keep(&fields);
        if read == Line::Last {
            return Ok(());
        }
    }
}

fn server_check(ctx: &Ctx, updates: &[RefUpdate]) -> Result<(), CliError> {
    if !updates
        .iter()
        .any(|u| u.refname.starts_with(crate::store::git::LEDGER_PREFIX))
    {
        return Ok(());
    }
    let repo = open_repo(&ctx.dir)?;
    let hash = repo.object_hash();
    // `git cat-file` sees the objects of a push still in quarantine.
    let mut objects = CatFile::start(&Git::for_repo(&repo))?;
    let mut refused = false;
    for u in updates {
        match sync::check_server_update(&mut objects, hash, u) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                eprintln!("git forum: refusing {}: {why}", u.refname);
                refused = true;
            }
            Err(e) => {
                let e: StoreError = e;
                eprintln!("git forum: refusing {}: cannot check it: {e}", u.refname);
                refused = true;
            }
        }
    }
    if refused {
        Err(CliError::silent(1))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
