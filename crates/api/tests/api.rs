//! The API server with a real TCP client on 127.0.0.1.

use std::time::Duration;

use serde_json::{json, Value};
use sextant_api::{ApiError, ApiOptions, ApiServer, Limits};
use sextant_runtime::{Runtime, RuntimeHandle, Workspace};
use sextant_telemetry::Project;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

struct Client {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

impl Client {
    async fn connect(server: &ApiServer) -> Client {
        let (r, w) = TcpStream::connect(server.local_addr())
            .await
            .unwrap()
            .into_split();
        Client {
            reader: BufReader::new(r),
            writer: w,
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.unwrap();
    }

    async fn send(&mut self, msg: Value) {
        self.send_raw(format!("{msg}\n").as_bytes()).await;
    }

    async fn recv(&mut self) -> Value {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(10), self.reader.read_line(&mut line))
            .await
            .expect("a reply in time")
            .unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad reply {line:?}: {e}"))
    }

    async fn call(&mut self, id: u64, command: &str, params: Value) -> Value {
        self.send(json!({"type": "command", "id": id, "command": command, "params": params}))
            .await;
        let r = self.recv().await;
        assert_eq!(r["id"], id, "{r}");
        r
    }
}

fn runtime(project: Project) -> RuntimeHandle {
    Runtime::new(Workspace::new(project)).spawn(None)
}

async fn server(options: ApiOptions) -> ApiServer {
    ApiServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        runtime(Project::default()),
        options,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn request_response_errors_and_batch() {
    let server = server(ApiOptions::default()).await;
    let mut c = Client::connect(&server).await;
    let r = c
        .call(1, "project.group.add", json!({"title": "Power"}))
        .await;
    assert_eq!(
        (r["type"].as_str(), r["success"].as_bool()),
        (Some("response"), Some(true)),
        "{r}"
    );
    let r = c
        .call(
            2,
            "project.dataset.add",
            json!({"group": "grp-1", "dataset": {"index": "x"}}),
        )
        .await;
    assert_eq!(r["success"], false);
    assert_eq!(r["error"]["code"], "invalidParams");
    assert_eq!(r["error"]["path"], "dataset.index");
    let r = c.call(3, "project.nope", json!({})).await;
    assert_eq!(r["error"]["code"], "unknownCommand");
    let r = c.call(4, "api.getCommands", json!({})).await;
    assert!(r["result"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "project.dataset.add"));

    c.send(json!({"type": "batch", "id": 5, "commands": [
        {"id": "a", "command": "project.group.add", "params": {"title": "A"}},
        {"id": "b", "command": "project.group.remove", "params": {"id": "missing"}},
        {"id": "c", "command": "project.get"}
    ]}))
    .await;
    let b = c.recv().await;
    assert_eq!(b["type"], "batch");
    let results = b["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["success"], true);
    assert_eq!(results[1]["error"]["code"], "notFound");
    assert_eq!(results[2]["result"]["groups"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn bad_input_gets_an_error_and_the_connection_survives() {
    let server = server(ApiOptions::default()).await;
    let mut c = Client::connect(&server).await;
    c.send_raw(b"{not json\n").await;
    assert_eq!(c.recv().await["error"]["code"], "badRequest");
    let mut huge = vec![b'x'; 2 * 1024 * 1024];
    huge.push(b'\n');
    c.send_raw(&huge).await;
    let r = c.recv().await;
    assert!(
        r["error"]["message"].as_str().unwrap().contains("exceeds"),
        "{r}"
    );
    let deep = format!("{}{}\n", "[".repeat(100), "]".repeat(100));
    c.send_raw(deep.as_bytes()).await;
    assert!(c.recv().await["error"]["message"]
        .as_str()
        .unwrap()
        .contains("nested"));
    c.send(json!({"type": "mystery", "id": 9})).await;
    assert_eq!(c.recv().await["error"]["code"], "badRequest");
    let r = c.call(10, "project.validate", json!({})).await;
    assert_eq!(
        r["result"]["valid"], true,
        "still usable after all that: {r}"
    );
}

#[tokio::test]
async fn non_loopback_needs_a_token_and_a_token_needs_auth() {
    let e = ApiServer::bind(
        "0.0.0.0:0".parse().unwrap(),
        runtime(Project::default()),
        ApiOptions::default(),
    )
    .await
    .err()
    .expect("refused");
    assert!(
        matches!(
            e,
            ApiError::Guard(sextant_guard::GuardError::TokenRequired(_))
        ),
        "{e}"
    );
    assert!(e.to_string().contains("token"));

    let server = ApiServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        runtime(Project::default()),
        ApiOptions {
            token: Some("s3cret".into()),
            ..ApiOptions::default()
        },
    )
    .await
    .unwrap();
    let mut c = Client::connect(&server).await;
    let r = c.call(1, "project.get", json!({})).await;
    assert_eq!(r["error"]["code"], "notAllowed");
    c.send(json!({"type": "auth", "id": 2, "token": "wrong"}))
        .await;
    assert_eq!(c.recv().await["success"], false);
    c.send(json!({"type": "auth", "id": 3, "token": "s3cret"}))
        .await;
    assert_eq!(c.recv().await["success"], true);
    assert_eq!(c.call(4, "project.get", json!({})).await["success"], true);
}

fn echo_project() -> Project {
    // `cat` echoes what is sent to it, so a console write comes back as a frame.
    serde_json::from_value(json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "echo", "connection": {"type": "process", "program": "cat"},
                     "parser": {"kind": "delimited"}}],
        "groups": [{"id": "g", "title": "G", "datasets": [{"id": "v", "title": "V", "index": 1}]}]
    }))
    .unwrap()
}

#[tokio::test]
async fn device_commands_need_consent_and_frames_are_pushed() {
    for consent in [false, true] {
        let server = ApiServer::bind(
            "127.0.0.1:0".parse().unwrap(),
            runtime(echo_project()),
            ApiOptions {
                allow_device_control: consent,
                // The echo device is a program: the user's flag lets API clients start it.
                allow_process_sources: true,
                ..ApiOptions::default()
            },
        )
        .await
        .unwrap();
        let mut c = Client::connect(&server).await;
        assert_eq!(c.call(1, "io.connect", json!({})).await["success"], true);
        let r = c
            .call(2, "console.send", json!({"data": "42", "lineEnding": "lf"}))
            .await;
        if !consent {
            assert_eq!(r["error"]["code"], "notAllowed", "{r}");
            assert!(r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("allow device control"));
            continue;
        }
        assert_eq!(r["success"], true, "{r}");
        let r = c
            .call(
                3,
                "api.subscribe",
                json!({"frames": true, "events": true, "rateHz": 20}),
            )
            .await;
        assert_eq!(r["success"], true, "{r}");
        let mut got = None;
        for _ in 0..50 {
            let m = c.recv().await;
            if m["type"] == "frame" {
                got = Some(m);
                break;
            }
        }
        let frame = got.expect("a pushed frame");
        assert_eq!(frame["values"]["v"], 42.0, "{frame}");
        assert_eq!(c.call(4, "io.disconnect", json!({})).await["success"], true);
    }
}

#[tokio::test]
async fn rate_and_client_limits_are_enforced() {
    let server = server(ApiOptions {
        limits: Limits {
            rate_per_second: 1.0,
            burst: 3.0,
            max_clients: 1,
            ..Limits::default()
        },
        ..ApiOptions::default()
    })
    .await;
    let mut c = Client::connect(&server).await;
    for i in 0..3 {
        assert_eq!(
            c.call(i, "project.validate", json!({})).await["success"],
            true
        );
    }
    c.send(json!({"type": "command", "id": 9, "command": "project.validate"}))
        .await;
    let refused = c.recv().await;
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("rate limit"));
    // Answered by its id, so the caller's request does not wait for ever.
    assert_eq!(refused["id"], 9, "{refused}");
    let mut second = Client::connect(&server).await;
    assert!(second.recv().await["error"]["message"]
        .as_str()
        .unwrap()
        .contains("too many clients"));
}

/// `Limits::max_batch` (256 by default): one command past it and the whole batch is
/// refused by name, before any of its commands runs; at the cap every command runs.
#[tokio::test]
async fn a_batch_past_max_batch_is_refused_whole_and_one_at_the_cap_runs() {
    let cap = Limits::default().max_batch;
    assert_eq!(cap, 256);
    let server = server(ApiOptions::default()).await;
    let mut c = Client::connect(&server).await;
    let adds = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"id": i, "command": "project.group.add", "params": {"title": format!("G{i}")}}))
            .collect()
    };
    let groups = |r: &Value| r["result"]["groups"].as_array().unwrap().len();

    c.send(json!({"type": "batch", "id": "over", "commands": adds(cap + 1)}))
        .await;
    let r = c.recv().await;
    assert_eq!(r["id"], "over", "{r}");
    assert_eq!(
        (r["type"].as_str(), r["success"].as_bool()),
        (Some("response"), Some(false)),
        "{r}"
    );
    assert_eq!(r["error"]["code"], "badRequest", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("at most {cap} commands")),
        "{message}"
    );
    // Refused whole: not one of its commands ran.
    assert_eq!(groups(&c.call(1, "project.get", json!({})).await), 0);

    c.send(json!({"type": "batch", "id": "at", "commands": adds(cap)}))
        .await;
    let b = c.recv().await;
    assert_eq!(
        (b["type"].as_str(), &b["id"]),
        (Some("batch"), &json!("at")),
        "{b}"
    );
    let results = b["results"].as_array().unwrap();
    assert_eq!(results.len(), cap);
    assert!(results.iter().all(|r| r["success"] == true), "{b}");
    assert_eq!(results[cap - 1]["id"], cap - 1);
    assert_eq!(groups(&c.call(2, "project.get", json!({})).await), cap);
}
