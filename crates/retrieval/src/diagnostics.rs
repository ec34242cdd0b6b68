//! Bounded, content-free runtime diagnostics (spec 50, Layer 3): what retrieval did, how
//! long each stage took and why it degraded – per scope (chat or agent) and for the
//! process – without one byte of what was searched for or found.
//!
//! - Per-scope state: at most [`MAX_SCOPES`], each dropped [`SCOPE_TTL`] after its last
//!   use; least recently used first when a new scope needs room. Touching a scope is O(1)
//!   (`lru`); the TTL sweep runs only when a scope is created at capacity, a snapshot is
//!   taken or [`Collector::cleanup`] is called – never while recording.
//! - Every distribution is a ring of [`RING_CAPACITY`] samples; a sample that is not finite
//!   or negative is refused. Percentiles are computed on a copy, at snapshot time.
//! - Recording never fails and never panics into the caller: a poisoned lock is skipped.
//! - Privacy by construction: the snapshot types hold numbers, booleans, timestamps and the
//!   closed enums below; the scope key never leaves the collector. A test walks the
//!   snapshot's JSON Schema and fails on any free-text field.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lru::LruCache;
use schemars::JsonSchema;
use serde::Serialize;

use crate::breaker::BreakerSnapshot;
use crate::embed::EmbedderKind;

pub const MAX_SCOPES: usize = 64;
pub const SCOPE_TTL: Duration = Duration::from_secs(24 * 60 * 60);
pub const RING_CAPACITY: usize = 256;

macro_rules! closed_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
        }
    };
}

closed_enum!(
    /// A timed part of one retrieval (`keyword`: extracting the keywords and the full-text
    /// search by them).
    Stage { Keyword, QueryEmbedding, Vector, AuthoritativeRevalidation, Assembly, Total }
);
closed_enum!(
    /// What a retrieval was for.
    Purpose { Recall, Decision, Search, Injection }
);
closed_enum!(
    /// How a retrieval ended (exactly one per retrieval).
    Outcome { Completed, Disabled, EmptyQuery, Cancelled, Failed }
);
closed_enum!(
    /// Why a retrieval returned less than it could have (any number per retrieval, each
    /// counted once; independent of the outcome).
    Degradation {
        VectorCold,
        EmbeddingTimeout,
        EmbeddingError,
        EmbeddingCircuitOpen,
        StoreUnusable,
        StoreTimeout,
        StoreError,
        RevisionChanged,
        FtsUnavailable,
        CandidateBudgetExhausted,
        Unknown,
    }
);

/// A fixed-capacity ring of non-negative, finite samples.
#[derive(Debug, Clone)]
pub struct Ring {
    samples: Box<[f64; RING_CAPACITY]>,
    next: usize,
    len: usize,
    rejected: u64,
}

impl Default for Ring {
    fn default() -> Self {
        Ring {
            samples: Box::new([0.0; RING_CAPACITY]),
            next: 0,
            len: 0,
            rejected: 0,
        }
    }
}

impl Ring {
    /// Adds a sample, overwriting the oldest when full; `false` (and counted) for a value
    /// that is not finite or is negative.
    pub fn push(&mut self, value: f64) -> bool {
        if !value.is_finite() || value < 0.0 {
            self.rejected += 1;
            return false;
        }
        self.samples[self.next] = value;
        self.next = (self.next + 1) % RING_CAPACITY;
        self.len = (self.len + 1).min(RING_CAPACITY);
        true
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// p50, p95 and max by nearest rank, on a sorted copy; `None`s when empty.
    pub fn summary(&self) -> Latency {
        if self.len == 0 {
            return Latency::default();
        }
        let mut copy: Vec<f64> = self.samples[..self.len].to_vec();
        copy.sort_by(f64::total_cmp);
        let rank = |p: f64| copy[((p * self.len as f64).ceil() as usize).clamp(1, self.len) - 1];
        Latency {
            samples: self.len as u64,
            p50_ms: Some(rank(0.50)),
            p95_ms: Some(rank(0.95)),
            max_ms: Some(copy[self.len - 1]),
        }
    }
}

/// A latency distribution in a snapshot; `None` (shown as "—") when nothing was measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub samples: u64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

#[derive(Debug)]
struct ScopeState {
    created: Instant,
    last_used: Instant,
    stages: BTreeMap<Stage, Ring>,
    purposes: BTreeMap<Purpose, u64>,
    outcomes: BTreeMap<Outcome, u64>,
    degradations: BTreeMap<Degradation, u64>,
}

impl ScopeState {
    fn new(now: Instant) -> ScopeState {
        ScopeState {
            created: now,
            last_used: now,
            stages: BTreeMap::new(),
            purposes: BTreeMap::new(),
            outcomes: BTreeMap::new(),
            degradations: BTreeMap::new(),
        }
    }
}

/// What one settled retrieval recorded.
#[derive(Debug, Default)]
struct Settlement {
    stages: Vec<(Stage, f64)>,
    degradations: Vec<Degradation>,
}

struct Scopes {
    map: LruCache<String, ScopeState>,
    evicted: u64,
    expired: u64,
}

/// Process-wide gauges, written as absolute values by whoever owns each number (never
/// derived from per-scope state, so they survive a scope's eviction).
#[derive(Debug, Default)]
pub struct Gauges {
    pub extraction_queue_depth: AtomicU64,
    pub extraction_oldest_age_ms: AtomicU64,
    pub embedding_backlog: AtomicU64,
    open_stores: AtomicU64,
    open_stores_high_water: AtomicU64,
    pub provider_queued: AtomicU64,
    pub provider_admitted: AtomicU64,
    pub provider_rate_limited: AtomicU64,
    pub provider_capacity_rejected: AtomicU64,
    pub provider_deadline: AtomicU64,
    pub provider_aborted: AtomicU64,
    pub provider_late_settled: AtomicU64,
}

impl Gauges {
    /// Sets the number of open stores (and raises the high-water mark).
    pub fn set_open_stores(&self, n: u64) {
        self.open_stores.store(n, Ordering::Relaxed);
        self.open_stores_high_water.fetch_max(n, Ordering::Relaxed);
    }

    fn snapshot(&self) -> ProcessGauges {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ProcessGauges {
            extraction_queue_depth: g(&self.extraction_queue_depth),
            extraction_oldest_age_ms: g(&self.extraction_oldest_age_ms),
            embedding_backlog: g(&self.embedding_backlog),
            open_stores: g(&self.open_stores),
            open_stores_high_water: g(&self.open_stores_high_water),
            provider_queued: g(&self.provider_queued),
            provider_admitted: g(&self.provider_admitted),
            provider_rate_limited: g(&self.provider_rate_limited),
            provider_capacity_rejected: g(&self.provider_capacity_rejected),
            provider_deadline: g(&self.provider_deadline),
            provider_aborted: g(&self.provider_aborted),
            provider_late_settled: g(&self.provider_late_settled),
        }
    }
}

/// The collector. Cheap to share (`Arc`); every method is infallible.
pub struct Collector {
    scopes: Mutex<Scopes>,
    gauges: Gauges,
    /// Retrievals settled, process-wide, by outcome (survive eviction).
    totals: Mutex<BTreeMap<Outcome, u64>>,
    clock: Box<dyn Fn() -> Instant + Send + Sync>,
}

impl Default for Collector {
    fn default() -> Self {
        Collector::new()
    }
}

impl Collector {
    pub fn new() -> Collector {
        Collector::with_clock(Instant::now)
    }

    /// With a clock of the caller's (tests move time forward without sleeping).
    pub fn with_clock(clock: impl Fn() -> Instant + Send + Sync + 'static) -> Collector {
        Collector {
            scopes: Mutex::new(Scopes {
                map: LruCache::unbounded(),
                evicted: 0,
                expired: 0,
            }),
            gauges: Gauges::default(),
            totals: Mutex::new(BTreeMap::new()),
            clock: Box::new(clock),
        }
    }

    pub fn gauges(&self) -> &Gauges {
        &self.gauges
    }

    /// Starts one retrieval for `scope`; it is settled exactly once, by
    /// [`Execution::finish`] or, failing that, when it is dropped.
    pub fn begin(self: &Arc<Self>, scope: &str, purpose: Purpose) -> Execution {
        Execution {
            collector: Some(self.clone()),
            scope: scope.to_string(),
            purpose,
            started: Instant::now(),
            record: Settlement::default(),
        }
    }

    fn settle(&self, scope: &str, purpose: Purpose, outcome: Outcome, record: Settlement) {
        if let Ok(mut totals) = self.totals.lock() {
            *totals.entry(outcome).or_default() += 1;
        }
        let now = (self.clock)();
        let Ok(mut scopes) = self.scopes.lock() else {
            return;
        };
        if scopes.map.get(scope).is_none() {
            if scopes.map.len() >= MAX_SCOPES {
                sweep(&mut scopes, now);
            }
            if scopes.map.len() >= MAX_SCOPES {
                scopes.map.pop_lru();
                scopes.evicted += 1;
            }
            scopes.map.put(scope.to_string(), ScopeState::new(now));
        }
        // `get_mut` moves the scope to the most recently used end: the O(1) touch.
        let Some(state) = scopes.map.get_mut(scope) else {
            return;
        };
        state.last_used = now;
        *state.purposes.entry(purpose).or_default() += 1;
        *state.outcomes.entry(outcome).or_default() += 1;
        for (stage, ms) in record.stages {
            state.stages.entry(stage).or_default().push(ms);
        }
        for cause in record.degradations {
            *state.degradations.entry(cause).or_default() += 1;
        }
    }

    /// How many scopes are held now, without sweeping (what recording leaves).
    pub fn scope_count(&self) -> usize {
        self.scopes.lock().map(|s| s.map.len()).unwrap_or(0)
    }

    /// Drops the scopes unused for longer than the TTL.
    pub fn cleanup(&self) {
        let now = (self.clock)();
        if let Ok(mut scopes) = self.scopes.lock() {
            sweep(&mut scopes, now);
        }
    }

    /// Everything, as the health view shows it; `embedder` from whoever chose it.
    pub fn snapshot(&self, embedder: Option<EmbedderHealth>) -> Health {
        let now = (self.clock)();
        let mut scopes_out = Vec::new();
        let (mut evicted, mut expired) = (0, 0);
        if let Ok(mut scopes) = self.scopes.lock() {
            sweep(&mut scopes, now);
            evicted = scopes.evicted;
            expired = scopes.expired;
            // Most recently used first.
            for (_, s) in scopes.map.iter() {
                scopes_out.push(ScopeHealth {
                    age_ms: now.saturating_duration_since(s.created).as_millis() as u64,
                    idle_ms: now.saturating_duration_since(s.last_used).as_millis() as u64,
                    latency: complete(Stage::ALL, |k| {
                        s.stages.get(k).map(Ring::summary).unwrap_or_default()
                    }),
                    purposes: complete(Purpose::ALL, |k| s.purposes.get(k).copied().unwrap_or(0)),
                    outcomes: complete(Outcome::ALL, |k| s.outcomes.get(k).copied().unwrap_or(0)),
                    degradations: complete(Degradation::ALL, |k| {
                        s.degradations.get(k).copied().unwrap_or(0)
                    }),
                });
            }
        }
        let totals = self.totals.lock().map(|t| t.clone()).unwrap_or_default();
        Health {
            generated_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            embedder,
            scope_capacity: MAX_SCOPES as u64,
            scope_ttl_ms: SCOPE_TTL.as_millis() as u64,
            scopes_evicted: evicted,
            scopes_expired: expired,
            scopes: scopes_out,
            process: ProcessHealth {
                outcomes: complete(Outcome::ALL, |k| totals.get(k).copied().unwrap_or(0)),
                gauges: self.gauges.snapshot(),
            },
        }
    }
}

fn sweep(scopes: &mut Scopes, now: Instant) {
    let stale: Vec<String> = scopes
        .map
        .iter()
        .filter(|(_, s)| now.saturating_duration_since(s.last_used) > SCOPE_TTL)
        .map(|(k, _)| k.clone())
        .collect();
    for key in stale {
        scopes.map.pop(&key);
        scopes.expired += 1;
    }
}

/// Every key of a closed enum, zero-filled where nothing was recorded.
fn complete<K: Copy + Ord, V>(keys: &[K], value: impl Fn(&K) -> V) -> BTreeMap<K, V> {
    keys.iter().map(|k| (*k, value(k))).collect()
}

/// One retrieval in flight. Settled exactly once: by `finish`, or on drop (as `cancelled`,
/// or `failed` when dropped by a panic).
pub struct Execution {
    collector: Option<Arc<Collector>>,
    scope: String,
    purpose: Purpose,
    started: Instant,
    record: Settlement,
}

impl Execution {
    /// A stage's duration.
    pub fn stage(&mut self, stage: Stage, took: Duration) {
        self.record
            .stages
            .push((stage, took.as_secs_f64() * 1000.0));
    }

    /// Times `f` as `stage`.
    pub fn time<T>(&mut self, stage: Stage, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.stage(stage, start.elapsed());
        out
    }

    /// A cause of degradation (each counted once per retrieval).
    pub fn degrade(&mut self, cause: Degradation) {
        if !self.record.degradations.contains(&cause) {
            self.record.degradations.push(cause);
        }
    }

    pub fn degraded(&self) -> &[Degradation] {
        &self.record.degradations
    }

    /// Settles with `outcome` (and the total time).
    pub fn finish(mut self, outcome: Outcome) {
        self.settle(outcome);
    }

    fn settle(&mut self, outcome: Outcome) {
        let Some(collector) = self.collector.take() else {
            return;
        };
        let total = self.started.elapsed();
        self.stage(Stage::Total, total);
        let record = std::mem::take(&mut self.record);
        // A collector bug must never become the caller's: swallow any panic.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            collector.settle(&self.scope, self.purpose, outcome, record)
        }));
    }
}

impl Drop for Execution {
    fn drop(&mut self) {
        let outcome = if std::thread::panicking() {
            Outcome::Failed
        } else {
            Outcome::Cancelled
        };
        self.settle(outcome);
    }
}

/// The health DTO: every enum-keyed map complete, a missing latency `null`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub generated_unix_ms: u64,
    /// The embedder answering queries now (`None`: retrieval is off).
    pub embedder: Option<EmbedderHealth>,
    pub scope_capacity: u64,
    pub scope_ttl_ms: u64,
    pub scopes_evicted: u64,
    pub scopes_expired: u64,
    /// Per-scope state, most recently used first; scopes are not named.
    pub scopes: Vec<ScopeHealth>,
    /// Process-wide numbers (not per scope).
    pub process: ProcessHealth,
}

/// Which embedder answers queries, why it is not the one preferred, and its breaker.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmbedderHealth {
    pub kind: EmbedderKind,
    /// Why the neural model is not in use (`None`: it is, or none was wanted).
    pub fallback: Option<Fallback>,
    pub dimensions: u64,
    pub breaker: Option<BreakerSnapshot>,
    /// Every place the neural model was looked for, in order, and whether it was there.
    /// The only text in the health snapshot: folders on the person's own computer, shown
    /// to them so they can put the model where Sextant looks.
    #[serde(default)]
    pub searched: Vec<SearchedPlace>,
}

/// One place the neural model was looked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchedPlace {
    pub place: ModelPlace,
    pub path: String,
    /// Every model file is there.
    pub found: bool,
}

/// Where the neural model may be, in the order Sextant looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ModelPlace {
    /// The folder given on the command line (`--model-dir`).
    CommandLine,
    /// `SEXTANT_EMBEDDING_MODEL_DIR`.
    Environment,
    /// The per-user models folder every entry point shares (where `sextant models
    /// install` and `./dev demo` put it).
    UserModels,
    /// The app's own data folder (where earlier versions looked).
    AppData,
    /// Beside the installed program (the package carries it there).
    Installed,
}

/// Why retrieval fell back to the lexicon embedder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Fallback {
    /// No model folder was found.
    ModelNotFound,
    /// A model folder was found but did not load.
    ModelFailedToLoad,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScopeHealth {
    pub age_ms: u64,
    pub idle_ms: u64,
    pub latency: BTreeMap<Stage, Latency>,
    pub purposes: BTreeMap<Purpose, u64>,
    pub outcomes: BTreeMap<Outcome, u64>,
    pub degradations: BTreeMap<Degradation, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessHealth {
    pub outcomes: BTreeMap<Outcome, u64>,
    pub gauges: ProcessGauges,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessGauges {
    pub extraction_queue_depth: u64,
    pub extraction_oldest_age_ms: u64,
    pub embedding_backlog: u64,
    pub open_stores: u64,
    pub open_stores_high_water: u64,
    pub provider_queued: u64,
    pub provider_admitted: u64,
    pub provider_rate_limited: u64,
    pub provider_capacity_rejected: u64,
    pub provider_deadline: u64,
    pub provider_aborted: u64,
    pub provider_late_settled: u64,
}
