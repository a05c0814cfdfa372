//! A worker's failed call given back from what its `result` keeps in `failure` (see
//! `run/failure.rs`): its class, message, body and HTTP status as they happened. A reply that
//! was not JSON is not given back as the failure it made: its kept bytes (`raw_reply`) are
//! parsed again by the function every HTTP executor parses with, so the parse error is the
//! replay's own. A body kept cut short or with bytes that were not UTF-8 replaced is not the
//! reply the endpoint sent, so that failure is given back as recorded.

use serde_json::Value as J;

use crate::exec::{ExecError, json_reply};

/// What an [`ExecError::InvalidJson`]'s message says between the URL and why.
const INVALID_JSON: &str = " answered with invalid JSON: ";

/// The failure the `failure` body `f` keeps, with `message` (the result's output after
/// `error: `): `None` when `f` names no class, `Err` with the class when a replay cannot give
/// that class back (a spend ceiling's, an interruption's).
pub(super) fn given_back(f: &J, message: &str) -> Option<Result<ExecError, String>> {
    let class = f["class"].as_str()?;
    let body = f["body"].as_str();
    let whole = f["body_cut"] != true && f["body_lossy"] != true;
    if class == "invalid_json"
        && f["raw_reply"] == true
        && whole
        && let (Some(raw), Some((url, _))) = (body, message.split_once(INVALID_JSON))
    {
        return Some(Ok(parsed_again(url, raw)));
    }
    let status = f["status"].as_u64().and_then(|s| u16::try_from(s).ok());
    let kept = body.map(|b| (b, f["body_cut"] == true));
    let reply = (f["raw_reply"] == true).then_some(f["body_lossy"] == true);
    Some(
        ExecError::recorded(class, message, kept)
            .map(|e| e.with_status(status).with_reply(reply))
            .ok_or_else(|| class.to_string()),
    )
}

/// The failure a reply kept as `raw` makes when it is parsed again; a kept reply that parses
/// (one edited after the fact) is a failure of its own, so the result it leads to differs
/// from the record's.
fn parsed_again(url: &str, raw: &str) -> ExecError {
    match json_reply(url, raw.as_bytes()) {
        Err(e) => e,
        Ok(_) => ExecError::Other(format!(
            "{url} answered with a reply the record keeps as JSON, though it recorded that it was not"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_kept_reply_is_parsed_again_and_a_cut_one_is_given_back_as_recorded() {
        let live = json_reply("http://h/v1", b"<html>").unwrap_err();
        let f = json!({"class": "invalid_json", "body": "<html>", "raw_reply": true});
        let again = given_back(&f, &live.to_string()).unwrap().unwrap();
        assert_eq!(again.to_string(), live.to_string());
        assert_eq!(again.code(), "invalid_json");
        // The message's reason is recomputed: an edited one is not given back.
        let edited = "http://h/v1 answered with invalid JSON: something else";
        let again = given_back(&f, edited).unwrap().unwrap();
        assert_eq!(again.to_string(), live.to_string());
        // A body edited to JSON fails otherwise.
        let f2 = json!({"class": "invalid_json", "body": "{}", "raw_reply": true});
        assert_eq!(given_back(&f2, edited).unwrap().unwrap().code(), "other");
        // Cut short, or recorded before the reply was kept: the record's message and class.
        for f in [
            json!({"class": "invalid_json", "body": "<ht", "body_cut": true, "raw_reply": true}),
            json!({"class": "invalid_json", "body": "expected value"}),
        ] {
            let again = given_back(&f, edited).unwrap().unwrap();
            assert_eq!(
                (again.code(), again.to_string()),
                ("invalid_json", edited.into())
            );
            // What a result keeps of it is what the record kept.
            assert_eq!(crate::run::failure::kept(&again), f);
        }
    }

    #[test]
    fn a_status_is_given_back_with_its_class_and_a_stop_is_refused() {
        let f = json!({"class": "http_status", "status": 400, "body": "tools are not supported"});
        let e = given_back(&f, "u answered HTTP 400").unwrap().unwrap();
        assert_eq!(e.status(), Some(400));
        assert!(crate::exec::tool_chat::rejects_tools(&e));
        assert_eq!(crate::run::failure::kept(&e), f);
        let f = json!({"class": "ceiling"});
        assert_eq!(given_back(&f, "no room").unwrap().unwrap_err(), "ceiling");
        assert!(given_back(&json!(null), "x").is_none());
    }
}
