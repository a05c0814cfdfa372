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

fn take(rest: &mut &str, lit: &str) -> Option<()> {
    *rest = rest.strip_prefix(lit)?;
    Some(())
}

/// A string as the general parser reads it when it holds no escape: the raw text.
fn string<'a>(rest: &mut &'a str) -> Option<&'a str> {
    let body = rest.strip_prefix('"')?;
    let end = body.find('"')?;
    let s = &body[..end];
    if s.bytes().any(|b| b < 0x20 || b == b'\\') {
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
}
