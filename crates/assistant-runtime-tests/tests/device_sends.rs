//! The assistant as a door in the attack matrix (`crates/cli/tests/doors.rs` walks the
//! byte-stream doors), for sends nobody clicked: a model with "auto-approve edits" on
//! connects a project whose action sends on connect. `io.connect` is only an edit-tier
//! command, but this connect touches the device, so it is DeviceGated: refused while device
//! control is off, and with it on, put to the person as a question that names what will be
//! sent – every time. A real TCP device records what reaches it.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use sextant_assistant::service::{ServiceEvent, ServiceEventKind};
use sextant_providers::script::ScriptServer;
use sextant_runtime::{Runtime, Workspace};
use sextant_telemetry::Project;
use tokio::io::AsyncReadExt;
use tokio::sync::broadcast;

use common::{anthropic_calls, anthropic_text, ok, open_with, script_of, ScriptedCall};

/// A local TCP device; what it was sent.
async fn device() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 64];
            while let Ok(n) = stream.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                log.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        }
    });
    (port, received)
}

async fn next(events: &mut broadcast::Receiver<ServiceEvent>) -> ServiceEventKind {
    tokio::time::timeout(Duration::from_secs(20), events.recv())
        .await
        .expect("an event within 20 s")
        .expect("no lag")
        .kind
}

/// What happened when the model connected, device control `allow`ed or not and the
/// person answering `answer` to any question.
struct Connected {
    /// (tier, question) of each approval card.
    asked: Vec<(Value, Option<String>)>,
    status: String,
    content: String,
    received: Arc<Mutex<Vec<u8>>>,
}

async fn model_connects(allow: bool, answer: &str) -> Connected {
    let dir = tempfile::tempdir().unwrap();
    let (port, received) = device().await;
    let project: Project = serde_json::from_value(json!({
        "title": "Shared rig",
        "sources": [{"id": "dev", "connection": {"type": "tcp", "host": "127.0.0.1", "port": port}}],
        "actions": [{"id": "a", "title": "Wake", "payload": "ERASE", "onConnect": true}],
    }))
    .unwrap();
    let runtime = Runtime::new(Workspace::new(project)).spawn(None);
    let server = ScriptServer::start(script_of(vec![
        anthropic_calls(&[ScriptedCall {
            id: "toolu_connect",
            name: "io_connect",
            raw_args: "{}".into(),
        }]),
        anthropic_text("Connected."),
    ]))
    .await;
    let door = open_with(dir.path(), runtime);
    ok(
        &door,
        json!({"op": "setSettings", "provider": "anthropic", "baseUrl": server.url(),
               "model": "claude-test", "apiKey": "sk-ant-test", "autoApproveEdits": true,
               "allowDeviceControl": allow}),
    )
    .await;
    let mut events = door.service().subscribe();
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    ok(
        &door,
        json!({"op": "send", "chat": chat, "text": "connect it"}),
    )
    .await;
    let (mut asked, mut done) = (Vec::new(), None);
    loop {
        match next(&mut events).await {
            ServiceEventKind::ApprovalRequested {
                call_id,
                tier,
                question,
                ..
            } => {
                asked.push((
                    serde_json::to_value(tier).unwrap(),
                    question.map(|q| q.english()),
                ));
                ok(
                    &door,
                    json!({"op": answer, "chat": chat, "callId": call_id}),
                )
                .await;
            }
            ServiceEventKind::ToolCallDone {
                id,
                status,
                content,
            } if id == "toolu_connect" => {
                done = Some((serde_json::to_value(status).unwrap().to_string(), content));
            }
            ServiceEventKind::TurnEnded { .. } => break,
            _ => {}
        }
    }
    let (status, content) = done.expect("the connect got a result");
    Connected {
        asked,
        status,
        content,
        received,
    }
}

async fn received_within(received: &Mutex<Vec<u8>>, what: &[u8]) -> bool {
    for _ in 0..100 {
        if received.lock().unwrap().starts_with(what) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_with_edits_approved_cannot_connect_a_project_that_sends_by_itself() {
    // Device control off: refused without a card, the model reads why.
    let off = model_connects(false, "approve").await;
    assert!(off.asked.is_empty(), "asked: {:?}", off.asked);
    assert_eq!(off.status, "\"denied\"", "{}", off.content);
    assert!(off.content.contains("device control"), "{}", off.content);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        off.received.lock().unwrap().is_empty(),
        "bytes reached the device"
    );

    // Device control on: a card, DeviceGated, naming what would be sent; a no sends nothing.
    let declined = model_connects(true, "deny").await;
    assert_eq!(declined.asked.len(), 1, "{:?}", declined.asked);
    let (tier, question) = &declined.asked[0];
    assert_eq!(tier, &json!("deviceGated"));
    let question = question.as_deref().unwrap_or_default();
    assert!(
        question.contains("“ERASE”") && question.contains("when it connects"),
        "{question}"
    );
    assert_eq!(declined.status, "\"denied\"", "{}", declined.content);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        declined.received.lock().unwrap().is_empty(),
        "bytes reached the device"
    );

    // The person's yes is what sends.
    let approved = model_connects(true, "approve").await;
    assert_eq!(approved.asked.len(), 1);
    assert!(
        received_within(&approved.received, b"ERASE").await,
        "{}",
        approved.content
    );
}
