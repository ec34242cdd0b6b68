//! The attack matrix: every door Sextant has (`DoorKind::ALL`) against every attack a
//! hostile caller has tried, with real sockets, real programs and real files.
//!
//! A door is reached the way its callers reach it: the TCP API and MCP by their lines, the
//! WebSocket API and the web UI's `/ws` by a WebSocket, MCP on stdio through a pipe. The
//! web door is tried twice: by a stranger (any local program or page, which lacks the
//! launch's secret) and by the person (the UI, which proved it) – some things no one may do.
//!
//! Adding a door means adding a `DoorKind`, and then a `Client` for it here: until then the
//! `every_door_is_in_the_matrix` row fails. Adding an attack means adding a row.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use sextant_api::{ApiOptions, ApiServer, WebServer, WsServer};
use sextant_guard::DoorKind;
use sextant_mcp::{McpOptions, McpTcpServer};
use sextant_runtime::{Runtime, RuntimeHandle, Safeguards, TrustStore, Workspace};
use sextant_telemetry::project::{Connection, Source};
use sextant_telemetry::Project;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// Who tries the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// A program or a page without any secret.
    Stranger,
    /// The web UI after proving the launch's secret (the web door only).
    Person,
}

/// The doors × callers the matrix walks.
fn doors() -> Vec<(DoorKind, Caller)> {
    let mut all: Vec<_> = DoorKind::ALL
        .iter()
        .map(|k| (*k, Caller::Stranger))
        .collect();
    all.push((DoorKind::Web, Caller::Person));
    all
}

/// A scratch install: a data folder (Sextant's own), a user folder, a project there whose
/// one source runs `/bin/sh` leaving `ran` behind, and the runtime over it.
struct Install {
    _dir: tempfile::TempDir,
    data: PathBuf,
    user: PathBuf,
    outside: PathBuf,
    marker: PathBuf,
    handle: RuntimeHandle,
}

impl Install {
    fn new() -> Install {
        let dir = tempfile::tempdir().unwrap();
        let (data, user, outside) = (
            dir.path().join("data"),
            dir.path().join("user"),
            dir.path().join("outside"),
        );
        for d in [&data, &user, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        let marker = dir.path().join("ran");
        let project = Project {
            sources: vec![Source {
                id: "tool".into(),
                connection: shell(&marker),
                ..Source::default()
            }],
            ..Project::default()
        };
        let file = user.join("rig.sextant.json");
        project.save(&file).unwrap();
        std::fs::write(data.join("chats.sqlite"), b"the person's chats").unwrap();
        let safeguards = Safeguards::new(
            vec![user.clone()],
            TrustStore::open(data.join(sextant_runtime::safeguards::TRUST_FILE)),
        )
        .with_own_folders(vec![data.clone()]);
        let handle =
            Runtime::with_safeguards(Workspace::opened(project, file), safeguards).spawn(None);
        Install {
            _dir: dir,
            data,
            user,
            outside,
            marker,
            handle,
        }
    }

    /// Whether the program ran (it writes the marker at once when started).
    async fn program_ran(&self) -> bool {
        for _ in 0..10 {
            if self.marker.exists() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }
}

fn shell(marker: &Path) -> Connection {
    Connection::Process {
        program: "/bin/sh".into(),
        args: vec![
            "-c".into(),
            format!("echo ran > '{}'; sleep 30", marker.display()),
        ],
        working_dir: None,
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A running door and a client of it; dropping it stops the door.
enum Client {
    Lines {
        reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
        writer: tokio::net::tcp::OwnedWriteHalf,
        mcp: bool,
        _server: Box<dyn std::any::Any + Send>,
    },
    Pipe {
        reader: BufReader<tokio::io::DuplexStream>,
        writer: tokio::io::DuplexStream,
    },
    Socket {
        ws: Box<Ws>,
        _server: Box<dyn std::any::Any + Send>,
    },
}

/// Where a door listens, for the raw-bytes attacks; `None` for stdio.
struct Opened {
    client: Client,
    addr: Option<std::net::SocketAddr>,
}

async fn open(kind: DoorKind, caller: Caller, install: &Install) -> Opened {
    let local = "127.0.0.1:0".parse().unwrap();
    let handle = install.handle.clone();
    match kind {
        DoorKind::TcpApi => {
            let server = ApiServer::bind(local, handle, ApiOptions::default())
                .await
                .unwrap();
            let addr = server.local_addr();
            Opened {
                client: lines(addr, false, Box::new(server)).await,
                addr: Some(addr),
            }
        }
        DoorKind::McpTcp => {
            let server = McpTcpServer::bind(local, handle, McpOptions::default())
                .await
                .unwrap();
            let addr = server.local_addr();
            let mut client = lines(addr, true, Box::new(server)).await;
            mcp_initialize(&mut client).await;
            Opened {
                client,
                addr: Some(addr),
            }
        }
        DoorKind::McpStdio => {
            // Standard input and output, as two pipes.
            let (client_out, server_in) = tokio::io::duplex(1 << 20);
            let (server_out, client_in) = tokio::io::duplex(1 << 20);
            tokio::spawn(sextant_mcp::serve(
                handle,
                McpOptions::default(),
                server_in,
                server_out,
            ));
            let mut client = Client::Pipe {
                reader: BufReader::new(client_in),
                writer: client_out,
            };
            mcp_initialize(&mut client).await;
            Opened { client, addr: None }
        }
        DoorKind::WebSocketApi => {
            let server = WsServer::bind(local, handle, ApiOptions::default(), Vec::new())
                .await
                .unwrap();
            let addr = server.local_addr();
            let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/"))
                .await
                .unwrap();
            Opened {
                client: Client::Socket {
                    ws: Box::new(ws),
                    _server: Box::new(server),
                },
                addr: Some(addr),
            }
        }
        DoorKind::Web => {
            let ui = tempfile::tempdir().unwrap();
            std::fs::write(ui.path().join("index.html"), "<title>Sextant</title>").unwrap();
            let server = WebServer::bind(
                local,
                handle,
                ApiOptions::default(),
                Vec::new(),
                ui.path(),
                None,
            )
            .await
            .unwrap();
            let addr = server.local_addr();
            let mut req = format!("ws://{addr}/ws").into_client_request().unwrap();
            req.headers_mut()
                .insert("origin", format!("http://{addr}").parse().unwrap());
            let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
            if caller == Caller::Person {
                let auth = json!({"type": "auth", "id": "auth", "token": server.secret()});
                ws.send(Message::text(auth.to_string())).await.unwrap();
            }
            Opened {
                client: Client::Socket {
                    ws: Box::new(ws),
                    _server: Box::new((server, ui)),
                },
                addr: Some(addr),
            }
        }
    }
}

async fn lines(
    addr: std::net::SocketAddr,
    mcp: bool,
    server: Box<dyn std::any::Any + Send>,
) -> Client {
    let (r, w) = TcpStream::connect(addr).await.unwrap().into_split();
    Client::Lines {
        reader: BufReader::new(r),
        writer: w,
        mcp,
        _server: server,
    }
}

/// What a call came back with.
#[derive(Debug)]
struct Outcome {
    ok: bool,
    /// The command error's code (`notAllowed`, `needsConfirmation`…).
    code: String,
    message: String,
}

async fn mcp_initialize(client: &mut Client) {
    let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "attack-matrix", "version": "0"}}});
    client.send(&init.to_string()).await;
    client.reply("init").await.expect("initialize answered");
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    client.send(&done.to_string()).await;
}

impl Client {
    async fn send(&mut self, text: &str) {
        match self {
            Client::Lines { writer, .. } => {
                let _ = writer.write_all(format!("{text}\n").as_bytes()).await;
            }
            Client::Pipe { writer, .. } => {
                let _ = writer.write_all(format!("{text}\n").as_bytes()).await;
            }
            Client::Socket { ws, .. } => {
                let _ = ws.send(Message::text(text.to_string())).await;
            }
        }
    }

    /// The next message, or `None` once the door closed the connection.
    async fn next(&mut self) -> Option<Value> {
        let read = async {
            match self {
                Client::Lines { reader, .. } => line(reader).await,
                Client::Pipe { reader, .. } => line(reader).await,
                Client::Socket { ws, .. } => loop {
                    match ws.next().await? {
                        Ok(Message::Text(t)) => break serde_json::from_str(&t).ok(),
                        Ok(Message::Binary(_)) => continue,
                        Ok(Message::Close(_)) | Err(_) => break None,
                        Ok(_) => continue,
                    }
                },
            }
        };
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .expect("the door answers or hangs up within 30 s")
    }

    /// The reply to request `id`, or `None` if the door hung up first.
    async fn reply(&mut self, id: impl Into<Value>) -> Option<Value> {
        let id = id.into();
        loop {
            let msg = self.next().await?;
            if msg["id"] == id {
                return Some(msg);
            }
        }
    }

    fn speaks_mcp(&self) -> bool {
        matches!(self, Client::Pipe { .. } | Client::Lines { mcp: true, .. })
    }

    /// Calls a command as this door's clients do, with a yes in the message where the
    /// door's messages can carry one.
    async fn call(&mut self, id: u64, command: &str, params: Value, approved: bool) -> Outcome {
        if self.speaks_mcp() {
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                             "params": {"name": command.replace('.', "_"), "arguments": params}});
            self.send(&msg.to_string()).await;
            let r = self.reply(id).await.expect("an MCP reply");
            if let Some(e) = r.get("error") {
                return Outcome {
                    ok: false,
                    code: "protocol".into(),
                    message: e["message"].as_str().unwrap_or("").into(),
                };
            }
            let result = &r["result"];
            let failed = result["isError"] == true;
            return Outcome {
                ok: !failed,
                code: if failed {
                    result["structuredContent"]["code"]
                        .as_str()
                        .unwrap_or("")
                        .into()
                } else {
                    String::new()
                },
                message: result["content"][0]["text"].as_str().unwrap_or("").into(),
            };
        }
        let msg = json!({"type": "command", "id": id, "command": command, "params": params,
                         "approved": approved});
        self.send(&msg.to_string()).await;
        let r = self.reply(id).await.expect("a reply");
        Outcome {
            ok: r["success"] == true,
            code: r["error"]["code"].as_str().unwrap_or("").into(),
            message: r["error"]["message"].as_str().unwrap_or("").into(),
        }
    }

    /// Whether the door hung up (reads until it closes, skipping what it pushes).
    async fn hung_up(&mut self) -> bool {
        while let Some(msg) = self.next().await {
            if msg.get("id").is_some_and(|id| !id.is_null()) {
                return false;
            }
        }
        true
    }
}

async fn line<R: tokio::io::AsyncRead + Unpin>(reader: &mut BufReader<R>) -> Option<Value> {
    let mut text = String::new();
    match reader.read_line(&mut text).await {
        Ok(0) | Err(_) => None,
        Ok(_) => serde_json::from_str(&text).ok(),
    }
}

/// Sends raw bytes to a door's port and returns the first line that came back (a status
/// line), or what came before it closed.
async fn raw(addr: std::net::SocketAddr, bytes: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let first_line = async {
        let mut chunk = [0u8; 1024];
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
            }
            if out.windows(2).any(|w| w == b"\r\n") {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), first_line).await;
    String::from_utf8_lossy(&out).into_owned()
}

async fn title(install: &Install) -> String {
    let p = install
        .handle
        .call_from_ui("project.get", json!({}), false)
        .await
        .unwrap();
    p["title"].as_str().unwrap_or("").to_string()
}

/// What a stranger at a door gets for anything that acts: refused, whatever the door's
/// own words for it (the web door first asks for its secret).
fn refused(o: &Outcome, door: &str) {
    assert!(!o.ok, "{door}: it ran: {o:?}");
    assert!(
        o.code == "notAllowed" || o.code == "needsConfirmation",
        "{door}: refused for the wrong reason: {o:?}"
    );
}

// ─── The rows ────────────────────────────────────────────────────────────────────────

/// A web page's `fetch` POST (what any site can make a browser send to a localhost port)
/// carrying API and MCP messages in its body: nothing runs, at every door.
async fn browser_post(install: &Install, kind: DoorKind, _: Caller, opened: &mut Opened) {
    let door = kind.name();
    let body = "\n{\"type\":\"command\",\"id\":1,\"command\":\"project.setTitle\",\"params\":{\"title\":\"pwned\"}}\n\
                {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"x\",\"version\":\"0\"}}}\n\
                {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n\
                {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"project_setTitle\",\"arguments\":{\"title\":\"pwned\"}}}\n";
    match opened.addr {
        Some(addr) => {
            let request = format!(
                "POST / HTTP/1.1\r\nHost: {addr}\r\nOrigin: https://evil.example\r\n\
                 Content-Type: text/plain;charset=UTF-8\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let answer = raw(addr, &request).await;
            if kind.speaks_http() {
                // Refused, or not even a request it reads (a POST is no WebSocket handshake).
                let refused = answer.is_empty() || answer.starts_with("HTTP/1.1 4");
                assert!(refused, "{door}: {answer}");
            } else {
                assert!(answer.is_empty(), "{door} answered a web page: {answer}");
            }
        }
        None => {
            // On stdio the bytes come straight in: the session ends, unanswered.
            opened.client.send("POST / HTTP/1.1").await;
            opened
                .client
                .send(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"project_setTitle","arguments":{"title":"pwned"}}}"#)
                .await;
            assert!(opened.client.hung_up().await, "{door} read on after HTTP");
        }
    }
    assert_ne!(title(install).await, "pwned", "{door}");
}

/// A page of another origin, or a DNS name rebound to 127.0.0.1, reads and drives nothing
/// at an HTTP door; a line door hangs up on the same headers.
async fn foreign_page(install: &Install, kind: DoorKind, _: Caller, opened: &mut Opened) {
    let door = kind.name();
    let Some(addr) = opened.addr else {
        return; // stdio: no page can reach it (the browser_post row covers its bytes)
    };
    let other_port = addr.port().wrapping_add(1);
    let cases = [
        (format!("{addr}"), Some("https://evil.example".to_string())),
        (
            format!("{addr}"),
            Some(format!("http://127.0.0.1:{other_port}")),
        ),
        (format!("evil.example:{}", addr.port()), None),
        (
            format!("evil.example:{}", addr.port()),
            Some(format!("http://evil.example:{}", addr.port())),
        ),
    ];
    for (host, origin) in cases {
        let origin_line = origin
            .as_ref()
            .map(|o| format!("Origin: {o}\r\n"))
            .unwrap_or_default();
        // A page read (GET /) and a WebSocket handshake, as a browser sends them.
        for path in ["/", "/ws"] {
            let request = format!(
                "GET {path} HTTP/1.1\r\nHost: {host}\r\n{origin_line}Connection: Upgrade\r\n\
                 Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
                 Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            );
            let answer = raw(addr, &request).await;
            if kind.speaks_http() {
                assert!(
                    answer.starts_with("HTTP/1.1 403"),
                    "{door} let host {host} origin {origin:?} {path} in: {answer}"
                );
            } else {
                assert!(answer.is_empty(), "{door} answered: {answer}");
            }
        }
    }
    assert_ne!(title(install).await, "pwned");
}

/// A client's own `"approved": true` is no person's yes: no program starts, at every door
/// but the person's own UI.
async fn forged_yes(install: &Install, kind: DoorKind, caller: Caller, opened: &mut Opened) {
    if caller == Caller::Person {
        return; // the person's yes is exactly what starts it
    }
    let door = kind.name();
    let o = opened.client.call(11, "io.connect", json!({}), true).await;
    refused(&o, door);
    let added = opened
        .client
        .call(
            12,
            "project.source.add",
            json!({"source": {"connection": {"type": "process", "program": "/bin/sh",
                   "args": ["-c", format!("echo ran > '{}'", install.marker.display())]}}}),
            true,
        )
        .await;
    refused(&added, door);
    // An output control's send touches the device like a console send, whatever the
    // project's controls are: refused before any script runs.
    let pressed = opened
        .client
        .call(
            13,
            "project.control.send",
            json!({"group": "out", "control": "erase"}),
            true,
        )
        .await;
    refused(&pressed, door);
    assert!(!install.program_ran().await, "{door}: the program ran");
}

/// A project whose action sends by itself once connected (a shared project's "wake" that
/// could as well be "erase"): connecting it is touching the device, so no stranger's
/// connect – with or without its own `"approved"` – reaches it, and the person is asked.
async fn self_sending_project(
    install: &Install,
    kind: DoorKind,
    caller: Caller,
    opened: &mut Opened,
) {
    let door = kind.name();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
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
    let shared = json!({"format": sextant_telemetry::project::FORMAT_MARKER, "schema": 1,
        "title": "shared", "sources": [{"id": "dev",
            "connection": {"type": "tcp", "host": "127.0.0.1", "port": port}}],
        "actions": [{"id": "a", "title": "Wake", "payload": "ERASE", "onConnect": true}]});
    install
        .handle
        .call_from_ui(
            "project.openContent",
            json!({"name": "shared.sextant.json", "content": shared.to_string()}),
            false,
        )
        .await
        .unwrap();
    let asked = opened.client.call(60, "io.connect", json!({}), false).await;
    let forged = opened.client.call(61, "io.connect", json!({}), true).await;
    if caller == Caller::Person {
        assert_eq!(asked.code, "needsConfirmation", "{door}: {asked:?}");
        assert!(asked.message.contains("ERASE"), "{door}: {asked:?}");
        // The person's yes (the web UI's, after the dialog) is what connects it.
        assert!(forged.ok, "{door}: {forged:?}");
        for _ in 0..100 {
            if received.lock().unwrap().starts_with(b"ERASE") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{door}: the person's yes did not send");
    } else {
        refused(&forged, door);
        refused(&asked, door);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            received.lock().unwrap().is_empty(),
            "{door}: bytes reached the device"
        );
    }
}

/// A shared project that sends every value off the machine (its PostgreSQL sink names a
/// server of the author's choosing): connecting it is sending, so no stranger's connect –
/// with or without its own `"approved"` – opens a connection there, and the person is asked,
/// naming the table and the server.
async fn exfiltrating_project(
    install: &Install,
    kind: DoorKind,
    caller: Caller,
    opened: &mut Opened,
) {
    let door = kind.name();
    // Whatever connects here is the sink: it would be the author's database.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let reached = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = reached.clone();
    tokio::spawn(async move {
        while let Ok((_stream, _)) = listener.accept().await {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let shared = json!({"format": sextant_telemetry::project::FORMAT_MARKER, "schema": 1,
        "title": "shared", "sources": [{"id": "sim", "parser": {"kind": "delimited"},
            "connection": {"type": "simulator", "frameRateHz": 100, "channels": [
                {"name": "a", "waveform": "sine", "frequencyHz": 1, "amplitude": 1}]}}],
        "groups": [{"id": "g", "title": "G", "datasets": [{"id": "a", "title": "A", "index": 1}]}],
        "postgres": {"enabled": true, "host": "127.0.0.1", "port": port,
                     "database": "theirs", "user": "them", "table": "loot"}});
    install
        .handle
        .call_from_ui(
            "project.openContent",
            json!({"name": "shared.sextant.json", "content": shared.to_string()}),
            false,
        )
        .await
        .unwrap();
    let asked = opened.client.call(70, "io.connect", json!({}), false).await;
    let forged = opened.client.call(71, "io.connect", json!({}), true).await;
    if caller == Caller::Person {
        assert_eq!(asked.code, "needsConfirmation", "{door}: {asked:?}");
        assert!(
            asked.message.contains("“loot”")
                && asked.message.contains(&format!("127.0.0.1:{port}")),
            "{door}: {asked:?}"
        );
        // The person's yes (the web UI's, after the dialog) is what connects it.
        assert!(forged.ok, "{door}: {forged:?}");
        for _ in 0..100 {
            if reached.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{door}: the person's yes did not start the sink");
    } else {
        refused(&forged, door);
        refused(&asked, door);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !reached.load(std::sync::atomic::Ordering::SeqCst),
            "{door}: the sink reached the author's server"
        );
    }
}

/// Sextant's own files – the program permissions, the chats – are never a target, for
/// anyone, with any yes: a forged permission file cannot be written, nor a chat database
/// overwritten by an export.
async fn own_files(install: &Install, kind: DoorKind, _: Caller, opened: &mut Opened) {
    let door = kind.name();
    let trust = install.data.join(sextant_runtime::safeguards::TRUST_FILE);
    let chats = install.data.join("chats.sqlite");
    // A project-shaped document that is also a permission file (unknown keys are kept).
    let forged = json!({"format": sextant_telemetry::project::FORMAT_MARKER, "schema": 1,
        "programs": [{"project": "x", "command": "/bin/sh -c id"}], "title": "forged"});
    let _ = opened
        .client
        .call(
            20,
            "project.openContent",
            json!({"name": "forged.sextant.json", "content": forged.to_string()}),
            true,
        )
        .await;
    let attempts = [
        ("project.save", json!({"path": trust})),
        (
            "project.save",
            json!({"path": install.data.join("assistant.json")}),
        ),
        ("csvExport.enable", json!({"path": chats})),
        ("mcapExport.enable", json!({"path": chats})),
        ("sessions.setDatabase", json!({"path": chats})),
        ("sessions.exportCsv", json!({"id": 1, "path": chats})),
        (
            "sessions.export",
            json!({"id": 1, "format": "parquet", "path": chats}),
        ),
    ];
    for (i, (command, params)) in attempts.into_iter().enumerate() {
        let o = opened
            .client
            .call(21 + i as u64, command, params.clone(), true)
            .await;
        assert!(!o.ok, "{door}: {command} {params} ran");
        assert_eq!(o.code, "notAllowed", "{door}: {command}: {o:?}");
    }
    assert!(!trust.exists(), "{door}: a permission file was written");
    assert_eq!(
        std::fs::read(&chats).unwrap(),
        b"the person's chats",
        "{door}"
    );
}

/// A file Sextant did not write is not replaced without a person's yes to that very call;
/// a stranger cannot give one.
async fn foreign_file(install: &Install, kind: DoorKind, caller: Caller, opened: &mut Opened) {
    let door = kind.name();
    let notes = install.user.join("notes.txt");
    std::fs::write(&notes, b"lab notes").unwrap();
    for (i, command) in ["csvExport.enable", "project.save"].into_iter().enumerate() {
        let o = opened
            .client
            .call(30 + i as u64, command, json!({"path": notes}), false)
            .await;
        assert!(!o.ok, "{door}: {command} replaced a foreign file");
        if caller == Caller::Person {
            assert_eq!(o.code, "needsConfirmation", "{door}: {o:?}");
        } else {
            refused(&o, door);
        }
    }
    let _ = opened
        .client
        .call(32, "csvExport.disable", json!({}), true)
        .await;
    assert_eq!(std::fs::read(&notes).unwrap(), b"lab notes", "{door}");
}

/// A dangling symbolic link in a user's folder does not carry a write out of it – not
/// even when the person says yes to replacing it.
async fn dangling_link(install: &Install, kind: DoorKind, caller: Caller, opened: &mut Opened) {
    let door = kind.name();
    let target = install
        .outside
        .join(format!("escaped-{kind:?}-{caller:?}.json"));
    let link = install.user.join(format!("link-{kind:?}-{caller:?}.json"));
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = opened
        .client
        .call(
            40,
            "project.save",
            json!({"path": link}),
            caller == Caller::Person,
        )
        .await;
    if caller != Caller::Person {
        refused(&o, door);
    }
    assert!(!target.exists(), "{door}: wrote through the link: {o:?}");
}

/// A named pipe given as a project holds no door: the call answers (with what to do), and
/// so does the next one.
async fn fifo(install: &Install, kind: DoorKind, _: Caller, opened: &mut Opened) {
    let door = kind.name();
    let pipe = install.user.join(format!("pipe-{kind:?}.sextant.json"));
    if !pipe.exists() {
        let status = std::process::Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let o = opened
        .client
        .call(50, "project.open", json!({"path": pipe}), true)
        .await;
    assert!(!o.ok, "{door}: {o:?}");
    let status = opened.client.call(51, "io.status", json!({}), false).await;
    if opened_as_stranger_on_web(kind, &status) {
        return;
    }
    assert!(status.ok, "{door}: {status:?}");
}

fn opened_as_stranger_on_web(kind: DoorKind, o: &Outcome) -> bool {
    kind == DoorKind::Web && o.code == "notAllowed" && o.message.contains("authenticate")
}

type Row = for<'a> fn(
    &'a Install,
    DoorKind,
    Caller,
    &'a mut Opened,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + 'a>>;

macro_rules! rows {
    ($($f:ident),* $(,)?) => {
        &[$((stringify!($f), |i, k, c, o| Box::pin($f(i, k, c, o))),)*]
    };
}

const ROWS: &[(&str, Row)] = rows![
    browser_post,
    foreign_page,
    forged_yes,
    self_sending_project,
    exfiltrating_project,
    own_files,
    foreign_file,
    dangling_link,
    fifo,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attack_fails_at_every_door() {
    for (kind, caller) in doors() {
        for (name, row) in ROWS {
            // A fresh install and door per cell: one row's refusal cannot hide another's.
            let install = Install::new();
            let mut opened = open(kind, caller, &install).await;
            if caller == Caller::Person {
                let r = opened.client.reply("auth").await.expect("auth answered");
                assert_eq!(r["success"], true, "{r}");
            }
            eprintln!("{} as {caller:?}: {name}", kind.name());
            row(&install, kind, caller, &mut opened).await;
        }
    }
}

#[test]
fn every_door_is_in_the_matrix() {
    let walked: std::collections::HashSet<_> = doors().into_iter().map(|(k, _)| k).collect();
    for kind in DoorKind::ALL {
        assert!(
            walked.contains(&kind),
            "{kind:?} is not in the attack matrix"
        );
    }
    // `open` matches every kind without a wildcard: a new kind does not compile until it
    // has a client here, and then every row runs against it.
    let _: fn(DoorKind) = |k| match k {
        DoorKind::TcpApi
        | DoorKind::WebSocketApi
        | DoorKind::McpStdio
        | DoorKind::McpTcp
        | DoorKind::Web => {}
    };
}
