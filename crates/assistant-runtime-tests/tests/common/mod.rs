//! Helpers the chat-door tests share: a runtime with one source, a door over a data
//! folder, the scripted provider server, and a turn driven to its end.

#![allow(dead_code)] // Each test binary uses its own share of these.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use sextant_assistant::door::ChatDoor;
use sextant_assistant::service::{ServiceEventKind, TurnEndKind};
use sextant_providers::script::{fixtures_dir, Script, ScriptServer};
use sextant_runtime::{Runtime, RuntimeHandle, Workspace};
use sextant_secrets::SecretStore;
use sextant_telemetry::project::{Project, Source};

pub fn runtime() -> RuntimeHandle {
    let project = Project {
        sources: vec![Source::default()],
        ..Project::default()
    };
    Runtime::new(Workspace::new(project)).spawn(None)
}

/// A door over `dir` working through a fresh [`runtime`].
pub fn open(dir: &Path) -> ChatDoor {
    open_with(dir, runtime())
}

/// A door over `dir` working through `runtime`, its keys in the encrypted-file store.
pub fn open_with(dir: &Path, runtime: RuntimeHandle) -> ChatDoor {
    let secrets = SecretStore::encrypted_file(dir).unwrap();
    ChatDoor::open_with(dir, runtime, secrets).unwrap()
}

pub async fn ok(door: &ChatDoor, request: Value) -> Value {
    match door.handle(request.clone()).await {
        Ok(v) => v,
        Err(e) => panic!("{request} failed: {e:?}"),
    }
}

pub async fn serve(name: &str) -> ScriptServer {
    ScriptServer::start(Script::load(
        &fixtures_dir().join("service").join(format!("{name}.json")),
    ))
    .await
}

pub async fn use_provider(door: &ChatDoor, server: &ScriptServer, model: &str) {
    ok(
        door,
        json!({"op": "setSettings", "provider": "anthropic", "baseUrl": server.url(),
               "model": model, "apiKey": "sk-ant-test"}),
    )
    .await;
}

/// A door over `dir` using `server` as `model`, with the person's approval of every edit
/// given in advance (the tests that need the tools to run without a prompt).
pub async fn open_auto_approving(dir: &Path, server: &ScriptServer, model: &str) -> ChatDoor {
    let door = open(dir);
    ok(
        &door,
        json!({"op": "setSettings", "provider": "anthropic", "baseUrl": server.url(),
               "model": model, "apiKey": "sk-ant-test", "autoApproveEdits": true}),
    )
    .await;
    door
}

/// Sends `text` and waits for the turn's end (it must finish); returns every text the
/// door streamed.
pub async fn turn(door: &ChatDoor, chat: &Value, text: &str) -> Vec<String> {
    let mut events = door.service().subscribe();
    ok(door, json!({"op": "send", "chat": chat, "text": text})).await;
    let mut streamed = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), events.recv())
            .await
            .expect("an event within 20 s")
            .expect("no lag");
        match event.kind {
            ServiceEventKind::TextDelta { text, .. } => streamed.push(text),
            ServiceEventKind::TurnEnded { end, detail } => {
                assert_eq!(end, TurnEndKind::Finished, "{detail:?}");
                return streamed;
            }
            _ => {}
        }
    }
}

/// The per-request blocks of an Anthropic body: the text blocks after the history's cache
/// breakpoint (the end of the newest message), where the live state and what else changes
/// every request go.
pub fn per_request_blocks(body: &Value) -> Vec<Value> {
    let messages = body["messages"].as_array().expect("a messages array");
    let marked = |m: &Value| {
        m["content"]
            .as_array()
            .and_then(|c| c.iter().rposition(|b| b.get("cache_control").is_some()))
    };
    let Some(last) = messages.last() else {
        return Vec::new();
    };
    let content = last["content"].as_array().expect("content blocks");
    match marked(last) {
        Some(i) => content[i + 1..].to_vec(),
        // After an assistant message the per-request blocks are a message of their own.
        None if messages.len() > 1 && marked(&messages[messages.len() - 2]).is_some() => {
            content.clone()
        }
        None => Vec::new(),
    }
}

/// The prompt's blocks as a person reads them: the system blocks, then the per-request
/// blocks that follow the history.
pub fn prompt_blocks(body: &Value) -> Vec<Value> {
    let mut blocks = body["system"].as_array().expect("a system array").clone();
    blocks.extend(per_request_blocks(body));
    blocks
}

/// The system blocks up to and including the cache breakpoint, and the tools: what a
/// provider's prompt cache reuses.
pub fn cached_prefix(body: &Value) -> String {
    let system = body["system"].as_array().expect("a system array");
    let end = system
        .iter()
        .position(|b| b.get("cache_control").is_some())
        .expect("a breakpoint");
    serde_json::to_string(&(&system[..=end], &body["tools"])).unwrap()
}

// ---- scripts written in the test, and what a request shows outside its envelopes -------

/// A tool call of an Anthropic reply: its id, tool name and its arguments' raw JSON text
/// (malformed on purpose, when a test wants that – then it must be the reply's last call).
pub struct ScriptedCall<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub raw_args: String,
}

fn sse(event: &str, data: Value) -> Value {
    json!({"event": event, "data": data})
}

/// An Anthropic reply (a scripted turn) that makes `calls`, in order.
pub fn anthropic_calls(calls: &[ScriptedCall]) -> Value {
    let mut items = vec![sse(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_calls", "type": "message",
               "role": "assistant", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    )];
    for (index, call) in calls.iter().enumerate() {
        items.push(sse(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
        ));
        items.push(sse(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                   "delta": {"type": "input_json_delta", "partial_json": call.raw_args}}),
        ));
        items.push(sse(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    items.push(sse(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}}),
    ));
    items.push(sse("message_stop", json!({"type": "message_stop"})));
    json!({ "sse": items })
}

/// An Anthropic reply (a scripted turn) that says `text` and ends the turn.
pub fn anthropic_text(text: &str) -> Value {
    json!({"sse": [
        sse("message_start", json!({"type": "message_start", "message": {"id": "msg_text", "type": "message",
            "role": "assistant", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}})),
        sse("content_block_start", json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}})),
        sse("content_block_delta", json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}})),
        sse("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        sse("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3}})),
        sse("message_stop", json!({"type": "message_stop"})),
    ]})
}

/// A script of `turns` (each from [`anthropic_calls`] or [`anthropic_text`]).
pub fn script_of(turns: Vec<Value>) -> Script {
    serde_json::from_value(json!({ "turns": turns })).expect("a valid script")
}

/// The nonces of the envelopes the app opened in a request: the chat's (its history) and the
/// per-request blocks' (read from those blocks, which only the app writes).
pub fn envelope_nonces(body: &Value, chat_nonce: &str) -> Vec<String> {
    let mut nonces = vec![chat_nonce.to_string()];
    for block in per_request_blocks(body) {
        let text = block["text"].as_str().unwrap_or_default();
        for (at, _) in text.match_indices("<untrusted-") {
            let nonce: String = text[at + "<untrusted-".len()..]
                .chars()
                .take_while(char::is_ascii_hexdigit)
                .collect();
            if !nonces.contains(&nonce) {
                nonces.push(nonce);
            }
        }
    }
    nonces
}

/// `text` with every envelope of `nonces` – its opening tag to its closing tag – taken out:
/// what the model reads as not data. An envelope that never closes fails the test.
pub fn outside_envelopes(text: &str, nonces: &[String]) -> String {
    let mut out = String::new();
    let mut rest = text;
    loop {
        let next = nonces
            .iter()
            .filter_map(|n| {
                rest.find(&format!("<untrusted-{n} source=\""))
                    .map(|at| (at, n))
            })
            .min();
        let Some((start, nonce)) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..start]);
        let close = format!("</untrusted-{nonce}>");
        let end = rest[start..]
            .find(&close)
            .unwrap_or_else(|| panic!("an envelope never closed in: {text}"));
        rest = &rest[start + end + close.len()..];
    }
}

/// Every text the model reads in a request besides its own calls: the system blocks, and
/// each message's text blocks and tool results – labelled by where they are.
pub fn read_texts(body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, block) in body["system"].as_array().into_iter().flatten().enumerate() {
        out.push((
            format!("system[{i}]"),
            block["text"].as_str().unwrap_or_default().to_string(),
        ));
    }
    for (m, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let role = message["role"].as_str().unwrap_or_default();
        let blocks = match &message["content"] {
            Value::String(text) => vec![json!({"type": "text", "text": text})],
            Value::Array(blocks) => blocks.clone(),
            _ => Vec::new(),
        };
        for (b, block) in blocks.iter().enumerate() {
            let text = match block["type"].as_str() {
                Some("text") => block["text"].as_str().map(str::to_string),
                Some("tool_result") => match &block["content"] {
                    Value::String(text) => Some(text.clone()),
                    other => Some(other.to_string()),
                },
                _ => None,
            };
            if let Some(text) = text {
                out.push((format!("messages[{m}] ({role}) block {b}"), text));
            }
        }
    }
    out
}
