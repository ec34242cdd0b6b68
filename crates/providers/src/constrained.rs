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
//! Anything else the server sends – JSON that is cut off, not JSON at all (a server that
//! ignored the schema) – keeps every word the model said: as text, or as a malformed call
//! the loop answers with an error.

use std::collections::VecDeque;

use serde_json::{json, Map, Value};

use crate::error::{Api, ProviderError};
use crate::model::{Event, StopReason, ToolCall, ToolDefinition};

/// The schema's name in `response_format`.
pub const SCHEMA_NAME: &str = "reply_or_tool_call";

/// The id a constrained call gets (one call per reply; the loop makes ids unique per chat).
const CALL_ID: &str = "call_json";

/// The most characters of JSON text a free-form object may take in a constrained call.
///
/// A grammar cannot bound how many keys an object of any shape gets (llama.cpp's schema
/// converter has no `maxProperties`), and a tiny model given one writes keys until the
/// reply cap cuts the call off – malformed. So a free-form object is asked for as JSON text
/// of bounded length instead ([`maxLength`] is enforced), and read back into the object.
pub const FREE_OBJECT_TEXT_MAX: u64 = 400;

/// A whole argument object of a recursive type, asked for as text: the same reason, more
/// room.
pub const FREE_ARGUMENTS_TEXT_MAX: u64 = 1_000;

/// The `response_format` value for `tools`: a reply, or one call of one offered tool with
/// that tool's parameters. A top-level parameter that is an object of any shape, and the
/// arguments of a tool whose schema keeps references of its own (a recursive type), are
/// asked for as JSON text of bounded length ([`FREE_OBJECT_TEXT_MAX`]); the decoder reads
/// them back into objects, and the pipeline validates them anyway.
pub fn response_format(tools: &[ToolDefinition]) -> Value {
    let mut choices = vec![json!({
        "type": "object",
        "properties": {"reply": {"type": "string"}},
        "required": ["reply"],
        "additionalProperties": false,
    })];
    for tool in tools {
        let arguments = if has_references(&tool.parameters) {
            as_text(FREE_ARGUMENTS_TEXT_MAX)
        } else {
            bounded(&tool.parameters)
        };
        choices.push(json!({
            "type": "object",
            // "tool" first: a grammar generates properties in this order, so the name is
            // settled before the arguments it decides.
            "properties": {"tool": {"const": tool.name}, "arguments": arguments},
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

/// An object schema with no properties of its own: any keys, any values.
fn is_free_object(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
        && schema.get("properties").is_none()
        && !matches!(schema.get("additionalProperties"), Some(Value::Bool(false)))
}

/// The parameters with each free-form top-level property asked for as bounded text.
fn bounded(parameters: &Value) -> Value {
    let mut parameters = parameters.clone();
    if let Some(Value::Object(properties)) = parameters.get_mut("properties") {
        for schema in properties.values_mut() {
            if is_free_object(schema) {
                *schema = as_text(FREE_OBJECT_TEXT_MAX);
            }
        }
    }
    parameters
}

/// Which arguments of which tool the schema asks for as text: `None` for the whole
/// argument object, else the top-level parameter names.
#[derive(Debug, Default, Clone)]
pub(crate) struct TextArguments(std::collections::HashMap<String, Option<Vec<String>>>);

impl TextArguments {
    pub fn of(tools: &[ToolDefinition]) -> Self {
        let mut map = std::collections::HashMap::new();
        for tool in tools {
            if has_references(&tool.parameters) {
                map.insert(tool.name.clone(), None);
                continue;
            }
            let names: Vec<String> = tool
                .parameters
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter(|(_, schema)| is_free_object(schema))
                .map(|(name, _)| name.clone())
                .collect();
            if !names.is_empty() {
                map.insert(tool.name.clone(), Some(names));
            }
        }
        TextArguments(map)
    }

    /// The call's arguments with the text ones read back into objects. Text that is not a
    /// JSON object stays text: the pipeline's validation then names the parameter.
    fn read_back(&self, tool: &str, arguments: Value) -> Value {
        let parse = |v: &Value| match v {
            Value::String(text) => match serde_json::from_str::<Value>(text) {
                Ok(object @ Value::Object(_)) => Some(object),
                _ => None,
            },
            _ => None,
        };
        match self.0.get(tool) {
            Some(None) => parse(&arguments).unwrap_or(arguments),
            Some(Some(names)) => {
                let mut arguments = arguments;
                if let Value::Object(map) = &mut arguments {
                    for name in names {
                        if let Some(object) = map.get(name).and_then(parse) {
                            map.insert(name.clone(), object);
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

    /// The reply ended with `stop` (the server's reason). Emits what the content means and
    /// returns the stop reason to report: a call is tool use.
    pub fn finish(
        &mut self,
        stop: StopReason,
        out: &mut VecDeque<Event>,
    ) -> Result<StopReason, ProviderError> {
        let content = std::mem::take(&mut self.content);
        if matches!(self.scan, Scan::Reply { .. } | Scan::ReplyDone) {
            // The text went out as it came; an unclosed string is a reply cut short.
            return Ok(stop);
        }
        let parsed: Option<Map<String, Value>> = serde_json::from_str(&content).ok();
        if let Some(object) = parsed {
            if let Some(Value::String(reply)) = object.get("reply") {
                if !reply.is_empty() {
                    out.push_back(Event::TextDelta(reply.clone()));
                }
                return Ok(stop);
            }
            if let Some(Value::String(name)) = object.get("tool") {
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
        // A call cut off or broken: the loop answers it with the raw text, as a native call.
        if let Some(name) = tool_name_prefix(&content) {
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
        Ok(stop)
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
    let rest = content.trim_start().strip_prefix('{')?.trim_start();
    let rest = rest.strip_prefix("\"tool\"")?.trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let (name, _, closed) = decode_string(rest);
    closed.then_some(name)
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

    fn run(fragments: &[&str], stop: StopReason) -> (Vec<Event>, Result<StopReason, String>) {
        let mut decoder = ReplyDecoder::default();
        let mut out = VecDeque::new();
        for f in fragments {
            decoder.push(f, &mut out);
        }
        let result = decoder.finish(stop, &mut out).map_err(|e| e.to_string());
        (out.into(), result)
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
        let mut decoder = ReplyDecoder::default();
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

    #[test]
    fn a_cut_call_is_malformed_and_keeps_its_raw_text() {
        let (_, result) = run(
            &[r#"{"tool": "project_dataset_add", "arguments": {"tit"#],
            StopReason::MaxTokens,
        );
        let error = result.unwrap_err();
        assert!(error.contains("project_dataset_add"), "{error}");
        assert!(error.contains(r#"{"tit"#), "{error}");
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
        assert_eq!(choices[1]["properties"]["arguments"], tools[0].parameters);
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
            let stop = decoder.finish(StopReason::EndTurn, &mut out);
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
