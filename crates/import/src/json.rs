//! Lenient, path-tracking reads of a Serial Studio JSON object.
//!
//! Serial Studio reads its files with Qt's forgiving accessors (a wrong type becomes a default
//! value), so real files contain numbers stored as strings, `null`s and keys from many
//! versions. [`Obj`] reads a value with the same forgiveness, reports every value of the wrong
//! type with its path, and remembers which keys were looked at so that [`Obj::finish`] can
//! report the ones nobody asked for. Nothing here indexes or unwraps input data.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::report::ImportReport;

/// `parent.key`, or `key` at the top level.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// `parent[index]`.
pub(crate) fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// A short rendering of a value for report messages (long text is cut).
pub(crate) fn show(value: &Value) -> String {
    let text = match value {
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => format!("a list of {} item(s)", a.len()),
        Value::Object(o) => format!("an object with {} key(s)", o.len()),
        other => other.to_string(),
    };
    const MAX: usize = 60;
    if text.chars().count() > MAX {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}…")
    } else {
        text
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "true/false",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Whether a value carries no information: `null`, `false`, `0`, `""`, `[]`, `{}`.
pub(crate) fn is_blank(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Loose equality: numbers compare by value (`100` equals `100.0`).
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// A number from a JSON number or a numeric string, the way Serial Studio's `toDouble` reads.
pub(crate) fn as_number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64().filter(|f| f.is_finite()),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
}

/// One JSON object being read, with the path it sits at.
pub(crate) struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: String,
    used: BTreeSet<&'a str>,
}

impl<'a> Obj<'a> {
    pub fn new(map: &'a Map<String, Value>, path: impl Into<String>) -> Self {
        Obj {
            map,
            path: path.into(),
            used: BTreeSet::new(),
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The path of `key` inside this object.
    pub fn at(&self, key: &str) -> String {
        join(&self.path, key)
    }

    pub fn keys(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }

    /// The keys nobody has read yet.
    pub fn unread_keys(&self) -> Vec<&'a str> {
        self.map
            .keys()
            .map(String::as_str)
            .filter(|k| !self.used.contains(k))
            .collect()
    }

    pub fn has(&self, key: &str) -> bool {
        self.map.get(key).is_some_and(|v| !v.is_null())
    }

    /// The raw value, marking the key as handled; `null` counts as absent.
    pub fn raw(&mut self, key: &str) -> Option<&'a Value> {
        let (k, v) = self.map.get_key_value(key)?;
        self.used.insert(k.as_str());
        if v.is_null() {
            None
        } else {
            Some(v)
        }
    }

    /// Marks keys as handled without reading them (runtime state, editor bookkeeping).
    pub fn skip(&mut self, keys: &[&str]) {
        for key in keys {
            let _ = self.raw(key);
        }
    }

    fn wrong(&self, r: &mut ImportReport, key: &str, want: &str, value: &Value) {
        r.push(
            self.at(key),
            format!("expected {want}, found {}; ignored", kind(value)),
        );
    }

    pub fn string(&mut self, key: &str, r: &mut ImportReport) -> Option<String> {
        match self.raw(key)? {
            Value::String(s) => Some(s.clone()),
            // Numbers stored where text is expected (a numeric title, say) keep their text.
            Value::Number(n) => Some(n.to_string()),
            other => {
                self.wrong(r, key, "text", other);
                None
            }
        }
    }

    pub fn bool(&mut self, key: &str, r: &mut ImportReport) -> Option<bool> {
        match self.raw(key)? {
            Value::Bool(b) => Some(*b),
            Value::Number(n) => Some(n.as_f64().is_some_and(|f| f != 0.0)),
            Value::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
            Value::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
            other => {
                self.wrong(r, key, "true/false", other);
                None
            }
        }
    }

    pub fn f64(&mut self, key: &str, r: &mut ImportReport) -> Option<f64> {
        let value = self.raw(key)?;
        let n = as_number(value);
        if n.is_none() {
            self.wrong(r, key, "a number", value);
        }
        n
    }

    /// An integer; fractions are truncated as Qt's `toInt` does.
    pub fn i64(&mut self, key: &str, r: &mut ImportReport) -> Option<i64> {
        let value = self.raw(key)?;
        if let Some(i) = value.as_i64() {
            return Some(i);
        }
        match as_number(value) {
            Some(f) if f.abs() < 9.0e15 => Some(f.trunc() as i64),
            _ => {
                self.wrong(r, key, "a whole number", value);
                None
            }
        }
    }

    pub fn array(&mut self, key: &str, r: &mut ImportReport) -> Option<&'a Vec<Value>> {
        match self.raw(key)? {
            Value::Array(a) => Some(a),
            other => {
                self.wrong(r, key, "a list", other);
                None
            }
        }
    }

    pub fn object(&mut self, key: &str, r: &mut ImportReport) -> Option<&'a Map<String, Value>> {
        match self.raw(key)? {
            Value::Object(o) => Some(o),
            other => {
                self.wrong(r, key, "an object", other);
                None
            }
        }
    }

    /// Reports `key` as not imported unless it is absent, blank, or one of `defaults`
    /// (values that carry no information because they are what Serial Studio assumes).
    /// Reports `key` (unless blank or one of `defaults`) as a display detail Sextant
    /// chooses itself; the message names the setting, not its value, so the same detail of
    /// many datasets folds into one line of the summary.
    pub fn unmapped(&mut self, key: &str, defaults: &[Value], why: &str, r: &mut ImportReport) {
        self.unmapped_as(crate::report::Severity::Note, key, defaults, why, r);
    }

    /// [`Obj::unmapped`] for a setting whose behaviour the project loses.
    pub fn unmapped_lost(
        &mut self,
        key: &str,
        defaults: &[Value],
        why: &str,
        r: &mut ImportReport,
    ) {
        self.unmapped_as(crate::report::Severity::Lost, key, defaults, why, r);
    }

    fn unmapped_as(
        &mut self,
        severity: crate::report::Severity,
        key: &str,
        defaults: &[Value],
        why: &str,
        r: &mut ImportReport,
    ) {
        if let Some(value) = self.raw(key) {
            if !is_blank(value) && !defaults.iter().any(|d| same(d, value)) {
                // A lost behaviour is told as what no longer happens; its value (a whole
                // script, say) is for the file, not the report.
                let message = match severity {
                    crate::report::Severity::Note => format!("`{key}` not imported: {why}"),
                    _ => why.to_string(),
                };
                r.add(severity, self.at(key), message);
            }
        }
    }

    /// Reports every key nobody read.
    pub fn finish(self, r: &mut ImportReport) {
        for (key, value) in self.map {
            if !self.used.contains(key.as_str()) {
                r.push(
                    join(&self.path, key),
                    format!(
                        "unknown setting `{key}` (value {}); not imported",
                        show(value)
                    ),
                );
            }
        }
    }
}
