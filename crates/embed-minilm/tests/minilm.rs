//! The embedder against the real all-MiniLM-L6-v2 files: values from an independent numpy
//! forward pass (`reference.py` → `reference.json`), masking, normalising, meaning, and the
//! errors a person sees when the model is missing.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sextant_embed_minilm::{Error, MiniLm, DIMENSIONS};

const MODEL_FOLDER: &str = "all-minilm-l6-v2";

/// The model folder: SEXTANT_EMBEDDING_MODEL_DIR, else `$CARGO_TARGET_DIR/models/…`, else
/// `<workspace>/target/models/…`. No folder is a failure, not a skip: a skipped test
/// would let a broken embedder through.
fn model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SEXTANT_EMBEDDING_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([workspace.join("target")])
        .map(|target| target.join("models").join(MODEL_FOLDER))
        .collect::<Vec<_>>();
    match candidates.iter().find(|dir| dir.is_dir()) {
        Some(dir) => dir.clone(),
        None => panic!(
            "the all-MiniLM-L6-v2 model is not in any of {candidates:?}: run `./dev test` \
             (it fetches the model), or set SEXTANT_EMBEDDING_MODEL_DIR to its folder"
        ),
    }
}

/// Loaded once: the tests share one model, as the application does.
fn model() -> &'static MiniLm {
    static MODEL: OnceLock<MiniLm> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = model_dir();
        MiniLm::load(&dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
    })
}

fn embed_one(text: &str) -> Vec<f32> {
    model().embed(&[text]).unwrap().remove(0)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    // The vectors are unit length, so the dot product is the cosine.
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[derive(serde::Deserialize)]
struct Reference {
    sentences: Vec<RefSentence>,
    cosines: Vec<RefCosine>,
}

#[derive(serde::Deserialize)]
struct RefSentence {
    text: String,
    first_dims: Vec<f32>,
}

#[derive(serde::Deserialize)]
struct RefCosine {
    a: usize,
    b: usize,
    cosine: f32,
}

/// How far from the float64 reference an f32 value may be. This code lands within 1e-6 of
/// it; the tanh approximation of GELU in place of the erf form is already 1.7e-4 off, so
/// a looser bound (say 1e-3) would let that bug through.
const TOLERANCE: f32 = 2e-5;

#[test]
fn matches_the_numpy_reference() {
    let reference: Reference =
        serde_json::from_str(include_str!("reference.json")).expect("reference.json parses");
    let texts: Vec<&str> = reference
        .sentences
        .iter()
        .map(|s| s.text.as_str())
        .collect();
    // One batch of all four: the short ones are padded to the long one's length, so this
    // also checks that padding changes nothing.
    let vectors = model().embed(&texts).unwrap();
    assert_eq!(vectors.len(), texts.len());
    for (n, (sentence, vector)) in reference.sentences.iter().zip(&vectors).enumerate() {
        let start: String = sentence.text.chars().take(40).collect();
        for (i, (&want, &got)) in sentence.first_dims.iter().zip(vector).enumerate() {
            assert!(
                (want - got).abs() < TOLERANCE,
                "sentence {n} ({start:?}…): dim {i} is {got}, the reference says {want}"
            );
        }
    }
    for pair in &reference.cosines {
        let got = cosine(&vectors[pair.a], &vectors[pair.b]);
        assert!(
            (pair.cosine - got).abs() < TOLERANCE,
            "cosine of sentences {} and {} is {got}, the reference says {}",
            pair.a,
            pair.b,
            pair.cosine
        );
    }
}

#[test]
fn a_text_embeds_the_same_alone_and_beside_a_longer_one() {
    let short = "motor temperature";
    let long = "The ground station logged the rover's wheel current, battery voltage and \
                motor temperature for the whole drive, then the operator replayed the \
                capture at double speed to find where the current spiked.";
    let alone = embed_one(short);
    let batched = model().embed(&[short, long]).unwrap();
    for (i, (a, b)) in alone.iter().zip(&batched[0]).enumerate() {
        assert!(
            (a - b).abs() < 1e-4,
            "dim {i}: {a} alone, {b} in a batch: padding leaks into the vector"
        );
    }
    // And the order of the output is the order of the input.
    let long_alone = embed_one(long);
    assert!(cosine(&long_alone, &batched[1]) > 0.9999);
}

#[test]
fn many_texts_come_back_in_order_across_batches() {
    // More than two forward passes' worth, of lengths from 5 to ~100 word pieces (the
    // long ones go fewer to a batch), so sorting by length and splitting into batches
    // must all be undone.
    let texts: Vec<String> = (0..70)
        .map(|i| format!("reading {i} {}", "of the sensor ".repeat(i % 9 * 4)))
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let together = model().embed(&texts).unwrap();
    assert_eq!(together.len(), texts.len());
    for (text, vector) in texts.iter().zip(&together) {
        let alone = embed_one(text);
        let worst = alone
            .iter()
            .zip(vector)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(worst < 1e-4, "{text:?} differs by {worst} in the big batch");
    }
}

#[test]
fn vectors_are_unit_length_and_384_wide() {
    let texts = [
        "hi",
        "the dashboard is sluggish",
        "",
        "数据",
        "x ".repeat(600).as_str(),
    ]
    .map(str::to_owned);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = model().embed(&texts).unwrap();
    assert_eq!(vectors.len(), texts.len());
    for (text, v) in texts.iter().zip(&vectors) {
        assert_eq!(v.len(), DIMENSIONS);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{text:?}: norm {norm}");
    }
}

#[test]
fn no_texts_give_no_vectors() {
    assert!(model().embed(&[]).unwrap().is_empty());
}

#[test]
fn related_texts_are_closer_than_unrelated_ones() {
    let query = embed_one("the dashboard is sluggish");
    let related = cosine(&query, &embed_one("plot latency is high"));
    let unrelated = cosine(&query, &embed_one("the battery is fully charged"));
    assert!(
        related > unrelated,
        "related {related} should beat unrelated {unrelated}"
    );
}

#[test]
fn a_missing_folder_says_which_file_and_what_to_do() {
    let dir = std::env::temp_dir().join("sextant-embed-minilm-no-such-folder");
    let err = MiniLm::load(&dir)
        .err()
        .expect("loading from no folder fails");
    assert!(matches!(err, Error::MissingFile { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&dir.display().to_string()), "{message}");
    assert!(message.contains("config.json"), "{message}");
    assert!(message.contains("sextant models install"), "{message}");
    assert!(message.contains("SEXTANT_EMBEDDING_MODEL_DIR"), "{message}");
}

#[test]
fn a_missing_tokenizer_says_which_file_and_what_to_do() {
    let real = model_dir();
    let dir = std::env::temp_dir().join(format!(
        "sextant-embed-minilm-no-tokenizer-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["config.json", "model.safetensors"] {
        // A link, not a copy: the weights are 90 MB.
        let link = dir.join(file);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(real.join(file), &link).unwrap();
    }
    let result = MiniLm::load(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let err = result.err().expect("loading without tokenizer.json fails");
    let message = err.to_string();
    assert!(
        matches!(
            err,
            Error::MissingFile {
                file: "tokenizer.json",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(message.contains("tokenizer.json"), "{message}");
    assert!(message.contains(&dir.display().to_string()), "{message}");
    assert!(message.contains("sextant models install"), "{message}");
}

#[test]
fn a_bad_config_is_reported_as_such() {
    let real = model_dir();
    let dir = std::env::temp_dir().join(format!(
        "sextant-embed-minilm-bad-config-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["tokenizer.json", "model.safetensors"] {
        let link = dir.join(file);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(real.join(file), &link).unwrap();
    }
    let config = std::fs::read_to_string(real.join("config.json")).unwrap();
    std::fs::write(
        dir.join("config.json"),
        config.replace("\"hidden_size\": 384", "\"hidden_size\": 768"),
    )
    .unwrap();
    let result = MiniLm::load(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let err = result.err().expect("a 768-wide config is refused");
    assert!(matches!(err, Error::Config { .. }), "{err:?}");
    assert!(err.to_string().contains("hidden_size"), "{err}");
}
