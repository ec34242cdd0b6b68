//! What every door (API server, MCP, and the next ones) enforces per client, in one place:
//! message size, JSON nesting, rate, and client count.

use std::time::Instant;

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
