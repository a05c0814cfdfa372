//! `git forum doctor`: the install and the ledger's health, and exact repairs.

use std::path::PathBuf;

use serde_json::json;

use super::{CliError, Ctx};
use crate::store::doctor::{LedgerHealth, Sources};
use crate::store::refs::RefStorage;

/// Say what is wrong with the ledger (by seq) and with the install; `--repair` puts back every
/// missing commit, tree or body that an exact copy exists of, and a deleted or broken ref.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Write back what can be restored exactly (never an object whose bytes do not hash to
    /// the id the chain names), and put a deleted ref back on its reflog's last tip.
    #[arg(long)]
    pub repair: bool,
    /// Another repository (a clone, a mirror) whose objects may hold what was lost. Repeatable.
    #[arg(long = "from-repo", value_name = "PATH")]
    pub from_repo: Vec<PathBuf>,
    /// A pack file that may hold what was lost (from a bundle or a backup). Repeatable.
    #[arg(long = "from-pack", value_name = "FILE")]
    pub from_pack: Vec<PathBuf>,
    /// A Forum export of this ledger (`git forum export DIR`): lost commits are recomputed
    /// from its entries and bodies. Repeatable.
    #[arg(long = "from-export", value_name = "DIR")]
    pub from_export: Vec<PathBuf>,
}

fn git_line(ctx: &Ctx, args: &[&str]) -> Option<String> {
    let o = std::process::Command::new("git")
        .current_dir(&ctx.dir)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// Which hooks of this repository run git forum.
fn hooks_installed(ctx: &Ctx) -> Vec<String> {
    let Some(dir) = git_line(
        ctx,
        &["rev-parse", "--path-format=absolute", "--git-path", "hooks"],
    ) else {
        return Vec::new();
    };
    ["pre-push", "pre-receive", "update"]
        .iter()
        .filter(|h| {
            std::fs::File::open(PathBuf::from(&dir).join(h))
                .ok()
                .and_then(|f| {
                    let mut s = String::new();
                    std::io::Read::read_to_string(&mut std::io::Read::take(f, 64 * 1024), &mut s)
                        .ok()
                        .map(|_| s)
                })
                .is_some_and(|s| s.contains("forum"))
        })
        .map(|h| h.to_string())
        .collect()
}

pub fn run(ctx: &Ctx, args: DoctorArgs) -> Result<(), CliError> {
    let store = ctx.store()?;
    let sources = Sources {
        repos: args.from_repo.clone(),
        exports: args.from_export.clone(),
        packs: args.from_pack.clone(),
    };
    let health: Option<LedgerHealth> = match store.doctor(&sources, args.repair) {
        Ok(h) => Some(h),
        Err(crate::store::git::StoreError::NoLedger(_)) => None,
        Err(crate::store::git::StoreError::Invalid(m)) => return Err(CliError::usage(m)),
        Err(e) => return Err(e.into()),
    };
    // The ledger as verify --deep now sees it.
    let verified = match &health {
        Some(_) => ctx.store()?.verify(true).ok(),
        None => None,
    };
    let repo = store.repo();
    let ref_storage = RefStorage::of(repo);
    let git_version = git_line(ctx, &["--version"]).unwrap_or_else(|| "not found".into());
    let hooks = hooks_installed(ctx);
    let runtime = super::runtime::readiness(ctx);
    // Worktrees left by --work runs that died are removed here (live runs' are untouched).
    let stale = crate::surface::work::cleanup(&ctx.dir).map_err(|e| e.message);
    // Healthy: nothing left unrepaired, and the ledger (if there is one) verifies.
    let unrepaired = health
        .as_ref()
        .is_some_and(|h| h.findings.iter().any(|f| !f.repaired));
    let ok = !unrepaired && verified.as_ref().is_none_or(|v| v.passed());
    if ctx.json {
        let ledger = health.as_ref().map(|h| {
            json!({
                "name": h.ledger,
                "findings": h.findings,
                "restored_objects": h.restored_objects,
                "verify": verified.as_ref().map(|v| json!({
                    "ok": v.passed(), "entries": v.entries, "code": v.code,
                    "first_bad_seq": v.first_bad_seq, "problem": v.problem,
                })),
            })
        });
        ctx.out_json(&json!({
            "schema": "git-forum.doctor/v1",
            "ok": ok,
            "ledger": ledger,
            "install": {
                "git": git_version,
                "ref_storage": ref_storage.name(),
                "object_format": repo.object_hash().to_string(),
                "hooks": hooks,
                "runtime": match &runtime {
                    Ok((problems, _)) => json!({"ready": problems.is_empty(), "problems": problems}),
                    Err(e) => json!({"ready": false, "problems": [e]}),
                },
                "local_models": match &runtime {
                    Ok((_, local)) => local.iter().map(|(url, up)| json!({"url": url, "answers": up})).collect::<Vec<_>>(),
                    Err(_) => Vec::new(),
                },
            },
            "work": match &stale {
                Ok(removed) => json!({"removed_stale": removed.iter().map(|p| p.display().to_string()).collect::<Vec<_>>()}),
                Err(e) => json!({"removed_stale": [], "problem": e}),
            },
        }))?;
        return if ok { Ok(()) } else { Err(CliError::silent(1)) };
    }
    let mut out = Vec::new();
    match (&health, &verified) {
        (None, _) => out.push(format!(
            "ledger {}: does not exist yet (the first append creates it)",
            ctx.ledger
        )),
        (Some(h), v) => {
            for f in &h.findings {
                let at = f.seq.map(|s| format!("seq {s}: ")).unwrap_or_default();
                let state = if f.repaired {
                    "repaired".to_string()
                } else if f.repairable {
                    "repairable with --repair".to_string()
                } else {
                    "not repairable here".to_string()
                };
                out.push(format!(
                    "ledger {}: {at}{} {} ({state}): {}",
                    h.ledger, f.code, f.object, f.remedy
                ));
            }
            if h.restored_objects > 0 {
                out.push(format!(
                    "ledger {}: restored {} object(s)",
                    h.ledger, h.restored_objects
                ));
            }
            match v {
                Some(v) if v.passed() => out.push(format!(
                    "ledger {}: verifies (chain, commits and bodies), {} entries",
                    h.ledger, v.entries
                )),
                Some(v) => out.push(format!(
                    "ledger {}: does not verify at seq {}: {} [{}]",
                    h.ledger,
                    v.first_bad_seq.map_or("-".into(), |s| s.to_string()),
                    v.problem.as_deref().unwrap_or(""),
                    v.code.map_or("", |c| c.as_str())
                )),
                None => out.push(format!(
                    "ledger {}: cannot be verified until the problems above are repaired",
                    h.ledger
                )),
            }
        }
    }
    out.push(format!("git: {git_version}"));
    out.push(format!(
        "repository: {} refs, {} objects",
        ref_storage.name(),
        repo.object_hash()
    ));
    out.push(format!(
        "hooks: {}",
        if hooks.is_empty() {
            "none run git forum (install with `git forum hooks install`)".to_string()
        } else {
            hooks.join(", ")
        }
    ));
    match &runtime {
        Ok((p, _)) if p.is_empty() => out.push("runtime: ready".into()),
        Ok((p, _)) => out.push(format!("runtime: not ready: {}", p.join("; "))),
        Err(e) => out.push(format!("runtime: not ready: {e}")),
    }
    if let Ok((_, local)) = &runtime {
        for (url, up) in local {
            out.push(format!(
                "local model: {url} {}",
                if *up {
                    "accepts connections"
                } else {
                    "does not answer (start it: scripts/local-llm start)"
                }
            ));
        }
        if local.is_empty() {
            out.push(
                "local model: none configured (is_local = true in .forum/runtime.toml)".into(),
            );
        }
    }
    match &stale {
        Ok(removed) if removed.is_empty() => {}
        Ok(removed) => out.push(format!(
            "work: removed {} work area(s) left by --work runs that died",
            removed.len()
        )),
        Err(e) => out.push(format!("work: could not clean up stale worktrees: {e}")),
    }
    ctx.out(&out.join("\n"))?;
    if ok { Ok(()) } else { Err(CliError::silent(1)) }
}
