//! Typed errors of every provider call.
//!
//! Owns the one error enum callers match on. Messages say what failed, on which provider,
//! and what to do next; none of them ever contains an API key (keys only travel in headers,
//! and [`crate::ApiKey`] redacts itself).

use std::fmt;
use std::time::Duration;

use crate::model::PartialToolCall;

/// Which wire format an error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    OpenAi,
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Api::Anthropic => "Anthropic",
            Api::OpenAi => "OpenAI-compatible",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error(
        "{api} API refused the API key (HTTP {status}): {message} – check the key in Settings"
    )]
    BadKey {
        api: Api,
        status: u16,
        message: String,
    },

    #[error(
        "{api} API does not know model `{model}` or the endpoint (HTTP 404): {message} – check the \
         model name and the base URL"
    )]
    NotFound {
        api: Api,
        model: String,
        message: String,
    },

    #[error("{api} API rejected the request (HTTP 400): {message}")]
    BadRequest { api: Api, message: String },

    #[error(
        "{api} API is rate limiting (HTTP 429) after {attempts} attempt(s): {message} – wait and \
         try again{}",
        retry_after.map(|d| format!(" (the server asked for {} s)", d.as_secs())).unwrap_or_default()
    )]
    RateLimited {
        api: Api,
        attempts: u32,
        retry_after: Option<Duration>,
        message: String,
    },

    #[error("{api} API failed (HTTP {status}) after {attempts} attempt(s): {message}")]
    Server {
        api: Api,
        status: u16,
        attempts: u32,
        message: String,
    },

    #[error("{api} API answered HTTP {status}: {message}")]
    Http {
        api: Api,
        status: u16,
        message: String,
    },

    #[error(
        "could not reach {url} after {attempts} attempt(s): {detail} – is the server running?"
    )]
    Connect {
        url: String,
        attempts: u32,
        detail: String,
    },

    /// The connection was refused: nothing listens at the address (a local server that is
    /// not running). Tried once more at most, and not worth retrying later by itself.
    #[error("nothing is listening at {url} – is your local server running?")]
    NothingListening { url: String, attempts: u32 },

    #[error("{api} API sent nothing for {} s – the server stopped responding", timeout.as_secs_f32())]
    Timeout { api: Api, timeout: Duration },

    /// The stream ended (connection closed, or a transport error) before the reply's stop
    /// event. Tool calls that were under way are reported, never silently dropped.
    #[error(
        "{api} reply was cut off before it finished ({detail}){}",
        describe_partial(partial_tool_calls)
    )]
    StreamCut {
        api: Api,
        detail: String,
        partial_tool_calls: Vec<PartialToolCall>,
    },

    #[error(
        "{api} model called tool `{name}` ({id}) with arguments that are not valid JSON ({error}); \
         raw arguments: {raw}"
    )]
    MalformedToolArguments {
        api: Api,
        id: String,
        name: String,
        raw: String,
        error: String,
    },

    /// A reply called a tool that was not offered: a server that did not hold the model to
    /// the schema of the offered tools (constrained calls). Says so in plain words; the
    /// raw reply and the made-up name are not part of it (a person reads it; the name is
    /// in the error for the log).
    #[error(
        "the model tried to use a tool that does not exist: the {api} server did not keep it \
         to the {} offered tool(s) – ask again",
        offered.len()
    )]
    UnknownTool {
        api: Api,
        /// The name the model wrote (at most 80 bytes of it).
        name: String,
        /// The names that were offered.
        offered: Vec<String>,
    },

    #[error("{api} reply exceeded the size cap of {limit} bytes and was stopped")]
    ReplyTooLarge { api: Api, limit: usize },

    /// The provider reported an error inside the stream (Anthropic `event: error`, e.g.
    /// `overloaded_error`; an OpenAI-compatible `{"error": …}` chunk).
    #[error("{api} API reported an error mid-reply: {kind}: {message}")]
    Api {
        api: Api,
        kind: String,
        message: String,
    },

    /// Something that does not follow the provider's wire format.
    #[error("{api} API sent something this client cannot read ({detail}): {data}")]
    Protocol {
        api: Api,
        detail: String,
        data: String,
    },

    #[error("invalid client configuration: {0}")]
    Config(String),
}

impl ProviderError {
    /// Whether trying the same request again later could succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimited { .. }
                | ProviderError::Server { .. }
                | ProviderError::Connect { .. }
                | ProviderError::Timeout { .. }
                | ProviderError::StreamCut { .. }
        ) || matches!(self, ProviderError::Api { kind, .. } if kind == "overloaded_error")
    }

    /// Whether the server refused the request as longer than the model's context, and the
    /// context it named when it said (llama.cpp: "request (4961 tokens) exceeds the available
    /// context size (4096 tokens)"; OpenAI and vLLM: "maximum context length is 8192 tokens";
    /// Anthropic: "prompt is too long: 210000 tokens > 200000 maximum").
    pub fn context_exceeded(&self) -> Option<ContextExceeded> {
        let message = match self {
            ProviderError::BadRequest { message, .. }
            | ProviderError::Http { message, .. }
            | ProviderError::Server { message, .. }
            | ProviderError::Api { message, .. } => message,
            _ => return None,
        };
        let lower = message.to_ascii_lowercase();
        let said = [
            "exceeds the available context size",
            "context_length_exceeded",
            "maximum context length",
            "prompt is too long",
            "context window",
            "too many tokens",
        ];
        if !said.iter().any(|s| lower.contains(s)) {
            return None;
        }
        let limit = number_after(&lower, "available context size (")
            .or_else(|| number_after(&lower, "maximum context length is "))
            .or_else(|| number_after(&lower, "tokens > "));
        Some(ContextExceeded { limit })
    }
}

/// A request longer than the model's context, and the context the server named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextExceeded {
    pub limit: Option<u32>,
}

/// The number right after `marker` in `text` (digits, thin spaces and commas allowed).
fn number_after(text: &str, marker: &str) -> Option<u32> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, ',' | ' ' | '\u{202f}' | '\u{2009}'))
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok().filter(|n| *n > 0)
}

fn describe_partial(calls: &[PartialToolCall]) -> String {
    calls
        .iter()
        .map(|c| {
            format!(
                "; tool call `{}` ({}) was incomplete, arguments so far: {}",
                c.name, c.id, c.raw_arguments
            )
        })
        .collect()
}

#[cfg(test)]
mod context_tests {
    use super::*;

    #[test]
    fn a_request_longer_than_the_context_is_recognised_with_the_limit_the_server_named() {
        let cases: &[(ProviderError, Option<Option<u32>>)] = &[
            (
                ProviderError::BadRequest {
                    api: Api::OpenAi,
                    message: "request (4961 tokens) exceeds the available context size (4096 tokens), try increasing it".into(),
                },
                Some(Some(4096)),
            ),
            (
                ProviderError::BadRequest {
                    api: Api::OpenAi,
                    message: "the request exceeds the available context size, try increasing it".into(),
                },
                Some(None),
            ),
            (
                ProviderError::BadRequest {
                    api: Api::OpenAi,
                    message: "This model's maximum context length is 2048 tokens. However, you requested 2300 tokens".into(),
                },
                Some(Some(2048)),
            ),
            (
                ProviderError::BadRequest {
                    api: Api::Anthropic,
                    message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
                },
                Some(Some(200_000)),
            ),
            (
                ProviderError::BadRequest {
                    api: Api::OpenAi,
                    message: "Invalid 'messages[2].content': expected a string".into(),
                },
                None,
            ),
            (
                ProviderError::Timeout {
                    api: Api::OpenAi,
                    timeout: Duration::from_secs(1),
                },
                None,
            ),
        ];
        for (error, want) in cases {
            assert_eq!(error.context_exceeded().map(|c| c.limit), *want, "{error}");
        }
    }
}
