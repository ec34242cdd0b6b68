//! The tool execution pipeline (spec 30, Part B): tools only execute; all policy sits at
//! fixed stations of one pipeline, always in this order:
//!
//! 1. **pre-execute waterfall** ([`PreListener`]): the first listener that decides wins;
//!    `Ask` goes to the [`Approver`] (no approver: denied). Listeners get the call by
//!    shared reference and cannot rewrite its arguments.
//! 2. **guards** ([`Guard`]): asked only when pre-execute let the call through; all of
//!    them, in any order; they can only deny.
//! 3. **execute wrappers** ([`ExecWrapper`]) around the [`Executor`]: timeouts, retries,
//!    metrics, checkpoints.
//! 4. **post-execute** ([`PostProcessor`]): accept, replace content or value, or block.
//! 5. **observers** ([`Observer`]): audit and friends.
//!
//! Denials (every reason from pre-execute and guards, collected in one list), tool errors,
//! panics, timeouts and unknown tools all become a [`ToolResult`] whose text starts with
//! `Error:`. The tool body never runs for a denial, but the result still goes through
//! post-execute and the observers, so the loop never stalls and the audit has no hole.
//!
//! Pre-execute listeners cannot change the arguments – `ctx` is a shared reference to a
//! type without setters. Reading them compiles:
//!
//! ```
//! use sextant_assistant::pipeline::{CallContext, Next, PreDecision, PreListener, Step};
//!
//! struct NoRootRemove;
//! impl PreListener for NoRootRemove {
//!     fn name(&self) -> &str { "no-root-remove" }
//!     fn decide(&self, ctx: &CallContext, next: Next) -> Step {
//!         if ctx.args()["path"] == "/" {
//!             return PreDecision::deny("not the root folder").into();
//!         }
//!         next.defer()
//!     }
//! }
//! ```
//!
//! Writing them does not:
//!
//! ```compile_fail
//! use sextant_assistant::pipeline::{CallContext, Next, PreListener, Step};
//!
//! struct Rewriter;
//! impl PreListener for Rewriter {
//!     fn name(&self) -> &str { "rewriter" }
//!     fn decide(&self, ctx: &CallContext, next: Next) -> Step {
//!         *ctx.args_mut() = serde_json::json!({"path": "/"}); // no such access exists
//!         next.defer()
//!     }
//! }
//! ```
//!
//! ```compile_fail
//! use sextant_assistant::pipeline::{CallContext, Next, PreListener, Step};
//!
//! struct Rewriter;
//! impl PreListener for Rewriter {
//!     fn name(&self) -> &str { "rewriter" }
//!     fn decide(&self, ctx: &CallContext, next: Next) -> Step {
//!         ctx.call.args = serde_json::json!({"path": "/"}); // private, and behind `&`
//!         next.defer()
//!     }
//! }
//! ```

mod cancel;
mod context;
mod exec;
mod guard;
mod post;
mod pre;
mod runtime;
mod tiers;

pub use cancel::CancelToken;
pub use context::{Authorization, CallContext, CallerInfo, DenyReason, ToolCall};
pub use exec::{
    ExecFacts, ExecNext, ExecReport, ExecWrapper, Executor, Metrics, Retry, Timeout, Tool, ToolBox,
    ToolError, ToolInfo, ToolResultValue,
};
pub use guard::Guard;
pub use post::{Observer, PostAction, PostProcessor, ResultStatus, ToolResult};
pub use pre::{Approval, Approver, AskRequest, BoxFuture, Next, PreDecision, PreListener, Step};
pub use runtime::RuntimeExecutor;
pub use tiers::{
    CheckpointBeforeEdit, Checkpointer, DeviceControlGuard, PersonApprovalGuard,
    SafetyTierListener, TierBlockGuard,
};

use std::sync::Arc;

use post::error_text;

/// What happened to one call, for observers and tests.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub result: ToolResult,
    pub trace: Trace,
}

/// The path a call took through the stations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The tool was not known; no station before post-execute ran.
    pub unknown_tool: bool,
    /// The listener whose decision won, if any.
    pub decided_by: Option<String>,
    pub decision: Option<PreDecision>,
    /// The approver was asked (a prompt was shown or a remembered answer consulted).
    pub asked: Option<Approval>,
    /// How pre-execute let the call through.
    pub authorization: Option<Authorization>,
    pub guards_asked: bool,
    /// Every reason the call was refused, from pre-execute and the guards.
    pub denials: Vec<DenyReason>,
    /// The execute stage was entered (wrappers and tool).
    pub executed: bool,
    pub exec: ExecFacts,
}

/// One pipeline; cheap to share behind an `Arc`.
pub struct Pipeline {
    executor: Arc<dyn Executor>,
    pre: Vec<Arc<dyn PreListener>>,
    guards: Vec<Arc<dyn Guard>>,
    wrappers: Vec<Arc<dyn ExecWrapper>>,
    post: Vec<Arc<dyn PostProcessor>>,
    observers: Vec<Arc<dyn Observer>>,
    approver: Option<Arc<dyn Approver>>,
    undecided: PreDecision,
}

impl Pipeline {
    /// An empty pipeline. When no listener decides, the call is treated as `Ask`: nothing
    /// runs that no rule and no person let through.
    pub fn new(executor: impl Executor + 'static) -> Pipeline {
        Pipeline {
            executor: Arc::new(executor),
            pre: Vec::new(),
            guards: Vec::new(),
            wrappers: Vec::new(),
            post: Vec::new(),
            observers: Vec::new(),
            approver: None,
            undecided: PreDecision::ask("no rule decided about this call"),
        }
    }

    /// Queues a pre-execute listener after those already queued.
    pub fn pre(mut self, listener: impl PreListener + 'static) -> Pipeline {
        self.pre.push(Arc::new(listener));
        self
    }

    pub fn guard(mut self, guard: impl Guard + 'static) -> Pipeline {
        self.guards.push(Arc::new(guard));
        self
    }

    /// Adds an execute wrapper inside those already added (the first is outermost).
    pub fn wrap(mut self, wrapper: impl ExecWrapper + 'static) -> Pipeline {
        self.wrappers.push(Arc::new(wrapper));
        self
    }

    pub fn post(mut self, processor: impl PostProcessor + 'static) -> Pipeline {
        self.post.push(Arc::new(processor));
        self
    }

    pub fn observe(mut self, observer: impl Observer + 'static) -> Pipeline {
        self.observers.push(Arc::new(observer));
        self
    }

    pub fn approver(mut self, approver: impl Approver + 'static) -> Pipeline {
        self.approver = Some(Arc::new(approver));
        self
    }

    /// What counts when every listener deferred (default: ask).
    pub fn when_undecided(mut self, decision: PreDecision) -> Pipeline {
        self.undecided = decision;
        self
    }

    /// The standard tier stations: the safety-tier listener last in the queue, the tier
    /// guards, and a checkpoint before every Confirm call.
    pub fn with_safety_tiers(self, checkpointer: impl Checkpointer + 'static) -> Pipeline {
        self.pre(SafetyTierListener)
            .guard(DeviceControlGuard)
            .guard(TierBlockGuard)
            .guard(PersonApprovalGuard)
            .wrap(CheckpointBeforeEdit::new(checkpointer))
    }

    pub async fn run(&self, call: ToolCall, caller: CallerInfo) -> Outcome {
        self.run_with_cancel(call, caller, CancelToken::new()).await
    }

    pub async fn run_with_cancel(
        &self,
        call: ToolCall,
        caller: CallerInfo,
        cancel: CancelToken,
    ) -> Outcome {
        let info = self.executor.assess(&call.name, &call.args);
        let ctx = CallContext::new(call, caller, info.clone());
        let mut trace = Trace::default();
        let mut result = if info.is_none() {
            trace.unknown_tool = true;
            ToolResult::error(
                &ctx,
                ResultStatus::Error,
                &format!(
                    "unknown tool `{}`; list the available tools and call one of them",
                    ctx.name()
                ),
            )
        } else {
            self.decide_and_execute(&ctx, &mut trace, cancel).await
        };
        for p in &self.post {
            let action = p.after(&ctx, &result);
            result.apply(p.name(), action);
        }
        let outcome = Outcome { result, trace };
        for o in &self.observers {
            o.observe(&ctx, &outcome);
        }
        outcome
    }

    async fn decide_and_execute(
        &self,
        ctx: &CallContext,
        trace: &mut Trace,
        cancel: CancelToken,
    ) -> ToolResult {
        // One list for every refusal, whichever station it came from.
        let mut denials: Vec<DenyReason> = Vec::new();
        let pre = pre::waterfall(&self.pre, ctx, &self.undecided);
        trace.decided_by = pre.decided_by;
        trace.decision = Some(pre.decision.clone());
        let auth = match pre.decision {
            PreDecision::Allow => Some(Authorization::Allowed),
            PreDecision::Deny(reason) => {
                denials.push(reason);
                None
            }
            PreDecision::Ask(request) => match &self.approver {
                None => {
                    denials.push(DenyReason::new(format!(
                        "`{}` needs a person's approval ({}) and nobody can be asked here",
                        ctx.name(),
                        request.prompt
                    )));
                    None
                }
                Some(approver) => {
                    let answer = approver.ask(ctx, &request).await;
                    trace.asked = Some(answer.clone());
                    match answer {
                        Approval::AllowedOnce => Some(Authorization::ApprovedOnce),
                        Approval::RememberedAllow if !request.every_time => {
                            Some(Authorization::Remembered)
                        }
                        Approval::RememberedAllow => {
                            denials.push(DenyReason::new(format!(
                                "`{}` needs a fresh approval every time; a remembered one does not count",
                                ctx.name()
                            )));
                            None
                        }
                        Approval::Denied(why) => {
                            denials.push(DenyReason::new(match why {
                                Some(why) => format!("the user declined: {why}"),
                                None => "the user declined".to_string(),
                            }));
                            None
                        }
                    }
                }
            },
        };
        trace.authorization = auth;
        let Some(auth) = auth else {
            return denied(ctx, trace, denials);
        };
        trace.guards_asked = true;
        denials.extend(self.guards.iter().filter_map(|g| g.check(ctx, auth)));
        if !denials.is_empty() {
            return denied(ctx, trace, denials);
        }
        trace.executed = true;
        let report = ExecReport::default();
        let next = ExecNext {
            wrappers: &self.wrappers,
            executor: self.executor.as_ref(),
            ctx,
            auth,
            report: &report,
        };
        let value = next.run(cancel).await;
        trace.exec = report.facts();
        match value {
            Ok(v) => ToolResult::ok(ctx, v),
            Err(e) => ToolResult::error(ctx, ResultStatus::Error, &e.to_string()),
        }
    }
}

fn denied(ctx: &CallContext, trace: &mut Trace, denials: Vec<DenyReason>) -> ToolResult {
    let reasons: Vec<&str> = denials.iter().map(|d| d.0.as_str()).collect();
    let mut r = ToolResult::error(
        ctx,
        ResultStatus::Denied,
        &format!("denied: {}", reasons.join("; ")),
    );
    debug_assert!(r.content.starts_with(&error_text("")));
    r.value = None;
    trace.denials = denials;
    r
}
