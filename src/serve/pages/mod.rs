//! The review pages (`/view/...`): server-rendered HTML of what the record holds, for a person
//! to look at rather than read as JSON. Read-only, behind their own login (see [`session`]):
//! `git forum view` mints a one-time URL with the daemon's bearer token, and the URL sets a
//! session cookie.
//!
//! Every value on a page comes from the same dispatcher routes and surface operations the CLI's
//! `--json` and the JSON routes give (`/runs`, the run room, `/diff`, `/log`, `/why`,
//! `/payload`, `/prove`, `/verify`, `/bench`, `/blame`); a page renders, it does not project the
//! ledger a second time. Templates are maud's, which escapes every value it is given, so a
//! request or model output carrying HTML shows as text. Every HTML answer carries a
//! Content-Security-Policy that allows nothing but the daemon's own stylesheet (no script at
//! all), and `X-Content-Type-Options: nosniff`.

// A page that cannot be drawn answers with its refusal page, carried back as the `Err` of
// the helpers that read for it: one per request, built where the page gives up, so its size
// costs nothing worth boxing.
#![allow(clippy::result_large_err)]

mod entries;
mod extra;
mod layout;
mod parts;
mod patch;
mod plan_svg;
mod record;
mod run;
mod runs;
mod session;
mod syntax;
mod timeline_svg;
mod util;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use maud::Markup;

use super::dispatch::Dispatcher;
pub(crate) use session::View;

/// The pages' Content-Security-Policy: the daemon's own stylesheet and images, nothing else.
pub(crate) const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The stylesheet, compiled in.
const CSS: &str = include_str!("../../../assets/view.css");

/// Whether `path` is one of the pages' (the HTTP transport hands those here whole).
pub(crate) fn is_view(path: &str) -> bool {
    path == "/view" || path.starts_with("/view/")
}

/// A request to the pages, as the HTTP transport hands it over after its Host and Origin
/// checks.
pub(crate) struct Ask {
    pub(crate) method: String,
    pub(crate) path: String,
    /// The query string's fields, in order.
    pub(crate) query: Vec<(String, String)>,
    /// The `Cookie` header.
    pub(crate) cookie: Option<String>,
    /// Whether the request carried the daemon's bearer token.
    pub(crate) bearer: bool,
}

impl Ask {
    /// The query field `key`, when given and not empty.
    pub(super) fn field(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

/// The query string's fields.
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// An HTML answer with the pages' headers.
pub(super) fn html(status: u16, page: Markup) -> Response {
    let mut r = Response::new(Body::from(page.into_string()));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    guard_headers(&mut r);
    r
}

/// The headers every answer of the pages carries.
fn guard_headers(r: &mut Response) {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// A non-HTML answer (the stylesheet, a proof download, the mint's JSON) with the pages'
/// headers.
pub(super) fn bytes(status: u16, content_type: &'static str, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    guard_headers(&mut r);
    r
}

/// A 303 to `location` (a path of the pages).
fn see_other(location: &str, cookie: Option<String>) -> Response {
    let mut r = html(
        303,
        layout::bare(
            "Redirecting",
            maud::html! { p { a href=(location) { "Continue" } } },
        ),
    );
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        r.headers_mut().insert(header::SET_COOKIE, c);
    }
    r
}

/// Answers one request to the pages. Runs on the blocking pool: the pages read the ledger.
pub(crate) fn answer(d: &Dispatcher, view: &View, ask: &Ask) -> Response {
    let path = ask.path.trim_end_matches('/');
    match (ask.method.as_str(), path) {
        ("GET", "/view/assets/view.css") => {
            return bytes(200, "text/css; charset=utf-8", CSS.as_bytes().to_vec());
        }
        ("POST", "/view/mint") => return mint(view, ask),
        ("GET", "/view/login") => return login(view, ask),
        (_, "/view/mint" | "/view/login" | "/view/assets/view.css") => {
            return layout::problem(405, "This address takes another method.");
        }
        _ => {}
    }
    if !view.admits(ask.cookie.as_deref()) {
        return layout::login_needed();
    }
    if ask.method != "GET" {
        return layout::problem(405, "The review pages are read-only: only GET is answered.");
    }
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segs.as_slice() {
        ["view"] => see_other("/view/runs", None),
        ["view", "runs"] => runs::page(d, view, ask),
        ["view", "run", seq] => run::page(d, view, ask, seq),
        ["view", "run", seq, "task", id] => run::task_page(d, view, ask, seq, id),
        ["view", "record"] => record::log_page(d, ask),
        ["view", "entry", seq] => record::entry_page(d, seq),
        ["view", "proof", seq] => record::proof(d, seq),
        ["view", "bench"] => extra::bench_page(d, ask),
        ["view", "apply", seq] => extra::apply_page(d, seq),
        ["view", "blame"] => extra::blame_page(d, ask),
        _ => layout::problem(404, "No such page. Start from the list of runs."),
    }
}

/// `POST /view/mint[?run=SEQ]`, with the daemon's bearer token: a one-time login path that
/// opens the runs page (or run SEQ's page). `git forum view` asks it.
fn mint(view: &View, ask: &Ask) -> Response {
    if !ask.bearer {
        let body = serde_json::json!({"error": "minting a login URL needs `Authorization: Bearer TOKEN` (the daemon's token); run `git forum view`"});
        return bytes(401, "application/json", body.to_string().into_bytes());
    }
    let target = match ask.field("run") {
        None => "/view/runs".to_string(),
        Some(r) if !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()) => {
            format!("/view/run/{r}")
        }
        Some(r) => {
            let body = serde_json::json!({"error": format!("run {r:?} is not a run's seq (a non-negative integer)")});
            return bytes(400, "application/json", body.to_string().into_bytes());
        }
    };
    match view.mint(target) {
        Some(t) => {
            let body = serde_json::json!({"path": format!("/view/login?t={t}")});
            bytes(200, "application/json", body.to_string().into_bytes())
        }
        None => {
            let body = serde_json::json!({"error": "cannot read random bytes for a login token"});
            bytes(500, "application/json", body.to_string().into_bytes())
        }
    }
}

/// `GET /view/login?t=TOKEN`: uses up the token, sets the session cookie and sends the browser
/// on to the page the token was minted for.
fn login(view: &View, ask: &Ask) -> Response {
    match ask.field("t").and_then(|t| view.login(t)) {
        Some((target, session)) => see_other(&target, Some(session::set_cookie(&session))),
        None => layout::problem(
            401,
            "This login link was used already, has expired or was never valid. Run `git forum view` for a new one.",
        ),
    }
}
