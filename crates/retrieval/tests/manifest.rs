//! The test-scope manifest (`tests/memory-test-scope.json`) is complete and honest: every
//! retrieval and memory test is classified once, what it names exists, native tests stay
//! out of the portable set, and every exemption says why.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

const CLASSES: [&str; 4] = ["behavior", "native", "eval", "perf"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `#[test]` (and `#[tokio::test]`) functions of a Rust file.
fn tests_in(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = source;
    loop {
        let next = ["#[test]", "#[tokio::test]"]
            .iter()
            .filter_map(|m| rest.find(m).map(|at| (at, m.len())))
            .min();
        let Some((at, len)) = next else { break };
        rest = &rest[at + len..];
        // Skip further attributes (`#[ignore]`, `#[should_panic]`).
        let mut body = rest.trim_start();
        while body.starts_with("#[") {
            body = body[body.find(']').map_or(body.len(), |i| i + 1)..].trim_start();
        }
        let body = body.strip_prefix("async ").unwrap_or(body);
        if let Some(f) = body.strip_prefix("fn ") {
            let name: String = f
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every problem of a manifest, as sentences (empty: it is right).
fn problems(manifest: &Value, root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let entries = manifest["tests"].as_array().cloned().unwrap_or_default();
    let exemptions = manifest["exemptions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let portable: HashSet<&str> = manifest["portable"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut owned = HashSet::new();
    for e in entries.iter().chain(&exemptions) {
        let (path, name) = (
            e["path"].as_str().unwrap_or(""),
            e["name"].as_str().unwrap_or(""),
        );
        if !owned.insert((path.to_string(), name.to_string())) {
            out.push(format!("{path}::{name} is listed twice"));
        }
        match std::fs::read_to_string(root.join(path)) {
            Err(_) => out.push(format!("{path} does not exist")),
            Ok(src) => {
                let exists = if name == "main" {
                    src.contains("fn main(") || src.contains("criterion_main!")
                } else {
                    tests_in(&src).iter().any(|t| t == name)
                };
                if !exists {
                    out.push(format!("{path} has no test `{name}`"));
                }
            }
        }
    }
    for e in &entries {
        let path = e["path"].as_str().unwrap_or("");
        let class = e["class"].as_str().unwrap_or("");
        if !CLASSES.contains(&class) {
            out.push(format!(
                "{path}::{}: class `{class}` is not one of {CLASSES:?}",
                e["name"]
            ));
        }
        if class == "native" && portable.contains(path) {
            out.push(format!(
                "{path}::{} is native but its file is in the portable set",
                e["name"]
            ));
        }
    }
    for e in &exemptions {
        if e["reason"].as_str().is_none_or(|r| r.trim().is_empty()) {
            out.push(format!(
                "the exemption of {}::{} gives no reason",
                e["path"], e["name"]
            ));
        }
    }
    // Portable files must not reach for the native SQLite.
    for path in &portable {
        if let Ok(src) = std::fs::read_to_string(root.join(path)) {
            if src.contains("rusqlite") || src.contains("Connection::open") {
                out.push(format!("{path} is in the portable set but opens SQLite"));
            }
        }
    }
    // Every test in scope is classified.
    for dir in manifest["scope"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        for file in files {
            let rel = file
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let rel = rel.trim_start_matches("./").to_string();
            for name in tests_in(&std::fs::read_to_string(&file).unwrap()) {
                if !owned.contains(&(rel.clone(), name.clone())) {
                    out.push(format!(
                        "{rel}::{name} is not classified in tests/memory-test-scope.json"
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn the_manifest_classifies_every_memory_test_once() {
    let root = root().canonicalize().unwrap();
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/memory-test-scope.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["schema"], 1);
    let found = problems(&manifest, &root);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_checker_finds_each_kind_of_problem() {
    let root = root().canonicalize().unwrap();
    let good: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/memory-test-scope.json")).unwrap(),
    )
    .unwrap();
    type Mutation = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Mutation)> = vec![
        (
            "does not exist",
            Box::new(|m| m["tests"][0]["path"] = "crates/retrieval/tests/nope.rs".into()),
        ),
        (
            "listed twice",
            Box::new(|m| {
                let first = m["tests"][0].clone();
                m["tests"].as_array_mut().unwrap().push(first);
            }),
        ),
        (
            "is not classified",
            Box::new(|m| {
                let test = m["tests"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .position(|t| {
                        t["name"] != "main"
                            && t["path"].as_str().unwrap().starts_with("crates/retrieval/")
                    })
                    .unwrap();
                m["tests"].as_array_mut().unwrap().remove(test);
            }),
        ),
        (
            "in the portable set",
            Box::new(|m| {
                let native = m["tests"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .position(|t| t["class"] == "native")
                    .unwrap();
                let path = m["tests"][native]["path"].clone();
                m["portable"].as_array_mut().unwrap().push(path);
            }),
        ),
        (
            "gives no reason",
            Box::new(|m| {
                let first = m["tests"].as_array_mut().unwrap().remove(0);
                m["exemptions"].as_array_mut().unwrap().push(serde_json::json!({"path": first["path"], "name": first["name"], "reason": " "}));
            }),
        ),
        (
            "is not one of",
            Box::new(|m| m["tests"][0]["class"] = "unit".into()),
        ),
    ];
    for (want, mutate) in cases {
        let mut m = good.clone();
        mutate(&mut m);
        let found = problems(&m, &root);
        assert!(
            found.iter().any(|p| p.contains(want)),
            "expected a problem containing `{want}`, got {found:#?}"
        );
    }
}
