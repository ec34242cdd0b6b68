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
    /// The value as a number: the one numeric view every plot, gauge, map and transform
    /// reads. Text that reads as a number counts as that number, as in Serial Studio, whose
    /// projects mostly parse with `frame.split(',')` and so hand over strings.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            Value::Text(t) => fast_f64(trim(t)),
            Value::Null => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A parsed text field: a number when it reads as one, `Null` when empty.
    pub fn from_field(field: &str) -> Value {
        let field = trim(field);
        if field.is_empty() {
            return Value::Null;
        }
        match fast_f64(field) {
            Some(n) => Value::Number(n),
            None => Value::Text(field.to_string()),
        }
    }
}

/// `str::trim`, after two byte comparisons for the usual case of nothing to trim.
fn trim(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(f), Some(l)) if f.is_ascii_graphic() && l.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

/// Powers of ten that are exact in an f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Parses a number the way devices print them (`-12.5`, `+1`, `1e3`, `nan`, `inf`).
///
/// Plain decimals with at most 15 significant digits take Clinger's fast path: the digits
/// form an exact integer and the scale an exact power of ten, so one IEEE division gives
/// the correctly rounded result, bit-identical to `str::parse`. Everything else
/// (exponents, long mantissas, special values) goes to `str::parse`.
pub fn fast_f64(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let first = *b.first()?;
    if !(first.is_ascii_digit() || matches!(first, b'-' | b'+' | b'.' | b'n' | b'N' | b'i' | b'I'))
    {
        return None;
    }
    let (negative, digits) = match first {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let mut mantissa: u64 = 0;
    let mut significant = 0u32;
    let mut frac_digits = 0usize;
    let mut seen_dot = false;
    let mut seen_digit = false;
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                seen_digit = true;
                if mantissa != 0 || c != b'0' {
                    significant += 1;
                }
                // Cannot overflow: more than 15 significant digits leave for `parse` below.
                mantissa = mantissa.wrapping_mul(10).wrapping_add((c - b'0') as u64);
                frac_digits += seen_dot as usize;
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => return s.parse().ok(),
        }
    }
    if !seen_digit || significant > 15 || frac_digits >= POW10.len() {
        return s.parse().ok();
    }
    let v = mantissa as f64 / POW10[frac_digits];
    Some(if negative { -v } else { v })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_matches_std_exactly() {
        let cases = [
            "0",
            "-0",
            "1",
            "+1",
            "0.1",
            "-0.1",
            "3.14159",
            "123456789012345",
            "1234567890123456",
            "0.000000000000000000001",
            "99999999999999.9",
            "1.",
            ".5",
            "-.5",
            "00012.500",
            "1e3",
            "1E-3",
            "nan",
            "inf",
            "-inf",
            "123456.789012345678",
            "4294967296.5",
            "9007199254740993",
            "0.30000000000000004",
        ];
        for c in cases {
            let want: Option<f64> = c.parse().ok();
            let got = fast_f64(c);
            assert_eq!(
                got.map(f64::to_bits),
                want.map(f64::to_bits),
                "{c}: got {got:?}, want {want:?}"
            );
        }
        for bad in [
            "", "-", "+", ".", "abc", "1.2.3", "1-2", "--1", "0x10", " 1", "-.", "+-1",
        ] {
            assert_eq!(fast_f64(bad), bad.parse::<f64>().ok(), "{bad:?}");
        }
    }

    #[test]
    fn fast_path_agrees_with_std_on_many_printed_values() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (x >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((x % 12) as i32 - 4);
            for text in [format!("{v:.3}"), format!("{:.6}", -v), format!("{v}")] {
                assert_eq!(
                    fast_f64(&text).map(f64::to_bits),
                    text.parse::<f64>().ok().map(f64::to_bits),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn fields_trim_and_classify() {
        assert_eq!(Value::from_field(" 7 "), Value::Number(7.0));
        assert_eq!(Value::from_field("\t"), Value::Null);
        assert_eq!(Value::from_field("é"), Value::Text("é".into()));
        assert_eq!(Value::from_field(" ok\r"), Value::Text("ok".into()));
    }
}
