//! The Anthropic Messages API client (`POST /v1/messages`, streamed; `GET /v1/models`).
//!
//! Owns Anthropic's wire format: the request (system blocks and tools with `cache_control`
//! breakpoints, `tool_use`/`tool_result` blocks, consecutive user-side messages merged
//! because the API wants roles to alternate) and the SSE events of a reply
//! (`message_start`, `content_block_start/delta/stop`, `message_delta`, `message_stop`,
//! `ping`, `error`).

use std::collections::{BTreeMap, VecDeque};

use reqwest::header::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Api, ProviderError};
use crate::http::{self, ApiKey, Call, HttpConfig};
use crate::model::{
    Event, Message, ModelInfo, PartialToolCall, Request, StopReason, ToolCall, Usage,
};
use crate::sse::SseEvent;
use crate::stream::{self, Decoder, EventStream};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_VERSION: &str = "2023-06-01";

/// Where and how to reach the API.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// Without `/v1` (`https://api.anthropic.com`, or a local llama-server).
    pub base_url: String,
    pub api_key: ApiKey,
    /// The `anthropic-version` header.
    pub version: String,
    /// Sent with every request (e.g. `anthropic-beta`).
    pub extra_headers: Vec<(String, String)>,
    pub http: HttpConfig,
}

impl AnthropicConfig {
    pub fn new(api_key: ApiKey) -> Self {
        AnthropicConfig {
            base_url: DEFAULT_BASE_URL.into(),
            api_key,
            version: DEFAULT_VERSION.into(),
            extra_headers: Vec::new(),
            http: HttpConfig::default(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct AnthropicClient {
    config: AnthropicConfig,
    http: reqwest::Client,
}

impl AnthropicClient {
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        let http = http::build_client(&config.http)?;
        Ok(AnthropicClient { config, http })
    }

    /// Send `request` and stream the reply.
    pub async fn stream(&self, request: &Request) -> Result<EventStream, ProviderError> {
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        let body = request_body(request);
        let headers = self.headers()?;
        let call = Call {
            api: Api::Anthropic,
            url: &url,
            model: &request.model,
        };
        stream::post_sse(
            &self.http,
            &self.config.http,
            &call,
            &headers,
            body,
            AnthropicDecoder::default(),
        )
        .await
    }

    /// The models this key may use.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let url = format!(
            "{}/v1/models?limit=1000",
            self.config.base_url.trim_end_matches('/')
        );
        let headers = self.headers()?;
        let call = Call {
            api: Api::Anthropic,
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
                display_name: m.display_name,
            })
            .collect())
    }

    fn headers(&self) -> Result<reqwest::header::HeaderMap, ProviderError> {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-api-key", self.config.api_key.header("")?);
        headers.insert("anthropic-version", header_value(&self.config.version)?);
        for (name, value) in &self.config.extra_headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ProviderError::Config(format!("invalid header name `{name}`")))?;
            headers.insert(name, header_value(value)?);
        }
        Ok(headers)
    }
}

fn header_value(value: &str) -> Result<HeaderValue, ProviderError> {
    HeaderValue::from_str(value)
        .map_err(|_| ProviderError::Config(format!("invalid header value `{value}`")))
}

#[derive(Deserialize)]
struct ModelList {
    data: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
    display_name: Option<String>,
}

// ---- the request -------------------------------------------------------------------------

/// The exact bytes sent for `request`. Field order is fixed by these structs and JSON values
/// keep the caller's key order, so equal requests give equal bytes – which the prompt cache
/// needs, since it matches on the prefix byte for byte.
///
/// Layout for the cache (tools, then system, then messages is Anthropic's prefix order):
/// the system blocks up to the last cached one stay in `system`; the blocks after it (the
/// live state and its nonce, which change every request) follow the history as text blocks
/// of the last user message, so nothing that changes every request precedes the
/// conversation. With [`Request::cache_history`] the history's newest block is a breakpoint
/// too, so the next request reads the whole conversation so far from the cache.
pub fn request_body(request: &Request) -> Vec<u8> {
    let last_tool = request.tools.len().checked_sub(1);
    let (head, tail) = request.split_system();
    let mut messages = wire_messages(&request.messages);
    let breakpoints = usize::from(request.cache_tools && last_tool.is_some())
        + head.iter().filter(|b| b.cache).count();
    if request.cache_history && breakpoints < MAX_BREAKPOINTS {
        if let Some(block) = messages.last_mut().and_then(|m| m.content.last_mut()) {
            block.cache_control = Some(EPHEMERAL);
        }
    }
    if !tail.is_empty() {
        let blocks = tail.iter().map(|b| WireBlock {
            content: WireContent::Text { text: &b.text },
            cache_control: None,
        });
        match messages.last_mut() {
            Some(last) if last.role == "user" => last.content.extend(blocks),
            _ => messages.push(WireMessage {
                role: "user",
                content: blocks.collect(),
            }),
        }
    }
    let wire = WireRequest {
        model: &request.model,
        max_tokens: request.max_tokens,
        system: head
            .iter()
            .map(|block| WireText {
                kind: "text",
                text: &block.text,
                cache_control: block.cache.then_some(EPHEMERAL),
            })
            .collect(),
        messages,
        tools: request
            .tools
            .iter()
            .enumerate()
            .map(|(i, tool)| WireTool {
                name: &tool.name,
                description: &tool.description,
                input_schema: &tool.parameters,
                cache_control: (request.cache_tools && Some(i) == last_tool).then_some(EPHEMERAL),
            })
            .collect(),
        temperature: request.temperature,
        stream: true,
    };
    serde_json::to_vec(&wire).expect("a request always serializes")
}

/// Anthropic accepts at most four `cache_control` markers in one request.
const MAX_BREAKPOINTS: usize = 4;

fn wire_messages(messages: &[Message]) -> Vec<WireMessage<'_>> {
    let mut out: Vec<WireMessage<'_>> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::User { text } => ("user", vec![WireContent::Text { text }]),
            Message::ToolResult {
                call_id,
                content,
                is_error,
            } => (
                "user",
                vec![WireContent::ToolResult {
                    tool_use_id: call_id,
                    content,
                    is_error: *is_error,
                }],
            ),
            Message::Assistant { text, tool_calls } => {
                // The API rejects empty text blocks; a pure tool-call turn has none.
                let text = (!text.is_empty()).then_some(WireContent::Text { text });
                let calls = tool_calls.iter().map(|c| WireContent::ToolUse {
                    id: &c.id,
                    name: &c.name,
                    input: &c.arguments,
                });
                ("assistant", text.into_iter().chain(calls).collect())
            }
        };
        let blocks = blocks.into_iter().map(|content| WireBlock {
            content,
            cache_control: None,
        });
        match out.last_mut() {
            // Roles must alternate: parallel tool results (and a note after them) share one
            // user message.
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => out.push(WireMessage {
                role,
                content: blocks.collect(),
            }),
        }
    }
    out
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<WireText<'a>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    stream: bool,
}

#[derive(Serialize, Clone, Copy)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct WireText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<WireBlock<'a>>,
}

/// A content block and, on the history's newest one, its cache breakpoint.
#[derive(Serialize)]
struct WireBlock<'a> {
    #[serde(flatten)]
    content: WireContent<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireContent<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

// ---- the reply ---------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: Value,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDeltaBody,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    /// Event types added after this client was written are skipped, as the API asks.
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(rename = "type")]
    kind: String,
    message: String,
}

/// A `tool_use` block being streamed.
struct OpenToolUse {
    id: String,
    name: String,
    /// `input` of `content_block_start`, used when no `input_json_delta` follows.
    initial: Value,
    arguments: String,
}

#[derive(Default)]
struct AnthropicDecoder {
    tools: BTreeMap<usize, OpenToolUse>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    done: bool,
}

impl AnthropicDecoder {
    fn merge_usage(&mut self, usage: WireUsage, out: &mut VecDeque<Event>) {
        // Counts are running totals; a field missing from `message_delta` keeps its value.
        let u = &mut self.usage;
        u.input_tokens = usage.input_tokens.unwrap_or(u.input_tokens);
        u.output_tokens = usage.output_tokens.unwrap_or(u.output_tokens);
        u.cache_creation_tokens = usage
            .cache_creation_input_tokens
            .unwrap_or(u.cache_creation_tokens);
        u.cache_read_tokens = usage.cache_read_input_tokens.unwrap_or(u.cache_read_tokens);
        out.push_back(Event::Usage(self.usage));
    }

    fn protocol(detail: impl Into<String>, data: &str) -> ProviderError {
        ProviderError::Protocol {
            api: Api::Anthropic,
            detail: detail.into(),
            data: http::truncate(data, 500),
        }
    }

    /// `content_block_start`: a `tool_use` block opens a call; a text block may carry its
    /// first text. `data` is the event's raw JSON, for a protocol error.
    fn block_start(
        &mut self,
        index: usize,
        content_block: &Value,
        data: &str,
        out: &mut VecDeque<Event>,
    ) -> Result<(), ProviderError> {
        if content_block["type"] == "tool_use" {
            let (Some(id), Some(name)) =
                (content_block["id"].as_str(), content_block["name"].as_str())
            else {
                return Err(Self::protocol("tool_use without id or name", data));
            };
            out.push_back(Event::ToolCallStart {
                index,
                id: id.to_owned(),
                name: name.to_owned(),
            });
            self.tools.insert(
                index,
                OpenToolUse {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    initial: content_block["input"].clone(),
                    arguments: String::new(),
                },
            );
        } else if let Some(text) = content_block["text"].as_str() {
            if !text.is_empty() {
                out.push_back(Event::TextDelta(text.to_owned()));
            }
        }
        // `thinking` and server-tool blocks carry nothing this model represents.
        Ok(())
    }

    /// `content_block_delta`: text, or a piece of an open call's arguments.
    fn block_delta(
        &mut self,
        index: usize,
        delta: &Value,
        data: &str,
        out: &mut VecDeque<Event>,
    ) -> Result<(), ProviderError> {
        match delta["type"].as_str() {
            Some("text_delta") => {
                let text = delta["text"].as_str().unwrap_or_default();
                out.push_back(Event::TextDelta(text.to_owned()));
            }
            Some("input_json_delta") => {
                let Some(tool) = self.tools.get_mut(&index) else {
                    return Err(Self::protocol(
                        "input_json_delta for no tool_use block",
                        data,
                    ));
                };
                let part = delta["partial_json"].as_str().unwrap_or_default();
                tool.arguments.push_str(part);
                out.push_back(Event::ToolCallArgsDelta {
                    index,
                    delta: part.to_owned(),
                });
            }
            _ => {} // thinking, signature, citations
        }
        Ok(())
    }

    /// `content_block_stop`: an open call is complete, its arguments parsed (the block's
    /// initial `input` when no argument text streamed).
    fn block_stop(&mut self, index: usize, out: &mut VecDeque<Event>) -> Result<(), ProviderError> {
        if let Some(tool) = self.tools.remove(&index) {
            let arguments = if tool.arguments.trim().is_empty() && tool.initial.is_object() {
                tool.initial
            } else {
                stream::parse_arguments(Api::Anthropic, &tool.id, &tool.name, &tool.arguments)?
            };
            out.push_back(Event::ToolCallEnd {
                index,
                call: ToolCall {
                    id: tool.id,
                    name: tool.name,
                    arguments,
                },
            });
        }
        Ok(())
    }
}

impl Decoder for AnthropicDecoder {
    fn api(&self) -> Api {
        Api::Anthropic
    }

    fn event(&mut self, event: SseEvent, out: &mut VecDeque<Event>) -> Result<(), ProviderError> {
        let wire: WireEvent = serde_json::from_str(&event.data).map_err(|e| {
            Self::protocol(format!("bad `{}` event: {e}", event.event), &event.data)
        })?;
        match wire {
            WireEvent::MessageStart { message } => {
                self.merge_usage(message.usage.unwrap_or_default(), out);
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => self.block_start(index, &content_block, &event.data, out)?,
            WireEvent::ContentBlockDelta { index, delta } => {
                self.block_delta(index, &delta, &event.data, out)?
            }
            WireEvent::ContentBlockStop { index } => self.block_stop(index, out)?,
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop_reason = Some(stop_reason(&reason));
                }
                if let Some(usage) = usage {
                    self.merge_usage(usage, out);
                }
            }
            WireEvent::MessageStop => {
                let reason = self.stop_reason.take().unwrap_or(StopReason::EndTurn);
                out.push_back(Event::Stop(reason));
                self.done = true;
            }
            WireEvent::Ping | WireEvent::Unknown => {}
            WireEvent::Error { error } => {
                return Err(ProviderError::Api {
                    api: Api::Anthropic,
                    kind: error.kind,
                    message: error.message,
                })
            }
        }
        Ok(())
    }

    fn end(&mut self, _out: &mut VecDeque<Event>) -> bool {
        // Only `message_stop` completes a reply.
        false
    }

    fn done(&self) -> bool {
        self.done
    }

    fn partial_tool_calls(&self) -> Vec<PartialToolCall> {
        self.tools
            .iter()
            .map(|(&index, tool)| PartialToolCall {
                index,
                id: tool.id.clone(),
                name: tool.name.clone(),
                raw_arguments: tool.arguments.clone(),
            })
            .collect()
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "pause_turn" => StopReason::EndTurn,
        "max_tokens" => StopReason::MaxTokens,
        "tool_use" => StopReason::ToolUse,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SystemBlock, ToolDefinition};
    use serde_json::json;

    #[test]
    fn tool_results_and_a_following_note_share_one_user_message() {
        let mut request = Request::new("m", 100);
        request.system = vec![SystemBlock::cached("a"), SystemBlock::new("b")];
        request.messages = vec![
            Message::user("hi"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "t1".into(),
                        name: "x".into(),
                        arguments: json!({"a": 1}),
                    },
                    ToolCall {
                        id: "t2".into(),
                        name: "x".into(),
                        arguments: json!({}),
                    },
                ],
            },
            Message::tool_result("t1", "one"),
            Message::ToolResult {
                call_id: "t2".into(),
                content: "boom".into(),
                is_error: true,
            },
            Message::user("go on"),
        ];
        request.tools = vec![
            ToolDefinition {
                name: "x".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            },
            ToolDefinition {
                name: "y".into(),
                description: "e".into(),
                parameters: json!({"type": "object"}),
            },
        ];
        request.cache_tools = true;
        let body: Value = serde_json::from_slice(&request_body(&request)).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m", "max_tokens": 100,
                "system": [
                    {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}
                ],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "t1", "name": "x", "input": {"a": 1}},
                        {"type": "tool_use", "id": "t2", "name": "x", "input": {}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
                        {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": true},
                        {"type": "text", "text": "go on"},
                        // The per-request block (after the cached one) follows the history.
                        {"type": "text", "text": "b"}
                    ]}
                ],
                "tools": [
                    {"name": "x", "description": "d", "input_schema": {"type": "object"}},
                    {"name": "y", "description": "e", "input_schema": {"type": "object"},
                     "cache_control": {"type": "ephemeral"}}
                ],
                "stream": true
            })
        );
    }
    #[test]
    fn the_history_breakpoint_marks_the_newest_message_before_the_per_request_blocks() {
        let mut request = Request::new("m", 100);
        request.system = vec![SystemBlock::cached("role"), SystemBlock::new("live")];
        request.messages = vec![
            Message::user("hi"),
            Message::Assistant {
                text: "hello".into(),
                tool_calls: Vec::new(),
            },
        ];
        request.cache_history = true;
        let body: Value = serde_json::from_slice(&request_body(&request)).unwrap();
        // After an assistant message the per-request blocks are a user message of their own.
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "hello",
                  "cache_control": {"type": "ephemeral"}}]},
                {"role": "user", "content": [{"type": "text", "text": "live"}]}
            ])
        );
        // Never more than four markers: three system breakpoints and the tools leave none.
        request.system = vec![
            SystemBlock::cached("a"),
            SystemBlock::cached("b"),
            SystemBlock::cached("c"),
        ];
        request.tools = vec![ToolDefinition {
            name: "x".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
        }];
        request.cache_tools = true;
        let text = String::from_utf8(request_body(&request)).unwrap();
        assert_eq!(text.matches("cache_control").count(), 4, "{text}");
        // Off: no marker in the history.
        request.cache_history = false;
        request.cache_tools = false;
        let body: Value = serde_json::from_slice(&request_body(&request)).unwrap();
        assert!(!body["messages"].to_string().contains("cache_control"));
    }
}
