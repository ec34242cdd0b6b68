//! `data.*` against a session recorded through the real pipeline from a device on a
//! pseudo-terminal: every figure of `data.summary`, `data.find` and `data.spectrum` equals
//! what pandas, numpy and SciPy compute from the session's CSV export
//! (`tests/data_reference.py`), and the live data gives the same values as the recording.
//!
//! Times differ only by the export's rounding to microseconds, so time figures compare
//! to a microsecond (and rates to a millionth); values compare to 1e-9 of their size.

#[path = "../../devices/tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{require, PtyPair};
use serde_json::{json, Value};
use sextant_commands::Policy;
use sextant_runtime::{Caller, Runtime, Workspace};
use sextant_telemetry::project::Project;

const REFERENCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data_reference.py");
const PROBE: &str = "import pandas, numpy, scipy.signal";
const INSTALL_HINT: &str =
    "run ./dev test (it installs pandas, numpy and SciPy into a virtualenv and sets \
     SEXTANT_TEST_PYTHON), or pip install pandas scipy and set SEXTANT_TEST_PYTHON to that python";

fn python() -> Option<PathBuf> {
    common::python_with("pandas and SciPy", PROBE, INSTALL_HINT)
}

fn person(rt: &mut Runtime, name: &str, params: Value) -> Value {
    let policy = Policy {
        auto_approve_edits: true,
        ..Policy::default()
    };
    rt.execute(Caller::Ui, name, params.clone(), policy, true)
        .unwrap_or_else(|e| panic!("{name} {params}: {e:?}"))
}

fn assistant(rt: &mut Runtime, name: &str, params: Value) -> Value {
    rt.execute(
        Caller::Assistant,
        name,
        params.clone(),
        Policy::default(),
        false,
    )
    .unwrap_or_else(|e| panic!("{name} {params}: {e:?}"))
}

/// Frames the device sends, at ~500 a second.
const LINES: usize = 3000;

/// Line `i` of the device: a wave of 40 Hz and 110 Hz sines around 3; a battery falling
/// from 4.2 V with two dips below 3.3 V and 0.6 s stuck at 3.7 V; a status with text,
/// `nan` and empty fields among its numbers.
fn line(i: usize) -> String {
    let tau = std::f64::consts::TAU;
    let tt = i as f64 / 500.0;
    let wave = 3.0 + 2.0 * (tau * 40.0 * tt).sin() + 0.5 * (tau * 110.0 * tt).sin();
    let battery = match i {
        700..760 => 3.1 + (i - 700) as f64 * 0.001,
        1500..1800 => 3.7,
        2200..2230 => 3.25,
        _ => 4.2 - i as f64 * 0.0002,
    };
    let status = match i % 97 {
        13 => "ERR".to_string(),
        29 => "nan".to_string(),
        51 => String::new(),
        _ => format!("{}", (i * 7) % 10),
    };
    format!("{wave:.6},{battery:.4},{status}\n")
}

fn project(port: &Path) -> Project {
    serde_json::from_value(json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "dev", "connection": {"type": "serial", "port": port.display().to_string(), "baud": 115200},
                     "parser": {"kind": "delimited"}}],
        "groups": [
            {"id": "s", "title": "Sensors", "datasets": [
                {"id": "wave", "title": "Wave", "units": "V", "index": 1},
                {"id": "status", "title": "Status", "index": 3}]},
            {"id": "p", "title": "Power", "datasets": [
                {"id": "bat", "title": "Battery", "units": "V", "index": 2,
                 "alarms": [{"min": 0, "max": 3.3, "severity": "critical", "label": "low"}]}]}
        ]
    }))
    .unwrap()
}

fn close(what: &str, got: &Value, want: &Value, rel: f64, abs: f64) {
    let (g, w) = (
        got.as_f64()
            .unwrap_or_else(|| panic!("{what}: no number in {got}")),
        want.as_f64()
            .unwrap_or_else(|| panic!("{what}: reference has no number: {want}")),
    );
    assert!(
        (g - w).abs() <= abs + rel * w.abs(),
        "{what}: Sextant says {g}, the reference {w}"
    );
}

/// Time figures: the export rounds times to a microsecond.
const TIME: f64 = 1.01e-6;
/// Value figures: the same doubles, summed in another order.
const VALUE: f64 = 1e-9;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_figure_equals_what_pandas_and_scipy_compute_from_the_export() {
    if !require("socat", "socat") {
        return;
    }
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    let mut rt = Runtime::new(Workspace::new(project(&pty.a)));
    person(
        &mut rt,
        "sessions.setDatabase",
        json!({"path": dir.path().join("s.db")}),
    );
    person(&mut rt, "io.connect", json!({}));
    let id = person(
        &mut rt,
        "sessions.startRecording",
        json!({"title": "bench"}),
    )["id"]
        .as_i64()
        .unwrap();
    // The device: one line every 2 ms, and a 250 ms pause after line 1000 (a gap).
    let device = pty.b.clone();
    let writer = tokio::task::spawn_blocking(move || {
        let mut port = std::fs::OpenOptions::new()
            .write(true)
            .open(device)
            .unwrap();
        for i in 0..LINES {
            port.write_all(line(i).as_bytes()).unwrap();
            std::thread::sleep(Duration::from_millis(if i == 1000 { 250 } else { 2 }));
        }
        // One more line ends the last one's frame for sure.
        port.write_all(b"0,0,0\n").unwrap();
    });
    writer.await.unwrap();
    let mut frames = 0;
    for _ in 0..500 {
        frames = person(&mut rt, "sessions.list", json!({}))["recording"]["frames"]
            .as_u64()
            .unwrap_or(0);
        if frames > LINES as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(frames > LINES as u64, "only {frames} frames were recorded");

    // The live data, while still connected: the same values as the recording.
    let live = assistant(&mut rt, "data.summary", json!({"window": {"lastS": 3600}}));
    // A range on the live clock (a plot's zoomed range) holds what lies in it.
    let all_live = live["datasets"][0]["count"].as_u64().unwrap();
    let first_half = assistant(
        &mut rt,
        "data.summary",
        json!({"window": {"toS": live["datasets"][0]["firstS"].as_f64().unwrap() + 1.0}, "datasets": ["Sensors/Wave"]}),
    );
    let early = first_half["datasets"][0]["count"].as_u64().unwrap();
    assert!(early > 100 && early < all_live, "{first_half}");
    assert!(
        first_half["datasets"][0]["lastS"].as_f64().unwrap()
            <= first_half["window"]["toS"].as_f64().unwrap()
    );

    let stopped = person(&mut rt, "sessions.stopRecording", json!({}));
    assert_eq!(stopped["session"]["droppedFrames"], 0, "{stopped}");
    let csv = dir.path().join("export.csv");
    person(
        &mut rt,
        "sessions.exportCsv",
        json!({"id": id, "path": csv}),
    );
    person(&mut rt, "io.disconnect", json!({}));

    // The session's last frame is the extra `0,0,0`: leave it out with toS.
    let end = {
        let text = std::fs::read_to_string(&csv).unwrap();
        let last_two: Vec<&str> = text.lines().rev().take(2).collect();
        last_two[1]
            .split(',')
            .next()
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    // The export prints times to a microsecond: half of one more keeps that row in.
    let window = json!({"session": id, "toS": end + 0.5e-6});
    let summary = assistant(&mut rt, "data.summary", json!({"window": window}));
    let finds = [
        ("Power/Battery", json!({"kind": "below", "level": 3.3})),
        ("bat", json!({"kind": "stuck", "forS": 0.5})),
        ("Sensors/Wave", json!({"kind": "crossing", "level": 3})),
        ("Wave", json!({"kind": "between", "low": 4.5, "high": 5})),
        ("Sensors/Status", json!({"kind": "above", "level": 6.5})),
    ];
    let found: Vec<Value> = finds
        .iter()
        .map(|(dataset, condition)| {
            assistant(
                &mut rt,
                "data.find",
                json!({"window": window, "dataset": dataset, "condition": condition}),
            )
        })
        .collect();
    let spectrum = assistant(
        &mut rt,
        "data.spectrum",
        json!({"window": window, "dataset": "Sensors/Wave", "segment": 256, "peaks": 3}),
    );

    let unknown = rt
        .execute(
            Caller::Assistant,
            "data.find",
            json!({"window": window, "dataset": "Nope", "condition": {"kind": "alarm"}}),
            Policy::default(),
            false,
        )
        .unwrap_err()
        .message;
    assert!(
        unknown.contains("the datasets are: Sensors/Wave, Sensors/Status, Power/Battery"),
        "{unknown}"
    );
    // In the battery's alarm band is below 3.3 V here.
    let alarm = assistant(
        &mut rt,
        "data.find",
        json!({"window": window, "dataset": "bat", "condition": {"kind": "alarm"}}),
    );
    assert_eq!(alarm["count"], found[0]["count"], "{alarm}");

    // The reference, on the export without its extra last row.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut rows: Vec<&str> = text.lines().collect();
    rows.pop();
    let trimmed = dir.path().join("reference.csv");
    std::fs::write(&trimmed, rows.join("\n") + "\n").unwrap();
    fn names(d: &str) -> &str {
        match d {
            "bat" => "Power/Battery",
            "Wave" => "Sensors/Wave",
            other => other,
        }
    }
    let request = json!({
        "summary": ["Sensors/Wave", "Sensors/Status", "Power/Battery"],
        "find": finds.iter().map(|(d, c)| json!({"column": names(d), "condition": c})).collect::<Vec<_>>(),
        "spectrum": [{"column": "Sensors/Wave", "segment": 256, "peaks": 3}],
    });
    let request_file = dir.path().join("request.json");
    std::fs::write(&request_file, request.to_string()).unwrap();
    let out = Command::new(&python)
        .arg(REFERENCE)
        .arg(&trimmed)
        .arg(&request_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the reference failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference: Value = serde_json::from_slice(&out.stdout).unwrap();

    // data.summary, field by field.
    for ours in summary["datasets"].as_array().unwrap() {
        let name = ours["dataset"].as_str().unwrap();
        let want = &reference["summary"][name];
        for field in ["count", "text", "nonFinite", "gaps"] {
            assert_eq!(ours[field], want[field], "{name}.{field}: {ours}");
        }
        for field in ["min", "max", "mean", "std", "p5", "p50", "p95"] {
            close(
                &format!("{name}.{field}"),
                &ours[field],
                &want[field],
                VALUE,
                0.0,
            );
        }
        for field in [
            "firstS",
            "lastS",
            "minAtS",
            "maxAtS",
            "typicalIntervalS",
            "longestGapS",
            "longestGapEndS",
        ] {
            close(
                &format!("{name}.{field}"),
                &ours[field],
                &want[field],
                0.0,
                2.0 * TIME,
            );
        }
        close(
            &format!("{name}.rateHz"),
            &ours["rateHz"],
            &want["rateHz"],
            1e-6,
            0.0,
        );
        assert_eq!(ours["percentiles"], "exact");
    }
    let battery = &reference["summary"]["Power/Battery"];
    assert!(battery["gaps"].as_u64().unwrap() >= 1, "the pause is a gap");
    assert!(
        reference["summary"]["Sensors/Status"]["text"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(
        reference["summary"]["Sensors/Status"]["nonFinite"]
            .as_u64()
            .unwrap()
            > 0
    );

    // data.find: every range count, and every listed range.
    for (i, ours) in found.iter().enumerate() {
        let want = reference["find"][i].as_array().unwrap();
        assert!(!want.is_empty(), "find {i} finds something");
        assert_eq!(ours["count"], want.len(), "find {i}: {ours}");
        let listed = ours["ranges"].as_array().unwrap();
        assert_eq!(listed.len(), want.len().min(50));
        assert_eq!(ours["truncated"], want.len() > 50);
        for (r, w) in listed.iter().zip(want) {
            close("startS", &r["startS"], &w["startS"], 0.0, TIME);
            close("endS", &r["endS"], &w["endS"], 0.0, TIME);
            assert_eq!(r["samples"], w["samples"], "find {i}: {r} vs {w}");
            assert_eq!(r["min"], w["min"]);
            assert_eq!(r["max"], w["max"]);
            if let Some(d) = w.get("direction") {
                assert_eq!(&r["direction"], d);
            }
        }
    }

    // data.spectrum: the same rate, segments and peaks.
    let want = &reference["spectrum"][0];
    close(
        "sampleRateHz",
        &spectrum["sampleRateHz"],
        &want["sampleRateHz"],
        1e-6,
        0.0,
    );
    assert_eq!(spectrum["segments"], want["segments"]);
    let peaks = spectrum["peaks"].as_array().unwrap();
    // Two clean sines: two peaks, however many were asked for.
    assert_eq!(peaks.len(), 2, "{spectrum} vs {want}");
    assert_eq!(peaks.len(), want["peaks"].as_array().unwrap().len());
    for (ours, w) in peaks.iter().zip(want["peaks"].as_array().unwrap()) {
        close(
            "frequencyHz",
            &ours["frequencyHz"],
            &w["frequencyHz"],
            1e-6,
            0.0,
        );
        close("power", &ours["power"], &w["power"], 1e-9, 0.0);
        close("amplitude", &ours["amplitude"], &w["amplitude"], 1e-9, 0.0);
    }
    // The strongest peak is the 40 Hz sine, on the device's clock of 500 lines a second:
    // in cycles per sample, 40/500, to within a bin and a half (1.5/256).
    let f0 = peaks[0]["frequencyHz"].as_f64().unwrap();
    let rate = spectrum["sampleRateHz"].as_f64().unwrap();
    assert!((f0 / rate - 0.08).abs() < 1.5 / 256.0, "{spectrum}");
    assert!(
        (peaks[0]["amplitude"].as_f64().unwrap() - 2.0).abs() < 0.4,
        "{spectrum}"
    );

    // The live data had the same numbers as the whole recording.
    let whole = assistant(&mut rt, "data.summary", json!({"window": {"session": id}}));
    for ours in live["datasets"].as_array().unwrap() {
        let name = ours["dataset"].as_str().unwrap();
        let recorded = whole["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["dataset"] == name)
            .unwrap();
        for field in ["min", "max", "p5", "p50", "p95"] {
            if name == "Sensors/Status" {
                continue;
            }
            assert_eq!(ours[field], recorded[field], "live {name}.{field}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_windows_and_names_get_errors_that_say_what_to_do() {
    let mut rt = Runtime::new(Workspace::new(project(Path::new("/nonexistent"))));
    let fails = |rt: &mut Runtime, name: &str, params: Value| {
        rt.execute(Caller::Assistant, name, params, Policy::default(), false)
            .unwrap_err()
            .message
    };
    let cases = [
        ("data.summary", json!({"window": {}}), "lastS"),
        (
            "data.summary",
            json!({"window": {"lastS": 5, "session": 1}}),
            "not both",
        ),
        (
            "data.summary",
            json!({"window": {"lastS": -1}}),
            "more than 0",
        ),
        (
            "data.summary",
            json!({"window": {"session": 1, "fromS": 5, "toS": 1}}),
            "before fromS",
        ),
        (
            "data.summary",
            json!({"window": {"lastS": 5}}),
            "no live data",
        ),
        (
            "data.summary",
            json!({"window": {"session": 1}}),
            "sessions.setDatabase",
        ),
        (
            "data.find",
            json!({"window": {"lastS": 5}, "dataset": "x", "condition": {"kind": "between", "low": 2, "high": 1}}),
            "low must not be above high",
        ),
        (
            "data.spectrum",
            json!({"window": {"lastS": 5}, "dataset": "x", "segment": 4}),
            "16 to 65536",
        ),
        (
            "data.series",
            json!({"window": {"lastS": 5}, "datasets": ["x"], "points": 5}),
            "10 to 2000",
        ),
    ];
    for (name, params, says) in cases {
        let message = fails(&mut rt, name, params.clone());
        assert!(message.contains(says), "{name} {params}: {message}");
    }
}

/// A long recorded window is summarised in shares on several threads (see
/// `SessionStore::shares`); the merged figures are the ones a single pass over the same
/// frames gives, for the whole session and a range inside it, with text, NaN, empty cells
/// and a gap among the readings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_read_in_shares_summarises_as_one_pass() {
    use sextant_analysis::summary::{Accumulator, Reading};
    use sextant_sessions::codec::Cell;
    use sextant_sessions::{NewSession, SessionStore, SessionWriter, WriterOptions};
    use sextant_telemetry::pipeline::{DatasetInfo, FrameEvent};
    use sextant_telemetry::{Timestamp, Value as Recorded};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let writer = SessionWriter::start(
        &db,
        NewSession {
            title: "long".into(),
            project: Project::default(),
            tags: vec![],
        },
        WriterOptions {
            queue: 1 << 16,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let feed = writer.feed();
    let columns: Vec<DatasetInfo> = ["Wave", "Status", "Bursts"]
        .iter()
        .enumerate()
        .map(|(i, title)| DatasetInfo {
            id: format!("d{i}"),
            title: (*title).into(),
            group: "Long".into(),
            units: String::new(),
            source: Some(0),
            slot: Some(i),
        })
        .collect();
    feed.columns(&columns);
    // 80 000 frames 1 ms apart, a 3 s pause at 50 000.
    let frames = 80_000u64;
    for n in 0..frames {
        let ns = n * 1_000_000 + if n >= 50_000 { 3_000_000_000 } else { 0 };
        let x = n as f64 * 1e-3;
        let values = [
            Recorded::Number((x * 7.0).sin() * 2.0 + (n % 13) as f64 * 1e-4),
            match n % 101 {
                0 => Recorded::Text("ERR".into()),
                1 => Recorded::Number(f64::NAN),
                2..=9 => Recorded::Null,
                _ => Recorded::Number((n % 1000) as f64),
            },
            if (n / 500) % 3 == 0 {
                Recorded::Number(x.cos())
            } else {
                Recorded::Null
            },
        ];
        let event = FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: ns,
                unix_ns: 0,
            },
            values: &values,
        };
        while !feed.frame(&event) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let id = writer.close().unwrap().id;
    let store = SessionStore::open(&db).unwrap();
    assert!(
        store.shares(id, 0.0, f64::INFINITY, 4).unwrap().len() >= 2,
        "the session is too short to be read in shares"
    );

    let mut rt = Runtime::new(Workspace::new(Project::default()));
    person(&mut rt, "sessions.setDatabase", json!({"path": db}));
    for (from, to) in [(0.0, f64::INFINITY), (12.5, 61.0)] {
        let mut window = json!({"session": id});
        if to.is_finite() {
            window["fromS"] = json!(from);
            window["toS"] = json!(to);
        }
        let got = assistant(&mut rt, "data.summary", json!({"window": window}));
        let mut one = Accumulator::for_datasets(3);
        store
            .for_each_cells_between(id, from, to, &[0, 1, 2], |t, cells| {
                for (a, cell) in one.iter_mut().zip(cells) {
                    match *cell {
                        Cell::Null => {}
                        Cell::Number(x) => a.push(t, Reading::Number(x)),
                        Cell::Text => a.push(t, Reading::Text),
                    }
                }
                Ok(())
            })
            .unwrap();
        for (k, a) in one.into_iter().enumerate() {
            let want = serde_json::to_value(a.finish()).unwrap();
            let ours = &got["datasets"][k];
            assert!(ours["count"].as_u64().unwrap() > 1000, "{ours}");
            for (field, value) in want.as_object().unwrap() {
                match field.as_str() {
                    "mean" | "std" => close(field, &ours[field], value, 1e-12, 1e-12),
                    _ => assert_eq!(&ours[field], value, "{from}..{to} #{k} {field}"),
                }
            }
        }
    }
}
