//! Embedding cost on this machine: one short search query (the latency a person waits
//! for), and a batch of 32 rows of about 20 words (the throughput of indexing).
//!
//! Finds the model as the tests do: SEXTANT_EMBEDDING_MODEL_DIR, else
//! `$CARGO_TARGET_DIR/models/all-minilm-l6-v2`, else `<workspace>/target/models/…`.

use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sextant_embed_minilm::MiniLm;

fn model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SEXTANT_EMBEDDING_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([workspace.join("target")])
        .map(|target| target.join("models/all-minilm-l6-v2"))
        .find(|dir| dir.is_dir())
        .expect("no all-MiniLM-L6-v2 model folder: run `./dev test` (it fetches the model)")
}

fn bench(c: &mut Criterion) {
    let model = MiniLm::load(&model_dir()).expect("model loads");

    c.bench_function("embed one short query", |b| {
        b.iter(|| model.embed(&["why is the dashboard sluggish"]).unwrap())
    });

    let rows: Vec<String> = (0..32)
        .map(|i| {
            format!(
                "Row {i}: the ground station logged wheel current, battery voltage and motor \
                 temperature while the rover climbed the {i}th slope"
            )
        })
        .collect();
    let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
    let mut group = c.benchmark_group("embed batch");
    group.throughput(Throughput::Elements(rows.len() as u64));
    group.bench_function("32 rows of ~20 words", |b| {
        b.iter(|| model.embed(&rows).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
