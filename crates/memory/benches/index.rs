//! What the memory costs a request: building the index at 100 facts of 400 characters
//! (p50 / p95 of `request_index`, which searches, orders, formats and touches) and the bytes
//! it adds – `cargo bench -p sextant-memory --bench index`.

use std::sync::Arc;
use std::time::Instant;

use sextant_memory::{Category, MemoryStore, MAX_FACTS, MAX_TEXT_CHARS};
use sextant_retrieval::diagnostics::Collector;
use sextant_retrieval::{Embedder, LexiconEmbedder};

const MESSAGES: &[&str] = &[
    "which baud rate for the IMU?",
    "plot the chamber temperature",
    "串口断开后怎么办",
    "what topic carries the PSU voltage",
    "add a gauge for the RPM",
];

fn fact(i: usize) -> String {
    let topics = [
        "baud rate of the IMU on /dev/ttyACM0",
        "chamber setpoint register 40001",
        "MQTT topic lab/bench3/psu/voltage",
        "CAN id 0x18FF50E5 EngineSpeed",
        "串口断开后自动重连三次",
    ];
    let mut s = format!("fact {i}: {} ", topics[i % topics.len()]);
    while s.chars().count() < MAX_TEXT_CHARS {
        s.push_str("and the bench keeps every capture in its own folder ");
    }
    s.chars().take(MAX_TEXT_CHARS).collect()
}

fn run(embedder: Arc<dyn Embedder>) {
    let dir = std::env::temp_dir().join(format!("sextant-memory-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut m = MemoryStore::open(
        &dir.join("memory.sqlite"),
        embedder.clone(),
        Arc::new(Collector::new()),
    )
    .unwrap();
    for i in 0..MAX_FACTS {
        m.add(Category::Reference, &fact(i), None).unwrap();
    }
    let mut samples = Vec::new();
    let mut bytes = 0;
    for round in 0..40 {
        let t = Instant::now();
        let (text, _) = m
            .request_index(MESSAGES[round % MESSAGES.len()], None)
            .unwrap()
            .unwrap();
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
        bytes = bytes.max(text.len());
    }
    samples.sort_by(f64::total_cmp);
    let rank =
        |p: f64| samples[((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1];
    println!(
        "{:<28} 100 facts × 400 chars: index p50 {:.2} ms, p95 {:.2} ms, at most {} bytes",
        embedder.profile().id,
        rank(0.5),
        rank(0.95),
        bytes
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    run(Arc::new(LexiconEmbedder::new()));
}
