//! Registry commands as the pipeline's tools: [`RuntimeExecutor`] runs calls through a
//! [`Commands`] door, which is a [`Checkpointer`] via `assistant.checkpoint`.
//!
//! The runtime applies the caller's tier policy again on its side; that is deliberate
//! defence in depth. The executor tells it "a person approved" only when one did
//! ([`Authorization::by_person`]), never because a rule allowed the call.

use crate::Commands;
use serde_json::{json, Value};
use sextant_commands::{CommandDoor, Policy};

use crate::engine::pipeline::cancel::CancelToken;
use crate::engine::pipeline::context::{Authorization, CallContext};
use crate::engine::pipeline::exec::{Executor, ToolError, ToolInfo, ToolResultValue};
use crate::engine::pipeline::pre::BoxFuture;
use crate::engine::pipeline::tiers::Checkpointer;

/// Executes tool calls as registry commands. Tool names may use `_` for `.` (model APIs
/// reject dots), as the MCP door does.
#[derive(Clone)]
pub struct RuntimeExecutor {
    handle: Commands,
}

impl RuntimeExecutor {
    pub fn new(handle: impl CommandDoor + 'static) -> RuntimeExecutor {
        RuntimeExecutor {
            handle: std::sync::Arc::new(handle),
        }
    }

    fn command(&self, tool: &str) -> Option<&sextant_commands::CommandSpec> {
        let specs = self.handle.specs();
        specs
            .iter()
            .find(|s| s.name == tool)
            .or_else(|| specs.iter().find(|s| s.name.replace('.', "_") == tool))
    }
}

impl Executor for RuntimeExecutor {
    fn describe(&self, name: &str) -> Option<ToolInfo> {
        self.command(name).map(|s| ToolInfo::tier(s.tier))
    }

    /// A call that runs a program or writes outside the user's folders is AlwaysConfirm,
    /// whatever the command's tier: asked every time, never covered by "approve all". One
    /// that starts sends to a device is DeviceGated: asked every time, and refused while
    /// device control is off.
    fn assess(&self, name: &str, args: &Value) -> Option<ToolInfo> {
        let spec = self.command(name)?;
        Some(match self.handle.assess(&spec.name, args) {
            Some(needs) => ToolInfo {
                tier: spec.tier.max(needs.tier),
                needs_person: Some(needs.question),
            },
            None => ToolInfo::tier(spec.tier),
        })
    }

    fn execute<'a>(
        &'a self,
        ctx: &'a CallContext,
        auth: Authorization,
        cancel: CancelToken,
    ) -> BoxFuture<'a, ToolResultValue> {
        Box::pin(async move {
            let Some(command) = self.command(ctx.name()).map(|s| s.name.clone()) else {
                return Err(ToolError::failed(format!("unknown tool `{}`", ctx.name())));
            };
            let caller = ctx.caller();
            let args = ctx.args().clone();
            let call = async {
                if auth.by_person() {
                    self.handle
                        .call_approved(caller.caller, &command, args, caller.policy)
                        .await
                } else {
                    self.handle
                        .call(caller.caller, &command, args, caller.policy)
                        .await
                }
            };
            // A command already queued on the owner task still runs; cancelling only stops
            // waiting for its answer.
            tokio::select! {
                r = call => r.map_err(|e| ToolError::failed(format!("{:?}: {}", e.code, e.message)
                    + &e.path.map(|p| format!(" (at {p})")).unwrap_or_default())),
                _ = cancel.cancelled() => Err(ToolError::Cancelled(ctx.name().to_string())),
            }
        })
    }
}

impl<D: CommandDoor + ?Sized> Checkpointer for D {
    fn checkpoint<'a>(
        &'a self,
        ctx: &'a CallContext,
        label: String,
    ) -> BoxFuture<'a, Result<u64, String>> {
        Box::pin(async move {
            // `assistant.checkpoint` is Safe: any policy runs it.
            let v: Value = self
                .call(
                    ctx.caller().caller,
                    "assistant.checkpoint",
                    json!({ "label": label }),
                    Policy::default(),
                )
                .await
                .map_err(|e| e.message)?;
            v.get("id")
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("unexpected checkpoint answer {v}"))
        })
    }
}
