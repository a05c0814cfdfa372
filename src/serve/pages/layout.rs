//! The frame every page shares: the document, the navigation, the stylesheet, and the pages
//! for a refusal.

use axum::response::Response;
use maud::{DOCTYPE, Markup, html};

/// The sections in the navigation: path and label.
const NAV: &[(&str, &str)] = &[
    ("/view/runs", "Runs"),
    ("/view/record", "Record"),
    ("/view/bench", "Bench"),
    ("/view/blame", "Blame"),
];

/// A whole page: `title` in the tab and the top heading's place, `current` the navigation
/// entry to mark, `body` the main content.
pub(super) fn page(title: &str, current: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) " · git forum" }
                link rel="stylesheet" href="/view/assets/view.css";
            }
            body {
                a.skip href="#main" { "Skip to the content" }
                header.top {
                    span.brand { "git forum" }
                    nav aria-label="Sections" {
                        ul {
                            @for (href, label) in NAV {
                                li {
                                    @if *href == current {
                                        a href=(href) aria-current="page" { (label) }
                                    } @else {
                                        a href=(href) { (label) }
                                    }
                                }
                            }
                        }
                    }
                }
                main id="main" { (body) }
            }
        }
    }
}

/// A page without navigation (a redirect's body, a refusal).
pub(super) fn bare(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · git forum" }
                link rel="stylesheet" href="/view/assets/view.css";
            }
            body { main id="main" { h1 { (title) } (body) } }
        }
    }
}

/// The 401 of a page asked without a session.
pub(super) fn login_needed() -> Response {
    super::html(
        401,
        bare(
            "Log in to see this page",
            html! {
                p { "These pages show the record of this repository and need a login of their own." }
                p { "Run " code { "git forum view" } " in the repository: it opens (or prints) a one-time link that logs this browser in." }
            },
        ),
    )
}

/// A refusal or failure, as a short page with its status.
pub(super) fn problem(status: u16, message: &str) -> Response {
    let title = match status {
        400 => "Bad request",
        401 => "Log in to see this page",
        404 => "Not found",
        405 => "Method not allowed",
        409 => "Not possible for this run",
        _ => "Something went wrong",
    };
    super::html(
        status,
        bare(
            title,
            html! {
                p { (message) }
                p { a href="/view/runs" { "Back to the runs" } }
            },
        ),
    )
}
