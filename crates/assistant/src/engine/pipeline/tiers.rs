//! The command safety tiers (spec 20) as pipeline members.
//!
//! The tier table itself is [`sextant_commands::Policy`]; these stations only apply it:
//!
//! - [`SafetyTierListener`] (pre-execute, meant to be last in the queue so user rules come
//!   first): Safe → Allow; Confirm → Ask unless edits are auto-approved; DeviceGated →
//!   Deny while device control is off, else Ask every time; AlwaysConfirm → Ask every time;
//!   Blocked → Deny.
//! - Guards, the backstop no listener order can get around: [`DeviceControlGuard`]
//!   (DeviceGated while device control is off), [`TierBlockGuard`] (Blocked), and
//!   [`PersonApprovalGuard`] (DeviceGated and AlwaysConfirm need this very call approved by
//!   a person, even if an earlier listener allowed it).
//! - [`CheckpointBeforeEdit`] (execute wrapper): a checkpoint before every Confirm call.
//!   The runtime also takes one inside `Runtime::execute` and drops it when nothing
//!   changed; this one goes through `assistant.checkpoint` so its id is known to the chat
//!   (the trace reports it, the chat log records "checkpoint created", restore can name it).

use sextant_commands::{Decision, Tier};

use crate::engine::pipeline::cancel::CancelToken;
use crate::engine::pipeline::context::{Authorization, CallContext, DenyReason};
use crate::engine::pipeline::exec::{
    ExecNext, ExecReport, ExecWrapper, ToolError, ToolResultValue,
};
use crate::engine::pipeline::guard::Guard;
use crate::engine::pipeline::pre::{BoxFuture, Next, PreDecision, PreListener, Step};

/// Applies the caller's tier policy in pre-execute.
#[derive(Debug, Clone, Copy, Default)]
pub struct SafetyTierListener;

impl PreListener for SafetyTierListener {
    fn name(&self) -> &str {
        "safety-tier"
    }

    fn decide(&self, ctx: &CallContext, next: Next) -> Step {
        let Some(tier) = ctx.tier() else {
            return next.defer();
        };
        let policy = ctx.policy();
        let prompt = match ctx.needs_person() {
            Some(question) => format!(
                "`{}` ({}): {}",
                ctx.name(),
                tier.as_str(),
                question.english()
            ),
            None => format!("`{}` ({})", ctx.name(), tier.as_str()),
        };
        match (policy.decide(tier), tier) {
            (Decision::Run, _) => PreDecision::Allow,
            (Decision::Deny, _) => PreDecision::deny(policy.denial_reason(tier)),
            // Device control is consent to be asked, and destructive steps are never
            // approved in advance: both ask every time.
            (Decision::Ask, Tier::DeviceGated | Tier::AlwaysConfirm) => {
                PreDecision::ask_every_time(prompt)
            }
            (Decision::Ask, _) => PreDecision::ask(prompt),
        }
        .into()
    }
}

/// Denies DeviceGated calls while "allow device control" is off.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceControlGuard;

impl Guard for DeviceControlGuard {
    fn name(&self) -> &str {
        "device-control"
    }

    fn check(&self, ctx: &CallContext, _auth: Authorization) -> Option<DenyReason> {
        (ctx.tier() == Some(Tier::DeviceGated) && !ctx.policy().allow_device_control)
            .then(|| DenyReason::new(ctx.policy().denial_reason(Tier::DeviceGated)))
    }
}

/// Denies Blocked calls, whoever allowed them.
#[derive(Debug, Clone, Copy, Default)]
pub struct TierBlockGuard;

impl Guard for TierBlockGuard {
    fn name(&self) -> &str {
        "blocked-tier"
    }

    fn check(&self, ctx: &CallContext, _auth: Authorization) -> Option<DenyReason> {
        (ctx.tier() == Some(Tier::Blocked))
            .then(|| DenyReason::new(ctx.policy().denial_reason(Tier::Blocked)))
    }
}

/// DeviceGated and AlwaysConfirm calls that the policy says must be asked run only when a
/// person approved this very call – an allow rule earlier in the queue is not enough.
#[derive(Debug, Clone, Copy, Default)]
pub struct PersonApprovalGuard;

impl Guard for PersonApprovalGuard {
    fn name(&self) -> &str {
        "person-approval"
    }

    fn check(&self, ctx: &CallContext, auth: Authorization) -> Option<DenyReason> {
        let tier = ctx.tier()?;
        let must_ask = matches!(tier, Tier::DeviceGated | Tier::AlwaysConfirm)
            && ctx.policy().decide(tier) == Decision::Ask;
        (must_ask && auth != Authorization::ApprovedOnce).then(|| {
            DenyReason::new(format!(
                "`{}` ({}) needs a person to approve this very call",
                ctx.name(),
                tier.as_str()
            ))
        })
    }
}

/// Takes a named checkpoint of the project.
pub trait Checkpointer: Send + Sync {
    /// The checkpoint's id, or why none could be taken.
    fn checkpoint<'a>(
        &'a self,
        ctx: &'a CallContext,
        label: String,
    ) -> BoxFuture<'a, Result<u64, String>>;
}

/// A checkpoint before every Confirm call; no checkpoint, no edit.
pub struct CheckpointBeforeEdit<C> {
    checkpointer: C,
}

impl<C: Checkpointer> CheckpointBeforeEdit<C> {
    pub fn new(checkpointer: C) -> CheckpointBeforeEdit<C> {
        CheckpointBeforeEdit { checkpointer }
    }
}

impl<C: Checkpointer> ExecWrapper for CheckpointBeforeEdit<C> {
    fn wrap<'a>(
        &'a self,
        ctx: &'a CallContext,
        report: &'a ExecReport,
        cancel: CancelToken,
        next: ExecNext<'a>,
    ) -> BoxFuture<'a, ToolResultValue> {
        Box::pin(async move {
            if ctx.tier() == Some(Tier::Confirm) {
                let label = format!("before {}", ctx.name());
                match self.checkpointer.checkpoint(ctx, label).await {
                    Ok(id) => report.checkpoint_taken(id),
                    Err(e) => {
                        return Err(ToolError::failed(format!(
                            "could not take a checkpoint before `{}` ({e}); nothing was changed",
                            ctx.name()
                        )))
                    }
                }
            }
            next.run(cancel).await
        })
    }
}
