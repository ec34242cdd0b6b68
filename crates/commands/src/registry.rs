//! The registry proper: registration with generated schemas, and validated calls.
//!
//! A handler acts on the context `C` it is given, on whatever owns that context (the
//! workspace runtime's owner task, which runs every caller's commands one at a time). Work
//! that could keep that owner waiting – reading a file at a path the caller gave, running a
//! user's script over sample data – is registered with [`Registry::register_deferred`]: its
//! handler takes what it needs from the context and returns the work as a [`Deferred`]
//! job, which the owner runs elsewhere ([`Registry::start`] hands it over as an
//! [`Outcome::Later`]) and, when the job has to change the context with what it produced,
//! gets back as a [`Then::Apply`] to run on the owner. [`Registry::call`] runs it all
//! inline, for callers that own the context outright (tests, the command line).

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{CommandError, ErrorCode, Tier};

/// An example call, shown in the reference and to the assistant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Example {
    pub description: String,
    pub params: Value,
}

/// Everything about a command except its handler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandSpec {
    pub name: String,
    pub description: String,
    pub tier: Tier,
    // Shared: every tool surface and overlay a turn builds copies the specs, not the
    // schemas (a plain comment: a doc comment would be published in the wire schema).
    pub params_schema: Arc<Value>,
    pub result_schema: Arc<Value>,
    /// The read-only command that previews this one, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Example>,
}

type Handler<C> = Arc<dyn Fn(&mut C, Value) -> Result<Outcome<C>, CommandError> + Send + Sync>;

/// Work a command does away from the owner of its context; what it leaves to do is a
/// [`Then`].
pub type Job<C> = Box<dyn FnOnce() -> Result<Then<C>, CommandError> + Send>;

/// A change to make on the owner of the context, with what a [`Job`] produced; its result
/// is the command's.
pub type Apply<C> = Box<dyn FnOnce(&mut C) -> Result<Value, CommandError> + Send>;

/// What a command's handler gave its owner: the result, or work to run elsewhere.
pub enum Outcome<C> {
    /// Done; the command's result.
    Now(Value),
    /// Run this off the owner (it may block on a file or spin in a user's script), then
    /// finish as its [`Then`] says.
    Later(Job<C>),
}

/// What is left once a [`Job`] is done.
pub enum Then<C> {
    /// Nothing: this is the command's result.
    Reply(Value),
    /// Back on the owner: change the context with what the job produced.
    Apply(Apply<C>),
}

/// What a handler registered with [`Registry::register_deferred`] returns: its result `R`
/// now ([`Deferred::now`]), or work that produces it away from the owner of the context
/// ([`Deferred::off`], [`Deferred::off_then`]).
pub struct Deferred<C, R>(Step<C, R>);

/// Work that ends in a result `R`, or in a change to the context that does.
type Work<C, R> = Box<dyn FnOnce() -> Result<Finish<C, R>, CommandError> + Send>;

/// A change to the context that ends in a result `R`.
type Change<C, R> = Box<dyn FnOnce(&mut C) -> Result<R, CommandError> + Send>;

enum Step<C, R> {
    Now(R),
    Later(Work<C, R>),
}

enum Finish<C, R> {
    Reply(R),
    Apply(Change<C, R>),
}

impl<C: 'static, R: 'static> Deferred<C, R> {
    /// The result, now: nothing slow was needed after all (a cached answer, say).
    pub fn now(result: R) -> Self {
        Deferred(Step::Now(result))
    }

    /// `work` gives the result; it takes nothing from the context but what it captured.
    pub fn off(work: impl FnOnce() -> Result<R, CommandError> + Send + 'static) -> Self {
        Deferred(Step::Later(Box::new(move || work().map(Finish::Reply))))
    }

    /// `work` (reading a file, say) runs off the owner; `apply` then runs on the owner with
    /// what it produced, and gives the result. `apply` does not run when `work` fails.
    pub fn off_then<T: Send + 'static>(
        work: impl FnOnce() -> Result<T, CommandError> + Send + 'static,
        apply: impl FnOnce(&mut C, T) -> Result<R, CommandError> + Send + 'static,
    ) -> Self {
        Deferred(Step::Later(Box::new(move || {
            let made = work()?;
            Ok(Finish::Apply(Box::new(move |ctx: &mut C| apply(ctx, made))))
        })))
    }
}

fn to_json<R: Serialize>(r: R) -> Result<Value, CommandError> {
    serde_json::to_value(r)
        .map_err(|e| CommandError::failed(format!("result did not serialize: {e}")))
}

struct Entry<C> {
    spec: CommandSpec,
    handler: Handler<C>,
}

/// Commands acting on a context `C`.
pub struct Registry<C> {
    commands: BTreeMap<String, Entry<C>>,
}

impl<C> Default for Registry<C> {
    fn default() -> Self {
        Registry {
            commands: BTreeMap::new(),
        }
    }
}

/// Finishes a registration: add a dry-run partner and examples.
pub struct CommandBuilder<'r, C> {
    registry: &'r mut Registry<C>,
    name: String,
}

impl<C> CommandBuilder<'_, C> {
    /// Names the read-only command that previews this one.
    pub fn dry_run(self, partner: &str) -> Self {
        if let Some(e) = self.registry.commands.get_mut(&self.name) {
            e.spec.dry_run = Some(partner.to_string());
        }
        self
    }

    pub fn example(self, description: &str, params: Value) -> Self {
        if let Some(e) = self.registry.commands.get_mut(&self.name) {
            e.spec.examples.push(Example {
                description: description.to_string(),
                params,
            });
        }
        self
    }
}

/// The schema of `T` as JSON, without the `$schema` header (it is embedded in specs).
pub fn schema_of<T: JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    if let Some(obj) = v.as_object_mut() {
        obj.remove("$schema");
    }
    v
}

/// Deserializes parameters, naming the exact path of the first bad value.
pub fn parse_params<P: DeserializeOwned>(command: &str, params: Value) -> Result<P, CommandError> {
    // Commands without parameters accept `null` and `{}` alike.
    let params = if params.is_null() {
        Value::Object(Default::default())
    } else {
        params
    };
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let path = if path == "." { String::new() } else { path };
        CommandError {
            code: ErrorCode::InvalidParams,
            message: if path.is_empty() {
                format!("{command}: invalid parameters: {inner}")
            } else {
                format!("{command}: invalid parameter `{path}`: {inner}")
            },
            path: Some(path),
            question: None,
        }
    })
}

impl<C> Registry<C> {
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers a command. Names are `namespace.verb` (at least one dot); registering a
    /// name twice is a programming error and panics at start-up, where tests catch it.
    pub fn register<P, R, F>(
        &mut self,
        name: &str,
        tier: Tier,
        description: &str,
        handler: F,
    ) -> CommandBuilder<'_, C>
    where
        P: DeserializeOwned + JsonSchema + 'static,
        R: Serialize + JsonSchema + 'static,
        F: Fn(&mut C, P) -> Result<R, CommandError> + Send + Sync + 'static,
    {
        let owned = name.to_string();
        let handler: Handler<C> = Arc::new(move |ctx: &mut C, params: Value| {
            let p: P = parse_params(&owned, params)?;
            to_json(handler(ctx, p)?).map(Outcome::Now)
        });
        self.insert::<P, R>(name, tier, description, handler)
    }

    /// Registers a command whose work may run away from the owner of the context: the
    /// handler runs on the owner, checks its parameters and copies what it needs, and
    /// returns the rest as a [`Deferred`] job. Spec, schemas and naming are as
    /// [`Registry::register`]'s; callers see no difference but that the owner is free
    /// while the job runs.
    pub fn register_deferred<P, R, F>(
        &mut self,
        name: &str,
        tier: Tier,
        description: &str,
        handler: F,
    ) -> CommandBuilder<'_, C>
    where
        C: 'static,
        P: DeserializeOwned + JsonSchema + 'static,
        R: Serialize + JsonSchema + 'static,
        F: Fn(&mut C, P) -> Result<Deferred<C, R>, CommandError> + Send + Sync + 'static,
    {
        let owned = name.to_string();
        let handler: Handler<C> = Arc::new(move |ctx: &mut C, params: Value| {
            let p: P = parse_params(&owned, params)?;
            Ok(match handler(ctx, p)?.0 {
                Step::Now(r) => Outcome::Now(to_json(r)?),
                Step::Later(work) => Outcome::Later(Box::new(move || {
                    Ok(match work()? {
                        Finish::Reply(r) => Then::Reply(to_json(r)?),
                        Finish::Apply(apply) => {
                            Then::Apply(Box::new(move |ctx: &mut C| to_json(apply(ctx)?)))
                        }
                    })
                })),
            })
        });
        self.insert::<P, R>(name, tier, description, handler)
    }

    fn insert<P: JsonSchema, R: JsonSchema>(
        &mut self,
        name: &str,
        tier: Tier,
        description: &str,
        handler: Handler<C>,
    ) -> CommandBuilder<'_, C> {
        assert!(
            name.contains('.') && !name.starts_with('.') && !name.ends_with('.'),
            "command name `{name}` must be `namespace.verb`"
        );
        assert!(
            !self.commands.contains_key(name),
            "command `{name}` registered twice"
        );
        let spec = CommandSpec {
            name: name.to_string(),
            description: description.to_string(),
            tier,
            params_schema: Arc::new(schema_of::<P>()),
            result_schema: Arc::new(schema_of::<R>()),
            dry_run: None,
            examples: Vec::new(),
        };
        self.commands
            .insert(name.to_string(), Entry { spec, handler });
        CommandBuilder {
            registry: self,
            name: name.to_string(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&CommandSpec> {
        self.commands.get(name).map(|e| &e.spec)
    }

    /// All commands, sorted by name.
    pub fn specs(&self) -> impl Iterator<Item = &CommandSpec> {
        self.commands.values().map(|e| &e.spec)
    }

    pub fn len(&self) -> usize {
        self.commands.len()
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Runs a command to the end, a deferred one's job included, here and now. The caller
    /// has already applied its [`crate::Policy`].
    pub fn call(&self, ctx: &mut C, name: &str, params: Value) -> Result<Value, CommandError> {
        match self.start(ctx, name, params)? {
            Outcome::Now(v) => Ok(v),
            Outcome::Later(job) => match job()? {
                Then::Reply(v) => Ok(v),
                Then::Apply(apply) => apply(ctx),
            },
        }
    }

    /// Runs a command's handler: its result, or (for a command registered with
    /// [`Registry::register_deferred`]) the job to run away from the owner of `ctx`. The
    /// caller has already applied its [`crate::Policy`].
    pub fn start(
        &self,
        ctx: &mut C,
        name: &str,
        params: Value,
    ) -> Result<Outcome<C>, CommandError> {
        let entry = self.commands.get(name).ok_or_else(|| {
            let hint = self
                .commands
                .keys()
                .filter(|k| k.split('.').next() == name.split('.').next())
                .take(5)
                .cloned()
                .collect::<Vec<_>>();
            CommandError::new(
                ErrorCode::UnknownCommand,
                if hint.is_empty() {
                    format!("unknown command `{name}`; `meta.listCommands` lists them all")
                } else {
                    format!(
                        "unknown command `{name}`; did you mean one of: {}",
                        hint.join(", ")
                    )
                },
            )
        })?;
        (entry.handler)(ctx, params)
    }

    /// Every registered dry-run partner exists, is Safe, and names a real command.
    pub fn check_consistency(&self) -> Result<(), String> {
        for spec in self.specs() {
            if let Some(partner) = &spec.dry_run {
                match self.get(partner) {
                    None => {
                        return Err(format!(
                            "{}: dry-run partner `{partner}` is not registered",
                            spec.name
                        ))
                    }
                    Some(p) if p.tier != Tier::Safe => {
                        return Err(format!(
                            "{}: dry-run partner `{partner}` must be Safe",
                            spec.name
                        ))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}
