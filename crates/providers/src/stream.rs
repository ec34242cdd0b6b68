//! Turning a response body into a stream of [`Event`]s.
//!
//! Owns what is the same for every provider once the bytes flow: the read timeout between
//! chunks, the reply-size cap, SSE parsing, and telling a complete reply from a cut one. The
//! provider-specific part is a [`Decoder`] that maps SSE events to [`Event`]s.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use crate::error::{Api, ProviderError};
use crate::http::{self, error_chain, Call, HttpConfig};
use crate::model::{Event, PartialToolCall};
use crate::sse::{SseEvent, SseParser};

/// After a reply's stop event, how long and how much of the rest of the body is read so the
/// connection can be kept: a server that sends more, or holds the body open, loses its
/// connection rather than delaying the turn.
const DRAIN_WAIT: Duration = Duration::from_millis(50);
const DRAIN_MAX_BYTES: usize = 64 * 1024;

/// A streamed reply: events, then either [`Event::Stop`] or one error, then nothing.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Event, ProviderError>> + Send>>;

/// A provider's wire format, seen one SSE event at a time.
pub(crate) trait Decoder: Send + 'static {
    fn api(&self) -> Api;

    /// Decode one event, pushing what it means onto `out`.
    fn event(&mut self, event: SseEvent, out: &mut VecDeque<Event>) -> Result<(), ProviderError>;

    /// The body ended. Push what a clean end still implies (e.g. the stop event), or return
    /// `false` when the reply was not complete.
    fn end(&mut self, out: &mut VecDeque<Event>) -> bool;

    /// Whether the reply is complete (nothing after this point matters).
    fn done(&self) -> bool;

    /// Tool calls started but not finished, for the cut-stream error.
    fn partial_tool_calls(&self) -> Vec<PartialToolCall>;
}

pub(crate) type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

struct State<D> {
    body: ByteStream,
    parser: SseParser,
    decoder: D,
    ready: VecDeque<Event>,
    received: usize,
    max_bytes: usize,
    read_timeout: Duration,
    finished: bool,
    error: Option<ProviderError>,
}

/// Drive `decoder` over `body` as a stream of events.
/// POSTs a JSON `body` (retrying as [`http::send_with_retries`] allows) and decodes the
/// server-sent events of the reply with `decoder`: the whole round trip both clients share.
pub(crate) async fn post_sse<D: Decoder>(
    client: &reqwest::Client,
    config: &HttpConfig,
    call: &Call<'_>,
    headers: &reqwest::header::HeaderMap,
    body: Vec<u8>,
    decoder: D,
) -> Result<EventStream, ProviderError> {
    use reqwest::header::{ACCEPT, CONTENT_TYPE};
    let response = http::send_with_retries(config, call, || {
        client
            .post(call.url)
            .headers(headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body.clone())
    })
    .await?;
    Ok(event_stream(
        Box::pin(response.bytes_stream()),
        decoder,
        config.max_reply_bytes,
        config.read_timeout,
    ))
}

pub(crate) fn event_stream<D: Decoder>(
    body: ByteStream,
    decoder: D,
    max_bytes: usize,
    read_timeout: Duration,
) -> EventStream {
    let state = State {
        body,
        parser: SseParser::new(),
        decoder,
        ready: VecDeque::new(),
        received: 0,
        max_bytes,
        read_timeout,
        finished: false,
        error: None,
    };
    Box::pin(futures_util::stream::unfold(
        state,
        |mut state| async move {
            let item = state.next().await?;
            Some((item, state))
        },
    ))
}

impl<D: Decoder> State<D> {
    async fn next(&mut self) -> Option<Result<Event, ProviderError>> {
        loop {
            // Events decoded before an error still reach the caller, in order, before it.
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(event));
            }
            if let Some(error) = self.error.take() {
                return Some(Err(error));
            }
            if self.finished {
                return None;
            }
            if let Err(error) = self.pull().await {
                self.finished = true;
                self.error = Some(error);
            }
        }
    }

    /// Read one chunk and decode what it completes.
    async fn pull(&mut self) -> Result<(), ProviderError> {
        let api = self.decoder.api();
        if self.decoder.done() {
            // The stop event arrived: whatever else the server sends is not ours to wait for.
            self.finished = true;
            return Ok(());
        }
        let chunk = match tokio::time::timeout(self.read_timeout, self.body.next()).await {
            // Silence mid-reply is a cut like any other: report the calls it interrupted.
            Err(_) => {
                let secs = self.read_timeout.as_secs_f32();
                return Err(self.cut(format!("no data for {secs} s")));
            }
            Ok(None) => return self.end(),
            Ok(Some(Err(e))) => return Err(self.cut(error_chain(&e))),
            Ok(Some(Ok(chunk))) => chunk,
        };
        self.received += chunk.len();
        if self.received > self.max_bytes {
            return Err(ProviderError::ReplyTooLarge {
                api,
                limit: self.max_bytes,
            });
        }
        let mut events = Vec::new();
        self.parser.feed(&chunk, &mut events);
        for event in events {
            if self.decoder.done() {
                break;
            }
            self.decoder.event(event, &mut self.ready)?;
        }
        if self.decoder.done() {
            self.drain().await;
        }
        Ok(())
    }

    /// Reads the rest of the body after the stop event – normally just its end, already on
    /// the wire – briefly and boundedly, so the connection goes back to the client's pool for
    /// the next request (no new TCP and TLS handshake) instead of being closed with the body
    /// unread. Done here rather than on the next read: a caller may stop at the stop event.
    async fn drain(&mut self) {
        let body = &mut self.body;
        let drain = async {
            let mut left = DRAIN_MAX_BYTES;
            while let Some(Ok(chunk)) = body.next().await {
                left = match left.checked_sub(chunk.len()) {
                    Some(left) => left,
                    None => break,
                };
            }
        };
        let _ = tokio::time::timeout(DRAIN_WAIT, drain).await;
    }

    fn end(&mut self) -> Result<(), ProviderError> {
        self.finished = true;
        if self.decoder.done() {
            return Ok(());
        }
        let mid_event = self.parser.has_partial();
        if self.decoder.end(&mut self.ready) {
            return Ok(());
        }
        let detail = if mid_event {
            "the connection closed in the middle of an event"
        } else {
            "the connection closed before the reply's stop event"
        };
        Err(self.cut(detail.into()))
    }

    fn cut(&self, detail: String) -> ProviderError {
        ProviderError::StreamCut {
            api: self.decoder.api(),
            detail,
            partial_tool_calls: self.decoder.partial_tool_calls(),
        }
    }
}

/// Parse a finished tool call's argument text; empty text means no arguments.
pub(crate) fn parse_arguments(
    api: Api,
    id: &str,
    name: &str,
    raw: &str,
) -> Result<serde_json::Value, ProviderError> {
    if raw.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    serde_json::from_str(raw).map_err(|e| ProviderError::MalformedToolArguments {
        api,
        id: id.to_owned(),
        name: name.to_owned(),
        raw: raw.to_owned(),
        error: e.to_string(),
    })
}
