//! Typed reading of a JSON request body (or an MCP tool's arguments): the body must be an
//! object, may only carry the fields the route names, and each field must have its type.
//! Every refusal is a 400 naming the field.

use serde_json::{Map, Value as J};

use super::dispatch::Reply;

/// The fields of one request body.
pub(crate) struct Args<'a> {
    map: &'a Map<String, J>,
}

fn bad(message: String) -> Reply {
    Reply::from(crate::surface::Error::usage(message))
}

fn type_name(v: &J) -> &'static str {
    match v {
        J::Null => "null",
        J::Bool(_) => "a boolean",
        J::Number(n) if n.is_f64() => "a float",
        J::Number(_) => "an integer",
        J::String(_) => "a string",
        J::Array(_) => "a list",
        J::Object(_) => "an object",
    }
}

impl<'a> Args<'a> {
    /// Checks that `body` is an object whose keys are all in `allowed`.
    pub(crate) fn new(body: &'a J, allowed: &[&str]) -> Result<Args<'a>, Reply> {
        let J::Object(map) = body else {
            return Err(bad(format!(
                "the request body must be a JSON object, not {}",
                type_name(body)
            )));
        };
        if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            let known = if allowed.is_empty() {
                "this route takes no fields".to_string()
            } else {
                format!("known fields: {}", allowed.join(", "))
            };
            return Err(bad(format!("unknown field {k:?} ({known})")));
        }
        Ok(Args { map })
    }

    /// The raw value of a field; `null` counts as absent.
    pub(crate) fn get(&self, key: &str) -> Option<&'a J> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// An optional string field.
    pub(crate) fn str(&self, key: &str) -> Result<Option<&'a str>, Reply> {
        match self.get(key) {
            None => Ok(None),
            Some(J::String(s)) => Ok(Some(s)),
            Some(v) => Err(bad(format!(
                "field {key:?} must be a string, not {}",
                type_name(v)
            ))),
        }
    }

    /// A required string field that is not blank.
    pub(crate) fn text(&self, key: &str) -> Result<&'a str, Reply> {
        match self.str(key)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(bad(format!("field {key:?} is empty"))),
            None => Err(bad(format!("field {key:?} is required"))),
        }
    }

    /// An optional non-negative integer field (a JSON integer: not a float, not a boolean).
    pub(crate) fn int(&self, key: &str) -> Result<Option<u64>, Reply> {
        match self.get(key) {
            None => Ok(None),
            Some(J::Number(n)) if n.is_u64() => Ok(n.as_u64()),
            Some(v) => Err(bad(format!(
                "field {key:?} must be a non-negative integer, not {}",
                type_name(v)
            ))),
        }
    }

    /// A required non-negative integer field.
    pub(crate) fn int_req(&self, key: &str) -> Result<u64, Reply> {
        self.int(key)?
            .ok_or_else(|| bad(format!("field {key:?} is required")))
    }

    /// An optional boolean field.
    pub(crate) fn bool(&self, key: &str) -> Result<Option<bool>, Reply> {
        match self.get(key) {
            None => Ok(None),
            Some(J::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(bad(format!(
                "field {key:?} must be true or false, not {}",
                type_name(v)
            ))),
        }
    }

    /// Whether a run (or a preflight) takes the repository as context, as the request says:
    /// `repo_context` (true or false), or the older `no_repo_context: true`; `None` when it
    /// says neither (the runtime config's `[context] repo` decides). The two disagreeing is
    /// refused.
    pub(crate) fn repo_choice(&self) -> Result<Option<bool>, Reply> {
        let on = self.bool("repo_context")?;
        let off = self.bool("no_repo_context")?;
        match (on, off) {
            (Some(a), Some(b)) if a == b => Err(bad(
                "fields \"repo_context\" and \"no_repo_context\" disagree: give only repo_context (true or false)"
                    .to_string(),
            )),
            (Some(a), _) => Ok(Some(a)),
            (None, Some(b)) => Ok(Some(!b)),
            (None, None) => Ok(None),
        }
    }

    /// An optional finite, non-negative number.
    pub(crate) fn seconds(&self, key: &str) -> Result<Option<f64>, Reply> {
        match self.get(key) {
            None => Ok(None),
            Some(J::Number(n)) => match n.as_f64() {
                Some(f) if f.is_finite() && f >= 0.0 => Ok(Some(f)),
                _ => Err(bad(format!(
                    "field {key:?} must be a number of seconds, 0 or more"
                ))),
            },
            Some(v) => Err(bad(format!(
                "field {key:?} must be a number, not {}",
                type_name(v)
            ))),
        }
    }

    /// An optional number (its range is the caller's to check).
    pub(crate) fn number(&self, key: &str) -> Result<Option<f64>, Reply> {
        match self.get(key) {
            None => Ok(None),
            Some(J::Number(n)) => Ok(n.as_f64()),
            Some(v) => Err(bad(format!(
                "field {key:?} must be a number, not {}",
                type_name(v)
            ))),
        }
    }

    /// An optional list of non-negative integers.
    pub(crate) fn ints(&self, key: &str) -> Result<Vec<u64>, Reply> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(J::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_u64().filter(|_| !v.is_f64()).ok_or_else(|| {
                        bad(format!(
                            "field {key:?} must be a list of non-negative integers"
                        ))
                    })
                })
                .collect(),
            Some(v) => Err(bad(format!(
                "field {key:?} must be a list, not {}",
                type_name(v)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_typed_and_unknown_ones_refused() {
        let body = json!({"a": "x", "n": 3, "f": 1.5, "b": true, "z": null, "l": [1, 2]});
        let all = ["a", "n", "f", "b", "z", "l", "missing"];
        let args = Args::new(&body, &all).unwrap();
        assert_eq!(args.text("a").unwrap(), "x");
        assert_eq!(args.int("n").unwrap(), Some(3));
        assert_eq!(args.int("z").unwrap(), None);
        assert_eq!(args.int("f").unwrap_err().status, 400);
        assert_eq!(args.int("b").unwrap_err().status, 400);
        assert_eq!(args.bool("b").unwrap(), Some(true));
        assert_eq!(args.seconds("f").unwrap(), Some(1.5));
        assert_eq!(args.ints("l").unwrap(), vec![1, 2]);
        assert!(args.text("missing").is_err());
        let e = Args::new(&body, &["a"]).err().unwrap();
        assert!(e.message().contains("unknown field"), "{e:?}");
        assert!(Args::new(&json!([1]), &[]).is_err());
        let neg = json!({"n": -1});
        assert!(Args::new(&neg, &["n"]).unwrap().int("n").is_err());
    }
}
