//! JSON documents with one path per slot: `imu.accel[0]`, `gps/lat` or `/gps/lat`.
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

fn compile_path(path: &str) -> Result<Vec<Step>, &'static str> {
    let mut steps = Vec::new();
    let normalized = path.trim().trim_start_matches('/').replace('/', ".");
    for part in normalized.split('.').filter(|p| !p.is_empty()) {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            match name.parse::<usize>() {
                // `/a/0` (JSON-pointer style) indexes arrays too.
                Ok(i) if path.contains('/') => steps.push(Step::Index(i)),
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
        assert!(compile_path("a[").is_err());
        assert!(compile_path("a[x]").is_err());
        assert!(compile_path("").is_err());
    }
}
