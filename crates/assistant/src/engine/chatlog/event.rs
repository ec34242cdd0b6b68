//! What a chat log holds: the events, and their stored form (a `kind` plus a JSON
//! payload).
//!
//! The set of structural events is open: any kind that is not one of the conversation
//! kinds is a [`Structural`] event with a free payload. A kind written by a newer Sextant
//! therefore still loads (as a structural, log-only event) instead of failing the chat.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A position in one chat's log, from 1.
pub type Seq = u64;

/// Known structural kinds (others are allowed).
pub mod kinds {
    pub const SKILL_LOADED: &str = "skill_loaded";
    pub const PROBE_VERDICT: &str = "probe_verdict";
    pub const CHECKPOINT_CREATED: &str = "checkpoint_created";
    pub const HANDOFF_SEEDED: &str = "handoff_seeded";
    /// A person's (or the timeout's) answer to an approval prompt: `{callId, name, tier,
    /// approved, by, reason}`.
    pub const APPROVAL: &str = "approval";
}

const USER: &str = "user_message";
const ASSISTANT: &str = "assistant_message";
const TOOL_CALL: &str = "tool_call";
const TOOL_RESULT: &str = "tool_result";
const COMPACTION: &str = "compaction";
const CITATION: &str = "citation";
const CONVERSATION_KINDS: [&str; 6] = [
    USER,
    ASSISTANT,
    TOOL_CALL,
    TOOL_RESULT,
    COMPACTION,
    CITATION,
];

/// One event of a chat.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    User {
        text: String,
    },
    Assistant {
        text: String,
    },
    ToolCall {
        id: String,
        name: String,
        args: Value,
    },
    ToolResult {
        id: String,
        content: String,
        is_error: bool,
        /// The pipeline refused the call; the tool never ran.
        denied: bool,
        /// The tool ran, but post-execute withheld its result.
        blocked: bool,
    },
    /// Everything up to and including `through` is replaced, for the model, by `summary`.
    Compaction {
        through: Seq,
        summary: String,
    },
    /// Hits of other chats brought into this one as frozen snapshots (spec 30, A3); the
    /// model reads them inside the untrusted envelope.
    Citation {
        /// `person` or `assistant`.
        by: String,
        /// The `assistant.sessions.cite` call that made it, where known (the fold places
        /// the model's citation after the open calls' results either way).
        call_id: Option<String>,
        /// Provenance, one object per source chat (chat, title, project, cited seqs…).
        sources: Value,
        /// Each source's snapshot JSON, every `<` already written as `\u003c`.
        snapshots: Vec<String>,
    },
    Structural(Structural),
}

/// An event that is never shown to the model ("skill loaded", "probe verdict", …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Structural {
    pub kind: String,
    pub payload: Value,
}

impl Event {
    pub fn user(text: impl Into<String>) -> Event {
        Event::User { text: text.into() }
    }

    pub fn assistant(text: impl Into<String>) -> Event {
        Event::Assistant { text: text.into() }
    }

    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, args: Value) -> Event {
        Event::ToolCall {
            id: id.into(),
            name: name.into(),
            args,
        }
    }

    pub fn tool_result(id: impl Into<String>, content: impl Into<String>, is_error: bool) -> Event {
        Event::ToolResult {
            id: id.into(),
            content: content.into(),
            is_error,
            denied: false,
            blocked: false,
        }
    }

    pub fn structural(kind: impl Into<String>, payload: Value) -> Event {
        Event::Structural(Structural {
            kind: kind.into(),
            payload,
        })
    }

    /// The stored `kind`.
    pub fn kind(&self) -> &str {
        match self {
            Event::User { .. } => USER,
            Event::Assistant { .. } => ASSISTANT,
            Event::ToolCall { .. } => TOOL_CALL,
            Event::ToolResult { .. } => TOOL_RESULT,
            Event::Compaction { .. } => COMPACTION,
            Event::Citation { .. } => CITATION,
            Event::Structural(s) => &s.kind,
        }
    }

    /// The stored payload.
    pub fn payload(&self) -> Value {
        match self {
            Event::User { text } | Event::Assistant { text } => json!({ "text": text }),
            Event::ToolCall { id, name, args } => json!({ "id": id, "name": name, "args": args }),
            Event::ToolResult {
                id,
                content,
                is_error,
                denied,
                blocked,
            } => {
                let mut payload =
                    json!({ "id": id, "content": content, "isError": is_error, "denied": denied });
                // Only when set: logs from before the field read the same.
                if *blocked {
                    payload["blocked"] = json!(true);
                }
                payload
            }
            Event::Compaction { through, summary } => {
                json!({ "through": through, "summary": summary })
            }
            Event::Citation {
                by,
                call_id,
                sources,
                snapshots,
            } => {
                json!({ "by": by, "callId": call_id, "sources": sources, "snapshots": snapshots })
            }
            Event::Structural(s) => s.payload.clone(),
        }
    }

    /// Rebuilds an event from its stored form.
    pub fn from_parts(kind: &str, payload: Value) -> Result<Event, String> {
        let text = |p: &Value, key: &str| -> Result<String, String> {
            p.get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("`{kind}` event without a string `{key}`"))
        };
        Ok(match kind {
            USER => Event::User {
                text: text(&payload, "text")?,
            },
            ASSISTANT => Event::Assistant {
                text: text(&payload, "text")?,
            },
            TOOL_CALL => Event::ToolCall {
                id: text(&payload, "id")?,
                name: text(&payload, "name")?,
                args: payload.get("args").cloned().unwrap_or(Value::Null),
            },
            TOOL_RESULT => Event::ToolResult {
                id: text(&payload, "id")?,
                content: text(&payload, "content")?,
                is_error: payload
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                denied: payload
                    .get("denied")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                blocked: payload
                    .get("blocked")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            COMPACTION => Event::Compaction {
                through: payload
                    .get("through")
                    .and_then(Value::as_u64)
                    .ok_or("`compaction` event without a `through` sequence number")?,
                summary: text(&payload, "summary")?,
            },
            CITATION => Event::Citation {
                by: text(&payload, "by")?,
                call_id: payload
                    .get("callId")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                sources: payload.get("sources").cloned().unwrap_or(Value::Null),
                snapshots: payload
                    .get("snapshots")
                    .and_then(Value::as_array)
                    .ok_or("`citation` event without its `snapshots`")?
                    .iter()
                    .map(|s| {
                        s.as_str()
                            .map(str::to_string)
                            .ok_or("a `citation` snapshot that is not a string")
                    })
                    .collect::<Result<_, _>>()?,
            },
            other => Event::structural(other, payload),
        })
    }

    /// Refuses structural kinds that would read back as something else.
    pub(crate) fn check(&self) -> Result<(), String> {
        if let Event::Structural(s) = self {
            let valid = !s.kind.is_empty()
                && s.kind.len() <= 64
                && s.kind.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.'
                });
            if !valid {
                return Err(format!(
                    "structural event kind `{}` must be 1–64 characters of a–z, 0–9, `_` or `.`",
                    s.kind
                ));
            }
            if CONVERSATION_KINDS.contains(&s.kind.as_str()) {
                return Err(format!(
                    "`{}` is a conversation event, not a structural one; use its own variant",
                    s.kind
                ));
            }
        }
        Ok(())
    }
}

/// An event as stored: its position and time.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedEvent {
    pub seq: Seq,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: i64,
    pub event: Event,
}
