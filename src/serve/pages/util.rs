//! Small readers of the JSON the routes answer, and the calls the pages make through the
//! dispatcher.

use axum::response::Response;
use serde_json::Value as J;

use super::layout;
use crate::serve::dispatch::{Dispatcher, Reply};

/// A route's answer through the dispatcher (the same answer its JSON route gives), or the
/// page for its refusal.
pub(super) fn call(d: &Dispatcher, method: &str, path: &str, body: J) -> Result<J, Response> {
    let r = d.call(method, path, body);
    if r.status == 200 {
        Ok(r.body)
    } else {
        Err(refusal(&r))
    }
}

/// The page for a refused route.
pub(super) fn refusal(r: &Reply) -> Response {
    layout::problem(r.status, r.message())
}

/// A seq from a path segment, or the 400 page.
pub(super) fn seq_of(text: &str) -> Result<u64, Response> {
    text.parse::<u64>()
        .ok()
        .filter(|_| text.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            layout::problem(
                400,
                &format!("{text:?} is not a seq (a non-negative integer)."),
            )
        })
}

/// The text at `key` of an object (strings as they are, other values as JSON, absent as "").
pub(super) fn text(v: &J, key: &str) -> String {
    match v.get(key) {
        None | Some(J::Null) => String::new(),
        Some(J::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The unsigned integer at `key`, 0 when absent.
pub(super) fn num(v: &J, key: &str) -> u64 {
    v.get(key).and_then(J::as_u64).unwrap_or(0)
}

/// `s` cut to `max` characters, with an ellipsis when cut.
pub(super) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

/// The CSS class of an outcome's badge: its colour in the outcome table's terms (delivered,
/// partial, stopped, failed, waiting).
pub(super) fn outcome_class(state: &str) -> &'static str {
    match state {
        "answered" | "delivered" | "shipped" | "merged" => "ok",
        "partial" | "nothing_delivered" | "degraded" => "warn",
        "gated" | "paused" | "waiting" | "interrupted" => "wait",
        "error" | "failed" | "rejected" | "blocked" | "budget_stopped" | "halted" => "bad",
        _ => "info",
    }
}

/// A timestamp (seconds since the epoch) as `YYYY-MM-DD HH:MM:SS UTC`.
pub(super) fn when(ts: f64) -> String {
    if !ts.is_finite() || ts < 0.0 {
        return String::new();
    }
    // `YYYY-MM-DDTHH:MM:SSZ`, read as a person reads a time.
    let stamp = crate::surface::bench_verify::utc_stamp(ts);
    let stamp = stamp.trim_end_matches('Z');
    match stamp.split_once('T') {
        Some((date, time)) => format!("{date} {time} UTC"),
        None => stamp.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_clips() {
        assert_eq!(when(0.0), "1970-01-01 00:00:00 UTC");
        assert_eq!(when(1_796_496_815.7), "2026-12-05 18:53:35 UTC");
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("abc", 3), "abc");
    }
}
