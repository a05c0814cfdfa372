//! The reads answered on the runtime's own workers, on the connection's task before the
//! request reaches the router (which boxes its body and its handler's future), so before
//! anything is allocated for the request: `GET /health`, `/status`, `/checkpoint`,
//! `/ledger/SEQ`, `/payload/SEQ` (a body answered before) and `/log?limit=N` (N up to 100),
//! when the cached entries are the ledger's (see the dispatcher's `fresh` module). The answer
//! is bytes kept by the cache, shared with the response, not JSON built again.
//!
//! A request takes this path only when every check of the ordinary path would pass: the Host
//! and Origin, the token its route asks, a text `Idempotency-Key` if any, no body, and a free
//! slot (the concurrency limit counts it). Anything else (a refusal to give, a query other
//! than `limit=N`, a tip that moved, an entry past the end) goes on to the ordinary path,
//! which answers it exactly as before.

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Method, header};
use axum::response::Response;

use super::Server;
use crate::serve::dispatch::{Read, access};

/// The longest `/log` answered here (a page of 1,000 entries is work for the blocking pool).
const SHORT_LOG: u64 = 100;

/// What a path names, for this path.
#[derive(Debug, PartialEq, Eq)]
enum Fast {
    Health,
    Cached(Read),
}

/// Plain digits as a `u64` (what the ordinary path's seq parser takes).
fn digits(text: &str) -> Option<u64> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// The read `path` and `query` name, when this path answers it.
fn route(path: &str, query: Option<&str>) -> Option<Fast> {
    let read = match (path, query) {
        ("/health", None) => return Some(Fast::Health),
        ("/status", None) => Read::Status,
        ("/checkpoint", None) => Read::Checkpoint,
        ("/log", Some(q)) => {
            let n = q.strip_prefix("limit=")?;
            // One spelling only: no sign, no leading zero (the ordinary path reads the rest).
            if n.starts_with('0') {
                return None;
            }
            Read::Log(digits(n).filter(|n| (1..=SHORT_LOG).contains(n))?)
        }
        (p, None) => {
            if let Some(seq) = p.strip_prefix("/ledger/") {
                Read::Entry(digits(seq)?)
            } else {
                Read::Payload(digits(p.strip_prefix("/payload/")?)?)
            }
        }
        _ => return None,
    };
    Some(Fast::Cached(read))
}

/// A 200 with `body` and the headers of every JSON answer.
pub(super) fn json_response(body: Bytes) -> Response {
    let mut r = Response::new(Body::from(body));
    super::json_headers(r.headers_mut());
    r
}

/// Whether the ordinary path's checks before the body would all pass for `req`.
fn admitted<B>(server: &Server, req: &axum::http::Request<B>, path: &str) -> Option<()> {
    let headers = req.headers();
    let host = headers.get(header::HOST)?.to_str().ok()?;
    server.guard.host_allowed(host).then_some(())?;
    if let Some(origin) = headers.get(header::ORIGIN) {
        server
            .guard
            .origin_allowed(origin.to_str().ok()?)
            .then_some(())?;
    }
    let auth = match headers.get(header::AUTHORIZATION) {
        None => None,
        Some(v) => v.to_str().ok(),
    };
    server
        .guard
        .authorized(access("GET", path), auth)
        .then_some(())?;
    if let Some(key) = headers.get("idempotency-key") {
        key.to_str().ok()?;
    }
    Some(())
}

/// The kept answer to `read`. When the tip moved (after each append), the request that finds
/// it walks to the new tip here, under the cache's lock: a few commits on this worker (the
/// dispatcher's `answer_fresh`), a longer walk with this worker's other tasks handed to
/// another thread while it reads the store (`block_in_place`): one walk for all, rather than
/// every request until it is done sent to the blocking pool to open a store of its own.
fn cached(
    d: &crate::serve::dispatch::Dispatcher,
    read: Read,
) -> Option<Result<Bytes, crate::serve::dispatch::Reply>> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if let Some(answer) = d.answer_fresh(read) {
        return Some(answer);
    }
    let threads =
        Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
    threads
        .then(|| tokio::task::block_in_place(|| d.answer_current(read)))
        .flatten()
}

/// The answer to `req` from the cache, or `None` for the ordinary path (see the module doc).
/// The connection's service asks it before the request is handed to the router.
pub(super) fn answer<B: HttpBody>(
    server: &Server,
    req: &axum::http::Request<B>,
) -> Option<Response> {
    if req.method() != Method::GET || !req.body().is_end_stream() {
        return None;
    }
    let path = req.uri().path();
    let fast = route(path, req.uri().query())?;
    admitted(server, req, path)?;
    let _slot = server.slots.try_acquire().ok()?;
    let body = match fast {
        Fast::Health => Bytes::from_static(br#"{"ok":true}"#),
        Fast::Cached(read) => match cached(&server.dispatcher, read)? {
            Ok(b) => b,
            Err(reply) => return Some(super::reply_response(&reply)),
        },
    };
    Some(json_response(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_plain_spellings_of_the_cached_reads_take_this_path() {
        let c = |r| Some(Fast::Cached(r));
        assert_eq!(route("/health", None), Some(Fast::Health));
        assert_eq!(route("/status", None), c(Read::Status));
        assert_eq!(route("/checkpoint", None), c(Read::Checkpoint));
        assert_eq!(route("/ledger/12", None), c(Read::Entry(12)));
        assert_eq!(route("/payload/0", None), c(Read::Payload(0)));
        assert_eq!(route("/log", Some("limit=10")), c(Read::Log(10)));
        assert_eq!(route("/log", Some("limit=100")), c(Read::Log(100)));
        for (path, query) in [
            ("/health", Some("x=1")),
            ("/status", Some("")),
            ("/log", None),
            ("/log", Some("limit=0")),
            ("/log", Some("limit=010")),
            ("/log", Some("limit=101")),
            ("/log", Some("limit=+1")),
            ("/log", Some("limit=1&limit=2")),
            ("/log", Some("after=1")),
            ("/ledger/", None),
            ("/ledger/-1", None),
            ("/ledger/1/2", None),
            ("/payload/x", None),
            ("/ledger/99999999999999999999999", None),
            ("/replay/3", None),
            ("/verify", None),
        ] {
            assert_eq!(route(path, query), None, "{path} {query:?}");
        }
    }
}
