//! JSON documents with one path per slot: `imu.accel[0]`, `gps/lat` or `/gps/lat`, and
//! `/values/Motor~1Speed` for a key with a `/` in it (JSON Pointer's escape).
//! A top-level array of objects gives one row per object (batched devices).

use serde_json::Value as Json;

use super::{as_text, FrameParser, ParseError};
use crate::decode::Decoded;
use crate::value::{Rows, Value};

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

pub struct JsonParser {
    paths: Vec<Vec<Step>>,
}

impl JsonParser {
    pub fn new(paths: &[String]) -> Result<Self, ParseError> {
        if paths.is_empty() {
            return Err(ParseError::new("list at least one JSON path"));
        }
        let paths = paths
            .iter()
            .map(|p| compile_path(p).map_err(|m| ParseError::new(format!("JSON path `{p}`: {m}"))))
            .collect::<Result<_, _>>()?;
        Ok(JsonParser { paths })
    }

    fn row(&self, doc: &Json, out: &mut Rows) {
        let row = out.push_row();
        for path in &self.paths {
            row.push(lookup(doc, path).map_or(Value::Null, json_to_value));
        }
    }
}

/// A path in one of two forms. With a `/` it is a JSON Pointer (RFC 6901; the leading `/`
/// may be left out): `/values/Motor~1Speed` reaches the key `Motor/Speed`, as the MQTT
/// publisher names a dataset (`~1` is `/`, `~0` is `~`), and a number indexes an array.
/// Without one it is dotted: `imu.accel[0]`. Both take `[n]` after a name.
fn compile_path(path: &str) -> Result<Vec<Step>, &'static str> {
    let path = path.trim();
    let pointer = path.contains('/');
    let parts: Vec<String> = if pointer {
        path.trim_start_matches('/')
            .split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect()
    } else {
        path.split('.').map(str::to_string).collect()
    };
    let mut steps = Vec::new();
    for part in parts.iter().filter(|p| !p.is_empty()) {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part.as_str(), ""),
        };
        if !name.is_empty() {
            match name.parse::<usize>() {
                // `/a/0` (JSON-pointer style) indexes arrays too.
                Ok(i) if pointer => steps.push(Step::Index(i)),
                _ => steps.push(Step::Key(name.to_string())),
            }
        }
        while let Some(stripped) = rest.strip_prefix('[') {
            let close = stripped.find(']').ok_or("unclosed `[`")?;
            let idx = stripped[..close]
                .trim()
                .parse()
                .map_err(|_| "index must be a number")?;
            steps.push(Step::Index(idx));
            rest = &stripped[close + 1..];
        }
        if !rest.is_empty() {
            return Err("unexpected text after `]`");
        }
    }
    if steps.is_empty() {
        return Err("empty path");
    }
    Ok(steps)
}

fn lookup<'a>(mut doc: &'a Json, path: &[Step]) -> Option<&'a Json> {
    for step in path {
        doc = match (step, doc) {
            (Step::Key(k), Json::Object(map)) => map.get(k)?,
            (Step::Index(i), Json::Array(items)) => items.get(*i)?,
            (Step::Index(i), Json::Object(map)) => map.get(&i.to_string())?,
            _ => return None,
        };
    }
    Some(doc)
}

fn json_to_value(v: &Json) -> Value {
    match v {
        Json::Number(n) => n.as_f64().map_or(Value::Null, Value::Number),
        Json::String(s) => Value::from_field(s),
        Json::Bool(b) => Value::Number(if *b { 1.0 } else { 0.0 }),
        Json::Null => Value::Null,
        other => Value::Text(other.to_string()),
    }
}

impl FrameParser for JsonParser {
    fn parse(&mut self, input: &Decoded<'_>, out: &mut Rows) -> Result<(), ParseError> {
        let text = as_text(input);
        if text.trim().is_empty() {
            return Ok(());
        }
        let doc: Json = serde_json::from_str(&text)
            .map_err(|e| ParseError::new(format!("not valid JSON: {e}")))?;
        match &doc {
            Json::Array(items) if items.iter().all(|i| i.is_object()) => {
                for item in items {
                    self.row(item, out);
                }
            }
            _ => self.row(&doc, out),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_compile() {
        assert_eq!(
            compile_path("imu.accel[2]").unwrap(),
            vec![
                Step::Key("imu".into()),
                Step::Key("accel".into()),
                Step::Index(2)
            ]
        );
        assert_eq!(
            compile_path("/imu/accel/2").unwrap(),
            vec![
                Step::Key("imu".into()),
                Step::Key("accel".into()),
                Step::Index(2)
            ]
        );
        let key = |k: &str| Step::Key(k.into());
        for (path, want) in [
            // The MQTT publisher's payload names datasets `Group/Dataset`.
            (
                "/values/Motor~1Speed",
                vec![key("values"), key("Motor/Speed")],
            ),
            (
                "values/Motor~1Speed",
                vec![key("values"), key("Motor/Speed")],
            ),
            ("/a~0b/~01", vec![key("a~b"), key("~1")]),
            ("/v1.2/x", vec![key("v1.2"), key("x")]),
            (
                "/imu/accel[1]",
                vec![key("imu"), key("accel"), Step::Index(1)],
            ),
            ("a.b", vec![key("a"), key("b")]),
        ] {
            assert_eq!(compile_path(path).unwrap(), want, "{path}");
        }
        assert!(compile_path("a[").is_err());
        assert!(compile_path("a[x]").is_err());
        assert!(compile_path("").is_err());
    }

    /// What Sextant's MQTT publisher sends is read back by a JSON parser, `Group/Dataset`
    /// keys and all: one Sextant can subscribe to another's frames.
    #[test]
    fn the_publishers_payload_reads_back() {
        let payload = r#"{"elapsedS":1.5,"values":{"Motor/Speed":1200.5,"Motor/State":"run","Power/V":null}}"#;
        let paths: Vec<String> = [
            "/elapsedS",
            "/values/Motor~1Speed",
            "/values/Motor~1State",
            "/values/Power~1V",
        ]
        .map(String::from)
        .to_vec();
        let mut parser = JsonParser::new(&paths).unwrap();
        let mut rows = Rows::new();
        parser
            .parse(&Decoded::Text(payload.into()), &mut rows)
            .unwrap();
        assert_eq!(
            rows.get(0).unwrap(),
            &[
                Value::Number(1.5),
                Value::Number(1200.5),
                Value::Text("run".into()),
                Value::Null
            ]
        );
    }
}
