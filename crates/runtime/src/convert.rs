//! Conversions between telemetry values and JSON for command results.

use serde_json::Value as Json;
use sextant_telemetry::Value;

pub fn value_to_json(v: &Value) -> Json {
    match v {
        Value::Number(n) => serde_json::Number::from_f64(*n).map_or(Json::Null, Json::Number),
        Value::Text(t) => Json::String(t.clone()),
        Value::Null => Json::Null,
    }
}

pub fn json_to_value(v: &Json) -> Value {
    match v {
        Json::Number(n) => n.as_f64().map_or(Value::Null, Value::Number),
        Json::String(s) => Value::Text(s.clone()),
        Json::Bool(b) => Value::Number(if *b { 1.0 } else { 0.0 }),
        _ => Value::Null,
    }
}

pub fn rows_to_json(rows: &[Vec<Value>]) -> Vec<Vec<Json>> {
    rows.iter()
        .map(|r| r.iter().map(value_to_json).collect())
        .collect()
}
