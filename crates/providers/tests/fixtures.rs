//! Every transcript under fixtures/providers is a valid script and is replayed by a test.

use sextant_providers::script::{fixtures_dir, Script};

#[test]
fn every_transcript_loads_and_is_used() {
    let tests: String = ["anthropic.rs", "open_ai.rs"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests")
                    .join(f),
            )
            .unwrap()
        })
        .collect();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(fixtures_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let script = Script::load(&path);
            assert!(!script.turns.is_empty(), "{} has no turns", path.display());
            assert!(
                !script.description.is_empty(),
                "{} says not what it is",
                path.display()
            );
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            assert!(
                tests.contains(&format!("\"{name}\"")),
                "no test replays {name}"
            );
            names.push(name);
        }
    }
    assert!(names.len() >= 20, "found only {names:?}");
}
