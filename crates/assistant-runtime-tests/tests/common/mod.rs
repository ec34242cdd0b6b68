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
