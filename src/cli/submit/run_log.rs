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

/// The string field `k` of a payload, or "" when it is missing or not a string.
fn text<'a>(p: &'a J, k: &str) -> &'a str {
    p.get(k).and_then(J::as_str).unwrap_or("")
}

/// The field `k` of a payload as JSON text, or "" when it is missing.
fn shown(p: &J, k: &str) -> String {
    p.get(k).map_or(String::new(), |v| v.to_string())
}

/// An escalation: the task and the model (or program) it moved to, then the tiers when the
/// body names them (bodies written before tiers were recorded, and Forum's, have `to` alone).
fn glance_escalation(p: &J) -> String {
    let s = |k: &str| text(p, k);
    let line = format!("{} → {}", s("id"), s("to"));
    match (p.get("from_tier"), p.get("to_tier")) {
        (Some(J::String(from)), Some(J::String(to))) => format!("{line} ({from} → {to})"),
        (None, Some(J::String(to))) => format!("{line} ({to})"),
        _ => line,
    }
}

/// What an entry of a run says, in a few words.
fn glance(kind: &str, p: &J) -> String {
    let s = |k: &str| text(p, k);
    match kind {
        kind::REQUEST => short(s("text"), 70),
        kind::ROUTE_FRAME => format!(
            "{} / {} → {}",
            s("domain"),
            s("intent"),
            s("delivery_profile")
        ),
        kind::PLAN => glance_plan(p),
        kind::TASK => format!(
            "{} on {}: {}",
            s("id"),
            s("agent"),
            short(s("instruction"), 60)
        ),
        kind::RESULT => glance_result(p),
        kind::VERDICT => glance_verdict(p),
        kind::TIER_ESCALATION => glance_escalation(p),
        kind::BUDGET => format!("stopped after {} model calls", shown(p, "model_calls")),
        kind::RUN_STOPPED => format!("{}: {}", s("stage"), short(s("reason"), 60)),
        kind::DEGRADED => format!("wave {}: nothing passed", shown(p, "wave")),
        kind::CONTEXT_BUDGET => format!("{} {} ({})", s("label"), s("action"), s("reason")),
        kind::CONTEXT => glance_context(p),
        kind::INTENT_JUDGMENT => glance_intent_judgment(p),
        kind::REVISION => glance_revision(p),
        kind::VERIFICATION => glance_verification(p),
        kind::DELIVERY_CHECK | kind::DELIVERY_PROFILE_CHECK | kind::INTENT_CHECK => {
            glance_flag(kind, p)
        }
        k if k.starts_with("gate_") => format!("wave {}", shown(p, "wave")),
        kind::RESUME => format!("reused {}", shown(p, "reused")),
        kind::CHANGE => glance_change(p),
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
        kind::CONFLICT => format!("{} conflicts in {}", s("task"), shown(p, "paths")),
        kind::INTEGRATED => {
            let tip: String = s("tip").chars().take(12).collect();
            format!("{} on the run branch at {tip}", s("task"))
        }
        _ => String::new(),
    }
}

/// A plan: how many tasks in how many waves.
fn glance_plan(p: &J) -> String {
    let waves = p.get("waves").and_then(J::as_array).map_or(0, Vec::len);
    let tasks = p
        .get("waves")
        .and_then(J::as_array)
        .map_or(0, |w| w.iter().filter_map(J::as_array).map(Vec::len).sum());
    format!("{tasks} tasks in {waves} waves")
}

/// A result: a revised answer, an answer, or a task's output with its model.
fn glance_result(p: &J) -> String {
    let s = |k: &str| text(p, k);
    if p.get("revised_from").is_some() {
        return format!(
            "revised answer (of {}): {}",
            shown(p, "revised_from"),
            short(s("answer"), 50)
        );
    }
    if p.get("answer").is_some() {
        return format!("answer: {}", short(s("answer"), 60));
    }
    format!(
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
    )
}

/// A verdict: its decision (or pass/fail), score and reason.
fn glance_verdict(p: &J) -> String {
    format!(
        "{} {} {}: {}",
        text(p, "id"),
        p.get("decision")
            .and_then(J::as_str)
            .unwrap_or(if p.get("ok") == Some(&J::Bool(true)) {
                "pass"
            } else {
                "fail"
            }),
        shown(p, "score"),
        short(text(p, "reason"), 50)
    )
}

/// A context entry: for the request or a task, the context or why there is none.
fn glance_context(p: &J) -> String {
    let scope = p
        .get("task")
        .and_then(J::as_str)
        .map_or("request".to_string(), |t| format!("task {t}"));
    match (p.get("error").and_then(J::as_str), p["seen_bytes"].as_u64()) {
        (Some(code), _) => format!("{scope}: none ({code})"),
        (None, Some(n)) if text(p, "context").is_empty() => {
            format!("{scope}: none (the context budget left out all {n} bytes)")
        }
        (None, _) => format!("{scope}: {}", short(text(p, "context"), 60)),
    }
}

/// An intent judgment: paraphrased, drifted or undecided, with score and reason.
fn glance_intent_judgment(p: &J) -> String {
    format!(
        "{} {}: {}",
        match p.get("ok") {
            Some(J::Bool(true)) => "paraphrased",
            Some(J::Bool(false)) => "drifted",
            _ => "undecided",
        },
        shown(p, "score"),
        short(text(p, "reason"), 50)
    )
}

/// A revision: accepted or rejected, with the word counts and coverage.
fn glance_revision(p: &J) -> String {
    match p.get("accepted") {
        Some(J::Bool(true)) => format!(
            "accepted: {} -> {} words",
            shown(p, "words_before"),
            shown(p, "words_after")
        ),
        _ if p.get("reason").is_some() => {
            format!("rejected: {}", short(text(p, "reason"), 50))
        }
        _ => format!(
            "rejected: {} -> {} words, coverage {} -> {}",
            shown(p, "words_before"),
            shown(p, "words_after"),
            shown(p, "coverage_before"),
            shown(p, "coverage_after")
        ),
    }
}

/// A verification: verified, refuted or undecided, with its detail.
fn glance_verification(p: &J) -> String {
    format!(
        "{}: {}",
        match p.get("ok") {
            Some(J::Bool(true)) => "verified",
            Some(J::Bool(false)) => "refuted",
            _ => "could not decide",
        },
        short(text(p, "detail"), 50)
    )
}

/// A delivery, delivery-profile or intent check: flagged or clean, with what it measured.
fn glance_flag(kind: &str, p: &J) -> String {
    let flagged = p.get("flagged") == Some(&J::Bool(true));
    let extra = match kind {
        kind::INTENT_CHECK => format!(" coverage {}", shown(p, "coverage")),
        kind::DELIVERY_PROFILE_CHECK => format!(" {}", text(p, "profile")),
        _ => String::new(),
    };
    format!("{}{extra}", if flagged { "flagged" } else { "clean" })
}

/// A change: the task's commit with its file and line counts, or that it changed nothing.
fn glance_change(p: &J) -> String {
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
            text(p, "task"),
            c.get(..12).unwrap_or(c),
            files.map_or(0, Vec::len)
        ),
        None => format!("{} changed nothing", text(p, "task")),
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
            &json!({"request_seq": run.request_seq, "state": run.label(), "entries": rows}),
        );
    }
    let read: Vec<Option<J>> = mine.iter().map(|e| bodies.get(e)).collect();
    bodies.done().map_err(cli_err)?;
    ctx.out(&format!(
        "run {} ({}): {}",
        run.request_seq,
        run.label(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_the_budget_left_none_of_says_so() {
        let p = json!({"task": "T2", "context": "", "seen_bytes": 76});
        assert_eq!(
            glance(kind::CONTEXT, &p),
            "task T2: none (the context budget left out all 76 bytes)"
        );
    }

    #[test]
    fn an_escalation_reads_with_and_without_tiers() {
        let old = json!({"id": "T3", "to": "scripted-model", "reason": "validation failed"});
        assert_eq!(glance(kind::TIER_ESCALATION, &old), "T3 → scripted-model");
        let new = json!({"id": "T3", "to": "gpt-5", "reason": "checks failed",
                         "from_tier": "cheap", "to_tier": "frontier"});
        assert_eq!(
            glance(kind::TIER_ESCALATION, &new),
            "T3 → gpt-5 (cheap → frontier)"
        );
    }
}
