//! A scripted provider server for tests (feature `script`).
//!
//! Owns replaying canned turns over real HTTP on 127.0.0.1: each request gets the next turn
//! of a [`Script`] – a status, headers, and an SSE body in the provider's own wire format (or
//! a JSON or text body) – with optional faults such as closing the connection after N
//! events. Every request is recorded (method, path, headers, body bytes, arrival time) so
//! tests can assert on exactly what a client sent. Scripts live as JSON under
//! `fixtures/providers/`, one file per scenario, so a new case needs no new code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::Value;

/// One scenario: the responses to send, in order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(default)]
    pub description: String,
    pub turns: Vec<Turn>,
}

/// The response to one request.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    #[serde(default = "ok")]
    pub status: u16,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// An SSE body (`content-type: text/event-stream`).
    #[serde(default)]
    pub sse: Vec<SseItem>,
    /// A JSON body instead.
    pub json: Option<Value>,
    /// A plain-text body instead.
    pub text: Option<String>,
    /// Write SSE lines with `\r\n` instead of `\n`.
    #[serde(default)]
    pub crlf: bool,
    /// Send the SSE body in pieces of this many bytes (events split across chunks).
    pub chunk_size: Option<usize>,
    /// Send one SSE item at a time, this many milliseconds apart (a reply a page can be
    /// watched rendering); instead of `chunk_size`.
    pub event_delay_ms: Option<u64>,
    pub fault: Option<Fault>,
}

fn ok() -> u16 {
    200
}

/// One SSE item: an event (`data` as JSON, or a string sent verbatim such as `[DONE]`) or
/// raw text for anything an event cannot express.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum SseItem {
    Event { event: Option<String>, data: Value },
    Raw { raw: String },
}

/// Break the reply on purpose.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// Send only the first N SSE items.
    pub after_events: usize,
    /// Then this text (e.g. half an event).
    #[serde(default)]
    pub partial: String,
    /// Then reset the connection instead of ending the body cleanly.
    #[serde(default)]
    pub abort: bool,
    /// Then go silent for this long (milliseconds) before ending, to trip read timeouts.
    pub stall_ms: Option<u64>,
}

impl Script {
    /// Load `fixtures/providers/{name}.json`.
    pub fn fixture(name: &str) -> Script {
        Self::load(&fixtures_dir().join(format!("{name}.json")))
    }

    pub fn load(path: &Path) -> Script {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("could not read script {}: {e}", path.display()));
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("script {} is not valid: {e}", path.display()))
    }
}

/// `fixtures/providers` of this repository.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/providers")
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
    /// The client's address: two requests from one port came over one kept-alive
    /// connection.
    pub peer: std::net::SocketAddr,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

struct Shared {
    script: Script,
    requests: Mutex<Vec<RecordedRequest>>,
}

/// Where a test in another process (the browser tests) reads what the server received:
/// a JSON array of `{method, path, headers, body}` (`body` parsed when it is JSON). Not
/// recorded itself and never a scripted turn.
pub const REQUESTS_PATH: &str = "/_script/requests";

async fn recorded(State(shared): State<Arc<Shared>>) -> Response {
    let requests: Vec<Value> = shared
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| {
            serde_json::json!({
                "method": r.method,
                "path": r.path,
                "headers": r.headers.iter().cloned().collect::<BTreeMap<_, _>>(),
                "body": serde_json::from_slice::<Value>(&r.body)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&r.body).into())),
            })
        })
        .collect();
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(&requests).unwrap()))
        .unwrap()
}

/// The running server; stops when dropped.
pub struct ScriptServer {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptServer {
    /// Serve `script` on an ephemeral port of 127.0.0.1 (inside a tokio runtime).
    pub async fn start(script: Script) -> ScriptServer {
        let shared = Arc::new(Shared {
            script,
            requests: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .route(REQUESTS_PATH, axum::routing::get(recorded))
            .fallback(respond)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
            let _ = axum::serve(listener, app).await;
        });
        ScriptServer { addr, shared, task }
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }
}

impl Drop for ScriptServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn respond(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let number = {
        let mut requests = shared.requests.lock().unwrap();
        requests.push(RecordedRequest {
            method: method.to_string(),
            path: uri
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            headers: headers
                .iter()
                .map(|(n, v)| {
                    (
                        n.to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: body.to_vec(),
            at: Instant::now(),
            peer,
        });
        requests.len() - 1
    };
    let Some(turn) = shared.script.turns.get(number) else {
        // Not retryable, so an unexpected extra request shows up as a clear failure.
        return Response::builder()
            .status(StatusCode::GONE)
            .body(Body::from(format!("the script has no turn {number}")))
            .unwrap();
    };
    let mut response = Response::builder().status(turn.status);
    for (name, value) in &turn.headers {
        response = response.header(name, value);
    }
    let body = if let Some(json) = &turn.json {
        response = response.header("content-type", "application/json");
        Body::from(serde_json::to_vec(json).unwrap())
    } else if let Some(text) = &turn.text {
        Body::from(text.clone())
    } else {
        response = response
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache");
        sse_body(turn)
    };
    response.body(body).unwrap()
}

fn sse_body(turn: &Turn) -> Body {
    let items = match &turn.fault {
        Some(fault) => &turn.sse[..fault.after_events.min(turn.sse.len())],
        None => &turn.sse[..],
    };
    let mut text: String = items.iter().map(render).collect();
    if let Some(fault) = &turn.fault {
        text.push_str(&fault.partial);
    }
    if turn.crlf {
        text = text.replace('\n', "\r\n");
    }
    let size = turn.chunk_size.unwrap_or(usize::MAX).max(1);
    let mut chunks: Vec<Result<Bytes, std::io::Error>> = match turn.event_delay_ms {
        // One item per chunk (the fault's partial text last).
        Some(_) => {
            let mut pieces: Vec<String> = items.iter().map(render).collect();
            if let Some(fault) = &turn.fault {
                pieces.push(fault.partial.clone());
            }
            pieces
                .into_iter()
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let p = if turn.crlf {
                        p.replace('\n', "\r\n")
                    } else {
                        p
                    };
                    Ok(Bytes::from(p))
                })
                .collect()
        }
        None => text
            .as_bytes()
            .chunks(size)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect(),
    };
    let pause = turn.event_delay_ms.unwrap_or(1);
    let stall = turn.fault.as_ref().and_then(|f| f.stall_ms).unwrap_or(0);
    if turn.fault.as_ref().is_some_and(|f| f.abort) {
        chunks.push(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "scripted abort",
        )));
    }
    let stream = futures_util::stream::iter(chunks).then(move |chunk| async move {
        // Let the bytes before a scripted abort reach the client first, and give split
        // chunks a chance to arrive as separate reads.
        tokio::time::sleep(Duration::from_millis(if chunk.is_err() {
            50
        } else {
            pause
        }))
        .await;
        chunk
    });
    let silence = futures_util::stream::once(async move {
        tokio::time::sleep(Duration::from_millis(stall)).await;
        Ok(Bytes::new())
    });
    let stream = stream.chain(silence);
    Body::from_stream(stream)
}

fn render(item: &SseItem) -> String {
    match item {
        SseItem::Raw { raw } => raw.clone(),
        SseItem::Event { event, data } => {
            let data = match data {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            match event {
                Some(event) => format!("event: {event}\ndata: {data}\n\n"),
                None => format!("data: {data}\n\n"),
            }
        }
    }
}
