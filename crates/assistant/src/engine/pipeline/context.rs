//! The call every station sees: what the model asked for, who asked, and the tool's tier.
//!
//! A [`CallContext`] is built once by the pipeline and handed to the stations only by
//! shared reference. Its fields are private and it has no setters, so no listener, guard
//! or wrapper can rewrite the arguments or the caller: the call was already logged and its
//! pending card rendered with exactly these values.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sextant_commands::Caller;
use sextant_commands::{Policy, Tier};

/// One tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; the result carries it back.
    pub id: String,
    pub name: String,
    pub args: Value,
}

/// Who makes the call and under which settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CallerInfo {
    pub caller: Caller,
    /// The chat the call belongs to, for audit.
    pub chat: Option<i64>,
    /// The user's settings the tiers depend on (auto-approve edits, allow device control).
    pub policy: Policy,
}

impl CallerInfo {
    /// The assistant in an interactive chat with the given settings.
    pub fn assistant(policy: Policy) -> CallerInfo {
        CallerInfo {
            caller: Caller::Assistant,
            chat: None,
            policy,
        }
    }
}

/// The immutable context of one call.
#[derive(Debug)]
pub struct CallContext {
    call: ToolCall,
    caller: CallerInfo,
    tier: Option<Tier>,
    needs_person: Option<sextant_commands::Question>,
}

impl CallContext {
    pub(crate) fn new(
        call: ToolCall,
        caller: CallerInfo,
        info: Option<crate::engine::pipeline::ToolInfo>,
    ) -> CallContext {
        let (tier, needs_person) = match info {
            Some(i) => (Some(i.tier), i.needs_person),
            None => (None, None),
        };
        CallContext {
            call,
            caller,
            tier,
            needs_person,
        }
    }

    pub fn id(&self) -> &str {
        &self.call.id
    }

    pub fn name(&self) -> &str {
        &self.call.name
    }

    pub fn args(&self) -> &Value {
        &self.call.args
    }

    pub fn call(&self) -> &ToolCall {
        &self.call
    }

    pub fn caller(&self) -> &CallerInfo {
        &self.caller
    }

    pub fn policy(&self) -> Policy {
        self.caller.policy
    }

    /// The tool's safety tier; `None` for a tool the executor does not know.
    pub fn tier(&self) -> Option<Tier> {
        self.tier
    }

    /// Why this very call needs a person's yes beyond its tool's tier (it runs a program,
    /// or writes outside the user's folders), as the question to ask them.
    pub fn needs_person(&self) -> Option<&sextant_commands::Question> {
        self.needs_person.as_ref()
    }
}

/// Why a call was refused. Stations collect these; the result's text carries them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyReason(pub String);

impl DenyReason {
    pub fn new(reason: impl Into<String>) -> DenyReason {
        DenyReason(reason.into())
    }
}

impl std::fmt::Display for DenyReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How pre-execute let a call through; guards and the executor may read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Authorization {
    /// A listener allowed it without asking anybody.
    Allowed,
    /// A person approved this very call.
    ApprovedOnce,
    /// A remembered approval of the person applied.
    Remembered,
}

impl Authorization {
    /// Whether a person said yes (now or earlier), as opposed to a rule.
    pub fn by_person(self) -> bool {
        !matches!(self, Authorization::Allowed)
    }
}
