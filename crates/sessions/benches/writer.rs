//! How fast a recording is written: a session writer fed the demo project's frames as fast
//! as it takes them, timed from the first row to the close that commits the last. One
//! element is one frame. Two shapes of raw data: a stream (one 2 KiB chunk per 100 frames,
//! like a UART or the simulator) and messages (one 24-byte chunk per frame, like CAN, UDP or
//! MQTT).
//!
//! The queue is large enough that nothing is dropped, so the figure is the writer's own
//! rate: how far above a device's rate it sits is the headroom a busy machine eats into.
//!
//! Run: `cargo bench -p sextant-sessions --bench writer`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sextant_devices::simulator::demo_project;
use sextant_sessions::{NewSession, SessionWriter, WriterOptions};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::project::Project;
use sextant_telemetry::{Chunk, FrameEvent, FrameSink, Pipeline, Timestamp, Value};

const FRAMES: u64 = 200_000;

struct Shape {
    name: &'static str,
    frames_per_chunk: u64,
    chunk_bytes: usize,
}

const SHAPES: [Shape; 2] = [
    Shape {
        name: "stream",
        frames_per_chunk: 100,
        chunk_bytes: 2048,
    },
    Shape {
        name: "messages",
        frames_per_chunk: 1,
        chunk_bytes: 24,
    },
];

fn record(
    db: &std::path::Path,
    project: &Project,
    datasets: &[DatasetInfo],
    shape: &Shape,
) -> Duration {
    let options = WriterOptions {
        queue: (FRAMES + FRAMES / shape.frames_per_chunk + 16) as usize,
        ..WriterOptions::default()
    };
    let writer = SessionWriter::start(
        db,
        NewSession {
            title: "bench".into(),
            project: project.clone(),
            tags: Vec::new(),
        },
        options,
    )
    .unwrap();
    let mut sink = writer.sink();
    let raw = Bytes::from(vec![b'7'; shape.chunk_bytes]);
    let mut values = vec![Value::Null; datasets.len()];
    let start = Instant::now();
    for i in 0..FRAMES {
        let timestamp = Timestamp {
            elapsed_ns: i * 10_000,
            unix_ns: 1_700_000_000_000_000_000 + (i * 10_000) as i64,
        };
        if i % shape.frames_per_chunk == 0 {
            sink.chunk(
                0,
                &Chunk {
                    data: raw.clone(),
                    timestamp,
                },
            );
        }
        for (k, v) in values.iter_mut().enumerate() {
            *v = Value::Number((i as f64 * 0.001 + k as f64).sin());
        }
        sink.frame(
            &FrameEvent {
                source: 0,
                timestamp,
                values: &values,
            },
            datasets,
        );
    }
    drop(sink);
    let report = writer.close().unwrap();
    let took = start.elapsed();
    assert_eq!(
        report.frames, FRAMES,
        "the bench dropped frames: {report:?}"
    );
    took
}

fn bench(c: &mut Criterion) {
    let project = demo_project();
    let datasets = Pipeline::new(&project).unwrap().datasets().to_vec();
    let mut group = c.benchmark_group("writer");
    group.sample_size(10);
    group.throughput(Throughput::Elements(FRAMES));
    for shape in &SHAPES {
        group.bench_function(shape.name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir().unwrap();
                    let db = dir.path().join("sessions.db");
                    total += record(&db, &project, &datasets, shape);
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
