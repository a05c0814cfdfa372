//! The daemon's flight-recorder routes, `POST /import-trace` and `POST /mine`: a trace in the
//! body (`trace`: the events as JSON; or `text`: the trace's text, any format) folded by the
//! surface.
//! They only report; writing a trace as a ledger is the CLI's `import-trace --ledger NAME`.

use super::*;

impl Dispatcher {
    /// The body's `trace` with its numbers as sent (from the raw body when there is one), its
    /// format, and `min_checks`.
    fn trace_args(
        req: &Request<'_>,
        extra: &[&str],
    ) -> Result<(String, String, Option<u64>), Reply> {
        let mut allowed = vec!["trace", "text", "format"];
        allowed.extend_from_slice(extra);
        let a = Args::new(req.body, &allowed)?;
        let format = a.str("format")?.unwrap_or("generic").to_string();
        let min_checks = if extra.contains(&"min_checks") {
            a.int("min_checks")?
        } else {
            None
        };
        let exact = req
            .raw
            .and_then(|raw| std::str::from_utf8(raw).ok())
            .and_then(|t| canonical::parse(t).ok())
            .and_then(|v| v.get("trace").cloned());
        let text = match (a.get("trace"), a.str("text")?) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "give the trace once: \"trace\" (the events as JSON) or \"text\" (its text), not both",
                ));
            }
            (None, Some(t)) => t.to_string(),
            (Some(t), None) => {
                surface::flight::trace_text(&exact.unwrap_or_else(|| Value::from_serde(t)))
            }
            (None, None) => {
                return Err(bad(
                    "field \"trace\" (the events as JSON) or \"text\" (the trace's text) is required",
                ));
            }
        };
        Ok((text, format, min_checks))
    }

    pub(crate) fn import_trace(&self, req: &Request<'_>) -> Res {
        let (text, format, _) = Self::trace_args(req, &[])?;
        answer(
            surface::flight::format(&format).and_then(|f| surface::flight::import_trace(&text, f)),
        )
    }

    pub(crate) fn mine(&self, req: &Request<'_>) -> Res {
        let (text, format, min_checks) = Self::trace_args(req, &["min_checks"])?;
        answer(
            surface::flight::format(&format)
                .and_then(|f| surface::flight::mine(&text, f, min_checks.unwrap_or(2))),
        )
    }
}
