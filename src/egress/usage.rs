//! Reading the token usage out of a model's answer while it passes, whatever the protocol:
//!
//! * Anthropic Messages: `message_start` carries `message.usage.input_tokens` (and the cache
//!   counts), `message_delta` carries the running `usage.output_tokens` (and, lately, the input
//!   counts again); a non-streamed answer has `usage` at the top.
//! * the OpenAI Responses API: `response.completed` (or `response.incomplete`, `response.failed`)
//!   carries `response.usage` with `input_tokens` and `output_tokens`; a non-streamed answer has
//!   `usage` at the top.
//! * chat completions: the last chunk carries `usage` with `prompt_tokens` and
//!   `completion_tokens` (when the client asked for it), as does a non-streamed body.
//!
//! Each of these counts is a running total, so the reader keeps the largest value seen of each.
//! Anthropic's cache reads and writes are input the model was given and count as input.
//! A streamed answer (`text/event-stream`) is read event by event as the bytes arrive; any other
//! body is parsed once at its end. Nothing here does I/O.

use serde_json::Value;

/// The longest SSE line or non-streamed body kept for reading; longer ones are passed through
/// unread (a usage object is never that far from the start of its line).
pub const MAX_KEPT: usize = 8 * 1024 * 1024;

/// What was read from one answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Input tokens (prompt, cache reads and cache writes).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Whether any usage object was found at all.
    pub seen: bool,
}

impl Usage {
    /// Input and output together.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// Reads one answer's usage as its bytes pass.
#[derive(Debug, Clone)]
pub struct UsageReader {
    stream: bool,
    pending: Vec<u8>,
    overflow: bool,
    usage: Usage,
}

impl UsageReader {
    /// A reader for an answer whose `Content-Type` is `content_type`.
    pub fn new(content_type: Option<&str>) -> UsageReader {
        let stream =
            content_type.is_some_and(|c| c.to_ascii_lowercase().contains("text/event-stream"));
        UsageReader {
            stream,
            pending: Vec::new(),
            overflow: false,
            usage: Usage::default(),
        }
    }

    /// Reads the next bytes of the body.
    pub fn feed(&mut self, bytes: &[u8]) {
        if !self.stream {
            self.keep(bytes);
            return;
        }
        let mut rest = bytes;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            self.keep(&rest[..i]);
            let line = std::mem::take(&mut self.pending);
            if !std::mem::take(&mut self.overflow) {
                self.sse_line(&line);
            }
            rest = &rest[i + 1..];
        }
        self.keep(rest);
    }

    /// The usage read so far (from the complete lines of a stream; nothing yet of a body
    /// read whole).
    pub fn so_far(&self) -> Usage {
        self.usage
    }

    /// The usage read, after the last bytes.
    pub fn finish(mut self) -> Usage {
        let pending = std::mem::take(&mut self.pending);
        if !self.overflow {
            if self.stream {
                self.sse_line(&pending);
            } else if let Ok(v) = serde_json::from_slice::<Value>(&pending) {
                self.event(&v);
            }
        }
        self.usage
    }

    fn keep(&mut self, bytes: &[u8]) {
        if self.pending.len() + bytes.len() > MAX_KEPT {
            self.overflow = true;
            self.pending.clear();
        } else if !self.overflow {
            self.pending.extend_from_slice(bytes);
        }
    }

    fn sse_line(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.trim_ascii();
        if data.is_empty() || data == b"[DONE]" {
            return;
        }
        if let Ok(v) = serde_json::from_slice::<Value>(data) {
            self.event(&v);
        }
    }

    /// Takes the usage of one event or body: at its top, in `message` (Anthropic's
    /// `message_start`) or in `response` (the Responses API's final events).
    fn event(&mut self, v: &Value) {
        for u in [&v["usage"], &v["message"]["usage"], &v["response"]["usage"]] {
            if u.is_object() {
                self.take(u);
            }
        }
    }

    fn take(&mut self, u: &Value) {
        let n = |k: &str| u[k].as_u64();
        let input = match (n("input_tokens"), n("prompt_tokens")) {
            (None, None) => None,
            (a, b) => Some(
                a.or(b).unwrap_or(0)
                    + n("cache_creation_input_tokens").unwrap_or(0)
                    + n("cache_read_input_tokens").unwrap_or(0),
            ),
        };
        let output = n("output_tokens").or_else(|| n("completion_tokens"));
        if input.is_none() && output.is_none() {
            return;
        }
        self.usage.seen = true;
        self.usage.input_tokens = self.usage.input_tokens.max(input.unwrap_or(0));
        self.usage.output_tokens = self.usage.output_tokens.max(output.unwrap_or(0));
    }
}

/// The wire protocol of a request, from its path: it decides the shape of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// Anthropic Messages (`.../messages`).
    Anthropic,
    /// The OpenAI Responses API (`.../responses`).
    Responses,
    /// Chat completions (`.../chat/completions`), and anything else OpenAI-shaped.
    Chat,
}

impl Protocol {
    /// The protocol a request path belongs to.
    pub fn of_path(path: &str) -> Protocol {
        let p = path.split('?').next().unwrap_or(path).trim_end_matches('/');
        if p.ends_with("/messages") || p.ends_with("/messages/count_tokens") {
            Protocol::Anthropic
        } else if p.contains("/responses") {
            Protocol::Responses
        } else {
            Protocol::Chat
        }
    }

    /// The error body this protocol's clients read, saying `message`.
    pub fn error_body(self, message: &str) -> Value {
        match self {
            Protocol::Anthropic => serde_json::json!({
                "type": "error",
                "error": {"type": "billing_error", "message": message},
            }),
            Protocol::Responses | Protocol::Chat => serde_json::json!({
                "error": {
                    "message": message,
                    "type": "insufficient_quota",
                    "param": null,
                    "code": "insufficient_quota",
                },
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(content_type: &str, body: &str, cut: usize) -> Usage {
        let mut r = UsageReader::new(Some(content_type));
        for piece in body.as_bytes().chunks(cut) {
            r.feed(piece);
        }
        r.finish()
    }

    const ANTHROPIC: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":600,\"cache_read_input_tokens\":40,\"output_tokens\":1}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":300}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    const RESPONSES: &str = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":500,\"output_tokens\":200,\"total_tokens\":700}}}\n\n";
    const CHAT: &str = "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\r\n\r\ndata: {\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":70,\"completion_tokens\":30}}\r\n\r\ndata: [DONE]\r\n\r\n";

    #[test]
    fn each_protocol_is_read_from_a_stream_cut_anywhere() {
        for cut in [1, 7, 64, 10_000] {
            let a = read("text/event-stream; charset=utf-8", ANTHROPIC, cut);
            assert_eq!((a.input_tokens, a.output_tokens, a.seen), (640, 300, true));
            let r = read("text/event-stream", RESPONSES, cut);
            assert_eq!((r.input_tokens, r.output_tokens), (500, 200));
            let c = read("text/event-stream", CHAT, cut);
            assert_eq!((c.input_tokens, c.output_tokens), (70, 30));
        }
    }

    #[test]
    fn bodies_are_read_whole_and_no_usage_is_not_seen() {
        let body = r#"{"id":"x","object":"chat.completion","usage":{"prompt_tokens":9,"completion_tokens":4}}"#;
        let u = read("application/json", body, 3);
        assert_eq!((u.input_tokens, u.output_tokens, u.total()), (9, 4, 13));
        let none = read("application/json", r#"{"data":[]}"#, 5);
        assert!(!none.seen);
        assert!(!read("text/plain", "not json", 2).seen);
    }

    #[test]
    fn the_protocol_comes_from_the_path_and_shapes_the_refusal() {
        assert_eq!(
            Protocol::of_path("/v1/messages?beta=true"),
            Protocol::Anthropic
        );
        assert_eq!(Protocol::of_path("/v1/responses"), Protocol::Responses);
        assert_eq!(Protocol::of_path("/v1/chat/completions"), Protocol::Chat);
        let a = Protocol::Anthropic.error_body("over");
        assert_eq!(a["error"]["message"], "over");
        assert_eq!(
            Protocol::Chat.error_body("over")["error"]["code"],
            "insufficient_quota"
        );
    }
}
