//! Sextant's model-provider layer: thin, hand-written streaming clients for the Anthropic
//! Messages API and for any OpenAI-compatible Chat Completions API.
//!
//! A caller builds a provider-neutral [`Request`] (system blocks, messages, tools) and gets
//! an [`EventStream`] of [`Event`]s back (text deltas, parallel tool calls, usage, the stop
//! reason) or a typed [`ProviderError`]. Each client module mirrors its provider's wire
//! format so it can be read against the provider's documentation; nothing here knows about
//! projects, commands or the assistant's prompts.
//!
//! - [`model`] – the neutral request and event types.
//! - [`anthropic`], [`open_ai`] – one client per wire format.
//! - `http` – keys, timeouts, retries, error statuses; `stream` – body → events;
//!   `sse` – the SSE parser.
//! - [`capabilities`] – what a model can do (context, tools, reply cap), and a probe of a
//!   local server's tool support.
//! - [`constrained`] – tools offered as a JSON schema the reply must match, for small
//!   local models; read back into the same events.
//! - `script` (feature `script`) – a scripted provider server for tests.

pub mod anthropic;
pub mod capabilities;
pub mod constrained;
mod error;
mod http;
pub mod model;
pub mod open_ai;
#[cfg(feature = "script")]
pub mod script;
mod sse;
mod stream;

pub use anthropic::{AnthropicClient, AnthropicConfig};
pub use error::{Api, ContextExceeded, ProviderError};
pub use http::{parse_retry_after, ApiKey, HttpConfig, RetryPolicy};
pub use model::{
    Event, Message, ModelInfo, PartialToolCall, Request, StopReason, SystemBlock, ToolCall,
    ToolDefinition, Usage,
};
pub use open_ai::{OpenAiClient, OpenAiConfig};
pub use sse::{SseEvent, SseParser};
pub use stream::EventStream;

/// Either client, for callers that pick the provider at run time.
#[derive(Debug, Clone)]
pub enum Client {
    Anthropic(AnthropicClient),
    OpenAi(OpenAiClient),
}

impl Client {
    /// Send `request` and stream the reply.
    pub async fn stream(&self, request: &Request) -> Result<EventStream, ProviderError> {
        match self {
            Client::Anthropic(client) => client.stream(request).await,
            Client::OpenAi(client) => client.stream(request).await,
        }
    }

    /// The models the provider offers.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        match self {
            Client::Anthropic(client) => client.list_models().await,
            Client::OpenAi(client) => client.list_models().await,
        }
    }
}
