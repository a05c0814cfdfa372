//! Pages of entries for `/replay` (HTTP `?limit=&after=`, or the MCP tool's arguments): a
//! ledger of any length is read a bounded page at a time, so one request never builds more
//! than [`MAX_PAGE`] entries of JSON.

use serde_json::{Value as J, json};

use super::args::Args;
use super::dispatch::Reply;
use crate::ledger::Entry;

/// The most entries one page holds; a larger `limit` is cut to this.
pub const MAX_PAGE: usize = 1000;

/// Which page: at most `limit` entries with a seq above `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Page {
    pub(crate) limit: usize,
    pub(crate) after: Option<u64>,
}

impl Page {
    /// Reads `limit` (1 or more; default and cap [`MAX_PAGE`]) and `after` (a seq).
    pub(crate) fn from_args(a: &Args<'_>) -> Result<Page, Reply> {
        let limit = match a.int("limit")? {
            None => MAX_PAGE,
            Some(0) => {
                return Err(Reply::from(crate::surface::Error::usage(format!(
                    "field \"limit\" must be at least 1 (at most {MAX_PAGE} per page)"
                ))));
            }
            Some(n) => usize::try_from(n).unwrap_or(MAX_PAGE).min(MAX_PAGE),
        };
        Ok(Page {
            limit,
            after: a.int("after")?,
        })
    }

    /// `{"entries": [...], "next": SEQ | null}` for `entries` (the whole range asked for, in
    /// seq order): `next` is the `after` that reads the following page, null on the last.
    pub(crate) fn of(&self, entries: &[Entry]) -> J {
        let start = match self.after {
            None => 0,
            Some(a) => entries.partition_point(|e| e.seq <= a),
        };
        let end = entries.len().min(start.saturating_add(self.limit));
        let page = &entries[start..end];
        let next = match page.last() {
            Some(last) if end < entries.len() => J::from(last.seq),
            _ => J::Null,
        };
        json!({
            "entries": page.iter().map(Entry::to_json).collect::<Vec<_>>(),
            "next": next,
        })
    }
}

/// The fields of a query string (`limit=10&after=3`) as a JSON object for [`Args`]: digits
/// become integers, anything else stays a string (and is refused by the route's types). A
/// field given twice is refused.
pub fn query_fields(query: &str) -> Result<J, String> {
    let mut map = serde_json::Map::new();
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        if k.is_empty() {
            continue;
        }
        let value = match v.parse::<u64>() {
            Ok(n) if !v.starts_with('+') => J::from(n),
            _ => J::String(v.clone().into_owned()),
        };
        if map.insert(k.clone().into_owned(), value).is_some() {
            return Err(format!("query field {k:?} is given twice"));
        }
    }
    Ok(J::Object(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: u64) -> Vec<Entry> {
        (0..n)
            .map(|seq| Entry {
                seq,
                ts: 1.0,
                actor: "a".into(),
                kind: "k".into(),
                causal_parent: None,
                payload_hash: "0".repeat(64),
                prev_hash: "0".repeat(64),
                entry_hash: format!("{seq:064}"),
            })
            .collect()
    }

    fn seqs(v: &J) -> Vec<u64> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    }

    #[test]
    fn pages_walk_the_range_and_end_with_null() {
        let all = entries(7);
        let p = Page {
            limit: 3,
            after: None,
        };
        let first = p.of(&all);
        assert_eq!(
            (seqs(&first), first["next"].clone()),
            (vec![0, 1, 2], J::from(2))
        );
        let second = Page {
            after: Some(2),
            ..p
        }
        .of(&all);
        assert_eq!(
            (seqs(&second), second["next"].clone()),
            (vec![3, 4, 5], J::from(5))
        );
        let last = Page {
            after: Some(5),
            ..p
        }
        .of(&all);
        assert_eq!((seqs(&last), last["next"].clone()), (vec![6], J::Null));
        let past = Page {
            after: Some(99),
            ..p
        }
        .of(&all);
        assert_eq!((seqs(&past), past["next"].clone()), (vec![], J::Null));
        let exact = Page {
            limit: 7,
            after: None,
        }
        .of(&all);
        assert_eq!(exact["next"], J::Null);
    }

    #[test]
    fn the_limit_is_capped_and_zero_is_refused() {
        let fields = ["limit", "after"];
        let page = |v: J| Page::from_args(&Args::new(&v, &fields).unwrap());
        assert_eq!(page(json!({})).unwrap().limit, MAX_PAGE);
        assert_eq!(page(json!({"limit": 5000})).unwrap().limit, MAX_PAGE);
        assert_eq!(
            page(json!({"limit": 7, "after": 3})).unwrap(),
            Page {
                limit: 7,
                after: Some(3)
            }
        );
        assert_eq!(page(json!({"limit": 0})).unwrap_err().status, 400);
        assert_eq!(page(json!({"limit": -1})).unwrap_err().status, 400);
        assert_eq!(page(json!({"after": "x"})).unwrap_err().status, 400);
    }

    #[test]
    fn query_strings_become_fields() {
        assert_eq!(
            query_fields("limit=10&after=3").unwrap(),
            json!({"limit": 10, "after": 3})
        );
        assert_eq!(query_fields("limit=x").unwrap(), json!({"limit": "x"}));
        assert_eq!(query_fields("limit=-1").unwrap(), json!({"limit": "-1"}));
        assert_eq!(query_fields("limit=%2B1").unwrap(), json!({"limit": "+1"}));
        assert_eq!(query_fields("").unwrap(), json!({}));
        assert!(query_fields("limit=1&limit=2").is_err());
    }
}
