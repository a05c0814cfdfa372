//! The OpenAI-compatible chat executor: `POST {chat_url}` (the full endpoint URL, e.g.
//! `http://127.0.0.1:8080/v1/chat/completions`) through the SSRF-safe [`HttpClient`].
//!
//! The request carries `model`, `messages` (an optional system message and the prompt),
//! `temperature: 0`, an optional `max_tokens` and, for structured calls, an OpenAI
//! `response_format` of type `json_schema` (strict). The answer is
//! `choices[0].message.content`; the model is the response's `model` (else the configured
//! one) and the usage is `usage.prompt_tokens` / `usage.completion_tokens`.

use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};

use super::config::{ExecutorKind, ExecutorSpec, Metering, TokenCount};
use super::http::{Auth, HttpClient, Key, Limits, Lookup, SystemLookup};
use super::{Call, ExecError, Executor, OutputSchema, Reply, Usage};

/// What a missing answer is reported as.
const ANSWER_PATH: &str = "choices[0].message.content";

/// An executor for an OpenAI-compatible `/v1/chat/completions` endpoint.
pub struct ChatExecutor {
    http: HttpClient,
    model: String,
    key_env: Option<String>,
    describe: String,
    metering: Metering,
    /// The server's own count of a prompt (`count_tokens`), when configured.
    counter: Option<Counter>,
}

/// llama.cpp's two endpoints beside the chat endpoint that count a prompt exactly: the chat
/// template applied to the messages, then the tokens of the result. The server charges a call
/// exactly that many prompt tokens (a schema becomes a grammar, not prompt text), so a
/// reservation made from it is the call's real prompt cost rather than one token per byte,
/// which is about four times too much for English text and code.
struct Counter {
    template: HttpClient,
    tokenize: HttpClient,
}

/// How long a count may take; a count that fails or is late falls back to the byte bound.
const COUNT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// The largest answer a count reads: the templated prompt, or its token ids (a few bytes each).
const COUNT_MAX_BYTES: u64 = 64 << 20;

impl Counter {
    /// The endpoints at the chat URL's origin, under the same policy as the chat endpoint.
    fn new(url: &str, spec: &ExecutorSpec, lookup: &Arc<dyn Lookup>) -> Result<Counter, ExecError> {
        let at = |path: &str| -> Result<HttpClient, ExecError> {
            let mut u =
                reqwest::Url::parse(url).map_err(|e| ExecError::Refused(format!("{url}: {e}")))?;
            u.set_path(path);
            u.set_query(None);
            u.set_fragment(None);
            let limits = Limits {
                timeout: COUNT_TIMEOUT.min(Limits::from_spec(spec).timeout),
                max_response_bytes: COUNT_MAX_BYTES,
            };
            HttpClient::new(u.as_str(), spec.policy(), limits, lookup.clone())
        };
        Ok(Counter {
            template: at("/apply-template")?,
            tokenize: at("/tokenize")?,
        })
    }

    /// The prompt tokens of `messages` by the server's count, or `None` when it cannot tell.
    fn count(&self, messages: &Value) -> Option<u64> {
        let body = self
            .template
            .post_json(&[], None, &json!({"messages": messages}))
            .ok()?
            .body;
        let v: Value = serde_json::from_slice(&body).ok()?;
        let prompt = v["prompt"].as_str()?;
        let body = self
            .tokenize
            .post_json(&[], None, &json!({"content": prompt, "add_special": true}))
            .ok()?
            .body;
        let v: Value = serde_json::from_slice(&body).ok()?;
        Some(v["tokens"].as_array()?.len() as u64)
    }
}

impl fmt::Debug for ChatExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatExecutor")
            .field("describe", &self.describe)
            .finish_non_exhaustive()
    }
}

impl ChatExecutor {
    /// The executor a chat spec describes. The URL is checked against the spec's policy here
    /// ([`ExecError::Refused`]); nothing is called and no key is read.
    pub fn from_spec(spec: &ExecutorSpec) -> Result<ChatExecutor, ExecError> {
        ChatExecutor::with_lookup(spec, Arc::new(SystemLookup))
    }

    /// Like [`ChatExecutor::from_spec`], with names resolved through `lookup` (which the
    /// connection-time check still vets).
    pub fn with_lookup(
        spec: &ExecutorSpec,
        lookup: Arc<dyn Lookup>,
    ) -> Result<ChatExecutor, ExecError> {
        let ExecutorKind::Chat { url, model, .. } = &spec.kind else {
            return Err(ExecError::Other(format!(
                "a {} executor is not a chat executor",
                spec.kind.name()
            )));
        };
        let counter = match spec.metering.count_tokens {
            Some(TokenCount::LlamaCpp) => Some(Counter::new(url, spec, &lookup)?),
            None => None,
        };
        let http = HttpClient::new(url, spec.policy(), Limits::from_spec(spec), lookup)?;
        let key_env = spec
            .key_env()
            .filter(|_| http.sends_key())
            .map(str::to_string);
        Ok(ChatExecutor {
            http,
            model: model.clone(),
            key_env,
            describe: spec.describe(),
            metering: spec.metering,
            counter,
        })
    }

    /// The messages of `call`: an optional system message and the prompt.
    fn messages(call: &Call<'_>) -> Value {
        let mut messages = Vec::new();
        if let Some(system) = call.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.push(json!({"role": "user", "content": call.prompt}));
        Value::Array(messages)
    }

    /// The JSON body sent for `call`.
    pub(crate) fn request_body(&self, call: &Call<'_>) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": ChatExecutor::messages(call),
            "temperature": 0,
        });
        if let Some(n) = call.max_tokens {
            body["max_tokens"] = json!(n);
        }
        if let Some(schema) = call.schema {
            body["response_format"] = response_format(schema);
        }
        body
    }

    fn parse(&self, body: &[u8]) -> Result<(String, String, Option<Usage>), ExecError> {
        let v = super::json_reply(self.http.display(), body)?;
        let content = &v["choices"][0]["message"]["content"];
        let text = match content {
            Value::String(s) => s.clone(),
            // Some servers answer with content parts.
            Value::Array(parts) if parts.iter().any(|p| p["text"].is_string()) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<String>(),
            _ => {
                return Err(ExecError::NoAnswer {
                    url: self.http.display().to_string(),
                    what: ANSWER_PATH,
                });
            }
        };
        let model = v["model"]
            .as_str()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or(&self.model)
            .to_string();
        let usage = v["usage"].as_object().map(|u| Usage {
            input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            estimated: false,
            truncated: false,
            over_reservation: None,
        });
        Ok((text.trim().to_string(), model, usage))
    }
}

/// The OpenAI `response_format` for a schema, with a name the API accepts
/// (`[A-Za-z0-9_-]{1,64}`).
fn response_format(schema: &OutputSchema) -> Value {
    let mut name: String = schema
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        name = "answer".into();
    }
    json!({
        "type": "json_schema",
        "json_schema": {"name": name, "strict": true, "schema": schema.schema},
    })
}

impl ChatExecutor {
    /// POSTs `body` with the bearer key of `key_env`, when one is configured.
    fn post(&self, body: &Value) -> Result<super::http::Answer, ExecError> {
        let key = match &self.key_env {
            Some(var) => Some(Key::from_env(var)?),
            None => None,
        };
        let auth = key.as_ref().map(|key| Auth {
            header: "authorization",
            scheme: Some("Bearer"),
            key,
        });
        self.http.post_json(&[], auth, body)
    }
}

impl Executor for ChatExecutor {
    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError> {
        let answer = self.post(&self.request_body(call))?;
        let (text, model, usage) = self.parse(&answer.body)?;
        Ok(Reply {
            text,
            model,
            usage,
            elapsed: answer.elapsed,
        })
    }

    fn model(&self) -> String {
        self.model.clone()
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn tool_chat(&self) -> Option<&dyn super::tool_chat::ToolChat> {
        Some(self)
    }
    fn metering(&self) -> Metering {
        self.metering
    }

    /// The server's own count when `count_tokens` names it and it answers; else the bytes.
    fn prompt_tokens_bound(&self, call: &Call<'_>) -> u64 {
        self.counter
            .as_ref()
            .and_then(|c| c.count(&ChatExecutor::messages(call)))
            .unwrap_or_else(|| super::bytes_bound(call))
    }
}

impl super::tool_chat::ToolChat for ChatExecutor {
    fn turn(
        &self,
        system: &str,
        messages: &[super::tool_chat::Msg],
        tools: &[super::tool_chat::ToolSpec],
        max_tokens: u32,
    ) -> Result<super::tool_chat::Turn, ExecError> {
        let body = super::tool_chat::openai_body(&self.model, system, messages, tools, max_tokens);
        let answer = self.post(&body)?;
        super::tool_chat::read_turn(
            &answer.body,
            self.http.display(),
            "choices[0].message",
            |v| super::tool_chat::openai_parse(v, &self.model),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::endpoint::Origin;

    fn spec(url: &str, is_local: bool, key: Option<&str>) -> ExecutorSpec {
        ExecutorSpec {
            kind: ExecutorKind::Chat {
                url: url.into(),
                model: "m".into(),
                api_key_env: key.map(str::to_string),
            },
            is_local,
            allow_private: false,
            timeout_seconds: 5,
            max_response_bytes: 4096,
            json_schema: false,
            origin: Origin::RepoConfig,
            verify: Default::default(),
            metering: Default::default(),
            env: None,
        }
    }

    #[test]
    fn body_has_the_openai_shape() {
        let e =
            ChatExecutor::from_spec(&spec("http://127.0.0.1:1/v1/chat/completions", true, None))
                .unwrap();
        let schema = OutputSchema {
            name: "plan v1".into(),
            schema: json!({"type": "object"}),
        };
        let call = Call {
            system: Some("be brief"),
            prompt: "hi",
            schema: Some(&schema),
            max_tokens: Some(9),
        };
        assert_eq!(
            e.request_body(&call),
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "hi"},
                ],
                "temperature": 0,
                "max_tokens": 9,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "plan_v1", "strict": true, "schema": {"type": "object"}},
                },
            })
        );
        assert_eq!(
            e.request_body(&Call::prompt("x")),
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0})
        );
    }

    #[test]
    fn answers_are_parsed() {
        let e =
            ChatExecutor::from_spec(&spec("http://127.0.0.1:1/v1/chat/completions", true, None))
                .unwrap();
        let (t, m, u) = e
            .parse(br#"{"model":"real","choices":[{"message":{"content":" ok "}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#)
            .unwrap();
        assert_eq!((t.as_str(), m.as_str()), ("ok", "real"));
        assert_eq!(
            u,
            Some(Usage {
                input_tokens: 3,
                output_tokens: 4,
                estimated: false,
                truncated: false,
                over_reservation: None,
            })
        );
        let (_, m, u) = e
            .parse(br#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#)
            .unwrap();
        assert_eq!((m.as_str(), u), ("m", None));
        for bad in [
            &br#"{"choices":[]}"#[..],
            br#"{"choices":[{"message":{"content":null}}]}"#,
            br#"[]"#,
        ] {
            let err = e.parse(bad).unwrap_err();
            assert_eq!(err.code(), "no_answer", "{err}");
        }
        assert_eq!(e.parse(b"{oops").unwrap_err().code(), "invalid_json");
    }

    #[test]
    fn is_local_never_sends_a_key() {
        let e = ChatExecutor::from_spec(&spec(
            "http://127.0.0.1:1/v1/chat/completions",
            true,
            Some("OPENAI_API_KEY"),
        ))
        .unwrap();
        assert!(e.key_env.is_none());
        let e = ChatExecutor::from_spec(&spec(
            "https://api.example.com/v1/chat/completions",
            false,
            Some("OPENAI_API_KEY"),
        ))
        .unwrap();
        assert_eq!(e.key_env.as_deref(), Some("OPENAI_API_KEY"));
    }

    #[test]
    fn refused_urls_fail_at_build() {
        for (url, local) in [
            ("http://127.0.0.1:8080/v1/chat/completions", false),
            ("http://10.0.0.1/v1/chat/completions", false),
            ("http://169.254.169.254/", false),
            ("https://api.example.com/v1/chat/completions", true),
        ] {
            let e = ChatExecutor::from_spec(&spec(url, local, None)).unwrap_err();
            assert_eq!(e.code(), "refused", "{url}: {e}");
        }
    }
}
