//! `sextant serve` killed outright (SIGKILL: a crash, the power button, the OOM killer) in
//! the middle of a recording and in the middle of an assistant's turn, then started again
//! on the same data folder: the session and the chat reopen with everything they had
//! committed before the kill, readable, and go on.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use sextant_assistant::chatlog::{ChatLog, Event};
use sextant_providers::script::{Script, ScriptServer};
use tokio_tungstenite::tungstenite::Message;

/// A running `sextant serve` and the lines its start printed.
struct Serve {
    child: Child,
    lines: Vec<String>,
}

impl Serve {
    /// Starts `sextant serve ARGS --data-dir DATA` and reads its log until `ready` lines
    /// (prefixes) have all been printed.
    fn start(args: &[&str], data: &Path, ready: &[&str]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sextant"))
            .arg("serve")
            .args(args)
            .arg("--data-dir")
            .arg(data)
            .env_remove("SEXTANT_API_TOKEN")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut lines = Vec::new();
        while !ready
            .iter()
            .all(|r| lines.iter().any(|l: &String| l.starts_with(r)))
        {
            let mut line = String::new();
            assert!(
                err.read_line(&mut line).unwrap() > 0,
                "sextant serve ended before it was ready: {lines:?}"
            );
            lines.push(line.trim_end().to_owned());
        }
        // The rest of its log must keep flowing, or a full pipe would stall the server.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Serve { child, lines }
    }

    /// The first word after the line starting with `prefix`.
    fn after(&self, prefix: &str) -> String {
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_owned()
    }

    fn kill_nine(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request over the newline-delimited JSON API; its result.
fn command(addr: &str, name: &str, params: Value) -> Value {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let request = json!({"type": "command", "id": 1, "command": name, "params": params});
    stream.write_all(format!("{request}\n").as_bytes()).unwrap();
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).unwrap();
    let v: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(v["success"], true, "{name}: {v}");
    v["result"].clone()
}

#[test]
fn a_recording_killed_mid_session_reopens_with_every_committed_frame() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = ["--demo", "--api", "--port", "0"];
    let serve = Serve::start(
        &args,
        &data,
        &["API server listening on ", "demo device connected"],
    );
    let addr = serve.after("API server listening on ");
    let id = command(
        &addr,
        "sessions.startRecording",
        json!({"title": "cut short"}),
    )["id"]
        .as_i64()
        .unwrap();
    // Committed rows only: the report counts a batch once its transaction is done.
    let mut committed = 0;
    for _ in 0..500 {
        committed = command(&addr, "sessions.list", json!({}))["recording"]["frames"]
            .as_u64()
            .unwrap_or(0);
        if committed >= 300 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(committed >= 300, "the demo recorded {committed} frames");
    serve.kill_nine();

    let serve = Serve::start(
        &args,
        &data,
        &["API server listening on ", "demo device connected"],
    );
    let addr = serve.after("API server listening on ");
    let sessions = command(&addr, "sessions.list", json!({}))["sessions"].clone();
    let session = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("the killed session is gone: {sessions}"))
        .clone();
    let frames = session["frames"].as_u64().unwrap();
    assert!(
        frames >= committed,
        "{committed} frames were committed before the kill, {frames} reopened"
    );
    assert!(
        session.get("endedUnixMs").is_none_or(Value::is_null),
        "{session}"
    );
    // Every frame reads back: its CSV has a row for each.
    let csv = command(&addr, "sessions.csv", json!({"id": id}));
    let rows = csv["rows"].as_u64().unwrap();
    let text = csv["csv"].as_str().unwrap();
    assert_eq!(rows, frames, "the CSV of the reopened session");
    assert_eq!(
        text.lines().count() as u64,
        rows + 1,
        "a header and a line a frame"
    );
    // And the database takes a new recording on top.
    let again = command(&addr, "sessions.startRecording", json!({"title": "after"}))["id"]
        .as_i64()
        .unwrap();
    assert!(again > id);
    command(&addr, "sessions.stopRecording", json!({}));
    println!("killed after {committed} committed frames; reopened with {frames}");
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The page's connection to a served UI: the socket and the launch's secret proven.
async fn page(serve: &Serve) -> Ws {
    let url = serve.after("Sextant UI on ");
    let (base, secret) = url.split_once("/?token=").unwrap();
    let ws_url = format!("{}/ws", base.replacen("http://", "ws://", 1));
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url).await.unwrap();
    ws.send(Message::text(
        json!({"type": "auth", "id": "auth", "token": secret}).to_string(),
    ))
    .await
    .unwrap();
    loop {
        let v = next(&mut ws).await;
        if v["id"] == "auth" {
            assert_eq!(v["success"], true, "{v}");
            return ws;
        }
    }
}

async fn next(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("a message in time")
            .expect("the socket is open")
            .unwrap();
        if let Message::Text(t) = m {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

async fn chat(ws: &mut Ws, id: u64, mut request: Value) -> Value {
    request["type"] = json!("chat");
    request["id"] = json!(id);
    ws.send(Message::text(request.to_string())).await.unwrap();
    loop {
        let v = next(ws).await;
        if v["id"] == id && v["type"] == "response" {
            assert_eq!(v["success"], true, "{request}: {v}");
            return v["result"].clone();
        }
    }
}

/// Waits for the chat event satisfying `done`.
async fn event(ws: &mut Ws, done: impl Fn(&Value) -> bool) -> Value {
    loop {
        let v = next(ws).await;
        if v["type"] == "chatEvent" && done(&v["event"]) {
            return v["event"].clone();
        }
    }
}

fn sse(event: &str, data: Value) -> Value {
    json!({"event": event, "data": data})
}

fn start(id: &str) -> Value {
    sse(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message",
        "role": "assistant", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    )
}

fn text(index: usize, text: &str) -> Vec<Value> {
    vec![
        sse(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "text", "text": ""}}),
        ),
        sse(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": text}}),
        ),
        sse(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ),
    ]
}

fn stop(reason: &str) -> Vec<Value> {
    vec![
        sse(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": reason},
                   "usage": {"output_tokens": 5}}),
        ),
        sse("message_stop", json!({"type": "message_stop"})),
    ]
}

fn chats_file(data: &Path) -> PathBuf {
    data.join("chats.sqlite")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_killed_mid_turn_reopens_with_everything_it_had_logged_and_goes_on() {
    // Turn 1: text and a call that runs; turn 2 (the reply to the call's result) stops
    // mid-text and stays silent: the process is killed there. Turn 3 answers after the
    // restart.
    let mut first = vec![start("msg_1")];
    first.extend(text(0, "Let me look."));
    first.push(sse(
        "content_block_start",
        json!({"type": "content_block_start", "index": 1,
               "content_block": {"type": "tool_use", "id": "toolu_k1", "name": "io_status", "input": {}}}),
    ));
    first.push(sse(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 1,
               "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
    ));
    first.push(sse(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 1}),
    ));
    first.extend(stop("tool_use"));
    let mut stalled = vec![start("msg_2")];
    stalled.extend(text(0, "The demo is connected and"));
    let mut last = vec![start("msg_3")];
    last.extend(text(0, "Still here."));
    last.extend(stop("end_turn"));
    let script: Script = serde_json::from_value(json!({
        "description": "a call, a reply that stalls mid-text (the kill), then a whole reply",
        "turns": [
            {"sse": first},
            {"sse": stalled, "fault": {"after_events": 3, "partial": "", "stall_ms": 120000}},
            {"sse": last}
        ]
    }))
    .unwrap();
    let provider = ScriptServer::start(script).await;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let ui = dir.path().join("ui");
    std::fs::create_dir_all(&ui).unwrap();
    std::fs::write(
        ui.join("index.html"),
        "<!doctype html><title>Sextant</title>",
    )
    .unwrap();
    let ui_arg = ui.to_str().unwrap().to_owned();
    let args = ["--demo", "--http-port", "0", "--ui", &ui_arg];
    let serve = Serve::start(&args, &data, &["Sextant UI on "]);
    let mut ws = page(&serve).await;
    chat(
        &mut ws,
        1,
        json!({"op": "setSettings", "provider": "anthropic", "baseUrl": provider.url(),
               "model": "claude-test", "apiKey": "sk-ant-test"}),
    )
    .await;
    let id = chat(&mut ws, 2, json!({"op": "create", "title": "killed"})).await["id"].clone();
    chat(
        &mut ws,
        3,
        json!({"op": "send", "chat": id, "text": "Is the demo connected?"}),
    )
    .await;
    event(&mut ws, |e| e["type"] == "toolCallDone").await;
    // The second reply is streaming: its first words arrived, the rest never will.
    event(&mut ws, |e| {
        e["type"] == "textDelta" && e["text"].as_str().unwrap_or("").contains("connected and")
    })
    .await;
    let chat_id = id.as_i64().unwrap();
    let before = ChatLog::open(chats_file(&data))
        .unwrap()
        .events(chat_id)
        .unwrap();
    assert!(
        before
            .iter()
            .any(|e| matches!(&e.event, Event::ToolResult { id, .. } if id == "toolu_k1")),
        "the call's result is committed before the kill: {before:?}"
    );
    serve.kill_nine();

    // Reopened by a new process: exactly what was logged, in order.
    let after = ChatLog::open(chats_file(&data))
        .unwrap()
        .events(chat_id)
        .unwrap();
    assert_eq!(after, before, "the log after the kill");

    let serve = Serve::start(&args, &data, &["Sextant UI on "]);
    let mut ws = page(&serve).await;
    let history = chat(&mut ws, 1, json!({"op": "history", "chat": id})).await;
    assert_eq!(history["running"], false, "{history}");
    let items = history["items"].as_array().unwrap();
    // (Notices – the token usage of each reply – aside.)
    let items: Vec<&Value> = items.iter().filter(|i| i["type"] != "notice").collect();
    let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "assistant", "toolCard"], "{history}");
    assert_eq!(items[0]["text"], "Is the demo connected?");
    assert_eq!(items[2]["status"], "ok", "{history}");
    // The chat goes on.
    chat(
        &mut ws,
        2,
        json!({"op": "send", "chat": id, "text": "Are you there?"}),
    )
    .await;
    let end = event(&mut ws, |e| e["type"] == "turnEnded").await;
    assert_eq!(end["end"], "finished", "{end}");
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    let body = requests[2].json();
    let messages = body["messages"].as_array().unwrap();
    // What a provider would judge: roles alternate, the call is answered right after it,
    // the first question is there once.
    for pair in messages.windows(2) {
        assert_ne!(pair[0]["role"], pair[1]["role"], "{body}");
    }
    let wire = body.to_string();
    assert_eq!(wire.matches("Is the demo connected?").count(), 1, "{wire}");
    let call_at = messages
        .iter()
        .position(|m| m.to_string().contains(r#""type":"tool_use""#))
        .unwrap();
    assert!(
        messages[call_at + 1]
            .to_string()
            .contains(r#""tool_use_id":"toolu_k1""#),
        "{body}"
    );
    let history = chat(&mut ws, 3, json!({"op": "history", "chat": id})).await;
    let last = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|i| i["type"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(last["text"], "Still here.", "{history}");
}
