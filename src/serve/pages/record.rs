//! The record: `/view/record?after=&limit=` (the entry log a page at a time, from `/replay`),
//! `/view/entry/SEQ` (one entry, its body shown only when it hashes to the entry, its causal
//! chain from `/why`), and `/view/proof/SEQ` (the inclusion proof `/prove` gives, as a
//! download).

use axum::http::{HeaderValue, header};
use axum::response::Response;
use maud::html;
use serde_json::{Value as J, json};

use super::entries::Body;
use super::util::{call, clip, num, refusal, seq_of, text, when};
use super::{Ask, bytes, html as respond, layout};
use crate::serve::dispatch::Dispatcher;

/// Entries on a page of the log by default, and at most.
const PAGE: u64 = 100;
const MAX_PAGE: u64 = 1000;

/// The entry log, oldest first from `after`, with the verify result and the checkpoint.
pub(super) fn log_page(d: &Dispatcher, ask: &Ask) -> Response {
    let number = |k: &str| -> Result<Option<u64>, Response> {
        match ask.field(k) {
            None => Ok(None),
            Some(v) => seq_of(v).map(Some),
        }
    };
    let (after, limit) = match (number("after"), number("limit")) {
        (Ok(a), Ok(l)) => (a, l.unwrap_or(PAGE).clamp(1, MAX_PAGE)),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    let mut fields = json!({"limit": limit});
    if let Some(a) = after {
        fields["after"] = json!(a);
    }
    let page = match call(d, "GET", &format!("/replay/{}", u64::MAX), fields) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let verify = call(d, "GET", "/verify", json!({})).ok();
    let checkpoint = call(d, "GET", "/checkpoint", json!({})).unwrap_or(J::Null);
    let note = signed_note(d);
    let entries = page
        .get("entries")
        .and_then(J::as_array)
        .cloned()
        .unwrap_or_default();
    let next = page.get("next").and_then(J::as_u64);
    let body = html! {
        h1 { "Record" }
        section aria-labelledby="verify" {
            h2 id="verify" { "Verification" }
            @match &verify {
                Some(v) => p {
                    @if v.get("ok").and_then(J::as_bool) == Some(true) { span.badge.ok { "verifies" } } @else { span.badge.bad { "does not verify" } }
                    " Ledger " code { (text(v, "ledger")) } ": " (num(v, "entries")) " entries read, chain and every body checked."
                },
                None => p.note { "Verification could not run." },
            }
            p { "Checkpoint: " (num(&checkpoint, "size")) " entries, root " code { (text(&checkpoint, "root")) } }
            @match &note {
                Some(n) => { h3 { "Latest signed note" } pre.output { (n) } },
                None => p.note { "No signed note is stored (`git forum tlog checkpoint` signs one)." },
            }
        }
        section aria-labelledby="entries" {
            h2 id="entries" { "Entries" }
            div.scroll tabindex="0" { table {
                caption { "Entries, oldest first" }
                thead { tr { th scope="col" { "Seq" } th scope="col" { "Kind" } th scope="col" { "Actor" } th scope="col" { "Causal parent" } th scope="col" { "Time" } th scope="col" { "Entry hash" } } }
                tbody { @for e in &entries {
                    @let seq = num(e, "seq");
                    tr {
                        th scope="row" { a href=(format!("/view/entry/{seq}")) { (seq) } }
                        td { (text(e, "kind")) } td { (text(e, "actor")) }
                        td { @if let Some(p) = e.get("causal_parent").and_then(J::as_u64) { a href=(format!("/view/entry/{p}")) { (p) } } @else { "—" } }
                        td { time { (when(e.get("ts").and_then(J::as_f64).unwrap_or(0.0))) } }
                        td { code { (clip(&text(e, "entry_hash"), 16)) } }
                    }
                } }
            } }
            nav.pager aria-label="Pages" {
                @if let Some(n) = next { a href=(format!("/view/record?after={n}&limit={limit}")) rel="next" { "Later entries" } }
                @else { span { "The end of the record." } }
            }
        }
    };
    respond(200, layout::page("Record", "/view/record", body))
}

/// The text of the latest signed note, when one is stored.
fn signed_note(d: &Dispatcher) -> Option<String> {
    use base64::Engine as _;
    let r = d.call("GET", "/tlog/checkpoint", json!({}));
    let b64 = r
        .body
        .get("base64")
        .and_then(J::as_str)
        .filter(|_| r.status == 200)?;
    let raw = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    String::from_utf8(raw).ok()
}

/// One entry: its fields, its body (checked against its hash), its causal chain.
pub(super) fn entry_page(d: &Dispatcher, seq: &str) -> Response {
    let seq = match seq_of(seq) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let entry = match call(d, "GET", &format!("/ledger/{seq}"), json!({})) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let (body, state) = match checked_body(d, seq) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let chain = call(d, "GET", &format!("/why/{seq}"), json!({})).ok();
    let fields = [
        "kind",
        "actor",
        "ts",
        "payload_hash",
        "prev_hash",
        "entry_hash",
    ];
    let title = format!("Entry {seq}");
    let page = html! {
        h1 { (title) }
        dl.facts {
            @for k in fields { dt { (k) } dd { code { (text(&entry, k)) } } }
            dt { "causal_parent" } dd {
                @if let Some(p) = entry.get("causal_parent").and_then(J::as_u64) { a href=(format!("/view/entry/{p}")) { "Entry " (p) } } @else { "none" }
            }
        }
        p { a href=(format!("/view/proof/{seq}")) download=(format!("proof-{seq}.json")) { "Download the inclusion proof of entry " (seq) " (JSON)" } }
        h2 { "Body" }
        @match state {
            Body::Shown => { p { span.badge.ok { "hash checked" } " The body hashes to the entry's payload_hash." } pre.output { (body) } },
            other => p.note { strong { "Not shown: " } (other.note()) "." },
        }
        @if let Some(c) = chain.as_ref().and_then(|c| c.get("chain")).and_then(J::as_array) {
            h2 { "Causal chain" }
            ol { @for e in c { @let s = num(e, "seq"); li { a href=(format!("/view/entry/{s}")) { (s) } " " (text(e, "kind")) " by " (text(e, "actor")) } } }
        }
    };
    respond(200, layout::page(&title, "/view/record", page))
}

/// The body of entry `seq` as pretty JSON, with what may be said of it.
fn checked_body(d: &Dispatcher, seq: u64) -> Result<(String, Body), Response> {
    let view = d.snapshot().map_err(|r| refusal(&r))?;
    let Some(e) = view.entries.get(seq as usize) else {
        return Err(layout::problem(404, &format!("No entry at seq {seq}.")));
    };
    let store = d.reader().map_err(|r| refusal(&r))?;
    let body = Dispatcher::body_in(&store, &view, seq).map_err(|r| refusal(&r))?;
    Ok(match body {
        None => (String::new(), Body::Missing),
        Some(b) if crate::ledger::hash::payload_hash(&b) != e.payload_hash => {
            (String::new(), Body::Mismatch)
        }
        Some(b) => (
            serde_json::to_string_pretty(&b.to_serde()).unwrap_or_default(),
            Body::Shown,
        ),
    })
}

/// The inclusion proof of entry `seq`, as a JSON download.
pub(super) fn proof(d: &Dispatcher, seq: &str) -> Response {
    let seq = match seq_of(seq) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let p = match call(d, "POST", "/prove", json!({"seq": seq})) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let text = serde_json::to_string_pretty(&p).unwrap_or_default() + "\n";
    let mut r = bytes(200, "application/json", text.into_bytes());
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"proof-{seq}.json\"")) {
        r.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    r
}
