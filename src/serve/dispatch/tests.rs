//! The route table, the access rule and the reply shape.

use super::*;

#[test]
fn every_listed_route_resolves_and_nothing_else_does() {
    for (method, path, _) in ROUTES {
        let path = path.replace("<seq>", "0");
        assert!(resolve(method, &path).is_some(), "{method} {path}");
        let other = if *method == "GET" { "POST" } else { "GET" };
        assert_eq!(
            allowed_methods(&path).contains(&other),
            resolve(other, &path).is_some()
        );
    }
    for (m, p) in [
        ("GET", "/"),
        ("GET", "/nope"),
        ("GET", "status"),
        ("GET", "/status/"),
        ("GET", "/ledger"),
        ("GET", "/ledger/1/2"),
        ("PUT", "/status"),
        ("GET", "/gate"),
    ] {
        assert!(resolve(m, p).is_none(), "{m} {p}");
    }
    assert_eq!(allowed_methods("/status"), vec!["GET"]);
    assert_eq!(allowed_methods("/checkpoint"), vec!["GET", "POST"]);
    assert!(allowed_methods("/nope").is_empty());
    // Every route that may change anything asks the token: each POST, and only the
    // reads listed here describe the host.
    for (method, path, _) in ROUTES {
        let a = access(method, path);
        match (*method, *path) {
            ("POST", "/witness") => assert_eq!(a, Access::Signed),
            ("POST", _) => assert_eq!(a, Access::Write, "{path}"),
            _ => assert!(!matches!(a, Access::Write | Access::Signed), "{path}"),
        }
    }
    assert_eq!(access("GET", "/health"), Access::Open);
    assert_eq!(access("GET", "/runtime"), Access::Host);
    assert_eq!(access("GET", "/doctor"), Access::Host);
    assert_eq!(access("GET", "/ledger/3"), Access::Record);
    assert_eq!(access("PUT", "/status"), Access::Write);
    assert!(is_long_running("POST", "/submit"));
    assert!(!is_long_running("GET", "/status"));
}

#[test]
fn replies_carry_json_errors() {
    let r = Reply::error(404, "gone");
    assert_eq!(r.body_text(), r#"{"error":"gone"}"#);
    assert_eq!(r.message(), "gone");
    assert_eq!(r.status, 404);
    assert_eq!(Reply::ok(json!({})).status, 200);
    let e: Reply = StoreError::Contended("busy".into()).into();
    assert_eq!(e.status, 503);
}
