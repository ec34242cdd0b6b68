//! Station 1, the pre-execute waterfall: queued listeners that may veto, allow or ask.
//!
//! Each listener gets the call (by shared reference – it cannot rewrite the arguments) and
//! a [`Next`]. It either decides ([`PreDecision`]) or defers with [`Next::defer`]. The
//! pipeline walks the queue itself, so the first listener that decides wins and no
//! listener ever sees, let alone overrides, what a later one would have said: the stage
//! is order-sensitive by design, and the order is the queue's.
//!
//! `Ask` goes to the [`Approver`]; only `AllowedOnce` (or a remembered allow, where the
//! asking listener permits one) lets the call proceed. Without an approver, `Ask` is a
//! denial.

use std::future::Future;
use std::pin::Pin;

use crate::engine::pipeline::context::{CallContext, DenyReason};

/// A boxed `Send` future, so the stations can be trait objects.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a pre-execute listener decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreDecision {
    Allow,
    Deny(DenyReason),
    /// Ask a person.
    Ask(AskRequest),
}

impl PreDecision {
    pub fn deny(reason: impl Into<String>) -> PreDecision {
        PreDecision::Deny(DenyReason::new(reason))
    }

    /// Ask, accepting a remembered approval.
    pub fn ask(prompt: impl Into<String>) -> PreDecision {
        PreDecision::Ask(AskRequest {
            prompt: prompt.into(),
            every_time: false,
        })
    }

    /// Ask now, even if the person approved this tool before.
    pub fn ask_every_time(prompt: impl Into<String>) -> PreDecision {
        PreDecision::Ask(AskRequest {
            prompt: prompt.into(),
            every_time: true,
        })
    }
}

/// What to ask the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskRequest {
    pub prompt: String,
    /// A remembered approval does not count (destructive and device commands).
    pub every_time: bool,
}

/// A listener's answer: a decision, or "not mine" obtained from [`Next::defer`].
#[derive(Debug)]
pub struct Step(pub(crate) Option<PreDecision>);

impl From<PreDecision> for Step {
    fn from(d: PreDecision) -> Step {
        Step(Some(d))
    }
}

/// The rest of the queue. Deferring consumes it; it cannot be run by the listener, so a
/// listener cannot observe or override later listeners.
#[derive(Debug)]
pub struct Next {
    _private: (),
}

impl Next {
    pub(crate) fn new() -> Next {
        Next { _private: () }
    }

    /// Leave the decision to the next listener.
    pub fn defer(self) -> Step {
        Step(None)
    }
}

/// A pre-execute listener.
pub trait PreListener: Send + Sync {
    /// A short name for traces and audit.
    fn name(&self) -> &str;

    fn decide(&self, ctx: &CallContext, next: Next) -> Step;
}

/// What the person answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    AllowedOnce,
    /// The person approved this kind of call before and said to remember it.
    RememberedAllow,
    Denied(Option<String>),
}

/// The channel to a person: the desktop's approval dialog, a test double.
pub trait Approver: Send + Sync {
    fn ask<'a>(&'a self, ctx: &'a CallContext, request: &'a AskRequest) -> BoxFuture<'a, Approval>;
}

/// Where pre-execute ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PreOutcome {
    /// The deciding listener, `None` when nobody decided.
    pub decided_by: Option<String>,
    pub decision: PreDecision,
}

/// Walks the queue: the first decision wins; nobody deciding yields `undecided`.
pub(crate) fn waterfall(
    listeners: &[std::sync::Arc<dyn PreListener>],
    ctx: &CallContext,
    undecided: &PreDecision,
) -> PreOutcome {
    for l in listeners {
        if let Step(Some(decision)) = l.decide(ctx, Next::new()) {
            return PreOutcome {
                decided_by: Some(l.name().to_string()),
                decision,
            };
        }
    }
    PreOutcome {
        decided_by: None,
        decision: undecided.clone(),
    }
}
