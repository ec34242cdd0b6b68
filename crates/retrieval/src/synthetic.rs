//! Synthetic corpora for benchmarks: deterministic, domain-shaped rows (ports, baud rates,
//! topics, CAN ids, paths, Chinese facts) in any number, and queries over them, so latency
//! can be measured at sizes no hand-written fixture reaches.

use std::sync::Arc;
use std::time::Instant;

use rusqlite::Connection;

use crate::diagnostics::{Collector, Purpose};
use crate::{Doc, Embedder, Index, Query, Scope, Track};

/// A small deterministic generator (xorshift); the same seed gives the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const DEVICES: &[&str] = &[
    "rover",
    "bench PSU",
    "thermal chamber",
    "drone",
    "BMS",
    "weather mast",
    "motor controller",
    "GPS puck",
];
const PORTS: &[&str] = &[
    "/dev/ttyUSB0",
    "/dev/ttyACM1",
    "COM7",
    "/dev/ttyS3",
    "192.168.4.1:502",
    "can0",
    "vcan1",
];
const RATES: &[&str] = &["9600", "57600", "115200", "230400", "921600", "500k", "1M"];
const TOPICS: &[&str] = &[
    "lab/bench3/psu/voltage",
    "sensors/+/temp",
    "rover/imu/accel",
    "field/mast/wind",
];
const SIGNALS: &[&str] = &[
    "EngineSpeed",
    "BMS_PackVoltage",
    "CellTempMax",
    "WheelSpeedFL",
    "ThrottlePos",
];
const PATHS: &[&str] = &[
    "parsers/imu.lua",
    "projects/rover/telemetry.json",
    "scripts/decode_frame.js",
    "crates/x/y.rs",
];
const ZH: &[&str] = &[
    "串口断开后自动重连三次",
    "我更喜欢用深色主题看波形",
    "电池电压低于三点三伏要报警",
    "温度曲线每秒刷新一次",
];
const VERBS: &[&str] = &[
    "runs at",
    "was moved to",
    "reports",
    "drops frames on",
    "must not exceed",
    "logs to",
];

/// Row `i` of a synthetic corpus: (id, scope, content). Scopes cycle over `scopes`.
pub fn row(seed: u64, i: usize, scopes: usize) -> (String, String, String) {
    let mut r = Rng(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    for _ in 0..3 {
        r.next();
    }
    let content = match r.next() % 5 {
        0 => format!(
            "The {} on {} {} {} baud",
            r.pick(DEVICES),
            r.pick(PORTS),
            r.pick(VERBS),
            r.pick(RATES)
        ),
        1 => format!(
            "The {} publishes {} on topic {}",
            r.pick(DEVICES),
            r.pick(SIGNALS),
            r.pick(TOPICS)
        ),
        2 => format!(
            "CAN id 0x{:X} carries {} for the {}",
            0x100 + r.next() % 0x700,
            r.pick(SIGNALS),
            r.pick(DEVICES)
        ),
        3 => format!(
            "The parser in {} decodes the {} frames; see parseFrame",
            r.pick(PATHS),
            r.pick(DEVICES)
        ),
        _ => format!("{}（{}）", r.pick(ZH), r.pick(DEVICES)),
    };
    (
        format!("r{i:07}"),
        format!("scope-{}", i % scopes.max(1)),
        format!("{content} #{i}"),
    )
}

/// Query texts of the kinds people ask, for latency runs.
pub const QUERIES: &[&str] = &[
    "what baud rate does the rover use",
    "which topic carries BMS_PackVoltage",
    "CAN id for EngineSpeed",
    "parsers/imu.lua frame decoding",
    "串口断开重连",
    "the uart bitrate of the GPS puck",
    "where does the thermal chamber log to",
    "parseFrame in decode_frame.js",
];

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Builds a corpus of `rows` in a file database, prints its build rate, and prints p50 and
/// p95 search latency (query embedding included) per track.
pub fn measure(embedder: Arc<dyn Embedder>, rows: usize, tracks: &[Track]) {
    let dir = std::env::temp_dir().join(format!("sextant-bench-{}-{rows}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bench.sqlite");
    let _ = std::fs::remove_file(&path);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
        .unwrap();
    let index = Index::new("bench", embedder.clone(), Arc::new(Collector::new())).unwrap();
    index.create(&conn).unwrap();
    let scopes = 8;
    let build = build_corpus(&conn, &index, rows, scopes);
    println!(
        "{:<28} {:>7} rows: build {:>8.0} rows/s",
        embedder.profile().id,
        rows,
        rows as f64 / build
    );
    for &track in tracks {
        let samples = latency_samples(&conn, &index, track, rows, scopes);
        println!(
            "{:<28} {:>7} rows: {:<6} p50 {:>7.2} ms  p95 {:>7.2} ms  ({} queries)",
            embedder.profile().id,
            rows,
            track.name(),
            percentile(&samples, 0.5),
            percentile(&samples, 0.95),
            samples.len()
        );
        if track == Track::Hybrid {
            print_hybrid_stages(&index, rows);
        }
    }
    drop(conn);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Puts `rows` synthetic rows over `scopes` scopes into the index, in one transaction;
/// the seconds it took.
fn build_corpus(conn: &Connection, index: &Index, rows: usize, scopes: usize) -> f64 {
    let data: Vec<_> = (0..rows).map(|i| row(7, i, scopes)).collect();
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
        index.put(conn, &docs).unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();
    started.elapsed().as_secs_f64()
}

/// One search of `scope` for `text` on `track`: its ten best hits.
fn search_once(
    conn: &Connection,
    index: &Index,
    scope: &str,
    text: &str,
    track: Track,
) -> Vec<crate::store::Hit> {
    index
        .search(
            conn,
            &Query {
                scope: Scope::One(scope),
                text,
                track,
                limit: 10,
                purpose: Purpose::Search,
            },
        )
        .unwrap()
}

/// Every scope warmed, then each of [`QUERIES`] timed over the scopes in rounds: the
/// latencies in ms, sorted.
fn latency_samples(
    conn: &Connection,
    index: &Index,
    track: Track,
    rows: usize,
    scopes: usize,
) -> Vec<f64> {
    // Warm: the first query of a scope reads its vectors into memory.
    for s in 0..scopes {
        search_once(conn, index, &format!("scope-{s}"), "warm", track);
    }
    let mut samples = Vec::new();
    let rounds = if rows >= 100_000 { 4 } else { 16 };
    for round in 0..rounds {
        for (q, text) in QUERIES.iter().enumerate() {
            let scope = format!("scope-{}", (q + round) % scopes);
            let t = Instant::now();
            let hits = search_once(conn, index, &scope, text, track);
            samples.push(t.elapsed().as_secs_f64() * 1000.0);
            std::hint::black_box(hits);
        }
    }
    samples.sort_by(f64::total_cmp);
    samples
}

/// Where the hybrid track's time goes, from the store's own diagnostics (the latest
/// scope).
fn print_hybrid_stages(index: &Index, rows: usize) {
    let health = index.diagnostics().snapshot(None);
    if let Some(scope) = health.scopes.first() {
        let stages: Vec<String> = scope
            .latency
            .iter()
            .filter_map(|(stage, l)| l.p50_ms.map(|p| format!("{stage:?} {p:.2}")))
            .collect();
        println!(
            "{:<28} {:>7} rows: hybrid stages p50 ms: {}",
            "",
            rows,
            stages.join(", ")
        );
    }
}
