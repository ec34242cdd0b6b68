//! The checks the [`Guard`](crate::Guard) is made of, each testable alone: message size,
//! JSON nesting, rate, token checks and the back-off after wrong tokens, recognising a web
//! browser's request sent to a JSON-lines port, and which `Origin` and `Host` an HTTP door
//! accepts.

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

/// The host names that are this machine's loopback, as a URL or a `Host` header spells them.
const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

/// Whether a browser page from `origin` may connect: one the user allowed, or – when the
/// door serves pages itself, on `own_port` – a page it served: `http`, a loopback host and
/// exactly that port. Scheme, host and port all count: a page on another localhost port
/// belongs to another program (a dev server, a tool, anything a link can open).
pub fn origin_allowed(origin: &str, own_port: Option<u16>, extra: &[String]) -> bool {
    if extra.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
        return true;
    }
    let (Some(own), Some((scheme, host, port))) = (own_port, split_origin(origin)) else {
        return false;
    };
    scheme == "http" && LOOPBACK_HOSTS.contains(&host) && port == own
}

/// Whether a request's `Host` header names this door as a loopback door is reached:
/// a loopback name and the door's own port, or the host of an origin the user listed.
/// Anything else on a loopback door is a DNS name rebound to 127.0.0.1 by a web page.
pub fn host_allowed(host: &str, own_port: u16, extra: &[String]) -> bool {
    let Some((name, port)) = split_authority(host, 80) else {
        return false;
    };
    let listed = extra.iter().any(|o| {
        split_origin(o).is_some_and(|(_, h, p)| h.eq_ignore_ascii_case(name) && p == port)
    });
    listed || (LOOPBACK_HOSTS.contains(&name) && port == own_port)
}

/// `scheme://host[:port]` → (scheme, host, port with the scheme's default); `None` for
/// anything else (`null`, a path, user info, a bad port).
pub fn split_origin(origin: &str) -> Option<(&str, &str, u16)> {
    let (scheme, rest) = origin.split_once("://")?;
    let default = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let (host, port) = split_authority(rest, default)?;
    Some((scheme, host, port))
}

/// `host[:port]` → (host, port, `default` when none is given); `None` for a path, user
/// info, a query or a bad port.
fn split_authority(rest: &str, default: u16) -> Option<(&str, u16)> {
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
    (!host.is_empty()).then_some((host, port))
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

    #[test]
    fn pages_this_door_served_and_listed_origins_only() {
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
    fn hosts_name_this_door_by_a_loopback_name_and_its_port() {
        for ok in ["127.0.0.1:7777", "localhost:7777", "[::1]:7777"] {
            assert!(host_allowed(ok, 7777, &[]), "{ok}");
        }
        for bad in [
            "evil.example:7777",
            "127.0.0.1.nip.io:7777",
            "localhost:7778",
            "localhost",
            "",
            "127.0.0.1:7777/x",
        ] {
            assert!(!host_allowed(bad, 7777, &[]), "{bad}");
        }
        let listed = ["http://bench.local:7777".to_string()];
        assert!(host_allowed("bench.local:7777", 7777, &listed));
        assert!(!host_allowed("bench.local:7778", 7777, &listed));
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
