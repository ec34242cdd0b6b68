//! `data.summary` and `data.find` over a recorded hour: 16 datasets at 1 kHz (3.6 M frames,
//! 57.6 M values), and over six minutes of the same, to show that memory does not grow
//! with a session's length. Each query runs in a child process of its own, which reports
//! its time and its peak resident memory (`VmHWM`), so one query's memory is not another's.
//!
//! `cargo bench -p sextant-runtime --bench data` (the database, ~0.6 GB, is written once
//! under the target directory and reused).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sextant_commands::Policy;
use sextant_runtime::{Caller, Runtime, Workspace};
use sextant_sessions::{NewSession, SessionWriter, WriterOptions};
use sextant_telemetry::pipeline::{DatasetInfo, FrameEvent};
use sextant_telemetry::project::Project;
use sextant_telemetry::{Timestamp, Value as Reading};

const DATASETS: usize = 16;
const RATE_HZ: u64 = 1000;

fn database() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("bench-data").join("data-16x1kHz.db")
}

/// Records a session of `seconds` at 1 kHz: sines, a ramp and noise, one per dataset.
fn record(db: &Path, title: &str, seconds: u64) -> i64 {
    let writer = SessionWriter::start(
        db,
        NewSession {
            title: title.into(),
            project: Project::default(),
            tags: vec![],
        },
        WriterOptions {
            queue: 1 << 18,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let feed = writer.feed();
    let columns: Vec<DatasetInfo> = (0..DATASETS)
        .map(|i| DatasetInfo {
            id: format!("d{i}"),
            title: format!("Channel {i}"),
            group: "Bench".into(),
            units: "V".into(),
            source: Some(0),
            slot: Some(i),
        })
        .collect();
    feed.columns(&columns);
    let mut noise = 0x9E37_79B9_7F4A_7C15u64;
    let mut values = vec![Reading::Null; DATASETS];
    for n in 0..seconds * RATE_HZ {
        let t = n as f64 / RATE_HZ as f64;
        for (i, v) in values.iter_mut().enumerate() {
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            let jitter = (noise >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            let f = 0.5 + i as f64;
            *v = Reading::Number(
                3.3 + (std::f64::consts::TAU * f * t).sin() + 0.01 * jitter + (i as f64) * 0.1,
            );
        }
        let event = FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: n * (1_000_000_000 / RATE_HZ),
                unix_ns: 0,
            },
            values: &values,
        };
        // A full queue waits for the writer: a bench input, not a live device.
        while !feed.frame(&event) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    writer.close().unwrap().id
}

fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// In the child: one query, then its time and peak memory as JSON on stdout.
fn child(db: &str, command: &str, params: &str) {
    let mut ws = Workspace::new(Project::default());
    ws.set_sessions_db(Some(PathBuf::from(db)));
    let mut rt = Runtime::new(ws);
    let params: Value = serde_json::from_str(params).unwrap();
    let before = peak_mib();
    let start = Instant::now();
    let result = rt
        .execute(Caller::Assistant, command, params, Policy::default(), false)
        .unwrap_or_else(|e| panic!("{command}: {e:?}"));
    let seconds = start.elapsed().as_secs_f64();
    let out = json!({"seconds": seconds, "peakMiB": peak_mib(), "beforeMiB": before,
                     "bytes": result.to_string().len()});
    println!("{out}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        return child(&args[i + 1], &args[i + 2], &args[i + 3]);
    }
    let db = database();
    let (hour, six) = if db.exists() {
        (1, 2)
    } else {
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        let start = Instant::now();
        let hour = record(&db, "an hour", 3600);
        eprintln!(
            "recorded an hour of 16 × 1 kHz in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        (hour, record(&db, "six minutes", 360))
    };
    let queries = [
        (
            "data.summary",
            "every dataset",
            json!({"window": {"session": hour}}),
        ),
        (
            "data.summary",
            "every dataset",
            json!({"window": {"session": six}}),
        ),
        (
            "data.find",
            "below a level",
            json!({"window": {"session": hour}, "dataset": "Bench/Channel 3", "condition": {"kind": "below", "level": 2.7}}),
        ),
        (
            "data.find",
            "below a level",
            json!({"window": {"session": six}, "dataset": "Bench/Channel 3", "condition": {"kind": "below", "level": 2.7}}),
        ),
        (
            "data.spectrum",
            "one dataset",
            json!({"window": {"session": hour}, "dataset": "Bench/Channel 3"}),
        ),
        (
            "data.summary",
            "one minute of the hour",
            json!({"window": {"session": hour, "fromS": 1800, "toS": 1860}}),
        ),
    ];
    println!("| command | what | session | time | peak memory | result |");
    println!("|---|---|---|---|---|---|");
    for (command, what, params) in queries {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--child",
                db.to_str().unwrap(),
                command,
                &params.to_string(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        let session = if params["window"]["session"] == hour {
            "1 h"
        } else {
            "6 min"
        };
        println!(
            "| `{command}` | {what} | {session} | {:.2} s | {:.0} MiB | {} bytes |",
            r["seconds"].as_f64().unwrap(),
            r["peakMiB"].as_f64().unwrap(),
            r["bytes"]
        );
    }
}
