//! The registry proper: registration with generated schemas, and validated calls.

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
    pub params_schema: Value,
    pub result_schema: Value,
    /// The read-only command that previews this one, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Example>,
}

type Handler<C> = Arc<dyn Fn(&mut C, Value) -> Result<Value, CommandError> + Send + Sync>;

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
        assert!(
            name.contains('.') && !name.starts_with('.') && !name.ends_with('.'),
            "command name `{name}` must be `namespace.verb`"
        );
        assert!(
            !self.commands.contains_key(name),
            "command `{name}` registered twice"
        );
        let owned = name.to_string();
        let handler: Handler<C> = Arc::new(move |ctx: &mut C, params: Value| {
            let p: P = parse_params(&owned, params)?;
            let r = handler(ctx, p)?;
            serde_json::to_value(r)
                .map_err(|e| CommandError::failed(format!("result did not serialize: {e}")))
        });
        let spec = CommandSpec {
            name: name.to_string(),
            description: description.to_string(),
            tier,
            params_schema: schema_of::<P>(),
            result_schema: schema_of::<R>(),
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

    /// Runs a command. The caller has already applied its [`crate::Policy`].
    pub fn call(&self, ctx: &mut C, name: &str, params: Value) -> Result<Value, CommandError> {
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
