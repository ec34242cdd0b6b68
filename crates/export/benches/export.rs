//! Export rates: a recorded session of 16 datasets at 1 kHz for six minutes (360 000
//! frames, 5.76 M values) written as CSV (for reference), MCAP and Parquet, three times
//! each; the time, frames a second and the file's size. Then the same frames recorded
//! live as MCAP: what the pipeline thread spends handing them over, and the writer
//! thread's rate.
//!
//! `cargo bench -p sextant-export --bench export` (the database is written once under the
//! target directory and reused).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sextant_export::{export_file, Format, McapSink};
use sextant_sessions::{NewSession, SessionStore, SessionWriter, WriterOptions};
use sextant_telemetry::pipeline::{DatasetInfo, FrameEvent};
use sextant_telemetry::{Project, Timestamp, Value};

const DATASETS: usize = 16;
const RATE_HZ: u64 = 1000;
const SECONDS: u64 = 360;

fn folder() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("bench-export")
}

fn datasets() -> Vec<DatasetInfo> {
    (0..DATASETS)
        .map(|i| DatasetInfo {
            id: format!("d{i}"),
            title: format!("Channel {i}"),
            group: if i < 8 { "Left" } else { "Right" }.into(),
            units: "V".into(),
            source: Some(0),
            slot: Some(i),
        })
        .collect()
}

/// Six minutes of sines with a little noise, one per dataset: each frame's values to `f`.
fn six_minutes(mut f: impl FnMut(u64, &[Value])) {
    let mut noise = 0x9E37_79B9_7F4A_7C15u64;
    let mut values = vec![Value::Null; DATASETS];
    for n in 0..SECONDS * RATE_HZ {
        let t = n as f64 / RATE_HZ as f64;
        for (i, v) in values.iter_mut().enumerate() {
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            let jitter = (noise >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            let freq = 0.5 + i as f64;
            *v = Value::Number(3.3 + (std::f64::consts::TAU * freq * t).sin() + 0.01 * jitter);
        }
        f(n * (1_000_000_000 / RATE_HZ), &values);
    }
}

/// The six minutes into a session.
fn record(db: &Path) -> i64 {
    let session = NewSession {
        title: "six minutes".into(),
        project: Project::default(),
        tags: vec![],
    };
    let options = WriterOptions {
        queue: 1 << 18,
        ..WriterOptions::default()
    };
    let writer = SessionWriter::start(db, session, options).unwrap();
    let feed = writer.feed();
    feed.columns(&datasets());
    six_minutes(|elapsed_ns, values| {
        let event = FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns,
                unix_ns: 0,
            },
            values,
        };
        // A full queue waits for the writer: a bench input, not a live device.
        while !feed.frame(&event) {
            std::thread::sleep(Duration::from_micros(200));
        }
    });
    writer.close().unwrap().id
}

fn main() {
    let dir = folder();
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("export-16x1kHz-6min.db");
    let id = if db.exists() { 1 } else { record(&db) };
    let frames = SECONDS * RATE_HZ;
    println!("| format | time | frames/s | file |");
    println!("|---|---|---|---|");
    for name in ["csv", "mcap", "parquet"] {
        let path = dir.join(format!("export.{name}"));
        let mut times = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            let written = match name {
                "csv" => SessionStore::open(&db)
                    .unwrap()
                    .export_csv_file(id, &path)
                    .unwrap(),
                "mcap" => export_file(&db, id, Format::Mcap, &path).unwrap().frames,
                _ => export_file(&db, id, Format::Parquet, &path).unwrap().frames,
            };
            assert_eq!(written, frames);
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let size = std::fs::metadata(&path).unwrap().len() as f64 / (1 << 20) as f64;
        println!(
            "| {name} | {:.2}–{:.2} s | {:.0} K | {size:.1} MiB |",
            times[0],
            times[2],
            frames as f64 / times[1] / 1e3
        );
    }

    live_mcap(&dir, frames);
}

/// The six minutes recorded live as MCAP, three times, through a queue that holds them
/// all: the pipeline thread's time to hand every frame over, and the writer's rate.
fn live_mcap(dir: &Path, frames: u64) {
    use sextant_telemetry::FrameSink;
    let datasets = datasets();
    let path = dir.join("live.mcap");
    let (mut handed, mut total) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let mut sink = McapSink::with_queue(&path, &Project::default(), 1 << 20, 1 << 32);
        let status = sink.status();
        let start = Instant::now();
        six_minutes(|elapsed_ns, values| {
            let event = FrameEvent {
                source: 0,
                timestamp: Timestamp {
                    elapsed_ns,
                    unix_ns: 1_700_000_000_000_000_000,
                },
                values,
            };
            sink.frame(&event, &datasets);
        });
        handed.push(start.elapsed().as_secs_f64());
        sink.finish();
        total.push(start.elapsed().as_secs_f64());
        let written = status.frames.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(written, frames, "a queue this large drops nothing");
    }
    handed.sort_by(f64::total_cmp);
    total.sort_by(f64::total_cmp);
    let size = std::fs::metadata(&path).unwrap().len() as f64 / (1 << 20) as f64;
    println!(
        "| mcap, recorded live | {:.2}–{:.2} s | {:.0} K | {size:.1} MiB |",
        total[0],
        total[2],
        frames as f64 / total[1] / 1e3
    );
    println!(
        "\nLive MCAP, the pipeline thread's part (values generated and handed over): \
         {:.2}–{:.2} s, {:.2} µs a frame",
        handed[0],
        handed[2],
        handed[1] / frames as f64 * 1e6
    );
}
