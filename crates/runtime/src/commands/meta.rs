//! `meta.*`: the registry describing itself, for API clients and the assistant.

use std::sync::{Arc, OnceLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sextant_commands::{CommandError, CommandSpec, Registry, Tier};

use crate::Workspace;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListParams {
    /// Only commands whose name starts with this (e.g. `project.dataset`).
    #[serde(default)]
    prefix: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Summary {
    name: String,
    tier: Tier,
    summary: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Describe {
    name: String,
}

/// The `meta.*` commands, one line each; they capture the specs (filled in once every command
/// is registered) and hand them to their handlers, `meta_list_commands` and
/// `meta_describe_command`, below in the same order. Kept out of rustfmt so that each command
/// stays one line.
#[rustfmt::skip]
pub fn register(r: &mut Registry<Workspace>, specs: Arc<OnceLock<Vec<CommandSpec>>>) {
    let list = specs.clone();
    r.register("meta.listCommands", Tier::Safe, "Every command with its tier and a one-line summary.", move |_: &mut Workspace, p: ListParams| meta_list_commands(&list, p));
    r.register("meta.describeCommand", Tier::Safe, "One command's full description: parameter and result schemas, tier, dry run, examples.", move |_: &mut Workspace, p: Describe| meta_describe_command(&specs, p));
}

fn meta_list_commands(
    specs: &OnceLock<Vec<CommandSpec>>,
    p: ListParams,
) -> Result<Vec<Summary>, CommandError> {
    Ok(specs
        .get()
        .map(|all| {
            all.iter()
                .filter(|s| {
                    p.prefix
                        .as_deref()
                        .is_none_or(|pre| s.name.starts_with(pre))
                })
                .map(|s| Summary {
                    name: s.name.clone(),
                    tier: s.tier,
                    summary: s.description.lines().next().unwrap_or("").to_string(),
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default())
}

fn meta_describe_command(
    specs: &OnceLock<Vec<CommandSpec>>,
    p: Describe,
) -> Result<CommandSpec, CommandError> {
    specs
        .get()
        .and_then(|all| all.iter().find(|s| s.name == p.name).cloned())
        .ok_or_else(|| {
            CommandError::not_found(format!(
                "no command `{}`; meta.listCommands lists them",
                p.name
            ))
        })
}
