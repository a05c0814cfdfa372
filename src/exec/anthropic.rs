//! The Anthropic Messages API executor: `POST` [`ANTHROPIC_URL`] through the SSRF-safe
//! [`HttpClient`], with the key in `x-api-key` and `anthropic-version: 2023-06-01`.
//!
//! The body carries `model`, `max_tokens` (the call's, else [`DEFAULT_MAX_TOKENS`]), the
//! optional `system` text and one user message. A structured call puts the schema
//! instruction into that message (the prompt as [`Call::flattened`] writes it, without the
//! system text, which goes in `system`), and a reply wrapped in a Markdown code fence is
//! unwrapped. The answer is the text blocks of `content[]`, joined; the model and
//! `usage.input_tokens` / `usage.output_tokens` come from the response.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::config::{ANTHROPIC_URL, ExecutorKind, ExecutorSpec, Metering};
use super::endpoint::Policy;
use super::http::{Auth, HttpClient, Key, Limits, SystemLookup};
use super::{Call, ExecError, Executor, Reply, Usage};

/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` when the call sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// An executor for the Anthropic Messages API.
pub struct AnthropicExecutor {
    http: HttpClient,
    model: String,
    key_env: String,
    describe: String,
    metering: Metering,
}

impl fmt::Debug for AnthropicExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicExecutor")
            .field("describe", &self.describe)
            .finish_non_exhaustive()
    }
}

/// The variable that moves the Messages API elsewhere (a gateway, a proxy, a test's stub),
/// named as Anthropic's own SDKs name it: its value is a base URL, `/v1/messages` is added.
pub(crate) const BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";

/// Where `api = "anthropic"` executors send their calls: [`ANTHROPIC_URL`], or the Messages
/// endpoint under `$ANTHROPIC_BASE_URL` when it is set (the endpoint policy still vets it).
pub(crate) fn messages_url() -> String {
    match std::env::var(BASE_URL_ENV) {
        Ok(base) if !base.trim().is_empty() => {
            format!("{}/v1/messages", base.trim().trim_end_matches('/'))
        }
        _ => ANTHROPIC_URL.to_string(),
    }
}

impl AnthropicExecutor {
    /// The executor an `api = "anthropic"` spec describes, calling [`messages_url`]. Nothing
    /// is called and no key is read here.
    pub(crate) fn from_spec(spec: &ExecutorSpec) -> Result<AnthropicExecutor, ExecError> {
        let ExecutorKind::Anthropic { model, api_key_env } = &spec.kind else {
            return Err(ExecError::Other(format!(
                "a {} executor is not an anthropic executor",
                spec.kind.name()
            )));
        };
        let mut e = AnthropicExecutor::build(
            &messages_url(),
            model,
            api_key_env,
            spec.policy(),
            Limits::from_spec(spec),
        )?;
        e.describe = spec.describe();
        e.metering = spec.metering;
        Ok(e)
    }

    /// An executor for a Messages API at `url` (a fake server in tests, a gateway), checked
    /// against `policy`; the key is read from `key_env` at each call.
    pub fn with_url(
        url: &str,
        model: &str,
        key_env: &str,
        policy: Policy,
        timeout: Duration,
        max_response_bytes: u64,
    ) -> Result<AnthropicExecutor, ExecError> {
        AnthropicExecutor::build(
            url,
            model,
            key_env,
            policy,
            Limits {
                timeout,
                max_response_bytes,
            },
        )
    }

    fn build(
        url: &str,
        model: &str,
        key_env: &str,
        policy: Policy,
        limits: Limits,
    ) -> Result<AnthropicExecutor, ExecError> {
        let http = HttpClient::new(url, policy, limits, Arc::new(SystemLookup))?;
        let describe = format!(
            "anthropic: {} model {model}, key from ${key_env}",
            http.display()
        );
        Ok(AnthropicExecutor {
            http,
            model: model.to_string(),
            key_env: key_env.to_string(),
            describe,
            metering: Metering::default(),
        })
    }

    /// The JSON body sent for `call`.
    pub(crate) fn request_body(&self, call: &Call<'_>) -> Value {
        let content = Call {
            system: None,
            ..*call
        }
        .flattened();
        let mut body = json!({
            "model": self.model,
            "max_tokens": call.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": [{"role": "user", "content": content}],
        });
        if let Some(system) = call.system {
            body["system"] = json!(system);
        }
        body
    }

    fn parse(&self, body: &[u8], structured: bool) -> Result<Reply, ExecError> {
        let v = super::json_reply(self.http.display(), body)?;
        let texts: Vec<&str> = v["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        if texts.is_empty() {
            return Err(ExecError::NoAnswer {
                url: self.http.display().to_string(),
                what: "content[].text",
            });
        }
        let mut text = texts.concat().trim().to_string();
        if structured {
            text = unfence(&text).to_string();
        }
        let model = v["model"]
            .as_str()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or(&self.model)
            .to_string();
        let usage = v["usage"].as_object().map(|u| Usage {
            input_tokens: u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
            estimated: false,
            truncated: false,
            over_reservation: None,
        });
        Ok(Reply {
            text,
            model,
            usage,
            elapsed: Duration::ZERO,
        })
    }
}

/// The inside of a reply that is one Markdown code fence (```` ```json ... ``` ````), else
/// the reply.
fn unfence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(inner) = rest.strip_suffix("```") else {
        return text;
    };
    match inner.find('\n') {
        // The first line is the language tag (possibly empty).
        Some(nl) if !inner[..nl].contains(['{', '[']) => inner[nl + 1..].trim(),
        _ => inner.trim(),
    }
}

impl AnthropicExecutor {
    /// POSTs `body` with the API version header and the key (when the endpoint is sent one).
    fn post(&self, body: &Value) -> Result<super::http::Answer, ExecError> {
        let key = if self.http.sends_key() {
            Some(Key::from_env(&self.key_env)?)
        } else {
            None
        };
        let auth = key.as_ref().map(|key| Auth {
            header: "x-api-key",
            scheme: None,
            key,
        });
        self.http
            .post_json(&[("anthropic-version", ANTHROPIC_VERSION)], auth, body)
    }
}

impl Executor for AnthropicExecutor {
    fn call(&self, call: &Call<'_>) -> Result<Reply, ExecError> {
        let answer = self.post(&self.request_body(call))?;
        let mut reply = self.parse(&answer.body, call.schema.is_some())?;
        reply.elapsed = answer.elapsed;
        Ok(reply)
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
}

impl super::tool_chat::ToolChat for AnthropicExecutor {
    fn turn(
        &self,
        system: &str,
        messages: &[super::tool_chat::Msg],
        tools: &[super::tool_chat::ToolSpec],
        max_tokens: u32,
    ) -> Result<super::tool_chat::Turn, ExecError> {
        let body =
            super::tool_chat::anthropic_body(&self.model, system, messages, tools, max_tokens);
        let answer = self.post(&body)?;
        super::tool_chat::read_turn(&answer.body, self.http.display(), "content[]", |v| {
            super::tool_chat::anthropic_parse(v, &self.model)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::OutputSchema;
    use crate::exec::endpoint::Origin;

    fn exec() -> AnthropicExecutor {
        AnthropicExecutor::with_url(
            "http://127.0.0.1:1/v1/messages",
            "claude-test",
            "ANTHROPIC_API_KEY",
            Policy::strict(Origin::CommandLine),
            Duration::from_secs(5),
            4096,
        )
        .unwrap()
    }

    #[test]
    fn from_spec_targets_the_real_api() {
        let spec = ExecutorSpec {
            kind: ExecutorKind::Anthropic {
                model: "claude-x".into(),
                api_key_env: "ANTHROPIC_API_KEY".into(),
            },
            is_local: false,
            allow_private: false,
            timeout_seconds: 120,
            max_response_bytes: 1 << 20,
            json_schema: false,
            origin: Origin::RepoConfig,
            verify: Default::default(),
            metering: Default::default(),
            env: None,
        };
        let e = AnthropicExecutor::from_spec(&spec).unwrap();
        assert_eq!(e.http.display(), ANTHROPIC_URL);
        assert_eq!(e.model(), "claude-x");
        assert_eq!(e.describe(), spec.describe());
    }

    #[test]
    fn body_and_schema_instruction() {
        let e = exec();
        let schema = OutputSchema {
            name: "verdict".into(),
            schema: json!({"type": "object", "required": ["ok"]}),
        };
        let call = Call {
            system: Some("sys"),
            prompt: "judge this",
            schema: Some(&schema),
            max_tokens: None,
        };
        let b = e.request_body(&call);
        assert_eq!(b["model"], "claude-test");
        assert_eq!(b["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(b["system"], "sys");
        let content = b["messages"][0]["content"].as_str().unwrap();
        assert!(content.starts_with("judge this"), "{content}");
        assert!(content.contains(r#""required":["ok"]"#), "{content}");
        assert!(!content.contains("sys"), "{content}");
        let b = e.request_body(&Call {
            max_tokens: Some(10),
            ..Call::prompt("p")
        });
        assert_eq!(
            b,
            json!({"model": "claude-test", "max_tokens": 10, "messages": [{"role": "user", "content": "p"}]})
        );
    }

    #[test]
    fn replies_are_parsed() {
        let e = exec();
        let r = e
            .parse(
                br#"{"model":"claude-real","content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"a"},{"type":"text","text":"b"}],"usage":{"input_tokens":7,"output_tokens":2}}"#,
                false,
            )
            .unwrap();
        assert_eq!((r.text.as_str(), r.model.as_str()), ("ab", "claude-real"));
        assert_eq!(
            r.usage,
            Some(Usage {
                input_tokens: 7,
                output_tokens: 2,
                estimated: false,
                truncated: false,
                over_reservation: None,
            })
        );
        let r = e
            .parse(
                b"{\"content\":[{\"type\":\"text\",\"text\":\"```json\\n{\\\"ok\\\":true}\\n```\"}]}",
                true,
            )
            .unwrap();
        assert_eq!(
            (r.text.as_str(), r.model.as_str()),
            ("{\"ok\":true}", "claude-test")
        );
        assert_eq!(
            e.parse(br#"{"content":[]}"#, false).unwrap_err().code(),
            "no_answer"
        );
        assert_eq!(e.parse(b"nope", false).unwrap_err().code(), "invalid_json");
    }

    #[test]
    fn unfence_only_unwraps_whole_fences() {
        assert_eq!(unfence("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(unfence("```\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(unfence("```{\"a\":1}```"), "{\"a\":1}");
        assert_eq!(unfence("{\"a\":1}"), "{\"a\":1}");
        assert_eq!(unfence("text ```x```"), "text ```x```");
    }
}
