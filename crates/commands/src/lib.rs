//! The command registry: every action in Sextant is a typed command, and the UI, the API
//! server, MCP clients, the CLI and the assistant all call the same registry.
//!
//! A command has a dotted name (`project.dataset.add`), a description, JSON Schemas for its
//! parameters and result (generated with `schemars` from the very types the handler takes
//! and returns, so schema and behaviour cannot drift), a safety [`Tier`], an optional
//! read-only dry-run partner, and examples. Parameters are checked before the handler
//! runs: a bad value fails with the JSON path of the value and what was expected.
//!
//! The registry is generic over the context `C` its handlers act on; it knows nothing of
//! projects or devices. Who may call what is decided by [`Policy`], which the doors (API
//! server, MCP, assistant) apply with the caller's settings.

mod calling;
mod policy;
mod question;
mod reference;
mod registry;

pub use calling::{Assessment, BoxFuture, Caller, CommandDoor};
pub use policy::{Decision, Policy};
pub use question::{quoted, Outgoing, Question, WrittenFormat};
pub use reference::markdown_reference;
pub use registry::{
    Apply, CommandBuilder, CommandSpec, Deferred, Example, Job, Outcome, Registry, Then,
};

use serde::{Deserialize, Serialize};

/// How much care a command needs before it runs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Tier {
    /// Read-only; runs freely.
    #[serde(alias = "Safe")]
    Safe,
    /// Changes the project; asks first unless the user auto-approves edits.
    #[serde(alias = "Confirm")]
    Confirm,
    /// Touches a device or the outside world (send bytes, publish); needs "allow device
    /// control" and a confirmation every time.
    #[serde(alias = "DeviceGated")]
    DeviceGated,
    /// Destructive (restore a checkpoint, delete); always asks, never auto-approved.
    #[serde(alias = "AlwaysConfirm")]
    AlwaysConfirm,
    /// Never runs from an automated caller.
    #[serde(alias = "Blocked")]
    Blocked,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Safe => "Safe",
            Tier::Confirm => "Confirm",
            Tier::DeviceGated => "DeviceGated",
            Tier::AlwaysConfirm => "AlwaysConfirm",
            Tier::Blocked => "Blocked",
        }
    }
}

/// Machine-readable error codes (API clients match on them). Sent in camelCase like every
/// other value on the wire; the snake_case spellings of earlier versions are still read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ErrorCode {
    #[serde(alias = "unknown_command")]
    UnknownCommand,
    #[serde(alias = "invalid_params")]
    InvalidParams,
    /// The caller's settings or tier policy do not allow this command.
    #[serde(alias = "not_allowed")]
    NotAllowed,
    /// The user declined.
    Denied,
    /// The command ran and failed (a file could not be written, a port could not open…).
    Failed,
    /// The object the command names does not exist.
    #[serde(alias = "not_found")]
    NotFound,
    /// The request itself was malformed (API framing, oversize, bad JSON).
    #[serde(alias = "bad_request")]
    BadRequest,
    /// This very call needs a person's yes first (it runs a program, or writes outside the
    /// user's folders); the message says what to ask them. A door that can ask shows it
    /// and repeats the call approved; the others are refused with `notAllowed` instead.
    #[serde(alias = "needs_confirmation")]
    NeedsConfirmation,
}

/// A failed command: a code, a human message, and for invalid parameters the JSON path.
#[derive(
    Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize, schemars::JsonSchema,
)]
#[error("{message}")]
pub struct CommandError {
    pub code: ErrorCode,
    pub message: String,
    /// Path of the offending parameter, e.g. `dataset.alarms[0].min`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// With `needsConfirmation`: the question `message` words in English, as data, so a
    /// door can put it to the person in their language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Question>,
}

impl CommandError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CommandError {
            code,
            message: message.into(),
            path: None,
            question: None,
        }
    }
    pub fn failed(message: impl Into<String>) -> Self {
        CommandError::new(ErrorCode::Failed, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        CommandError::new(ErrorCode::NotFound, message)
    }
    pub fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        CommandError {
            code: ErrorCode::InvalidParams,
            message: message.into(),
            path: Some(path.into()),
            question: None,
        }
    }

    /// A call that needs the person's yes to `question` first.
    pub fn needs_confirmation(question: Question) -> Self {
        CommandError {
            code: ErrorCode::NeedsConfirmation,
            message: question.english(),
            path: None,
            question: Some(question),
        }
    }
}
