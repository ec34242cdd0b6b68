//! CSV of parsed frames: `elapsed_s, Group/Dataset, …`, one row per frame.
//!
//! Written with the `csv` crate (RFC 4180: a field holding a comma, a quote or a line break
//! is quoted, quotes doubled), the same crate every CSV reader in Sextant uses, so what is
//! exported reads back field for field.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::value::Value;

/// Writes frames as CSV rows to any writer (a file, a pipe, a buffer).
pub struct CsvWriter<W: Write> {
    out: csv::Writer<W>,
    field: String,
    rows: u64,
}

fn writer<W: Write>(out: W) -> csv::Writer<W> {
    csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(out)
}

fn io_error(e: csv::Error) -> io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(e) => e,
        other => io::Error::other(format!("{other:?}")),
    }
}

/// Writes one row's fields: the time with microseconds, then each value (empty for null).
fn write_fields<W: Write>(
    out: &mut csv::Writer<W>,
    field: &mut String,
    elapsed_s: f64,
    values: &[Value],
) -> csv::Result<()> {
    field.clear();
    let _ = write!(field, "{elapsed_s:.6}");
    out.write_field(field.as_bytes())?;
    for v in values {
        match v {
            Value::Number(n) => {
                field.clear();
                let _ = write!(field, "{n}");
                out.write_field(field.as_bytes())?;
            }
            Value::Text(t) => out.write_field(t.as_bytes())?,
            Value::Null => out.write_field([])?,
        }
    }
    out.write_record(None::<&[u8]>)
}

/// One frame as a CSV record without its line break (`0.500000,1.25,"say ""hi"""`), as the
/// MQTT publisher sends it.
pub fn record(elapsed_s: f64, values: &[Value]) -> String {
    let mut out = writer(Vec::new());
    // Writing to memory cannot fail.
    let _ = write_fields(&mut out, &mut String::new(), elapsed_s, values);
    let mut bytes = out.into_inner().unwrap_or_default();
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    // Every field came from a `str`, so the record is UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

impl<W: Write> CsvWriter<W> {
    /// Starts a file whose columns are `elapsed_s` and then `columns` (e.g. `Group/Dataset`).
    pub fn new<S: AsRef<str>>(out: W, columns: &[S]) -> io::Result<Self> {
        let mut out = writer(out);
        out.write_field("elapsed_s").map_err(io_error)?;
        for c in columns {
            out.write_field(c.as_ref()).map_err(io_error)?;
        }
        out.write_record(None::<&[u8]>).map_err(io_error)?;
        Ok(CsvWriter {
            out,
            field: String::new(),
            rows: 0,
        })
    }

    pub fn write_row(&mut self, elapsed_s: f64, values: &[Value]) -> io::Result<()> {
        write_fields(&mut self.out, &mut self.field, elapsed_s, values).map_err(io_error)?;
        self.rows += 1;
        Ok(())
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes what is buffered and hands the writer back.
    pub fn into_inner(self) -> io::Result<W> {
        self.out.into_inner().map_err(|e| e.into_error())
    }
}
