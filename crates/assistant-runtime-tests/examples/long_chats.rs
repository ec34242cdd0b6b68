//! Staying on topic, measured (spec 40): three long recorded chats replayed through the chat
//! door with the five mechanisms off and on, from the request bodies the provider received.
//!
//! Each chat in `fixtures/assistant/long-chats/` is a person's messages and, for each, the
//! model's replies (text and tool calls) as recorded; the replies become Anthropic SSE turns
//! of the scripted provider server (real HTTP, the real wire format), and every call runs
//! against the real registry (a simulator source, edits auto-approved), so tool results
//! have their real sizes. The model is scripted, so it cannot react to what it is shown:
//! the empty-echo rate is the recording's, the same in both runs.
//!
//! Reported per chat and mode: requests; tool-definition bytes per request (all requests,
//! and the requests narrowing narrowed); tool-output bytes per request and their share of
//! the request (narrowing shrinks the rest of the request too, so the share falls less);
//! bytes per request (mean, largest); compaction requests.
//!
//! `cargo run --release -p sextant-assistant-runtime-tests --example long_chats`

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{json, Value};
use sextant_assistant::compaction::COMPACTION_PROMPT;
use sextant_assistant::door::ChatDoor;
use sextant_assistant::service::{ServiceEventKind, TurnEndKind};
use sextant_providers::script::{Script, ScriptServer};
use sextant_runtime::{Runtime, Workspace};
use sextant_secrets::SecretStore;
use sextant_telemetry::project::{Project, Source};

const CHATS: [&str; 3] = ["dashboard", "parser", "mqtt"];
const MECHANISMS: [&str; 5] = [
    "focusPrompt",
    "intentNarrowing",
    "toolResultCompression",
    "topicCompaction",
    "topicMarker",
];

#[derive(Deserialize)]
struct Recorded {
    title: String,
    turns: Vec<Turn>,
}

#[derive(Deserialize)]
struct Turn {
    user: String,
    replies: Vec<Reply>,
}

#[derive(Deserialize)]
struct Reply {
    text: String,
    calls: Vec<Call>,
}

#[derive(Deserialize)]
struct Call {
    name: String,
    args: Value,
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/assistant/long-chats")
}

/// One reply as the SSE events Anthropic streams.
fn sse(reply: &Reply, n: &mut usize) -> Value {
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
fn script(chat: &Recorded) -> Script {
    let mut n = 0;
    let turns: Vec<Value> = chat
        .turns
        .iter()
        .flat_map(|t| t.replies.iter())
        .map(|r| sse(r, &mut n))
        .collect();
    serde_json::from_value(json!({"description": chat.title, "turns": turns})).unwrap()
}

struct Figures {
    requests: usize,
    compactions: usize,
    tool_def_bytes: Vec<usize>,
    tool_output_bytes: Vec<usize>,
    bytes: Vec<usize>,
    tool_counts: Vec<usize>,
}

fn tool_output(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| match &b["content"] {
            Value::String(s) => s.len(),
            other => other.to_string().len(),
        })
        .sum()
}

async fn run(chat: &Recorded, on: bool) -> Figures {
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
    let mut settings = json!({"op": "setSettings", "provider": "anthropic", "baseUrl": server.url(),
        "model": "claude-long", "apiKey": "sk-ant-x", "autoApproveEdits": true});
    for m in MECHANISMS {
        settings[m] = json!(on);
    }
    door.handle(settings).await.unwrap();
    let id = door.handle(json!({"op": "create"})).await.unwrap()["id"].clone();
    for turn in &chat.turns {
        let mut events = door.service().subscribe();
        door.handle(json!({"op": "send", "chat": id, "text": turn.user}))
            .await
            .unwrap();
        loop {
            if let ServiceEventKind::TurnEnded { end, detail } = events.recv().await.unwrap().kind {
                assert_eq!(end, TurnEndKind::Finished, "{}: {detail:?}", turn.user);
                break;
            }
        }
    }
    let bodies: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    let is_compaction = |b: &Value| b["system"][0]["text"] == COMPACTION_PROMPT;
    let turns: Vec<&Value> = bodies.iter().filter(|b| !is_compaction(b)).collect();
    Figures {
        requests: turns.len(),
        compactions: bodies.len() - turns.len(),
        tool_def_bytes: turns.iter().map(|b| b["tools"].to_string().len()).collect(),
        tool_output_bytes: turns.iter().map(|b| tool_output(b)).collect(),
        bytes: turns.iter().map(|b| b.to_string().len()).collect(),
        tool_counts: turns
            .iter()
            .map(|b| b["tools"].as_array().map_or(0, Vec::len))
            .collect(),
    }
}

fn mean(v: &[usize]) -> f64 {
    v.iter().sum::<usize>() as f64 / v.len().max(1) as f64
}

fn down(off: f64, on: f64) -> String {
    format!("{:+.0} %", (on - off) / off * 100.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!("| chat | messages / calls / empty echoes | mode | requests | tool defs B/request (narrowed requests) | tool output B/request | tool output share | B/request mean (max) | compactions |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for name in CHATS {
        let text = std::fs::read_to_string(fixtures().join(format!("{name}.json"))).unwrap();
        let chat: Recorded = serde_json::from_str(&text).unwrap();
        let replies: Vec<&Reply> = chat.turns.iter().flat_map(|t| &t.replies).collect();
        let calls: usize = replies.iter().map(|r| r.calls.len()).sum();
        let echoes = replies
            .iter()
            .filter(|r| r.text.is_empty() && !r.calls.is_empty())
            .count();
        let messages = chat.turns.len() + replies.len() + calls;
        let off = run(&chat, false).await;
        let on = run(&chat, true).await;
        assert_eq!(off.requests, on.requests, "the same scripted replies");
        // The requests narrowing narrowed, compared with the same requests off.
        let narrowed: Vec<usize> = (0..on.requests)
            .filter(|&i| on.tool_counts[i] < off.tool_counts[i])
            .collect();
        let pick =
            |f: &Figures| -> Vec<usize> { narrowed.iter().map(|&i| f.tool_def_bytes[i]).collect() };
        let share = |f: &Figures| {
            f.tool_output_bytes.iter().sum::<usize>() as f64 / f.bytes.iter().sum::<usize>() as f64
        };
        let echo_rate = echoes as f64 / replies.len() as f64 * 100.0;
        for (mode, f) in [("off", &off), ("on", &on)] {
            println!(
                "| {name} | {messages} / {calls} / {echo_rate:.0} % | {mode} | {} | {:.0} ({:.0} on {} requests) | {:.0} | {:.1} % | {:.0} ({}) | {} |",
                f.requests,
                mean(&f.tool_def_bytes),
                mean(&pick(f)),
                narrowed.len(),
                mean(&f.tool_output_bytes),
                share(f) * 100.0,
                mean(&f.bytes),
                f.bytes.iter().max().unwrap(),
                f.compactions,
            );
        }
        println!(
            "| {name} | | change | | {} ({} narrowed) | {} | {} | {} | |",
            down(mean(&off.tool_def_bytes), mean(&on.tool_def_bytes)),
            down(mean(&pick(&off)), mean(&pick(&on))),
            down(mean(&off.tool_output_bytes), mean(&on.tool_output_bytes)),
            down(share(&off), share(&on)),
            down(mean(&off.bytes), mean(&on.bytes)),
        );
    }
}
