//! Constrained tool calls: tools a tiny model cannot get wrong in form.
//!
//! Owns the other way to offer tools to an OpenAI-compatible server: instead of the native
//! `tools` field (which some chat templates silently drop, and which a small model often
//! answers with prose), the request asks for JSON that must match one schema
//! (`response_format: {type: "json_schema", …}`, accepted by llama.cpp, Ollama, LM Studio
//! and vLLM, which enforce it with a grammar): either `{"reply": "…"}` or
//! `{"tool": <an offered name>, "arguments": <that tool's own parameter schema>}`. The model
//! reads the offered tools as a short menu in the system message (the schema constrains the
//! sampler; it is not shown to the model).
//!
//! The reply is turned back into the same [`Event`]s a native call produces, so nothing
//! after the client can tell the two apart: a reply's text streams as it is generated
//! (decoded from inside the JSON string), a call arrives as start, arguments and end.
//! A call the reply ends inside of is a cut reply, as a native one: at the reply cap it
//! stops as [`StopReason::MaxTokens`] (nothing of the call emitted, no raw JSON shown),
//! otherwise it is a [`ProviderError::StreamCut`] that carries the call so far. What a
//! server that ignored the schema lets through is caught here too: a call of a tool that
//! was not offered is [`ProviderError::UnknownTool`], complete but broken JSON of an
//! offered tool a malformed call the loop answers with an error, and words that are not
//! JSON at all the model's text.

use std::collections::VecDeque;

use serde_json::{json, Map, Value};

use crate::error::{Api, ProviderError};
use crate::model::{Event, PartialToolCall, StopReason, ToolCall, ToolDefinition};

/// The schema's name in `response_format`.
pub const SCHEMA_NAME: &str = "reply_or_tool_call";

/// The id a constrained call gets (one call per reply; the loop makes ids unique per chat).
const CALL_ID: &str = "call_json";

/// The most characters of JSON text a free-form object may take in a constrained call.
///
/// A grammar cannot bound how many keys an object of any shape gets (llama.cpp's schema
/// converter has no `maxProperties`), and a tiny model given one writes keys until the
/// reply cap cuts the call off – malformed. So a free-form object is asked for as JSON text
/// of bounded length instead (`maxLength` is enforced), and read back into the object.
pub const FREE_OBJECT_TEXT_MAX: u64 = 400;

/// A whole argument object of a recursive type, asked for as text: the same reason, more
/// room.
pub const FREE_ARGUMENTS_TEXT_MAX: u64 = 1_000;

/// The `response_format` value for `tools`: a reply, or one call of one offered tool with
/// that tool's parameters – nothing else. Every object in it is closed
/// (`additionalProperties: false`; the reply and each call require all their keys, a
/// tool's parameters keep their own `required`), and each call's name is pinned
/// three ways (`const`, a one-name `enum`, `type: string`), so a schema converter that
/// knows only some of those keywords still cannot let another name through.
///
/// A value of any shape cannot be closed: a grammar cannot bound how many keys or items
/// it gets, and a tiny model writes them until the reply cap cuts the call off. The
/// parameter that holds one (the value itself, e.g. `params` of `meta_executeCommand`, or
/// the array or alternatives it sits in; at any depth of parameter names) is asked for as
/// JSON text of bounded length ([`FREE_OBJECT_TEXT_MAX`]) and read back by the decoder. A
/// tool whose arguments themselves are free, or whose schema keeps references of its own
/// (a recursive type), falls back alone: its whole arguments are bounded text
/// ([`FREE_ARGUMENTS_TEXT_MAX`]) – its name stays pinned. The pipeline validates the
/// arguments against the tool's own schema anyway.
pub fn response_format(tools: &[ToolDefinition]) -> Value {
    let mut choices = vec![json!({
        "type": "object",
        "properties": {"reply": {"type": "string"}},
        "required": ["reply"],
        "additionalProperties": false,
    })];
    for tool in tools {
        let arguments = match closed_arguments(&tool.parameters) {
            Some((schema, _)) => schema,
            None => as_text(FREE_ARGUMENTS_TEXT_MAX),
        };
        choices.push(json!({
            "type": "object",
            // "tool" first: a grammar generates properties in this order, so the name is
            // settled before the arguments it decides.
            "properties": {
                "tool": {"type": "string", "const": tool.name, "enum": [tool.name]},
                "arguments": arguments,
            },
            "required": ["tool", "arguments"],
            "additionalProperties": false,
        }));
    }
    json!({
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "strict": true, "schema": {"anyOf": choices}},
    })
}

fn as_text(max: u64) -> Value {
    json!({"type": "string", "maxLength": max, "description": "a JSON object, as text"})
}

/// A tool's parameter schema with every object closed, and the paths of the values asked
/// for as text; `None` when the schema cannot be closed that way (the tool falls back to
/// its whole arguments as text).
fn closed_arguments(parameters: &Value) -> Option<(Value, Vec<Vec<String>>)> {
    if has_references(parameters) || free_value(parameters) {
        return None;
    }
    let mut texts = Vec::new();
    let schema = close(parameters, &mut Vec::new(), true, &mut texts)?;
    Some((schema, texts))
}

/// Whether `schema` allows a value of unbounded shape: any value at all, an object with
/// no properties of its own, an object that takes keys beyond its properties, or an array
/// of any values.
fn free_value(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return schema == &Value::Bool(true);
    };
    const SHAPES: &[&str] = &[
        "type",
        "enum",
        "const",
        "properties",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "items",
        "prefixItems",
    ];
    if !SHAPES.iter().any(|k| map.contains_key(*k)) {
        return true; // no constraint on the value's form (`{}`, a description only)
    }
    let may_be_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => map.contains_key("properties") || map.contains_key("additionalProperties"),
    };
    let open = match map.get("additionalProperties") {
        None => !map.contains_key("properties"),
        Some(Value::Bool(false)) => false,
        Some(_) => true,
    };
    let any_items = match map.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(types)) => types.iter().any(|t| t == "array"),
        _ => false,
    } && !map.contains_key("items")
        && !map.contains_key("prefixItems");
    (may_be_object && open) || any_items
}

/// `schema` with every object closed, or `None` when it holds a free value (see
/// [`free_value`]). A property reached through parameter names only (`direct`, its path
/// in `path`) that has no closed form becomes bounded text, its path noted in `texts`:
/// the free value itself, or the array or alternatives that hold one.
fn close(
    schema: &Value,
    path: &mut Vec<String>,
    direct: bool,
    texts: &mut Vec<Vec<String>>,
) -> Option<Value> {
    if free_value(schema) {
        return None;
    }
    let Value::Object(map) = schema else {
        return Some(schema.clone()); // `false`
    };
    let mut out = Map::new();
    for (key, value) in map {
        let value = match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => {
                let mut closed = Map::new();
                for (name, sub) in properties {
                    path.push(name.clone());
                    let mark = texts.len();
                    let sub = match close(sub, path, direct, texts) {
                        Some(sub) => Some(sub),
                        None if direct => {
                            texts.truncate(mark);
                            texts.push(path.clone());
                            Some(as_text(FREE_OBJECT_TEXT_MAX))
                        }
                        None => None,
                    };
                    path.pop();
                    closed.insert(name.clone(), sub?);
                }
                Value::Object(closed)
            }
            ("items" | "additionalItems", sub) => close(sub, path, false, texts)?,
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(subs)) => Value::Array(
                subs.iter()
                    .map(|sub| close(sub, path, false, texts))
                    .collect::<Option<Vec<_>>>()?,
            ),
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    if out.contains_key("properties") {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    Some(Value::Object(out))
}

/// Which arguments of which tool the schema asks for as text: `None` for the whole
/// argument object, else the paths (parameter names from the top) of the text values.
#[derive(Debug, Default, Clone)]
pub(crate) struct TextArguments(std::collections::HashMap<String, Option<Vec<Vec<String>>>>);

impl TextArguments {
    pub fn of(tools: &[ToolDefinition]) -> Self {
        let mut map = std::collections::HashMap::new();
        for tool in tools {
            match closed_arguments(&tool.parameters) {
                None => {
                    map.insert(tool.name.clone(), None);
                }
                Some((_, paths)) if !paths.is_empty() => {
                    map.insert(tool.name.clone(), Some(paths));
                }
                Some(_) => {}
            }
        }
        TextArguments(map)
    }

    /// The call's arguments with the text ones read back into values. Text that is not
    /// JSON of the kind asked for stays text: the pipeline's validation then names the
    /// parameter.
    fn read_back(&self, tool: &str, arguments: Value) -> Value {
        let parse = |v: &Value| match v {
            Value::String(text) => match serde_json::from_str::<Value>(text) {
                Ok(value @ (Value::Object(_) | Value::Array(_))) => Some(value),
                _ => None,
            },
            _ => None,
        };
        match self.0.get(tool) {
            Some(None) => parse(&arguments).unwrap_or(arguments),
            Some(Some(paths)) => {
                let mut arguments = arguments;
                for path in paths {
                    let mut at = Some(&mut arguments);
                    for name in path {
                        at = at.and_then(|v| v.get_mut(name));
                    }
                    if let Some(value) = at {
                        if let Some(object) = parse(value) {
                            *value = object;
                        }
                    }
                }
                arguments
            }
            None => arguments,
        }
    }
}

fn has_references(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k == "$ref" || k == "$defs" || k == "definitions" || has_references(v)),
        Value::Array(items) => items.iter().any(has_references),
        _ => false,
    }
}

/// What the model reads about the answer's form and the offered tools, appended to the
/// system message: each tool's name and the first sentence of its description (the full
/// parameter schema is enforced by the grammar, not read).
pub fn instruction(tools: &[ToolDefinition]) -> String {
    let mut text = String::from(
        "Answer with one JSON object. To answer the user: {\"reply\": \"your answer\"}. \
         To use a tool: {\"tool\": \"<name>\", \"arguments\": {…}}; its result comes back \
         in the next message. Tools:",
    );
    for tool in tools {
        text.push_str("\n- ");
        text.push_str(&tool.name);
        let summary = first_sentence(&tool.description);
        if !summary.is_empty() {
            text.push_str(": ");
            text.push_str(summary);
        }
    }
    text
}

fn first_sentence(text: &str) -> &str {
    let line = text.lines().next().unwrap_or("").trim();
    match line.find(". ") {
        Some(end) => &line[..=end],
        None => line,
    }
}

/// Reads a constrained reply as it streams: the text of a `{"reply": "…"}` goes out as it
/// comes; everything else waits for the end of the reply.
#[derive(Debug, Default)]
pub(crate) struct ReplyDecoder {
    /// The offered tools' names: the only ones a call may have.
    names: Vec<String>,
    /// The arguments the schema asked for as text, to read back.
    text_arguments: TextArguments,
    /// Every byte of content so far.
    content: String,
    scan: Scan,
    /// Text decoded from the reply string and sent as deltas.
    sent: usize,
}

#[derive(Debug, Default, PartialEq)]
enum Scan {
    /// Not yet known whether this is a reply.
    #[default]
    Prefix,
    /// Inside the reply string; `at` is where undecoded content starts.
    Reply { at: usize },
    /// The reply string closed (the rest is `}` and whitespace).
    ReplyDone,
    /// A call, or not a reply: read at the end.
    Other,
}

impl ReplyDecoder {
    /// A decoder for a reply constrained to `tools`.
    pub fn new(tools: &[ToolDefinition]) -> Self {
        ReplyDecoder {
            names: tools.iter().map(|t| t.name.clone()).collect(),
            text_arguments: TextArguments::of(tools),
            ..ReplyDecoder::default()
        }
    }

    /// One fragment of the message content.
    pub fn push(&mut self, fragment: &str, out: &mut VecDeque<Event>) {
        self.content.push_str(fragment);
        if self.scan == Scan::Prefix {
            self.scan = match reply_prefix(&self.content) {
                Prefix::Matched(at) => Scan::Reply { at },
                Prefix::Possible => Scan::Prefix,
                Prefix::No => Scan::Other,
            };
        }
        if let Scan::Reply { at } = self.scan {
            let (text, next, closed) = decode_string(&self.content[at..]);
            if !text.is_empty() {
                self.sent += text.len();
                out.push_back(Event::TextDelta(text));
            }
            self.scan = if closed {
                Scan::ReplyDone
            } else {
                Scan::Reply { at: at + next }
            };
        }
    }

    /// The reply ended: `stop` is the server's reason (`None`: it never gave one – the body
    /// or `[DONE]` came first). Emits what the content means and returns the stop reason to
    /// report: a call is tool use.
    ///
    /// A call the reply ended inside of (JSON that is only cut short, not wrong) is a cut
    /// reply, never a malformed call: at the reply cap (`length`) the reply stops there as
    /// [`StopReason::MaxTokens`], with nothing of the call emitted; ended any other way it
    /// is [`ProviderError::StreamCut`] with the call so far. A complete call of a tool that
    /// was not offered is [`ProviderError::UnknownTool`].
    pub fn finish(
        &mut self,
        stop: Option<StopReason>,
        out: &mut VecDeque<Event>,
    ) -> Result<StopReason, ProviderError> {
        let partial = self.partial();
        let content = std::mem::take(&mut self.content);
        if matches!(self.scan, Scan::Reply { .. } | Scan::ReplyDone) {
            // The text went out as it came; an unclosed string is a reply cut short.
            return Ok(stop.unwrap_or(StopReason::EndTurn));
        }
        let parsed = serde_json::from_str::<Value>(&content);
        if let Ok(Value::Object(object)) = &parsed {
            if let Some(Value::String(reply)) = object.get("reply") {
                if !reply.is_empty() {
                    out.push_back(Event::TextDelta(reply.clone()));
                }
                return Ok(stop.unwrap_or(StopReason::EndTurn));
            }
            if let Some(Value::String(name)) = object.get("tool") {
                self.check_offered(name)?;
                let arguments = match object.get("arguments") {
                    Some(Value::Object(args)) => self
                        .text_arguments
                        .read_back(name, Value::Object(args.clone())),
                    Some(text @ Value::String(_)) => {
                        match self.text_arguments.read_back(name, text.clone()) {
                            object @ Value::Object(_) => object,
                            other => {
                                return Err(malformed(
                                    name,
                                    &content,
                                    &format!("arguments are {other}"),
                                ))
                            }
                        }
                    }
                    None | Some(Value::Null) => Value::Object(Map::new()),
                    Some(other) => {
                        return Err(malformed(name, &content, &format!("arguments are {other}")))
                    }
                };
                emit_call(name, arguments, out);
                return Ok(StopReason::ToolUse);
            }
        }
        let cut_short = matches!(&parsed, Err(e) if e.is_eof());
        if cut_short && opens_call(&content) {
            return match stop {
                Some(StopReason::MaxTokens) => Ok(StopReason::MaxTokens),
                other => Err(ProviderError::StreamCut {
                    api: Api::OpenAi,
                    detail: match other {
                        Some(reason) => format!(
                            "the server ended the reply inside a tool call (finish_reason \
                             `{}`)",
                            finish_reason(&reason)
                        ),
                        None => "the reply ended inside a tool call".into(),
                    },
                    partial_tool_calls: partial.into_iter().collect(),
                }),
            };
        }
        // A call that is complete but broken: the loop answers it with the raw text, as a
        // native call.
        if let Some(name) = tool_name_prefix(&content) {
            self.check_offered(&name)?;
            return Err(malformed(
                &name,
                &content,
                "the constrained reply is not complete JSON",
            ));
        }
        // Not the schema at all (a server that ignored it): the model's words, as text.
        if !content.trim().is_empty() {
            out.push_back(Event::TextDelta(content));
        }
        Ok(stop.unwrap_or(StopReason::EndTurn))
    }

    /// A call's name must be one of the offered tools (a server that ignores the schema
    /// lets the model write any).
    fn check_offered(&self, name: &str) -> Result<(), ProviderError> {
        if self.names.iter().any(|n| n == name) {
            return Ok(());
        }
        Err(ProviderError::UnknownTool {
            api: Api::OpenAi,
            name: crate::http::truncate(name, 80),
            offered: self.names.clone(),
        })
    }

    /// The call the content has begun, for a cut-stream error: its name once that is
    /// complete, and its argument text so far.
    pub fn partial(&self) -> Option<PartialToolCall> {
        if matches!(self.scan, Scan::Reply { .. } | Scan::ReplyDone) {
            return None;
        }
        let (name, rest) = tool_name_and_rest(&self.content)?;
        let arguments = rest
            .trim_start()
            .strip_prefix(',')
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix("\"arguments\""))
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::trim_start)
            .unwrap_or("");
        Some(PartialToolCall {
            index: 0,
            id: CALL_ID.into(),
            name,
            raw_arguments: arguments.to_owned(),
        })
    }
}

/// The wire's word for `reason`.
fn finish_reason(reason: &StopReason) -> &str {
    match reason {
        StopReason::EndTurn => "stop",
        StopReason::MaxTokens => "length",
        StopReason::ToolUse => "tool_calls",
        StopReason::StopSequence => "stop",
        StopReason::Refusal => "content_filter",
        StopReason::Other(other) => other,
    }
}

fn emit_call(name: &str, arguments: Value, out: &mut VecDeque<Event>) {
    out.push_back(Event::ToolCallStart {
        index: 0,
        id: CALL_ID.into(),
        name: name.into(),
    });
    out.push_back(Event::ToolCallArgsDelta {
        index: 0,
        delta: arguments.to_string(),
    });
    out.push_back(Event::ToolCallEnd {
        index: 0,
        call: ToolCall {
            id: CALL_ID.into(),
            name: name.into(),
            arguments,
        },
    });
}

fn malformed(name: &str, raw: &str, error: &str) -> ProviderError {
    ProviderError::MalformedToolArguments {
        api: Api::OpenAi,
        id: CALL_ID.into(),
        name: name.into(),
        raw: raw.into(),
        error: error.into(),
    }
}

enum Prefix {
    /// The content opens `{"reply": "`; the string starts at this byte.
    Matched(usize),
    /// What came so far could still open a reply.
    Possible,
    No,
}

/// Whether `content` opens with `{ "reply" : "` (any JSON whitespace between).
fn reply_prefix(content: &str) -> Prefix {
    let tokens: [&str; 4] = ["{", "\"reply\"", ":", "\""];
    let bytes = content.as_bytes();
    let mut at = 0;
    for token in tokens {
        while at < bytes.len() && matches!(bytes[at], b' ' | b'\n' | b'\r' | b'\t') {
            at += 1;
        }
        let rest = &content[at..];
        if rest.len() < token.len() {
            return if token.starts_with(rest) {
                Prefix::Possible
            } else {
                Prefix::No
            };
        }
        if !rest.starts_with(token) {
            return Prefix::No;
        }
        at += token.len();
    }
    Prefix::Matched(at)
}

/// The tool name of content that opens `{"tool": "name"`, if it does.
fn tool_name_prefix(content: &str) -> Option<String> {
    tool_name_and_rest(content).map(|(name, _)| name)
}

/// The tool name of content that opens `{"tool": "name"`, and the content after it.
fn tool_name_and_rest(content: &str) -> Option<(String, &str)> {
    let rest = content.trim_start().strip_prefix('{')?.trim_start();
    let rest = rest.strip_prefix("\"tool\"")?.trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let (name, read, closed) = decode_string(rest);
    closed.then(|| (name, &rest[read..]))
}

/// Whether `content` is, or may still become, `{"tool": …` – the start of a call.
fn opens_call(content: &str) -> bool {
    let Some(rest) = content.trim_start().strip_prefix('{') else {
        return false;
    };
    let rest = rest.trim_start();
    let key = "\"tool\"";
    rest.starts_with(key) || key.starts_with(rest)
}

/// Decodes a JSON string body from its start: the text decoded, how many bytes were read,
/// and whether the closing quote came. Stops before an escape that is not complete yet.
fn decode_string(s: &str) -> (String, usize, bool) {
    let mut text = String::new();
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return (text, i + 1, true),
            b'\\' => {
                let Some(&kind) = bytes.get(i + 1) else {
                    break;
                };
                let simple = match kind {
                    b'n' => Some('\n'),
                    b't' => Some('\t'),
                    b'r' => Some('\r'),
                    b'b' => Some('\u{8}'),
                    b'f' => Some('\u{c}'),
                    b'"' => Some('"'),
                    b'\\' => Some('\\'),
                    b'/' => Some('/'),
                    _ => None,
                };
                if let Some(c) = simple {
                    text.push(c);
                    i += 2;
                    continue;
                }
                if kind != b'u' {
                    // Not JSON; keep it as written rather than lose it.
                    text.push('\\');
                    i += 1;
                    continue;
                }
                let Some(unit) = hex4(bytes, i + 2) else {
                    if bytes.len() < i + 6 {
                        break; // the escape is still arriving
                    }
                    text.push('\u{fffd}');
                    i += 6;
                    continue;
                };
                if (0xD800..0xDC00).contains(&unit) {
                    // A high surrogate needs its low half.
                    if bytes.len() < i + 12 {
                        break;
                    }
                    match (bytes.get(i + 6..i + 8), hex4(bytes, i + 8)) {
                        (Some(b"\\u"), Some(low)) if (0xDC00..0xE000).contains(&low) => {
                            let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                            text.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                            i += 12;
                        }
                        _ => {
                            text.push('\u{fffd}');
                            i += 6;
                        }
                    }
                    continue;
                }
                text.push(char::from_u32(unit).unwrap_or('\u{fffd}'));
                i += 6;
            }
            _ => {
                // A whole UTF-8 character (content fragments are whole strings).
                let c = s[i..].chars().next().expect("inside the string");
                text.push(c);
                i += c.len_utf8();
            }
        }
    }
    (text, i, false)
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = std::str::from_utf8(bytes.get(at..at + 4)?).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tools the decoder tests offer.
    fn offered() -> Vec<ToolDefinition> {
        vec![ToolDefinition {
            name: "project_dataset_add".into(),
            description: "Adds a dataset.".into(),
            parameters: json!({"type": "object", "properties": {"title": {"type": "string"}}}),
        }]
    }

    fn run_raw(
        fragments: &[&str],
        stop: Option<StopReason>,
    ) -> (Vec<Event>, Result<StopReason, ProviderError>) {
        let mut decoder = ReplyDecoder::new(&offered());
        let mut out = VecDeque::new();
        for f in fragments {
            decoder.push(f, &mut out);
        }
        let result = decoder.finish(stop, &mut out);
        (out.into(), result)
    }

    fn run(fragments: &[&str], stop: StopReason) -> (Vec<Event>, Result<StopReason, String>) {
        let (events, result) = run_raw(fragments, Some(stop));
        (events, result.map_err(|e| e.to_string()))
    }

    fn text(events: &[Event]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                Event::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_reply_streams_its_text_as_it_comes_escapes_split_anywhere() {
        let whole = r#" { "reply" : "line one\nsays \"hi\" \u00e9 \ud83d\ude00 caf\u00e9" }"#;
        for split in 1..whole.len() {
            if !whole.is_char_boundary(split) {
                continue;
            }
            let (events, result) = run(&[&whole[..split], &whole[split..]], StopReason::EndTurn);
            assert_eq!(result, Ok(StopReason::EndTurn));
            assert_eq!(
                text(&events),
                "line one\nsays \"hi\" é 😀 café",
                "split at {split}"
            );
        }
    }

    #[test]
    fn the_reply_text_goes_out_before_the_reply_ends() {
        let mut decoder = ReplyDecoder::new(&offered());
        let mut out = VecDeque::new();
        decoder.push("{\"reply\": \"Hel", &mut out);
        assert_eq!(out.pop_front(), Some(Event::TextDelta("Hel".into())));
    }

    #[test]
    fn a_call_becomes_start_arguments_and_end() {
        let (events, result) = run(
            &[
                r#"{"tool": "project_dataset_add", "#,
                r#""arguments": {"title": "Battery"}}"#,
            ],
            StopReason::EndTurn,
        );
        assert_eq!(result, Ok(StopReason::ToolUse));
        assert_eq!(
            events.last(),
            Some(&Event::ToolCallEnd {
                index: 0,
                call: ToolCall {
                    id: CALL_ID.into(),
                    name: "project_dataset_add".into(),
                    arguments: json!({"title": "Battery"}),
                },
            })
        );
        assert!(
            matches!(&events[0], Event::ToolCallStart { name, .. } if name == "project_dataset_add")
        );
    }

    /// How a reply that is not a clean call or reply ends.
    #[derive(Debug, PartialEq)]
    enum Outcome {
        /// Stopped at the reply cap, nothing of the call emitted.
        CutAtCap,
        /// A cut stream, with the call so far (name, argument text).
        StreamCut(Vec<(String, String)>),
        /// A malformed call of this tool, its raw text kept.
        Malformed(String),
        UnknownTool(String),
    }

    fn outcome(fragments: &[&str], stop: Option<StopReason>) -> Outcome {
        let (events, result) = run_raw(fragments, stop);
        let calls = events
            .iter()
            .filter(|e| !matches!(e, Event::TextDelta(_)))
            .count();
        assert_eq!(calls, 0, "no call events: {events:?}");
        match result {
            Ok(StopReason::MaxTokens) => {
                assert!(events.is_empty(), "no raw JSON as text: {events:?}");
                Outcome::CutAtCap
            }
            Err(ProviderError::StreamCut {
                partial_tool_calls, ..
            }) => Outcome::StreamCut(
                partial_tool_calls
                    .into_iter()
                    .map(|c| (c.name, c.raw_arguments))
                    .collect(),
            ),
            Err(ProviderError::MalformedToolArguments { name, raw, .. }) => {
                assert!(raw.contains(&name), "{raw}");
                Outcome::Malformed(name)
            }
            Err(ProviderError::UnknownTool { name, offered, .. }) => {
                assert_eq!(offered, ["project_dataset_add"]);
                Outcome::UnknownTool(name)
            }
            other => panic!("unexpected: {other:?} {events:?}"),
        }
    }

    #[test]
    fn a_call_cut_short_is_a_cut_reply_and_an_unknown_tool_a_typed_error() {
        use Outcome::*;
        let cap = Some(StopReason::MaxTokens);
        let stop = Some(StopReason::EndTurn);
        let add = "project_dataset_add";
        let cases: Vec<(&str, Vec<&str>, Option<StopReason>, Outcome)> = vec![
            // Cut by the reply cap anywhere inside the call: a cut reply, not a malformed call.
            (
                "cap inside the arguments",
                vec![r#"{"tool": "project_dataset_add", "arguments": {"tit"#],
                cap.clone(),
                CutAtCap,
            ),
            (
                "cap inside a string value",
                vec![
                    r#"{"tool": "project_dataset_add", "#,
                    r#""arguments": {"title": "Bat"#,
                ],
                cap.clone(),
                CutAtCap,
            ),
            (
                "cap inside the name",
                vec![r#"{"tool": "project_da"#],
                cap.clone(),
                CutAtCap,
            ),
            (
                "cap before the name",
                vec![r#"{"to"#],
                cap.clone(),
                CutAtCap,
            ),
            (
                "cap after the arguments",
                vec![r#"{"tool": "project_dataset_add", "arguments": {}"#],
                cap.clone(),
                CutAtCap,
            ),
            // The reply ended inside the call without the cap: a cut stream, call kept.
            (
                "no finish reason",
                vec![r#"{"tool": "project_dataset_add", "arguments": {"title": "Ba"#],
                None,
                StreamCut(vec![(add.into(), r#"{"title": "Ba"#.into())]),
            ),
            (
                "finish_reason stop inside the call",
                vec![r#"{"tool": "project_dataset_add", "arguments": "#],
                stop.clone(),
                StreamCut(vec![(add.into(), String::new())]),
            ),
            // Complete, but not the offered tools: one typed error.
            (
                "unknown name",
                vec![r#"{"tool": "project_delete", "arguments": {}}"#],
                stop.clone(),
                UnknownTool("project_delete".into()),
            ),
            (
                "unknown name, broken arguments",
                vec![r#"{"tool": "rm_rf", "arguments": {'x': 1}}"#],
                stop.clone(),
                UnknownTool("rm_rf".into()),
            ),
            // Complete but wrong JSON of an offered tool: still a malformed call.
            (
                "broken arguments",
                vec![r#"{"tool": "project_dataset_add", "arguments": {'title': 1}}"#],
                stop.clone(),
                Malformed(add.into()),
            ),
        ];
        for (case, fragments, stop, expected) in cases {
            assert_eq!(outcome(&fragments, stop), expected, "{case}");
        }
    }

    #[test]
    fn an_unknown_tool_says_so_in_plain_words() {
        let (_, result) = run_raw(
            &[r#"{"tool": "project_delete", "arguments": {"id": "p1"}}"#],
            Some(StopReason::EndTurn),
        );
        let message = result.unwrap_err().to_string();
        assert!(message.contains("does not exist"), "{message}");
        assert!(
            !message.contains('{') && !message.contains("project_delete"),
            "no raw JSON, no internal name: {message}"
        );
    }

    #[test]
    fn text_that_ignores_the_schema_is_kept_as_text() {
        let (events, result) = run(&["Sure! ", "The project is renamed."], StopReason::EndTurn);
        assert_eq!(result, Ok(StopReason::EndTurn));
        assert_eq!(text(&events), "Sure! The project is renamed.");
        let (events, _) = run(&[r#"{"answer": 4"#], StopReason::EndTurn);
        assert_eq!(text(&events), r#"{"answer": 4"#);
    }

    #[test]
    fn a_reply_cut_by_the_length_cap_keeps_its_text_and_says_so() {
        let (events, result) = run(&[r#"{"reply": "It is a long"#], StopReason::MaxTokens);
        assert_eq!(result, Ok(StopReason::MaxTokens));
        assert_eq!(text(&events), "It is a long");
    }

    #[test]
    fn the_schema_offers_a_reply_and_exactly_the_given_tools() {
        let tools = vec![
            ToolDefinition {
                name: "a_b".into(),
                description: "Adds a b. More words.".into(),
                parameters: json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
            },
            ToolDefinition {
                name: "tree".into(),
                description: "Recursive.".into(),
                parameters: json!({"type": "object", "$defs": {"N": {}}, "properties": {"n": {"$ref": "#/$defs/N"}}}),
            },
        ];
        let format = response_format(&tools);
        let choices = format["json_schema"]["schema"]["anyOf"].as_array().unwrap();
        let names: Vec<_> = choices[1..]
            .iter()
            .map(|c| c["properties"]["tool"]["const"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a_b", "tree"]);
        assert_eq!(
            choices[1]["properties"]["arguments"],
            json!({"type": "object", "properties": {"x": {"type": "integer"}},
                   "additionalProperties": false})
        );
        assert_eq!(
            choices[2]["properties"]["arguments"],
            json!({"type": "string", "maxLength": FREE_ARGUMENTS_TEXT_MAX,
                   "description": "a JSON object, as text"})
        );
        let menu = instruction(&tools);
        assert!(
            menu.ends_with("- a_b: Adds a b.\n- tree: Recursive."),
            "{menu}"
        );
    }

    #[test]
    fn a_free_value_at_any_depth_is_text_at_its_nearest_parameter_and_read_back_there() {
        let tools = vec![ToolDefinition {
            name: "deep".into(),
            description: "Deep.".into(),
            parameters: json!({"type": "object", "properties": {
                "opts": {"type": "object", "properties": {
                    "extra": {"type": "object"},
                    "n": {"type": "integer"}
                }},
                "rows": {"type": "array", "items": {"type": "object"}},
                "pick": {"anyOf": [{"type": "string"}, {"description": "anything"}]}
            }}),
        }];
        let format = response_format(&tools);
        let args = &format["json_schema"]["schema"]["anyOf"][1]["properties"]["arguments"];
        let text = as_text(FREE_OBJECT_TEXT_MAX);
        assert_eq!(args["additionalProperties"], false);
        assert_eq!(args["properties"]["opts"]["additionalProperties"], false);
        assert_eq!(args["properties"]["opts"]["properties"]["extra"], text);
        assert_eq!(
            args["properties"]["opts"]["properties"]["n"],
            json!({"type": "integer"})
        );
        assert_eq!(
            args["properties"]["rows"], text,
            "the array holding free items"
        );
        assert_eq!(
            args["properties"]["pick"], text,
            "the alternatives holding one"
        );
        let (events, result) = {
            let mut decoder = ReplyDecoder::new(&tools);
            let mut out = VecDeque::new();
            decoder.push(
                r#"{"tool": "deep", "arguments": {"opts": {"extra": "{\"a\": 1}", "n": 2}, "rows": "[{\"b\": 2}]", "pick": "x"}}"#,
                &mut out,
            );
            let result = decoder.finish(Some(StopReason::EndTurn), &mut out);
            (out, result)
        };
        assert_eq!(result.unwrap(), StopReason::ToolUse);
        match events.back() {
            Some(Event::ToolCallEnd { call, .. }) => assert_eq!(
                call.arguments,
                json!({"opts": {"extra": {"a": 1}, "n": 2}, "rows": [{"b": 2}], "pick": "x"})
            ),
            other => panic!("not a call: {other:?}"),
        }
    }

    #[test]
    fn free_form_objects_are_asked_for_as_bounded_text_and_read_back() {
        let tools = vec![
            ToolDefinition {
                name: "meta_executeCommand".into(),
                description: "Runs a command.".into(),
                parameters: json!({"type": "object", "properties": {
                    "name": {"type": "string"},
                    "params": {"type": "object", "additionalProperties": true}
                }, "required": ["name"]}),
            },
            ToolDefinition {
                name: "tree".into(),
                description: "Recursive.".into(),
                parameters: json!({"type": "object", "$defs": {"N": {}}, "properties": {"n": {"$ref": "#/$defs/N"}}}),
            },
        ];
        let format = response_format(&tools);
        let args = &format["json_schema"]["schema"]["anyOf"][1]["properties"]["arguments"];
        assert_eq!(args["properties"]["name"], json!({"type": "string"}));
        assert_eq!(args["properties"]["params"]["type"], "string");
        assert_eq!(
            args["properties"]["params"]["maxLength"],
            FREE_OBJECT_TEXT_MAX
        );
        assert_eq!(args["required"], json!(["name"]));
        let call = |content: &str| {
            let mut decoder = ReplyDecoder::new(&tools);
            let mut out = VecDeque::new();
            decoder.push(content, &mut out);
            let stop = decoder.finish(Some(StopReason::EndTurn), &mut out);
            (out, stop)
        };
        let arguments = |out: &VecDeque<Event>| match out.back() {
            Some(Event::ToolCallEnd { call, .. }) => call.arguments.clone(),
            other => panic!("not a call: {other:?}"),
        };
        // The text is read back into the object.
        let (out, stop) = call(
            r#"{"tool": "meta_executeCommand", "arguments": {"name": "project.setTitle", "params": "{\"title\": \"Bench A\"}"}}"#,
        );
        assert_eq!(stop.unwrap(), StopReason::ToolUse);
        assert_eq!(
            arguments(&out),
            json!({"name": "project.setTitle", "params": {"title": "Bench A"}})
        );
        // Text that is no object stays text, for the pipeline to name.
        let (out, _) = call(
            r#"{"tool": "meta_executeCommand", "arguments": {"name": "io.status", "params": "none"}}"#,
        );
        assert_eq!(
            arguments(&out),
            json!({"name": "io.status", "params": "none"})
        );
        // A recursive type's whole arguments, as text.
        let (out, _) = call(r#"{"tool": "tree", "arguments": "{\"n\": {\"n\": {}}}"}"#);
        assert_eq!(arguments(&out), json!({"n": {"n": {}}}));
        // Unreadable whole-argument text is a malformed call, with its raw text.
        let (_, stop) = call(r#"{"tool": "tree", "arguments": "not json"}"#);
        assert!(stop.is_err());
    }
}
