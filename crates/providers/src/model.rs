//! The provider-neutral request and event model.
//!
//! Owns what a caller says to *any* provider (system blocks, messages, tools) and what comes
//! back (a stream of [`Event`]s). Each client module translates this to and from its wire
//! format; nothing here knows a provider's JSON.

use serde_json::Value;

/// One chat request, provider-neutral.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The provider's model id (`claude-sonnet-4-5`, `gpt-4.1`, `qwen2.5:7b`, …).
    pub model: String,
    /// System prompt blocks, in order. Anthropic keeps them as separate blocks (so each can
    /// end a cache prefix); OpenAI-compatible APIs get them joined into one system message,
    /// because several chat templates (llama.cpp's among them) accept only one.
    pub system: Vec<SystemBlock>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDefinition>,
    /// Mark the last tool as a prompt-cache breakpoint (Anthropic; ignored elsewhere).
    /// Tools come before the system prompt in Anthropic's cache prefix, so this caches them.
    pub cache_tools: bool,
    /// Mark the history's newest block as a prompt-cache breakpoint (Anthropic; ignored
    /// elsewhere), so the next request of the chat reads the conversation from the cache.
    pub cache_history: bool,
    /// Upper bound on the reply's tokens. Anthropic requires one; OpenAI-compatible servers
    /// get it as `max_tokens` (the spelling every compatible server understands).
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    /// Offer the tools as a JSON schema the reply must match instead of as native tools
    /// (OpenAI-compatible servers; see [`crate::constrained`]). The reply comes back as the
    /// same events either way. Ignored by Anthropic.
    pub constrained_tools: bool,
}

impl Request {
    /// The system blocks up to and including the last cached one, and the blocks after it –
    /// the per-request ones (live state and its nonce), which both clients send after the
    /// history so that nothing changing every request precedes the conversation. Without a
    /// cached block, every block is in the first part.
    pub fn split_system(&self) -> (&[SystemBlock], &[SystemBlock]) {
        let split = self
            .system
            .iter()
            .rposition(|b| b.cache)
            .map_or(self.system.len(), |i| i + 1);
        self.system.split_at(split)
    }

    /// A request with no system prompt, messages or tools yet.
    pub fn new(model: impl Into<String>, max_tokens: u32) -> Self {
        Request {
            model: model.into(),
            system: Vec::new(),
            messages: Vec::new(),
            tools: Vec::new(),
            cache_tools: false,
            cache_history: false,
            max_tokens,
            temperature: None,
            constrained_tools: false,
        }
    }
}

/// A block of the system prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemBlock {
    pub text: String,
    /// End a prompt-cache prefix after this block (Anthropic `cache_control`; ignored by
    /// OpenAI-compatible APIs, which cache automatically by prefix).
    pub cache: bool,
}

impl SystemBlock {
    pub fn new(text: impl Into<String>) -> Self {
        SystemBlock {
            text: text.into(),
            cache: false,
        }
    }

    pub fn cached(text: impl Into<String>) -> Self {
        SystemBlock {
            text: text.into(),
            cache: true,
        }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    User {
        text: String,
    },
    /// What the model said: text and/or tool calls (either may be empty).
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// The result of running one tool call. Consecutive results (of parallel calls) are sent
    /// together where the provider wants that (Anthropic: one user message).
    ToolResult {
        call_id: String,
        content: String,
        is_error: bool,
    },
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Message::User { text: text.into() }
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Message::Assistant {
            text: text.into(),
            tool_calls: Vec::new(),
        }
    }

    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message::ToolResult {
            call_id: call_id.into(),
            content: content.into(),
            is_error: false,
        }
    }
}

/// A complete tool call, as the model made it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The parsed arguments (always a JSON value; `{}` when the model sent none).
    pub arguments: Value,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object. Sent with its keys in the order given, so the
    /// same definition always produces the same bytes (the prompt cache keys on them).
    pub parameters: Value,
}

/// One event of a streamed reply. A stream yields `Result<Event, ProviderError>`; an error
/// is always its last item, and [`Event::Stop`] is the last event of a complete reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    TextDelta(String),
    /// A tool call began. `index` identifies it within this reply (parallel calls carry
    /// different indexes, and their deltas may interleave).
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// A fragment of a tool call's JSON arguments.
    ToolCallArgsDelta {
        index: usize,
        delta: String,
    },
    /// A tool call is complete and its arguments parsed.
    ToolCallEnd {
        index: usize,
        call: ToolCall,
    },
    /// Token usage so far; a later `Usage` supersedes an earlier one (counts are totals).
    Usage(Usage),
    Stop(StopReason),
}

/// Token counts of one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens that were neither read from nor written to the cache.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache (Anthropic `cache_read_input_tokens`,
    /// OpenAI `prompt_tokens_details.cached_tokens`).
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic `cache_creation_input_tokens`).
    pub cache_creation_tokens: u64,
    /// The output count is Sextant's estimate, not the provider's: a reply stopped before
    /// its end never got the provider's final count.
    pub estimated: bool,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    ToolUse,
    StopSequence,
    /// The provider refused or filtered the reply.
    Refusal,
    /// A reason this crate does not know, verbatim.
    Other(String),
}

/// A tool call the stream ended in the middle of: what had arrived when it was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialToolCall {
    pub index: usize,
    pub id: String,
    pub name: String,
    /// The argument text received so far (not valid JSON, usually).
    pub raw_arguments: String,
}

/// A model a provider offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    pub id: String,
    pub display_name: Option<String>,
}
