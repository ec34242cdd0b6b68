//! `sextant serve`'s web door with real clients: files over HTTP, the UI door's commands
//! and binary display frames over the WebSocket, origin and token rules.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use sextant_api::{ApiError, ApiOptions, WebServer};
use sextant_assistant::door::ChatDoor;
use sextant_providers::script::{fixtures_dir, Script, ScriptServer};
use sextant_runtime::{Runtime, Workspace};
use sextant_telemetry::Project;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

fn ui_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("index.html"),
        "<!doctype html><title>Sextant</title>",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("assets")).unwrap();
    std::fs::write(dir.path().join("assets/app.js"), "console.log('ui')").unwrap();
    dir
}

async fn server(project: Project, ui: &Path) -> WebServer {
    let runtime = Runtime::new(Workspace::new(project)).spawn(None);
    WebServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        runtime,
        ApiOptions::default(),
        Vec::new(),
        ui,
        None,
    )
    .await
    .unwrap()
}

async fn get(server: &WebServer, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.local_addr()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The UI's connection: the WebSocket handshake, then the launch's secret proven, as the
/// page does with the secret from its address.
async fn connect(
    server: &WebServer,
    origin: Option<&str>,
) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let mut req = format!("ws://{}/ws", server.local_addr())
        .into_client_request()
        .unwrap();
    if let Some(o) = origin {
        req.headers_mut().insert("origin", o.parse().unwrap());
    }
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    let auth = json!({"type": "auth", "id": "auth", "token": server.secret()});
    ws.send(Message::text(auth.to_string())).await.unwrap();
    loop {
        if let Message::Text(t) = next(&mut ws).await {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["id"] == "auth" {
                assert_eq!(v["success"], true, "{v}");
                return Ok(ws);
            }
        }
    }
}

async fn next(ws: &mut Ws) -> Message {
    tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .expect("a message in time")
        .expect("stream open")
        .unwrap()
}

/// The reply to request `id`, skipping display frames and events.
async fn reply(ws: &mut Ws, id: u64) -> Value {
    loop {
        if let Message::Text(t) = next(ws).await {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }
}

async fn command(ws: &mut Ws, id: u64, name: &str, params: Value, approved: bool) -> Value {
    let msg = json!({"type": "command", "id": id, "command": name, "params": params, "approved": approved});
    ws.send(Message::text(msg.to_string())).await.unwrap();
    reply(ws, id).await
}

#[tokio::test]
async fn serves_the_ui_files_and_falls_back_to_index() {
    let ui = ui_dir();
    let server = server(Project::default(), ui.path()).await;
    let index = get(&server, "/").await;
    assert!(index.starts_with("HTTP/1.1 200"), "{index}");
    assert!(index.contains("<title>Sextant</title>"));
    let js = get(&server, "/assets/app.js").await;
    assert!(
        js.to_ascii_lowercase()
            .contains("content-type: text/javascript"),
        "{js}"
    );
    // A client-side route gets the app, a path outside the UI never leaks a file.
    assert!(get(&server, "/dashboard")
        .await
        .contains("<title>Sextant</title>"));
    let escape = get(&server, "/../../../etc/passwd").await;
    assert!(!escape.contains("root:"), "{escape}");
}

#[tokio::test]
async fn display_frames_flow_after_connecting_from_the_ui_door() {
    let ui = ui_dir();
    let server = server(sextant_devices::simulator::demo_project(), ui.path()).await;
    let mut ws = connect(
        &server,
        Some(&format!("http://{}", server.local_addr()).replace("127.0.0.1", "localhost")),
    )
    .await
    .unwrap();
    // A person's click needs no extra approval for connecting a device.
    let r = command(&mut ws, 1, "io.connect", json!({}), false).await;
    assert_eq!(r["success"], true, "{r}");
    let display = json!({"type": "display", "id": 2, "refreshHz": 50, "points": 100, "timeRangeS": 5, "raw": {"0": 16}});
    ws.send(Message::text(display.to_string())).await.unwrap();
    assert_eq!(reply(&mut ws, 2).await["success"], true);

    let mut frames = Vec::new();
    while frames.len() < 5 {
        if let Message::Binary(b) = next(&mut ws).await {
            frames.push(b.to_vec());
        }
    }
    let first = sextant_display::decode_header(&frames[0]).expect("a display frame");
    assert!(
        first.meta_bytes > 0,
        "the first frame names the datasets (maybe none yet)"
    );
    // The dataset list arrives (again) as soon as the pipeline has it.
    let named = frames.iter().find_map(|f| {
        let h = sextant_display::decode_header(f).unwrap();
        let meta: Value = serde_json::from_slice(&f[40..40 + h.meta_bytes as usize]).ok()?;
        (!meta["datasets"].as_array()?.is_empty()).then_some(meta)
    });
    assert_eq!(
        named.expect("a frame naming the datasets")["datasets"][0]["title"],
        "Temperature"
    );
    let last = sextant_display::decode_header(frames.last().unwrap()).unwrap();
    assert!(last.frames > first.frames, "frames keep arriving");
    assert!(last.seq > first.seq && last.meta_bytes == 0);
    assert!(last.datasets >= 1);

    // Bad options are refused by name and the stream goes on.
    ws.send(Message::text(
        json!({"type": "display", "id": 3, "refreshHz": 500}).to_string(),
    ))
    .await
    .unwrap();
    let r = reply(&mut ws, 3).await;
    assert_eq!(r["error"]["code"], "invalidParams");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("refreshHz"));

    // Stop: no more binary frames once the stop is acknowledged.
    ws.send(Message::text(
        json!({"type": "display", "id": 4, "stop": true}).to_string(),
    ))
    .await
    .unwrap();
    reply(&mut ws, 4).await;
    let quiet = tokio::time::timeout(Duration::from_millis(300), async {
        loop {
            if let Message::Binary(_) = next(&mut ws).await {
                return;
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "display frames after stop");
}

#[tokio::test]
async fn destructive_commands_need_the_persons_confirmation() {
    let ui = ui_dir();
    let server = server(Project::default(), ui.path()).await;
    let mut ws = connect(&server, None).await.unwrap();
    let r = command(&mut ws, 1, "sessions.delete", json!({"id": 1}), false).await;
    assert_eq!(r["error"]["code"], "notAllowed", "{r}");
    // Confirmed, it runs (and fails for a real reason: there is no sessions database).
    let r = command(&mut ws, 2, "sessions.delete", json!({"id": 1}), true).await;
    assert_ne!(r["error"]["code"], "notAllowed", "{r}");
    // Edits run without asking: the person made them.
    let r = command(
        &mut ws,
        3,
        "project.group.add",
        json!({"title": "G"}),
        false,
    )
    .await;
    assert_eq!(r["success"], true, "{r}");
}

#[tokio::test]
async fn other_websites_are_refused() {
    let ui = ui_dir();
    let server = server(Project::default(), ui.path()).await;
    let err = connect(&server, Some("https://evil.example"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
}

#[tokio::test]
async fn refuses_to_start_without_a_ui_or_on_a_lan_without_a_token() {
    let empty = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(Workspace::new(Project::default())).spawn(None);
    let e = WebServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        runtime.clone(),
        ApiOptions::default(),
        vec![],
        empty.path(),
        None,
    )
    .await
    .err()
    .unwrap();
    assert!(matches!(e, ApiError::NoUi(_)));
    assert!(e.to_string().contains("index.html"));
    let ui = ui_dir();
    let e = WebServer::bind(
        "0.0.0.0:0".parse().unwrap(),
        runtime,
        ApiOptions::default(),
        vec![],
        ui.path(),
        None,
    )
    .await
    .err()
    .unwrap();
    assert!(matches!(
        e,
        ApiError::Guard(sextant_guard::GuardError::TokenRequired(_))
    ));
}

#[tokio::test]
async fn a_lan_server_serves_display_frames_only_after_the_token() {
    let ui = ui_dir();
    let runtime =
        Runtime::new(Workspace::new(sextant_devices::simulator::demo_project())).spawn(None);
    let options = ApiOptions {
        token: Some("s3cret".into()),
        ..ApiOptions::default()
    };
    let server = WebServer::bind(
        "0.0.0.0:0".parse().unwrap(),
        runtime,
        options,
        vec![],
        ui.path(),
        None,
    )
    .await
    .unwrap();
    let url = format!("ws://127.0.0.1:{}/ws", server.local_addr().port());
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    ws.send(Message::text(
        json!({"type": "display", "id": 1, "refreshHz": 10}).to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(reply(&mut ws, 1).await["error"]["code"], "notAllowed");
    let r = command(&mut ws, 2, "io.connect", json!({}), false).await;
    assert_eq!(r["error"]["code"], "notAllowed", "{r}");
    ws.send(Message::text(
        json!({"type": "auth", "id": 3, "token": "wrong"}).to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(reply(&mut ws, 3).await["success"], false);
    ws.send(Message::text(
        json!({"type": "auth", "id": 4, "token": "s3cret"}).to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(reply(&mut ws, 4).await["success"], true);
    assert_eq!(
        command(&mut ws, 5, "io.connect", json!({}), false).await["success"],
        true
    );
    // An older UI's spelling of the display rate (`rateHz`, now `refreshHz`) still works.
    ws.send(Message::text(
        json!({"type": "display", "id": 6, "rateHz": 10}).to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(reply(&mut ws, 6).await["success"], true);
    loop {
        if let Message::Binary(b) = next(&mut ws).await {
            assert!(sextant_display::decode_header(&b).is_some());
            break;
        }
    }
}

/// A server with the assistant: its chat door keeps keys in an encrypted file in `data`.
async fn chat_server(addr: &str, options: ApiOptions, ui: &Path, data: &Path) -> WebServer {
    let project = Project {
        sources: vec![sextant_telemetry::project::Source::default()],
        ..Project::default()
    };
    let runtime = Runtime::new(Workspace::new(project)).spawn(None);
    let secrets = sextant_secrets::SecretStore::encrypted_file(data).unwrap();
    let door = ChatDoor::open_with(data, runtime.clone(), secrets).unwrap();
    WebServer::bind(
        addr.parse().unwrap(),
        runtime,
        options,
        vec![],
        ui,
        Some(Arc::new(door)),
    )
    .await
    .unwrap()
}

async fn chat(ws: &mut Ws, id: u64, request: Value) -> Value {
    let mut msg = request;
    msg["type"] = json!("chat");
    msg["id"] = json!(id);
    ws.send(Message::text(msg.to_string())).await.unwrap();
    reply(ws, id).await
}

#[tokio::test]
async fn the_socket_carries_chats_and_streams_their_events() {
    let (ui, data) = (ui_dir(), tempfile::tempdir().unwrap());
    let provider = ScriptServer::start(Script::load(
        &fixtures_dir().join("service/anthropic_one_edit.json"),
    ))
    .await;
    let server = chat_server("127.0.0.1:0", ApiOptions::default(), ui.path(), data.path()).await;
    let mut ws = connect(&server, None).await.unwrap();

    let r = chat(
        &mut ws,
        1,
        json!({"op": "setSettings", "baseUrl": provider.url(),
                                     "model": "claude-test", "apiKey": "k"}),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["result"]["hasApiKey"], true);
    let r = chat(
        &mut ws,
        2,
        json!({"op": "create", "title": "over the socket"}),
    )
    .await;
    let id = r["result"]["id"].clone();
    let r = chat(
        &mut ws,
        3,
        json!({"op": "send", "chat": id, "text": "Add a group"}),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");

    // Events stream in; the person approves the prompt over the same socket.
    let mut kinds = Vec::new();
    loop {
        let Message::Text(t) = next(&mut ws).await else {
            continue;
        };
        let v: Value = serde_json::from_str(&t).unwrap();
        if v["type"] != "chatEvent" {
            continue;
        }
        let event = &v["event"];
        assert_eq!(event["chat"], id);
        kinds.push(event["type"].as_str().unwrap().to_string());
        if event["type"] == "approvalRequested" {
            let r = chat(
                &mut ws,
                4,
                json!({"op": "approve", "chat": id, "callId": event["callId"]}),
            )
            .await;
            assert_eq!(r["success"], true, "{r}");
        }
        if event["type"] == "turnEnded" {
            assert_eq!(event["end"], "finished", "{event}");
            break;
        }
    }
    for kind in [
        "textDelta",
        "approvalRequested",
        "approvalResolved",
        "toolCallDone",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} in {kinds:?}");
    }
    let r = chat(&mut ws, 5, json!({"op": "history", "chat": id})).await;
    let items = r["result"]["items"].as_array().unwrap();
    assert!(
        items
            .iter()
            .any(|i| i["type"] == "toolCard" && i["status"] == "ok"),
        "{r}"
    );

    let r = chat(&mut ws, 6, json!({"op": "warp"})).await;
    assert_eq!(r["success"], false);
    assert_eq!(r["error"]["code"], "invalidParams", "{r}");
}

#[tokio::test]
async fn chats_need_the_token_on_a_lan_and_an_assistant_to_exist() {
    let (ui, data) = (ui_dir(), tempfile::tempdir().unwrap());
    let options = ApiOptions {
        token: Some("s3cret".into()),
        ..ApiOptions::default()
    };
    let server = chat_server("0.0.0.0:0", options, ui.path(), data.path()).await;
    let url = format!("ws://127.0.0.1:{}/ws", server.local_addr().port());
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let r = chat(&mut ws, 1, json!({"op": "list"})).await;
    assert_eq!(r["error"]["code"], "notAllowed", "{r}");
    ws.send(Message::text(
        json!({"type": "auth", "id": 2, "token": "s3cret"}).to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(reply(&mut ws, 2).await["success"], true);
    let r = chat(&mut ws, 3, json!({"op": "list"})).await;
    assert_eq!(r["result"], json!([]), "{r}");

    let plain = server_without_chat().await;
    let mut ws = connect(&plain.0, None).await.unwrap();
    let r = chat(&mut ws, 1, json!({"op": "list"})).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("without the assistant"),
        "{r}"
    );
}

async fn server_without_chat() -> (WebServer, tempfile::TempDir) {
    let ui = ui_dir();
    (server(Project::default(), ui.path()).await, ui)
}

#[tokio::test]
async fn a_clients_chat_requests_are_answered_in_the_order_sent() {
    let (ui, data) = (ui_dir(), tempfile::tempdir().unwrap());
    let server = chat_server("127.0.0.1:0", ApiOptions::default(), ui.path(), data.path()).await;
    let mut ws = connect(&server, None).await.unwrap();
    // Ten creates and a list, sent without waiting: the list sees all ten.
    for id in 1..=10 {
        let msg = json!({"type": "chat", "id": id, "op": "create", "title": format!("c{id}")});
        ws.send(Message::text(msg.to_string())).await.unwrap();
    }
    let list = json!({"type": "chat", "id": 11, "op": "list"});
    ws.send(Message::text(list.to_string())).await.unwrap();
    let mut order = Vec::new();
    let listed = loop {
        let Message::Text(t) = next(&mut ws).await else {
            continue;
        };
        let v: Value = serde_json::from_str(&t).unwrap();
        if v["type"] != "response" {
            continue;
        }
        order.push(v["id"].as_u64().unwrap());
        if v["id"] == 11 {
            break v["result"].as_array().unwrap().len();
        }
    };
    assert_eq!(order, (1..=11).collect::<Vec<u64>>());
    assert_eq!(listed, 10);
}

/// The sources' passwords are set only through the page that proved the door's secret: a
/// connection that has not cannot read or write them, the TCP API does not know the message
/// at all, and what comes back says which parts are saved, never a value.
#[tokio::test]
async fn credentials_only_through_the_persons_page() {
    let ui = ui_dir();
    let data = tempfile::tempdir().unwrap();
    let project: Project = serde_json::from_value(json!({
        "sources": [{"id": "broker", "connection": {"type": "mqtt", "host": "localhost",
                     "port": 8883, "tls": true, "topic": "t/#"}}]
    }))
    .unwrap();
    let vault = sextant_runtime::CredentialVault::with_store(
        sextant_secrets::SecretStore::encrypted_file(data.path()).unwrap(),
    );
    let runtime = Runtime::new(Workspace::new(project))
        .with_credentials(vault)
        .spawn(None);
    let server = WebServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        runtime.clone(),
        ApiOptions::default(),
        Vec::new(),
        ui.path(),
        None,
    )
    .await
    .unwrap();
    let set = |id: u64| {
        json!({"type": "credentials", "id": id, "request": {
            "op": "set", "target": {"kind": "source", "id": "broker"},
            "destination": {"protocol": "mqtt", "host": "localhost", "port": 8883, "tls": true},
            "password": "hunter2-long-enough"}})
        .to_string()
    };

    // Before the secret: refused, nothing saved.
    let url = format!("ws://{}/ws", server.local_addr());
    let (mut anonymous, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    anonymous.send(Message::text(set(1))).await.unwrap();
    let r = reply(&mut anonymous, 1).await;
    assert_eq!(
        (r["success"].as_bool(), r["error"]["code"].as_str()),
        (Some(false), Some("notAllowed")),
        "{r}"
    );

    // The person's page: saved, and the answer names the parts, not the value.
    let mut page = connect(&server, None).await.unwrap();
    page.send(Message::text(set(2))).await.unwrap();
    let r = reply(&mut page, 2).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["result"]["password"], true);
    assert_eq!(r["result"]["savedFor"]["host"], "localhost");
    assert!(!r.to_string().contains("hunter2"), "{r}");
    let bad = json!({"type": "credentials", "id": 3, "request": {"op": "set",
        "target": {"kind": "source", "id": "broker"},
        "destination": {"protocol": "mqtt", "host": "localhost", "port": 8883, "tls": true},
        "caPem": "this is not a certificate"}});
    page.send(Message::text(bad.to_string())).await.unwrap();
    let r = reply(&mut page, 3).await;
    assert_eq!(r["success"], false);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no certificate"),
        "{r}"
    );

    // The TCP API: no such message, and no command reaches them.
    let api = sextant_api::ApiServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        runtime,
        ApiOptions::default(),
    )
    .await
    .unwrap();
    let mut tcp = tokio::net::TcpStream::connect(api.local_addr())
        .await
        .unwrap();
    tcp.write_all(format!("{}\n", set(4)).as_bytes())
        .await
        .unwrap();
    let mut line = Vec::new();
    loop {
        let mut b = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(5), tcp.read_exact(&mut b))
            .await
            .expect("an answer in time")
            .unwrap();
        if b[0] == b'\n' {
            break;
        }
        line.push(b[0]);
    }
    let r: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(r["success"], false, "{r}");
}

/// The commands the assistant sees, with `project.file` – which a chat's `create` asks
/// before it writes – held until the test opens the gate; each time a call reaches the
/// gate, `arrived` hears of it.
struct Gate {
    inner: sextant_runtime::RuntimeHandle,
    open: tokio::sync::watch::Receiver<bool>,
    arrived: tokio::sync::mpsc::UnboundedSender<()>,
}

impl sextant_commands::CommandDoor for Gate {
    fn specs(&self) -> &[sextant_commands::CommandSpec] {
        sextant_commands::CommandDoor::specs(&self.inner)
    }

    fn assess(&self, command: &str, params: &Value) -> Option<sextant_commands::Assessment> {
        sextant_commands::CommandDoor::assess(&self.inner, command, params)
    }

    fn call_as<'a>(
        &'a self,
        caller: sextant_commands::Caller,
        command: &'a str,
        params: Value,
        policy: sextant_commands::Policy,
        approved: bool,
    ) -> sextant_commands::BoxFuture<'a, Result<Value, sextant_commands::CommandError>> {
        Box::pin(async move {
            if command == "project.file" {
                let _ = self.arrived.send(());
                let mut open = self.open.clone();
                let _ = open.wait_for(|open| *open).await;
            }
            sextant_commands::CommandDoor::call_as(
                &self.inner,
                caller,
                command,
                params,
                policy,
                approved,
            )
            .await
        })
    }
}

/// The next `n` responses (chat events and frames skipped), in the order they came.
async fn responses(ws: &mut Ws, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    while out.len() < n {
        if let Message::Text(t) = next(ws).await {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "response" {
                out.push(v);
            }
        }
    }
    out
}

/// The chat queue of one connection (`CHAT_QUEUE`, 32 requests): while the worker is held
/// on one request, 32 more wait and each past them is refused at once with its own id –
/// never dropped, never left hanging – and none of the refused ones runs later.
#[tokio::test]
async fn chat_requests_past_the_queue_are_refused_by_id_and_never_run() {
    const CHAT_QUEUE: u64 = 32;
    let (ui, data) = (ui_dir(), tempfile::tempdir().unwrap());
    let runtime = Runtime::new(Workspace::new(Project::default())).spawn(None);
    let (open, gate) = tokio::sync::watch::channel(false);
    let (arrived_tx, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    let door = ChatDoor::open_with(
        data.path(),
        Gate {
            inner: runtime.clone(),
            open: gate,
            arrived: arrived_tx,
        },
        sextant_secrets::SecretStore::encrypted_file(data.path()).unwrap(),
    )
    .unwrap();
    let server = WebServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        runtime,
        ApiOptions::default(),
        vec![],
        ui.path(),
        Some(Arc::new(door)),
    )
    .await
    .unwrap();
    let mut ws = connect(&server, None).await.unwrap();
    let create =
        |id: u64| json!({"type": "chat", "id": id, "op": "create", "title": format!("c{id}")});

    // The worker takes request 1 and is held inside it: the queue is empty again.
    ws.send(Message::text(create(1).to_string())).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), arrived.recv())
        .await
        .expect("the first create reaches the gate")
        .unwrap();
    // Forty more at once: 2..=33 fill the queue, 34..=41 are past it.
    let last = 41;
    for id in 2..=last {
        ws.send(Message::text(create(id).to_string()))
            .await
            .unwrap();
    }
    let refused = responses(&mut ws, (last - 1 - CHAT_QUEUE) as usize).await;
    assert_eq!(
        refused
            .iter()
            .map(|r| r["id"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        (CHAT_QUEUE + 2..=last).collect::<Vec<_>>(),
        "{refused:?}"
    );
    for r in &refused {
        assert_eq!(r["success"], false, "{r}");
        assert_eq!(r["error"]["code"], "badRequest", "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("too many chat requests waiting"),
            "{r}"
        );
    }

    // Let go: the held one and the 32 queued are answered, in order, and only they ran.
    open.send(true).unwrap();
    let answered = responses(&mut ws, (CHAT_QUEUE + 1) as usize).await;
    assert_eq!(
        answered
            .iter()
            .map(|r| r["id"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        (1..=CHAT_QUEUE + 1).collect::<Vec<_>>()
    );
    assert!(
        answered.iter().all(|r| r["success"] == true),
        "{answered:?}"
    );
    let r = chat(&mut ws, 100, json!({"op": "list"})).await;
    let titles: Vec<&str> = r["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles.len() as u64, CHAT_QUEUE + 1, "{r}");
    for id in CHAT_QUEUE + 2..=last {
        assert!(!titles.contains(&format!("c{id}").as_str()), "{r}");
    }
}

/// `MODEL_LISTS` (2): model lists run beside the queue, two at a time; a third while two
/// are still waiting on the provider is refused by id, and the queue is not held up.
#[tokio::test]
async fn a_third_model_list_while_two_are_in_flight_is_refused() {
    let (ui, data) = (ui_dir(), tempfile::tempdir().unwrap());
    // A provider that accepts connections and never answers: every list stays in flight.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let provider = format!("http://{}", silent.local_addr().unwrap());
    let (reached_tx, mut reached) = tokio::sync::mpsc::unbounded_channel();
    let _held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
            let _ = reached_tx.send(());
        }
    });
    let server = chat_server("127.0.0.1:0", ApiOptions::default(), ui.path(), data.path()).await;
    let mut ws = connect(&server, None).await.unwrap();
    let r = chat(
        &mut ws,
        1,
        json!({"op": "setSettings", "baseUrl": provider, "model": "m", "apiKey": "k"}),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");

    for id in 2..=4 {
        let msg = json!({"type": "chat", "id": id, "op": "listModels"});
        ws.send(Message::text(msg.to_string())).await.unwrap();
    }
    let list = json!({"type": "chat", "id": 5, "op": "list"});
    ws.send(Message::text(list.to_string())).await.unwrap();
    // The third is refused and the plain request behind it answered, while the first two
    // still wait on the provider.
    let got = responses(&mut ws, 2).await;
    assert_eq!(got[0]["id"], 4, "{got:?}");
    assert_eq!(got[0]["success"], false, "{got:?}");
    assert_eq!(got[0]["error"]["code"], "badRequest", "{got:?}");
    assert!(
        got[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already being fetched"),
        "{got:?}"
    );
    assert_eq!(
        (&got[1]["id"], &got[1]["success"]),
        (&json!(5), &json!(true)),
        "{got:?}"
    );
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(10), reached.recv())
            .await
            .expect("the two lists in flight reach the provider")
            .unwrap();
    }
}
