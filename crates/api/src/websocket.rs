//! The API over WebSocket: the same messages and rules as the TCP door, one JSON message
//! per text frame, for the browser UI of `sextant serve`.
//!
//! Browsers let any web page open a WebSocket to 127.0.0.1, so the handshake is refused
//! unless the page's `Origin` is one the user allowed (`--allow-origin`, compared whole:
//! scheme, host and port) – this server serves no page of its own, and a page on another
//! localhost port is another program's. Non-browser clients send no `Origin` and are let
//! through (they are programs the user runs).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use sextant_commands::door::{AuthThrottle, RateLimiter};
use sextant_commands::ErrorCode;
use sextant_runtime::RuntimeHandle;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::server::{error_message, handle_line, Door, Session};
use crate::{ApiError, ApiOptions};

/// Whether a browser page from `origin` may connect: one the user allowed, or – when this
/// server serves pages itself, on `own_port` – a page it served: `http`, a loopback host
/// and exactly that port. Scheme, host and port all count: a page on another localhost
/// port belongs to another program (a dev server, a tool, anything a link can open).
pub(crate) fn origin_allowed(origin: &str, own_port: Option<u16>, extra: &[String]) -> bool {
    if extra.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
        return true;
    }
    let (Some(own), Some((scheme, host, port))) = (own_port, split_origin(origin)) else {
        return false;
    };
    scheme == "http" && matches!(host, "localhost" | "127.0.0.1" | "[::1]") && port == own
}

/// `scheme://host[:port]` → (scheme, host, port with the scheme's default); `None` for
/// anything else (`null`, a path, user info, a bad port).
pub(crate) fn split_origin(origin: &str) -> Option<(&str, &str, u16)> {
    let (scheme, rest) = origin.split_once("://")?;
    let default = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    if rest.contains(['/', '@', '?', '#']) {
        return None;
    }
    let (host, port) = if rest.starts_with('[') {
        let end = rest.find(']')?;
        (&rest[..=end], &rest[end + 1..])
    } else {
        match rest.rsplit_once(':') {
            Some((h, _)) => (h, &rest[h.len()..]),
            None => (rest, ""),
        }
    };
    let port = match port {
        "" => default,
        p => p.strip_prefix(':')?.parse().ok()?,
    };
    (!host.is_empty()).then_some((scheme, host, port))
}

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
        let origins = Arc::new(allowed_origins);
        let clients = Arc::new(AtomicUsize::new(0));
        let throttle = Arc::new(AuthThrottle::default());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                if clients.load(Ordering::SeqCst) >= options.limits.max_clients {
                    continue; // dropped: the client sees the connection close
                }
                clients.fetch_add(1, Ordering::SeqCst);
                let (runtime, options, origins, clients, throttle) = (
                    runtime.clone(),
                    options.clone(),
                    origins.clone(),
                    clients.clone(),
                    throttle.clone(),
                );
                tokio::spawn(async move {
                    serve(stream, runtime, &options, &origins, throttle).await;
                    clients.fetch_sub(1, Ordering::SeqCst);
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

async fn serve(
    stream: TcpStream,
    runtime: RuntimeHandle,
    options: &ApiOptions,
    origins: &[String],
    throttle: Arc<AuthThrottle>,
) {
    let limits = options.limits;
    // The callback's signature is tungstenite's; its error type is an HTTP response.
    #[allow(clippy::result_large_err)]
    let check = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        match req.headers().get("origin").and_then(|o| o.to_str().ok()) {
            // No page is served here: only the origins the user listed.
            Some(origin) if !origin_allowed(origin, None, origins) => {
                let mut refused =
                    ErrorResponse::new(Some(format!("origin {origin} may not use this API")));
                *refused.status_mut() = StatusCode::FORBIDDEN;
                Err(refused)
            }
            _ => Ok(resp),
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
    let mut session = Session::new(Door::Api, runtime, options, throttle, out.clone());
    let mut bucket = RateLimiter::new(&limits);
    while let Some(msg) = source.next().await {
        let reply = match msg {
            Ok(Message::Text(text)) => {
                if !bucket.take(&limits) {
                    Some(error_message(
                        Value::Null,
                        ErrorCode::BadRequest,
                        "rate limit exceeded; slow down",
                    ))
                } else {
                    handle_line(&mut session, text.as_bytes(), &limits).await
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

#[cfg(test)]
mod tests {
    use super::{origin_allowed, split_origin};

    #[test]
    fn pages_this_server_served_and_listed_origins_only() {
        let own = Some(7777);
        for ok in [
            "http://localhost:7777",
            "http://127.0.0.1:7777",
            "http://[::1]:7777",
        ] {
            assert!(origin_allowed(ok, own, &[]), "{ok}");
        }
        for bad in [
            "http://localhost:5173",
            "http://127.0.0.1:7778",
            "http://localhost",
            "https://localhost:7777",
            "https://evil.example",
            "http://localhost.evil.example:7777",
            "http://127.0.0.1.nip.io:7777",
            "http://user@localhost:7777",
            "null",
            "",
        ] {
            assert!(!origin_allowed(bad, own, &[]), "{bad}");
        }
        assert!(
            !origin_allowed("http://localhost:7777", None, &[]),
            "no page of its own"
        );
        let listed = ["http://192.168.1.5:7778".to_string()];
        assert!(origin_allowed("http://192.168.1.5:7778", None, &listed));
        assert!(!origin_allowed("http://192.168.1.5:7779", None, &listed));
    }

    #[test]
    fn origins_split_into_scheme_host_and_port() {
        let cases = [
            ("http://localhost", Some(("http", "localhost", 80))),
            ("https://example.com", Some(("https", "example.com", 443))),
            ("http://[::1]:8080", Some(("http", "[::1]", 8080))),
            ("http://127.0.0.1:99999", None),
            ("http://127.0.0.1:", None),
            ("ftp://x", None),
            ("http://a/b", None),
        ];
        for (origin, want) in cases {
            assert_eq!(split_origin(origin), want, "{origin}");
        }
    }
}
