//! What every door (API server, MCP, and the next ones) enforces per client, in one place:
//! message size, JSON nesting, rate, client count, token checks and the back-off after
//! wrong tokens, and recognising a web browser's request sent to a JSON-lines port.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

/// Per-client limits of a door.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_message_bytes: usize,
    pub max_depth: usize,
    /// Sustained messages per second (token bucket).
    pub rate_per_second: f64,
    /// Messages allowed in a burst above the rate.
    pub burst: f64,
    /// Concurrent clients of one listener.
    pub max_clients: usize,
    /// Commands in one batch (doors that batch).
    pub max_batch: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 1024 * 1024,
            max_depth: 64,
            rate_per_second: 500.0,
            burst: 1000.0,
            max_clients: 16,
            max_batch: 256,
        }
    }
}

/// A token bucket: `rate_per_second` sustained, `burst` at once.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// A full bucket.
    pub fn new(limits: &Limits) -> Self {
        RateLimiter {
            tokens: limits.burst,
            last: Instant::now(),
        }
    }

    /// Whether one more message may pass now.
    pub fn take(&mut self, limits: &Limits) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens
            + now.duration_since(self.last).as_secs_f64() * limits.rate_per_second)
            .min(limits.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Whether `given` is the door's token, compared in constant time so the time an answer
/// takes does not tell an attacker how much of a guess was right.
pub fn token_matches(given: &str, expected: &str) -> bool {
    bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// Wrong tokens in a row on one connection before the door hangs up.
pub const MAX_WRONG_TOKENS: u32 = 5;

/// Slows down token guessing across every connection of a door: each wrong token waits
/// longer before its answer (doubling from 100 ms to 5 s), a right one resets the count,
/// and a minute without wrong tokens forgets them.
#[derive(Debug, Default)]
pub struct AuthThrottle {
    state: Mutex<Option<(u32, Instant)>>,
}

impl AuthThrottle {
    /// How long to wait before answering the `n`th wrong token in a row.
    pub fn delay_for(n: u32) -> Duration {
        let ms = 100u64.saturating_mul(1 << n.saturating_sub(1).min(16));
        Duration::from_millis(ms.min(5_000))
    }

    /// Records a wrong token; returns how long to wait before answering it.
    pub fn failed(&self) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let n = match *state {
            Some((n, last)) if now.duration_since(last) < Duration::from_secs(60) => n + 1,
            _ => 1,
        };
        *state = Some((n, now));
        AuthThrottle::delay_for(n)
    }

    /// A right token: the count starts over.
    pub fn succeeded(&self) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Whether a line is part of an HTTP request (a request line such as `POST / HTTP/1.1`,
/// or a header such as `Host: 127.0.0.1:7777`). Any web page can make the browser send
/// one to a localhost port, with a JSON line hidden in its body, so a JSON-lines door
/// closes the connection on the first such line instead of reading on, as Redis does.
pub fn looks_like_http(line: &[u8]) -> bool {
    const METHODS: &[&[u8]] = &[
        b"GET ",
        b"POST ",
        b"PUT ",
        b"PATCH ",
        b"DELETE ",
        b"HEAD ",
        b"OPTIONS ",
        b"CONNECT ",
        b"TRACE ",
        b"PRI * HTTP/2",
    ];
    if METHODS.iter().any(|m| line.starts_with(m)) {
        return true;
    }
    // Headers browsers always send; case-insensitive, as HTTP is.
    const HEADERS: &[&[u8]] = &[b"host:", b"origin:", b"user-agent:", b"content-type:"];
    HEADERS
        .iter()
        .any(|h| line.len() >= h.len() && line[..h.len()].eq_ignore_ascii_case(h))
}

/// Nesting depth of a JSON text, counted without parsing, so a deeply nested bomb is
/// refused before a parser recurses into it.
pub fn json_depth(text: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_ignores_brackets_in_strings() {
        assert_eq!(json_depth(br#"{"a": [1, {"b": "[[[["}]}"#), 3);
        assert_eq!(json_depth(br#"{"a": "\"{{"}"#), 1);
        assert_eq!(json_depth(b"1"), 0);
    }

    #[test]
    fn browser_requests_are_recognised_json_lines_are_not() {
        let http: &[&[u8]] = &[
            b"POST / HTTP/1.1",
            b"GET /favicon.ico HTTP/1.1",
            b"OPTIONS * HTTP/1.1",
            b"HEAD / HTTP/1.0",
            b"Host: 127.0.0.1:7777",
            b"host: localhost",
            b"Origin: https://evil.example",
            b"Content-Type: text/plain",
        ];
        for line in http {
            assert!(looks_like_http(line), "{}", String::from_utf8_lossy(line));
        }
        let json: &[&[u8]] = &[
            br#"{"type":"command","command":"io.status"}"#,
            br#"  {"type":"auth","token":"POST "}"#,
            b"",
            b"[1,2]",
        ];
        for line in json {
            assert!(!looks_like_http(line), "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches("s3cret", "s3cret"));
        for wrong in ["s3cre", "s3cret!", "S3cret", ""] {
            assert!(!token_matches(wrong, "s3cret"), "{wrong}");
        }
    }

    #[test]
    fn wrong_tokens_wait_longer_and_longer_up_to_five_seconds() {
        let schedule: Vec<u64> = (1..=8)
            .map(|n| AuthThrottle::delay_for(n).as_millis() as u64)
            .collect();
        assert_eq!(schedule, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        let t = AuthThrottle::default();
        assert_eq!(t.failed(), Duration::from_millis(100));
        assert_eq!(t.failed(), Duration::from_millis(200));
        t.succeeded();
        assert_eq!(
            t.failed(),
            Duration::from_millis(100),
            "a right token starts over"
        );
    }

    #[test]
    fn bucket_allows_a_burst_then_the_rate() {
        let limits = Limits {
            rate_per_second: 0.001,
            burst: 3.0,
            ..Limits::default()
        };
        let mut b = RateLimiter::new(&limits);
        assert!((0..3).all(|_| b.take(&limits)));
        assert!(!b.take(&limits));
    }
}
