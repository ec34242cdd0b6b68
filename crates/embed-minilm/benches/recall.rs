//! Retrieval with all-MiniLM-L6-v2: index build rate and hybrid/vector latency (query
//! embedding included) at 1 k and 10 k rows – `cargo bench -p sextant-embed-minilm --bench
//! recall`. Needs the model (`./dev bench` fetches it).

use std::sync::Arc;

use sextant_embed_minilm::MiniLmEmbedder;
use sextant_retrieval::synthetic::measure;
use sextant_retrieval::Track;

fn main() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = sextant_embed_minilm::locate(None, &target)
        .expect("all-MiniLM-L6-v2 not found: run ./dev bench, or set SEXTANT_EMBEDDING_MODEL_DIR");
    let model = Arc::new(MiniLmEmbedder::load(&dir).unwrap());
    let full = std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if full { &[1_000, 10_000] } else { &[200] };
    for &rows in sizes {
        measure(model.clone(), rows, &Track::ALL);
    }
}
