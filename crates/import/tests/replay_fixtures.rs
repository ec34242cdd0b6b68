//! Fixture self-check: every capture, run through Sextant's pipeline with the imported
//! project, gives the rows its `.expected.json` promises. This guards the fixtures
//! themselves (delimiters, checksums, parser and transform code) as much as the importer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use sextant_import::import_serial_studio;
use sextant_telemetry::pipeline::{Pipeline, Timestamp};
use sextant_telemetry::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/serial-studio")
}

fn project_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixture folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".ssproj")
                || (name.ends_with(".json") && !name.ends_with(".expected.json"))
        })
        .collect();
    files.sort();
    files
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// Rows produced by `capture` on `source`, each holding the values of `columns`.
fn replay(
    pipeline: &mut Pipeline,
    source: usize,
    capture: &[u8],
    columns: &[usize],
) -> Vec<Vec<Option<f64>>> {
    let mut rows = Vec::new();
    // Deliver the bytes in uneven chunks, as a port would.
    let mut at = 0;
    let mut step = 1;
    while at < capture.len() {
        let end = (at + step).min(capture.len());
        pipeline.push(source, Timestamp::default(), &capture[at..end], &mut |e| {
            rows.push(
                columns
                    .iter()
                    .map(|&c| e.values.get(c).and_then(number))
                    .collect(),
            );
        });
        at = end;
        step = step % 7 + 3;
    }
    rows
}

fn check_rows(name: &str, got: &[Vec<Option<f64>>], want: &Json) {
    let want = want.as_array().expect("rows");
    assert_eq!(got.len(), want.len(), "{name}: row count; got {got:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let w = w.as_array().expect("row");
        assert_eq!(g.len(), w.len(), "{name}: row {i} width");
        for (k, (gv, wv)) in g.iter().zip(w).enumerate() {
            let wv = wv.as_f64().expect("number");
            assert!(
                gv.is_some_and(|g| close(g, wv)),
                "{name}: row {i} column {k}: got {gv:?}, want {wv}"
            );
        }
    }
}

#[test]
fn captures_replay_to_the_expected_rows() {
    let files = project_files();
    assert!(files.len() >= 5, "fixtures missing: {files:?}");
    for file in files {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let stem = name
            .rsplit_once('.')
            .map(|(s, _)| s.to_string())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&file).expect("read project");
        let project = import_serial_studio(&text).expect("imports").project;
        let expected: Json = serde_json::from_str(
            &std::fs::read_to_string(fixtures().join(format!("{stem}.expected.json")))
                .expect("expected file"),
        )
        .expect("expected json");
        let titles: Vec<String> = expected["datasets"]
            .as_array()
            .expect("datasets")
            .iter()
            .map(|t| t.as_str().expect("title").to_string())
            .collect();
        let mut pipeline = Pipeline::new(&project).unwrap_or_else(|e| panic!("{name}: {e}"));
        let column_of = |title: &str| {
            pipeline
                .datasets()
                .iter()
                .position(|d| d.title == title)
                .unwrap_or_else(|| panic!("{name}: no dataset titled {title}"))
        };
        let columns: Vec<usize> = titles.iter().map(|t| column_of(t)).collect();

        if let Some(by_source) = expected.get("rows_by_source").and_then(Json::as_object) {
            let by_source: BTreeMap<_, _> = by_source.iter().collect();
            for (source_id, want) in by_source {
                let si = project
                    .sources
                    .iter()
                    .position(|s| &s.id == source_id)
                    .unwrap_or_else(|| panic!("{name}: no source {source_id}"));
                let own: Vec<usize> = titles
                    .iter()
                    .zip(&columns)
                    .filter(|(t, _)| {
                        project
                            .datasets()
                            .find(|d| &d.title == *t)
                            .and_then(|d| project.source_of(d))
                            == Some(source_id.as_str())
                    })
                    .map(|(_, c)| *c)
                    .collect();
                let capture = std::fs::read(fixtures().join(format!("{stem}.{source_id}.capture")))
                    .expect("capture");
                let got = replay(&mut pipeline, si, &capture, &own);
                check_rows(&format!("{name} {source_id}"), &got, want);
            }
        } else {
            let capture =
                std::fs::read(fixtures().join(format!("{stem}.capture"))).expect("capture");
            let got = replay(&mut pipeline, 0, &capture, &columns);
            check_rows(&name, &got, &expected["rows"]);
        }
    }
}

/// The wrapper that feeds a legacy `parse(frame, separator)` its separator really runs.
#[test]
fn legacy_separator_wrapper_runs_in_the_pipeline() {
    let doc = serde_json::json!({
        "title": "Old",
        "frameStart": "/*",
        "frameEnd": "*/",
        "separator": ";",
        "frameParser": "function parse(frame, separator) {\n  return frame.trim().split(separator);\n}",
        "groups": [{"title": "G", "datasets": [
            {"title": "a", "index": 1},
            {"title": "b", "index": 2}
        ]}]
    });
    let imported = import_serial_studio(&doc.to_string()).expect("imports");
    let mut pipeline = Pipeline::new(&imported.project).expect("pipeline");
    let got = replay(&mut pipeline, 0, b"/* 1.5;-2 */", &[0, 1]);
    assert_eq!(got, vec![vec![Some(1.5), Some(-2.0)]]);
}
