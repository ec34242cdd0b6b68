//! Tool-result compression, view only (spec 40 §4): a big tool result is shown to the model
//! as its error lines plus its first and last lines, the middle elided and marked. The log
//! keeps the whole result and the fold still produces it; only the request's view changes.
//!
//! Which results: one the model has already answered (any but its latest calls') over
//! [`COMPRESS_OVER_BYTES`] or over [`COMPRESS_SHARE`] of the request (its system blocks and
//! tools included); a result of the latest calls only when it is over that share – the
//! model is acting on what it just read, and cutting a fresh `project.get` to its ends would
//! make it guess ids. A result repeated word for word by a later one (a status polled
//! again) is shown once, at the later one; the earlier copies point to it; so is a read made
//! again with the same arguments whose answer changed ([`SupersededReads`]): the older
//! answer is out of date; and command documentation read before the turn in progress
//! ([`ReferenceReads`]): one call away if needed again. The output is bounded whatever the
//! input: at most [`KEEP_LINES`] lines from each end, [`MAX_ERROR_LINES`] error lines, each
//! line at most about [`MAX_LINE_BYTES`] bytes. A result in an envelope keeps its opening
//! and closing tags (they are its first and last lines), so the model still knows it is
//! data.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use sextant_providers::Message;

use crate::engine::conversation::Prompt;
use crate::engine::seams::HistoryTransform;
use crate::engine::seams::Seams;
use crate::engine::tools::{command_name, DISCOVERY, EXECUTE_COMMAND};
use crate::mechanisms::Mechanism;
use crate::settings::ServiceSettings;
use crate::Commands;
use sextant_commands::Tier;
use std::sync::Arc;

/// A result longer than this is compressed (exactly this many bytes passes unchanged).
pub const COMPRESS_OVER_BYTES: usize = 2_000;

/// A result over this share of the history's bytes is compressed.
pub const COMPRESS_SHARE: f64 = 0.40;

/// Lines kept from the start and from the end.
pub const KEEP_LINES: usize = 5;

/// Error lines kept from the middle, in order.
pub const MAX_ERROR_LINES: usize = 20;

/// A kept line longer than this keeps its start and end only.
pub const MAX_LINE_BYTES: usize = 400;

/// What makes a line an error line (lower-cased; Chinese as is).
const ERROR_MARKS: &[&str] = &[
    "error",
    "panic",
    "failed",
    "failure",
    "fatal",
    "exception",
    "traceback",
    "denied",
    "refused",
    "timed out",
    "timeout",
    "失败",
    "错误",
    "异常",
    "超时",
    "拒绝",
];

/// Whether a result of `bytes` is compressed in a history of `history_bytes`.
pub fn should_compress(bytes: usize, history_bytes: usize) -> bool {
    bytes > COMPRESS_OVER_BYTES || over_share(bytes, history_bytes)
}

fn over_share(bytes: usize, history_bytes: usize) -> bool {
    history_bytes > 0 && bytes as f64 > COMPRESS_SHARE * history_bytes as f64
}

fn is_error_line(line: &str) -> bool {
    let lower = line.to_lowercase();
    ERROR_MARKS.iter().any(|m| lower.contains(m))
}

/// The largest char boundary at or below `at`.
fn floor(s: &str, mut at: usize) -> usize {
    at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest char boundary at or above `at`.
fn ceil(s: &str, mut at: usize) -> usize {
    at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// A line cut to its start and end when it is too long.
fn cap_line(line: &str) -> String {
    if line.len() <= MAX_LINE_BYTES {
        return line.to_string();
    }
    let head = floor(line, MAX_LINE_BYTES * 3 / 5);
    let tail = ceil(line, line.len() - MAX_LINE_BYTES / 4);
    format!(
        "{}[… {} bytes elided by Sextant …]{}",
        &line[..head],
        tail - head,
        &line[tail..]
    )
}

fn elided(lines: usize) -> String {
    format!("[… {lines} lines elided by Sextant …]")
}

/// The key information of a text: the first and last [`KEEP_LINES`] lines, the error lines
/// between them (at most [`MAX_ERROR_LINES`]), every elision marked. Empty and short text
/// comes back unchanged.
pub fn extract_key_info(text: &str) -> String {
    // A final newline ends the last line; it does not start another.
    let (body, newline) = match text.strip_suffix('\n') {
        Some(body) => (body, "\n"),
        None => (text, ""),
    };
    let lines: Vec<&str> = body.split('\n').collect();
    let long_line = lines.iter().any(|l| l.len() > MAX_LINE_BYTES);
    if lines.len() <= 2 * KEEP_LINES && !long_line {
        return text.to_string();
    }
    let mut out: Vec<String> = Vec::new();
    let head = lines.len().min(KEEP_LINES);
    let tail_from = lines.len().saturating_sub(KEEP_LINES).max(head);
    out.extend(lines[..head].iter().map(|l| cap_line(l)));
    let mut skipped = 0;
    let mut errors = 0;
    for line in &lines[head..tail_from] {
        if errors < MAX_ERROR_LINES && is_error_line(line) {
            if skipped > 0 {
                out.push(elided(skipped));
                skipped = 0;
            }
            out.push(cap_line(line));
            errors += 1;
        } else {
            skipped += 1;
        }
    }
    if skipped > 0 {
        out.push(elided(skipped));
    }
    out.extend(lines[tail_from..].iter().map(|l| cap_line(l)));
    let out = out.join("\n") + newline;
    // Marking a gap of a line or two can cost more than it saves.
    if out.len() >= text.len() {
        return text.to_string();
    }
    out
}

/// [history] Compresses the big tool results of a request's view.
pub struct CompressToolResults {
    /// The bytes of the request besides its messages (system blocks, tool definitions):
    /// a result's share is of the whole context.
    pub prompt_bytes: usize,
}

impl HistoryTransform for CompressToolResults {
    fn transform(&self, mut messages: Vec<Message>) -> Vec<Message> {
        let total: usize = self.prompt_bytes + messages.iter().map(message_bytes).sum::<usize>();
        // The results the model has not answered yet: those after the last assistant
        // message (its latest calls' results). It acts on them now – cutting a fresh
        // `project.get` to its ends would make it guess ids – so they are compressed only
        // when they dominate the request.
        let fresh = messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }))
            .map_or(0, |i| i + 1);
        // A read repeated with the same output (the status polled again, the project read
        // twice unchanged) is shown once, where it is newest.
        let mut newest: std::collections::HashMap<String, String> = Default::default();
        for message in messages[..].iter_mut().rev() {
            if let Message::ToolResult {
                call_id, content, ..
            } = message
            {
                if content.len() < REPEAT_MIN_BYTES {
                    continue;
                }
                match newest.get(content.as_str()) {
                    Some(later) => *content = repeated(later),
                    None => {
                        newest.insert(content.clone(), call_id.clone());
                    }
                }
            }
        }
        for (i, message) in messages.iter_mut().enumerate() {
            if let Message::ToolResult { content, .. } = message {
                let compress = if i < fresh {
                    should_compress(content.len(), total)
                } else {
                    over_share(content.len(), total)
                };
                if compress {
                    *content = extract_key_info(content);
                }
            }
        }
        messages
    }
}

/// A result at least this long, repeated word for word by a later one, is shown as a
/// pointer to the later one.
pub const REPEAT_MIN_BYTES: usize = 160;

/// What an earlier copy of a repeated result is shown as.
pub fn repeated(later_call: &str) -> String {
    format!("[Same output as the result of call {later_call}, further on; shown there by Sextant.]")
}

fn message_bytes(message: &Message) -> usize {
    match message {
        Message::User { text } => text.len(),
        Message::Assistant { text, tool_calls } => {
            text.len()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
        }
        Message::ToolResult { content, .. } => content.len(),
    }
}

/// [history] Shows a read the model made again later – the same read-only (Safe) command
/// with the same arguments – as a pointer to the newer result. The older answer describes
/// the project, device or chat as it was; keeping it costs context and invites the model to
/// act on ids that may be gone (the role block tells it to read ids fresh). Edits are never
/// touched: two equal edits are two actions. The log keeps every result whole.
pub struct SupersededReads {
    /// The dotted names of the read-only commands.
    pub reads: HashSet<String>,
}

impl SupersededReads {
    /// The read a call makes: its command and arguments, or `None` for anything else.
    /// `meta_executeCommand {name, params}` is the read of `name`.
    fn read_of(&self, name: &str, arguments: &Value) -> Option<String> {
        let (command, params) = command_of(name, arguments)?;
        self.reads
            .contains(&command)
            .then(|| format!("{command} {}", canonical(&params)))
    }
}

/// The command a call runs and its parameters: `meta_executeCommand {name, params}` runs
/// `name`.
fn command_of(tool: &str, arguments: &Value) -> Option<(String, Value)> {
    let command = command_name(tool);
    let (command, params) = if command == EXECUTE_COMMAND {
        let target = arguments.get("name")?.as_str()?;
        (command_name(target), arguments.get("params").cloned())
    } else {
        (command, Some(arguments.clone()))
    };
    let params = match params {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(p) => p,
    };
    Some((command, params))
}

/// JSON text with every object's keys sorted: equal arguments in another key order (maps
/// keep the caller's order here) give equal text.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let fields: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{}:{}", Value::String(k.clone()), canonical(v)))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

impl HistoryTransform for SupersededReads {
    fn transform(&self, mut messages: Vec<Message>) -> Vec<Message> {
        let reads: HashMap<String, String> = messages
            .iter()
            .filter_map(|m| match m {
                Message::Assistant { tool_calls, .. } => Some(tool_calls),
                _ => None,
            })
            .flatten()
            .filter_map(|c| Some((c.id.clone(), self.read_of(&c.name, &c.arguments)?)))
            .collect();
        // Newest first: the first result of a read seen is the one kept.
        let mut newest: HashMap<&str, String> = HashMap::new();
        for message in messages.iter_mut().rev() {
            if let Message::ToolResult {
                call_id, content, ..
            } = message
            {
                let Some(read) = reads.get(call_id.as_str()) else {
                    continue;
                };
                match newest.get(read.as_str()) {
                    Some(later) => {
                        // A short answer costs less than the pointer: it stays.
                        let pointer = superseded(later);
                        if pointer.len() < content.len() {
                            *content = pointer;
                        }
                    }
                    None => {
                        newest.insert(read, call_id.clone());
                    }
                }
            }
        }
        messages
    }
}

/// What an older result of a read made again is shown as.
pub fn superseded(later_call: &str) -> String {
    format!("[Out of date: call {later_call} made this read again, further on. – Sextant]")
}

/// [history] Shows the command documentation the model read before the turn in progress
/// (`meta.describeCommand`, `meta.listCommands`) as a pointer. It is reference, not state:
/// the same for every read, Safe, and one call away when the model needs it again; kept
/// whole in the turn that read it (the model is acting on it) and in the log. In a long
/// chat that discovers its commands as it goes, these pages are most of the tool output that
/// no other rule shortens (each is under 2 KB).
pub struct ReferenceReads;

impl HistoryTransform for ReferenceReads {
    fn transform(&self, mut messages: Vec<Message>) -> Vec<Message> {
        // The turn in progress starts at the person's newest message.
        let Some(turn_start) = messages
            .iter()
            .rposition(|m| matches!(m, Message::User { .. }))
        else {
            return messages;
        };
        let reference: HashMap<String, String> = messages[..turn_start]
            .iter()
            .filter_map(|m| match m {
                Message::Assistant { tool_calls, .. } => Some(tool_calls),
                _ => None,
            })
            .flatten()
            .filter_map(|c| {
                let (command, _) = command_of(&c.name, &c.arguments)?;
                DISCOVERY
                    .contains(&command.as_str())
                    .then(|| (c.id.clone(), command))
            })
            .collect();
        for message in &mut messages[..turn_start] {
            if let Message::ToolResult {
                call_id, content, ..
            } = message
            {
                if let Some(command) = reference.get(call_id.as_str()) {
                    let pointer = reference_pointer(command);
                    if pointer.len() < content.len() {
                        *content = pointer;
                    }
                }
            }
        }
        messages
    }
}

/// What an older documentation read is shown as.
pub fn reference_pointer(command: &str) -> String {
    let tool = command.replace('.', "_");
    format!("[Documentation shown in an earlier turn; call {tool} again to read it. – Sextant]")
}

/// The row in the mechanism table. Spec 40 §4: big tool results shown to the model compressed
/// (the log keeps them): first documentation read in earlier turns and reads made again (their
/// older answers become pointers), then what is still big is cut to its key lines. A result's
/// share is of the whole request, so this needs the finished prompt's size.
pub(crate) struct ToolResultCompression;

impl Mechanism for ToolResultCompression {
    fn setting(&self) -> Option<&'static str> {
        Some("toolResultCompression")
    }

    fn on(&self, settings: &ServiceSettings) -> bool {
        settings.mechanisms.tool_result_compression
    }

    fn history(&self, seams: &mut Seams, commands: &Commands, prompt: &Prompt) {
        seams.history.push(Arc::new(ReferenceReads));
        seams.history.push(Arc::new(SupersededReads {
            reads: commands
                .specs()
                .iter()
                .filter(|spec| spec.tier == Tier::Safe)
                .map(|spec| spec.name.clone())
                .collect(),
        }));
        seams.history.push(Arc::new(CompressToolResults {
            prompt_bytes: prompt_bytes(prompt),
        }));
    }
}

/// The bytes of a prompt's system blocks and tool definitions.
fn prompt_bytes(prompt: &Prompt) -> usize {
    let system: usize = prompt.system.iter().map(|b| b.text.len()).sum();
    let tools: usize = prompt
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    system + tools
}
