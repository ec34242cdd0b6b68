//! There is one way for a door to get a listening socket: `Guard::listen`. This walks every
//! crate's source (outside tests) and fails on any other listener, so a door added later
//! cannot skip the guard – it would have to bind its own socket, and this names where.

use std::path::{Path, PathBuf};

/// Code that binds a listener; comments are not code.
const LISTENS: &[&str] = &[
    "TcpListener::bind(",
    "UnixListener::bind(",
    "TcpSocket::new_v4(",
    "TcpSocket::new_v6(",
    "std::net::TcpListener",
];

/// Listeners that are not doors, and why.
const NOT_DOORS: &[(&str, &str)] = &[
    ("crates/guard/src/lib.rs", "the guard itself"),
    (
        "crates/providers/src/script.rs",
        "the scripted model provider the tests talk to (feature `script`, never in the app)",
    ),
    (
        "crates/postgres/src/test_server.rs",
        "asks the system for a free port for the tests' PostgreSQL server and closes it at \
         once (feature `test-server`, never in the app)",
    ),
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "tests" | "benches" | "examples" | "target") {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_listener_is_bound_outside_the_guard() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["crates", "src-tauri/src"] {
        sources(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "the walk found the workspace's sources");
    let mut found = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if NOT_DOORS.iter().any(|(f, _)| *f == relative) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit tests at the bottom of a file may bind what they like.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            if LISTENS.iter().any(|l| line.contains(l)) {
                found.push(format!("{relative}:{}: {line}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a listener outside sextant_guard::Guard::listen – a door must take its socket from \
         the guard (and get a DoorKind, so the attack matrix walks it):\n{}",
        found.join("\n")
    );
}
