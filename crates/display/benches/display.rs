//! Display tick cost: 16 datasets with full 64 Ki-sample windows, encoded for one subscriber
//! at the UI benchmark's 10 000 visible points per plot; and the sink's per-frame cost.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sextant_display::{DisplayOptions, Scope, WINDOW_SAMPLES};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::FrameSink;
use sextant_telemetry::{FrameEvent, Timestamp, Value};

fn datasets(n: usize) -> Vec<DatasetInfo> {
    (0..n)
        .map(|i| DatasetInfo {
            id: format!("d{i}"),
            title: format!("D{i}"),
            group: "G".into(),
            units: String::new(),
            source: Some(0),
            slot: Some(i),
        })
        .collect()
}

/// `frames` frames of sines at 100 000 frames/s, each dataset's phase `step` a frame.
fn feed(sink: &mut impl FrameSink, ds: &[DatasetInfo], frames: u64, step: f64) {
    let mut values = vec![Value::Number(0.0); ds.len()];
    for i in 0..frames {
        for (k, v) in values.iter_mut().enumerate() {
            *v = Value::Number(((i as usize + k) as f64 * step).sin());
        }
        let event = FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: i * 10_000,
                unix_ns: 0,
            },
            values: &values,
        };
        sink.frame(&event, ds);
    }
}

fn bench(c: &mut Criterion) {
    let ds = datasets(16);
    let scope = Scope::new();
    let mut sink = scope.sink();
    feed(&mut sink, &ds, WINDOW_SAMPLES as u64, 0.01);
    let values = vec![Value::Number(0.0); 16];
    let mut g = c.benchmark_group("display");
    g.throughput(Throughput::Elements(16));
    let options = DisplayOptions {
        points: 10_000,
        time_range_s: 60.0,
        ..DisplayOptions::default()
    };
    g.bench_function("tick_16x64k_to_10k_points", |b| {
        b.iter(|| {
            // A fresh subscriber always gets a frame (nothing is "unchanged").
            let mut sub = scope.subscribe();
            scope.frame(&options, &mut sub).unwrap().len()
        })
    });
    g.throughput(Throughput::Elements(1));
    let mut t = WINDOW_SAMPLES as u64;
    g.bench_function("sink_frame_16_values", |b| {
        b.iter(|| {
            t += 1;
            let event = FrameEvent {
                source: 0,
                timestamp: Timestamp {
                    elapsed_ns: t * 10_000,
                    unix_ns: 0,
                },
                values: &values,
            };
            sink.frame(&event, &ds);
        })
    });
    g.finish();
}

/// The soak's dashboard: 10 s of 16 datasets at 100 000 frames/s (65 536 raw samples each,
/// the rest from the overview), each plot asking for the ~760 points its width can show.
fn bench_long_window(c: &mut Criterion) {
    let ds = datasets(16);
    let scope = Scope::new();
    feed(&mut scope.sink(), &ds, 1_000_000, 0.001);
    let options = DisplayOptions {
        points: 10_000,
        time_range_s: 10.0,
        windows: (0..16).map(|i| (i, 760)).collect(),
        ..DisplayOptions::default()
    };
    let mut g = c.benchmark_group("display");
    g.throughput(Throughput::Elements(16));
    g.bench_function("tick_16x10s_at_100k_to_760_points", |b| {
        b.iter(|| {
            let mut sub = scope.subscribe();
            scope.frame(&options, &mut sub).unwrap().len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench, bench_long_window);
criterion_main!(benches);
