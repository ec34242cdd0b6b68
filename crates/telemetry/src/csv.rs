//! CSV of parsed frames: `elapsed_s, Group/Dataset, …`, one row per frame.
//!
//! `elapsed_s` counts from the file's first row (0.000000), whenever the recording or the
//! export started: a file reads the same whether it came from the live run or from its
//! recording, and never starts at the app's uptime. Numbers are written with at most 15
//! significant digits, the most a decimal can keep through a double and back, then in
//! their shortest form: `1013.217553 / 10` is written `101.3217553`, as a spreadsheet
//! shows it, not `101.32175529999999`.
//!
//! Written with the `csv` crate (RFC 4180: a field holding a comma, a quote or a line break
//! is quoted, quotes doubled), the same crate every CSV reader in Sextant uses, so what is
//! exported reads back field for field.

/// The first column's name: what recognises a CSV file as one Sextant wrote.
pub const TIME_COLUMN: &str = "elapsed_s";

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::value::Value;

/// Writes frames as CSV rows to any writer (a file, a pipe, a buffer).
pub struct CsvWriter<W: Write> {
    out: csv::Writer<W>,
    field: String,
    rows: u64,
    /// `elapsed_s` of the first row, which the file's times count from.
    origin: Option<f64>,
}

fn writer<W: Write>(out: W) -> csv::Writer<W> {
    csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(out)
}

/// Rewrites a CSV this module wrote whose rows grew past its header (a live export whose
/// datasets appeared after its first row: Quick Plot finding more channels) under the
/// header `elapsed_s, columns…`, every row padded with empty fields to that width. Reads
/// and writes one row at a time. Returns the rows copied.
pub fn widen<R: io::Read, W: Write, S: AsRef<str>>(
    input: R,
    out: W,
    columns: &[S],
) -> io::Result<u64> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(true)
        .from_reader(input);
    let mut out = writer(out);
    out.write_field(TIME_COLUMN).map_err(io_error)?;
    for c in columns {
        out.write_field(c.as_ref()).map_err(io_error)?;
    }
    out.write_record(None::<&[u8]>).map_err(io_error)?;
    let width = columns.len() + 1;
    let mut record = csv::ByteRecord::new();
    let mut rows = 0;
    while reader.read_byte_record(&mut record).map_err(io_error)? {
        for field in record.iter().take(width) {
            out.write_field(field).map_err(io_error)?;
        }
        for _ in record.len()..width {
            out.write_field([]).map_err(io_error)?;
        }
        out.write_record(None::<&[u8]>).map_err(io_error)?;
        rows += 1;
    }
    out.flush()?;
    Ok(rows)
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
                write_number(field, *n);
                out.write_field(field.as_bytes())?;
            }
            Value::Text(t) => out.write_field(t.as_bytes())?,
            Value::Null => out.write_field([])?,
        }
    }
    out.write_record(None::<&[u8]>)
}

/// `n` with at most 15 significant digits, in its shortest form (`3`, `0.1`, `1e-7`).
///
/// Rust prints a double in the shortest form that reads back as the same double, which for
/// the result of arithmetic (`1013.217553 / 10`) is the 17-digit `101.32175529999999`.
/// Rounding to 15 digits first gives the decimal the person would write; any decimal of
/// up to 15 digits survives a double, so nothing a device sent is changed.
fn write_number(field: &mut String, n: f64) {
    field.clear();
    if !n.is_finite() || (n.fract() == 0.0 && n.abs() < 1e15) {
        let _ = write!(field, "{n}");
        return;
    }
    let _ = write!(field, "{n:.14e}");
    let rounded: f64 = field.parse().unwrap_or(n);
    field.clear();
    let _ = write!(field, "{rounded}");
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
        Self::start(writer(out), columns)
    }

    /// [`CsvWriter::new`] for rows that may outgrow `columns` (datasets that appear during a
    /// live run); [`widen`] gives the file its full header afterwards.
    pub fn new_growing<S: AsRef<str>>(out: W, columns: &[S]) -> io::Result<Self> {
        let out = csv::WriterBuilder::new()
            .terminator(csv::Terminator::Any(b'\n'))
            .flexible(true)
            .from_writer(out);
        Self::start(out, columns)
    }

    fn start<S: AsRef<str>>(mut out: csv::Writer<W>, columns: &[S]) -> io::Result<Self> {
        out.write_field(TIME_COLUMN).map_err(io_error)?;
        for c in columns {
            out.write_field(c.as_ref()).map_err(io_error)?;
        }
        out.write_record(None::<&[u8]>).map_err(io_error)?;
        Ok(CsvWriter {
            out,
            field: String::new(),
            rows: 0,
            origin: None,
        })
    }

    /// Writes a row at `elapsed_s` on the caller's clock; the file shows it relative to the
    /// first row written.
    pub fn write_row(&mut self, elapsed_s: f64, values: &[Value]) -> io::Result<()> {
        let origin = *self.origin.get_or_insert(elapsed_s);
        let since_first = (elapsed_s - origin).max(0.0);
        write_fields(&mut self.out, &mut self.field, since_first, values).map_err(io_error)?;
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
