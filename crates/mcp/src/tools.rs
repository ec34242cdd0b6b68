//! The registry as MCP tools: tool names, descriptions, input schemas and annotations, and
//! the way back from a tool call to a command call.
//!
//! MCP allows dots in tool names, but many clients hand tools on to model APIs that allow
//! only `[A-Za-z0-9_-]`, so dots become underscores. No command name contains an
//! underscore, which keeps the mapping reversible; should two commands ever map to the same
//! name, the later one keeps its dotted name rather than shadowing the first.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{JsonObject, MetaObject, Tool, ToolAnnotations};
use serde_json::{json, Value};
use sextant_commands::{CommandSpec, Tier};

/// The property a non-object parameter schema is wrapped in (MCP input schemas must be
/// objects).
const WRAPPED_PARAMS: &str = "params";

/// The MCP tool name of a command: `project.dataset.add` → `project_dataset_add`.
pub fn tool_name(command: &str) -> String {
    command.replace('.', "_")
}

/// The command a tool name stands for, when it is one of `specs` (mapped or dotted).
pub fn command_name_of<'s>(specs: &'s [CommandSpec], tool: &str) -> Option<&'s str> {
    specs
        .iter()
        .find(|s| s.name == tool || tool_name(&s.name) == tool)
        .map(|s| s.name.as_str())
}

/// What a tool call turns into.
#[derive(Debug, Clone)]
pub(crate) struct ToolEntry {
    pub command: String,
    pub tier: Tier,
    /// The parameters arrive wrapped in `{"params": …}`.
    wrapped: bool,
    /// Position in [`ToolTable::tools`].
    index: usize,
}

impl ToolEntry {
    /// The command parameters for a call's arguments.
    pub fn params(&self, arguments: Option<JsonObject>) -> Value {
        match arguments {
            None => Value::Null,
            Some(mut args) if self.wrapped => args.remove(WRAPPED_PARAMS).unwrap_or(Value::Null),
            Some(args) => Value::Object(args),
        }
    }
}

/// Every command as a tool, in registry order.
pub(crate) struct ToolTable {
    tools: Vec<Tool>,
    by_name: HashMap<String, ToolEntry>,
}

impl ToolTable {
    pub fn new(specs: &[CommandSpec], allow_device_control: bool) -> ToolTable {
        let mut tools = Vec::with_capacity(specs.len());
        let mut by_name: HashMap<String, ToolEntry> = HashMap::new();
        for spec in specs {
            let mapped = tool_name(&spec.name);
            let name = if by_name.contains_key(&mapped) {
                tracing::warn!(
                    command = spec.name,
                    "tool name `{mapped}` is taken; keeping the dotted name"
                );
                spec.name.clone()
            } else {
                mapped
            };
            let (schema, wrapped) = input_schema(&spec.params_schema);
            let mut meta = MetaObject::new();
            meta.insert("sextant/command".into(), json!(spec.name));
            meta.insert("sextant/tier".into(), json!(spec.tier));
            let tool = Tool::new(
                name.clone(),
                description(spec, allow_device_control),
                Arc::new(schema),
            )
            .with_title(spec.name.clone())
            .with_annotations(annotations(spec.tier))
            .with_meta(meta);
            let entry = ToolEntry {
                command: spec.name.clone(),
                tier: spec.tier,
                wrapped,
                index: tools.len(),
            };
            tools.push(tool);
            // The dotted name always works too, for clients that allow it.
            by_name
                .entry(spec.name.clone())
                .or_insert_with(|| entry.clone());
            by_name.insert(name, entry);
        }
        ToolTable { tools, by_name }
    }

    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    pub fn resolve(&self, name: &str) -> Option<&ToolEntry> {
        self.by_name.get(name)
    }

    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.get(self.resolve(name)?.index)
    }
}

/// The command's description, then what its tier means for an MCP caller of this server.
fn description(spec: &CommandSpec, allow_device_control: bool) -> Cow<'static, str> {
    let tier = match spec.tier {
        Tier::Safe => "Tier: Safe (read-only).",
        Tier::Confirm => {
            "Tier: Confirm (edits the project; runs at once for MCP clients, and a checkpoint \
             is taken first, so project_undo takes it back)."
        }
        Tier::DeviceGated if allow_device_control => {
            "Tier: DeviceGated (acts on a device; allowed, the user started this server with \
             device control)."
        }
        Tier::DeviceGated => {
            "Tier: DeviceGated (acts on a device; refused: this server was started without \
             \"allow device control\")."
        }
        Tier::AlwaysConfirm => {
            "Tier: AlwaysConfirm (destructive; refused over MCP: a person must run it in \
             Sextant)."
        }
        Tier::Blocked => "Tier: Blocked (never runs from an automated caller).",
    };
    let preview = spec
        .dry_run
        .as_deref()
        .map(|d| format!(" Preview it first with `{}`.", tool_name(d)))
        .unwrap_or_default();
    Cow::Owned(format!("{}\n\n{tier}{preview}", spec.description))
}

fn annotations(tier: Tier) -> ToolAnnotations {
    let a = ToolAnnotations::new();
    match tier {
        Tier::Safe => a.read_only(true).open_world(false),
        // Every edit is undoable, which is what "not destructive" means to a client.
        Tier::Confirm => a.read_only(false).destructive(false).open_world(false),
        Tier::DeviceGated => a.read_only(false).destructive(true).open_world(true),
        Tier::AlwaysConfirm | Tier::Blocked => a.read_only(false).destructive(true),
    }
}

/// The MCP input schema for a parameter schema, and whether it had to be wrapped.
///
/// MCP requires `"type": "object"` at the top. Object schemas are used as they are; any
/// other schema becomes the `params` property of an object, with its `$defs` moved to the
/// top so that `#/$defs/…` references still resolve.
fn input_schema(params: &Value) -> (JsonObject, bool) {
    match params {
        Value::Object(obj) if obj.get("type") == Some(&json!("object")) => (obj.clone(), false),
        other => {
            let mut inner = other.clone();
            let defs = inner.as_object_mut().and_then(|o| o.remove("$defs"));
            let mut outer = JsonObject::new();
            outer.insert("type".into(), json!("object"));
            outer.insert("properties".into(), json!({ WRAPPED_PARAMS: inner }));
            outer.insert("required".into(), json!([WRAPPED_PARAMS]));
            if let Some(defs) = defs {
                outer.insert("$defs".into(), defs);
            }
            (outer, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, tier: Tier, params_schema: Value) -> CommandSpec {
        CommandSpec {
            name: name.into(),
            description: format!("Does {name}."),
            tier,
            params_schema: Arc::new(params_schema),
            result_schema: Arc::new(json!({})),
            dry_run: None,
            examples: Vec::new(),
        }
    }

    fn object() -> Value {
        json!({"type": "object", "properties": {"title": {"type": "string"}}})
    }

    #[test]
    fn names_map_dots_to_underscores_and_back() {
        let specs = vec![
            spec("project.dataset.add", Tier::Confirm, object()),
            spec("project.get", Tier::Safe, object()),
        ];
        assert_eq!(
            tool_name("project.frameParser.dryRun"),
            "project_frameParser_dryRun"
        );
        assert_eq!(
            command_name_of(&specs, "project_dataset_add"),
            Some("project.dataset.add")
        );
        assert_eq!(command_name_of(&specs, "project.get"), Some("project.get"));
        assert_eq!(command_name_of(&specs, "project_nothing"), None);

        let table = ToolTable::new(&specs, false);
        let names: Vec<&str> = table.tools().iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["project_dataset_add", "project_get"]);
        assert_eq!(
            table.resolve("project_dataset_add").unwrap().command,
            "project.dataset.add"
        );
        assert_eq!(
            table.resolve("project.dataset.add").unwrap().command,
            "project.dataset.add"
        );
        assert!(table.resolve("project_dataset").is_none());
        assert_eq!(
            table.tool("project.get").map(|t| t.name.as_ref()),
            Some("project_get")
        );
    }

    #[test]
    fn a_clashing_name_keeps_its_dots() {
        let specs = vec![
            spec("a.b_c", Tier::Safe, object()),
            spec("a_b.c", Tier::Safe, object()),
        ];
        let table = ToolTable::new(&specs, false);
        let names: Vec<&str> = table.tools().iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["a_b_c", "a_b.c"]);
        assert_eq!(table.resolve("a_b_c").unwrap().command, "a.b_c");
        assert_eq!(table.resolve("a_b.c").unwrap().command, "a_b.c");
    }

    #[test]
    fn descriptions_state_the_tier_for_this_server() {
        let mut send = spec("console.send", Tier::DeviceGated, object());
        send.dry_run = Some("console.preview".into());
        let without = ToolTable::new(std::slice::from_ref(&send), false);
        let d = without.tools()[0].description.as_deref().unwrap();
        assert!(d.starts_with("Does console.send."), "{d}");
        assert!(
            d.contains("DeviceGated") && d.contains("allow device control"),
            "{d}"
        );
        assert!(d.contains("`console_preview`"), "{d}");
        let with = ToolTable::new(&[send], true);
        let d = with.tools()[0].description.as_deref().unwrap();
        assert!(d.contains("allowed"), "{d}");
        let a = with.tools()[0].annotations.clone().unwrap();
        assert_eq!(a.open_world_hint, Some(true));
        let safe = ToolTable::new(&[spec("project.get", Tier::Safe, object())], false);
        assert_eq!(
            safe.tools()[0].annotations.as_ref().unwrap().read_only_hint,
            Some(true)
        );
    }

    #[test]
    fn object_schemas_pass_through_and_others_are_wrapped() {
        let (schema, wrapped) = input_schema(&object());
        assert!(!wrapped);
        assert_eq!(Value::Object(schema), object());

        let odd = json!({
            "oneOf": [{"$ref": "#/$defs/A"}, {"type": "string"}],
            "$defs": {"A": {"type": "object"}}
        });
        let (schema, wrapped) = input_schema(&odd);
        assert!(wrapped);
        let schema = Value::Object(schema);
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["params"]));
        assert_eq!(schema["$defs"]["A"]["type"], "object");
        assert!(schema["properties"]["params"].get("$defs").is_none());
        assert_eq!(
            schema["properties"]["params"]["oneOf"][0]["$ref"],
            "#/$defs/A"
        );

        let table = ToolTable::new(&[spec("x.y", Tier::Safe, odd)], false);
        let entry = table.resolve("x_y").unwrap();
        let mut args = JsonObject::new();
        args.insert("params".into(), json!("text"));
        assert_eq!(entry.params(Some(args)), json!("text"));
        assert_eq!(entry.params(None), Value::Null);
        let plain = ToolTable::new(&[spec("x.z", Tier::Safe, object())], false);
        let mut args = JsonObject::new();
        args.insert("title".into(), json!("T"));
        assert_eq!(
            plain.resolve("x_z").unwrap().params(Some(args)),
            json!({"title": "T"})
        );
    }
}
