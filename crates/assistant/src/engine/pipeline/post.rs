//! Station 4 and 5: post-execute processors rewrite the result, then observers see it.
//!
//! Every call reaches these stations – executed, failed, denied or unknown – so audit and
//! context injection never have a hole. An error result stays an error through any
//! rewriting: its text always starts with `Error:`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::pipeline::context::CallContext;
use crate::engine::pipeline::Outcome;

/// How a call ended, as the model and the UI see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    Ok,
    /// The tool failed, panicked, timed out, or does not exist.
    Error,
    /// Pre-execute or a guard refused; the tool never ran.
    Denied,
    /// Post-execute blocked the result.
    Blocked,
}

/// The result that goes back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call's id.
    pub id: String,
    pub name: String,
    /// The text the model reads; starts with `Error:` whenever `status` is not `Ok`.
    pub content: String,
    /// The tool's value, when it ran and succeeded.
    pub value: Option<Value>,
    pub status: ResultStatus,
}

impl ToolResult {
    pub(crate) fn ok(ctx: &CallContext, value: Value) -> ToolResult {
        ToolResult {
            id: ctx.id().to_string(),
            name: ctx.name().to_string(),
            content: render(&value),
            value: Some(value),
            status: ResultStatus::Ok,
        }
    }

    pub(crate) fn error(ctx: &CallContext, status: ResultStatus, reason: &str) -> ToolResult {
        ToolResult {
            id: ctx.id().to_string(),
            name: ctx.name().to_string(),
            content: error_text(reason),
            value: None,
            status,
        }
    }

    pub fn is_error(&self) -> bool {
        self.status != ResultStatus::Ok
    }

    /// Applies a post-execute action.
    pub(crate) fn apply(&mut self, by: &str, action: PostAction) {
        match action {
            PostAction::Accept => {}
            PostAction::ReplaceContent(text) => self.set_content(text),
            PostAction::ReplaceValue(value) => {
                self.set_content(render(&value));
                if !self.is_error() {
                    self.value = Some(value);
                }
            }
            PostAction::Block(reason) => {
                self.status = ResultStatus::Blocked;
                self.value = None;
                self.content = error_text(&format!("blocked by {by}: {reason}"));
            }
        }
    }

    fn set_content(&mut self, text: String) {
        // A replacement cannot make a failure read like a success.
        self.content = if self.is_error() && !text.starts_with("Error:") {
            error_text(&text)
        } else {
            text
        };
    }
}

fn render(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// The one way error texts are spelled.
pub(crate) fn error_text(reason: &str) -> String {
    format!("Error: {reason}")
}

/// What a post-execute processor does with the result.
#[derive(Debug, Clone, PartialEq)]
pub enum PostAction {
    Accept,
    /// New text for the model (e.g. a trimmed or redacted rendering).
    ReplaceContent(String),
    /// A new value; the text is re-rendered from it. An error keeps its status.
    ReplaceValue(Value),
    /// Turns the result into a corrective error carrying the reason.
    Block(String),
}

/// A post-execute processor; processors run in order, each seeing the previous' output.
pub trait PostProcessor: Send + Sync {
    fn name(&self) -> &str;

    fn after(&self, ctx: &CallContext, result: &ToolResult) -> PostAction;
}

/// A final observer (audit, context injection, the UI's tool card): sees every outcome,
/// changes nothing.
pub trait Observer: Send + Sync {
    fn observe(&self, ctx: &CallContext, outcome: &Outcome);
}
