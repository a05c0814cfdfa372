//! `git forum log --run SEQ`: one run's entries, oldest first, each at a glance.

use serde_json::{Value as J, json};

use super::{CliError, Ctx, all_entries, cli_err, read_bodies};
use crate::ledger::{Entry, kind};
use crate::surface::run::Bodies;
use crate::surface::run::loop_status as status;

fn short(text: &str, n: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > n {
        let cut: String = one_line.chars().take(n).collect();
        format!("{cut}…")
    } else {
        one_line
    }
}

/// What an entry of a run says, in a few words.
fn glance(kind: &str, p: &J) -> String {
    let s = |k: &str| p.get(k).and_then(J::as_str).unwrap_or("");
    match kind {
        kind::REQUEST => short(s("text"), 70),
        kind::ROUTE_FRAME => format!(
            "{} / {} → {}",
            s("domain"),
            s("intent"),
            s("delivery_profile")
        ),
        kind::PLAN => {
            let waves = p.get("waves").and_then(J::as_array).map_or(0, Vec::len);
            let tasks = p
                .get("waves")
                .and_then(J::as_array)
                .map_or(0, |w| w.iter().filter_map(J::as_array).map(Vec::len).sum());
            format!("{tasks} tasks in {waves} waves")
        }
        kind::TASK => format!(
            "{} on {}: {}",
            s("id"),
            s("agent"),
            short(s("instruction"), 60)
        ),
        kind::RESULT if p.get("revised_from").is_some() => format!(
            "revised answer (of {}): {}",
            p.get("revised_from")
                .map_or(String::new(), |v| v.to_string()),
            short(s("answer"), 50)
        ),
        kind::RESULT if p.get("answer").is_some() => format!("answer: {}", short(s("answer"), 60)),
        kind::RESULT => format!(
            "{} {} by {}{}: {}",
            s("id"),
            if p.get("ok") == Some(&J::Bool(true)) {
                "ok"
            } else {
                "failed"
            },
            s("model"),
            p.get("error")
                .and_then(J::as_str)
                .map_or(String::new(), |e| format!(" ({e})")),
            short(s("output"), 50)
        ),
        kind::VERDICT => format!(
            "{} {} {}: {}",
            s("id"),
            p.get("decision").and_then(J::as_str).unwrap_or(
                if p.get("ok") == Some(&J::Bool(true)) {
                    "pass"
                } else {
                    "fail"
                }
            ),
            p.get("score").map_or(String::new(), |v| v.to_string()),
            short(s("reason"), 50)
        ),
        kind::TIER_ESCALATION => format!("{} → {}", s("id"), s("to")),
        kind::BUDGET => format!(
            "stopped after {} model calls",
            p.get("model_calls")
                .map_or(String::new(), |v| v.to_string())
        ),
        kind::RUN_STOPPED => format!("{}: {}", s("stage"), short(s("reason"), 60)),
        kind::DEGRADED => format!(
            "wave {}: nothing passed",
            p.get("wave").map_or(String::new(), |v| v.to_string())
        ),
        kind::CONTEXT_BUDGET => format!("{} {} ({})", s("label"), s("action"), s("reason")),
        kind::CONTEXT => {
            let scope = p
                .get("task")
                .and_then(J::as_str)
                .map_or("request".to_string(), |t| format!("task {t}"));
            match p.get("error").and_then(J::as_str) {
                Some(code) => format!("{scope}: none ({code})"),
                None => format!("{scope}: {}", short(s("context"), 60)),
            }
        }
        kind::INTENT_JUDGMENT => format!(
            "{} {}: {}",
            match p.get("ok") {
                Some(J::Bool(true)) => "paraphrased",
                Some(J::Bool(false)) => "drifted",
                _ => "undecided",
            },
            p.get("score").map_or(String::new(), |v| v.to_string()),
            short(s("reason"), 50)
        ),
        kind::REVISION => match p.get("accepted") {
            Some(J::Bool(true)) => format!(
                "accepted: {} -> {} words",
                p.get("words_before")
                    .map_or(String::new(), |v| v.to_string()),
                p.get("words_after")
                    .map_or(String::new(), |v| v.to_string())
            ),
            _ if p.get("reason").is_some() => format!("rejected: {}", short(s("reason"), 50)),
            _ => format!(
                "rejected: {} -> {} words, coverage {} -> {}",
                p.get("words_before")
                    .map_or(String::new(), |v| v.to_string()),
                p.get("words_after")
                    .map_or(String::new(), |v| v.to_string()),
                p.get("coverage_before")
                    .map_or(String::new(), |v| v.to_string()),
                p.get("coverage_after")
                    .map_or(String::new(), |v| v.to_string())
            ),
        },
        kind::VERIFICATION => format!(
            "{}: {}",
            match p.get("ok") {
                Some(J::Bool(true)) => "verified",
                Some(J::Bool(false)) => "refuted",
                _ => "could not decide",
            },
            short(s("detail"), 50)
        ),
        kind::DELIVERY_CHECK | kind::DELIVERY_PROFILE_CHECK | kind::INTENT_CHECK => {
            let flagged = p.get("flagged") == Some(&J::Bool(true));
            let extra = match kind {
                kind::INTENT_CHECK => format!(
                    " coverage {}",
                    p.get("coverage").map_or(String::new(), |v| v.to_string())
                ),
                kind::DELIVERY_PROFILE_CHECK => format!(" {}", s("profile")),
                _ => String::new(),
            };
            format!("{}{extra}", if flagged { "flagged" } else { "clean" })
        }
        k if k.starts_with("gate_") => format!(
            "wave {}",
            p.get("wave").map_or(String::new(), |v| v.to_string())
        ),
        kind::RESUME => format!(
            "reused {}",
            p.get("reused").map_or(String::new(), |v| v.to_string())
        ),
        kind::CHANGE => {
            let files = p.get("files").and_then(J::as_array);
            let (added, removed) = files.into_iter().flatten().fold((0, 0), |(a, r), f| {
                (
                    a + f.get("added").and_then(J::as_u64).unwrap_or(0),
                    r + f.get("removed").and_then(J::as_u64).unwrap_or(0),
                )
            });
            match p.get("commit").and_then(J::as_str) {
                Some(c) => format!(
                    "{} {} ({} files, +{added} -{removed})",
                    s("task"),
                    c.get(..12).unwrap_or(c),
                    files.map_or(0, Vec::len)
                ),
                None => format!("{} changed nothing", s("task")),
            }
        }
        kind::CHECK => format!(
            "{} {} {}",
            s("task"),
            if p.get("ok") == Some(&J::Bool(true)) {
                "passed"
            } else {
                "FAILED"
            },
            short(s("command"), 50)
        ),
        kind::SHIP => format!(
            "{} {}: {}",
            s("task"),
            s("decision"),
            short(s("reason"), 50)
        ),
        kind::CONFLICT => format!(
            "{} conflicts in {}",
            s("task"),
            p.get("paths").map_or(String::new(), |v| v.to_string())
        ),
        _ => String::new(),
    }
}

/// `git forum log --run SEQ`: one run's entries, oldest first, each at a glance.
pub(crate) fn log_run(ctx: &Ctx, request_seq: u64) -> Result<(), CliError> {
    let store = ctx.existing_store()?;
    let entries = all_entries(&store)?;
    let read = read_bodies(&store);
    let bodies = Bodies::new(&read);
    let runs = status::runs(&entries, |e| bodies.get(e));
    bodies.done().map_err(cli_err)?;
    let Some(run) = runs.iter().find(|r| r.request_seq == request_seq) else {
        return Err(CliError::not_found(format!(
            "no run starts at seq {request_seq} (git forum runs lists them)"
        )));
    };
    let mine: Vec<&Entry> = run
        .entries
        .iter()
        .filter_map(|s| entries.get(*s as usize))
        .collect();
    if ctx.json {
        let rows: Vec<J> = mine
            .iter()
            .map(|e| {
                let mut j = e.to_json();
                j["payload"] = bodies.get(e).unwrap_or(J::Null);
                j
            })
            .collect();
        bodies.done().map_err(cli_err)?;
        return ctx.out_json(
            &json!({"request_seq": run.request_seq, "state": run.state.as_str(), "entries": rows}),
        );
    }
    let read: Vec<Option<J>> = mine.iter().map(|e| bodies.get(e)).collect();
    bodies.done().map_err(cli_err)?;
    ctx.out(&format!(
        "run {} ({}): {}",
        run.request_seq,
        run.state.as_str(),
        short(&run.request, 80)
    ))?;
    for (e, what) in mine.into_iter().zip(read) {
        let what = what.map_or_else(|| "(body redacted)".to_string(), |p| glance(&e.kind, &p));
        ctx.out(&format!(
            "{:>5}  {:<16} {:<22} {what}",
            e.seq, e.actor, e.kind
        ))?;
    }
    Ok(())
}
