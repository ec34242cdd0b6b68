//! The HTTP layer both clients share: keys, timeouts, retries and error statuses.
//!
//! Owns sending one request until it gets a response worth streaming: connect errors, 429 and
//! 5xx are retried with capped exponential backoff that honours `retry-after`, and every other
//! failure status becomes a typed [`ProviderError`]. Retrying happens only here, before a
//! single byte of a reply reached the caller, so a retry can never duplicate output.

use std::fmt;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{RequestBuilder, Response, StatusCode};

use crate::error::{Api, ProviderError};

/// An API key. Its `Debug` never shows the key, and there is no `Display`, so a key cannot
/// reach a log line by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for the one place that puts it in a header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A header value marked sensitive, so hyper and reqwest redact it in their own logs.
    pub(crate) fn header(&self, prefix: &str) -> Result<HeaderValue, ProviderError> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", self.0)).map_err(|_| {
            ProviderError::Config("the API key contains characters a header cannot carry".into())
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// When and how often to try again.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts at most).
    pub max_retries: u32,
    /// The first backoff; each further retry doubles it.
    pub initial_backoff: Duration,
    /// The cap on one backoff.
    pub max_backoff: Duration,
    /// The longest `retry-after` we wait for; a server asking for more gets an error
    /// carrying its request instead, so the UI can say when to try again.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The backoff before retry number `retry` (0-based), capped.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// Transport settings shared by both clients.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpConfig {
    pub connect_timeout: Duration,
    /// The longest silence allowed: waiting for the response head, and between two chunks of
    /// a streamed body. Long enough for a local model's prompt processing.
    pub read_timeout: Duration,
    pub retry: RetryPolicy,
    /// The cap on one streamed reply's bytes; a bigger reply ends in
    /// [`ProviderError::ReplyTooLarge`] rather than growing without bound.
    pub max_reply_bytes: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
            max_reply_bytes: 16 * 1024 * 1024,
        }
    }
}

/// The most of an error body we read: enough for any provider's message.
const MAX_ERROR_BODY: usize = 64 * 1024;

pub(crate) fn build_client(config: &HttpConfig) -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .user_agent(concat!("sextant/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ProviderError::Config(format!("could not build the HTTP client: {e}")))
}

/// What the caller is doing, for error messages.
pub(crate) struct Call<'a> {
    pub api: Api,
    pub url: &'a str,
    pub model: &'a str,
}

/// Send the request built by `build` (called once per attempt) until a success status, and
/// return that response with its body unread.
pub(crate) async fn send_with_retries(
    config: &HttpConfig,
    call: &Call<'_>,
    build: impl Fn() -> RequestBuilder,
) -> Result<Response, ProviderError> {
    let policy = &config.retry;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let outcome = tokio::time::timeout(config.read_timeout, build().send()).await;
        let (delay, error) = match outcome {
            Err(_) => {
                let error = ProviderError::Timeout {
                    api: call.api,
                    timeout: config.read_timeout,
                };
                (policy.backoff(attempt - 1), error)
            }
            Ok(Err(e)) if refused(&e) => {
                // Nothing listens there: one quick retry (a server just starting), then say so.
                let error = ProviderError::NothingListening {
                    url: call.url.to_owned(),
                    attempts: attempt,
                };
                if attempt >= 2 || policy.max_retries == 0 {
                    return Err(error);
                }
                (policy.backoff(0), error)
            }
            Ok(Err(e)) => {
                let error = ProviderError::Connect {
                    url: call.url.to_owned(),
                    attempts: attempt,
                    detail: error_chain(&e),
                };
                (policy.backoff(attempt - 1), error)
            }
            Ok(Ok(response)) if response.status().is_success() => return Ok(response),
            Ok(Ok(response)) => {
                let status = response.status();
                let retry_after = parse_retry_after(response.headers(), SystemTime::now());
                let message = error_message(read_error_body(response, config).await);
                let error = status_error(call, status, attempt, retry_after, message);
                if !(status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()) {
                    return Err(error);
                }
                match retry_after {
                    Some(wait) if wait > policy.max_retry_after => return Err(error),
                    Some(wait) => (wait, error),
                    None => (policy.backoff(attempt - 1), error),
                }
            }
        };
        if attempt > policy.max_retries {
            return Err(error);
        }
        tracing::warn!(
            url = call.url,
            attempt,
            delay_ms = delay.as_millis() as u64,
            "provider request failed, retrying: {error}"
        );
        tokio::time::sleep(delay).await;
    }
}

fn status_error(
    call: &Call<'_>,
    status: StatusCode,
    attempts: u32,
    retry_after: Option<Duration>,
    message: String,
) -> ProviderError {
    let api = call.api;
    match status.as_u16() {
        401 | 403 => ProviderError::BadKey {
            api,
            status: status.as_u16(),
            message,
        },
        404 => ProviderError::NotFound {
            api,
            model: call.model.to_owned(),
            message,
        },
        400 | 422 => ProviderError::BadRequest { api, message },
        429 => ProviderError::RateLimited {
            api,
            attempts,
            retry_after,
            message,
        },
        s if status.is_server_error() => ProviderError::Server {
            api,
            status: s,
            attempts,
            message,
        },
        s => ProviderError::Http {
            api,
            status: s,
            message,
        },
    }
}

/// `retry-after` as seconds or as an HTTP date (relative to `now`).
pub fn parse_retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    // A date in the past means "now".
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

async fn read_error_body(mut response: Response, config: &HttpConfig) -> Vec<u8> {
    let mut body = Vec::new();
    // A failed or silent read just ends the message: the status already says what happened.
    while let Ok(Ok(Some(chunk))) =
        tokio::time::timeout(config.read_timeout, response.chunk()).await
    {
        let room = MAX_ERROR_BODY.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_ERROR_BODY {
            break;
        }
    }
    body
}

/// Read a whole (non-streamed) JSON body, within the reply cap and the read timeout.
/// GETs `call.url` (retrying as [`send_with_retries`] allows) and reads a JSON reply.
pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    config: &HttpConfig,
    call: &Call<'_>,
    headers: &HeaderMap,
) -> Result<T, ProviderError> {
    let response = send_with_retries(config, call, || {
        client.get(call.url).headers(headers.clone())
    })
    .await?;
    read_json(response, config, call.api).await
}

pub(crate) async fn read_json<T: serde::de::DeserializeOwned>(
    mut response: Response,
    config: &HttpConfig,
    api: Api,
) -> Result<T, ProviderError> {
    let mut body = Vec::new();
    loop {
        let chunk = match tokio::time::timeout(config.read_timeout, response.chunk()).await {
            Err(_) => {
                return Err(ProviderError::Timeout {
                    api,
                    timeout: config.read_timeout,
                })
            }
            Ok(Err(e)) => {
                let detail = error_chain(&e);
                return Err(ProviderError::StreamCut {
                    api,
                    detail,
                    partial_tool_calls: Vec::new(),
                });
            }
            Ok(Ok(None)) => break,
            Ok(Ok(Some(chunk))) => chunk,
        };
        body.extend_from_slice(&chunk);
        if body.len() > config.max_reply_bytes {
            return Err(ProviderError::ReplyTooLarge {
                api,
                limit: config.max_reply_bytes,
            });
        }
    }
    serde_json::from_slice(&body).map_err(|e| ProviderError::Protocol {
        api,
        detail: e.to_string(),
        data: truncate(&String::from_utf8_lossy(&body), 500),
    })
}

/// The human part of a provider's error body, whichever shape it has: Anthropic and OpenAI
/// `{"error": {"message": …}}`, Ollama `{"error": "…"}`, or plain text.
pub(crate) fn error_message(body: Vec<u8>) -> String {
    let text = String::from_utf8_lossy(&body);
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) {
        let found = json
            .pointer("/error/message")
            .or_else(|| json.get("error").filter(|e| e.is_string()))
            .or_else(|| json.get("message"))
            .or_else(|| json.get("detail"))
            .and_then(|m| m.as_str());
        if let Some(message) = found {
            return message.to_owned();
        }
    }
    let text = text.trim();
    if text.is_empty() {
        return "(no message)".into();
    }
    truncate(text, 500)
}

pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A reqwest error with its causes, which say what actually went wrong (refused, DNS, TLS).
/// Whether a request failed because the connection was refused (nothing listens there).
fn refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        source = e.source();
    }
    false
}

pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        map
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(
            parse_retry_after(&headers("1"), now),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            parse_retry_after(&headers(" 120 "), now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after(&headers("1.5"), now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(&headers("Wed, 21 Oct 2015 07:28:30 GMT"), now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after(&headers("Wed, 21 Oct 2015 07:00:00 GMT"), now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after(&headers("soon"), now), None);
        assert_eq!(parse_retry_after(&headers("-3"), now), None);
        assert_eq!(parse_retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy {
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(3),
            ..RetryPolicy::default()
        };
        let delays: Vec<u64> = (0..6)
            .map(|n| policy.backoff(n).as_millis() as u64)
            .collect();
        assert_eq!(delays, [500, 1000, 2000, 3000, 3000, 3000]);
        assert_eq!(policy.backoff(u32::MAX), Duration::from_secs(3));
    }

    #[test]
    fn api_key_debug_is_redacted() {
        let key = ApiKey::new("sk-ant-secret-123");
        let shown = format!("{key:?} {:?}", Some(key.clone()));
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("<redacted>"));
        assert!(key.header("Bearer ").unwrap().is_sensitive());
    }

    #[test]
    fn error_messages_of_every_shape() {
        let anthropic = br#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        assert_eq!(error_message(anthropic.to_vec()), "invalid x-api-key");
        assert_eq!(
            error_message(br#"{"error":"model 'x' not found"}"#.to_vec()),
            "model 'x' not found"
        );
        assert_eq!(error_message(b"Bad Gateway\n".to_vec()), "Bad Gateway");
        assert_eq!(error_message(Vec::new()), "(no message)");
        assert_eq!(
            error_message("é".repeat(400).into_bytes()).chars().count(),
            251
        );
    }
}
