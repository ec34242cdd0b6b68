//! Registry commands as the model's tools, with progressive disclosure (spec 20, "Command
//! safety tiers").
//!
//! Owns:
//! - the name mapping `project.group.add` ⇄ `project_group_add` ([`tool_name`],
//!   [`ToolNames`]): providers accept only `^[a-zA-Z0-9_-]{1,64}$`;
//! - the conversion of a command's parameter schema into a tool schema every provider
//!   accepts ([`tool_schema`]);
//! - the tool list sent with every request ([`ToolSet::definitions`]): the [`ESSENTIAL`]
//!   commands plus the discovery tools, sorted, so the cached prefix never moves;
//! - turning the model's call back into a pipeline call ([`ToolSet::resolve`]), which is
//!   where `meta.executeCommand` is unwrapped;
//! - the tool result message the model reads, inside an untrusted envelope
//!   ([`result_message`]).
//!
//! `meta.executeCommand` is not a command and never reaches the pipeline under its own
//! name: [`ToolSet::resolve`] turns `meta_executeCommand {name, params}` into a call of
//! `name` with `params`. So the pipeline – tier listener, guards, approval prompt,
//! checkpoint, audit – sees the named command with *its* tier, exactly as if the model had
//! called it directly. A wrapper tool with a tier of its own would either let everything
//! through or refuse everything.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use sextant_commands::{CommandSpec, Tier};
use sextant_providers::{Message, ToolDefinition};

use crate::engine::context::Envelope;
use crate::engine::pipeline::{CallerInfo, Pipeline, ResultStatus, ToolCall, ToolResult};

/// The run-anything discovery tool; handled here, not by the registry.
pub const EXECUTE_COMMAND: &str = "meta.executeCommand";

/// The commands offered as tools of their own, besides the discovery tools
/// (`meta.listCommands`, `meta.describeCommand`, `meta.executeCommand`).
///
/// Why these: a weak model calls what it is shown and rarely discovers more, so the set
/// covers the loop most chats are about – read the project (`project.get`), build a
/// dashboard from a stream that already parses (`project.group.add`,
/// `project.dataset.add`, `project.dataset.update`), check the work (`project.validate`)
/// and look at the live data (`io.status`, `dashboard.latestFrame`). Everything else is one
/// `meta_executeCommand` away. Commands with very large schemas (`project.source.add`,
/// `project.frameParser.setConfig`) are deliberately not here: every request would pay for
/// their schemas, and the model needs `meta_describeCommand` to use them well anyway.
pub const ESSENTIAL: &[&str] = &[
    "dashboard.latestFrame",
    "io.status",
    "project.dataset.add",
    "project.dataset.update",
    "project.get",
    "project.group.add",
    "project.validate",
];

/// The registry's own discovery commands, always offered.
pub const DISCOVERY: &[&str] = &["meta.describeCommand", "meta.listCommands"];

/// Providers' limit on tool names.
const MAX_TOOL_NAME: usize = 64;

/// A command name as `meta.executeCommand` takes it: dotted, or with the tool names'
/// underscores.
const COMMAND_NAME_PATTERN: &str = "^[A-Za-z][A-Za-z0-9-]*([._][A-Za-z0-9-]+)*$";

/// Formats of schemars' that no JSON Schema draft defines (`uint32`, `double`, …). Strict
/// validators (OpenAI strict mode, Gemini) reject unknown formats; the range they imply is
/// already in `minimum`/`maximum`, so dropping them loses nothing.
const KNOWN_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uuid",
];

/// Why the tools could not be built, or a call could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolsError {
    #[error("command `{command}` cannot be a tool name: {reason}")]
    UnmappableName { command: String, reason: String },
    #[error("commands `{first}` and `{second}` would both be the tool `{tool}`")]
    NameCollision {
        tool: String,
        first: String,
        second: String,
    },
    #[error("essential command `{0}` is not in the registry; update tools::ESSENTIAL")]
    MissingCommand(String),
    #[error(
        "the parameters of `{command}` are not an object schema, so they cannot be tool arguments"
    )]
    SchemaNotObject { command: String },
    #[error(
        "the parameter schema of `{command}` refers to `{reference}`, which it does not define"
    )]
    UnresolvedRef { command: String, reference: String },
    #[error("meta_executeCommand: {0}")]
    BadExecuteCall(String),
}

// ---- names --------------------------------------------------------------------------------

/// The tool name of a command: dots become underscores.
///
/// This is a bijection because command names may not contain `_` (nor anything outside
/// `[A-Za-z0-9.-]`): the reverse is "underscores become dots", and no two commands can
/// share a tool name. A command that breaks the rule is refused rather than mapped
/// ambiguously (`a_b.c` would collide with `a.b.c`).
pub fn tool_name(command: &str) -> Result<String, ToolsError> {
    let refuse = |reason: &str| ToolsError::UnmappableName {
        command: command.to_string(),
        reason: reason.to_string(),
    };
    if command.is_empty() || command.split('.').any(str::is_empty) {
        return Err(refuse("empty name or segment"));
    }
    if let Some(c) = command
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || *c == '-'))
    {
        return Err(refuse(&format!(
            "`{c}` is not allowed (only letters, digits, `.` and `-`; `_` stands for `.`)"
        )));
    }
    if command.len() > MAX_TOOL_NAME {
        return Err(refuse(&format!("longer than {MAX_TOOL_NAME} characters")));
    }
    Ok(command.replace('.', "_"))
}

/// The command a tool name stands for (the inverse of [`tool_name`]).
pub fn command_name(tool: &str) -> String {
    tool.replace('_', ".")
}

/// Every registry command's tool name, both ways.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolNames {
    to_command: BTreeMap<String, String>,
    to_tool: BTreeMap<String, String>,
}

impl ToolNames {
    pub fn new<'a>(commands: impl IntoIterator<Item = &'a str>) -> Result<ToolNames, ToolsError> {
        let mut names = ToolNames::default();
        for command in commands {
            let tool = tool_name(command)?;
            if let Some(first) = names.to_command.get(&tool) {
                return Err(ToolsError::NameCollision {
                    tool,
                    first: first.clone(),
                    second: command.to_string(),
                });
            }
            names.to_command.insert(tool.clone(), command.to_string());
            names.to_tool.insert(command.to_string(), tool);
        }
        Ok(names)
    }

    pub fn command(&self, tool: &str) -> Option<&str> {
        self.to_command.get(tool).map(String::as_str)
    }

    pub fn tool(&self, command: &str) -> Option<&str> {
        self.to_tool.get(command).map(String::as_str)
    }

    /// A command named either way (`project.get` or `project_get`).
    pub fn lookup(&self, name: &str) -> Option<&str> {
        self.to_tool
            .get_key_value(name)
            .map(|(c, _)| c.as_str())
            .or_else(|| self.command(name))
    }
}

// ---- schemas ------------------------------------------------------------------------------

/// A command's parameter schema as a tool's input schema.
///
/// What `sextant_commands` emits (schemars, draft 2020-12) is mostly fine everywhere; this
/// removes what some provider rejects or what only costs tokens: `$schema`/`$id` and the
/// top-level `title` (the Rust type's name), local `$ref`s (inlined, so a provider that does
/// not resolve references still sees every field – `$defs` stays only for a recursive type,
/// whose references then still resolve), and non-standard `format`s. The top level must be
/// an object schema: tool arguments are always a JSON object.
pub fn tool_schema(command: &str, params: &Value) -> Result<Value, ToolsError> {
    let Some(root) = params.as_object() else {
        return Err(ToolsError::SchemaNotObject {
            command: command.to_string(),
        });
    };
    if root.get("type") != Some(&json!("object")) {
        return Err(ToolsError::SchemaNotObject {
            command: command.to_string(),
        });
    }
    let defs = root
        .get("$defs")
        .or_else(|| root.get("definitions"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut inliner = Inliner {
        command,
        defs: &defs,
        stack: Vec::new(),
        kept: BTreeMap::new(),
    };
    let mut out = Map::new();
    for (key, value) in root {
        match key.as_str() {
            "$schema" | "$id" | "title" | "$defs" | "definitions" => {}
            _ => {
                out.insert(key.clone(), inliner.keyword(key, value)?);
            }
        }
    }
    // Recursive definitions stay referenced; keep exactly those so every `$ref` resolves.
    if !inliner.kept.is_empty() {
        let kept = std::mem::take(&mut inliner.kept);
        let mut defs_out = Map::new();
        for (name, schema) in kept {
            defs_out.insert(name, schema);
        }
        out.insert("$defs".to_string(), Value::Object(defs_out));
    }
    Ok(Value::Object(out))
}

/// Annotation keywords that may sit next to a `$ref` and are merged into the inlined schema.
const ANNOTATIONS: &[&str] = &[
    "description",
    "default",
    "title",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

struct Inliner<'a> {
    command: &'a str,
    defs: &'a Map<String, Value>,
    /// The definitions being inlined right now (a repeat is recursion).
    stack: Vec<String>,
    /// Recursive definitions left as references, already converted.
    kept: BTreeMap<String, Value>,
}

impl Inliner<'_> {
    /// Converts one schema.
    fn schema(&mut self, schema: &Value) -> Result<Value, ToolsError> {
        let Some(obj) = schema.as_object() else {
            return Ok(schema.clone()); // `true` / `false`
        };
        if let Some(Value::String(reference)) = obj.get("$ref") {
            return self.reference(reference, obj);
        }
        let mut out = Map::new();
        for (key, value) in obj {
            if key == "format" && value.as_str().is_some_and(|f| !KNOWN_FORMATS.contains(&f)) {
                continue;
            }
            out.insert(key.clone(), self.keyword(key, value)?);
        }
        Ok(Value::Object(out))
    }

    /// Converts a keyword's value: subschemas are converted, data (`default`, `enum`,
    /// `examples`, a property *named* `format`) is left alone.
    fn keyword(&mut self, key: &str, value: &Value) -> Result<Value, ToolsError> {
        match key {
            "properties" | "patternProperties" | "dependentSchemas" => match value.as_object() {
                Some(map) => {
                    let mut out = Map::new();
                    for (name, sub) in map {
                        out.insert(name.clone(), self.schema(sub)?);
                    }
                    Ok(Value::Object(out))
                }
                None => Ok(value.clone()),
            },
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => self.array(value),
            "items" if value.is_array() => self.array(value),
            "items"
            | "additionalProperties"
            | "additionalItems"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedProperties"
            | "unevaluatedItems" => self.schema(value),
            _ => Ok(value.clone()),
        }
    }

    fn array(&mut self, value: &Value) -> Result<Value, ToolsError> {
        match value.as_array() {
            Some(items) => items
                .iter()
                .map(|s| self.schema(s))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            None => Ok(value.clone()),
        }
    }

    fn reference(
        &mut self,
        reference: &str,
        obj: &Map<String, Value>,
    ) -> Result<Value, ToolsError> {
        let unresolved = || ToolsError::UnresolvedRef {
            command: self.command.to_string(),
            reference: reference.to_string(),
        };
        let name = reference
            .strip_prefix("#/$defs/")
            .or_else(|| reference.strip_prefix("#/definitions/"))
            .ok_or_else(unresolved)?
            .to_string();
        let def = self.defs.get(&name).ok_or_else(unresolved)?;
        let siblings: Vec<(&String, &Value)> = obj.iter().filter(|(k, _)| *k != "$ref").collect();
        if self.stack.contains(&name) || self.kept.contains_key(&name) {
            // Recursion: keep the reference, and the definition under `$defs`.
            if !self.kept.contains_key(&name) {
                self.kept.insert(name.clone(), Value::Null);
                let converted = self.schema(def)?;
                self.kept.insert(name.clone(), converted);
            }
            let mut out = Map::new();
            out.insert("$ref".to_string(), json!(format!("#/$defs/{name}")));
            for (k, v) in siblings {
                out.insert(k.clone(), self.keyword(k, v)?);
            }
            return Ok(Value::Object(out));
        }
        self.stack.push(name.clone());
        let inlined = self.schema(def);
        self.stack.pop();
        let inlined = inlined?;
        if siblings.is_empty() {
            return Ok(inlined);
        }
        let only_annotations = siblings
            .iter()
            .all(|(k, _)| ANNOTATIONS.contains(&k.as_str()));
        let mut out = match inlined {
            Value::Object(map) if only_annotations => map,
            other => {
                // Validation keywords next to `$ref` apply together with it: `allOf`.
                let mut m = Map::new();
                m.insert("allOf".to_string(), Value::Array(vec![other]));
                m
            }
        };
        for (k, v) in siblings {
            out.insert(k.clone(), self.keyword(k, v)?);
        }
        Ok(Value::Object(out))
    }
}

// ---- the tool set -------------------------------------------------------------------------

/// The tools of one chat: built once from the registry's specs, sent with every request.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSet {
    names: ToolNames,
    definitions: Vec<ToolDefinition>,
}

impl ToolSet {
    /// The [`ESSENTIAL`] and [`DISCOVERY`] commands plus `meta.executeCommand`.
    pub fn new(specs: &[CommandSpec]) -> Result<ToolSet, ToolsError> {
        let offered: Vec<&str> = ESSENTIAL.iter().chain(DISCOVERY).copied().collect();
        ToolSet::with_commands(specs, &offered)
    }

    /// `offered` as tools of their own, plus `meta.executeCommand` for the rest. Every
    /// registry command's name is checked (a name that cannot be mapped fails here, not when
    /// the model first calls it).
    pub fn with_commands(specs: &[CommandSpec], offered: &[&str]) -> Result<ToolSet, ToolsError> {
        let names = ToolNames::new(specs.iter().map(|s| s.name.as_str()))?;
        if names.command(&tool_name(EXECUTE_COMMAND)?).is_some() {
            return Err(ToolsError::NameCollision {
                tool: tool_name(EXECUTE_COMMAND)?,
                first: EXECUTE_COMMAND.to_string(),
                second: EXECUTE_COMMAND.to_string(),
            });
        }
        let mut definitions = Vec::new();
        for command in offered {
            let spec = specs
                .iter()
                .find(|s| s.name == *command)
                .ok_or_else(|| ToolsError::MissingCommand(command.to_string()))?;
            definitions.push(definition(spec)?);
        }
        definitions.push(execute_command_definition());
        // Sorted by name and deduplicated: the tool list is part of the cached prefix.
        definitions.sort_by(|a, b| a.name.cmp(&b.name));
        definitions.dedup_by(|a, b| a.name == b.name);
        Ok(ToolSet { names, definitions })
    }

    /// The tool definitions, sorted by name.
    pub fn definitions(&self) -> &[ToolDefinition] {
        &self.definitions
    }

    pub fn names(&self) -> &ToolNames {
        &self.names
    }

    /// The pipeline call for a call the model made. `meta_executeCommand {name, params}`
    /// becomes a call of `name` with `params` (same call id), so that command's tier
    /// applies. Any registry command is accepted by its tool name, not only the offered
    /// ones: the pipeline applies the same rules either way. A name nobody knows is passed
    /// on unchanged, and the pipeline answers it as an unknown tool.
    pub fn resolve(&self, call: &sextant_providers::ToolCall) -> Result<ToolCall, ToolsError> {
        let name = if call.name == EXECUTE_COMMAND {
            tool_name(EXECUTE_COMMAND)?
        } else {
            call.name.clone()
        };
        if name != tool_name(EXECUTE_COMMAND)? {
            let command = self.names.lookup(&name).unwrap_or(&name).to_string();
            return Ok(ToolCall {
                id: call.id.clone(),
                name: command,
                args: call.arguments.clone(),
            });
        }
        let args = match &call.arguments {
            Value::Object(map) => map,
            other => {
                return Err(ToolsError::BadExecuteCall(format!(
                    "arguments must be an object {{\"name\": …, \"params\": {{…}}}}, not {other}"
                )))
            }
        };
        let target = args.get("name").and_then(Value::as_str).ok_or_else(|| {
            ToolsError::BadExecuteCall(
                "`name` (the command's dotted name, e.g. `project.setTitle`) is missing".into(),
            )
        })?;
        if target == EXECUTE_COMMAND || command_name(target) == EXECUTE_COMMAND {
            return Err(ToolsError::BadExecuteCall(
                "it cannot run itself; name the command to run".into(),
            ));
        }
        let params = match args.get("params") {
            None | Some(Value::Null) => json!({}),
            // Weak models often send the object as a JSON string; accept that one mistake.
            Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(v @ Value::Object(_)) => v,
                _ => {
                    return Err(ToolsError::BadExecuteCall(
                        "`params` must be an object of the command's parameters".into(),
                    ))
                }
            },
            Some(v) => v.clone(),
        };
        if let Some(extra) = args.keys().find(|k| *k != "name" && *k != "params") {
            return Err(ToolsError::BadExecuteCall(format!(
                "unexpected argument `{extra}`; the command's parameters go inside `params`"
            )));
        }
        Ok(ToolCall {
            id: call.id.clone(),
            name: self.names.lookup(target).unwrap_or(target).to_string(),
            args: params,
        })
    }

    /// Resolves and runs one call. A malformed `meta_executeCommand` call is answered here
    /// with an error result (there is no command to run, so no tier to apply); everything
    /// else goes through `pipeline`.
    pub async fn run(
        &self,
        pipeline: &Pipeline,
        call: &sextant_providers::ToolCall,
        caller: CallerInfo,
    ) -> ToolResult {
        match self.resolve(call) {
            Ok(resolved) => pipeline.run(resolved, caller).await.result,
            Err(e) => ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content: format!("Error: {e}"),
                value: None,
                status: ResultStatus::Error,
            },
        }
    }
}

fn tier_note(tier: Tier) -> &'static str {
    match tier {
        Tier::Safe => "Safe: read-only, runs freely.",
        Tier::Confirm => "Confirm: changes the project; the user may be asked to approve.",
        Tier::DeviceGated => {
            "DeviceGated: touches a device; needs the user's \"allow device control\" and approval."
        }
        Tier::AlwaysConfirm => "AlwaysConfirm: destructive; the user is always asked.",
        Tier::Blocked => "Blocked: never runs from the assistant.",
    }
}

/// A command's tool definition: description with tier, dry-run partner and examples.
pub fn definition(spec: &CommandSpec) -> Result<ToolDefinition, ToolsError> {
    let mut description = format!("{}\nTier: {}", spec.description, tier_note(spec.tier));
    if let Some(partner) = &spec.dry_run {
        description.push_str(&format!("\nPreview first with `{}`.", tool_name(partner)?));
    }
    for example in &spec.examples {
        description.push_str(&format!(
            "\nExample ({}): {}",
            example.description, example.params
        ));
    }
    Ok(ToolDefinition {
        name: tool_name(&spec.name)?,
        description,
        parameters: tool_schema(&spec.name, &spec.params_schema)?,
    })
}

/// `meta.executeCommand`: runs any command by name.
pub fn execute_command_definition() -> ToolDefinition {
    ToolDefinition {
        name: "meta_executeCommand".to_string(),
        description: "Runs any Sextant command by its dotted name (find it with \
            meta_listCommands, see its parameters with meta_describeCommand). The named \
            command's own tier applies: edits may need the user's approval, device commands \
            need device control allowed, destructive ones always ask."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                // The form of a command name, bounded: a grammar that constrains a small
                // model's call to this schema then cannot let it write anything else here.
                "name": {
                    "type": "string",
                    "description": "The command, e.g. `project.setTitle`.",
                    "pattern": COMMAND_NAME_PATTERN,
                    "maxLength": MAX_TOOL_NAME
                },
                "params": {
                    "type": "object",
                    "description": "The command's parameters, as meta_describeCommand shows them.",
                    "additionalProperties": true
                }
            },
            "required": ["name"],
            "additionalProperties": false
        }),
    }
}

/// The message that carries a tool result to the model: its text inside an untrusted
/// envelope (tool results hold device data, file content and project strings).
///
/// An error result's `Error: ` prefix is not repeated inside the envelope: the message's
/// `is_error` carries it (Anthropic sends the flag, the OpenAI client writes the prefix).
/// Wrap a result once, when it is made, and keep that text in the history: re-wrapping an
/// old result with a new nonce would change bytes the prompt cache already holds.
pub fn result_message(result: &ToolResult, envelope: &Envelope) -> Message {
    let text = if result.is_error() {
        result
            .content
            .strip_prefix("Error: ")
            .unwrap_or(&result.content)
    } else {
        &result.content
    };
    Message::ToolResult {
        call_id: result.id.clone(),
        content: envelope.wrap(&format!("tool:{}", result.name), text),
        is_error: result.is_error(),
    }
}
