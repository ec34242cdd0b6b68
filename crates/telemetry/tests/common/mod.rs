//! Helpers shared by the data-driven tests: fixture paths and the `hex:` byte notation.
#![allow(dead_code)]

use std::path::PathBuf;

pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

pub fn load_json(rel: &str) -> serde_json::Value {
    let path = fixture(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `"hex:0a0b"` → bytes; any other string → its UTF-8 bytes.
pub fn bytes_of(s: &str) -> Vec<u8> {
    match s.strip_prefix("hex:") {
        Some(h) => (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("fixture hex"))
            .collect(),
        None => s.as_bytes().to_vec(),
    }
}
