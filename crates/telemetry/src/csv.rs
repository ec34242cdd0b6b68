//! CSV of parsed frames: `elapsed_s, Group/Dataset, …`, one row per frame.

use std::io::{self, Write};

use crate::value::Value;

/// Writes frames as CSV rows to any writer (a file, a pipe, a buffer).
pub struct CsvWriter<W: Write> {
    out: W,
    line: String,
    rows: u64,
}

/// Quotes a field when it holds a separator, a quote or a line break (RFC 4180).
pub fn escape(field: &str) -> std::borrow::Cow<'_, str> {
    if field.contains([',', '"', '\n', '\r']) {
        std::borrow::Cow::Owned(format!("\"{}\"", field.replace('"', "\"\"")))
    } else {
        std::borrow::Cow::Borrowed(field)
    }
}

impl<W: Write> CsvWriter<W> {
    /// Starts a file whose columns are `elapsed_s` and then `columns` (e.g. `Group/Dataset`).
    pub fn new<S: AsRef<str>>(mut out: W, columns: &[S]) -> io::Result<Self> {
        let mut header = String::from("elapsed_s");
        for c in columns {
            header.push(',');
            header.push_str(&escape(c.as_ref()));
        }
        header.push('\n');
        out.write_all(header.as_bytes())?;
        Ok(CsvWriter {
            out,
            line: String::new(),
            rows: 0,
        })
    }

    pub fn write_row(&mut self, elapsed_s: f64, values: &[Value]) -> io::Result<()> {
        use std::fmt::Write as _;
        self.line.clear();
        let _ = write!(self.line, "{elapsed_s:.6}");
        for v in values {
            self.line.push(',');
            match v {
                Value::Number(n) => {
                    let _ = write!(self.line, "{n}");
                }
                Value::Text(t) => self.line.push_str(&escape(t)),
                Value::Null => {}
            }
        }
        self.line.push('\n');
        self.rows += 1;
        self.out.write_all(self.line.as_bytes())
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}
