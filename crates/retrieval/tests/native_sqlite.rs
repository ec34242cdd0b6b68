//! The native-SQLite gate (spec 50, Layer 1): the bundled SQLite on a real file has FTS5
//! with the store's tokenizer options, contentless-delete, fts5vocab and JSON. It never
//! skips; with SEXTANT_REQUIRE_NATIVE_SQLITE=1 (CI) it also proves no native test of the
//! manifest is switched off.

use std::path::Path;

#[test]
fn the_bundled_sqlite_has_everything_retrieval_needs() {
    let dir = tempfile::tempdir().unwrap();
    let checks = sextant_retrieval::sqlite_gate::run(dir.path()).unwrap();
    for c in &checks {
        eprintln!(
            "{:<12} {} {}",
            c.name,
            if c.ok { "ok" } else { "MISSING" },
            c.detail
        );
    }
    let missing: Vec<_> = checks.iter().filter(|c| !c.ok).collect();
    assert!(missing.is_empty(), "the SQLite build lacks: {missing:?}");
    let names: Vec<_> = checks.iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "version",
            "fts5",
            "fts5vocab",
            "json",
            "write-read",
            "reopen"
        ]
    );
}

#[test]
fn with_native_sqlite_required_no_native_test_is_ignored() {
    if std::env::var("SEXTANT_REQUIRE_NATIVE_SQLITE").as_deref() != Ok("1") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/memory-test-scope.json")).unwrap(),
    )
    .unwrap();
    for test in manifest["tests"].as_array().unwrap() {
        if test["class"] != "native" {
            continue;
        }
        let file = std::fs::read_to_string(root.join(test["path"].as_str().unwrap())).unwrap();
        let name = test["name"].as_str().unwrap();
        let at = file
            .find(&format!("fn {name}("))
            .unwrap_or_else(|| panic!("native test {name} is gone"));
        let before = &file[..at];
        let attrs = &before[before.rfind("#[test]").unwrap_or(at)..];
        assert!(
            !attrs.contains("#[ignore"),
            "native test {name} is ignored: CI requires it to run"
        );
    }
}
