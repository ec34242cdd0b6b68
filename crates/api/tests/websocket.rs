//! The API over WebSocket with a real client: same messages, origin checks, limits.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use sextant_api::{ApiOptions, Limits, WsServer};
use sextant_runtime::{Runtime, Workspace};
use sextant_telemetry::Project;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

async fn server(options: ApiOptions) -> WsServer {
    server_allowing(options, Vec::new()).await
}

async fn server_allowing(options: ApiOptions, origins: Vec<String>) -> WsServer {
    let runtime = Runtime::new(Workspace::new(Project::default())).spawn(None);
    WsServer::bind("127.0.0.1:0".parse().unwrap(), runtime, options, origins)
        .await
        .unwrap()
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(
    server: &WsServer,
    origin: Option<&str>,
) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let mut req = format!("ws://{}/", server.local_addr())
        .into_client_request()
        .unwrap();
    if let Some(o) = origin {
        req.headers_mut().insert("origin", o.parse().unwrap());
    }
    tokio_tungstenite::connect_async(req)
        .await
        .map(|(ws, _)| ws)
}

async fn recv(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a reply in time")
            .expect("stream open")
            .unwrap();
        if let Message::Text(t) = msg {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

#[tokio::test]
async fn commands_batches_and_errors_over_websocket() {
    // A page the user allowed (`--allow-origin`), e.g. their own dashboard on a dev server.
    let server = server_allowing(ApiOptions::default(), vec!["http://localhost:5173".into()]).await;
    let mut ws = connect(&server, Some("http://localhost:5173"))
        .await
        .unwrap();
    ws.send(Message::text(json!({"type": "command", "id": 1, "command": "project.group.add", "params": {"title": "G"}}).to_string()))
        .await
        .unwrap();
    let r = recv(&mut ws).await;
    assert_eq!(
        (r["id"].as_i64(), r["success"].as_bool()),
        (Some(1), Some(true)),
        "{r}"
    );
    ws.send(Message::text("{broken")).await.unwrap();
    assert_eq!(recv(&mut ws).await["error"]["code"], "badRequest");
    ws.send(Message::text(
        json!({"type": "batch", "id": 2, "commands": [{"id": "a", "command": "project.validate"}]})
            .to_string(),
    ))
    .await
    .unwrap();
    let b = recv(&mut ws).await;
    assert_eq!(b["results"][0]["result"]["valid"], true, "{b}");
    ws.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    assert!(recv(&mut ws).await["error"]["message"]
        .as_str()
        .unwrap()
        .contains("text frames"));
}

#[tokio::test]
async fn pages_from_other_origins_are_refused() {
    let server = server(ApiOptions::default()).await;
    // Another website, and a page of another program on this machine: this server serves
    // no page, so only origins the user listed may connect.
    for origin in ["https://evil.example", "http://localhost:5173"] {
        match connect(&server, Some(origin)).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status(), 403)
            }
            other => panic!("expected a 403 for {origin}, got {other:?}"),
        }
    }
    // A program (no Origin header) is the user's own client.
    assert!(connect(&server, None).await.is_ok());
}

#[tokio::test]
async fn oversize_messages_are_refused_and_tokens_required_when_set() {
    let server = server(ApiOptions {
        token: Some("t0k".into()),
        limits: Limits {
            max_message_bytes: 4096,
            ..Limits::default()
        },
        ..ApiOptions::default()
    })
    .await;
    let mut ws = connect(&server, None).await.unwrap();
    ws.send(Message::text(
        json!({"type": "command", "id": 1, "command": "project.get"}).to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(recv(&mut ws).await["error"]["code"], "notAllowed");
    ws.send(Message::text(
        json!({"type": "auth", "id": 2, "token": "t0k"}).to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(recv(&mut ws).await["success"], true);
    ws.send(Message::text("x".repeat(10_000))).await.unwrap();
    let r = recv(&mut ws).await;
    assert!(
        r["error"]["message"].as_str().unwrap().contains("closing"),
        "{r}"
    );
}

/// A request refused for going over the rate limit is answered by its own id (a page
/// waits on that id; a `null` one left it waiting for ever).
#[tokio::test]
async fn a_rate_limited_request_is_answered_by_its_id() {
    let server = server(ApiOptions {
        limits: Limits {
            rate_per_second: 0.5,
            burst: 2.0,
            ..Limits::default()
        },
        ..ApiOptions::default()
    })
    .await;
    let mut ws = connect(&server, None).await.unwrap();
    for id in 1..=4 {
        ws.send(Message::text(
            json!({"type": "command", "id": id, "command": "project.validate"}).to_string(),
        ))
        .await
        .unwrap();
    }
    let mut refused = Vec::new();
    for _ in 1..=4 {
        let r = recv(&mut ws).await;
        if r["success"] == false {
            assert!(
                r["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("rate limit"),
                "{r}"
            );
            refused.push(r["id"].clone());
        }
    }
    assert_eq!(refused, [json!(3), json!(4)]);
}
