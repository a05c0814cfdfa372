//! Unit tests of canonical JSON: Python float reprs, the encoder, the strict parser and its
//! limits.

use super::*;

#[test]
fn float_repr_matches_python() {
    for (x, want) in [
        (1.0, "1.0"),
        (0.9, "0.9"),
        (1e-7, "1e-07"),
        (1e16, "1e+16"),
        (1e15, "1000000000000000.0"),
        (0.0001, "0.0001"),
        (123456789.125, "123456789.125"),
        (5e-324, "5e-324"),
        (f64::MAX, "1.7976931348623157e+308"),
        (-0.0, "-0.0"),
        (0.1 + 0.2, "0.30000000000000004"),
        (-2.5e-10, "-2.5e-10"),
    ] {
        assert_eq!(python_float_repr(x), want, "{x:e}");
    }
}

#[test]
fn numbers_keep_identity() {
    assert_eq!(parse("1").unwrap().canonical(), "1");
    assert_eq!(parse("1.0").unwrap().canonical(), "1.0");
    assert_eq!(parse("-0").unwrap().canonical(), "0");
    assert_eq!(parse("1e400").unwrap().canonical(), "Infinity");
    let big = "123456789012345678901234567890";
    assert_eq!(parse(big).unwrap().canonical(), big);
}

#[test]
fn serde_conversions_keep_every_number() {
    for (text, canonical) in [
        ("18446744073709551616", "18446744073709551616"),
        ("-18446744073709551617", "-18446744073709551617"),
        (
            "123456789012345678901234567890",
            "123456789012345678901234567890",
        ),
        ("0.1", "0.1"),
        ("1e16", "1e+16"),
        ("1E+2", "100.0"),
        ("-0", "0"),
        ("-0.0", "-0.0"),
        ("1e400", "Infinity"),
        ("-1e400", "-Infinity"),
    ] {
        let j: serde_json::Value = serde_json::from_str(text).unwrap();
        let v = Value::from_serde(&j);
        assert_eq!(v.canonical(), canonical, "{text}");
        assert_eq!(v, parse(text).unwrap(), "{text}");
        if !v.has_non_finite() {
            // Out again: the same number, exactly.
            assert_eq!(v.to_serde().to_string(), canonical, "{text}");
            assert_eq!(Value::from_serde(&v.to_serde()), v, "{text}");
        }
    }
    let nan = parse(r#"{"a":[1,NaN]}"#).unwrap();
    assert!(nan.has_non_finite());
    assert_eq!(nan.to_serde().to_string(), r#"{"a":[1,"NaN"]}"#);
    assert!(!parse(r#"{"a":[1,2.5,"NaN"]}"#).unwrap().has_non_finite());
}

#[test]
fn python_dumps_keeps_order_and_escapes_line_separators() {
    let v = parse(r#"{"b": "x\u2028y", "a": [1, 2.5]}"#).unwrap();
    assert_eq!(v.python_dumps(), r#"{"b": "x\u2028y", "a": [1, 2.5]}"#);
    assert_eq!(v.canonical(), r#"{"a":[1,2.5],"b":"x\u2028y"}"#);
}

#[test]
fn refuses_what_python_refuses() {
    for bad in [
        "",
        "01x",
        "[1,]",
        "{\"a\" 1}",
        "\"\u{1}\"",
        "tru",
        "1 2",
        "\"\\ud800\"",
    ] {
        assert!(parse(bad).is_err(), "{bad:?} should fail");
    }
}

#[test]
fn a_200k_key_object_parses_in_order() {
    let n = 200_000;
    let mut text = String::from("{");
    for i in 0..n {
        if i > 0 {
            text.push(',');
        }
        // Descending keys, so insertion order and sorted order differ.
        let _ = write!(text, "\"k{:06}\":{i}", n - 1 - i);
    }
    text.push('}');
    let Value::Object(members) = parse(&text).unwrap() else {
        panic!("not an object");
    };
    assert_eq!(members.len(), n);
    for (i, (k, v)) in members.iter().enumerate() {
        assert_eq!(*k, format!("k{:06}", n - 1 - i));
        assert_eq!(*v, Value::int(i as i64));
    }
    let v = Value::Object(members);
    assert_eq!(v.get("k000000"), Some(&Value::int(n as i64 - 1)));
    assert!(
        v.canonical()
            .starts_with("{\"k000000\":199999,\"k000001\":199998,")
    );
}

#[test]
fn repeated_keys_keep_first_position_and_last_value() {
    // Small objects (scanned) and large ones (indexed) agree, also across the switch.
    assert_eq!(
        parse(r#"{"b":1,"a":2,"b":3}"#).unwrap(),
        Value::Object(vec![
            ("b".into(), Value::int(3)),
            ("a".into(), Value::int(2))
        ])
    );
    for n in [SCAN_MEMBERS - 1, SCAN_MEMBERS, SCAN_MEMBERS + 1, 1000] {
        let mut text = String::from("{");
        for i in 0..n {
            let _ = write!(text, "\"k{i}\":{i},");
        }
        // Every key again, then the first once more: positions stay, values are the last.
        for i in 0..n {
            let _ = write!(text, "\"k{i}\":\"again {i}\",");
        }
        text.push_str("\"k0\":null}");
        let Value::Object(members) = parse(&text).unwrap() else {
            panic!("not an object");
        };
        assert_eq!(members.len(), n, "n = {n}");
        assert_eq!(members[0], ("k0".to_string(), Value::Null));
        for (i, (k, v)) in members.iter().enumerate().skip(1) {
            assert_eq!(*k, format!("k{i}"));
            assert_eq!(*v, Value::str(format!("again {i}")));
        }
        // Value::object applies the same rule.
        let built = Value::object(members.iter().cloned().chain(members.iter().cloned()));
        assert_eq!(built, Value::Object(members));
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = "[".repeat(MAX_DEPTH + 5) + &"]".repeat(MAX_DEPTH + 5);
    assert!(parse(&deep).is_err());
}
