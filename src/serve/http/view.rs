//! The review pages' way in (`/view/...`): after the Host and Origin checks, the pages
//! answer on the blocking pool with a slot and within the timeout, like any read; the pages
//! keep their own login (see [`crate::serve::pages`]), so the bearer token only says whether
//! the request may mint a login URL.

use std::sync::Arc;

use axum::http::header;
use axum::response::Response;

use super::{Access, Server, check_host_and_origin, error, header_str};
use crate::serve::pages;

/// A request to the review pages: the Host and Origin checks, then the pages answer on the
/// blocking pool, with a slot and within the timeout like any read.
pub(super) async fn answer(server: &Arc<Server>, parts: &axum::http::request::Parts) -> Response {
    if let Err(r) = check_host_and_origin(&server.guard, &parts.headers) {
        return *r;
    }
    let auth = header_str(&parts.headers, header::AUTHORIZATION).unwrap_or(None);
    let ask = pages::Ask {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: pages::query_pairs(parts.uri.query()),
        cookie: header_str(&parts.headers, header::COOKIE)
            .unwrap_or(None)
            .map(str::to_string),
        bearer: server.guard.authorized(Access::Write, auth),
    };
    let limit = server.limits.timeout;
    let slot = match tokio::time::timeout(limit, server.slots.clone().acquire_owned()).await {
        Ok(Ok(p)) => p,
        _ => return error(503, "the server is busy; try again"),
    };
    let (d, v) = (server.dispatcher.clone(), server.view.clone());
    let job = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        pages::answer(&d, &v, &ask)
    });
    match tokio::time::timeout(limit, job).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => error(500, "internal error: the page failed"),
        Err(_) => error(504, "the page did not finish in time"),
    }
}
