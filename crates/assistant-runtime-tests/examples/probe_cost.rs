//! What the context probe costs in a request: the instruction's bytes, and how a 5-turn
//! chat's requests reuse a prompt cache with the probe on and off.
//!
//! Runs the chat door against the scripted provider server (real HTTP, Anthropic's wire
//! format) and reads the request bodies it received. Two cache models, computed from those
//! bodies rather than from the script's canned usage numbers:
//!
//! - breakpoint cache (Anthropic): the tools and the system blocks up to the breakpoint are
//!   written once and read while they stay byte-identical;
//! - prefix cache (llama.cpp, vLLM): the longest common prefix with the previous request's
//!   prompt (tools, system, messages) is read, the rest is written.
//!
//! Tokens are estimated as bytes / 4 (the count a provider bills depends on its tokenizer).
//!
//! `cargo run -p sextant-assistant-runtime-tests --example probe_cost`

use serde_json::{json, Value};
use sextant_assistant::door::ChatDoor;
use sextant_assistant::probe::INSTRUCTION;
use sextant_assistant::service::{ServiceEventKind, TurnEndKind};
use sextant_providers::script::{fixtures_dir, Script, ScriptServer};
use sextant_runtime::{Runtime, Workspace};
use sextant_secrets::SecretStore;
use sextant_telemetry::project::{Project, Source};

const TURNS: usize = 5;

async fn chat(probe: bool) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptServer::start(Script::load(
        &fixtures_dir().join("service/anthropic_never_compliant.json"),
    ))
    .await;
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
    door.handle(
        json!({"op": "setSettings", "provider": "anthropic", "baseUrl": server.url(),
                       "model": "claude-cost", "apiKey": "sk-ant-x", "contextProbe": probe}),
    )
    .await
    .unwrap();
    let chat = door.handle(json!({"op": "create"})).await.unwrap()["id"].clone();
    for i in 0..TURNS {
        let mut events = door.service().subscribe();
        door.handle(json!({"op": "send", "chat": chat, "text": format!("question {i}")}))
            .await
            .unwrap();
        loop {
            if let ServiceEventKind::TurnEnded { end, .. } = events.recv().await.unwrap().kind {
                assert_eq!(end, TurnEndKind::Finished);
                break;
            }
        }
    }
    server.requests().iter().map(|r| r.json()).collect()
}

fn cached_prefix(body: &Value) -> String {
    let system = body["system"].as_array().unwrap();
    let end = system
        .iter()
        .position(|b| b.get("cache_control").is_some())
        .unwrap();
    serde_json::to_string(&(&system[..=end], &body["tools"])).unwrap()
}

fn prompt(body: &Value) -> String {
    serde_json::to_string(&(&body["tools"], &body["system"], &body["messages"])).unwrap()
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

fn report(name: &str, bodies: &[Value]) -> (usize, usize) {
    println!("\n{name}: {} requests", bodies.len());
    println!("| turn | cached prefix B | breakpoint cache write / read B | prefix cache write / read B |");
    println!("|---|---|---|---|");
    let (mut written, mut read) = (0, 0);
    for (i, body) in bodies.iter().enumerate() {
        let prefix = cached_prefix(body);
        let (bw, br) = match i {
            0 => (prefix.len(), 0),
            _ if cached_prefix(&bodies[i - 1]) == prefix => (0, prefix.len()),
            _ => (prefix.len(), 0),
        };
        let p = prompt(body);
        let reused = if i == 0 {
            0
        } else {
            common_prefix(&prompt(&bodies[i - 1]), &p)
        };
        written += p.len() - reused;
        read += reused;
        println!(
            "| {} | {} | {bw} / {br} | {} / {reused} |",
            i + 1,
            prefix.len(),
            p.len() - reused
        );
    }
    (written, read)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let instruction = format!("\n\n{INSTRUCTION}");
    println!(
        "probe instruction: {} bytes (≈ {} tokens) in the cached role block",
        instruction.len(),
        instruction.len().div_ceil(4)
    );
    let on = chat(true).await;
    let off = chat(false).await;
    let (on_w, on_r) = report("probe on", &on);
    let (off_w, off_r) = report("probe off", &off);
    println!(
        "\nprefix cache over {TURNS} turns: on {on_w} B written / {on_r} B read; off {off_w} B written / {off_r} B read"
    );
    println!(
        "cached prefix: on {} B, off {} B (difference {} B)",
        cached_prefix(&on[0]).len(),
        cached_prefix(&off[0]).len(),
        cached_prefix(&on[0]).len() - cached_prefix(&off[0]).len()
    );
}
