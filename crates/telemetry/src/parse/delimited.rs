//! Delimited (CSV, TSV, semicolon, pipe, any separator) and fixed-width text.

use super::{as_text, FrameParser, ParseError};
use crate::decode::Decoded;
use crate::value::{Rows, Value};

/// Fields separated by a fixed string; field `i` feeds slot `i + 1`.
pub struct DelimitedParser {
    separator: String,
}

impl DelimitedParser {
    pub fn new(separator: &str) -> Result<Self, ParseError> {
        let separator = crate::framing::unescape(separator)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_else(|| separator.to_string());
        if separator.is_empty() {
            return Err(ParseError::new("the separator must not be empty"));
        }
        Ok(DelimitedParser { separator })
    }
}

/// Splits `line` on `sep` into `row`, one value per field.
pub(crate) fn split_into(line: &str, sep: &str, row: &mut Vec<Value>) {
    let line = line.trim_end_matches(['\r', '\n']);
    if let [byte] = sep.as_bytes() {
        // A one-byte separator is ASCII, never part of a multi-byte character, so its byte
        // offsets are always char boundaries.
        // Fields are short, so a plain byte loop beats a vectorised search here.
        let mut start = 0;
        for (at, &b) in line.as_bytes().iter().enumerate() {
            if b == *byte {
                row.push(Value::from_field(&line[start..at]));
                start = at + 1;
            }
        }
        row.push(Value::from_field(&line[start..]));
    } else {
        line.split(sep).for_each(|f| row.push(Value::from_field(f)));
    }
}

impl FrameParser for DelimitedParser {
    fn parse(&mut self, input: &Decoded<'_>, out: &mut Rows) -> Result<(), ParseError> {
        let text = as_text(input);
        if text.trim().is_empty() {
            return Ok(());
        }
        split_into(&text, &self.separator, out.push_row());
        Ok(())
    }
}

/// Columns of fixed character widths; column `i` feeds slot `i + 1`.
pub struct FixedWidthParser {
    widths: Vec<usize>,
}

impl FixedWidthParser {
    pub fn new(widths: Vec<usize>) -> Result<Self, ParseError> {
        if widths.is_empty() || widths.contains(&0) {
            return Err(ParseError::new(
                "widths must be a non-empty list of positive numbers",
            ));
        }
        Ok(FixedWidthParser { widths })
    }
}

impl FrameParser for FixedWidthParser {
    fn parse(&mut self, input: &Decoded<'_>, out: &mut Rows) -> Result<(), ParseError> {
        let text = as_text(input);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.trim().is_empty() {
            return Ok(());
        }
        let row = out.push_row();
        let mut rest = text;
        for &w in &self.widths {
            // Widths count characters, not bytes, so multi-byte text cannot split a char.
            let cut = rest.char_indices().nth(w).map_or(rest.len(), |(i, _)| i);
            row.push(Value::from_field(&rest[..cut]));
            rest = &rest[cut..];
        }
        Ok(())
    }
}
