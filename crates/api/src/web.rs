//! The web door of `sextant serve`: the built UI over HTTP and one WebSocket at `/ws`
//! carrying the API's JSON messages as the UI door (a person at the controls) plus binary
//! display frames (`docs/ui-protocol.md`).
//!
//! With a [`ChatDoor`], the same socket carries the assistant's chats: `{"type":"chat",…}`
//! requests (answered in order by one worker per connection, beside the command loop, so a
//! slow provider never holds up commands) and every chat event as
//! `{"type":"chatEvent","event":…}`. It also carries `{"type":"credentials",…}`: the
//! sources' passwords and certificates, which only a person's door sets (the TCP API, MCP
//! and the assistant have no way to them; `sextant_runtime::credentials`).
//!
//! It is the door where a person sits, so it always has a secret: the `--token` given, or
//! one made per launch and printed in the URL that opens the UI ([`WebServer::url`]), which
//! the page proves first on `/ws`. A local port proves nothing – any program and any web
//! page can reach it – so until the secret is proven a connection can do nothing at all,
//! and only after it does a yes in its messages count as the person's. The door's
//! [`Guard`] also checks every request's `Origin` (a page this server served, or one the
//! user listed) and, on loopback, its `Host` (a rebound DNS name reads not even the pages).
//! Every text message is held to the size and nesting limits before anything parses it,
//! whatever its kind (command, chat, display).
//!
//! Display frames come from `sextant_display::Scope::stream`, the loop the desktop app runs
//! too, fed the connection's options (checked by `DisplayOptions::validate`, the rate's only
//! bounds) and draining into a queue of `FRAMES_IN_FLIGHT` beside the JSON messages.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use sextant_assistant::door::ChatDoor;
use sextant_commands::ErrorCode;
use sextant_display::{DisplayOptions, FRAMES_IN_FLIGHT};
use sextant_guard::{DoorKind, Guard, GuardError, RateLimiter};
use sextant_runtime::RuntimeHandle;
use tokio::sync::{mpsc, watch};
use tower_http::services::{ServeDir, ServeFile};

use crate::server::{error_message, handle_line, refused_id, Session};
use crate::{ApiError, ApiOptions};

struct Shared {
    runtime: RuntimeHandle,
    options: ApiOptions,
    guard: Arc<Guard>,
    chat: Option<Arc<ChatDoor>>,
}

pub struct WebServer {
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    guard: Arc<Guard>,
}

impl WebServer {
    /// Serves the UI built into `ui_dir` (it must hold `index.html`) and its WebSocket;
    /// with `chat`, the assistant's chat panel works too.
    pub async fn bind(
        addr: SocketAddr,
        runtime: RuntimeHandle,
        options: ApiOptions,
        allowed_origins: Vec<String>,
        ui_dir: &Path,
        chat: Option<Arc<ChatDoor>>,
    ) -> Result<WebServer, ApiError> {
        let index = ui_dir.join("index.html");
        if !index.is_file() {
            return Err(ApiError::NoUi(ui_dir.to_path_buf()));
        }
        let (guard, listener) =
            Guard::listen(DoorKind::Web, addr, options.guard(allowed_origins)).await?;
        let local = listener
            .local_addr()
            .map_err(|source| GuardError::Bind { addr, source })?;
        let shared = Arc::new(Shared {
            runtime,
            options,
            guard: guard.clone(),
            chat,
        });
        let files = ServeDir::new(PathBuf::from(ui_dir)).fallback(ServeFile::new(index));
        let app = Router::new()
            .route("/ws", get(upgrade))
            .fallback_service(files)
            .layer(axum::middleware::map_response(script_policy))
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                checked,
            ))
            .with_state(shared);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!("web server stopped: {e}");
            }
        });
        Ok(WebServer { local, task, guard })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The door's secret, which the UI proves before anything else.
    pub fn secret(&self) -> &str {
        self.guard.secret().unwrap_or_default()
    }

    /// The address that opens the UI with its secret – what to print, and to open in the
    /// person's browser. The UI keeps the secret for the tab and drops it from the address.
    pub fn url(&self) -> String {
        format!("http://{}/?token={}", self.local, self.secret())
    }
}

/// The policy a script response carries. A browser ignores it for the page's own scripts
/// and applies it to a worker started from the script: the painter's worker, which runs a
/// project's code, may compile that code and load the app's own modules, and reach nothing
/// else – no connection, no font, no WebAssembly.
const WORKER_POLICY: &str = "default-src 'none'; script-src 'self' 'unsafe-eval'";

async fn script_policy(mut response: Response) -> Response {
    let javascript = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("javascript"));
    if javascript {
        response.headers_mut().insert(
            axum::http::header::CONTENT_SECURITY_POLICY,
            axum::http::HeaderValue::from_static(WORKER_POLICY),
        );
    }
    response
}

/// Every request, pages and `/ws` alike, goes through the door's guard first.
async fn checked(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    // Decided before anything awaits: a request's body is not `Sync`, so no borrow of it may
    // live across the await below.
    let verdict = {
        let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
        shared.guard.check_request(header("origin"), header("host"))
    };
    match verdict {
        Ok(()) => next.run(request).await,
        Err(refused) => (StatusCode::FORBIDDEN, refused.message()).into_response(),
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn upgrade(State(shared): State<Arc<Shared>>, ws: WebSocketUpgrade) -> Response {
    // The guard has checked `Origin` and `Host` already (the router's layer).
    let Some(slot) = shared.guard.admit() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many clients; try again later",
        )
            .into_response();
    };
    let max = shared.options.limits.max_message_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| async move {
            serve(socket, &shared).await;
            drop(slot);
        })
}

async fn serve(socket: WebSocket, shared: &Shared) {
    let limits = shared.options.limits;
    let (sink, mut source) = socket.split();
    let (out, json_rx) = mpsc::channel::<Value>(1024);
    // A few display frames in flight at most: a slow client skips ticks instead of queueing.
    let (frames_tx, frames_rx) = mpsc::channel::<Vec<u8>>(FRAMES_IN_FLIGHT);
    let writer = tokio::spawn(write_messages(sink, json_rx, frames_rx));
    let mut session = Session::new(
        shared.guard.clone(),
        shared.runtime.clone(),
        &shared.options,
        out.clone(),
    );
    let mut bucket = RateLimiter::new(&limits);
    // The display loop every shell runs: one subscriber for the whole connection, so new
    // options never replay the console.
    let (display_tx, display_rx) = watch::channel::<Option<DisplayOptions>>(None);
    let display = tokio::spawn(shared.runtime.scope().clone().stream(display_rx, frames_tx));
    // Chat events flow only once the client may see them (after `auth` on a LAN bind).
    let authenticated = Arc::new(AtomicBool::new(session.is_authenticated()));
    let chat_events = shared.chat.as_ref().map(|door| {
        tokio::spawn(chat_event_loop(
            door.clone(),
            authenticated.clone(),
            out.clone(),
        ))
    });
    // Chat requests are answered in order, one at a time, beside the command loop.
    let (chat_tx, chat_rx) = mpsc::channel::<(Value, Value)>(CHAT_QUEUE);
    let chat_worker = shared
        .chat
        .as_ref()
        .map(|door| tokio::spawn(chat_worker(door.clone(), chat_rx, out.clone())));
    while let Some(msg) = source.next().await {
        let reply = match msg {
            Ok(Message::Text(text)) if !bucket.take(&limits) => Some(error_message(
                refused_id(text.as_bytes(), limits.max_message_bytes),
                ErrorCode::BadRequest,
                "rate limit exceeded; slow down",
            )),
            Ok(Message::Text(text)) => {
                on_text(text.as_str(), shared, &mut session, &chat_tx, &display_tx).await
            }
            Ok(Message::Binary(_)) => Some(error_message(
                Value::Null,
                ErrorCode::BadRequest,
                "send JSON messages as text frames",
            )),
            Ok(Message::Close(_)) => break,
            Ok(_) => None,
            Err(e) => {
                let _ = out
                    .send(error_message(
                        Value::Null,
                        ErrorCode::BadRequest,
                        &format!("closing: {e}"),
                    ))
                    .await;
                break;
            }
        };
        authenticated.store(session.is_authenticated(), Ordering::SeqCst);
        if let Some(reply) = reply {
            if out.send(reply).await.is_err() {
                break;
            }
        }
        if session.hang_up() {
            break;
        }
    }
    display.abort();
    // A chat request can wait on the keyring or a provider: do not let it keep the
    // connection (and its client slot) alive.
    for task in [chat_events, chat_worker].into_iter().flatten() {
        task.abort();
    }
    drop(session);
    drop(out);
    let _ = writer.await;
}

/// Sends the connection's JSON replies and display frames, in the order each is ready,
/// until both senders are gone; then closes the socket.
async fn write_messages(
    mut sink: futures_util::stream::SplitSink<WebSocket, Message>,
    mut json_rx: mpsc::Receiver<Value>,
    mut frames_rx: mpsc::Receiver<Vec<u8>>,
) {
    loop {
        let msg = tokio::select! {
            Some(v) = json_rx.recv() => Message::Text(v.to_string().into()),
            Some(f) = frames_rx.recv() => Message::Binary(f.into()),
            else => break,
        };
        if sink.send(msg).await.is_err() {
            return;
        }
    }
    let _ = sink.close().await;
}

/// One text message from the page: held to the guard's size and nesting caps before any
/// parser sees it, then a chat request, a display request or an API message.
async fn on_text(
    text: &str,
    shared: &Shared,
    session: &mut Session,
    chat_tx: &mpsc::Sender<(Value, Value)>,
    display_tx: &watch::Sender<Option<DisplayOptions>>,
) -> Option<Value> {
    if let Err(refused) = shared.guard.check_message(text.as_bytes()) {
        return Some(error_message(
            Value::Null,
            ErrorCode::BadRequest,
            &refused.message(),
        ));
    }
    if let Some(request) = chat_request(text) {
        return queue_chat(
            request,
            shared.chat.is_some(),
            session.is_authenticated(),
            chat_tx,
        );
    }
    if let Some(request) = typed_request(text, "credentials") {
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        if !session.is_authenticated() {
            return Some(error_message(
                id,
                ErrorCode::NotAllowed,
                "authenticate first: {\"type\":\"auth\",\"token\":\"…\"}",
            ));
        }
        let answer =
            match serde_json::from_value(request.get("request").cloned().unwrap_or(Value::Null)) {
                Ok(request) => shared
                    .runtime
                    .credentials(request)
                    .await
                    .map(|status| serde_json::to_value(status).unwrap_or_default()),
                Err(e) => Err(sextant_commands::CommandError::invalid(
                    "request",
                    e.to_string(),
                )),
            };
        return Some(chat_reply(id, answer));
    }
    match display_request(text) {
        Some(request) if !session.is_authenticated() => Some(error_message(
            request.id,
            ErrorCode::NotAllowed,
            "authenticate first: {\"type\":\"auth\",\"token\":\"…\"}",
        )),
        Some(request) => Some(match request.options {
            Ok(options) => {
                let _ = display_tx.send(options);
                serde_json::json!({"type": "response", "id": request.id, "success": true,
                                   "result": {"display": display_tx.borrow().is_some()}})
            }
            Err(e) => error_message(request.id, ErrorCode::InvalidParams, &e),
        }),
        None => handle_line(session, text.as_bytes()).await,
    }
}

/// A `{"type":"chat",…}` message, parsed; `None` for anything else.
fn chat_request(text: &str) -> Option<Value> {
    typed_request(text, "chat")
}

/// A `{"type":KIND,…}` message, parsed; `None` for anything else. Only the web door – where
/// a person sits – answers `credentials`: the sources' passwords are set there, never
/// through the API or a model.
fn typed_request(text: &str, kind: &str) -> Option<Value> {
    // Cheap pre-check so ordinary commands are parsed once, by the API handler.
    if !text.contains(&format!("\"{kind}\"")) {
        return None;
    }
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(|v| v.get("type").and_then(Value::as_str) == Some(kind))
}

/// Hands a chat request to the connection's worker, or says why not.
fn queue_chat(
    request: Value,
    with_assistant: bool,
    authenticated: bool,
    worker: &mpsc::Sender<(Value, Value)>,
) -> Option<Value> {
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let refused = |message: &str| Some(error_message(id.clone(), ErrorCode::NotAllowed, message));
    if !authenticated {
        return refused("authenticate first: {\"type\":\"auth\",\"token\":\"…\"}");
    }
    if !with_assistant {
        return refused("this server runs without the assistant");
    }
    match worker.try_send((id.clone(), request)) {
        Ok(()) => None,
        Err(_) => Some(error_message(
            id,
            ErrorCode::BadRequest,
            "too many chat requests waiting; wait for the answers first",
        )),
    }
}

/// Chat requests a client may have queued before it gets an error.
const CHAT_QUEUE: usize = 32;
/// Model-list requests (a provider round trip each) one client may have running at once.
const MODEL_LISTS: usize = 2;

fn chat_reply(id: Value, answer: Result<Value, sextant_commands::CommandError>) -> Value {
    match answer {
        Ok(result) => {
            serde_json::json!({"type": "response", "id": id, "success": true, "result": result})
        }
        Err(e) => serde_json::json!({"type": "response", "id": id, "success": false, "error": e}),
    }
}

/// Answers one client's chat requests in the order sent: an `approveAll` sent before a
/// `send` is applied before it. Only `listModels` – a provider round trip that changes
/// nothing – runs beside the queue, so a slow provider never holds up an approval.
async fn chat_worker(
    door: Arc<ChatDoor>,
    mut requests: mpsc::Receiver<(Value, Value)>,
    out: mpsc::Sender<Value>,
) {
    // Dropped (and its tasks aborted) with the worker, when the client goes.
    let mut beside = tokio::task::JoinSet::new();
    while let Some((id, request)) = requests.recv().await {
        while beside.try_join_next().is_some() {}
        if request.get("op").and_then(Value::as_str) == Some("listModels") {
            if beside.len() >= MODEL_LISTS {
                let busy = error_message(
                    id,
                    ErrorCode::BadRequest,
                    "the model list is already being fetched; wait for it",
                );
                if out.send(busy).await.is_err() {
                    return;
                }
                continue;
            }
            let (door, out) = (door.clone(), out.clone());
            beside.spawn(async move {
                let _ = out.send(chat_reply(id, door.handle(request).await)).await;
            });
            continue;
        }
        let reply = chat_reply(id, door.handle(request).await);
        if out.send(reply).await.is_err() {
            return;
        }
    }
}

/// Forwards every chat's events to this client.
async fn chat_event_loop(
    door: Arc<ChatDoor>,
    authenticated: Arc<AtomicBool>,
    out: mpsc::Sender<Value>,
) {
    let mut events = door.service().subscribe();
    loop {
        match events.recv().await {
            Ok(event) => {
                if !authenticated.load(Ordering::SeqCst) {
                    continue;
                }
                let msg = serde_json::json!({"type": "chatEvent", "event": event});
                if out.send(msg).await.is_err() {
                    return;
                }
            }
            // Nothing is lost from the log, but the client missed events (maybe a prompt
            // or a turn's end): tell it to re-read what it shows.
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!("a UI client fell {n} chat events behind; asking it to resync");
                let resync = serde_json::json!({"type": "chatEvent",
                                                "event": {"chat": -1, "type": "resync"}});
                if out.send(resync).await.is_err() {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

struct DisplayRequest {
    id: Value,
    /// `None`: stop sending.
    options: Result<Option<DisplayOptions>, String>,
}

/// A `{"type":"display",…}` message, or `None` for anything else (handled as API).
fn display_request(text: &str) -> Option<DisplayRequest> {
    // Cheap pre-check so ordinary commands are parsed once, by the API handler.
    if !text.contains("\"display\"") {
        return None;
    }
    let Ok(Value::Object(mut msg)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    if msg.get("type").and_then(Value::as_str) != Some("display") {
        return None;
    }
    msg.remove("type");
    let id = msg.remove("id").unwrap_or(Value::Null);
    if msg.remove("stop").and_then(|v| v.as_bool()) == Some(true) {
        return Some(DisplayRequest {
            id,
            options: Ok(None),
        });
    }
    // The path names the bad field (`points: invalid type…`).
    let options = serde_path_to_error::deserialize::<_, DisplayOptions>(Value::Object(msg))
        .map_err(|e| format!("display options: {e}"))
        .and_then(|o| o.validate().map(|()| Some(o)));
    Some(DisplayRequest { id, options })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_messages_are_recognised_and_checked() {
        assert!(display_request(r#"{"type":"command","command":"io.status"}"#).is_none());
        let r =
            display_request(r#"{"type":"display","id":4,"refreshHz":30,"raw":{"2":64}}"#).unwrap();
        assert_eq!(r.id, 4);
        let o = r.options.unwrap().unwrap();
        assert_eq!((o.refresh_hz, o.raw.get(&2)), (30.0, Some(&64)));
        // An older UI's spelling of the display rate still works.
        let r = display_request(r#"{"type":"display","id":5,"rateHz":30,"raw":{"2":64}}"#).unwrap();
        assert_eq!(r.options.unwrap().unwrap(), o);
        let r = display_request(r#"{"type":"display","stop":true}"#).unwrap();
        assert_eq!(r.options, Ok(None));
        let r = display_request(r#"{"type":"display","refreshHz":1000}"#).unwrap();
        assert!(r.options.unwrap_err().contains("refreshHz"));
        let r = display_request(r#"{"type":"display","points":"many"}"#).unwrap();
        assert!(r.options.unwrap_err().contains("points"));
    }
}
