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
    origin_ns: Option<u64>,
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

/// `n` with at most 15 significant digits, in its shortest form (`3`, `0.1`, `0.0000001`).
///
/// Rust prints a double in the shortest form that reads back as the same double, which for
/// the result of arithmetic (`1013.217553 / 10`) is the 17-digit `101.32175529999999`.
/// Rounding to 15 digits first gives the decimal the person would write; any decimal of
/// up to 15 digits survives a double, so nothing a device sent is changed.
pub fn write_number(field: &mut String, n: f64) {
    field.clear();
    if !n.is_finite() {
        let _ = write!(field, "{n}");
        return;
    }
    // The shortest form first (Ryu, several times faster than `{n}`'s Grisu): it is the
    // answer whenever it has at most 15 significant digits – the 15-digit decimal nearest a
    // double is then its shortest form, because 15-digit decimals lie further apart than
    // doubles do – which is every value a device sent as text. Only arithmetic's 16- and
    // 17-digit results take the rounding below.
    let mut buffer = ryu::Buffer::new();
    let shortest = Decimal::parse(buffer.format_finite(n));
    if shortest.len <= 15 {
        shortest.write_plain(field);
    } else if let Some(rounded) = shortest.round_to_15_digits() {
        rounded.write_plain(field);
    } else {
        exact_15_digits(field, n);
    }
}

/// The slow, always-exact way: round the double's exact value to 15 digits, read that
/// back, print its shortest form.
fn exact_15_digits(field: &mut String, n: f64) {
    field.clear();
    let _ = write!(field, "{n:.14e}");
    let rounded: f64 = field.parse().unwrap_or(n);
    field.clear();
    let _ = write!(field, "{rounded}");
}

/// A decimal as `±0.digits × 10^point`, its significant digits without leading or
/// trailing zeros (none for zero). At most 17 digits: a double's shortest form.
#[derive(Clone, Copy)]
struct Decimal {
    negative: bool,
    buf: [u8; 17],
    len: usize,
    point: i32,
}

impl Decimal {
    fn digits(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Reads Ryu's output (`1.0`, `-0.0`, `1.5e-7`, `1e16`, `123.456`).
    fn parse(text: &str) -> Decimal {
        let bytes = text.as_bytes();
        let negative = bytes.first() == Some(&b'-');
        let mut d = Decimal {
            negative,
            buf: [0; 17],
            len: 0,
            point: 0,
        };
        let mut integer_digits = 0i32;
        let mut seen_point = false;
        let mut leading = 0i32;
        let mut exponent = 0i32;
        for (i, &b) in bytes.iter().enumerate().skip(usize::from(negative)) {
            match b {
                b'0'..=b'9' => {
                    if !seen_point {
                        integer_digits += 1;
                    }
                    if d.len == 0 && b == b'0' {
                        leading += 1;
                    } else if d.len < d.buf.len() {
                        d.buf[d.len] = b;
                        d.len += 1;
                    }
                }
                b'.' => seen_point = true,
                b'e' => {
                    exponent = text[i + 1..].parse().unwrap_or(0);
                    break;
                }
                _ => {}
            }
        }
        while d.len > 0 && d.buf[d.len - 1] == b'0' {
            d.len -= 1;
        }
        d.point = integer_digits - leading + exponent;
        d
    }

    /// Rounded to 15 significant digits, or `None` when rounding this (shortest) form
    /// could differ from rounding the exact value.
    ///
    /// The exact value lies within half a binary ulp of its shortest form, and half an ulp
    /// is less than 0.12 units of the 15th significant digit (2⁻⁵³ · 10 · 10¹⁴ ≈ 0.111). So
    /// the two round alike unless the dropped digits are within that of the halfway point:
    /// those (dropped digits 37…62, a quarter of arithmetic's results) go the exact way.
    fn round_to_15_digits(&self) -> Option<Decimal> {
        let digit = |i: usize| self.digits().get(i).map_or(0, |&d| u32::from(d - b'0'));
        let hundredths = digit(15) * 10 + digit(16);
        if (37..=62).contains(&hundredths) {
            return None;
        }
        let mut rounded = Decimal {
            len: self.len.min(15),
            ..*self
        };
        if hundredths >= 50 {
            // Carry: 0.1299… → 0.13, 0.999… → 1 (one more integer digit).
            match rounded.digits().iter().rposition(|&d| d != b'9') {
                Some(i) => {
                    rounded.buf[i] += 1;
                    rounded.len = i + 1;
                }
                None => {
                    rounded.buf[0] = b'1';
                    rounded.len = 1;
                    rounded.point += 1;
                }
            }
        }
        while rounded.len > 0 && rounded.buf[rounded.len - 1] == b'0' {
            rounded.len -= 1;
        }
        Some(rounded)
    }

    /// As Rust's `{}` prints a double: plain digits, never an exponent (`0.0000001`,
    /// `602214076000000000000000`, `-0`).
    fn write_plain(&self, out: &mut String) {
        if self.negative {
            out.push('-');
        }
        // Only ASCII digits were kept.
        let digits = std::str::from_utf8(self.digits()).unwrap_or_default();
        let point = self.point;
        let len = digits.len() as i32;
        if digits.is_empty() {
            out.push('0');
        } else if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(digits);
        } else if point >= len {
            out.push_str(digits);
            out.extend(std::iter::repeat_n('0', (point - len) as usize));
        } else {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        }
    }
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
            origin_ns: None,
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

    /// Writes a row at `elapsed_ns` on the caller's clock, relative to the first row written
    /// this way. The difference is taken in whole nanoseconds before it becomes seconds, so
    /// two files of the same rows on clocks with different origins (a live export and a
    /// replay of its session) print the same times – in floating point, `a - b` of two
    /// large times rounds differently from the same gap measured from zero.
    pub fn write_row_ns(&mut self, elapsed_ns: u64, values: &[Value]) -> io::Result<()> {
        let origin = *self.origin_ns.get_or_insert(elapsed_ns);
        let since_first = elapsed_ns.saturating_sub(origin) as f64 / 1e9;
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_same_gaps_on_clocks_of_other_origins_print_the_same_times() {
        // A live export counts from its wiring's start, a replay of its session from the
        // session's first frame: the same gaps, far-apart origins. Gaps on and beside a
        // half-microsecond (where printing six decimals rounds either way).
        let gaps = [
            0u64,
            214_786_500,
            214_786_499,
            214_786_501,
            1_000_000_001,
            3_600_000_000_123,
        ];
        let print = |origin: u64| {
            let mut w = CsvWriter::new(Vec::new(), &["x"]).unwrap();
            for g in gaps {
                w.write_row_ns(origin + g, &[Value::Number(1.0)]).unwrap();
            }
            String::from_utf8(w.into_inner().unwrap()).unwrap()
        };
        let from_zero = print(0);
        assert!(from_zero.contains("\n0.214787,1\n"), "{from_zero}");
        for origin in [1, 999, 5_000_000_000_037, 86_400_000_000_017, 1 << 62] {
            assert_eq!(print(origin), from_zero, "origin {origin}");
        }
    }

    use super::*;

    /// The fast ways give exactly what the exact way gives, for every kind of double: raw
    /// bit patterns of every magnitude, decimals a device sends, arithmetic on them, and
    /// values built to sit on a 15-digit tie.
    #[test]
    // Literals past a double's precision are the point: they round to the doubles whose
    // shortest forms are all nines, which carry.
    #[allow(clippy::excessive_precision)]
    fn the_fast_paths_print_what_exact_rounding_prints() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut cases: Vec<f64> = vec![
            -0.0,
            0.0,
            0.999_999_999_999_999_9,
            -9.999_999_999_999_999e22,
            0.129_999_999_999_999_99,
            1e-7,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
            1e15,
            123_456_789_012_345_680.0,
        ];
        for _ in 0..200_000 {
            let bits = next();
            cases.push(f64::from_bits(bits));
            let decimal = (bits % 2_000_000_000) as f64 / 1e6 - 1000.0;
            cases.push(decimal);
            cases.push(decimal / 10.0);
            cases.push(decimal * 0.3 + 0.1);
            cases.push((bits >> 11) as f64 * 1e-3);
            // A 16-digit decimal ending in 5 (a tie for the 15-digit rounding), and the
            // doubles a few ulps either side of it, whose shortest forms are 17 digits
            // close to the tie.
            let mantissa = bits % 100_000_000_000_000;
            let exponent = (bits % 40) as i32 - 20;
            let tie: f64 = format!("{}.{mantissa:014}5e{exponent}", 1 + bits % 9)
                .parse()
                .unwrap();
            for ulps in -3..=3_i64 {
                cases.push(f64::from_bits(tie.to_bits().wrapping_add_signed(ulps)));
            }
        }
        let (mut fast, mut exact) = (String::new(), String::new());
        for n in cases {
            write_number(&mut fast, n);
            exact_15_digits(&mut exact, n);
            if !n.is_finite() || (n.fract() == 0.0 && n.abs() < 1e15) {
                exact.clear();
                let _ = write!(exact, "{n}");
            }
            assert_eq!(fast, exact, "{n:e} ({:#x})", n.to_bits());
        }
    }
}
