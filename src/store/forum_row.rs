//! A row of Forum's `entries.jsonl` read straight into an [`Entry`], for an import's hot
//! path: Forum writes every row the same way, so such a row needs no JSON value built, and the
//! general parser reads whatever else a row may be.

use crate::ledger::Entry;
use crate::ledger::hash::is_hash;

/// Reads an entry from a row of Forum's `entries.jsonl` written the way Forum writes it
/// (`json.dumps(row, ensure_ascii=False)`: its key order, `", "` and `": "`), when its
/// strings hold no escape and its numbers are plain; `None` for anything else, which the
/// caller reads with the general parser (whose reading of such a row this one equals). An
/// import's fast path: it builds no JSON value.
pub(crate) fn entry_from_row(line: &str) -> Option<Entry> {
    let mut rest = line;
    take(&mut rest, "{\"seq\": ")?;
    let seq: u64 = uint(&mut rest)?.parse().ok()?;
    take(&mut rest, ", \"ts\": ")?;
    let ts = number(&mut rest)?;
    take(&mut rest, ", \"actor\": ")?;
    let actor = string(&mut rest)?;
    take(&mut rest, ", \"kind\": ")?;
    let kind = string(&mut rest)?;
    take(&mut rest, ", \"causal_parent\": ")?;
    let causal_parent = null_or_int(&mut rest)?;
    take(&mut rest, ", \"payload_hash\": ")?;
    let payload_hash = string(&mut rest)?;
    take(&mut rest, ", \"prev_hash\": ")?;
    let prev_hash = string(&mut rest)?;
    take(&mut rest, ", \"entry_hash\": ")?;
    let entry_hash = string(&mut rest)?;
    if rest != "}"
        || ![entry_hash, payload_hash, prev_hash]
            .iter()
            .all(|h| is_hash(h))
    {
        return None;
    }
    Some(Entry {
        seq,
        ts,
        actor: actor.to_string(),
        kind: kind.to_string(),
        causal_parent,
        payload_hash: payload_hash.to_string(),
        prev_hash: prev_hash.to_string(),
        entry_hash: entry_hash.to_string(),
    })
}

/// A row of Forum's `payloads.jsonl` written the way Forum writes it (`{"hash": HASH, "body":
/// BODY}`, `json.dumps(row, ensure_ascii=False)`), when BODY is plain: every object's keys in
/// strictly ascending order, strings of printable ASCII without escapes, integers (no `-0`),
/// `true`, `false`, `null`, nesting at most [`PLAIN_DEPTH`] deep. Returns the hash, with the
/// body's canonical bytes appended to `canonical` when given; `None` for anything else, which
/// the caller reads with the general parser. For such a row the general path's result is the
/// same (its keys already sorted, its body's canonical form is the row's text without the
/// spaces after `,` and `:`), with no JSON value built: an import reads every row twice
/// (once to index it, once to hand its body out), and building values was a large part of
/// its CPU time.
pub(crate) fn payload_from_row<'a>(
    line: &'a str,
    canonical: Option<&mut String>,
) -> Option<&'a str> {
    let mut rest = line.as_bytes();
    let rest = &mut rest;
    lit(rest, b"{\"hash\": ")?;
    let hash = plain_string(rest)?;
    lit(rest, b", \"body\": ")?;
    let mut sink = Sink(canonical);
    if let Some(s) = sink.0.as_mut() {
        // The canonical bytes are the row's without some spaces: room for them at once.
        s.reserve(rest.len());
    }
    let start = sink.len();
    if plain_value(rest, &mut sink, 0).is_none() || *rest != b"}" {
        sink.truncate(start);
        return None;
    }
    // Only ASCII was taken, so these are character boundaries.
    std::str::from_utf8(hash).ok()
}

/// Nesting [`payload_from_row`] reads itself; deeper bodies go to the general parser.
const PLAIN_DEPTH: usize = 64;

/// Where [`payload_from_row`] writes the canonical bytes, if anywhere.
struct Sink<'a>(Option<&'a mut String>);

impl Sink<'_> {
    fn push(&mut self, b: &[u8]) {
        if let Some(s) = self.0.as_mut() {
            // Only printable ASCII is ever pushed.
            s.push_str(std::str::from_utf8(b).unwrap_or_default());
        }
    }
    fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |s| s.len())
    }
    fn truncate(&mut self, n: usize) {
        if let Some(s) = self.0.as_mut() {
            s.truncate(n);
        }
    }
}

fn lit(rest: &mut &[u8], l: &[u8]) -> Option<()> {
    *rest = rest.strip_prefix(l)?;
    Some(())
}

/// A string of printable ASCII other than `"` and `\`: its text, without the quotes.
fn plain_string<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let body = rest.strip_prefix(b"\"")?;
    let end = body.iter().position(|&b| b == b'"')?;
    let s = &body[..end];
    if !s.iter().all(|&b| (0x20..=0x7e).contains(&b) && b != b'\\') {
        return None;
    }
    *rest = &body[end + 1..];
    Some(s)
}

/// One plain value (see [`payload_from_row`]), its canonical bytes pushed to `out`.
fn plain_value(rest: &mut &[u8], out: &mut Sink<'_>, depth: usize) -> Option<()> {
    if depth > PLAIN_DEPTH {
        return None;
    }
    match *rest.first()? {
        b'"' => {
            let s = plain_string(rest)?;
            out.push(b"\"");
            out.push(s);
            out.push(b"\"");
        }
        b'{' => {
            *rest = &rest[1..];
            out.push(b"{");
            let mut last: Option<&[u8]> = None;
            if !take_byte(rest, b'}') {
                loop {
                    let key = plain_string(rest)?;
                    if last.is_some_and(|l| l >= key) {
                        return None;
                    }
                    last = Some(key);
                    lit(rest, b": ")?;
                    out.push(b"\"");
                    out.push(key);
                    out.push(b"\":");
                    plain_value(rest, out, depth + 1)?;
                    if take_byte(rest, b'}') {
                        break;
                    }
                    lit(rest, b", ")?;
                    out.push(b",");
                }
            }
            out.push(b"}");
        }
        b'[' => {
            *rest = &rest[1..];
            out.push(b"[");
            if !take_byte(rest, b']') {
                loop {
                    plain_value(rest, out, depth + 1)?;
                    if take_byte(rest, b']') {
                        break;
                    }
                    lit(rest, b", ")?;
                    out.push(b",");
                }
            }
            out.push(b"]");
        }
        b't' => word(rest, out, b"true")?,
        b'f' => word(rest, out, b"false")?,
        b'n' => word(rest, out, b"null")?,
        _ => {
            let neg = usize::from(rest.first() == Some(&b'-'));
            let n = rest[neg..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            let after = rest.get(neg + n).copied();
            // No leading zero, no `-0` (written `0`), and no fraction or exponent (a float).
            if n == 0
                || (n > 1 && rest[neg] == b'0')
                || (neg == 1 && n == 1 && rest[1] == b'0')
                || matches!(after, Some(b'.' | b'e' | b'E'))
            {
                return None;
            }
            out.push(&rest[..neg + n]);
            *rest = &rest[neg + n..];
        }
    }
    Some(())
}

fn take_byte(rest: &mut &[u8], b: u8) -> bool {
    if rest.first() == Some(&b) {
        *rest = &rest[1..];
        true
    } else {
        false
    }
}

fn word(rest: &mut &[u8], out: &mut Sink<'_>, w: &[u8]) -> Option<()> {
    lit(rest, w)?;
    out.push(w);
    Some(())
}

fn take(rest: &mut &str, lit: &str) -> Option<()> {
    *rest = rest.strip_prefix(lit)?;
    Some(())
}

/// A string as the general parser reads it when it holds no escape: the raw text.
fn string<'a>(rest: &mut &'a str) -> Option<&'a str> {
    let body = rest.strip_prefix('"')?;
    // A byte search, then every byte checked without an early exit (vector compares): a
    // `str` search for a `char` builds a searcher per call, several a row.
    let end = memchr::memchr(b'"', body.as_bytes())?;
    let s = &body[..end];
    if s.bytes()
        .fold(false, |bad, b| bad | (b < 0x20) | (b == b'\\'))
    {
        return None;
    }
    *rest = &body[end + 1..];
    Some(s)
}

fn digits(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_digit).count()
}

/// A non-negative JSON integer without leading zeros.
fn uint<'a>(rest: &mut &'a str) -> Option<&'a str> {
    let n = digits(rest);
    if n == 0 || (n > 1 && rest.starts_with('0')) {
        return None;
    }
    let (lit, after) = rest.split_at(n);
    *rest = after;
    Some(lit)
}

/// A JSON number without a sign: an integer part, then a fraction or an exponent or both
/// (each complete), or neither.
fn number(rest: &mut &str) -> Option<f64> {
    let start = *rest;
    uint(rest)?;
    if let Some(after) = rest.strip_prefix('.') {
        let n = digits(after);
        if n == 0 {
            return None;
        }
        *rest = &after[n..];
    }
    if let Some(after) = rest.strip_prefix(['e', 'E']) {
        let after = after.strip_prefix(['+', '-']).unwrap_or(after);
        let n = digits(after);
        if n == 0 {
            return None;
        }
        *rest = &after[n..];
    }
    start[..start.len() - rest.len()].parse().ok()
}

/// `null` (`Some(None)`), or a non-negative integer that fits an `i64`.
fn null_or_int(rest: &mut &str) -> Option<Option<i64>> {
    if let Some(after) = rest.strip_prefix("null") {
        *rest = after;
        return Some(None);
    }
    Some(Some(uint(rest)?.parse::<i64>().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::canonical::{self, Value};
    use crate::ledger::{NewEntry, hash};

    /// What the general path reads from `line`: the value, then the entry's fields.
    fn general(line: &str) -> Option<Entry> {
        Entry::from_value(&canonical::parse(line).ok()?).ok()
    }

    fn entry(actor: &str, ts: f64, parent: Option<i64>) -> Entry {
        let new = NewEntry {
            actor: actor.into(),
            kind: "note".into(),
            causal_parent: parent,
            payload: Value::int(1),
            ts,
        };
        let body = new.validate().unwrap();
        Entry::next(None, &new, hash::sha256_hex(body.as_bytes()))
    }

    #[test]
    fn a_row_as_forum_writes_it_reads_as_the_general_parser_reads_it() {
        for (actor, ts, parent) in [
            ("bench", 1001.0, None),
            ("zo\u{eb} <z@x>", 0.5, Some(3)),
            ("\u{65e5}\u{672c}", 1.7e18, Some(0)),
            ("a", 1e-7, None),
            ("b", 0.0, Some(123_456_789_012)),
        ] {
            let e = entry(actor, ts, parent);
            let row = e.to_value().python_dumps();
            let fast = entry_from_row(&row).unwrap_or_else(|| panic!("not read fast: {row}"));
            assert_eq!(Some(&fast), general(&row).as_ref(), "{row}");
            assert_eq!(fast, e);
        }
        // Numbers written otherwise than Forum writes them, read the same way.
        let e = entry("x", 1001.0, None);
        let row = e.to_value().python_dumps();
        for ts in ["1001", "1001.0", "1.001e3", "1001E0", "100100e-2"] {
            let r = row.replace("\"ts\": 1001.0", &format!("\"ts\": {ts}"));
            let fast = entry_from_row(&r).unwrap_or_else(|| panic!("not read fast: {r}"));
            assert_eq!(Some(fast), general(&r), "{r}");
        }
    }

    #[test]
    fn anything_else_is_left_to_the_general_parser() {
        let e = entry("x", 1001.0, Some(2));
        let row = e.to_value().python_dumps();
        let edits: [(&str, &str); 16] = [
            ("\"ts\": 1001.0", "\"ts\": -1001.0"),
            ("\"ts\": 1001.0", "\"ts\": 01001.0"),
            ("\"ts\": 1001.0", "\"ts\": 1001."),
            ("\"ts\": 1001.0", "\"ts\": 1001e"),
            ("\"ts\": 1001.0", "\"ts\": NaN"),
            ("\"ts\": 1001.0", "\"ts\": Infinity"),
            ("\"seq\": 0", "\"seq\": 00"),
            ("\"seq\": 0", "\"seq\": 99999999999999999999"),
            ("\"causal_parent\": 2", "\"causal_parent\": -2"),
            ("\"causal_parent\": 2", "\"causal_parent\": 2.0"),
            ("\"actor\": \"x\"", "\"actor\": \"\\u0078\""),
            ("\"actor\": \"x\"", "\"actor\":\"x\""),
            ("\"kind\": \"note\"", "\"kind\": 5"),
            ("}", ", \"extra\": 1}"),
            ("}", "} "),
            ("{\"seq\"", "{ \"seq\""),
        ];
        for (from, to) in edits {
            assert!(row.contains(from), "{from}");
            let r = row.replacen(from, to, 1);
            assert_eq!(entry_from_row(&r), None, "read fast: {r}");
        }
        // An upper-case hash is no ledger hash.
        let r = row.replacen(&e.entry_hash, &e.entry_hash.to_uppercase(), 1);
        assert_eq!(entry_from_row(&r), None);
        assert_eq!(entry_from_row(""), None);
    }

    /// What the general path reads from a payload row: its hash and its body's canonical
    /// bytes, when the body's keys are sorted (as the fast path requires).
    fn general_payload(line: &str) -> Option<(String, String)> {
        let v = canonical::parse(line).ok()?;
        let h = v.get("hash")?.as_str()?.to_string();
        Some((h, v.get("body")?.canonical()))
    }

    #[test]
    fn a_plain_payload_row_reads_as_the_general_parser_reads_it() {
        let h = "ab".repeat(32);
        for body in [
            r#"{"i": "7", "text": "entry 7 of the bench ledger"}"#,
            r#"{}"#,
            r#"[]"#,
            r#""x""#,
            r#"0"#,
            r#"-12"#,
            r#"123456789012345678901234567890"#,
            r#"{"a": [1, -2, true, false, null, {"b": {}, "c": []}], "z": "~ /'"}"#,
            r#"[[[[1]]], "", {"": 0, "a": null}]"#,
        ] {
            let row = format!("{{\"hash\": \"{h}\", \"body\": {body}}}");
            let mut c = String::from("kept");
            let got = payload_from_row(&row, Some(&mut c)).unwrap_or_else(|| panic!("{row}"));
            let (gh, gc) = general_payload(&row).unwrap();
            assert_eq!((got, &c[4..]), (gh.as_str(), gc.as_str()), "{row}");
            assert_eq!(payload_from_row(&row, None), Some(h.as_str()));
        }
    }

    #[test]
    fn any_other_payload_row_is_left_to_the_general_parser() {
        let h = "cd".repeat(32);
        for body in [
            r#"{"b": 1, "a": 2}"#,
            r#"{"a": 1, "a": 2}"#,
            r#"1.5"#,
            r#"1e3"#,
            r#"-0"#,
            r#"01"#,
            r#""\u0041""#,
            r#""\n""#,
            "\"\u{e9}\"",
            r#"{"a":1}"#,
            r#"[1,2]"#,
            r#"NaN"#,
            r#"tru"#,
            r#"{"a": 1} "#,
        ] {
            let row = format!("{{\"hash\": \"{h}\", \"body\": {body}}}");
            let mut c = String::from("kept");
            assert_eq!(payload_from_row(&row, Some(&mut c)), None, "{row}");
            assert_eq!(c, "kept", "{row}");
        }
        let deep = format!("{}1{}", "[".repeat(70), "]".repeat(70));
        let row = format!("{{\"hash\": \"{h}\", \"body\": {deep}}}");
        assert_eq!(payload_from_row(&row, None), None);
        assert!(general_payload(&row).is_some());
        for row in [
            format!("{{\"body\": 1, \"hash\": \"{h}\"}}"),
            format!("{{\"hash\": \"{h}\", \"body\": 1, \"x\": 2}}"),
            format!("{{\"hash\":\"{h}\", \"body\": 1}}"),
            String::new(),
        ] {
            assert_eq!(payload_from_row(&row, None), None, "{row}");
        }
    }
}
