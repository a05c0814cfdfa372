//! What a result keeps of a worker's failed call, so a strict replay can give the failure
//! back as it happened: `failure` holds its class (the code the engine branches on, as
//! [`ExecError::code`] gives it) and the raw body the other side sent with it (an endpoint's
//! excerpt, a command's standard error, why its JSON did not parse), capped at
//! [`FAILURE_BODY_CAP`] bytes (`body_cut` when it was longer) and screened for secrets like
//! every body. The failure's message is the result's `output` after `error: `. An HTTP failure
//! keeps its `status` too (whether an endpoint refused tools is read from it and the body). A
//! reply that was not JSON keeps the reply itself as its body, not why it did not parse
//! (`raw_reply`; `body_lossy` when it was not UTF-8), so a replay parses it again.

use serde_json::{Value as J, json};

use crate::exec::ExecError;

/// The most bytes of a failed call's raw body a `failure` keeps.
pub(super) const FAILURE_BODY_CAP: usize = 4096;

/// The `failure` body of `e`: `{class, body}` (`body` only when the failure carried one).
pub(super) fn kept(e: &ExecError) -> J {
    let mut f = json!({ "class": e.code() });
    if let Some(status) = e.status() {
        f["status"] = json!(status);
    }
    if let Some(lossy) = e.raw_reply() {
        f["raw_reply"] = json!(true);
        if lossy {
            f["body_lossy"] = json!(true);
        }
    }
    if let Some(body) = e.raw_body() {
        let mut end = body.len().min(FAILURE_BODY_CAP);
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        f["body"] = json!(&body[..end]);
        if end < body.len() || e.raw_body_cut() {
            f["body_cut"] = json!(true);
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_its_class_and_its_body_cut_on_a_character_boundary() {
        let e = ExecError::Status {
            url: "http://x/".into(),
            status: 500,
            excerpt: "é".repeat(FAILURE_BODY_CAP),
        };
        let f = kept(&e);
        assert_eq!(f["class"], "http_status");
        assert_eq!(f["status"], 500);
        assert_eq!(f["body"].as_str().unwrap().len(), FAILURE_BODY_CAP);
        assert_eq!(f["body_cut"], true);
        let short = kept(&ExecError::Other("boom".into()));
        assert_eq!(short, json!({"class": "other"}));
    }

    #[test]
    fn a_reply_that_is_not_json_is_kept_as_the_reply_not_as_why_it_did_not_parse() {
        let e = crate::exec::json_reply("http://x/", b"<html>oops").unwrap_err();
        assert_eq!(
            kept(&e),
            json!({"class": "invalid_json", "body": "<html>oops", "raw_reply": true})
        );
        let long = format!("{{\"a\": \"{}", "x".repeat(FAILURE_BODY_CAP));
        let f = kept(&crate::exec::json_reply("http://x/", long.as_bytes()).unwrap_err());
        assert_eq!(f["body"].as_str().unwrap(), &long[..FAILURE_BODY_CAP]);
        assert_eq!(f["body_cut"], true);
        let f = kept(&crate::exec::json_reply("http://x/", b"\xff{").unwrap_err());
        assert_eq!(f["body_lossy"], true, "{f}");
        assert_eq!(f["body"], "\u{fffd}{");
    }

    #[test]
    fn a_recorded_class_is_given_back_with_its_message_and_a_stop_is_not() {
        let e = ExecError::recorded("exit", "\"m.sh\" exited with 1", Some(("oops", true)));
        let e = e.unwrap();
        assert_eq!(e.code(), "exit");
        assert_eq!(e.to_string(), "\"m.sh\" exited with 1");
        assert_eq!(
            kept(&e),
            json!({"class": "exit", "body": "oops", "body_cut": true})
        );
        assert!(ExecError::recorded("ceiling", "no room", None).is_none());
        assert!(ExecError::recorded("interrupted", "stop", None).is_none());
        assert!(ExecError::recorded("made-up", "x", None).is_none());
    }
}
