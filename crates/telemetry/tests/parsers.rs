//! Parser cases from fixtures/telemetry/parsers.json (built-in parsers, decoders, scripts).

mod common;

use std::sync::Arc;

use sextant_scripting::{Limits, NoHost};
use sextant_telemetry::decode::{decode, Decoder};
use sextant_telemetry::parse::build_parser;
use sextant_telemetry::project::ParserConfig;
use sextant_telemetry::{Rows, Value};

fn same(got: &Value, want: &serde_json::Value) -> bool {
    match (got, want) {
        (Value::Null, serde_json::Value::Null) => true,
        (Value::Number(g), serde_json::Value::Number(w)) => {
            let w = w.as_f64().unwrap();
            (g - w).abs() <= 1e-9 * w.abs().max(1.0)
        }
        (Value::Text(g), serde_json::Value::String(w)) => g == w,
        _ => false,
    }
}

#[test]
fn parser_cases() {
    let cases = common::load_json("telemetry/parsers.json");
    for case in cases.as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let config: ParserConfig = serde_json::from_value(case["parser"].clone()).unwrap();
        let decoder: Decoder = serde_json::from_value(case["decoder"].clone()).unwrap();
        let mut parser = build_parser(&config, Limits::default(), Arc::new(NoHost))
            .unwrap_or_else(|e| panic!("{name}: build failed: {e}"));
        let mut all_rows: Vec<Vec<Value>> = Vec::new();
        let mut errors = Vec::new();
        let mut rows = Rows::new();
        for input in case["inputs"].as_array().unwrap() {
            let bytes = common::bytes_of(input.as_str().unwrap());
            let decoded = match decode(decoder, &bytes) {
                Ok(d) => d,
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            };
            rows.clear();
            match parser.parse(&decoded, &mut rows) {
                Ok(()) => all_rows.extend(rows.iter().map(|r| r.to_vec())),
                Err(e) => errors.push(e.to_string()),
            }
        }
        let want_rows = case["rows"].as_array().unwrap();
        assert_eq!(
            all_rows.len(),
            want_rows.len(),
            "{name}: row count, got {all_rows:?}"
        );
        for (got, want) in all_rows.iter().zip(want_rows) {
            let want = want.as_array().unwrap();
            assert_eq!(got.len(), want.len(), "{name}: row width, got {got:?}");
            for (g, w) in got.iter().zip(want) {
                assert!(same(g, w), "{name}: got {got:?}, want {want:?}");
            }
        }
        assert_eq!(
            errors.len() as u64,
            case["errors"].as_u64().unwrap(),
            "{name}: errors {errors:?}"
        );
        if let Some(needle) = case.get("error_contains").and_then(|v| v.as_str()) {
            assert!(
                errors.iter().any(|e| e.contains(needle)),
                "{name}: {errors:?} lacks `{needle}`"
            );
        }
    }
}

#[test]
fn bad_parser_configs_are_refused_with_a_reason() {
    let bad = [
        serde_json::json!({"kind": "delimited", "separator": ""}),
        serde_json::json!({"kind": "fixedWidth", "widths": []}),
        serde_json::json!({"kind": "json", "paths": ["a["]}),
        serde_json::json!({"kind": "binary", "fields": []}),
        serde_json::json!({"kind": "script", "language": "lua", "code": "function parse(f"}),
        serde_json::json!({"kind": "script", "language": "javascript", "code": "var x = 1;"}),
        serde_json::json!({"kind": "can", "messages": []}),
        serde_json::json!({"kind": "can", "messages": [{"id": 1, "signals": [
            {"name": "s", "startBit": 0, "size": 0}]}]}),
    ];
    for config in bad {
        let parsed: ParserConfig = serde_json::from_value(config.clone()).unwrap();
        let err = build_parser(&parsed, Limits::default(), Arc::new(NoHost)).err();
        assert!(err.is_some(), "{config} must be refused");
        assert!(!err.unwrap().message.is_empty());
    }
}
