//! The `sextant` binary end to end: import Serial Studio fixtures, replay their captures to
//! CSV, and check the values; plus the failure modes a user will hit first.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as Json;

fn sextant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(args)
        .output()
        .expect("the sextant binary runs")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/serial-studio")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Parses CSV written by `sextant replay` (no quoted fields in these fixtures).
fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let body = std::fs::read_to_string(path).unwrap();
    let mut lines = body.lines();
    let header = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    let rows = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    (header, rows)
}

fn column(header: &[String], title: &str) -> usize {
    header
        .iter()
        .position(|h| h == title || h.ends_with(&format!("/{title}")))
        .unwrap_or_else(|| panic!("no column for {title} in {header:?}"))
}

fn check_rows(name: &str, csv: &Path, titles: &[String], want: &[Json]) {
    let (header, rows) = read_csv(csv);
    assert_eq!(header[0], "elapsed_s");
    assert_eq!(rows.len(), want.len(), "{name}: row count");
    let cols: Vec<usize> = titles.iter().map(|t| column(&header, t)).collect();
    for (r, (got, want)) in rows.iter().zip(want).enumerate() {
        for (k, &c) in cols.iter().enumerate() {
            let w = &want[k];
            let g = &got[c];
            if let Some(w) = w.as_f64() {
                let g: f64 = g
                    .parse()
                    .unwrap_or_else(|_| panic!("{name} row {r} {}: `{g}`", titles[k]));
                assert!(
                    (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                    "{name} row {r} {}: {g} != {w}",
                    titles[k]
                );
            } else if let Some(w) = w.as_str() {
                assert_eq!(g, w, "{name} row {r} {}", titles[k]);
            }
        }
    }
}

#[test]
fn import_then_replay_every_serial_studio_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        let Some(stem) = file.strip_suffix(".ssproj").or_else(|| {
            file.strip_suffix(".json")
                .filter(|s| !s.ends_with(".expected"))
        }) else {
            continue;
        };
        let project = dir.path().join(format!("{stem}.sextant.json"));
        let out = sextant(&[
            "import",
            path.to_str().unwrap(),
            "-o",
            project.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "import {file}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("import report"),
            "{file}: report on stderr"
        );
        let out = sextant(&["validate", project.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "validate {stem}: {}",
            text(&out.stderr)
        );

        let expected: Json = serde_json::from_str(
            &std::fs::read_to_string(fixtures().join(format!("{stem}.expected.json"))).unwrap(),
        )
        .unwrap();
        let titles: Vec<String> = expected["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect();
        let csv = dir.path().join(format!("{stem}.csv"));
        if let Some(by_source) = expected.get("rows_by_source").and_then(|v| v.as_object()) {
            // Each source replayed alone; its rows hold its own datasets, in title order.
            let mut offset = 0;
            for (source, rows) in by_source {
                let rows = rows.as_array().unwrap();
                let width = rows[0].as_array().unwrap().len();
                let capture = fixtures().join(format!("{stem}.{source}.capture"));
                let input = format!("{source}={}", capture.display());
                let out = sextant(&[
                    "replay",
                    "--project",
                    project.to_str().unwrap(),
                    "--input",
                    &input,
                    "--csv",
                    csv.to_str().unwrap(),
                    "--chunk",
                    "7",
                ]);
                assert!(
                    out.status.success(),
                    "replay {stem}/{source}: {}",
                    text(&out.stderr)
                );
                let want: Vec<Json> = rows.to_vec();
                check_rows(
                    &format!("{stem}/{source}"),
                    &csv,
                    &titles[offset..offset + width],
                    &want,
                );
                offset += width;
            }
        } else {
            let capture = fixtures().join(format!("{stem}.capture"));
            // Replay the original Serial Studio file directly: it is imported on the fly.
            let out = sextant(&[
                "replay",
                "--project",
                path.to_str().unwrap(),
                "--input",
                capture.to_str().unwrap(),
                "--csv",
                csv.to_str().unwrap(),
                "--chunk",
                "5",
            ]);
            assert!(out.status.success(), "replay {stem}: {}", text(&out.stderr));
            assert!(
                text(&out.stderr).contains("frames/s"),
                "{stem}: throughput printed"
            );
            check_rows(stem, &csv, &titles, expected["rows"].as_array().unwrap());
        }
        checked += 1;
    }
    assert!(checked >= 5, "all fixtures walked, got {checked}");
}

#[test]
fn the_binary_crc_fixture_reports_its_dropped_frame() {
    let project = fixtures().join("binary-crc.ssproj");
    let capture = fixtures().join("binary-crc.capture");
    let out = sextant(&[
        "replay",
        "--project",
        project.to_str().unwrap(),
        "--input",
        capture.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("1 checksum"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn unreadable_and_invalid_inputs_fail_with_a_clear_message() {
    let out = sextant(&["import", "/no/such/file.ssproj"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("could not read /no/such/file.ssproj"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.ssproj");
    std::fs::write(&junk, b"\x00\x01 not json at all").unwrap();
    let out = sextant(&["import", junk.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("could not import"),
        "{}",
        text(&out.stderr)
    );

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, br#"{"format": "sextant-project", "schemaVersion": 1, "groups": [{"id": "g", "datasets": [{"id": "d", "index": "one"}]}]}"#)
        .unwrap();
    let out = sextant(&["validate", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("groups[0].datasets[0].index"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn replay_survives_garbage_and_counts_what_it_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p.json");
    std::fs::write(
        &project,
        serde_json::json!({
            "format": "sextant-project",
            "schemaVersion": 1,
            "sources": [{"id": "s", "parser": {"kind": "delimited"},
                         "framing": {"mode": "endOnly", "end": ["\\n"], "maxFrameBytes": 64}}],
            "groups": [{"id": "g", "title": "G", "datasets": [{"id": "d", "title": "V", "index": 1}]}]
        })
        .to_string(),
    )
    .unwrap();
    let mut capture = b"1\n2\n".to_vec();
    capture.extend((0..100_000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 | 0x80));
    capture.extend_from_slice(b"\n3\n");
    let cap = dir.path().join("c.bin");
    std::fs::write(&cap, &capture).unwrap();
    let csv = dir.path().join("out.csv");
    let out = sextant(&[
        "replay",
        "--project",
        project.to_str().unwrap(),
        "--input",
        cap.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("1 oversize"), "{err}");
    let (_, rows) = read_csv(&csv);
    let values: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(values, ["1", "2", "3"]);
}

#[test]
fn quick_plot_replay_names_columns_from_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p.json");
    std::fs::write(
        &project,
        r#"{"format": "sextant-project", "schemaVersion": 1, "sources": [{"id": "s"}]}"#,
    )
    .unwrap();
    let cap = dir.path().join("c.txt");
    std::fs::write(&cap, "time,temp\n0,20.5\n1,21\n").unwrap();
    let out = sextant(&[
        "replay",
        "--project",
        project.to_str().unwrap(),
        "--input",
        cap.to_str().unwrap(),
        "--csv",
        "-",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("elapsed_s,Quick Plot/time,Quick Plot/temp")
    );
    assert!(lines.next().unwrap().ends_with(",0,20.5"));
}

#[test]
fn demo_runs_the_whole_pipeline_and_writes_csv() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("demo.csv");
    let out = sextant(&[
        "demo",
        "--seconds",
        "2",
        "--rate",
        "500",
        "--max",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("demo: 1000 frames"),
        "{}",
        text(&out.stdout)
    );
    let (header, rows) = read_csv(&csv);
    assert_eq!(rows.len(), 1000);
    let power = column(&header, "Power");
    let voltage = column(&header, "Voltage");
    let current = column(&header, "Current");
    for row in &rows {
        let (p, v, i): (f64, f64, f64) = (
            row[power].parse().unwrap(),
            row[voltage].parse().unwrap(),
            row[current].parse().unwrap(),
        );
        assert!(
            (p - v * i).abs() < 1e-9,
            "the scripted virtual dataset is V·I: {row:?}"
        );
    }
    let project = text(&sextant(&["demo", "--print-project"]).stdout);
    let parsed: Json = serde_json::from_str(&project).unwrap();
    assert_eq!(parsed["schemaVersion"], 1);
}

#[test]
fn run_records_live_and_replay_of_the_recording_exports_the_same_csv() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("demo.json");
    std::fs::write(&project, sextant(&["demo", "--print-project"]).stdout).unwrap();
    let live = dir.path().join("live.csv");
    let mcap = dir.path().join("live.mcap");
    let capture = dir.path().join("live.sxcap");
    let out = sextant(&[
        "run",
        "--project",
        project.to_str().unwrap(),
        "--seconds",
        "1",
        "--csv",
        live.to_str().unwrap(),
        "--mcap",
        mcap.to_str().unwrap(),
        "--record",
        capture.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The MCAP recording of the same run: every frame the CSV has, nothing dropped, a whole
    // file (what it holds is compared with a session's export in the export crate).
    let rows = std::fs::read_to_string(&live).unwrap().lines().count() - 1;
    let said = text(&out.stderr);
    assert!(
        said.contains(&format!("MCAP: {rows} frames and ")) && said.contains(", 0 dropped"),
        "{said}"
    );
    let bytes = std::fs::read(&mcap).unwrap();
    let magic = b"\x89MCAP0\r\n";
    assert!(bytes.starts_with(magic) && bytes.ends_with(magic));
    assert!(
        text(&out.stdout).contains("connected"),
        "{}",
        text(&out.stdout)
    );
    let replayed = dir.path().join("replay.csv");
    let out = sextant(&[
        "replay",
        "--project",
        project.to_str().unwrap(),
        "--input",
        capture.to_str().unwrap(),
        "--csv",
        replayed.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let live = std::fs::read_to_string(&live).unwrap();
    assert!(
        live.lines().count() > 50,
        "a second of the 100 Hz demo device"
    );
    assert_eq!(live, std::fs::read_to_string(&replayed).unwrap());
}

#[test]
fn call_runs_commands_headless_with_tiers_applied() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("p.json");
    std::fs::write(&project, sextant(&["demo", "--print-project"]).stdout).unwrap();
    let p = project.to_str().unwrap();
    let out = sextant(&[
        "call",
        "project.group.add",
        r#"{"title": "From the CLI"}"#,
        "--project",
        p,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result: Json = serde_json::from_slice(&out.stdout).unwrap();
    let id = result["id"].as_str().unwrap().to_string();
    let saved = std::fs::read_to_string(&project).unwrap();
    assert!(saved.contains("From the CLI"), "the edit is saved back");

    let out = sextant(&[
        "call",
        "project.dataset.add",
        r#"{"group": "nope", "dataset": {"title": "x"}}"#,
        "--project",
        p,
    ]);
    assert!(!out.status.success());
    let err: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["code"], "notFound");

    let out = sextant(&["call", "console.send", r#"{"data": "x"}"#, "--project", p]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("allow device control"),
        "{}",
        text(&out.stderr)
    );
    let out = sextant(&["call", "assistant.restore", r#"{"id": 1}"#, "--project", p]);
    assert!(!out.status.success(), "AlwaysConfirm never runs headless");

    let out = sextant(&["call", "project.dataset.get", r#"{"id": 5}"#]);
    let err: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (err["code"].as_str(), err["path"].as_str()),
        (Some("invalidParams"), Some("id"))
    );
    let listed = text(&sextant(&["commands"]).stdout);
    assert!(listed.contains("project.frameParser.dryCompile") && listed.contains("DeviceGated"));
    assert!(!id.is_empty());
}

#[test]
fn kill_nine_during_saves_never_leaves_a_corrupt_project() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("big.json");
    // A large project (several MB) so a save takes long enough to be interrupted.
    let mut demo: Json =
        serde_json::from_slice(&sextant(&["demo", "--print-project"]).stdout).unwrap();
    let filler: Vec<Json> = (0..20_000)
        .map(|i| serde_json::json!({"id": format!("fill-{i}"), "title": format!("Filler {i}"), "index": 1, "units": "x".repeat(40)}))
        .collect();
    demo["groups"][0]["datasets"]
        .as_array_mut()
        .unwrap()
        .extend(filler);
    std::fs::write(&project, serde_json::to_vec_pretty(&demo).unwrap()).unwrap();
    let p = project.to_str().unwrap().to_string();
    let mut killed_mid_run = 0;
    for round in 0..30u64 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sextant"))
            .args([
                "call",
                "project.group.add",
                &format!(r#"{{"title": "round {round}"}}"#),
                "--project",
                &p,
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Spread the kills over the child's life: load, edit, write, rename.
        std::thread::sleep(std::time::Duration::from_millis(20 + (round * 37) % 400));
        if child.try_wait().unwrap().is_none() {
            killed_mid_run += 1;
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let text = std::fs::read_to_string(&project).unwrap();
        let parsed = sextant_telemetry::Project::from_json_str(&text);
        assert!(
            parsed.is_ok(),
            "round {round}: the project file is corrupt: {:?}",
            parsed.err()
        );
    }
    assert!(
        killed_mid_run >= 10,
        "most kills should land while the child runs ({killed_mid_run}/30)"
    );
    // Temp files of killed writers may remain, but never under the project's own name.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            name == "big.json" || name.ends_with(".tmp"),
            "unexpected file {name}"
        );
    }
}

#[test]
fn a_serial_studio_file_given_as_project_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let original = fixtures().join("js-csv.ssproj");
    let copy = dir.path().join("js-csv.ssproj");
    std::fs::copy(&original, &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let out = sextant(&[
        "call",
        "project.group.add",
        r#"{"title": "x"}"#,
        "--project",
        copy.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("Serial Studio project"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        before,
        "the Serial Studio file is untouched"
    );
}

/// `sextant serve` asked to stop (SIGTERM, as a service manager does) writes the edits the
/// auto-save had not written yet: the runtime's own last-chance save dies with the process.
#[cfg(unix)]
#[test]
fn serve_stopped_by_sigterm_keeps_the_last_edit() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("bench.json");
    std::fs::write(&project, sextant(&["demo", "--print-project"]).stdout).unwrap();
    let data = dir.path().join("data");
    // Port 0 and the address the server prints: a port picked here and freed could be
    // taken by another process before the server binds it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(["serve", "--api", "--port", "0", "--project"])
        .arg(&project)
        .arg("--data-dir")
        .arg(&data)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "sextant serve ended before it listened"
        );
        if let Some(rest) = line.strip_prefix("API server listening on ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // The rest of its log must keep flowing, or a full pipe would stall the server.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let mut stream = std::net::TcpStream::connect(&addr).expect("connects to the server");
    let request = r#"{"type":"command","id":1,"command":"project.group.add","params":{"title":"Added just before the stop"}}"#;
    stream.write_all(format!("{request}\n").as_bytes()).unwrap();
    let mut reply = String::new();
    BufReader::new(stream.try_clone().unwrap())
        .read_line(&mut reply)
        .unwrap();
    assert!(reply.contains(r#""success":true"#), "{reply}");
    // Recording needs no typed database path first: it has one in the data folder.
    let request = r#"{"type":"command","id":2,"command":"sessions.list","params":{}}"#;
    stream.write_all(format!("{request}\n").as_bytes()).unwrap();
    let mut reply = String::new();
    BufReader::new(stream.try_clone().unwrap())
        .read_line(&mut reply)
        .unwrap();
    let listing: Json = serde_json::from_str(&reply).unwrap();
    assert_eq!(
        listing["result"]["database"]
            .as_str()
            .map(std::path::PathBuf::from),
        Some(data.join("sessions.sqlite")),
        "{reply}"
    );
    // At once: well inside the 1 s auto-save delay.
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let saved = std::fs::read_to_string(&project).unwrap();
    assert!(
        saved.contains("Added just before the stop"),
        "the edit was lost"
    );
}

#[test]
fn a_project_that_runs_a_program_is_refused_unless_the_person_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let project = dir.path().join("shared.json");
    let text_of = serde_json::json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "tool", "connection": {"type": "process", "program": "/bin/sh",
            "args": ["-c", format!("echo ran > '{}'", marker.display())]},
            "parser": {"kind": "delimited"}}],
        "groups": [{"id": "g", "title": "G", "datasets": [{"id": "v", "title": "V", "index": 1}]}]
    });
    std::fs::write(&project, text_of.to_string()).unwrap();
    let p = project.to_str().unwrap();
    for args in [
        vec!["run", "--project", p, "--seconds", "0.5"],
        vec!["call", "io.connect", "{}", "--project", p],
    ] {
        let out = sextant(&args);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} ran: {stderr}");
        assert!(
            stderr.contains("/bin/sh -c") && stderr.contains("--allow-process-sources"),
            "{args:?}: {stderr}"
        );
        assert!(!marker.exists(), "{args:?} ran the program");
    }
    let out = sextant(&[
        "run",
        "--project",
        p,
        "--seconds",
        "0.5",
        "--allow-process-sources",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(marker.exists(), "the flag is the person's yes");
}

#[test]
fn eval_prints_three_tracks_writes_the_report_and_fails_a_missed_gate() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/memory/retrieval-v1.json");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let out = sextant(&[
        "eval",
        "--fixture",
        fixture.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--gate",
        "recall5=0.95,mrr10=0.85,ndcg10=0.85",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for track in ["hybrid", "fts", "vector"] {
        assert!(
            stdout.lines().any(|l| l == track),
            "no {track} table in:\n{stdout}"
        );
    }
    assert!(stdout.contains("gate held on hybrid"));
    let json: Json = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for track in ["hybrid", "fts", "vector"] {
        for key in ["recallAt5", "mrrAt10", "ndcgAt10"] {
            assert!(
                json["tracks"][track][key].is_number(),
                "tracks.{track}.{key}"
            );
        }
        assert!(json["tracks"][track]["bySubset"]["cjk"]["recallAt5"].is_number());
    }
    assert!(json["queries"].as_array().unwrap().len() >= 60);

    // A gate out of reach: the report is still written, the exit code says no.
    std::fs::remove_file(&report).unwrap();
    let out = sextant(&[
        "eval",
        "--fixture",
        fixture.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--track",
        "fts",
        "--gate",
        "recall5=0.99",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("gate missed: fts recall@5"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        report.exists(),
        "the evidence is written before the verdict"
    );

    let bad = sextant(&[
        "eval",
        "--fixture",
        fixture.to_str().unwrap(),
        "--gate",
        "recall=1",
    ]);
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("unknown gate `recall`"),
        "{}",
        text(&bad.stderr)
    );
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, r#"{"version":1,"vectorProfile":{"id":"x","dimensions":1,"normalized":true},"corpus":[],"queries":[{"id":"q","agentId":"a","text":"t","relevantIds":[]}]}"#).unwrap();
    let out = sextant(&["eval", "--fixture", broken.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("has no relevant ids"),
        "{}",
        text(&out.stderr)
    );
}

/// `sextant models`: every place the search model is looked for, one install that every
/// entry point then finds, and a folder that is not a model refused without touching the
/// installed one. Needs the real model (`./dev test` fetches it into the target folder).
#[test]
fn models_install_puts_the_model_where_every_entry_point_looks() {
    let model = std::env::var_os("SEXTANT_EMBEDDING_MODEL_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let target = std::path::PathBuf::from(env!("CARGO_BIN_EXE_sextant"));
            Some(target.parent()?.parent()?.join("models/all-minilm-l6-v2"))
        })
        .filter(|d| d.join("model.safetensors").is_file())
        .expect("all-MiniLM-L6-v2 not found: run `./dev test` (it fetches the model)");
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sextant"))
            .args(args)
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env_remove("SEXTANT_EMBEDDING_MODEL_DIR")
            .output()
            .unwrap()
    };
    let before = String::from_utf8(run(&["models", "status"]).stdout).unwrap();
    assert!(before.contains("No model found"), "{before}");
    assert!(before.contains("your models folder"), "{before}");

    let out = run(&["models", "install", "--from", model.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = home.path().join("data/sextant/models/all-minilm-l6-v2");
    for f in ["model.safetensors", "tokenizer.json", "config.json"] {
        assert!(installed.join(f).is_file(), "{f}");
    }
    let after = String::from_utf8(run(&["models", "status"]).stdout).unwrap();
    let used = after
        .lines()
        .find(|l| l.starts_with("used"))
        .unwrap_or_default();
    assert!(used.contains(&installed.display().to_string()), "{after}");

    // Not a model: refused, and the installed one is untouched.
    let empty = tempfile::tempdir().unwrap();
    let out = run(&[
        "models",
        "install",
        "--from",
        empty.path().to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("does not hold a working all-MiniLM-L6-v2 model"),
        "{err}"
    );
    assert!(installed.join("model.safetensors").is_file());
    // `eval` finds it there too, with no flag and no variable.
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/memory/retrieval-v1.json"
    );
    let out = run(&["eval", "--fixture", fixture, "--embedder", "minilm"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compares CSV text cell by cell: the same header and row count, and in each cell the same
/// text or numbers equal to 1e-9 (relative). No quoted fields in these fixtures.
fn assert_same_values(case: &str, got: &str, want: &str) {
    let rows = |t: &str| -> Vec<Vec<String>> {
        t.lines()
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect()
    };
    let (got, want) = (rows(got), rows(want));
    assert_eq!(got.first(), want.first(), "{case}: the header");
    assert_eq!(
        got.len(),
        want.len(),
        "{case}:\n got {got:?}\nwant {want:?}"
    );
    for (r, (g, w)) in got.iter().zip(&want).enumerate().skip(1) {
        assert_eq!(g.len(), w.len(), "{case} row {r}");
        for (c, (a, b)) in g.iter().zip(w).enumerate() {
            let same = match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(x), Ok(y)) => (x - y).abs() <= 1e-9 * y.abs().max(1.0),
                _ => a == b,
            };
            assert!(same, "{case} row {r} {}: got `{a}`, want `{b}`", want[0][c]);
        }
    }
}

#[test]
fn message_captures_replay_one_message_a_read_into_the_expected_values() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/messages");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 2, "{cases:?}");
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let want = std::fs::read_to_string(case.join("expected.csv")).unwrap();
        // Named by the flag, and told by the `.jsonl` name alone.
        for format in [Some("messages"), None] {
            let out = dir.path().join(format!("{name}.csv"));
            let (project, input) = (case.join("project.json"), case.join("capture.jsonl"));
            let mut args = vec![
                "replay",
                "--project",
                project.to_str().unwrap(),
                "--input",
                input.to_str().unwrap(),
                "--csv",
                out.to_str().unwrap(),
            ];
            if let Some(f) = format {
                args.extend(["--input-format", f]);
            }
            let run = sextant(&args);
            assert!(run.status.success(), "{name}: {}", text(&run.stderr));
            let got = std::fs::read_to_string(&out).unwrap();
            assert_same_values(&format!("{name} ({format:?})"), &got, &want);
        }
    }

    // A line naming a source the project lacks, and a capture given with another input.
    let case = root.join("udp-binary");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"t\":0,\"source\":\"udp\",\"hex\":\"0a00ff380000c03f\"}\n{\"t\":1,\"source\":\"can9\",\"hex\":\"00\"}\n",
    )
    .unwrap();
    let project = case.join("project.json");
    let run = sextant(&[
        "replay",
        "--project",
        project.to_str().unwrap(),
        "--input",
        bad.to_str().unwrap(),
    ]);
    assert!(!run.status.success());
    let e = text(&run.stderr);
    assert!(
        e.contains("line 2") && e.contains("no source `can9`") && e.contains("its sources: udp"),
        "{e}"
    );
    let run = sextant(&[
        "replay",
        "--project",
        project.to_str().unwrap(),
        "--input-format",
        "messages",
        "--input",
        bad.to_str().unwrap(),
        "--input",
        bad.to_str().unwrap(),
    ]);
    assert!(!run.status.success());
    assert!(
        text(&run.stderr).contains("give it as the one --input"),
        "{}",
        text(&run.stderr)
    );
}

/// `sextant export`: the newest session by default, the format from the output's name or
/// `--format`, and a clear word when the format, the database or the session is missing.
#[test]
fn export_writes_a_session_in_the_format_asked_for() {
    use sextant_sessions::{NewSession, SessionWriter, WriterOptions};
    use sextant_telemetry::{FrameEvent, Pipeline, Timestamp, Value};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.sqlite");
    let project = sextant_devices::simulator::demo_project();
    let datasets = Pipeline::new(&project).unwrap().datasets().to_vec();
    for title in ["first", "second"] {
        let session = NewSession {
            title: title.into(),
            project: project.clone(),
            tags: Vec::new(),
        };
        let writer = SessionWriter::start(&db, session, WriterOptions::default()).unwrap();
        let feed = writer.feed();
        feed.columns(&datasets);
        for i in 0..50u64 {
            let row = vec![Value::Number(i as f64); datasets.len()];
            assert!(feed.frame(&FrameEvent {
                source: 0,
                timestamp: Timestamp {
                    elapsed_ns: i * 10_000_000,
                    unix_ns: 0,
                },
                values: &row,
            }));
        }
        writer.close().unwrap();
    }
    let db_arg = db.to_str().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();

    let out = sextant(&[
        "export",
        "--database",
        db_arg,
        "--output",
        &path("run.mcap"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("Exported session 2 (second)"),
        "{}",
        text(&out.stderr)
    );
    assert!(std::fs::read(path("run.mcap"))
        .unwrap()
        .starts_with(b"\x89MCAP0\r\n"));

    let out = sextant(&[
        "export",
        "--database",
        db_arg,
        "--session",
        "1",
        "--output",
        &path("run.parquet"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("50 frames"),
        "{}",
        text(&out.stderr)
    );
    assert!(std::fs::read(path("run.parquet"))
        .unwrap()
        .starts_with(b"PAR1"));

    let out = sextant(&[
        "export",
        "--database",
        db_arg,
        "--format",
        "csv",
        "--output",
        &path("run.txt"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = std::fs::read_to_string(path("run.txt")).unwrap();
    assert!(csv.starts_with("elapsed_s,"));
    assert_eq!(csv.lines().count(), 51);

    for (args, says) in [
        (
            vec!["--database", db_arg, "--output", "run.bin"],
            "--format mcap, parquet or csv",
        ),
        (
            vec!["--database", "nowhere.sqlite", "--output", "x.mcap"],
            "no sessions database at",
        ),
        (
            vec!["--database", db_arg, "--session", "9", "--output", "x.mcap"],
            "no session 9",
        ),
    ] {
        let out = sextant(&[&["export"][..], &args[..]].concat());
        assert!(!out.status.success(), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert!(!Path::new("x.mcap").exists() && !Path::new("run.bin").exists());
}

/// The soak's flat memory rests on the binary's allocator giving freed pages back
/// (`crates/heap`'s module doc): `sextant` must be served by mimalloc, whose verbose mode
/// reports its start on stderr.
#[test]
fn the_binary_is_served_by_the_allocator_that_gives_pages_back() {
    let out = Command::new(env!("CARGO_BIN_EXE_sextant"))
        .arg("--version")
        .env("MIMALLOC_VERBOSE", "1")
        .output()
        .expect("the sextant binary runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("mimalloc: process init"),
        "no allocator report on stderr:\n{stderr}"
    );
}
