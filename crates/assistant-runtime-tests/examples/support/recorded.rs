//! What the assistant benchmarks share: the recorded long chats in
//! `fixtures/assistant/long-chats/` (a person's messages and the model's replies), turned
//! into Anthropic SSE turns of the scripted provider server, and a replay of a chat through
//! the chat door against the real registry that returns the request bodies the provider
//! received.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{json, Value};
use sextant_assistant::door::ChatDoor;
use sextant_assistant::service::{ServiceEventKind, TurnEndKind};
use sextant_providers::script::{Script, ScriptServer};
use sextant_runtime::{Runtime, Workspace};
use sextant_secrets::SecretStore;
use sextant_telemetry::project::{Project, Source};

#[derive(Deserialize)]
pub struct Recorded {
    pub title: String,
    pub turns: Vec<Turn>,
}

#[derive(Deserialize)]
pub struct Turn {
    pub user: String,
    pub replies: Vec<Reply>,
}

#[derive(Deserialize)]
pub struct Reply {
    pub text: String,
    pub calls: Vec<Call>,
}

#[derive(Deserialize)]
pub struct Call {
    pub name: String,
    pub args: Value,
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/assistant/long-chats")
}

/// One reply as the SSE events Anthropic streams.
pub fn sse(reply: &Reply, n: &mut usize) -> Value {
    let mut events = vec![
        json!({"event": "message_start", "data": {"type": "message_start",
        "message": {"id": format!("msg_{n}"), "type": "message", "role": "assistant", "content": [],
                    "usage": {"input_tokens": 1000, "output_tokens": 1}}}}),
    ];
    let mut index = 0;
    if !reply.text.is_empty() {
        events.push(
            json!({"event": "content_block_start", "data": {"type": "content_block_start",
            "index": index, "content_block": {"type": "text", "text": ""}}}),
        );
        events.push(
            json!({"event": "content_block_delta", "data": {"type": "content_block_delta",
            "index": index, "delta": {"type": "text_delta", "text": reply.text}}}),
        );
        events.push(json!({"event": "content_block_stop", "data": {"type": "content_block_stop", "index": index}}));
        index += 1;
    }
    for call in &reply.calls {
        *n += 1;
        events.push(
            json!({"event": "content_block_start", "data": {"type": "content_block_start",
            "index": index, "content_block": {"type": "tool_use", "id": format!("toolu_{n}"),
            "name": call.name, "input": {}}}}),
        );
        events.push(json!({"event": "content_block_delta", "data": {"type": "content_block_delta",
            "index": index, "delta": {"type": "input_json_delta", "partial_json": call.args.to_string()}}}));
        events.push(json!({"event": "content_block_stop", "data": {"type": "content_block_stop", "index": index}}));
        index += 1;
    }
    let stop = if reply.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    events.push(
        json!({"event": "message_delta", "data": {"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 20}}}),
    );
    events.push(json!({"event": "message_stop", "data": {"type": "message_stop"}}));
    json!({ "sse": events })
}

/// The script: every reply in order. (A compaction request would take the next reply and
/// shift the rest; the default budget is not reached by these chats with the mechanisms
/// on, and `main` checks that both runs made the same requests.)
pub fn script(chat: &Recorded) -> Script {
    let mut n = 0;
    let turns: Vec<Value> = chat
        .turns
        .iter()
        .flat_map(|t| t.replies.iter())
        .map(|r| sse(r, &mut n))
        .collect();
    serde_json::from_value(json!({"description": chat.title, "turns": turns})).unwrap()
}

/// Every chat in `fixtures/assistant/long-chats/`, by name, in order.
// Each example includes this file; only `long_chats` lists the folder.
#[allow(dead_code)]
pub fn names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            Some(name.strip_suffix(".json")?.to_string())
        })
        .collect();
    names.sort();
    names
}

/// Loads `fixtures/assistant/long-chats/NAME.json`.
pub fn load(name: &str) -> Recorded {
    let text = std::fs::read_to_string(fixtures().join(format!("{name}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Replays the first `turns` turns of `chat` through the chat door (a simulator source,
/// edits auto-approved, the Anthropic client against the scripted server) with `settings`
/// merged into the door's settings, and returns every request body the provider received.
pub async fn replay(chat: &Recorded, turns: usize, settings: Value) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptServer::start(script(chat)).await;
    let project = Project {
        sources: vec![Source::default()],
        ..Project::default()
    };
    let runtime = Runtime::new(Workspace::new(project)).spawn(None);
    let door = ChatDoor::open_with(
        dir.path(),
        runtime,
        SecretStore::encrypted_file(dir.path()).unwrap(),
    )
    .unwrap();
    let mut all = json!({"op": "setSettings", "provider": "anthropic", "baseUrl": server.url(),
        "model": "claude-long", "apiKey": "sk-ant-x", "autoApproveEdits": true});
    for (key, value) in settings.as_object().into_iter().flatten() {
        all[key] = value.clone();
    }
    door.handle(all).await.unwrap();
    let id = door.handle(json!({"op": "create"})).await.unwrap()["id"].clone();
    for turn in chat.turns.iter().take(turns) {
        let mut events = door.service().subscribe();
        door.handle(json!({"op": "send", "chat": id, "text": turn.user}))
            .await
            .unwrap();
        loop {
            match events.recv().await.unwrap().kind {
                // What edits' auto-approval does not cover (a send to a device, a file
                // outside the user's folders, a destructive step): the person says no at
                // once, as the model's recorded replies assumed nothing of the answer.
                ServiceEventKind::ApprovalRequested { call_id, .. } => {
                    door.handle(json!({"op": "deny", "chat": id, "callId": call_id}))
                        .await
                        .unwrap();
                }
                ServiceEventKind::TurnEnded { end, detail } => {
                    assert_eq!(end, TurnEndKind::Finished, "{}: {detail:?}", turn.user);
                    break;
                }
                _ => {}
            }
        }
    }
    server.requests().iter().map(|r| r.json()).collect()
}
