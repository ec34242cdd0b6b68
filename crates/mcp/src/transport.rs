//! The byte-stream transport: newline-delimited JSON-RPC 2.0 through the door's guard.
//!
//! A line that looks like HTTP (a web page's `fetch` to the MCP port, with JSON-RPC hidden
//! in its body) ends the session before anything it carried runs; the guard counts it.
//!
//! rmcp's own stream transport silently skips lines that are not JSON. Like the API door,
//! this one answers every bad line instead, so a client never waits on a reply that will
//! not come: a line over the size limit, nested too deep (counted before parsing), not
//! JSON, a batch, over the rate, or not a JSON-RPC message gets a JSON-RPC error (with the
//! request's id when it can be read, `null` otherwise) and the session carries on.
//! Replies go through one writer task, so concurrent responses never interleave within a
//! line.

use std::collections::VecDeque;
use std::future::Future;

use rmcp::model::{
    CallToolRequestParams, ClientRequest, CustomRequest, ErrorCode, InitializeRequestParams,
    JsonRpcMessage, ReadResourceRequestParams,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::Limits;
use sextant_guard::{Guard, RateLimiter as Bucket, Refusal};
use std::sync::Arc;

/// JSON-RPC's implementation-defined server error range starts here.
const RATE_LIMITED: ErrorCode = ErrorCode(-32000);

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("the MCP client is gone (its input stream closed)")]
    Closed,
    #[error("a reply could not be serialized: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// A transport over `read`/`write`, and the task writing to `write` (it ends once the
/// transport and every reply in flight are gone).
pub(crate) fn guarded<R, W>(
    read: R,
    write: W,
    guard: Arc<Guard>,
) -> (GuardedTransport<R>, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, rx) = mpsc::channel(256);
    let writer = tokio::spawn(write_lines(write, rx));
    let limits = guard.limits();
    let transport = GuardedTransport {
        read: BufReader::new(read),
        line: Vec::new(),
        discarding: false,
        guard,
        limits,
        bucket: Bucket::new(&limits),
        out,
        pending: VecDeque::new(),
        seen_request: false,
    };
    (transport, writer)
}

async fn write_lines<W: AsyncWrite + Unpin>(mut write: W, mut rx: mpsc::Receiver<String>) {
    while let Some(line) = rx.recv().await {
        // Flushed per message: the client is waiting for this very reply.
        if write.write_all(line.as_bytes()).await.is_err() || write.flush().await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}

pub(crate) struct GuardedTransport<R> {
    read: BufReader<R>,
    /// The line being read; kept here because `receive` may be cancelled mid-line.
    line: Vec<u8>,
    /// Skipping the rest of an oversized line.
    discarding: bool,
    guard: Arc<Guard>,
    limits: Limits,
    bucket: Bucket,
    out: mpsc::Sender<String>,
    /// Error replies not yet handed to the writer.
    pending: VecDeque<String>,
    /// rmcp ends a session whose first message is not a request, so stray notifications
    /// before it are dropped here.
    seen_request: bool,
}

enum Line {
    Complete(Vec<u8>),
    Oversized,
    Eof,
    /// HTTP: the session ends, unanswered.
    Http,
}

impl<R: AsyncRead + Unpin> GuardedTransport<R> {
    /// The next line without its newline, never buffering more than the message limit.
    /// Cancel-safe: `fill_buf` consumes nothing when dropped, and the rest is synchronous.
    async fn next_line(&mut self) -> Line {
        let max = self.limits.max_message_bytes;
        loop {
            let buf = match self.read.fill_buf().await {
                Ok([]) => return Line::Eof,
                Ok(buf) => buf,
                Err(e) => {
                    tracing::debug!("MCP input failed: {e}");
                    return Line::Eof;
                }
            };
            match buf.iter().position(|&b| b == b'\n') {
                Some(nl) => {
                    let outcome = if self.discarding {
                        self.discarding = false;
                        None
                    } else if self.line.len() + nl > max {
                        self.line.clear();
                        Some(Line::Oversized)
                    } else {
                        self.line.extend_from_slice(&buf[..nl]);
                        Some(Line::Complete(std::mem::take(&mut self.line)))
                    };
                    self.read.consume(nl + 1);
                    if let Some(line) = outcome {
                        return line;
                    }
                }
                None => {
                    let n = buf.len();
                    let oversized = !self.discarding && self.line.len() + n > max;
                    if oversized {
                        // Say so now; the rest of the line is dropped as it arrives.
                        self.line.clear();
                        self.discarding = true;
                    } else if !self.discarding {
                        self.line.extend_from_slice(buf);
                    }
                    self.read.consume(n);
                    // A request line is known before its line ends: hang up at once.
                    if !self.discarding && self.guard.check_not_http(&self.line).is_err() {
                        return Line::Http;
                    }
                    if oversized {
                        return Line::Oversized;
                    }
                }
            }
        }
    }

    /// A message for rmcp, nothing (skip the line), or an error reply for the client.
    fn check(&mut self, line: &[u8]) -> Result<Option<RxJsonRpcMessage<RoleServer>>, String> {
        let text = line.strip_suffix(b"\r").unwrap_or(line);
        let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        if let Err(refused) = self.guard.check_message(text) {
            return Err(reply(
                Value::Null,
                ErrorCode::INVALID_REQUEST,
                &refused.message(),
            ));
        }
        let value: Value = serde_json::from_slice(text).map_err(|e| {
            reply(
                Value::Null,
                ErrorCode::PARSE_ERROR,
                &format!("Parse error: invalid JSON: {e}"),
            )
        })?;
        if value.is_array() {
            return Err(reply(
                Value::Null,
                ErrorCode::INVALID_REQUEST,
                "JSON-RPC batches are not supported by MCP; send one message per line",
            ));
        }
        // Only numbers and strings are ids; anything else cannot be answered by id.
        let id = value
            .get("id")
            .filter(|id| id.is_number() || id.is_string())
            .cloned();
        if !self.bucket.take(&self.limits) {
            return match id {
                Some(id) => Err(reply(id, RATE_LIMITED, "rate limit exceeded; slow down")),
                None => Ok(None),
            };
        }
        let method = value
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
            Ok(msg) => {
                if let JsonRpcMessage::Request(req) = &msg {
                    // rmcp reads a standard method whose params do not fit as a custom
                    // request and would answer "method not found"; the truth is bad params.
                    if let ClientRequest::CustomRequest(custom) = &req.request {
                        if let Some(reason) = standard_params_error(custom) {
                            let id = id.unwrap_or(Value::Null);
                            return Err(reply(id, ErrorCode::INVALID_PARAMS, &reason));
                        }
                    }
                    self.seen_request = true;
                } else if !self.seen_request {
                    tracing::debug!("dropping a message that came before any request");
                    return Ok(None);
                }
                Ok(Some(msg))
            }
            // Notifications nobody here knows are ignored, as the protocol asks.
            Err(_) if id.is_none() && method.is_some() => Ok(None),
            Err(e) => Err(match (&id, &method) {
                (Some(id), Some(method)) => reply(
                    id.clone(),
                    ErrorCode::INVALID_PARAMS,
                    &format!("invalid parameters for `{method}`: {e}"),
                ),
                _ => reply(
                    id.unwrap_or(Value::Null),
                    ErrorCode::INVALID_REQUEST,
                    &format!("not a JSON-RPC 2.0 message: {e}"),
                ),
            }),
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for GuardedTransport<R> {
    type Error = TransportError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), TransportError>> + Send + 'static {
        let line = serde_json::to_string(&item);
        let out = self.out.clone();
        async move {
            let mut line = line?;
            line.push('\n');
            out.send(line).await.map_err(|_| TransportError::Closed)
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // Error replies first, in order; `reserve` loses nothing if cancelled.
            while !self.pending.is_empty() {
                let permit = self.out.reserve().await.ok()?;
                if let Some(line) = self.pending.pop_front() {
                    permit.send(line);
                }
            }
            let line = match self.next_line().await {
                Line::Complete(line) => line,
                Line::Oversized => {
                    let msg = format!(
                        "message exceeds {} bytes and was discarded",
                        self.limits.max_message_bytes
                    );
                    self.pending
                        .push_back(reply(Value::Null, ErrorCode::INVALID_REQUEST, &msg));
                    continue;
                }
                Line::Eof | Line::Http => return None,
            };
            if self.guard.check_not_http(&line) == Err(Refusal::Http) {
                // Nothing it sent runs, and it gets no answer.
                return None;
            }
            match self.check(&line) {
                Ok(Some(msg)) => return Some(msg),
                Ok(None) => {}
                Err(reply) => self.pending.push_back(reply),
            }
        }
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
}

/// Why a request for a standard MCP method was not read as one, if it names one.
fn standard_params_error(request: &CustomRequest) -> Option<String> {
    fn reason<T: DeserializeOwned>(params: &Option<Value>) -> String {
        let params = params.clone().unwrap_or(Value::Null);
        match serde_json::from_value::<T>(params) {
            Err(e) => e.to_string(),
            Ok(_) => "they do not match the method's schema".into(),
        }
    }
    let method = request.method.as_str();
    let why = match method {
        "tools/call" => reason::<CallToolRequestParams>(&request.params),
        "resources/read" => reason::<ReadResourceRequestParams>(&request.params),
        "initialize" => reason::<InitializeRequestParams>(&request.params),
        "ping"
        | "tools/list"
        | "resources/list"
        | "resources/templates/list"
        | "prompts/list"
        | "prompts/get"
        | "completion/complete"
        | "logging/setLevel"
        | "resources/subscribe"
        | "resources/unsubscribe" => "they do not match the method's schema".into(),
        _ => return None,
    };
    Some(format!("invalid parameters for `{method}`: {why}"))
}

/// A JSON-RPC error response as one line.
fn reply(id: Value, code: ErrorCode, message: &str) -> String {
    let mut line =
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.0, "message": message}})
            .to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    fn limits() -> Limits {
        Limits {
            max_message_bytes: 256,
            max_depth: 8,
            ..Limits::default()
        }
    }

    /// Feeds `input` to a transport and collects what it passes on and what it answers.
    async fn run(input: &[u8], limits: Limits) -> (Vec<Value>, Vec<Value>) {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (read, write) = tokio::io::split(server);
        let (client_read, mut client_write) = tokio::io::split(client);
        let guard = Guard::stdio(sextant_guard::DoorKind::McpStdio, limits);
        let (mut transport, writer) = guarded(read, write, guard);
        let input = input.to_vec();
        tokio::spawn(async move {
            client_write.write_all(&input).await.unwrap();
            client_write.shutdown().await.unwrap();
        });
        let mut passed = Vec::new();
        while let Some(msg) = transport.receive().await {
            passed.push(serde_json::to_value(&msg).unwrap());
        }
        drop(transport);
        writer.await.unwrap();
        let mut replies = Vec::new();
        let mut lines = tokio::io::BufReader::new(client_read).lines();
        while let Some(line) = lines.next_line().await.unwrap() {
            replies.push(serde_json::from_str(&line).unwrap());
        }
        (passed, replies)
    }

    const PING: &str = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;

    #[tokio::test]
    async fn a_web_pages_request_ends_the_session_before_anything_it_carries() {
        let request = format!(
            "POST / HTTP/1.1\r\nHost: 127.0.0.1:7000\r\nContent-Type: text/plain\r\n\r\n{PING}\n"
        );
        let (passed, replies) = run(request.as_bytes(), limits()).await;
        assert!(passed.is_empty(), "{passed:?}");
        assert!(replies.is_empty(), "{replies:?}");
        // Known before its line ends: a request line without a newline at all.
        let (passed, replies) = run(b"GET / HTTP/1.1", limits()).await;
        assert!(passed.is_empty() && replies.is_empty());
    }

    #[tokio::test]
    async fn bad_lines_are_answered_and_good_ones_still_pass() {
        let deep = format!("{}{}", "[".repeat(20), "]".repeat(20));
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"{}"}}"#,
            "x".repeat(400)
        );
        let input = [
            "{not json",
            PING,
            &deep,
            "[]",
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"hello":"world"}"#,
            &long,
            r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#,
            "",
            PING,
        ]
        .join("\n")
            + "\n";
        let (passed, replies) = run(input.as_bytes(), limits()).await;
        let methods: Vec<&str> = passed
            .iter()
            .map(|m| m["method"].as_str().unwrap())
            .collect();
        // Unknown notifications are rmcp's to ignore.
        assert_eq!(methods, ["ping", "notifications/whatever", "ping"]);
        let codes: Vec<i64> = replies
            .iter()
            .map(|r| r["error"]["code"].as_i64().unwrap())
            .collect();
        assert_eq!(
            codes,
            [-32700, -32600, -32600, -32602, -32600, -32600],
            "{replies:?}"
        );
        assert!(replies.iter().all(|r| r["jsonrpc"] == "2.0"));
        assert_eq!(replies[3]["id"], "a", "an id that can be read is echoed");
        assert!(replies[3]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tools/call"));
        assert!(replies[0]["id"].is_null());
        assert!(replies[5]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeds 256 bytes"));
    }

    #[tokio::test]
    async fn an_oversized_line_split_across_reads_is_skipped_whole() {
        // Longer than the duplex buffer, so it arrives in several reads.
        let long = format!(r#"{{"pad":"{}"}}"#, "y".repeat(200_000));
        let input = format!("{long}\n{PING}\n");
        let (passed, replies) = run(input.as_bytes(), limits()).await;
        assert_eq!(passed.len(), 1);
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0]["error"]["code"], -32600);
    }

    #[tokio::test]
    async fn notifications_before_the_first_request_are_dropped() {
        let input = format!(
            "{}\n{PING}\n{}\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        let (passed, replies) = run(input.as_bytes(), limits()).await;
        assert!(replies.is_empty(), "{replies:?}");
        assert_eq!(passed.len(), 2);
        assert_eq!(passed[0]["method"], "ping");
        assert_eq!(passed[1]["method"], "notifications/initialized");
    }

    #[tokio::test]
    async fn the_rate_limit_answers_requests_by_id() {
        let limited = Limits {
            rate_per_second: 0.001,
            burst: 2.0,
            ..limits()
        };
        let input = format!("{PING}\n{PING}\n{PING}\n");
        let (passed, replies) = run(input.as_bytes(), limited).await;
        assert_eq!(passed.len(), 2);
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0]["id"], 7);
        assert_eq!(replies[0]["error"]["code"], -32000);
    }
}
