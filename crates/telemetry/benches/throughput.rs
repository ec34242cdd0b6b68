//! Throughput of the hot path on 8-field frames, against Serial Studio's published gates
//! (built-in numeric parser 1.024 M frames/s, Lua 256 K, JS 128 K, pipeline 1.024 M).
//!
//! Run: `./dev bench` (or `cargo bench -p sextant-telemetry --bench throughput`). A parser
//! of your own: `SEXTANT_BENCH_SCRIPT=parser.lua SEXTANT_BENCH_FRAMES=frames.txt cargo
//! bench -p sextant-telemetry --bench throughput -- parse/script-file`.
//! Criterion prints `thrpt` in elements per second; one element is one frame.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sextant_scripting::{Limits, NoHost};
use sextant_telemetry::csv::CsvWriter;
use sextant_telemetry::decode::Decoded;
use sextant_telemetry::parse::build_parser;
use sextant_telemetry::pipeline::Pipeline;
use sextant_telemetry::project::ParserConfig;
use sextant_telemetry::series::SeriesStore;
use sextant_telemetry::{Project, Rows, Timestamp, Value};

const FRAMES: usize = 10_000;

fn frames() -> Vec<String> {
    (0..FRAMES)
        .map(|i| {
            let x = i as f64 * 0.001;
            format!(
                "{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{}",
                x.sin(),
                x.cos(),
                21.5 + x,
                -x,
                1013.25,
                x * 2.0,
                0.001 * i as f64,
                i
            )
        })
        .collect()
}

fn bench_parser(c: &mut Criterion, name: &str, config: ParserConfig) {
    let lines = frames();
    let mut parser = build_parser(&config, Limits::default(), Arc::new(NoHost)).unwrap();
    let mut rows = Rows::new();
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Elements(FRAMES as u64));
    group.bench_function(name, |b| {
        b.iter(|| {
            for line in &lines {
                rows.clear();
                parser
                    .parse(&Decoded::Text(line.as_str().into()), &mut rows)
                    .unwrap();
                assert_eq!(rows.get(0).map(|r| r.len()), Some(8));
            }
        })
    });
    group.finish();
}

fn parsers(c: &mut Criterion) {
    bench_parser(
        c,
        "builtin-csv-8",
        ParserConfig::Delimited {
            separator: ",".into(),
        },
    );
    bench_parser(
        c,
        "lua-8",
        ParserConfig::Script {
            language: sextant_telemetry::project::ScriptLanguage::Lua,
            code: "function parse(frame)\n  local out = {}\n  local n = 0\n  for v in string.gmatch(frame, '[^,]+') do n = n + 1; out[n] = tonumber(v) end\n  return out\nend".into(),
        },
    );
    bench_parser(
        c,
        "js-8",
        ParserConfig::Script {
            language: sextant_telemetry::project::ScriptLanguage::JavaScript,
            code: "function parse(frame) { return frame.split(','); }".into(),
        },
    );
}

/// Any parser script on any frames: `SEXTANT_BENCH_SCRIPT` (a `.lua` or `.js` file) and
/// `SEXTANT_BENCH_FRAMES` (one frame per line), as `parse/script-file`. Measures a parser
/// nobody here wrote, on a device's own frames; nothing runs when they are not set.
fn script_file(c: &mut Criterion) {
    let (Ok(script), Ok(frames)) = (
        std::env::var("SEXTANT_BENCH_SCRIPT"),
        std::env::var("SEXTANT_BENCH_FRAMES"),
    ) else {
        return;
    };
    let language = if script.ends_with(".js") {
        sextant_telemetry::project::ScriptLanguage::JavaScript
    } else {
        sextant_telemetry::project::ScriptLanguage::Lua
    };
    let code = std::fs::read_to_string(&script).expect("SEXTANT_BENCH_SCRIPT is readable");
    let lines: Vec<String> = std::fs::read_to_string(&frames)
        .expect("SEXTANT_BENCH_FRAMES is readable")
        .lines()
        .map(str::to_owned)
        .collect();
    let config = ParserConfig::Script { language, code };
    let mut parser = build_parser(&config, Limits::default(), Arc::new(NoHost)).unwrap();
    let mut rows = Rows::new();
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Elements(lines.len() as u64));
    group.bench_function("script-file", |b| {
        b.iter(|| {
            for line in &lines {
                rows.clear();
                parser
                    .parse(&Decoded::Text(line.as_str().into()), &mut rows)
                    .expect("the script parses every frame");
            }
        })
    });
    group.finish();
}

fn pipeline(c: &mut Criterion) {
    let datasets: Vec<serde_json::Value> = (1..=8)
        .map(|i| serde_json::json!({"id": format!("ds-{i}"), "title": format!("F{i}"), "index": i}))
        .collect();
    let project: Project = serde_json::from_value(serde_json::json!({
        "schemaVersion": 1,
        "sources": [{"id": "s", "parser": {"kind": "delimited", "separator": ","}}],
        "groups": [{"id": "g", "title": "G", "datasets": datasets}]
    }))
    .unwrap();
    let stream: Vec<u8> = frames().join("\n").into_bytes();
    let mut group = c.benchmark_group("pipeline");
    group.throughput(Throughput::Elements(FRAMES as u64 - 1));
    // Rings are allocated once, as in the app; only the pipeline is rebuilt per run so
    // every run starts from the same state.
    let mut series = SeriesStore::new(8, 100_000);
    group.bench_function("bytes-to-series-8", |b| {
        b.iter_batched(
            || Pipeline::new(&project).unwrap(),
            |mut pipeline| {
                let mut n = 0u64;
                series.clear();
                // 4 KiB reads, as a serial or network source delivers them.
                for chunk in stream.chunks(4096) {
                    pipeline.push(0, Timestamp::default(), chunk, &mut |ev| {
                        n += 1;
                        series.push_frame(ev.timestamp.elapsed_s(), ev.values);
                    });
                }
                assert_eq!(n, FRAMES as u64 - 1);
                pipeline
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// CSV export (`CsvWriter`) of 8-value rows: decimals as a device sends them, and the
/// 17-digit results of arithmetic on them (a script's `/ 10`), which take the rounding.
fn csv_export(c: &mut Criterion) {
    let rows: Vec<Vec<Value>> = frames()
        .iter()
        .map(|line| {
            line.split(',')
                .map(|f| Value::Number(f.parse().unwrap()))
                .collect()
        })
        .collect();
    let divided: Vec<Vec<Value>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    Value::Number(n) => Value::Number(n / 10.0 + 0.1),
                    other => other.clone(),
                })
                .collect()
        })
        .collect();
    let columns: Vec<String> = (1..=8).map(|i| format!("G/F{i}")).collect();
    let mut group = c.benchmark_group("csv");
    group.throughput(Throughput::Elements(FRAMES as u64));
    for (name, rows) in [("device-decimals-8", &rows), ("arithmetic-8", &divided)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut w = CsvWriter::new(std::io::sink(), &columns).unwrap();
                for (i, row) in rows.iter().enumerate() {
                    w.write_row(i as f64 * 1e-5, row).unwrap();
                }
                w.rows()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(4));
    targets = parsers, script_file, pipeline, csv_export
}
criterion_main!(benches);
