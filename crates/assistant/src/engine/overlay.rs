//! The one overlay door: the commands of an inner door plus a mechanism's own few.
//!
//! A mechanism that gives the model a command of its own (memory's
//! `assistant.memory.propose`, skills' `meta.loadSkill`, the archive's
//! `assistant.sessions.search` / `cite`) declares only a table of [`Extra`]s – each a spec,
//! whether discovery names it, and a handler – over its state `M`. [`Overlay`] does the
//! rest, the same way for all of them:
//!
//! - `specs`: the inner door's, then the extras', in table order (built once);
//! - `assess`: an extra needs nobody's yes (they are Safe); anything else, the inner door;
//! - a call of an extra goes to its handler (approved or not: it asks no one), anything else
//!   to the inner door – and, for a listed extra, `meta.describeCommand` of it answers its
//!   spec and `meta.listCommands` names it after the inner door's list (when its name
//!   starts with the `prefix` asked for).

use serde_json::{json, Value};
use sextant_commands::{
    Assessment, BoxFuture, Caller, CommandDoor, CommandError, CommandSpec, Policy,
};

use crate::Commands;

/// An extra command's handler: the mechanism's state and the call's params.
pub type Handler<M> = for<'a> fn(&'a M, Value) -> BoxFuture<'a, Result<Value, CommandError>>;

/// One command a mechanism adds.
pub struct Extra<M> {
    pub spec: CommandSpec,
    /// Named by `meta.listCommands` and answered by `meta.describeCommand`.
    pub listed: bool,
    pub handler: Handler<M>,
}

impl<M> Extra<M> {
    /// A command the discovery commands name and describe.
    pub fn listed(spec: CommandSpec, handler: Handler<M>) -> Extra<M> {
        Extra {
            spec,
            listed: true,
            handler,
        }
    }

    /// A command offered to the model directly, which discovery does not name.
    pub fn unlisted(spec: CommandSpec, handler: Handler<M>) -> Extra<M> {
        Extra {
            spec,
            listed: false,
            handler,
        }
    }
}

/// `inner`'s commands plus the extras of mechanism `M`.
pub struct Overlay<M, D = Commands> {
    inner: D,
    mechanism: M,
    extras: Vec<Extra<M>>,
    /// `inner`'s specs, then the extras'.
    specs: Vec<CommandSpec>,
}

impl<M: Send + Sync, D: CommandDoor> Overlay<M, D> {
    /// `extras` over `inner`, answered with `mechanism`'s state.
    pub fn over(inner: D, mechanism: M, extras: Vec<Extra<M>>) -> Overlay<M, D> {
        let mut specs = inner.specs().to_vec();
        specs.extend(extras.iter().map(|e| e.spec.clone()));
        Overlay {
            inner,
            mechanism,
            extras,
            specs,
        }
    }

    fn extra(&self, command: &str) -> Option<&Extra<M>> {
        self.extras.iter().find(|e| e.spec.name == command)
    }

    fn listed(&self) -> impl Iterator<Item = &CommandSpec> {
        self.extras.iter().filter(|e| e.listed).map(|e| &e.spec)
    }

    /// Everything else goes to `inner`; discovery describes and lists the listed extras too.
    async fn relay(
        &self,
        caller: Caller,
        command: &str,
        params: Value,
        policy: Policy,
        approved: bool,
    ) -> Result<Value, CommandError> {
        if command == "meta.describeCommand" {
            if let Some(spec) = self.listed().find(|s| params["name"] == s.name.as_str()) {
                return Ok(serde_json::to_value(spec).expect("a spec serializes"));
            }
        }
        let prefix = params["prefix"].as_str().map(str::to_string);
        let mut value = self
            .inner
            .call_as(caller, command, params, policy, approved)
            .await?;
        if command == "meta.listCommands" {
            if let Value::Array(list) = &mut value {
                for spec in self
                    .listed()
                    .filter(|s| prefix.as_deref().is_none_or(|p| s.name.starts_with(p)))
                {
                    list.push(json!({
                        "name": spec.name,
                        "tier": spec.tier,
                        "summary": spec.description,
                    }));
                }
            }
        }
        Ok(value)
    }
}

impl<M: Send + Sync, D: CommandDoor> CommandDoor for Overlay<M, D> {
    fn specs(&self) -> &[CommandSpec] {
        &self.specs
    }

    fn assess(&self, command: &str, params: &Value) -> Option<Assessment> {
        match self.extra(command) {
            Some(_) => None,
            None => self.inner.assess(command, params),
        }
    }

    fn call_as<'a>(
        &'a self,
        caller: Caller,
        command: &'a str,
        params: Value,
        policy: Policy,
        approved: bool,
    ) -> BoxFuture<'a, Result<Value, CommandError>> {
        match self.extra(command) {
            Some(extra) => (extra.handler)(&self.mechanism, params),
            None => Box::pin(self.relay(caller, command, params, policy, approved)),
        }
    }
}
