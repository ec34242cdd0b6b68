//! The API over WebSocket: the same messages and rules as the TCP door, one JSON message
//! per text frame, for pages of other programs the user listed (`--allow-origin`).
//!
//! Browsers let any web page open a WebSocket to 127.0.0.1, so the door's guard refuses
//! the handshake unless the page's `Origin` is one the user listed (this server serves no
//! page of its own) and, on loopback, the `Host` names this machine and port. Programs send
//! no `Origin`; they are API clients like those of the TCP door, with its rules.

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use sextant_commands::ErrorCode;
use sextant_guard::{DoorKind, Guard, GuardError, RateLimiter};
use sextant_runtime::RuntimeHandle;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::server::{error_message, handle_line, refused_id, Session};
use crate::{ApiError, ApiOptions};

pub struct WsServer {
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl WsServer {
    /// Listens for WebSocket clients. `allowed_origins` adds browser origins beyond this
    /// machine's own (e.g. the UI served on a LAN address with a token).
    pub async fn bind(
        addr: SocketAddr,
        runtime: RuntimeHandle,
        options: ApiOptions,
        allowed_origins: Vec<String>,
    ) -> Result<WsServer, ApiError> {
        let (guard, listener) =
            Guard::listen(DoorKind::WebSocketApi, addr, options.guard(allowed_origins)).await?;
        let local = listener
            .local_addr()
            .map_err(|source| GuardError::Bind { addr, source })?;
        let options = Arc::new(options);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                // A full door drops the connection: the client sees it close.
                let Some(slot) = guard.admit() else { continue };
                let (runtime, options, guard) = (runtime.clone(), options.clone(), guard.clone());
                tokio::spawn(async move {
                    serve(stream, runtime, &options, guard).await;
                    drop(slot);
                });
            }
        });
        Ok(WsServer { local, task })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for WsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(stream: TcpStream, runtime: RuntimeHandle, options: &ApiOptions, guard: Arc<Guard>) {
    let limits = options.limits;
    // The callback's signature is tungstenite's; its error type is an HTTP response.
    #[allow(clippy::result_large_err)]
    let check = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
        match guard.check_request(header("origin"), header("host")) {
            Ok(()) => Ok(resp),
            Err(refused) => {
                let mut answer = ErrorResponse::new(Some(refused.message()));
                *answer.status_mut() = StatusCode::FORBIDDEN;
                Err(answer)
            }
        }
    };
    let config = WebSocketConfig::default()
        .max_message_size(Some(limits.max_message_bytes))
        .max_frame_size(Some(limits.max_message_bytes));
    let Ok(ws) = tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(config)).await
    else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let (out, mut rx) = mpsc::channel::<Value>(1024);
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            if sink.send(Message::text(msg.to_string())).await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });
    let mut session = Session::new(guard.clone(), runtime, options, out.clone());
    let mut bucket = RateLimiter::new(&limits);
    while let Some(msg) = source.next().await {
        let reply = match msg {
            Ok(Message::Text(text)) => {
                if !bucket.take(&limits) {
                    Some(error_message(
                        refused_id(text.as_bytes(), limits.max_message_bytes),
                        ErrorCode::BadRequest,
                        "rate limit exceeded; slow down",
                    ))
                } else {
                    match guard.check_message(text.as_bytes()) {
                        Ok(()) => handle_line(&mut session, text.as_bytes()).await,
                        Err(refused) => Some(error_message(
                            Value::Null,
                            ErrorCode::BadRequest,
                            &refused.message(),
                        )),
                    }
                }
            }
            Ok(Message::Binary(_)) => Some(error_message(
                Value::Null,
                ErrorCode::BadRequest,
                "send JSON messages as text frames",
            )),
            Ok(Message::Close(_)) => break,
            Ok(_) => None, // ping/pong are answered by the library
            Err(e) => {
                // An oversize message breaks the WebSocket framing: say why, then close.
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
        if let Some(reply) = reply {
            if out.send(reply).await.is_err() {
                break;
            }
        }
        if session.hang_up() {
            break;
        }
    }
    drop(session);
    drop(out);
    let _ = writer.await;
}
