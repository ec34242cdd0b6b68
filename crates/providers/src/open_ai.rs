//! The OpenAI Chat Completions client (`POST {base}/chat/completions`, streamed;
//! `GET {base}/models`), for OpenAI and every server that copies its API: Ollama, llama.cpp's
//! llama-server, vLLM, LM Studio, DeepSeek, OpenRouter, Groq, Mistral, Gemini's
//! OpenAI-compatible endpoint.
//!
//! Owns that wire format and the quirks of its copies: an assistant message always carries
//! `content: ""` (llama.cpp answers HTTP 500 to `null`), system blocks are joined into one
//! system message (some chat templates accept only one), tool-call deltas without an
//! `index` are placed by their `id`, `finish_reason: "stop"` after tool calls still means
//! tool use, a body that ends after a `finish_reason` without `data: [DONE]` is complete,
//! `usage` may never come (llama.cpp's `timings` stand in, and say what its cache reused),
//! and `tool_choice` is never sent (servers ignore or reject its object form). Tools can
//! also go as a JSON schema the reply must match ([`crate::constrained`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::constrained::{self, ReplyDecoder};
use crate::error::{Api, ProviderError};
use crate::http::{self, ApiKey, Call, HttpConfig};
use crate::model::{
    Event, Message, ModelInfo, PartialToolCall, Request, StopReason, ToolCall, Usage,
};
use crate::sse::SseEvent;
use crate::stream::{self, Decoder, EventStream};

pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Where and how to reach the API.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Including the version path: `https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1` (Ollama),
    /// `https://generativelanguage.googleapis.com/v1beta/openai` (Gemini).
    pub base_url: String,
    /// Sent as `Authorization: Bearer …`; local servers usually need none.
    pub api_key: Option<ApiKey>,
    /// Sent with every request (e.g. OpenRouter's `HTTP-Referer`).
    pub extra_headers: Vec<(String, String)>,
    /// Ask for a final usage chunk (`stream_options.include_usage`). A few old servers reject
    /// the field; turn it off for them.
    pub include_usage: bool,
    pub http: HttpConfig,
}

impl OpenAiConfig {
    pub fn new(base_url: impl Into<String>, api_key: Option<ApiKey>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key,
            extra_headers: Vec::new(),
            include_usage: true,
            http: HttpConfig::default(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct OpenAiClient {
    config: OpenAiConfig,
    http: reqwest::Client,
}

impl OpenAiClient {
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let http = http::build_client(&config.http)?;
        Ok(OpenAiClient { config, http })
    }

    /// Send `request` and stream the reply.
    pub async fn stream(&self, request: &Request) -> Result<EventStream, ProviderError> {
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        let body = request_body(request, self.config.include_usage);
        let headers = self.headers()?;
        let call = Call {
            api: Api::OpenAi,
            url: &url,
            model: &request.model,
        };
        stream::post_sse(
            &self.http,
            &self.config.http,
            &call,
            &headers,
            body,
            OpenAiDecoder::for_request(request),
        )
        .await
    }

    /// The models the server offers.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let url = format!("{}/models", self.config.base_url.trim_end_matches('/'));
        let headers = self.headers()?;
        let call = Call {
            api: Api::OpenAi,
            url: &url,
            model: "",
        };
        let list: ModelList =
            http::get_json(&self.http, &self.config.http, &call, &headers).await?;
        Ok(list
            .data
            .into_iter()
            .map(|m| ModelInfo {
                id: m.id,
                display_name: None,
            })
            .collect())
    }

    pub(crate) fn base_url(&self) -> String {
        self.config.base_url.clone()
    }

    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// For a probe of the server (not a chat): quick to give up, never retried.
    pub(crate) fn probe_http(&self) -> HttpConfig {
        HttpConfig {
            read_timeout: std::time::Duration::from_secs(5),
            retry: crate::http::RetryPolicy {
                max_retries: 0,
                ..Default::default()
            },
            ..self.config.http.clone()
        }
    }

    pub(crate) fn probe_headers(&self) -> HeaderMap {
        self.headers().unwrap_or_default()
    }

    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.config.api_key {
            headers.insert(AUTHORIZATION, key.header("Bearer ")?);
        }
        for (name, value) in &self.config.extra_headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ProviderError::Config(format!("invalid header name `{name}`")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| ProviderError::Config(format!("invalid header value `{value}`")))?;
            headers.insert(name, value);
        }
        Ok(headers)
    }
}

#[derive(Deserialize)]
struct ModelList {
    data: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
}

// ---- the request -------------------------------------------------------------------------

/// The exact bytes sent for `request`: fixed field order, JSON values in the caller's key
/// order, so equal requests give equal bytes (prefix caches match byte for byte).
///
/// With [`Request::constrained_tools`], the tools go as `response_format` (and a menu at
/// the end of the system message) instead of `tools`.
pub fn request_body(request: &Request, include_usage: bool) -> Vec<u8> {
    let constrained = is_constrained(request);
    let mut messages = Vec::new();
    // The blocks after the last cached one change every request (the live state and its
    // nonce): they go after the history, so a server's prefix cache keeps the whole
    // conversation and only re-reads the newest message and this tail.
    let (head, tail) = request.split_system();
    let mut system: Vec<Cow<str>> = head
        .iter()
        .map(|b| Cow::Borrowed(b.text.as_str()))
        .collect();
    if constrained {
        system.push(Cow::Owned(constrained::instruction(&request.tools)));
    }
    if !system.is_empty() {
        messages.push(WireMessage::System {
            content: system.join("\n\n"),
        });
    }
    for message in &request.messages {
        messages.push(match message {
            Message::User { text } => WireMessage::User {
                content: Cow::Borrowed(text),
            },
            Message::Assistant { text, tool_calls } => WireMessage::Assistant {
                // Never `null`: llama.cpp's server answers 500 to it.
                content: text,
                tool_calls: tool_calls
                    .iter()
                    .map(|call| WireToolCall {
                        id: &call.id,
                        kind: "function",
                        function: WireFunctionCall {
                            name: &call.name,
                            // `preserve_order` keeps the model's own key order.
                            arguments: call.arguments.to_string(),
                        },
                    })
                    .collect(),
            },
            Message::ToolResult {
                call_id,
                content,
                is_error,
            } => WireMessage::Tool {
                tool_call_id: call_id,
                // The API has no error flag; say it in the content.
                content: if *is_error {
                    Cow::Owned(format!("Error: {content}"))
                } else {
                    Cow::Borrowed(content)
                },
            },
        });
    }
    if !tail.is_empty() {
        let tail: Vec<&str> = tail.iter().map(|b| b.text.as_str()).collect();
        append_tail(&mut messages, tail.join("\n\n"));
    }
    let wire = WireRequest {
        model: &request.model,
        messages,
        tools: request
            .tools
            .iter()
            .filter(|_| !constrained)
            .map(|tool| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.parameters,
                },
            })
            .collect(),
        response_format: constrained.then(|| constrained::response_format(&request.tools)),
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        stream: true,
        stream_options: include_usage.then_some(StreamOptions {
            include_usage: true,
        }),
    };
    serde_json::to_vec(&wire).expect("a request always serializes")
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

/// Puts the per-request context at the end of the last user or tool message (several chat
/// templates accept a system message only first, and none minds longer content); after an
/// assistant message, or with no history, it becomes a user message of its own.
fn append_tail(messages: &mut Vec<WireMessage<'_>>, tail: String) {
    match messages.last_mut() {
        Some(WireMessage::User { content }) => {
            *content = Cow::Owned(format!("{content}\n\n{tail}"));
        }
        Some(WireMessage::Tool { content, .. }) => {
            *content = Cow::Owned(format!("{content}\n\n{tail}"));
        }
        _ => messages.push(WireMessage::User {
            content: Cow::Owned(tail),
        }),
    }
}

/// Constrained calls need tools to constrain to; without any the request is a plain chat.
fn is_constrained(request: &Request) -> bool {
    request.constrained_tools && !request.tools.is_empty()
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: String,
    },
    User {
        content: Cow<'a, str>,
    },
    Assistant {
        content: &'a str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

// ---- the reply ---------------------------------------------------------------------------

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
    /// llama.cpp's own counts (`cache_n`: prompt tokens reused from its cache, `prompt_n`:
    /// prompt tokens it had to process), sent whether or not usage was asked for.
    timings: Option<Timings>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Timings {
    prompt_n: Option<u64>,
    cache_n: Option<u64>,
    predicted_n: Option<u64>,
}

#[derive(Deserialize)]
struct Choice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

/// A tool call being streamed.
#[derive(Default)]
struct OpenCall {
    id: String,
    name: String,
    arguments: String,
    /// Whether `ToolCallStart` went out (it waits for the name).
    started: bool,
}

#[derive(Default)]
struct OpenAiDecoder {
    /// Set for a constrained request: the content is the JSON reply, read by this.
    constrained: Option<ReplyDecoder>,
    calls: BTreeMap<usize, OpenCall>,
    /// The call the last index-less delta belonged to.
    last_index: Option<usize>,
    made_tool_calls: bool,
    finish: Option<StopReason>,
    done: bool,
}

impl OpenAiDecoder {
    /// A decoder for `request`'s reply.
    fn for_request(request: &Request) -> Self {
        OpenAiDecoder {
            constrained: is_constrained(request).then(|| ReplyDecoder::new(&request.tools)),
            ..OpenAiDecoder::default()
        }
    }

    #[cfg(test)]
    fn constrained_to(tools: &[crate::ToolDefinition]) -> Self {
        OpenAiDecoder {
            constrained: Some(ReplyDecoder::new(tools)),
            ..OpenAiDecoder::default()
        }
    }

    /// A constrained reply is complete: what its JSON meant goes out (a call, or the text
    /// not streamed yet), and the stop reason becomes tool use for a call.
    fn finish_constrained(&mut self, out: &mut VecDeque<Event>) -> Result<(), ProviderError> {
        if let Some(mut reply) = self.constrained.take() {
            let stop = reply.finish(self.finish.take(), out)?;
            if stop == StopReason::ToolUse {
                self.made_tool_calls = true;
            }
            self.finish = Some(stop);
        }
        Ok(())
    }

    fn tool_call_delta(&mut self, delta: DeltaToolCall, out: &mut VecDeque<Event>) {
        let index = match delta.index {
            Some(index) => index,
            // Some servers omit `index`: a new id starts a new call, no id continues the last.
            None => match (&delta.id, self.last_index) {
                (Some(id), Some(last)) if self.calls.get(&last).is_some_and(|c| &c.id == id) => {
                    last
                }
                (None, Some(last)) => last,
                _ => self.calls.keys().next_back().map_or(0, |k| k + 1),
            },
        };
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = delta.id.filter(|id| !id.is_empty()) {
            if call.id.is_empty() {
                call.id = id;
            }
        }
        let function = delta.function.unwrap_or(DeltaFunction {
            name: None,
            arguments: None,
        });
        if let Some(name) = function.name.filter(|n| !n.is_empty()) {
            if call.name.is_empty() {
                call.name = name;
            }
        }
        let fragment = function.arguments.unwrap_or_default();
        call.arguments.push_str(&fragment);
        if !call.started && !call.name.is_empty() {
            call.started = true;
            if call.id.is_empty() {
                call.id = format!("call_{index}");
            }
            out.push_back(Event::ToolCallStart {
                index,
                id: call.id.clone(),
                name: call.name.clone(),
            });
            // Arguments that came before the name go out now, in one piece.
            if !call.arguments.is_empty() {
                out.push_back(Event::ToolCallArgsDelta {
                    index,
                    delta: call.arguments.clone(),
                });
            }
        } else if call.started && !fragment.is_empty() {
            out.push_back(Event::ToolCallArgsDelta {
                index,
                delta: fragment,
            });
        }
    }

    /// The reply's tool calls are complete: parse and emit them in index order.
    fn finish_calls(&mut self, out: &mut VecDeque<Event>) -> Result<(), ProviderError> {
        while let Some((index, call)) = self.calls.pop_first() {
            if !call.started {
                return Err(ProviderError::Protocol {
                    api: Api::OpenAi,
                    detail: format!("tool call {index} never got a name"),
                    data: call.arguments,
                });
            }
            let arguments =
                stream::parse_arguments(Api::OpenAi, &call.id, &call.name, &call.arguments)?;
            out.push_back(Event::ToolCallEnd {
                index,
                call: ToolCall {
                    id: call.id,
                    name: call.name,
                    arguments,
                },
            });
        }
        Ok(())
    }

    fn stop(&mut self, out: &mut VecDeque<Event>) {
        let reason = self.finish.take().unwrap_or(StopReason::EndTurn);
        out.push_back(Event::Stop(reason));
        self.done = true;
    }
}

impl Decoder for OpenAiDecoder {
    fn api(&self) -> Api {
        Api::OpenAi
    }

    fn event(&mut self, event: SseEvent, out: &mut VecDeque<Event>) -> Result<(), ProviderError> {
        if event.data.trim() == "[DONE]" {
            self.finish_constrained(out)?;
            self.finish_calls(out)?;
            self.stop(out);
            return Ok(());
        }
        let chunk: Chunk =
            serde_json::from_str(&event.data).map_err(|e| ProviderError::Protocol {
                api: Api::OpenAi,
                detail: format!("bad chunk: {e}"),
                data: http::truncate(&event.data, 500),
            })?;
        if let Some(error) = chunk.error {
            let message = http::error_message(
                serde_json::to_vec(&serde_json::json!({ "error": error })).unwrap_or_default(),
            );
            let kind = error["type"]
                .as_str()
                .or(error["code"].as_str())
                .unwrap_or("error");
            return Err(ProviderError::Api {
                api: Api::OpenAi,
                kind: kind.to_owned(),
                message,
            });
        }
        // We ask for one choice; a server that sends more has its extras ignored.
        if let Some(choice) = chunk.choices.into_iter().next() {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    match &mut self.constrained {
                        Some(reply) => reply.push(&text, out),
                        None => out.push_back(Event::TextDelta(text)),
                    }
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.made_tool_calls = true;
                    self.tool_call_delta(call, out);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_calls(out)?;
                let stop = match reason.as_str() {
                    // Ollama and others say "stop" after tool calls.
                    "stop" if self.made_tool_calls => StopReason::ToolUse,
                    "stop" => StopReason::EndTurn,
                    "length" => StopReason::MaxTokens,
                    "tool_calls" | "function_call" => StopReason::ToolUse,
                    "content_filter" => StopReason::Refusal,
                    other => StopReason::Other(other.to_owned()),
                };
                self.finish = Some(stop);
                self.finish_constrained(out)?;
            }
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0);
            let mut counts = Usage {
                // `prompt_tokens` includes cached tokens; ours counts them apart, as Anthropic.
                input_tokens: usage.prompt_tokens.unwrap_or(0).saturating_sub(cached),
                output_tokens: usage.completion_tokens.unwrap_or(0),
                cache_read_tokens: cached,
                cache_creation_tokens: 0,
                ..Usage::default()
            };
            // llama.cpp's timings say what its cache reused even where usage does not.
            if let Some(Timings {
                prompt_n: Some(new),
                cache_n: Some(reused),
                ..
            }) = chunk.timings
            {
                counts.input_tokens = new;
                counts.cache_read_tokens = reused;
            }
            out.push_back(Event::Usage(counts));
        } else if let Some(timings) = chunk.timings.filter(|_| self.finish.is_some()) {
            // No usage chunk (not asked for, or a server that never sends one): the final
            // chunk's timings are the counts.
            out.push_back(Event::Usage(Usage {
                input_tokens: timings.prompt_n.unwrap_or(0),
                output_tokens: timings.predicted_n.unwrap_or(0),
                cache_read_tokens: timings.cache_n.unwrap_or(0),
                ..Usage::default()
            }));
        }
        Ok(())
    }

    fn end(&mut self, out: &mut VecDeque<Event>) -> bool {
        // Complete once a finish_reason came, even without `[DONE]` (some servers skip it).
        if self.finish.is_some() && self.calls.is_empty() {
            self.stop(out);
            return true;
        }
        false
    }

    fn done(&self) -> bool {
        self.done
    }

    fn partial_tool_calls(&self) -> Vec<PartialToolCall> {
        self.calls
            .iter()
            .map(|(&index, call)| PartialToolCall {
                index,
                id: call.id.clone(),
                name: call.name.clone(),
                raw_arguments: call.arguments.clone(),
            })
            // A constrained call is in the content, not in `tool_calls`.
            .chain(self.constrained.as_ref().and_then(ReplyDecoder::partial))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SystemBlock;
    use serde_json::json;

    #[test]
    fn assistant_content_is_never_null_and_per_request_blocks_follow_the_history() {
        let mut request = Request::new("m", 50);
        request.system = vec![SystemBlock::cached("a"), SystemBlock::new("b")];
        request.messages = vec![
            Message::user("hi"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "f".into(),
                    arguments: json!({"z": 1, "a": 2}),
                }],
            },
            Message::ToolResult {
                call_id: "c1".into(),
                content: "nope".into(),
                is_error: true,
            },
        ];
        let body: Value = serde_json::from_slice(&request_body(&request, false)).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "a"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"id": "c1", "type": "function",
                         "function": {"name": "f", "arguments": "{\"z\":1,\"a\":2}"}}
                    ]},
                    // The per-request block (after the cached one) follows the history.
                    {"role": "tool", "tool_call_id": "c1", "content": "Error: nope\n\nb"}
                ],
                "max_tokens": 50,
                "stream": true
            })
        );
    }

    fn decode(chunks: &[&str]) -> (Vec<Event>, Result<(), ProviderError>) {
        let mut decoder = OpenAiDecoder::default();
        decode_with(&mut decoder, chunks)
    }

    fn decode_with(
        decoder: &mut OpenAiDecoder,
        chunks: &[&str],
    ) -> (Vec<Event>, Result<(), ProviderError>) {
        let mut out = VecDeque::new();
        for data in chunks {
            let event = SseEvent {
                event: String::new(),
                data: (*data).into(),
            };
            if let Err(e) = decoder.event(event, &mut out) {
                return (out.into(), Err(e));
            }
        }
        (out.into(), Ok(()))
    }

    #[test]
    fn index_less_tool_calls_are_told_apart_by_id() {
        let (events, result) = decode(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        result.unwrap();
        let ends: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::ToolCallEnd { index, call } => {
                    Some((*index, call.id.clone(), call.arguments.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            ends,
            vec![(0, "a".into(), json!({})), (1, "b".into(), json!({"x": 1}))]
        );
        assert_eq!(events.last(), Some(&Event::Stop(StopReason::ToolUse)));
    }

    #[test]
    fn error_chunk_becomes_an_api_error() {
        let (_, result) =
            decode(&[r#"{"error":{"message":"model overloaded","type":"server_error"}}"#]);
        match result {
            Err(ProviderError::Api { kind, message, .. }) => {
                assert_eq!(
                    (kind.as_str(), message.as_str()),
                    ("server_error", "model overloaded")
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_constrained_request_offers_the_tools_as_a_schema_and_a_menu() {
        let mut request = Request::new("m", 50);
        request.system = vec![SystemBlock::cached("role")];
        request.messages = vec![Message::user("add Battery")];
        request.tools = vec![crate::ToolDefinition {
            name: "project_dataset_add".into(),
            description: "Adds a dataset. Long text.".into(),
            parameters: json!({"type": "object", "properties": {"title": {"type": "string"}}}),
        }];
        request.constrained_tools = true;
        let body: Value = serde_json::from_slice(&request_body(&request, false)).unwrap();
        assert!(body.get("tools").is_none(), "no native tools: {body}");
        let system = body["messages"][0]["content"].as_str().unwrap();
        assert!(
            system.starts_with("role\n\nAnswer with one JSON object."),
            "{system}"
        );
        assert!(
            system.ends_with("- project_dataset_add: Adds a dataset."),
            "{system}"
        );
        assert_eq!(body["response_format"]["type"], "json_schema");
        let choices = &body["response_format"]["json_schema"]["schema"]["anyOf"];
        assert_eq!(
            choices[1]["properties"]["tool"]["const"],
            "project_dataset_add"
        );
        // Without tools there is nothing to constrain: a plain chat request.
        request.tools.clear();
        let body: Value = serde_json::from_slice(&request_body(&request, false)).unwrap();
        assert!(body.get("response_format").is_none());
        assert_eq!(body["messages"][0]["content"], "role");
    }

    #[test]
    fn a_constrained_reply_reads_back_as_a_call_and_llama_timings_as_usage() {
        let mut decoder = OpenAiDecoder::constrained_to(&[crate::ToolDefinition {
            name: "f".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
        }]);
        let (events, result) = decode_with(
            &mut decoder,
            &[
                r#"{"choices":[{"delta":{"content":"{\"tool\":\"f\","}}]}"#,
                r#"{"choices":[{"delta":{"content":"\"arguments\":{\"x\":1}}"}}]}"#,
                r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"timings":{"cache_n":40,"prompt_n":9,"predicted_n":12}}"#,
                "[DONE]",
            ],
        );
        result.unwrap();
        assert!(events.contains(&Event::ToolCallEnd {
            index: 0,
            call: ToolCall {
                id: "call_json".into(),
                name: "f".into(),
                arguments: json!({"x": 1}),
            },
        }));
        assert!(events.contains(&Event::Usage(Usage {
            input_tokens: 9,
            output_tokens: 12,
            cache_read_tokens: 40,
            ..Usage::default()
        })));
        assert_eq!(events.last(), Some(&Event::Stop(StopReason::ToolUse)));
    }
}
