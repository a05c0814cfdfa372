//! Pages of entries for `/replay` (HTTP `?limit=&after=`, or the MCP tool's arguments): a
//! ledger of any length is read a bounded page at a time, so one request never builds more
//! than [`MAX_PAGE`] entries of JSON.

use serde_json::Value as J;

use super::args::Args;
use super::dispatch::Reply;

/// The most entries one page holds; a larger `limit` is cut to this.
pub(crate) use crate::surface::read::MAX_PAGE;

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
}

/// The fields of a query string (`limit=10&after=3`) as a JSON object for [`Args`]: digits
/// become integers, anything else stays a string (and is refused by the route's types). A
/// field given twice is refused.
pub(super) fn query_fields(query: &str) -> Result<J, String> {
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
    use serde_json::json;

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
