//! Station 3: the tool, the executor that finds it, and the wrappers around execution.
//!
//! A [`Tool`] only executes and returns a JSON value. An [`Executor`] knows which tools
//! exist and their tiers: [`ToolBox`] holds closures, [`crate::engine::pipeline::RuntimeExecutor`]
//! runs registry commands. [`ExecWrapper`]s sit around the execution (timeouts, retries,
//! metrics, checkpoints): each gets the immutable call, may hand the inner layers a
//! different [`CancelToken`], and calls [`ExecNext::run`] zero or more times. The call and
//! its caller are fixed by the pipeline; `run` takes nothing else, so a wrapper cannot
//! change who is calling or with what.
//!
//! Panics in a tool are caught here and become [`ToolError::Panicked`].

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::Value;
use sextant_commands::Tier;

use crate::engine::pipeline::cancel::CancelToken;
use crate::engine::pipeline::context::{Authorization, CallContext};
use crate::engine::pipeline::pre::BoxFuture;

/// How a tool failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    #[error("{0}")]
    Failed(String),
    #[error("`{tool}` timed out after {after:?}")]
    Timeout { tool: String, after: Duration },
    #[error("`{tool}` crashed: {message}")]
    Panicked { tool: String, message: String },
    #[error("`{0}` was cancelled")]
    Cancelled(String),
}

impl ToolError {
    pub fn failed(message: impl Into<String>) -> ToolError {
        ToolError::Failed(message.into())
    }
}

pub type ToolResultValue = Result<Value, ToolError>;

/// A tool: executes a call and returns a value. No policy lives here.
pub trait Tool: Send + Sync {
    fn call<'a>(
        &'a self,
        ctx: &'a CallContext,
        cancel: CancelToken,
    ) -> BoxFuture<'a, ToolResultValue>;
}

/// Any `Fn(args) -> Result<Value, ToolError>` is a synchronous tool.
impl<F> Tool for F
where
    F: Fn(&Value) -> ToolResultValue + Send + Sync,
{
    fn call<'a>(
        &'a self,
        ctx: &'a CallContext,
        _cancel: CancelToken,
    ) -> BoxFuture<'a, ToolResultValue> {
        Box::pin(async move { self(ctx.args()) })
    }
}

/// What the pipeline needs to know about a tool before running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolInfo {
    pub tier: Tier,
    /// This very call needs a person's yes, whatever the tool's tier says (it runs a
    /// program, or writes outside the user's folders): the question to ask them.
    pub needs_person: Option<sextant_commands::Question>,
}

impl ToolInfo {
    /// A tool whose tier alone decides.
    pub fn tier(tier: Tier) -> ToolInfo {
        ToolInfo {
            tier,
            needs_person: None,
        }
    }
}

/// Knows the tools and runs them.
pub trait Executor: Send + Sync {
    /// `None`: no such tool.
    fn describe(&self, name: &str) -> Option<ToolInfo>;

    /// What this very call needs; by default what the tool needs. An executor whose calls
    /// can run a program or write files where the arguments say overrides this, so such a
    /// call is asked about every time.
    fn assess(&self, name: &str, _args: &serde_json::Value) -> Option<ToolInfo> {
        self.describe(name)
    }

    /// Runs a call pre-execute and the guards let through. `auth` tells an executor that
    /// re-checks tiers (the runtime does) whether a person approved the call.
    fn execute<'a>(
        &'a self,
        ctx: &'a CallContext,
        auth: Authorization,
        cancel: CancelToken,
    ) -> BoxFuture<'a, ToolResultValue>;
}

/// Tools registered by name with a tier.
#[derive(Default, Clone)]
pub struct ToolBox {
    tools: HashMap<String, (Tier, Arc<dyn Tool>)>,
}

impl ToolBox {
    pub fn new() -> ToolBox {
        ToolBox::default()
    }

    pub fn with(mut self, name: &str, tier: Tier, tool: impl Tool + 'static) -> ToolBox {
        self.tools.insert(name.to_string(), (tier, Arc::new(tool)));
        self
    }
}

impl Executor for ToolBox {
    fn describe(&self, name: &str) -> Option<ToolInfo> {
        self.tools.get(name).map(|(tier, _)| ToolInfo::tier(*tier))
    }

    fn execute<'a>(
        &'a self,
        ctx: &'a CallContext,
        _auth: Authorization,
        cancel: CancelToken,
    ) -> BoxFuture<'a, ToolResultValue> {
        match self.tools.get(ctx.name()) {
            Some((_, tool)) => tool.call(ctx, cancel),
            None => {
                let e = ToolError::failed(format!("unknown tool `{}`", ctx.name()));
                Box::pin(async move { Err(e) })
            }
        }
    }
}

/// Facts the wrappers record about one execution, reported in the pipeline's outcome.
#[derive(Debug, Default)]
pub struct ExecReport {
    inner: Mutex<ExecFacts>,
}

/// See [`ExecReport`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExecFacts {
    /// How often the tool body was entered.
    pub attempts: u32,
    /// The checkpoint taken before the call (Confirm tier).
    pub checkpoint: Option<u64>,
}

impl ExecReport {
    pub fn checkpoint_taken(&self, id: u64) {
        self.lock().checkpoint = Some(id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ExecFacts> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn facts(&self) -> ExecFacts {
        self.lock().clone()
    }
}

/// The remaining layers: the wrappers after this one, then the tool.
pub struct ExecNext<'a> {
    pub(crate) wrappers: &'a [Arc<dyn ExecWrapper>],
    pub(crate) executor: &'a dyn Executor,
    pub(crate) ctx: &'a CallContext,
    pub(crate) auth: Authorization,
    pub(crate) report: &'a ExecReport,
}

impl<'a> ExecNext<'a> {
    /// Runs the inner layers with `cancel` as their cancellation signal. May be called
    /// again (a retry).
    pub fn run(&self, cancel: CancelToken) -> BoxFuture<'a, ToolResultValue> {
        match self.wrappers.split_first() {
            Some((outer, rest)) => {
                let next = ExecNext {
                    wrappers: rest,
                    executor: self.executor,
                    ctx: self.ctx,
                    auth: self.auth,
                    report: self.report,
                };
                let outer: &'a dyn ExecWrapper = outer.as_ref();
                let (ctx, report) = (self.ctx, self.report);
                Box::pin(async move { outer.wrap(ctx, report, cancel, next).await })
            }
            None => {
                self.report.lock().attempts += 1;
                let ctx = self.ctx;
                let body = self.executor.execute(ctx, self.auth, cancel);
                Box::pin(async move {
                    CatchUnwind(body).await.unwrap_or_else(|message| {
                        Err(ToolError::Panicked {
                            tool: ctx.name().to_string(),
                            message,
                        })
                    })
                })
            }
        }
    }
}

/// A layer around execution.
pub trait ExecWrapper: Send + Sync {
    fn wrap<'a>(
        &'a self,
        ctx: &'a CallContext,
        report: &'a ExecReport,
        cancel: CancelToken,
        next: ExecNext<'a>,
    ) -> BoxFuture<'a, ToolResultValue>;
}

/// Polls a future, turning a panic into `Err(message)`.
struct CatchUnwind<'a>(BoxFuture<'a, ToolResultValue>);

impl Future for CatchUnwind<'_> {
    type Output = Result<ToolResultValue, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(r)) => Poll::Ready(Ok(r)),
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "panic without a message".to_string());
                Poll::Ready(Err(message))
            }
        }
    }
}

/// Gives up after `limit`, cancelling the tool's signal (a child of the caller's).
pub struct Timeout {
    pub limit: Duration,
}

impl ExecWrapper for Timeout {
    fn wrap<'a>(
        &'a self,
        ctx: &'a CallContext,
        _report: &'a ExecReport,
        cancel: CancelToken,
        next: ExecNext<'a>,
    ) -> BoxFuture<'a, ToolResultValue> {
        Box::pin(async move {
            let mine = cancel.child();
            match tokio::time::timeout(self.limit, next.run(mine.clone())).await {
                Ok(r) => r,
                Err(_) => {
                    mine.cancel();
                    Err(ToolError::Timeout {
                        tool: ctx.name().to_string(),
                        after: self.limit,
                    })
                }
            }
        })
    }
}

/// Retries failed or timed-out Safe (read-only) calls; never a mutation, never a panic.
pub struct Retry {
    pub attempts: u32,
}

impl ExecWrapper for Retry {
    fn wrap<'a>(
        &'a self,
        ctx: &'a CallContext,
        _report: &'a ExecReport,
        cancel: CancelToken,
        next: ExecNext<'a>,
    ) -> BoxFuture<'a, ToolResultValue> {
        Box::pin(async move {
            let mut left = self.attempts.max(1);
            loop {
                left -= 1;
                let r = next.run(cancel.clone()).await;
                let transient = matches!(r, Err(ToolError::Failed(_) | ToolError::Timeout { .. }));
                if !transient
                    || left == 0
                    || ctx.tier() != Some(Tier::Safe)
                    || cancel.is_cancelled()
                {
                    return r;
                }
            }
        })
    }
}

/// Counts calls, failures and time spent.
#[derive(Debug, Default)]
pub struct Metrics {
    pub calls: AtomicU64,
    pub failures: AtomicU64,
    pub micros: AtomicU64,
}

impl ExecWrapper for Arc<Metrics> {
    fn wrap<'a>(
        &'a self,
        _ctx: &'a CallContext,
        _report: &'a ExecReport,
        cancel: CancelToken,
        next: ExecNext<'a>,
    ) -> BoxFuture<'a, ToolResultValue> {
        Box::pin(async move {
            let start = std::time::Instant::now();
            let r = next.run(cancel).await;
            self.calls.fetch_add(1, Ordering::Relaxed);
            if r.is_err() {
                self.failures.fetch_add(1, Ordering::Relaxed);
            }
            let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.micros.fetch_add(us, Ordering::Relaxed);
            r
        })
    }
}
