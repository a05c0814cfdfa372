//! `init`: the refspecs that make plain `git fetch` (and, on request, `git push`) carry
//! ledgers, and the `.forum/` configuration directory. Safe to run again: nothing present is
//! added twice and no existing file is overwritten.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use super::{CliError, Ctx};
use crate::surface::store::open_repo;
use crate::surface::sync::{self, Git};

/// Set up this repository for git forum.
///
/// Adds `+refs/forum/ledgers/*:refs/forum/unverified/REMOTE/*` to each remote's fetch refspecs
/// (plain `git fetch` then brings ledgers, to a namespace nothing trusts; only `git forum fetch`
/// adopts a copy into `refs/forum/remotes/REMOTE/` after verifying it), replacing the refspec
/// older versions added, and writes `.forum/roster.toml`, `.forum/README` and
/// `.forum/runtime.toml` (every run on the local model) when they are absent.
#[derive(Debug, clap::Args)]
pub(crate) struct InitArgs {
    /// Only this remote (repeatable); default: every configured remote.
    #[arg(long = "remote", value_name = "NAME")]
    pub(crate) remotes: Vec<String>,
    /// Also make plain `git push` push ledgers. A remote with a push refspec pushes only what
    /// its refspecs name, so `HEAD` is added too when the remote had none (plain `git push` then
    /// pushes the current branch to the branch of the same name, and every ledger).
    #[arg(long)]
    pub(crate) push: bool,
}

/// The `.forum/README` that `init` writes.
pub(crate) const FORUM_README: &str = "\
This directory configures git forum for this repository.

roster.toml   the agent lanes requests are routed to. It starts as a copy of the
              roster built into git forum; edit it freely. `git forum route` and
              `git forum plan` read it (or a file given with --roster).

The record itself is not here: every ledger lives in git, on refs/forum/ledgers/NAME.
Share ledgers with `git forum push` and `git forum fetch`; `git forum hooks install`
adds a pre-push hook that refuses to publish a ledger that does not verify.
";

/// The fetch refspec for ledgers of `remote`: forced, because it only stages (a rewritten remote
/// ledger must not make every plain `git fetch` fail; `git forum fetch` judges it).
pub(crate) fn fetch_refspec(remote: &str) -> String {
    format!(
        "+refs/forum/ledgers/*:{}{remote}/*",
        sync::UNVERIFIED_PREFIX
    )
}

/// The fetch refspecs older versions of `init` added, which let plain `git fetch` move the
/// adopted copies (`refs/forum/remotes/REMOTE/*`) to whatever the remote served.
pub(crate) fn old_fetch_refspecs(remote: &str) -> [String; 2] {
    let old = format!("refs/forum/ledgers/*:{}{remote}/*", sync::REMOTES_PREFIX);
    [format!("+{old}"), old]
}

/// The push refspec for ledgers (never forced).
pub(crate) const PUSH_REFSPEC: &str = "refs/forum/ledgers/*:refs/forum/ledgers/*";

pub(crate) fn config_values(git: &Git, key: &str) -> Result<Vec<String>, CliError> {
    let o = git.run(&["config", "--get-all", key])?;
    // Exit 1 means "no such key".
    if !o.status.success() && o.status.code() != Some(1) {
        return Err(CliError::unavailable(format!(
            "reading git config {key} failed: {}",
            sync::failure_line(&o)
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .collect())
}

fn config_add(git: &Git, key: &str, value: &str) -> Result<(), CliError> {
    git.run_ok(
        &["config", "--add", key, value],
        &format!("git config --add {key}"),
    )?;
    Ok(())
}

/// Writes `path` with `text` unless it exists. Returns whether it wrote.
fn write_new(path: &Path, text: &str) -> Result<bool, CliError> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(mut f) => {
            f.write_all(text.as_bytes())
                .and_then(|_| f.sync_all())
                .map_err(|e| CliError::internal(format!("writing {}: {e}", path.display())))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(CliError::internal(format!(
            "creating {}: {e}",
            path.display()
        ))),
    }
}

/// What `init` did to one remote's refspecs.
struct RemoteChange {
    remote: String,
    /// The ledger fetch refspec.
    spec: String,
    /// Whether the fetch refspec was added (false: it was already present).
    fetch_added: bool,
    /// The push refspecs added.
    push_added: Vec<&'static str>,
    /// The older fetch refspecs removed.
    replaced: Vec<String>,
}

/// What `init` did in `.forum/`.
#[derive(Default)]
struct ForumFiles {
    written: Vec<String>,
    kept: Vec<String>,
    /// The local model's URL, when `init` wrote the runtime file that points runs at it.
    local_model: Option<String>,
}

pub(crate) fn run(ctx: &Ctx, args: InitArgs) -> Result<(), CliError> {
    let repo = open_repo(&ctx.dir)?;
    let git = Git::for_repo(&repo);
    let remotes = chosen_remotes(&git, &args)?;
    let mut remote_report = Vec::new();
    for r in &remotes {
        remote_report.push(set_up_remote(&git, r, args.push)?);
    }
    let forum_dir = repo.workdir().map(|w| w.join(".forum"));
    let files = match &forum_dir {
        Some(dir) => write_forum_dir(dir)?,
        None => ForumFiles::default(),
    };
    if ctx.json {
        let remotes: Vec<_> = remote_report
            .iter()
            .map(|c| {
                json!({"remote": c.remote, "fetch_refspec": c.spec, "fetch_added": c.fetch_added, "push_added": c.push_added, "fetch_removed": c.replaced})
            })
            .collect();
        return ctx.out_json(&json!({
            "schema": "git-forum.init/v1",
            "remotes": remotes,
            "written": files.written,
            "kept": files.kept,
            "forum_dir": forum_dir.map(|d| d.display().to_string()),
            "runtime": files.local_model.as_ref().map(|u| json!({"local_model": u, "next": crate::surface::model::GET_IT_RUNNING})),
        }));
    }
    print_remotes(ctx, &remote_report)?;
    print_files(ctx, &files)?;
    if forum_dir.is_none() {
        ctx.out("bare repository: no .forum/ directory written")?;
    }
    Ok(())
}

/// The remotes to set up: those asked for (each must be configured) or every configured one;
/// every name is checked before anything changes.
fn chosen_remotes(git: &Git, args: &InitArgs) -> Result<Vec<String>, CliError> {
    let configured = git.remotes()?;
    let remotes = if args.remotes.is_empty() {
        configured.clone()
    } else {
        for r in &args.remotes {
            if !configured.contains(r) {
                return Err(CliError::usage(format!(
                    "no remote named {r:?} is configured; add it with `git remote add {r} URL` (see `git remote -v`)"
                )));
            }
        }
        args.remotes.clone()
    };
    // Check every name before changing anything.
    for r in &remotes {
        sync::check_remote_name(git, r)?;
    }
    Ok(remotes)
}

/// Adds the ledger fetch refspec to remote `r` (and, with `push`, the push refspecs), and
/// removes the fetch refspecs older versions added.
fn set_up_remote(git: &Git, r: &str, push: bool) -> Result<RemoteChange, CliError> {
    let fetch_key = format!("remote.{r}.fetch");
    let spec = fetch_refspec(r);
    let present = config_values(git, &fetch_key)?;
    let fetch_added = if present.contains(&spec) {
        false
    } else {
        config_add(git, &fetch_key, &spec)?;
        true
    };
    let mut replaced = Vec::new();
    for old in old_fetch_refspecs(r) {
        if present.contains(&old) {
            git.run_ok(
                &["config", "--fixed-value", "--unset-all", &fetch_key, &old],
                &format!("git config --unset-all {fetch_key}"),
            )?;
            replaced.push(old);
        }
    }
    let mut push_added = Vec::new();
    if push {
        let push_key = format!("remote.{r}.push");
        let existing = config_values(git, &push_key)?;
        if existing.is_empty() {
            config_add(git, &push_key, "HEAD")?;
            push_added.push("HEAD");
        }
        if !existing.iter().any(|v| v == PUSH_REFSPEC) {
            config_add(git, &push_key, PUSH_REFSPEC)?;
            push_added.push(PUSH_REFSPEC);
        }
    }
    Ok(RemoteChange {
        remote: r.to_string(),
        spec,
        fetch_added,
        push_added,
        replaced,
    })
}

/// Creates `.forum/` and writes the roster, README and runtime files that are absent.
fn write_forum_dir(dir: &Path) -> Result<ForumFiles, CliError> {
    let mut files = ForumFiles::default();
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::internal(format!("creating {}: {e}", dir.display())))?;
    for (file, text) in [
        ("roster.toml", crate::roster::DEFAULT_ROSTER_TOML),
        ("README", FORUM_README),
    ] {
        let path = dir.join(file);
        if write_new(&path, text)? {
            files.written.push(format!(".forum/{file}"));
        } else {
            files.kept.push(format!(".forum/{file}"));
        }
    }
    // With no runtime config, every run uses the local model; one that exists stays.
    let url = crate::surface::model::local_url()?;
    let path = dir.join("runtime.toml");
    if write_new(&path, &crate::surface::model::runtime_toml_for(&url))? {
        files.written.push(".forum/runtime.toml".into());
        files.local_model = Some(url);
    } else {
        files.kept.push(".forum/runtime.toml".into());
    }
    Ok(files)
}

/// Says, remote by remote, which refspecs were added, already present or removed.
fn print_remotes(ctx: &Ctx, remote_report: &[RemoteChange]) -> Result<(), CliError> {
    if remote_report.is_empty() {
        ctx.out("no remotes configured; run `git forum init` again after `git remote add`")?;
    }
    for c in remote_report {
        let r = &c.remote;
        ctx.out(&format!(
            "remote {r}: fetch refspec {} {}",
            c.spec,
            if c.fetch_added {
                "added"
            } else {
                "already present"
            }
        ))?;
        for old in &c.replaced {
            ctx.out(&format!(
                "remote {r}: fetch refspec {old} removed (it let plain git fetch move {}{r}/ unverified; `git forum fetch {r}` adopts copies now)",
                sync::REMOTES_PREFIX
            ))?;
        }
        for p in &c.push_added {
            ctx.out(&format!("remote {r}: push refspec {p} added"))?;
        }
    }
    Ok(())
}

/// Says which files `.forum/` got and which it kept.
fn print_files(ctx: &Ctx, files: &ForumFiles) -> Result<(), CliError> {
    for f in &files.written {
        ctx.out(&format!("wrote {f}"))?;
    }
    if let Some(u) = &files.local_model {
        ctx.out(&format!(
            "runs use the local model at {u} (.forum/runtime.toml); `{}` gets it running, or edit the file to use another executor",
            crate::surface::model::GET_IT_RUNNING
        ))?;
    }
    for f in &files.kept {
        ctx.out(&format!("kept {f} (it exists)"))?;
    }
    Ok(())
}
