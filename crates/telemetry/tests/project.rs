//! Project files: round trips, tolerance of unknown keys, precise errors, atomic saves,
//! and the checked-in JSON Schema.

mod common;

use serde_json::json;
use sextant_telemetry::project::{LoadError, Project, SCHEMA_VERSION};

fn full_project() -> serde_json::Value {
    json!({
        "format": "sextant-project",
        "schemaVersion": 1,
        "title": "Rover",
        "futureTopLevelKey": {"kept": true},
        "sources": [{
            "id": "src-1", "title": "UART",
            "connection": {"type": "serial", "port": "/dev/ttyUSB0", "baud": 921600, "parity": "even"},
            "framing": {"mode": "startEnd", "start": "$", "end": ["\\n", ";"], "checksum": "crc16-modbus"},
            "decoder": "plainText",
            "parser": {"kind": "keyValue", "keys": ["v", "i"], "pairSeparator": ";"},
            "vendorExtension": 42
        }],
        "groups": [{"id": "grp-1", "title": "Power", "widget": "multiPlot", "datasets": [
            {"id": "ds-1", "title": "Voltage", "units": "V", "index": 1, "widget": "gauge",
             "min": 0, "max": 5, "alarms": [{"min": 4.5, "max": 5, "severity": "critical", "label": "Over"}],
             "colour": "#ff0000"},
            {"id": "ds-2", "title": "Current", "index": 2, "xAxis": {"mode": "dataset", "id": "ds-1"},
             "transform": {"language": "expression", "code": "value * 2"}}
        ]}],
        "actions": [{"id": "act-1", "title": "Reset", "payload": "AA 55", "hex": true, "lineEnding": "crLf"}],
        "workspaces": [{"id": "ws-1", "title": "Main", "tiles": [{"group": "grp-1", "w": 4, "h": 3}]}],
        "mqttPublisher": {"enabled": true, "topic": "rover/frames", "format": "csv", "rateHz": 20}
    })
}

#[test]
fn round_trip_keeps_everything_including_unknown_keys() {
    let text = full_project().to_string();
    let p = Project::from_json_str(&text).unwrap();
    assert_eq!(p.extra["futureTopLevelKey"], json!({"kept": true}));
    assert_eq!(p.sources[0].extra["vendorExtension"], json!(42));
    assert_eq!(p.groups[0].datasets[0].extra["colour"], json!("#ff0000"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rover.sextant.json");
    p.save(&path).unwrap();
    let again = Project::load(&path).unwrap();
    assert_eq!(again, p);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temp files left behind");
    // Saving twice gives identical bytes (stable key order: diffs stay readable).
    let first = std::fs::read(&path).unwrap();
    again.save(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), first);
}

/// Found by the merge-patch fuzz target: a number the JSON parser rounded differently on
/// each read changed a project on every save and reload. Every number – in a known field
/// or a key Sextant keeps without knowing – now reads back to the same bits.
#[test]
fn numbers_read_back_to_the_same_bits_after_any_number_of_saves() {
    let project = full_project();
    for (i, n) in [
        "2222222222322222222222222222202222222222222220",
        "2.2222222223222222e45",
        "0.1",
        "1e-320",
        "1.7976931348623157e308",
        "123456789.12345678",
        "-0.000000000000000000000000000000123456789",
    ]
    .iter()
    .enumerate()
    {
        let text =
            project
                .to_string()
                .replacen("\"colour\"", &format!("\"n{i}\": {n}, \"colour\""), 1);
        let first = Project::from_json_str(&text).unwrap();
        let mut p = first.clone();
        for _ in 0..3 {
            p = Project::from_json_str(&p.to_json_string()).unwrap();
        }
        assert_eq!(p, first, "{n}");
    }
}

#[test]
fn shape_errors_name_the_exact_path() {
    let mut v = full_project();
    v["groups"][0]["datasets"][1]["index"] = json!("two");
    match Project::from_json_str(&v.to_string()) {
        Err(LoadError::Shape { path, .. }) => assert_eq!(path, "groups[0].datasets[1].index"),
        other => panic!("expected a shape error, got {other:?}"),
    }
    let mut v = full_project();
    v["sources"][0]["framing"]["checksum"] = json!("crc64");
    match Project::from_json_str(&v.to_string()) {
        Err(LoadError::Shape { path, message }) => {
            assert_eq!(path, "sources[0].framing.checksum");
            assert!(message.contains("crc64"), "{message}");
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
}

#[test]
fn semantic_problems_are_all_reported_with_paths() {
    let mut v = full_project();
    v["groups"][0]["datasets"][1]["id"] = json!("ds-1");
    v["groups"][0]["datasets"][0]["source"] = json!("nope");
    v["groups"][0]["datasets"][0]["min"] = json!(9);
    v["sources"][0]["framing"]["end"] = json!(["1", "2", "3", "4", "5", "6", "7", "8", "9"]);
    v["groups"][0]["datasets"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "ds-9", "virtual": true}));
    v["workspaces"][0]["tiles"][0]["group"] = json!("grp-404");
    v["actions"][0]["payload"] = json!("not hex");
    let Err(LoadError::Invalid(issues)) = Project::from_json_str(&v.to_string()) else {
        panic!("expected validation issues");
    };
    let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
    for want in [
        "groups[0].datasets[1].id",
        "groups[0].datasets[0].source",
        "groups[0].datasets[0].min",
        "sources[0].framing.end",
        "groups[0].datasets[2].transform",
        "workspaces[0].tiles[0].group",
        "actions[0].payload",
    ] {
        assert!(paths.contains(&want), "missing {want} in {issues:#?}");
    }
}

#[test]
fn hex_fields_holding_other_text_are_reported_not_a_crash() {
    let mut v = full_project();
    v["sources"][0]["framing"]["delimiterFormat"] = json!("hex");
    v["sources"][0]["framing"]["start"] = json!("\u{20ac}");
    v["sources"][0]["framing"]["end"] = json!(["0D \u{20ac}", "+A"]);
    v["actions"][0]["payload"] = json!("A\u{20ac}");
    let Err(LoadError::Invalid(issues)) = Project::from_json_str(&v.to_string()) else {
        panic!("expected validation issues");
    };
    let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
    for want in [
        "sources[0].framing.start",
        "sources[0].framing.end[0]",
        "sources[0].framing.end[1]",
        "actions[0].payload",
    ] {
        assert!(paths.contains(&want), "missing {want} in {issues:#?}");
    }
}

#[test]
fn version_and_syntax_errors_say_what_to_do() {
    let e = Project::from_json_str("{\"title\": \"x\",\n \"groups\": [}").unwrap_err();
    assert!(matches!(e, LoadError::Syntax { line: 2, .. }), "{e:?}");
    let e = Project::from_json_str(r#"{"title": "x", "groups": []}"#).unwrap_err();
    assert!(e.to_string().contains("sextant import"), "{e}");
    // A Serial Studio file has a schemaVersion too; it must not pass for a Sextant one.
    let e =
        Project::from_json_str(r#"{"schemaVersion": 3, "title": "x", "groups": []}"#).unwrap_err();
    assert!(matches!(e, LoadError::NotASextantProject), "{e}");
    let e = Project::from_json_str(&format!(
        r#"{{"format": "sextant-project", "schemaVersion": {}}}"#,
        SCHEMA_VERSION + 1
    ))
    .unwrap_err();
    assert!(e.to_string().contains("newer Sextant"), "{e}");
    let e = Project::load(std::path::Path::new("/nonexistent/dir/p.json")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/dir/p.json"), "{e}");
}

#[test]
fn the_published_schema_is_current() {
    let path = common::fixture("../docs/project.schema.json");
    let generated = serde_json::to_string_pretty(&Project::json_schema()).unwrap() + "\n";
    if std::env::var_os("SEXTANT_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/project.schema.json is stale; regenerate it with \
         `SEXTANT_BLESS=1 cargo test -p sextant-telemetry --test project`"
    );
}

#[test]
fn the_schema_accepts_a_real_project_and_describes_its_parts() {
    let schema = Project::json_schema();
    let text = schema.to_string();
    for needle in [
        "schemaVersion",
        "framing",
        "checksum",
        "crc16-modbus",
        "alarms",
        "xAxis",
        "keyValue",
        "pairSeparator",
    ] {
        assert!(text.contains(needle), "schema lacks {needle}");
    }
}

#[test]
fn can_sources_need_raw_bytes_and_one_frame_per_chunk() {
    let layout = json!({"kind": "can", "messages": [
        {"id": 256, "signals": [{"name": "rpm", "startBit": 0, "size": 16}]}]});
    let mut v = json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "can", "parser": layout,
                     "decoder": "binary", "framing": {"mode": "none"}}]
    });
    let p = Project::from_json_str(&v.to_string()).unwrap();
    assert!(p.validate().is_empty(), "{:?}", p.validate());
    v["sources"][0]["decoder"] = json!("plainText");
    v["sources"][0]["framing"]["mode"] = json!("endOnly");
    v["sources"][0]["parser"]["messages"] = json!([]);
    let Err(LoadError::Invalid(issues)) = Project::from_json_str(&v.to_string()) else {
        panic!("expected validation issues");
    };
    let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "sources[0].parser.messages",
            "sources[0].decoder",
            "sources[0].framing.mode"
        ],
        "{issues:#?}"
    );
}
