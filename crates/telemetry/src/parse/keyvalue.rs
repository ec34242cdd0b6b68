//! `key=value` pairs: `temp=21.5,hum=40`. Keys are matched exactly; unknown keys are ignored.

use std::collections::HashMap;

use super::{as_text, FrameParser, ParseError};
use crate::decode::Decoded;
use crate::value::{Rows, Value};

pub struct KeyValueParser {
    slots: HashMap<String, usize>,
    width: usize,
    pair_sep: String,
    value_sep: String,
}

impl KeyValueParser {
    pub fn new(keys: &[String], pair_sep: &str, value_sep: &str) -> Result<Self, ParseError> {
        let unescape = |s: &str| {
            crate::framing::unescape(s)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .unwrap_or_else(|| s.to_string())
        };
        let (pair_sep, value_sep) = (unescape(pair_sep), unescape(value_sep));
        if pair_sep.is_empty() || value_sep.is_empty() {
            return Err(ParseError::new("separators must not be empty"));
        }
        if keys.is_empty() {
            return Err(ParseError::new("list at least one key"));
        }
        Ok(KeyValueParser {
            slots: keys
                .iter()
                .enumerate()
                .map(|(i, k)| (k.trim().to_string(), i))
                .collect(),
            width: keys.len(),
            pair_sep,
            value_sep,
        })
    }
}

impl FrameParser for KeyValueParser {
    fn parse(&mut self, input: &Decoded<'_>, out: &mut Rows) -> Result<(), ParseError> {
        let text = as_text(input);
        let row = out.push_row();
        row.resize(self.width, Value::Null);
        let mut found = false;
        for pair in text
            .trim_end_matches(['\r', '\n'])
            .split(self.pair_sep.as_str())
        {
            let Some((key, value)) = pair.split_once(self.value_sep.as_str()) else {
                continue;
            };
            if let Some(&slot) = self.slots.get(key.trim()) {
                row[slot] = Value::from_field(value);
                found = true;
            }
        }
        if !found {
            out.pop_row();
        }
        Ok(())
    }
}
