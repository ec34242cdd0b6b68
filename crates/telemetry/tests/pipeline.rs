//! The whole hot path on real bytes: framing → decoding → parsing → transforms → values.

use std::time::Duration;

use serde_json::json;
use sextant_scripting::Limits;
use sextant_telemetry::csv::CsvWriter;
use sextant_telemetry::pipeline::{Pipeline, PipelineOptions};
use sextant_telemetry::{Project, Timestamp, Value};

fn project(v: serde_json::Value) -> Project {
    let p: Project = serde_json::from_value(v).expect("test project deserializes");
    let issues = p.validate();
    assert!(issues.is_empty(), "test project must be valid: {issues:?}");
    p
}

/// Feeds `chunks` to `source` and returns every produced row of final values.
fn run(pipeline: &mut Pipeline, source: usize, chunks: &[&[u8]]) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        let ts = Timestamp {
            elapsed_ns: i as u64 * 1000,
            unix_ns: 0,
        };
        pipeline.push(source, ts, c, &mut |ev| {
            assert_eq!(ev.source, source);
            out.push(ev.values.to_vec());
        });
    }
    out
}

fn num(v: &Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("expected a number, got {v:?}"))
}

#[test]
fn csv_with_transforms_and_a_scripted_virtual_dataset() {
    let p = project(json!({
        "schemaVersion": 1,
        "sources": [{"id": "src-1", "parser": {"kind": "delimited", "separator": ","}}],
        "groups": [{"id": "grp-1", "title": "Power", "datasets": [
            {"id": "ds-1", "title": "Voltage", "index": 1},
            {"id": "ds-2", "title": "Current", "index": 2,
             "transform": {"language": "expression", "code": "value / 1000"}},
            {"id": "ds-3", "title": "Power", "virtual": true,
             "transform": {"language": "javascript",
                           "code": "function transform(v) { return datasetGetFinal('ds-1') * datasetGetFinal('ds-2'); }"}},
            {"id": "ds-4", "title": "Raw current", "virtual": true,
             "transform": {"language": "lua", "code": "function transform(v) return datasetGetRaw('Current') end"}}
        ]}]
    }));
    let mut pipeline = Pipeline::new(&p).unwrap();
    // Split mid-number and mid-delimiter: values must not depend on read boundaries.
    let rows = run(&mut pipeline, 0, &[b"12,5", b"00\n11.5,", b"2000\n"]);
    assert_eq!(rows.len(), 2);
    assert_eq!(num(&rows[0][0]), 12.0);
    assert_eq!(num(&rows[0][1]), 0.5);
    assert_eq!(num(&rows[0][2]), 6.0);
    assert_eq!(num(&rows[0][3]), 500.0);
    assert_eq!(num(&rows[1][2]), 23.0);
    let columns: Vec<String> = pipeline.datasets().iter().map(|d| d.column()).collect();
    assert_eq!(
        columns,
        [
            "Power/Voltage",
            "Power/Current",
            "Power/Power",
            "Power/Raw current"
        ]
    );
}

#[test]
fn multi_source_frames_update_only_their_datasets() {
    let p = project(json!({
        "schemaVersion": 1,
        "sources": [
            {"id": "a", "parser": {"kind": "delimited"}},
            {"id": "b", "parser": {"kind": "keyValue", "keys": ["t"]}, "framing": {"mode": "endOnly", "end": [";"]}}
        ],
        "groups": [{"id": "g", "title": "G", "datasets": [
            {"id": "d1", "title": "A1", "index": 1, "source": "a"},
            {"id": "d2", "title": "A2", "index": 2, "source": "a"},
            {"id": "d3", "title": "T", "index": 1, "source": "b"}
        ]}]
    }));
    let mut pipeline = Pipeline::new(&p).unwrap();
    let a = run(&mut pipeline, 0, &[b"1,2\n"]);
    assert_eq!(
        a[0],
        vec![Value::Number(1.0), Value::Number(2.0), Value::Null]
    );
    let b = run(&mut pipeline, 1, &[b"t=9;x=1;"]);
    assert_eq!(b.len(), 1, "a frame without known keys is skipped");
    assert_eq!(
        b[0],
        vec![Value::Number(1.0), Value::Number(2.0), Value::Number(9.0)]
    );
    let a = run(&mut pipeline, 0, &[b"3,\n"]);
    assert_eq!(
        a[0],
        vec![Value::Number(3.0), Value::Number(2.0), Value::Number(9.0)],
        "empty field keeps the last value"
    );
}

#[test]
fn quick_plot_grows_datasets_named_by_the_header() {
    let p = project(
        json!({"schemaVersion": 1, "sources": [{"id": "s", "parser": {"kind": "quickPlot"}}]}),
    );
    let mut pipeline = Pipeline::new(&p).unwrap();
    assert!(pipeline.datasets().is_empty());
    let rows = run(&mut pipeline, 0, &[b"time,temp\r\n0,21.5\r\n1,22,99\r\n"]);
    assert_eq!(rows.len(), 2);
    let titles: Vec<&str> = pipeline
        .datasets()
        .iter()
        .map(|d| d.title.as_str())
        .collect();
    assert_eq!(titles, ["time", "temp", "Channel 3"]);
    assert_eq!(
        rows[1],
        vec![Value::Number(1.0), Value::Number(22.0), Value::Number(99.0)]
    );
}

#[test]
fn quick_plot_stops_growing_at_its_cap_and_says_so() {
    use sextant_telemetry::pipeline::MAX_AUTO_DATASETS;
    let p = project(
        json!({"schemaVersion": 1, "sources": [{"id": "s", "parser": {"kind": "quickPlot"}}]}),
    );
    let mut pipeline = Pipeline::new(&p).unwrap();
    // One line as wide as a frame allows.
    let mut wide = vec!["0"; 30_000].join(",");
    wide.push('\n');
    let rows = run(&mut pipeline, 0, &[wide.as_bytes(), b"1,2,3\n"]);
    assert_eq!(pipeline.datasets().len(), MAX_AUTO_DATASETS);
    assert_eq!(rows[0].len(), MAX_AUTO_DATASETS);
    assert_eq!(
        &rows[1][..3],
        &[Value::Number(1.0), Value::Number(2.0), Value::Number(3.0)]
    );
    let said = pipeline
        .stats(0)
        .unwrap()
        .last_error
        .clone()
        .unwrap_or_default();
    assert!(
        said.contains("30000 values") && said.contains("first 256"),
        "{said}"
    );
}

#[test]
fn script_errors_are_counted_and_the_stream_goes_on() {
    let p = project(json!({
        "schemaVersion": 1,
        "sources": [{"id": "s", "parser": {"kind": "script", "language": "lua",
            "code": "function parse(frame)\n  if frame == 'boom' then error('bad frame') end\n  return { tonumber(frame) }\nend"}}],
        "groups": [{"id": "g", "datasets": [{"id": "d", "title": "D", "index": 1}]}]
    }));
    let mut pipeline = Pipeline::new(&p).unwrap();
    let rows = run(&mut pipeline, 0, &[b"1\nboom\n2\n"]);
    assert_eq!(rows.len(), 2);
    let stats = pipeline.stats(0).unwrap();
    assert_eq!(stats.parse_errors, 1);
    assert!(
        stats.last_error.as_deref().unwrap().contains("line 2"),
        "{stats:?}"
    );
}

#[test]
fn a_backtracking_lua_pattern_fails_its_frame_and_the_stream_goes_on() {
    // Lua's pattern matcher runs natively, where the instruction hook cannot see it; the
    // sandbox's own matcher stops `.-.-.-.-b` on 10 000 characters on its step budget.
    let p = project(json!({
        "schemaVersion": 1,
        "sources": [{"id": "s", "parser": {"kind": "script", "language": "lua",
            "code": "function parse(frame)\n  if frame == 'hang' then return { ('a'):rep(1e4):find('.-.-.-.-b') } end\n  return { tonumber(frame) }\nend"}}],
        "groups": [{"id": "g", "datasets": [{"id": "d", "title": "D", "index": 1}]}]
    }));
    let options = PipelineOptions {
        // A generous clock, so the step budget (not machine speed) decides.
        script_limits: Limits {
            timeout: Duration::from_secs(600),
            ..Limits::default()
        },
    };
    let mut pipeline = Pipeline::with_options(&p, options).unwrap();
    let rows = run(&mut pipeline, 0, &[b"1\nhang\n2\n", b"3\n"]);
    let values: Vec<f64> = rows.iter().map(|r| num(&r[0])).collect();
    assert_eq!(values, [1.0, 2.0, 3.0]);
    let stats = pipeline.stats(0).unwrap();
    assert_eq!(stats.parse_errors, 1);
    let error = stats.last_error.as_deref().unwrap();
    assert!(error.contains("timed out at line 2"), "{stats:?}");
    assert!(error.contains("step budget"), "{stats:?}");
}

#[test]
fn a_runaway_parser_is_stopped_then_disabled_without_stopping_other_sources() {
    let p = project(json!({
        "schemaVersion": 1,
        "sources": [
            {"id": "loop", "parser": {"kind": "script", "language": "javascript",
                "code": "function parse(frame) { while (true) {} }"}},
            {"id": "ok", "parser": {"kind": "delimited"}}
        ],
        "groups": [{"id": "g", "datasets": [
            {"id": "d1", "title": "L", "index": 1, "source": "loop"},
            {"id": "d2", "title": "OK", "index": 1, "source": "ok"}
        ]}]
    }));
    let options = PipelineOptions {
        script_limits: Limits {
            timeout: Duration::from_millis(30),
            ..Limits::default()
        },
    };
    let mut pipeline = Pipeline::with_options(&p, options).unwrap();
    let rows = run(&mut pipeline, 0, &[b"a\nb\nc\nd\ne\n"]);
    assert!(rows.is_empty());
    let stats = pipeline.stats(0).unwrap();
    assert_eq!(stats.parse_errors, 5);
    assert!(
        stats.last_error.as_deref().unwrap().contains("disabled"),
        "{stats:?}"
    );
    let rows = run(&mut pipeline, 1, &[b"7\n"]);
    assert_eq!(rows[0][1], Value::Number(7.0));
}

#[test]
fn parsers_share_tables_with_virtual_datasets() {
    // Serial Studio's pattern: the parser stashes values in a table and returns nothing
    // useful; virtual datasets read them back. Constant tables come from the project.
    let p = project(json!({
        "schemaVersion": 1,
        "tables": [{"name": "cal", "entries": [{"name": "gain", "value": 2.5}]}],
        "sources": [{"id": "s", "parser": {"kind": "script", "language": "javascript",
            "code": "function parse(frame) { tableSet('live', 'x', parseFloat(frame)); return [0]; }"}}],
        "groups": [{"id": "g", "datasets": [
            {"id": "d", "title": "Scaled", "virtual": true,
             "transform": {"language": "lua", "code": "function transform(v)\n  return tableGet('live', 'x') * tableGet('cal', 'gain')\nend"}}
        ]}]
    }));
    let mut pipeline = Pipeline::new(&p).unwrap();
    let rows = run(&mut pipeline, 0, &[b"4\n"]);
    assert_eq!(rows[0], vec![Value::Number(10.0)]);
}

#[test]
fn unusable_transform_results_keep_the_raw_value_and_text_passes_through() {
    let p = project(json!({
        "schemaVersion": 1,
        "sources": [{"id": "s", "parser": {"kind": "delimited"}}],
        "groups": [{"id": "g", "datasets": [
            {"id": "d1", "title": "NaN", "index": 1,
             "transform": {"language": "javascript", "code": "function transform(v) { return NaN; }"}},
            {"id": "d2", "title": "Gear", "index": 2,
             "transform": {"language": "lua", "code": "function transform(v)\n  local names = {'P','R','N','D'}\n  return names[v + 1]\nend"}},
            {"id": "d3", "title": "Div", "index": 3,
             "transform": {"language": "expression", "code": "1 / value"}},
            {"id": "d4", "title": "Throws", "index": 4,
             "transform": {"language": "javascript", "code": "function transform(v) { throw new Error('nope'); }"}}
        ]}]
    }));
    let mut pipeline = Pipeline::new(&p).unwrap();
    let rows = run(&mut pipeline, 0, &[b"5,3,0,8\n"]);
    assert_eq!(
        rows[0],
        vec![
            Value::Number(5.0),
            Value::Text("D".into()),
            Value::Number(0.0),
            Value::Number(8.0)
        ]
    );
    let (errors, last) = pipeline.transform_errors();
    assert_eq!(errors, 1);
    assert!(last.unwrap().contains("nope"));
}

#[test]
fn checksum_failures_and_garbage_are_counted_not_fatal() {
    let p = project(json!({
        "schemaVersion": 1,
        "sources": [{"id": "s", "parser": {"kind": "delimited"},
            "framing": {"mode": "startEnd", "start": "$", "end": ["*"], "checksum": "xor8", "maxFrameBytes": 32}}],
        "groups": [{"id": "g", "datasets": [{"id": "d", "title": "D", "index": 1}]}]
    }));
    let mut pipeline = Pipeline::new(&p).unwrap();
    let good = |s: &str| {
        let mut f = format!("${s}*").into_bytes();
        f.push(s.bytes().fold(0, |a, b| a ^ b));
        f
    };
    let mut stream = good("1");
    stream.extend_from_slice(&[0xFF, 0x00, 0x13, 0x37]);
    stream.extend_from_slice(b"$2*\x00");
    stream.extend_from_slice(&[b'9'; 100]);
    stream.extend(good("3"));
    let rows = run(&mut pipeline, 0, &[&stream]);
    let values: Vec<f64> = rows.iter().map(|r| num(&r[0])).collect();
    assert_eq!(values, vec![1.0, 3.0]);
    let s = pipeline.stats(0).unwrap();
    assert_eq!(s.framing.checksum_failed, 1);
    assert_eq!(s.framing.frames, 2);
}

#[test]
fn csv_writer_header_rows_and_escaping() {
    let mut w = CsvWriter::new(Vec::new(), &["G/a", "G/b,c"]).unwrap();
    w.write_row(
        0.5,
        &[Value::Number(1.25), Value::Text("say \"hi\"".into())],
    )
    .unwrap();
    w.write_row(1.0, &[Value::Null, Value::Number(-2.0)])
        .unwrap();
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    assert_eq!(
        text,
        "elapsed_s,G/a,\"G/b,c\"\n0.000000,1.25,\"say \"\"hi\"\"\"\n0.500000,,-2\n"
    );
}

/// An export started 854.3 s after the app did counts from its own first row; numbers are
/// written as a person would (15 significant digits, shortest form), whatever arithmetic
/// produced them, and read back as the same decimal.
#[test]
fn csv_times_count_from_the_first_row_and_numbers_print_as_decimals() {
    let cases: &[(f64, &str)] = &[
        (1013.217553 / 10.0, "101.3217553"),
        (0.1 + 0.2, "0.3"),
        (3.0, "3"),
        (-2.5, "-2.5"),
        (1e-7, "0.0000001"),
        (123456789012.345, "123456789012.345"),
        (6.02214076e23, "602214076000000000000000"),
        (f64::NAN, "NaN"),
    ];
    let values: Vec<Value> = cases.iter().map(|(n, _)| Value::Number(*n)).collect();
    let mut w = CsvWriter::new(Vec::new(), &vec!["v"; cases.len()]).unwrap();
    w.write_row(854.3, &values).unwrap();
    w.write_row(854.8, &values).unwrap();
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let expected: Vec<&str> = cases.iter().map(|(_, s)| *s).collect();
    assert_eq!(lines[1], format!("0.000000,{}", expected.join(",")));
    assert_eq!(lines[2], format!("0.500000,{}", expected.join(",")));
    // A value a device sent with 15 digits is not changed by the rounding.
    for s in ["0.123456789012345", "98765.4321098765"] {
        let mut w = CsvWriter::new(Vec::new(), &["v"]).unwrap();
        w.write_row(0.0, &[Value::Number(s.parse().unwrap())])
            .unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().nth(1).unwrap(), format!("0.000000,{s}"));
    }
}

/// A packet of samples (a script returning rows) arrives at one time; its rows are spread
/// over the interval since the previous packet so a plot draws them in time, not as a
/// vertical line at the arrival time.
#[test]
fn rows_of_one_batch_are_spread_over_the_interval_since_the_previous_frame() {
    let p = project(json!({
        "schemaVersion": 1,
        "sources": [{"id": "src-1", "parser": {"kind": "script", "language": "javascript",
            "code": "function parse(f) { var n = parseInt(f); var r = []; for (var i = 0; i < n; i++) r.push([i]); return r; }"}}],
        "groups": [{"id": "grp-1", "title": "IMU", "datasets": [
            {"id": "ds-1", "title": "Sample", "index": 1}]}]
    }));
    let mut pipeline = Pipeline::new(&p).unwrap();
    let mut times = Vec::new();
    let mut push = |pipeline: &mut Pipeline, at_ms: u64, bytes: &[u8]| {
        let ts = Timestamp {
            elapsed_ns: at_ms * 1_000_000,
            unix_ns: 1_700_000_000_000_000_000 + (at_ms * 1_000_000) as i64,
        };
        let mut got = Vec::new();
        pipeline.push(0, ts, bytes, &mut |ev| {
            got.push((ev.timestamp, num(&ev.values[0])))
        });
        times.push(got);
    };
    push(&mut pipeline, 1000, b"4\n"); // first packet: nothing to measure by
    push(&mut pipeline, 2000, b"4\n"); // four samples taken over the last second
    push(&mut pipeline, 2500, b"1\n"); // a single row keeps its arrival time
    push(&mut pipeline, 3500, b"2\n2\n"); // two packets in one read: the second shares the time
    let ms = |batch: &Vec<(Timestamp, f64)>| {
        batch
            .iter()
            .map(|(t, _)| t.elapsed_ns / 1_000_000)
            .collect::<Vec<_>>()
    };
    assert_eq!(ms(&times[0]), [1000, 1000, 1000, 1000]);
    assert_eq!(ms(&times[1]), [1250, 1500, 1750, 2000]);
    assert_eq!(
        times[1].iter().map(|(_, v)| *v).collect::<Vec<_>>(),
        [0.0, 1.0, 2.0, 3.0]
    );
    for (t, _) in &times[1] {
        assert_eq!(
            t.unix_ns - 1_700_000_000_000_000_000,
            t.elapsed_ns as i64,
            "wall clock moves with the spread"
        );
    }
    assert_eq!(ms(&times[2]), [2500]);
    assert_eq!(ms(&times[3]), [3000, 3500, 3500, 3500]);
}
