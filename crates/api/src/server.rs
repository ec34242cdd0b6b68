//! Connection handling: framing lines, limits, authentication, dispatch, push.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use sextant_commands::{CommandError, ErrorCode, Policy};
use sextant_runtime::{Caller, RuntimeHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

pub use sextant_guard::Limits;
use sextant_guard::{
    DoorKind, Guard, GuardError, GuardOptions, RateLimiter, Refusal, MAX_WRONG_TOKENS,
};

#[derive(Debug, Clone, Default)]
pub struct ApiOptions {
    /// Required for any bind address other than loopback; the web door makes one per
    /// launch when none is given.
    pub token: Option<String>,
    /// The user's one-time consent for API clients to run DeviceGated commands.
    pub allow_device_control: bool,
    /// The user's one-time consent for API clients to add, change and start process
    /// sources (programs); without it a program runs only after a person's yes in the app.
    pub allow_process_sources: bool,
    pub limits: Limits,
}

impl ApiOptions {
    /// What the door's guard is set up with.
    pub(crate) fn guard(&self, allowed_origins: Vec<String>) -> GuardOptions {
        GuardOptions {
            limits: self.limits,
            token: self.token.clone(),
            allowed_origins,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Guard(#[from] GuardError),
    #[error(
        "no built UI in {0} (index.html is missing): build it with `npm run build` in ui/, or pass --ui DIR"
    )]
    NoUi(std::path::PathBuf),
}

pub struct ApiServer {
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    guard: Arc<Guard>,
}

impl ApiServer {
    /// Starts listening. Port 0 picks a free port ([`ApiServer::local_addr`] tells which).
    pub async fn bind(
        addr: SocketAddr,
        runtime: RuntimeHandle,
        options: ApiOptions,
    ) -> Result<ApiServer, ApiError> {
        let (guard, listener) =
            Guard::listen(DoorKind::TcpApi, addr, options.guard(Vec::new())).await?;
        let local = listener
            .local_addr()
            .map_err(|source| GuardError::Bind { addr, source })?;
        let options = Arc::new(options);
        let door = guard.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let Some(slot) = door.admit() else {
                    let mut stream = stream;
                    let msg = error_message(
                        Value::Null,
                        ErrorCode::BadRequest,
                        "too many clients; try again later",
                    );
                    let _ = stream.write_all(format!("{msg}\n").as_bytes()).await;
                    continue;
                };
                let (runtime, options, door) = (runtime.clone(), options.clone(), door.clone());
                tokio::spawn(async move {
                    tracing::debug!(%peer, "API client connected");
                    serve(stream, runtime, &options, door).await;
                    drop(slot);
                });
            }
        });
        Ok(ApiServer { local, task, guard })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Connections closed because they sent an HTTP request instead of JSON lines.
    pub fn refused_http_requests(&self) -> u64 {
        self.guard.refused_http_requests()
    }
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

/// The `id` of a message refused before it was handled (over the rate limit), so the
/// client waiting on that id hears the refusal instead of waiting for ever; `null` when
/// the message is bigger than a message may be, is not JSON, or has no number or string
/// id. One pass over bytes the guard already bounded, building nothing but the id.
pub(crate) fn refused_id(message: &[u8], max_message_bytes: usize) -> Value {
    #[derive(serde::Deserialize)]
    struct IdOnly {
        #[serde(default)]
        id: Value,
    }
    if message.len() > max_message_bytes {
        return Value::Null;
    }
    serde_json::from_slice::<IdOnly>(message)
        .ok()
        .map(|m| m.id)
        .filter(|id| id.is_number() || id.is_string())
        .unwrap_or(Value::Null)
}

fn response(id: Value, result: Result<Value, CommandError>) -> Value {
    match result {
        Ok(r) => json!({"type": "response", "id": id, "success": true, "result": r}),
        // The whole error: its code, message, path and, for a question, its data.
        Err(e) => json!({"type": "response", "id": id, "success": false, "error": e}),
    }
}

/// A client's session on the TCP API, the WebSocket API or the web door's `/ws`: which
/// door it came through (its [`Guard`]) decides what its messages may do.
pub(crate) struct Session {
    guard: Arc<Guard>,
    runtime: RuntimeHandle,
    policy: Policy,
    authenticated: bool,
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

    /// A client's session. API callers (programs) have edits approved – a script is its
    /// author's approval – and device control, programs and folders only as the person who
    /// started the server allowed with flags; a yes in their messages counts for nothing.
    ///
    /// The web door carries a person: once the connection proved the door's secret, a
    /// click is the approval for edits and device control, and a destructive or guarded
    /// command runs when the UI says the person confirmed (`"approved": true` after its
    /// dialog).
    pub(crate) fn new(
        guard: Arc<Guard>,
        runtime: RuntimeHandle,
        options: &ApiOptions,
        out: mpsc::Sender<Value>,
    ) -> Session {
        let policy = if guard.carries_person() {
            sextant_runtime::UI_POLICY
        } else {
            Policy {
                auto_approve_edits: true,
                allow_device_control: options.allow_device_control,
                non_interactive: true,
                allow_process_sources: options.allow_process_sources,
                paths_from_person: false,
            }
        };
        Session {
            authenticated: !guard.needs_auth(),
            guard,
            runtime,
            policy,
            wrong_tokens: 0,
            out,
            push: None,
            max_batch: options.limits.max_batch,
        }
    }
}

async fn serve(stream: TcpStream, runtime: RuntimeHandle, options: &ApiOptions, guard: Arc<Guard>) {
    let limits = options.limits;
    let (mut reader, writer) = stream.into_split();
    let (out, rx) = mpsc::channel::<Value>(1024);
    let writer_task = tokio::spawn(write_lines(writer, rx));
    let mut session = Session::new(guard.clone(), runtime, options, out.clone());
    let mut bucket = RateLimiter::new(&limits);
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut discarding = false;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut http = false;
    let oversize = || {
        let msg = Refusal::TooBig(limits.max_message_bytes).message();
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
                    let reply = match guard.check_line(&line) {
                        Err(Refusal::Http) => {
                            http = true;
                            break 'read;
                        }
                        Err(refused) => Some(error_message(
                            Value::Null,
                            ErrorCode::BadRequest,
                            &refused.message(),
                        )),
                        Ok(()) if !bucket.take(&limits) => Some(error_message(
                            refused_id(&line, limits.max_message_bytes),
                            ErrorCode::BadRequest,
                            "rate limit exceeded; slow down",
                        )),
                        Ok(()) => handle_line(&mut session, &line).await,
                    };
                    if let Some(reply) = reply {
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
                        if guard.check_not_http(&buf).is_err() {
                            http = true;
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
    if http {
        // Nothing it sent ran; it gets no answer either.
        writer_task.abort();
    } else {
        let _ = writer_task.await;
    }
}

/// Writes each reply as one line, in order, until the session's sender is gone.
async fn write_lines(mut writer: tokio::net::tcp::OwnedWriteHalf, mut rx: mpsc::Receiver<Value>) {
    while let Some(msg) = rx.recv().await {
        let mut line = msg.to_string();
        line.push('\n');
        if writer.write_all(line.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Answers one message that the door's guard already let through (size, nesting).
pub(crate) async fn handle_line(s: &mut Session, line: &[u8]) -> Option<Value> {
    let text = line.strip_suffix(b"\r").unwrap_or(line);
    if text.iter().all(u8::is_ascii_whitespace) {
        return None;
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
        // Guessing gets slower with every wrong token, on every connection of this door.
        let ok = s.guard.authenticate(given).await;
        s.authenticated |= ok;
        if ok {
            s.wrong_tokens = 0;
            return Some(
                json!({"type": "response", "id": id, "success": true, "result": {"authenticated": true}}),
            );
        }
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
        // A yes in a message counts only on a door that carries a person, from a
        // connection that proved its secret (every command here is past `auth`).
        _ if s.guard.carries_person() => {
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
