//! Retrieval latency and index build rate at 1 k, 10 k and 100 k rows with the lexicon
//! embedder (the neural one is measured in `sextant-embed-minilm`'s bench). Prints p50 and
//! p95 per size, query embedding included: `cargo bench -p sextant-retrieval --bench recall`.

use std::sync::Arc;
use std::time::Instant;

use rusqlite::Connection;
use sextant_retrieval::diagnostics::{Collector, Purpose};
use sextant_retrieval::synthetic;
use sextant_retrieval::{Doc, Embedder, Index, LexiconEmbedder, Query, Scope, Track};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Builds a corpus of `rows` in a file database and measures `track` over the queries.
pub fn run(embedder: Arc<dyn Embedder>, rows: usize, tracks: &[Track]) {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join("bench.sqlite")).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
        .unwrap();
    let index = Index::new("bench", embedder.clone(), Arc::new(Collector::new())).unwrap();
    index.create(&conn).unwrap();
    let scopes = 8;
    let data: Vec<_> = (0..rows).map(|i| synthetic::row(7, i, scopes)).collect();
    let started = Instant::now();
    conn.execute_batch("BEGIN").unwrap();
    for chunk in data.chunks(256) {
        let docs: Vec<Doc> = chunk
            .iter()
            .map(|(id, scope, content)| Doc {
                id,
                scope,
                kind: "semantic",
                content,
                importance: 0.5,
            })
            .collect();
        index.put(&conn, &docs).unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();
    let build = started.elapsed().as_secs_f64();
    println!(
        "{:<28} {:>7} rows: build {:>8.0} rows/s",
        embedder.profile().id,
        rows,
        rows as f64 / build
    );
    for &track in tracks {
        // Warm: the first query of a scope reads its vectors into memory.
        for s in 0..scopes {
            let scope = format!("scope-{s}");
            index
                .search(
                    &conn,
                    &Query {
                        scope: Scope::One(&scope),
                        text: "warm",
                        track,
                        limit: 10,
                        purpose: Purpose::Search,
                    },
                )
                .unwrap();
        }
        let mut samples = Vec::new();
        let rounds = if rows >= 100_000 { 4 } else { 16 };
        for round in 0..rounds {
            for (q, text) in synthetic::QUERIES.iter().enumerate() {
                let scope = format!("scope-{}", (q + round) % scopes);
                let t = Instant::now();
                let hits = index
                    .search(
                        &conn,
                        &Query {
                            scope: Scope::One(&scope),
                            text,
                            track,
                            limit: 10,
                            purpose: Purpose::Search,
                        },
                    )
                    .unwrap();
                samples.push(t.elapsed().as_secs_f64() * 1000.0);
                std::hint::black_box(hits);
            }
        }
        samples.sort_by(f64::total_cmp);
        println!(
            "{:<28} {:>7} rows: {:<6} p50 {:>7.2} ms  p95 {:>7.2} ms  ({} queries)",
            embedder.profile().id,
            rows,
            track.name(),
            percentile(&samples, 0.5),
            percentile(&samples, 0.95),
            samples.len()
        );
    }
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: one small size only.
    let full = std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if full {
        &[1_000, 10_000, 100_000]
    } else {
        &[1_000]
    };
    for &rows in sizes {
        run(Arc::new(LexiconEmbedder::new()), rows, &Track::ALL);
    }
}
