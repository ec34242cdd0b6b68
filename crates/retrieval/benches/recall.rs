//! Retrieval latency and index build rate at 1 k, 10 k and 100 k rows with the lexicon
//! embedder (the neural one is measured in `sextant-embed-minilm`'s bench). Prints p50 and
//! p95 per size, query embedding included: `cargo bench -p sextant-retrieval --bench recall`.

use std::sync::Arc;

use sextant_retrieval::synthetic::measure;
use sextant_retrieval::{LexiconEmbedder, Track};

fn main() {
    // `cargo test --benches` runs this without `--bench`: one small size only.
    let full = std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if full {
        &[1_000, 10_000, 100_000]
    } else {
        &[1_000]
    };
    for &rows in sizes {
        measure(Arc::new(LexiconEmbedder::new()), rows, &Track::ALL);
    }
}
