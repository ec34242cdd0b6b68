//! A Serial Studio file given as the project (`serve --project X.ssproj`, `call --project`)
//! is imported with its report printed in plain words, and the project has no file: the
//! first save has to be told where, and the `.ssproj` is never overwritten.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as Json;

fn sextant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(args)
        .output()
        .expect("the sextant binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/serial-studio")
        .join(name)
}

/// A copy of a Serial Studio fixture in a temporary folder.
fn copy_of(name: &str, dir: &Path) -> PathBuf {
    let copy = dir.join(name);
    std::fs::copy(fixture(name), &copy).unwrap();
    copy
}

/// What the import report of `name` holds, as `sextant import` prints it.
fn import_report(name: &str) -> String {
    let out = sextant(&["import", fixture(name).to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stderr)
}

fn assert_plain_import_notice(stderr: &str, file: &Path) {
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(
        stderr.contains("is a Serial Studio project: it was imported into a new project"),
        "{stderr}"
    );
    assert!(stderr.contains("Import report"), "{stderr}");
    assert!(
        stderr.contains("saving asks where to save it")
            && stderr.contains(&format!("{name} is never overwritten")),
        "{stderr}"
    );
    // Plain words: no command syntax for the person to decode.
    assert!(!stderr.contains("project.save {"), "{stderr}");
}

#[test]
fn call_with_a_serial_studio_project_prints_its_report_and_leaves_it_without_a_file() {
    for name in ["js-csv.ssproj", "lua-kv.ssproj", "binary-crc.ssproj"] {
        let dir = tempfile::tempdir().unwrap();
        let copy = copy_of(name, dir.path());
        let before = std::fs::read(&copy).unwrap();
        let out = sextant(&["call", "project.file", "--project", copy.to_str().unwrap()]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert_plain_import_notice(&stderr, &copy);
        // The same report `sextant import` prints, line for line.
        let report = import_report(name);
        for line in report.lines().filter(|l| l.trim_start().starts_with("- ")) {
            assert!(
                stderr.contains(line),
                "{name}: missing {line:?} in\n{stderr}"
            );
        }
        if !report.contains("  - ") {
            assert!(stderr.contains("everything was carried over"), "{stderr}");
        }
        let file: Json = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(file["path"], Json::Null, "{name}: the import has no file");

        // Save without a path: there is nowhere to save yet, so the caller must ask.
        let out = sextant(&[
            "call",
            "project.save",
            "{}",
            "--project",
            copy.to_str().unwrap(),
        ]);
        assert!(!out.status.success(), "{name}: saved without a path");
        assert!(
            text(&out.stderr).contains("no file yet"),
            "{}",
            text(&out.stderr)
        );
        assert_eq!(std::fs::read(&copy).unwrap(), before, "{name} untouched");
    }
}

/// `sextant serve --project X.ssproj`: the report is printed at start, `project.file` says
/// there is no file, an edit is not written anywhere (least of all over the `.ssproj`), and
/// a save to a new path works.
#[cfg(unix)]
#[test]
fn serve_with_a_serial_studio_project_imports_it_and_never_overwrites_it() {
    use std::io::{BufRead, BufReader, Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of("js-csv.ssproj", dir.path());
    let before = std::fs::read(&copy).unwrap();
    // Port 0 and the address the server prints: a port picked here and freed could be
    // taken by another process before the server binds it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(["serve", "--api", "--port", "0", "--project"])
        .arg(&copy)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        // The new file goes beside the original: a folder the person allowed.
        .arg("--allow-folder")
        .arg(dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut startup = String::new();
    let addr = loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("sextant serve ended before it listened: {startup}");
        }
        startup.push_str(&line);
        if let Some(rest) = line.strip_prefix("API server listening on ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    let mut stream = std::net::TcpStream::connect(&addr).expect("connects to the server");
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut call = |id: u64, command: &str, params: Json| -> Json {
        let request =
            serde_json::json!({"type": "command", "id": id, "command": command, "params": params});
        stream.write_all(format!("{request}\n").as_bytes()).unwrap();
        let mut reply = String::new();
        reader.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap()
    };
    let file = call(1, "project.file", serde_json::json!({}));
    assert_eq!(file["result"]["path"], Json::Null, "{file}");
    let added = call(
        2,
        "project.group.add",
        serde_json::json!({"title": "Edited after import"}),
    );
    assert_eq!(added["success"], true, "{added}");
    let saved = call(3, "project.save", serde_json::json!({}));
    assert_eq!(saved["success"], false, "a save needs a path: {saved}");
    let target = dir.path().join("js-csv.sextant.json");
    let saved = call(4, "project.save", serde_json::json!({"path": target}));
    assert_eq!(saved["success"], true, "{saved}");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    let mut stderr = startup;
    err.read_to_string(&mut stderr).unwrap();
    assert!(exit.success(), "{exit:?}: {stderr}");
    assert_plain_import_notice(&stderr, &copy);
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        before,
        "the Serial Studio file is untouched"
    );
    let written = std::fs::read_to_string(&target).unwrap();
    assert!(written.contains("Edited after import"));
}
