//! The values parsers produce and datasets hold, and a reusable row buffer.

use std::fmt;

/// One dataset value. `Null` means "no new value in this frame": the dataset keeps its
/// previous one.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    Number(f64),
    Text(String),
    #[default]
    Null,
}

impl Value {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            Value::Text(t) => t.trim().parse().ok(),
            Value::Null => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A parsed text field: a number when it reads as one, `Null` when empty.
    pub fn from_field(field: &str) -> Value {
        let field = field.trim();
        if field.is_empty() {
            return Value::Null;
        }
        match fast_f64(field) {
            Some(n) => Value::Number(n),
            None => Value::Text(field.to_string()),
        }
    }
}

/// `str::parse::<f64>` that first rejects obvious non-numbers cheaply, and accepts the
/// numbers devices actually print (`+1.5`, `-0`, `1e3`, `nan`, `inf`).
pub fn fast_f64(s: &str) -> Option<f64> {
    let first = *s.as_bytes().first()?;
    if !(first.is_ascii_digit() || matches!(first, b'-' | b'+' | b'.' | b'n' | b'N' | b'i' | b'I'))
    {
        return None;
    }
    s.parse().ok()
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Number(n) => write!(f, "{n}"),
            Value::Text(t) => f.write_str(t),
            Value::Null => Ok(()),
        }
    }
}

impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Value::Number(n)
    }
}

impl From<&str> for Value {
    fn from(t: &str) -> Self {
        Value::Text(t.to_string())
    }
}

/// Rows a parser produced for one frame. Row vectors are reused across frames so the
/// built-in parsers allocate nothing per frame in the steady state.
#[derive(Debug, Default, Clone)]
pub struct Rows {
    rows: Vec<Vec<Value>>,
    len: usize,
}

impl Rows {
    pub fn new() -> Self {
        Rows::default()
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Starts a new, empty row and returns it for filling.
    pub fn push_row(&mut self) -> &mut Vec<Value> {
        if self.len == self.rows.len() {
            self.rows.push(Vec::new());
        }
        let row = &mut self.rows[self.len];
        row.clear();
        self.len += 1;
        row
    }

    /// Drops the row started last (a parser that found nothing in it).
    pub fn pop_row(&mut self) {
        self.len = self.len.saturating_sub(1);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = &[Value]> {
        self.rows[..self.len].iter().map(|r| r.as_slice())
    }

    pub fn get(&self, i: usize) -> Option<&[Value]> {
        self.rows[..self.len].get(i).map(|r| r.as_slice())
    }
}
