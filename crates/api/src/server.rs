//! Connection handling: framing lines, limits, authentication, dispatch, push.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use sextant_commands::{CommandError, ErrorCode, Policy};
use sextant_runtime::{Caller, RuntimeHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

pub use sextant_commands::door::Limits;
use sextant_commands::door::{
    json_depth, looks_like_http, token_matches, AuthThrottle, RateLimiter, MAX_WRONG_TOKENS,
};

#[derive(Debug, Clone, Default)]
pub struct ApiOptions {
    /// Required for any bind address other than loopback.
    pub token: Option<String>,
    /// The user's one-time consent for API clients to run DeviceGated commands.
    pub allow_device_control: bool,
    /// The user's one-time consent for API clients to add, change and start process
    /// sources (programs); without it a program runs only after a person's yes in the app.
    pub allow_process_sources: bool,
    pub limits: Limits,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(
        "refusing to listen on {0} without a token: any other machine could control your devices; \
         set a token, or bind 127.0.0.1"
    )]
    TokenRequired(SocketAddr),
    #[error(
        "no built UI in {0} (index.html is missing): build it with `npm run build` in ui/, or pass --ui DIR"
    )]
    NoUi(std::path::PathBuf),
    #[error("could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

pub struct ApiServer {
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    http_refused: Arc<AtomicU64>,
}

impl ApiServer {
    /// Starts listening. Port 0 picks a free port ([`ApiServer::local_addr`] tells which).
    pub async fn bind(
        addr: SocketAddr,
        runtime: RuntimeHandle,
        options: ApiOptions,
    ) -> Result<ApiServer, ApiError> {
        if !addr.ip().is_loopback() && options.token.as_deref().is_none_or(str::is_empty) {
            return Err(ApiError::TokenRequired(addr));
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ApiError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| ApiError::Bind { addr, source })?;
        let options = Arc::new(options);
        let clients = Arc::new(AtomicUsize::new(0));
        let http_refused = Arc::new(AtomicU64::new(0));
        let throttle = Arc::new(AuthThrottle::default());
        let refused = http_refused.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                if clients.load(Ordering::SeqCst) >= options.limits.max_clients {
                    let mut stream = stream;
                    let msg = error_message(
                        Value::Null,
                        ErrorCode::BadRequest,
                        "too many clients; try again later",
                    );
                    let _ = stream.write_all(format!("{msg}\n").as_bytes()).await;
                    continue;
                }
                clients.fetch_add(1, Ordering::SeqCst);
                let (runtime, options, clients, throttle, refused) = (
                    runtime.clone(),
                    options.clone(),
                    clients.clone(),
                    throttle.clone(),
                    refused.clone(),
                );
                tokio::spawn(async move {
                    tracing::debug!(%peer, "API client connected");
                    if serve(stream, runtime, &options, throttle).await == Ending::Http {
                        refused.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            %peer,
                            "closed an API connection that sent an HTTP request (a web page \
                             trying to reach this port?)"
                        );
                    }
                    clients.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Ok(ApiServer {
            local,
            task,
            http_refused,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Connections closed because they sent an HTTP request instead of JSON lines.
    pub fn refused_http_requests(&self) -> u64 {
        self.http_refused.load(Ordering::Relaxed)
    }
}

/// Why a TCP API connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The client closed it, or the door hung up on it for wrong tokens.
    Closed,
    /// It spoke HTTP: closed before anything it sent ran.
    Http,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) fn error_message(id: Value, code: ErrorCode, message: &str) -> Value {
    json!({"type": "response", "id": id, "success": false,
           "error": {"code": code, "message": message}})
}

fn response(id: Value, result: Result<Value, CommandError>) -> Value {
    match result {
        Ok(r) => json!({"type": "response", "id": id, "success": true, "result": r}),
        Err(e) => {
            let mut error = json!({"code": e.code, "message": e.message});
            if let Some(p) = e.path {
                error["path"] = Value::String(p);
            }
            json!({"type": "response", "id": id, "success": false, "error": error})
        }
    }
}

/// Which door a session came through: API clients (scripts) or the Sextant UI (a person).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Door {
    Api,
    Ui,
}

pub(crate) struct Session {
    door: Door,
    runtime: RuntimeHandle,
    policy: Policy,
    authenticated: bool,
    token: Option<String>,
    throttle: Arc<AuthThrottle>,
    wrong_tokens: u32,
    out: mpsc::Sender<Value>,
    push: Option<tokio::task::JoinHandle<()>>,
    max_batch: usize,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(p) = self.push.take() {
            p.abort();
        }
    }
}

impl Session {
    pub(crate) fn is_authenticated(&self) -> bool {
        self.authenticated
    }

    /// The door should hang up: too many wrong tokens in a row.
    pub(crate) fn hang_up(&self) -> bool {
        self.wrong_tokens >= MAX_WRONG_TOKENS
    }

    /// A client's session: API callers have edits approved (a script is its author's
    /// approval) and device control only with the user's consent.
    ///
    /// The UI door is a person at the controls: their click is the approval for edits and
    /// device control, and destructive commands run only when the UI says the person
    /// confirmed (`"approved": true` after its dialog).
    pub(crate) fn new(
        door: Door,
        runtime: RuntimeHandle,
        options: &ApiOptions,
        throttle: Arc<AuthThrottle>,
        out: mpsc::Sender<Value>,
    ) -> Session {
        let policy = match door {
            Door::Api => Policy {
                auto_approve_edits: true,
                allow_device_control: options.allow_device_control,
                non_interactive: true,
                allow_process_sources: options.allow_process_sources,
                paths_from_person: false,
            },
            Door::Ui => sextant_runtime::UI_POLICY,
        };
        Session {
            door,
            runtime,
            policy,
            authenticated: options.token.is_none(),
            token: options.token.clone(),
            throttle,
            wrong_tokens: 0,
            out,
            push: None,
            max_batch: options.limits.max_batch,
        }
    }
}

async fn serve(
    stream: TcpStream,
    runtime: RuntimeHandle,
    options: &ApiOptions,
    throttle: Arc<AuthThrottle>,
) -> Ending {
    let limits = options.limits;
    let (mut reader, mut writer) = stream.into_split();
    let (out, mut rx) = mpsc::channel::<Value>(1024);
    let writer_task = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let mut line = msg.to_string();
            line.push('\n');
            if writer.write_all(line.as_bytes()).await.is_err() {
                return;
            }
        }
    });
    let mut session = Session::new(Door::Api, runtime, options, throttle, out.clone());
    let mut bucket = RateLimiter::new(&limits);
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut discarding = false;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut ending = Ending::Closed;
    let oversize = || {
        let msg = format!(
            "message exceeds {} bytes and was discarded",
            limits.max_message_bytes
        );
        error_message(Value::Null, ErrorCode::BadRequest, &msg)
    };
    'read: loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut data = &chunk[..n];
        while !data.is_empty() {
            match data.iter().position(|&b| b == b'\n') {
                Some(nl) => {
                    let (line_end, rest) = (&data[..nl], &data[nl + 1..]);
                    data = rest;
                    if discarding {
                        discarding = false;
                        buf.clear();
                        continue;
                    }
                    // The limit is on the message itself, newline excluded, however the
                    // bytes arrived.
                    if buf.len() + line_end.len() > limits.max_message_bytes {
                        buf.clear();
                        let _ = out.send(oversize()).await;
                        continue;
                    }
                    buf.extend_from_slice(line_end);
                    let line = std::mem::take(&mut buf);
                    if looks_like_http(&line) {
                        ending = Ending::Http;
                        break 'read;
                    }
                    if !bucket.take(&limits) {
                        let _ = out
                            .send(error_message(
                                Value::Null,
                                ErrorCode::BadRequest,
                                "rate limit exceeded; slow down",
                            ))
                            .await;
                        continue;
                    }
                    if let Some(reply) = handle_line(&mut session, &line, &limits).await {
                        if out.send(reply).await.is_err() {
                            break 'read;
                        }
                    }
                    if session.hang_up() {
                        break 'read;
                    }
                }
                None => {
                    if !discarding {
                        buf.extend_from_slice(data);
                        // A request line is known before its line ends: hang up at once.
                        if looks_like_http(&buf) {
                            ending = Ending::Http;
                            break 'read;
                        }
                        if buf.len() > limits.max_message_bytes {
                            // Tell the client now; drop the rest of this line as it arrives.
                            discarding = true;
                            buf.clear();
                            let _ = out.send(oversize()).await;
                        }
                    }
                    data = &[];
                }
            }
        }
    }
    drop(session);
    drop(out);
    if ending == Ending::Http {
        // Nothing it sent ran; it gets no answer either.
        writer_task.abort();
    } else {
        let _ = writer_task.await;
    }
    ending
}

pub(crate) async fn handle_line(s: &mut Session, line: &[u8], limits: &Limits) -> Option<Value> {
    let text = line.strip_suffix(b"\r").unwrap_or(line);
    if text.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    if json_depth(text) > limits.max_depth {
        let msg = format!("JSON nested deeper than {} levels", limits.max_depth);
        return Some(error_message(Value::Null, ErrorCode::BadRequest, &msg));
    }
    let msg: Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => {
            return Some(error_message(
                Value::Null,
                ErrorCode::BadRequest,
                &format!("invalid JSON: {e}"),
            ))
        }
    };
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let kind = msg.get("type").and_then(Value::as_str).unwrap_or("command");
    if kind == "auth" {
        let given = msg.get("token").and_then(Value::as_str).unwrap_or("");
        let ok = s
            .token
            .as_deref()
            .is_none_or(|expected| token_matches(given, expected));
        s.authenticated |= ok;
        if ok {
            s.wrong_tokens = 0;
            s.throttle.succeeded();
            return Some(
                json!({"type": "response", "id": id, "success": true, "result": {"authenticated": true}}),
            );
        }
        // Guessing gets slower with every wrong token, on every connection of this door.
        tokio::time::sleep(s.throttle.failed()).await;
        s.wrong_tokens += 1;
        let message = if s.hang_up() {
            format!("wrong token; closing after {MAX_WRONG_TOKENS} wrong tokens")
        } else {
            "wrong token".to_string()
        };
        return Some(error_message(id, ErrorCode::NotAllowed, &message));
    }
    if !s.authenticated {
        return Some(error_message(
            id,
            ErrorCode::NotAllowed,
            "authenticate first: {\"type\":\"auth\",\"token\":\"…\"}",
        ));
    }
    match kind {
        "command" => Some(command(s, &msg, id).await),
        "batch" => {
            let Some(cmds) = msg.get("commands").and_then(Value::as_array) else {
                return Some(error_message(
                    id,
                    ErrorCode::BadRequest,
                    "a batch needs a `commands` array",
                ));
            };
            if cmds.len() > s.max_batch {
                let m = format!("a batch may hold at most {} commands", s.max_batch);
                return Some(error_message(id, ErrorCode::BadRequest, &m));
            }
            let mut results = Vec::with_capacity(cmds.len());
            for c in cmds {
                let cid = c.get("id").cloned().unwrap_or(Value::Null);
                results.push(command(s, c, cid).await);
            }
            Some(json!({"type": "batch", "id": id, "results": results}))
        }
        other => Some(error_message(
            id,
            ErrorCode::BadRequest,
            &format!("unknown message type `{other}`"),
        )),
    }
}

async fn command(s: &mut Session, msg: &Value, id: Value) -> Value {
    let Some(name) = msg.get("command").and_then(Value::as_str) else {
        return error_message(
            id,
            ErrorCode::BadRequest,
            "a command message needs a `command` name",
        );
    };
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    match name {
        "api.getCommands" => {
            let list: Vec<Value> = s
                .runtime
                .specs()
                .iter()
                .map(|c| json!({"name": c.name, "tier": c.tier, "description": c.description, "dryRun": c.dry_run}))
                .collect();
            response(id, Ok(Value::Array(list)))
        }
        "api.subscribe" => response(id, subscribe(s, &params)),
        _ if s.door == Door::Ui => {
            let confirmed = msg.get("approved").and_then(Value::as_bool) == Some(true);
            response(id, s.runtime.call_from_ui(name, params, confirmed).await)
        }
        _ => response(
            id,
            s.runtime.call(Caller::Api, name, params, s.policy).await,
        ),
    }
}

fn subscribe(s: &mut Session, params: &Value) -> Result<Value, CommandError> {
    let frames = params
        .get("frames")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let events = params
        .get("events")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let rate = params.get("rateHz").and_then(Value::as_f64).unwrap_or(10.0);
    if !(1.0..=60.0).contains(&rate) {
        return Err(CommandError::invalid(
            "rateHz",
            "rateHz must be between 1 and 60",
        ));
    }
    if let Some(p) = s.push.take() {
        p.abort();
    }
    let runtime = s.runtime.clone();
    let out = s.out.clone();
    let mut event_rx = runtime.subscribe();
    s.push = Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
        let mut last_elapsed = f64::NAN;
        loop {
            tokio::select! {
                _ = tick.tick(), if frames => {
                    let policy = Policy::default();
                    if let Ok(frame) = runtime.call(Caller::Api, "dashboard.latestFrame", Value::Null, policy).await {
                        let elapsed = frame["elapsedS"].as_f64().unwrap_or(0.0);
                        // Only new frames are pushed.
                        if elapsed != last_elapsed && frame["values"].as_object().is_some_and(|v| !v.is_empty()) {
                            last_elapsed = elapsed;
                            if out.send(json!({"type": "frame", "elapsedS": elapsed, "values": frame["values"]})).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                e = event_rx.recv(), if events => match e {
                    Ok(e) => {
                        if out.send(json!({"type": "event", "event": e})).await.is_err() {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => return,
                },
            }
        }
    }));
    Ok(json!({"frames": frames, "events": events, "rateHz": rate}))
}
