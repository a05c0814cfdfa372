//! `hooks install|uninstall` and the entry points the installed hooks call
//! (`hook pre-push`, `hook pre-receive`, `hook update`): arguments and what is printed. The
//! work is [`crate::surface::hooks`].

use super::{CliError, Ctx};
use crate::surface::hooks;

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
    /// Say what the pre-push or pre-receive hook would answer to the ref updates on standard
    /// input (as git hands them to it), without running it: each refused update and why. Exit
    /// 0 when the hook would let every update through, 1 when it would refuse one.
    Check(crate::surface::request::tlog::HooksCheck),
}

/// The most standard input `hooks check` reads: git's lines are short, one per ref.
const MAX_CHECK_INPUT: u64 = 64 * 1024 * 1024;

/// `hooks check HOOK`: the answer the hook would give, from [`hooks::check`].
fn check(ctx: &Ctx, mut req: crate::surface::request::tlog::HooksCheck) -> Result<(), CliError> {
    crate::surface::request::Request::validate(&req)?;
    req.stdin = super::input::read_limited_text(
        std::path::Path::new("-"),
        MAX_CHECK_INPUT,
        "standard input",
        "",
    )
    .map_err(CliError::usage)?;
    let answer = hooks::check(&ctx.dir, &req)?;
    if ctx.json {
        ctx.out_json(
            &serde_json::to_value(&answer).map_err(|e| CliError::internal(e.to_string()))?,
        )?;
    } else if answer.ok {
        ctx.out(&format!("ok: {} lets every update through", answer.hook))?;
    } else {
        for r in &answer.refused {
            match &r.refname {
                Some(name) => ctx.out(&format!("refused {name}: {}", r.why))?,
                None => ctx.out(&format!("refused: {}", r.why))?,
            }
        }
    }
    if answer.ok {
        Ok(())
    } else {
        Err(CliError::silent(1))
    }
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

pub(crate) fn hooks(ctx: &Ctx, args: HooksArgs) -> Result<(), CliError> {
    let (install, server, scan_code) = match args.action {
        HooksAction::Install(a) => (true, a.server, a.scan_code),
        HooksAction::Uninstall(a) => (false, a.server, false),
        HooksAction::Check(req) => return check(ctx, req),
    };
    let done = hooks::change_hook_file(&ctx.dir, install, server, scan_code)?;
    let (hook, action) = (done.hook, done.action);
    if ctx.json {
        ctx.out_json(&serde_json::json!({
            "hook": hook,
            "path": done.path.display().to_string(),
            "action": action,
            "hooks_path": done.hooks_path,
            "push_options": done.push_options,
        }))
    } else {
        ctx.out(&format!("{action} {hook} hook: {}", done.path.display()))?;
        if let Some(p) = done.hooks_path {
            ctx.out(&format!(
                "note: core.hooksPath is set ({p}); git runs hooks from there, so that is where the hook went"
            ))?;
        }
        if done.push_options {
            ctx.out(
                "set receive.advertisePushOptions: a dispatch worker's push says forum-worker=NAME, and the hook holds it to its results prefix",
            )?;
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
        } => {
            let refusals = hooks::pre_push(
                &ctx.dir,
                &mut std::io::stdin().lock(),
                remote.as_deref().unwrap_or_default(),
                scan_code,
                hooks::allowances_from_env(),
            )?;
            if refusals.is_empty() {
                return Ok(());
            }
            for r in &refusals {
                eprintln!("git forum pre-push: refusing the push: {r}");
            }
            Err(CliError::silent(1))
        }
        HookName::PreReceive => {
            let updates = hooks::pre_receive_updates(&mut std::io::stdin().lock())?;
            server_check(ctx, &updates)
        }
        HookName::Update { refname, old, new } => {
            server_check(ctx, &[hooks::RefUpdate { refname, old, new }])
        }
    }
}

fn server_check(ctx: &Ctx, updates: &[hooks::RefUpdate]) -> Result<(), CliError> {
    let refused = hooks::server_check(&ctx.dir, updates, &hooks::Pusher::from_env())?;
    for r in &refused {
        eprintln!("git forum: refusing {}: {}", r.refname, r.why);
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(CliError::silent(1))
    }
}
