//! The diagnostics collector's bounds and guarantees (spec 50, Layer 3).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use sextant_retrieval::diagnostics::{
    Collector, Degradation, Health, Outcome, Purpose, Ring, Stage, MAX_SCOPES, RING_CAPACITY,
    SCOPE_TTL,
};

/// A collector whose clock the test moves.
fn collector() -> (Arc<Collector>, Arc<AtomicU64>) {
    let base = Instant::now();
    let secs = Arc::new(AtomicU64::new(0));
    let clock = secs.clone();
    let c = Collector::with_clock(move || base + Duration::from_secs(clock.load(Ordering::SeqCst)));
    (Arc::new(c), secs)
}

fn record(c: &Arc<Collector>, scope: &str) {
    let mut e = c.begin(scope, Purpose::Recall);
    e.stage(Stage::Keyword, Duration::from_micros(50));
    e.finish(Outcome::Completed);
}

#[test]
fn the_65th_scope_evicts_the_least_recently_used() {
    let (c, secs) = collector();
    for i in 0..MAX_SCOPES {
        secs.store(i as u64, Ordering::SeqCst);
        record(&c, &format!("chat-{i}"));
    }
    // Touch the oldest: now chat-1 is the least recently used.
    record(&c, "chat-0");
    record(&c, "chat-64");
    assert_eq!(c.scope_count(), MAX_SCOPES);
    let h = c.snapshot(None);
    assert_eq!((h.scopes.len(), h.scopes_evicted), (MAX_SCOPES, 1));
    // chat-0 survived with both of its retrievals: the evicted one was chat-1.
    assert!(h
        .scopes
        .iter()
        .any(|s| s.outcomes[&Outcome::Completed] == 2));
    // Process totals survive eviction.
    assert_eq!(
        h.process.outcomes[&Outcome::Completed],
        MAX_SCOPES as u64 + 2
    );
}

#[test]
fn scopes_expire_after_the_ttl_but_only_a_snapshot_or_cleanup_sweeps() {
    let (c, secs) = collector();
    record(&c, "old");
    secs.store(SCOPE_TTL.as_secs() + 1, Ordering::SeqCst);
    record(&c, "new");
    assert_eq!(c.scope_count(), 2, "recording never sweeps");
    c.cleanup();
    assert_eq!(c.scope_count(), 1);
    secs.store(3 * SCOPE_TTL.as_secs(), Ordering::SeqCst);
    let h = c.snapshot(None);
    assert_eq!((h.scopes.len(), h.scopes_expired), (0, 2));
}

#[test]
fn rings_hold_256_refuse_bad_samples_and_rank_by_nearest_rank() {
    let mut r = Ring::default();
    assert_eq!(
        r.summary().p50_ms,
        None,
        "empty: no number, shown as a dash"
    );
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        assert!(!r.push(bad));
    }
    for v in 1..=100 {
        assert!(r.push(v as f64));
    }
    let s = r.summary();
    assert_eq!(
        (s.p50_ms, s.p95_ms, s.max_ms, s.samples),
        (Some(50.0), Some(95.0), Some(100.0), 100)
    );
    for v in 0..300 {
        r.push(1000.0 + v as f64);
    }
    assert_eq!(r.len(), RING_CAPACITY);
    // The oldest went first: only the last 256 of the 1000+ run are left.
    assert_eq!(r.summary().max_ms, Some(1299.0));
    assert_eq!(r.summary().p50_ms, Some(1000.0 + 44.0 + 127.0));
}

fn outcomes(c: &Collector) -> Vec<(Outcome, u64)> {
    let h = c.snapshot(None);
    h.process
        .outcomes
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[test]
fn every_retrieval_settles_exactly_once_even_on_early_return_or_panic() {
    let (c, _) = collector();
    let e = c.begin("s", Purpose::Search);
    e.finish(Outcome::Completed);
    assert_eq!(outcomes(&c), [(Outcome::Completed, 1)]);

    fn early(c: &Arc<Collector>) -> Result<(), ()> {
        let mut e = c.begin("s", Purpose::Search);
        e.degrade(Degradation::StoreError);
        e.degrade(Degradation::StoreError);
        Err(())?;
        e.finish(Outcome::Completed);
        Ok(())
    }
    assert!(early(&c).is_err());
    assert_eq!(
        outcomes(&c),
        [(Outcome::Completed, 1), (Outcome::Cancelled, 1)]
    );

    let c2 = c.clone();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _e = c2.begin("s", Purpose::Injection);
        panic!("a bug mid-retrieval");
    }));
    assert!(panicked.is_err());
    assert_eq!(
        outcomes(&c),
        [
            (Outcome::Completed, 1),
            (Outcome::Cancelled, 1),
            (Outcome::Failed, 1)
        ]
    );
    let h = c.snapshot(None);
    assert_eq!(
        h.scopes[0].degradations[&Degradation::StoreError],
        1,
        "a cause counts once per retrieval"
    );
    assert_eq!(h.scopes[0].purposes[&Purpose::Search], 2);
}

#[test]
fn every_enum_map_is_complete_and_zero_filled() {
    let (c, _) = collector();
    record(&c, "s");
    let h = c.snapshot(None);
    let s = &h.scopes[0];
    assert_eq!(s.latency.len(), Stage::ALL.len());
    assert_eq!(s.purposes.len(), Purpose::ALL.len());
    assert_eq!(s.outcomes.len(), Outcome::ALL.len());
    assert_eq!(s.degradations.len(), Degradation::ALL.len());
    assert_eq!(s.latency[&Stage::Vector].p95_ms, None);
    assert!(s.latency[&Stage::Keyword].p95_ms.is_some());
    let json = serde_json::to_value(&h).unwrap();
    assert!(json["scopes"][0]["latency"]["query_embedding"]["p50Ms"].is_null());
    assert_eq!(
        json["scopes"][0]["degradations"]["candidate_budget_exhausted"],
        0
    );
}

/// Walks a JSON Schema: every string it allows must be one of a closed set.
fn free_text(schema: &Value, defs: &Value, path: &str, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                let name = r.rsplit('/').next().unwrap();
                free_text(&defs[name], defs, &format!("{path}→{name}"), out);
                return;
            }
            let is_string = match map.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
                _ => false,
            };
            if is_string && !map.contains_key("enum") && !map.contains_key("const") {
                out.push(path.to_string());
            }
            for (k, v) in map {
                if k != "$defs" && k != "definitions" {
                    free_text(v, defs, &format!("{path}.{k}"), out);
                }
            }
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| free_text(v, defs, &format!("{path}[{i}]"), out)),
        _ => {}
    }
}

#[test]
fn the_health_dto_has_no_free_text_field() {
    let schema = serde_json::to_value(schemars::schema_for!(Health)).unwrap();
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let mut found = Vec::new();
    free_text(&schema, &defs, "Health", &mut found);
    // The one exception: the folders the model was looked for in – places on the person's
    // own computer, shown to them so they can put the model there; never content.
    found.retain(|f| !f.ends_with("→SearchedPlace.properties.path"));
    assert!(found.is_empty(), "free-text fields: {found:?}");
    // The walk does find one when there is one.
    let mut probe = Vec::new();
    free_text(
        &serde_json::json!({"properties": {"query": {"type": "string"}}}),
        &Value::Null,
        "P",
        &mut probe,
    );
    assert_eq!(probe, ["P.properties.query"]);
}
