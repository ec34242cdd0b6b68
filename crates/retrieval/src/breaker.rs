//! The circuit breaker around the query embedder: after [`FAILURES_TO_OPEN`] failures in a
//! row it opens, and queries skip the vector track (full-text only) instead of waiting on a
//! dead endpoint each time; after [`OPEN_FOR`] one query is let through (half-open), and
//! its result closes or re-opens the circuit. The embedder's identity stays inside; a new
//! identity (another model or endpoint) starts closed with zeroed counts.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;

pub const FAILURES_TO_OPEN: u32 = 3;
pub const OPEN_FOR: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BreakerSnapshot {
    pub state: BreakerState,
    /// Failures in a row now.
    pub consecutive_failures: u32,
    pub failures: u64,
    /// Times it opened.
    pub opens: u64,
    /// Queries that skipped the embedder because it was open.
    pub skips: u64,
}

struct Inner {
    identity: String,
    state: BreakerState,
    consecutive: u32,
    failures: u64,
    opens: u64,
    skips: u64,
    opened_at: Option<Instant>,
}

pub struct Breaker {
    inner: Mutex<Inner>,
    clock: Box<dyn Fn() -> Instant + Send + Sync>,
}

impl Breaker {
    pub fn new(identity: &str) -> Breaker {
        Breaker::with_clock(identity, Instant::now)
    }

    pub fn with_clock(
        identity: &str,
        clock: impl Fn() -> Instant + Send + Sync + 'static,
    ) -> Breaker {
        Breaker {
            inner: Mutex::new(Inner {
                identity: identity.to_string(),
                state: BreakerState::Closed,
                consecutive: 0,
                failures: 0,
                opens: 0,
                skips: 0,
                opened_at: None,
            }),
            clock: Box::new(clock),
        }
    }

    /// Whether a query may call the embedder now (counted as a skip when not).
    pub fn allow(&self) -> bool {
        let now = (self.clock)();
        let Ok(mut s) = self.inner.lock() else {
            return true;
        };
        match s.state {
            BreakerState::Closed => true,
            BreakerState::HalfOpen => {
                // One probe at a time: the others skip until it answers – or, should it
                // never answer (it panicked), until another wait has passed.
                if s.opened_at
                    .is_some_and(|t| now.saturating_duration_since(t) >= OPEN_FOR)
                {
                    s.opened_at = Some(now);
                    true
                } else {
                    s.skips += 1;
                    false
                }
            }
            BreakerState::Open => {
                if s.opened_at
                    .is_some_and(|t| now.saturating_duration_since(t) >= OPEN_FOR)
                {
                    s.state = BreakerState::HalfOpen;
                    s.opened_at = Some(now);
                    true
                } else {
                    s.skips += 1;
                    false
                }
            }
        }
    }

    pub fn success(&self) {
        if let Ok(mut s) = self.inner.lock() {
            s.state = BreakerState::Closed;
            s.consecutive = 0;
            s.opened_at = None;
        }
    }

    pub fn failure(&self) {
        let now = (self.clock)();
        if let Ok(mut s) = self.inner.lock() {
            s.failures += 1;
            s.consecutive += 1;
            let reopen = s.state == BreakerState::HalfOpen;
            if reopen || (s.state == BreakerState::Closed && s.consecutive >= FAILURES_TO_OPEN) {
                s.state = BreakerState::Open;
                s.opens += 1;
                s.opened_at = Some(now);
            }
        }
    }

    /// The embedder changed (another model, another endpoint): start over, closed.
    pub fn reset_for(&self, identity: &str) {
        if let Ok(mut s) = self.inner.lock() {
            if s.identity != identity {
                *s = Inner {
                    identity: identity.to_string(),
                    state: BreakerState::Closed,
                    consecutive: 0,
                    failures: 0,
                    opens: 0,
                    skips: 0,
                    opened_at: None,
                };
            }
        }
    }

    pub fn snapshot(&self) -> BreakerSnapshot {
        let s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        BreakerSnapshot {
            state: s.state,
            consecutive_failures: s.consecutive,
            failures: s.failures,
            opens: s.opens,
            skips: s.skips,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn opens_after_failures_half_opens_after_a_while_and_resets_on_a_new_embedder() {
        let base = Instant::now();
        let secs = Arc::new(AtomicU64::new(0));
        let clock = secs.clone();
        let b = Breaker::with_clock("a", move || {
            base + Duration::from_secs(clock.load(Ordering::SeqCst))
        });
        for _ in 0..FAILURES_TO_OPEN {
            assert!(b.allow());
            b.failure();
        }
        assert_eq!(b.snapshot().state, BreakerState::Open);
        assert!(!b.allow());
        assert_eq!(b.snapshot().skips, 1);
        secs.store(OPEN_FOR.as_secs(), Ordering::SeqCst);
        assert!(b.allow(), "half-open lets one probe through");
        assert!(!b.allow(), "…and only one");
        secs.store(2 * OPEN_FOR.as_secs(), Ordering::SeqCst);
        assert!(
            b.allow(),
            "a probe that never answered does not block the breaker for good"
        );
        b.failure();
        assert_eq!(b.snapshot().state, BreakerState::Open);
        assert_eq!(b.snapshot().opens, 2);
        secs.store(3 * OPEN_FOR.as_secs(), Ordering::SeqCst);
        assert!(b.allow());
        b.success();
        assert_eq!(b.snapshot().state, BreakerState::Closed);
        b.failure();
        b.reset_for("a");
        assert_eq!(
            b.snapshot().failures,
            5,
            "the same embedder keeps its counts"
        );
        b.reset_for("b");
        assert_eq!(
            b.snapshot(),
            BreakerSnapshot {
                state: BreakerState::Closed,
                consecutive_failures: 0,
                failures: 0,
                opens: 0,
                skips: 0
            }
        );
    }
}
