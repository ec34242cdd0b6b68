//! Calling the commands from outside the process that owns them: who is calling
//! ([`Caller`]), and the [`CommandDoor`] every door that calls commands on someone's behalf
//! (the assistant, MCP) talks to.
//!
//! A door needs only this: the command specs (to list tools), the question a call needs a
//! person's yes to (to ask before calling), and one way to call, with or without that yes
//! ([`CommandDoor::call_as`]; `call` and `call_approved` are provided from it).
//! Depending on the trait rather than on the workspace runtime keeps a door free of
//! everything behind it – device drivers, the sessions database – and lets its tests drive
//! it with any implementation.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::{CommandError, CommandSpec, Policy};

/// A boxed future, as trait methods return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who is calling, for logs and for door-specific rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Ui,
    Api,
    Mcp,
    Cli,
    Assistant,
}

/// What one call needs beyond its command's tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    /// The question to put to the person (`english()` words it).
    pub question: crate::Question,
    /// The tier to treat this call as: at least AlwaysConfirm (asked every time, never
    /// covered by "approve all"); DeviceGated when it touches a device, so it also needs
    /// "allow device control".
    pub tier: crate::Tier,
}

/// A shared door is a door.
impl<T: CommandDoor + ?Sized> CommandDoor for std::sync::Arc<T> {
    fn specs(&self) -> &[CommandSpec] {
        (**self).specs()
    }

    fn assess(&self, command: &str, params: &Value) -> Option<Assessment> {
        (**self).assess(command, params)
    }

    fn call_as<'a>(
        &'a self,
        caller: Caller,
        command: &'a str,
        params: Value,
        policy: Policy,
        approved: bool,
    ) -> BoxFuture<'a, Result<Value, CommandError>> {
        (**self).call_as(caller, command, params, policy, approved)
    }
}

/// The commands as a door sees them. Implemented by the workspace runtime's handle.
pub trait CommandDoor: Send + Sync {
    /// Every command, in registration order.
    fn specs(&self) -> &[CommandSpec];

    /// What a person must say yes to before this call may run (it runs a program, writes
    /// outside the user's folders, starts sends to a device…); `None` when the call's tier
    /// alone decides. The owner checks again when the call runs.
    fn assess(&self, command: &str, params: &Value) -> Option<Assessment>;

    /// Calls `command` under `policy`; `approved` says a person said yes to this very call.
    /// The one call a door implements: [`call`](Self::call) and
    /// [`call_approved`](Self::call_approved) are this with the answer spelt out, so a door
    /// that wraps another forwards one method, not two that differ by a flag.
    fn call_as<'a>(
        &'a self,
        caller: Caller,
        command: &'a str,
        params: Value,
        policy: Policy,
        approved: bool,
    ) -> BoxFuture<'a, Result<Value, CommandError>>;

    /// Calls `command` under `policy`; nobody was asked.
    fn call<'a>(
        &'a self,
        caller: Caller,
        command: &'a str,
        params: Value,
        policy: Policy,
    ) -> BoxFuture<'a, Result<Value, CommandError>> {
        self.call_as(caller, command, params, policy, false)
    }

    /// Calls `command` after a person said yes to this very call.
    fn call_approved<'a>(
        &'a self,
        caller: Caller,
        command: &'a str,
        params: Value,
        policy: Policy,
    ) -> BoxFuture<'a, Result<Value, CommandError>> {
        self.call_as(caller, command, params, policy, true)
    }
}
