//! Previews within their script time budget: what the budget leaves no time for is not run
//! and says so, and a spinning script cannot stretch a preview past it.

use std::time::Duration;

use serde_json::json;
use sextant_telemetry::dryrun::{self, FrameOutcome};
use sextant_telemetry::project::{Decoder, ParserConfig, Transform};
use sextant_telemetry::{Project, Value};

fn project(v: serde_json::Value) -> Project {
    let p: Project = serde_json::from_value(v).expect("test project deserializes");
    let issues = p.validate();
    assert!(issues.is_empty(), "test project must be valid: {issues:?}");
    p
}

fn csv_project() -> Project {
    project(json!({
        "schemaVersion": 1,
        "sources": [{"id": "src-1", "parser": {"kind": "delimited", "separator": ","}}],
        "groups": [{"id": "grp-1", "title": "G", "datasets": [
            {"id": "ds-1", "title": "A", "index": 1}
        ]}]
    }))
}

/// A JavaScript parser that keeps the CPU busy for `ms` per frame (QuickJS has a clock).
fn spinning_parser(ms: u32) -> ParserConfig {
    ParserConfig::Script {
        language: sextant_telemetry::project::ScriptLanguage::JavaScript,
        code: format!(
            "function parse(f) {{ const t = Date.now(); while (Date.now() - t < {ms}) {{}} return [f]; }}"
        ),
    }
}

#[test]
fn frames_the_budget_leaves_no_time_for_are_not_run_and_say_so() {
    let frames = vec![b"1,2".to_vec(); 3];
    let delimited = ParserConfig::Delimited {
        separator: ",".into(),
    };
    let out =
        dryrun::run_parser_within(&delimited, Decoder::PlainText, &frames, Duration::ZERO).unwrap();
    assert_eq!(out.len(), 3);
    for o in out {
        match o {
            FrameOutcome::Error { message, line } => {
                assert!(
                    message.starts_with("not run: this dry run used up its 0 s of script time"),
                    "{message}"
                );
                assert!(
                    message.contains("dry-run fewer frames at a time"),
                    "{message}"
                );
                assert_eq!(line, None);
            }
            other => panic!("ran although the budget was spent: {other:?}"),
        }
    }
}

#[test]
fn a_spinning_parser_stops_at_the_budget_and_keeps_what_it_made() {
    // 40 frames of 100 ms (under the 250 ms a call may take) would be 4 s of script time.
    let frames: Vec<Vec<u8>> = (0..40).map(|i| i.to_string().into_bytes()).collect();
    let out = dryrun::run_parser_within(
        &spinning_parser(100),
        Decoder::PlainText,
        &frames,
        Duration::from_secs(1),
    )
    .unwrap();
    assert_eq!(out.len(), 40);
    assert!(
        matches!(&out[0], FrameOutcome::Rows(rows) if rows[0] == [Value::Text("0".into())]),
        "{:?}",
        out[0]
    );
    assert!(
        matches!(&out[39], FrameOutcome::Error { message, .. } if message.starts_with("not run: this dry run used up its 1 s")),
        "{:?}",
        out[39]
    );
}

#[test]
fn transform_values_past_the_budget_are_not_run() {
    let t = Transform {
        language: sextant_telemetry::project::TransformLanguage::Expression,
        code: "value * 2".into(),
    };
    let out = dryrun::run_transform_within(&t, &[Value::Number(1.0)], Duration::ZERO).unwrap();
    let e = out[0].as_ref().unwrap_err();
    assert!(e.contains("dry-run fewer values at a time"), "{e}");
    let out = dryrun::run_transform(&t, &[Value::Number(1.0)]).unwrap();
    assert_eq!(out[0], Ok(Value::Number(2.0)));
}

#[test]
fn an_end_to_end_run_past_its_budget_says_so() {
    let p = csv_project();
    let e = dryrun::end_to_end_within(&p, 0, b"1\n2\n", Duration::ZERO).unwrap();
    assert!(e.rows.is_empty());
    assert_eq!(e.frames, 2);
    let note = e.last_error.unwrap();
    assert!(note.contains("ran out of its 0 s of script time"), "{note}");
    assert!(note.contains("dry-run fewer bytes at a time"), "{note}");
    let e = dryrun::end_to_end(&p, 0, b"1\n2\n").unwrap();
    assert_eq!(e.rows.len(), 2);
    assert_eq!(e.last_error, None);
}

#[test]
fn frames_are_counted_as_the_source_cuts_them_without_running_scripts() {
    let mut p = csv_project();
    p.sources[0].parser = spinning_parser(10_000);
    assert_eq!(dryrun::count_frames(&p, 0, b"1\n2\n3").unwrap(), 2);
    assert!(dryrun::count_frames(&p, 1, b"1\n").is_err());
}
