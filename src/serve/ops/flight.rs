//! The daemon's flight-recorder routes, `POST /import-trace` and `POST /mine`: a trace in the
//! body (`trace`: the events as JSON; or `text`: the trace's text, any format) folded by the
//! surface.
//! They only report; writing a trace as a ledger is the CLI's `import-trace --ledger NAME`.

use super::*;
use crate::surface::request;

impl Dispatcher {
    /// The body's `trace` with its numbers as sent (from the raw body when there is one), its
    /// format, and `min_checks`.
    /// The trace's text: `text` as given, or the `trace` events (read exactly from the raw
    /// body over HTTP) as text.
    fn trace_text(req: &Request<'_>, t: &request::reports::Trace) -> String {
        let exact = req
            .raw
            .and_then(|raw| std::str::from_utf8(raw).ok())
            .and_then(|t| canonical::parse(t).ok())
            .and_then(|v| v.get("trace").cloned());
        match (&t.trace, &t.text) {
            (_, Some(text)) => text.clone(),
            (Some(events), None) => {
                surface::flight::trace_text(&exact.unwrap_or_else(|| Value::from_serde(events)))
            }
            // Refused by the request's own check.
            (None, None) => String::new(),
        }
    }

    pub(crate) fn import_trace(&self, req: &Request<'_>) -> Res {
        let a: request::reports::ImportTrace = request::decode(req.body)?;
        let text = Self::trace_text(req, &a.trace);
        let format = a.trace.format.as_deref().unwrap_or("generic");
        answer(
            surface::flight::format(format).and_then(|f| surface::flight::import_trace(&text, f)),
        )
    }

    pub(crate) fn mine(&self, req: &Request<'_>) -> Res {
        let a: request::reports::Mine = request::decode(req.body)?;
        let text = Self::trace_text(req, &a.trace);
        let format = a.trace.format.as_deref().unwrap_or("generic");
        let min_checks = a.min_checks;
        answer(
            surface::flight::format(format)
                .and_then(|f| surface::flight::mine(&text, f, min_checks.unwrap_or(2))),
        )
    }
}
