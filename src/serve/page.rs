//! Pages of entries for `/replay` (HTTP `?limit=&after=`, or the MCP tool's arguments): a
//! ledger of any length is read a bounded page at a time, so one request never builds more
//! than [`MAX_PAGE`] entries of JSON.

use serde_json::Value as J;

/// The most entries one page holds; a larger `limit` is cut to this.
#[cfg(test)]
use crate::surface::read::MAX_PAGE;

/// A query string that gives one field twice (which value would be meant is unclear).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("query field {0:?} is given twice")]
pub(super) struct TwiceGiven(String);

/// The fields of a query string (`limit=10&after=3`) as a JSON object for the route's typed request: digits
/// become integers, anything else stays a string (and is refused by the route's types). A
/// field given twice is refused.
pub(super) fn query_fields(query: &str) -> Result<J, TwiceGiven> {
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
            return Err(TwiceGiven(k.into_owned()));
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
        use crate::surface::request::{decode, ledger::Page};
        let page = |v: J| decode::<Page>(&v);
        assert_eq!(page(json!({})).unwrap().size(), MAX_PAGE);
        assert_eq!(page(json!({"limit": 5000})).unwrap().size(), MAX_PAGE);
        let p = page(json!({"limit": 7, "after": 3})).unwrap();
        assert_eq!((p.size(), p.after), (7, Some(3)));
        for bad in [
            json!({"limit": 0}),
            json!({"limit": -1}),
            json!({"after": "x"}),
        ] {
            let e = page(bad).unwrap_err();
            assert_eq!(e.class.http_status(), 400, "{e:?}");
        }
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
