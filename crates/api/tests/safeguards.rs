//! The doors against a hostile caller, with real sockets and real programs: a web page
//! speaking HTTP to the TCP API, process sources (a program the project runs) and files
//! written where a caller says, through the TCP API, the WebSocket API and the UI door.

use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use sextant_api::{ApiOptions, ApiServer, Limits, WebServer, WsServer};
use sextant_runtime::{Runtime, RuntimeHandle, Safeguards, TrustStore, Workspace};
use sextant_telemetry::project::{Connection, Source};
use sextant_telemetry::Project;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// A project whose one source runs `/bin/sh`, which leaves `marker` behind when it runs.
fn program_project(marker: &Path) -> Project {
    Project {
        sources: vec![Source {
            id: "tool".into(),
            connection: shell(marker),
            ..Source::default()
        }],
        ..Project::default()
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

/// Whether `marker` appears within a few seconds (a started program writes it at once).
async fn ran(marker: &Path) -> bool {
    for _ in 0..50 {
        if marker.exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A runtime over `project` saved in `dir/rig.json`, its permissions in `dir/trusted.json`,
/// `dir/exports` as the user's folder.
fn runtime_in(dir: &Path, project: Project) -> RuntimeHandle {
    let file = dir.join("rig.json");
    project.save(&file).unwrap();
    std::fs::create_dir_all(dir.join("exports")).unwrap();
    let safeguards = Safeguards::new(
        vec![dir.join("exports")],
        TrustStore::open(dir.join("trusted.json")),
    );
    Runtime::with_safeguards(Workspace::opened(project, file), safeguards).spawn(None)
}

struct Line {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

impl Line {
    async fn connect(addr: std::net::SocketAddr) -> Line {
        let (r, w) = TcpStream::connect(addr).await.unwrap().into_split();
        Line {
            reader: BufReader::new(r),
            writer: w,
        }
    }

    async fn call(&mut self, id: u64, command: &str, params: Value) -> Value {
        let msg = json!({"type": "command", "id": id, "command": command, "params": params});
        self.writer
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
        self.recv().await
    }

    async fn recv(&mut self) -> Value {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(20), self.reader.read_line(&mut line))
            .await
            .expect("a reply in time")
            .unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad reply {line:?}: {e}"))
    }
}

#[tokio::test]
async fn a_browser_request_to_the_tcp_api_runs_nothing_and_is_hung_up_on() {
    let dir = tempfile::tempdir().unwrap();
    let handle = runtime_in(dir.path(), Project::default());
    let before = std::fs::read(dir.path().join("rig.json")).unwrap();
    let server = ApiServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        handle.clone(),
        ApiOptions::default(),
    )
    .await
    .unwrap();
    // Exactly what `fetch(url, {method: "POST", mode: "no-cors", body: "\n{json}\n"})` sends.
    let body = "\n{\"type\":\"command\",\"id\":1,\"command\":\"project.setTitle\",\"params\":{\"title\":\"pwned\"}}\n";
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nConnection: keep-alive\r\nContent-Length: {}\r\n\
         Origin: https://evil.example\r\nContent-Type: text/plain;charset=UTF-8\r\n\
         User-Agent: Mozilla/5.0\r\nAccept: */*\r\n\r\n{body}",
        body.len(),
        addr = server.local_addr()
    );
    let mut socket = TcpStream::connect(server.local_addr()).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut answer))
        .await
        .expect("the server hangs up");
    // Closed (possibly reset, as unread bytes were pending), and not one byte of answer.
    assert!(read.is_err() || answer.is_empty(), "{answer:?}");
    assert_eq!(server.refused_http_requests(), 1);
    let project = handle
        .call_from_ui("project.get", json!({}), false)
        .await
        .unwrap();
    assert_ne!(project["title"], "pwned");
    assert_eq!(std::fs::read(dir.path().join("rig.json")).unwrap(), before);
    // A well-behaved client still gets in.
    let mut c = Line::connect(server.local_addr()).await;
    assert_eq!(c.call(2, "io.status", json!({})).await["success"], true);
}

#[tokio::test]
async fn the_tcp_message_cap_is_exact_however_the_bytes_arrive() {
    let handle = Runtime::new(Workspace::new(Project::default())).spawn(None);
    let limits = Limits {
        max_message_bytes: 200,
        ..Limits::default()
    };
    let server = ApiServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        handle,
        ApiOptions {
            limits,
            ..ApiOptions::default()
        },
    )
    .await
    .unwrap();
    let mut c = Line::connect(server.local_addr()).await;
    // A command padded with spaces to exactly the cap, then one byte over, each in one write
    // with its newline (the path that used to skip the check).
    let msg = json!({"type": "command", "id": 1, "command": "io.status"}).to_string();
    let exact = format!("{msg}{}", " ".repeat(200 - msg.len()));
    let over = format!("{exact} ");
    c.writer
        .write_all(format!("{exact}\n{over}\n").as_bytes())
        .await
        .unwrap();
    let first = c.recv().await;
    assert_eq!(
        (first["id"].as_u64(), first["success"].as_bool()),
        (Some(1), Some(true)),
        "{first}"
    );
    let second = c.recv().await;
    assert!(
        second["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeds 200 bytes"),
        "{second}"
    );
    // A long line split across writes is refused too, and the connection stays usable.
    c.writer
        .write_all(" ".repeat(150).as_bytes())
        .await
        .unwrap();
    c.writer
        .write_all(format!("{}\n", " ".repeat(150)).as_bytes())
        .await
        .unwrap();
    assert!(c.recv().await["error"]["message"]
        .as_str()
        .unwrap()
        .contains("exceeds"));
    assert_eq!(c.call(3, "io.status", json!({})).await["success"], true);
}

#[tokio::test]
async fn wrong_tokens_are_answered_slower_and_then_hung_up_on() {
    let handle = Runtime::new(Workspace::new(Project::default())).spawn(None);
    let server = ApiServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        handle,
        ApiOptions {
            token: Some("s3cret".into()),
            ..ApiOptions::default()
        },
    )
    .await
    .unwrap();
    let mut c = Line::connect(server.local_addr()).await;
    for n in 1..=5u64 {
        let msg = json!({"type": "auth", "id": n, "token": format!("guess{n}")});
        c.writer
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
        let r = c.recv().await;
        assert_eq!(r["error"]["code"], "notAllowed", "{r}");
    }
    let mut rest = String::new();
    let n = tokio::time::timeout(Duration::from_secs(10), c.reader.read_line(&mut rest))
        .await
        .expect("closed in time")
        .unwrap_or(0);
    assert_eq!(
        n, 0,
        "the connection is closed after five wrong tokens: {rest}"
    );
    // The right token still works on a new connection.
    let mut c = Line::connect(server.local_addr()).await;
    let msg = json!({"type": "auth", "id": 9, "token": "s3cret"});
    c.writer
        .write_all(format!("{msg}\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(c.recv().await["success"], true);
}

#[tokio::test]
async fn api_callers_cannot_add_or_start_a_program_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let simulator = Project {
        sources: vec![Source::default()],
        ..Project::default()
    };
    let handle = runtime_in(dir.path(), simulator);
    let server = ApiServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        handle.clone(),
        ApiOptions::default(),
    )
    .await
    .unwrap();
    let mut c = Line::connect(server.local_addr()).await;
    let source = json!({"source": {"id": "tool", "connection": serde_json::to_value(shell(&marker)).unwrap()}});
    let r = c.call(1, "project.source.add", source.clone()).await;
    assert_eq!(r["error"]["code"], "notAllowed", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--allow-process-sources") && message.contains("/bin/sh -c"),
        "{message}"
    );
    // Nor through a whole project, nor by turning an existing source into one.
    let r = c
        .call(2, "project.source.update", json!({"id": "src-1", "changes": {"connection": serde_json::to_value(shell(&marker)).unwrap()}}))
        .await;
    assert_eq!(r["error"]["code"], "notAllowed", "{r}");
    let content = program_project(&marker).to_json_string();
    let r = c
        .call(
            3,
            "project.openContent",
            json!({"name": "shared.json", "content": content}),
        )
        .await;
    assert_eq!(r["success"], true, "opening is fine: {r}");
    let r = c.call(4, "io.connect", json!({})).await;
    assert_eq!(r["error"]["code"], "notAllowed", "{r}");
    assert!(!ran(&marker).await, "the program ran");

    // With the user's flag, the same calls run the program.
    let trusting = ApiServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        handle,
        ApiOptions {
            allow_process_sources: true,
            ..ApiOptions::default()
        },
    )
    .await
    .unwrap();
    let mut c = Line::connect(trusting.local_addr()).await;
    let r = c.call(5, "io.connect", json!({})).await;
    assert_eq!(r["success"], true, "{r}");
    assert!(ran(&marker).await, "the flag is the user's consent");
    c.call(6, "io.disconnect", json!({})).await;
}

#[tokio::test]
async fn api_callers_write_files_only_inside_the_users_folders() {
    let dir = tempfile::tempdir().unwrap();
    let handle = runtime_in(dir.path(), Project::default());
    let server = ApiServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        handle,
        ApiOptions::default(),
    )
    .await
    .unwrap();
    let mut c = Line::connect(server.local_addr()).await;
    let outside = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Value, bool)> = vec![
        (
            "csvExport.enable",
            json!({"path": dir.path().join("exports/run.csv")}),
            true,
        ),
        (
            "csvExport.enable",
            json!({"path": dir.path().join("run.csv")}),
            true,
        ), // the project's folder
        (
            "csvExport.enable",
            json!({"path": outside.path().join("run.csv")}),
            false,
        ),
        (
            "csvExport.enable",
            json!({"path": dir.path().join("exports/../../x.csv")}),
            false,
        ),
        (
            "csvExport.enable",
            json!({"path": dir.path().join(".profile")}),
            false,
        ),
        (
            "mcapExport.enable",
            json!({"path": dir.path().join("exports/run.mcap")}),
            true,
        ),
        (
            "mcapExport.enable",
            json!({"path": outside.path().join("run.mcap")}),
            false,
        ),
        (
            "project.save",
            json!({"path": outside.path().join("copy.json")}),
            false,
        ),
        (
            "project.save",
            json!({"path": dir.path().join("exports/copy.json")}),
            true,
        ),
        (
            "sessions.setDatabase",
            json!({"path": outside.path().join("s.sqlite")}),
            false,
        ),
        (
            "sessions.exportCsv",
            json!({"id": 1, "path": outside.path().join("s.csv")}),
            false,
        ),
        (
            "sessions.export",
            json!({"id": 1, "format": "mcap", "path": outside.path().join("s.mcap")}),
            false,
        ),
        (
            "sessions.export",
            json!({"id": 1, "format": "parquet", "path": dir.path().join(".profile")}),
            false,
        ),
    ];
    for (i, (command, params, allowed)) in cases.into_iter().enumerate() {
        let r = c.call(i as u64, command, params.clone()).await;
        if allowed {
            assert_eq!(r["success"], true, "{command} {params}: {r}");
        } else {
            assert_eq!(r["error"]["code"], "notAllowed", "{command} {params}: {r}");
            assert!(
                r["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("--allow-folder"),
                "{r}"
            );
        }
    }
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "nothing written outside"
    );
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws_connect(
    url: &str,
    origin: Option<&str>,
) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let mut req = url.into_client_request().unwrap();
    if let Some(o) = origin {
        req.headers_mut().insert("origin", o.parse().unwrap());
    }
    tokio_tungstenite::connect_async(req)
        .await
        .map(|(ws, _)| ws)
}

/// The web UI's connection, as the page makes it: the handshake, then the launch's secret.
async fn web_connect(server: &WebServer, origin: Option<&str>) -> Ws {
    let mut ws = ws_connect(&format!("ws://{}/ws", server.local_addr()), origin)
        .await
        .unwrap();
    let auth = json!({"type": "auth", "id": 0, "token": server.secret()});
    ws.send(Message::text(auth.to_string())).await.unwrap();
    ws
}

async fn ws_call(ws: &mut Ws, id: u64, command: &str, params: Value, approved: bool) -> Value {
    let msg = json!({"type": "command", "id": id, "command": command, "params": params, "approved": approved});
    ws.send(Message::text(msg.to_string())).await.unwrap();
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("a reply in time")
            .expect("open")
            .unwrap();
        if let Message::Text(t) = m {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }
}

#[tokio::test]
async fn websocket_api_callers_cannot_start_a_program() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let handle = runtime_in(dir.path(), program_project(&marker));
    let server = WsServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        handle,
        ApiOptions::default(),
        Vec::new(),
    )
    .await
    .unwrap();
    let mut ws = ws_connect(&format!("ws://{}/", server.local_addr()), None)
        .await
        .unwrap();
    // Even claiming a person approved it: this door has nobody to ask.
    let r = ws_call(&mut ws, 1, "io.connect", json!({}), true).await;
    assert_eq!(r["error"]["code"], "notAllowed", "{r}");
    assert!(!ran(&marker).await, "the program ran");
}

fn ui_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("index.html"),
        "<!doctype html><title>Sextant</title>",
    )
    .unwrap();
    dir
}

async fn web(handle: RuntimeHandle, ui: &Path) -> WebServer {
    WebServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        handle,
        ApiOptions::default(),
        Vec::new(),
        ui,
        None,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn the_ui_door_asks_the_person_once_per_project_and_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let handle = runtime_in(dir.path(), program_project(&marker));
    let ui = ui_dir();
    let server = web(handle.clone(), ui.path()).await;
    let mut ws = web_connect(&server, None).await;
    // A click on Connect is not a yes to running a program: the person is asked first.
    let r = ws_call(&mut ws, 1, "io.connect", json!({}), false).await;
    assert_eq!(r["error"]["code"], "needsConfirmation", "{r}");
    let question = r["error"]["message"].as_str().unwrap();
    assert!(
        question.contains("/bin/sh -c") && question.contains("allow it?"),
        "{question}"
    );
    assert!(!ran(&marker).await, "ran before the person said yes");
    // Yes: it runs, and the yes is remembered for this project file and command line…
    let r = ws_call(&mut ws, 2, "io.connect", json!({}), true).await;
    assert_eq!(r["success"], true, "{r}");
    assert!(ran(&marker).await);
    ws_call(&mut ws, 3, "io.disconnect", json!({}), false).await;
    std::fs::remove_file(&marker).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = ws_call(&mut ws, 4, "io.connect", json!({}), false).await;
    assert_eq!(r["success"], true, "remembered: {r}");
    assert!(ran(&marker).await);
    ws_call(&mut ws, 5, "io.disconnect", json!({}), false).await;
    // …outside the project file, in the user's data folder.
    let project = std::fs::read_to_string(dir.path().join("rig.json")).unwrap();
    assert!(!project.contains("trusted"), "{project}");
    assert!(std::fs::read_to_string(dir.path().join("trusted.json"))
        .unwrap()
        .contains("/bin/sh -c"));
    // Another command line is another question, even in the same project.
    let other = dir.path().join("other");
    let r = ws_call(
        &mut ws,
        6,
        "project.source.update",
        json!({"id": "tool", "changes": {"connection": serde_json::to_value(shell(&other)).unwrap()}}),
        false,
    )
    .await;
    assert_eq!(
        r["error"]["code"], "needsConfirmation",
        "changing what runs asks too: {r}"
    );
    let r = ws_call(
        &mut ws,
        7,
        "csvExport.enable",
        json!({"path": "/tmp/../etc/sextant.csv"}),
        false,
    )
    .await;
    assert_eq!(r["error"]["code"], "needsConfirmation", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("outside your folders"),
        "{r}"
    );
}

#[tokio::test]
async fn a_page_on_another_localhost_port_is_refused() {
    let ui = ui_dir();
    let a = web(
        Runtime::new(Workspace::new(Project::default())).spawn(None),
        ui.path(),
    )
    .await;
    let b = web(
        Runtime::new(Workspace::new(Project::default())).spawn(None),
        ui.path(),
    )
    .await;
    let url = format!("ws://{}/ws", a.local_addr());
    for host in ["127.0.0.1", "localhost"] {
        let foreign = format!("http://{host}:{}", b.local_addr().port());
        match ws_connect(&url, Some(&foreign)).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status(), 403)
            }
            other => panic!("{foreign} got in: {other:?}"),
        }
        let own = format!("http://{host}:{}", a.local_addr().port());
        assert!(ws_connect(&url, Some(&own)).await.is_ok(), "{own}");
    }
}

#[tokio::test]
async fn nesting_is_checked_before_any_message_kind_is_parsed() {
    let ui = ui_dir();
    let server = web(
        Runtime::new(Workspace::new(Project::default())).spawn(None),
        ui.path(),
    )
    .await;
    let mut ws = web_connect(&server, None).await;
    for kind in ["chat", "display", "command"] {
        let bomb = format!(
            "{{\"type\":\"{kind}\",\"id\":1,\"x\":{}{}}}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        ws.send(Message::text(bomb)).await.unwrap();
        let reply = loop {
            let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            if let Message::Text(t) = m {
                let v = serde_json::from_str::<Value>(&t).unwrap();
                // The answer to the secret (id 0) comes first.
                if v["id"] != 0 {
                    break v;
                }
            }
        };
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("nested deeper"),
            "{kind}: {reply}"
        );
    }
}

#[tokio::test]
async fn saving_over_an_imported_serial_studio_file_asks_first() {
    let dir = tempfile::tempdir().unwrap();
    let handle = runtime_in(dir.path(), Project::default());
    let ssproj = dir.path().join("exports/bench.ssproj");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/serial-studio/multi-source.ssproj");
    std::fs::copy(&fixture, &ssproj).unwrap();
    let before = std::fs::read(&ssproj).unwrap();
    let ui = ui_dir();
    let server = web(handle, ui.path()).await;
    let mut ws = web_connect(&server, None).await;
    let r = ws_call(&mut ws, 1, "project.open", json!({ "path": ssproj }), false).await;
    assert_eq!(r["success"], true, "{r}");
    assert!(
        r["result"].get("file").is_none(),
        "an import has no file: {r}"
    );
    let r = ws_call(&mut ws, 2, "project.save", json!({ "path": ssproj }), false).await;
    assert_eq!(r["error"]["code"], "needsConfirmation", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a Sextant project"),
        "{r}"
    );
    assert_eq!(std::fs::read(&ssproj).unwrap(), before);
    // Beside it is fine, and from then on the project has that file.
    let beside = dir.path().join("exports/bench.sextant.json");
    let r = ws_call(&mut ws, 3, "project.save", json!({ "path": beside }), false).await;
    assert_eq!(r["success"], true, "{r}");
    // Only a person's yes replaces the original.
    let r = ws_call(&mut ws, 4, "project.save", json!({ "path": ssproj }), true).await;
    assert_eq!(r["success"], true, "{r}");
    assert_ne!(std::fs::read(&ssproj).unwrap(), before);
}
