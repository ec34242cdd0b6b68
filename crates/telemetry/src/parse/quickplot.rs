//! Quick plot: zero-configuration CSV lines. A first row made only of non-numbers names
//! the channels; every later row is data.

use super::delimited::split_into;
use super::{as_text, FrameParser, ParseError};
use crate::decode::Decoded;
use crate::value::{Rows, Value};

#[derive(Default)]
pub struct QuickPlotParser {
    names: Option<Vec<String>>,
    seen_data: bool,
}

impl QuickPlotParser {
    pub fn new() -> Self {
        QuickPlotParser::default()
    }
}

impl FrameParser for QuickPlotParser {
    fn parse(&mut self, input: &Decoded<'_>, out: &mut Rows) -> Result<(), ParseError> {
        let text = as_text(input);
        if text.trim().is_empty() {
            return Ok(());
        }
        let row = out.push_row();
        split_into(&text, ",", row);
        let all_text = row.iter().all(|v| matches!(v, Value::Text(_)));
        if all_text {
            if !self.seen_data && self.names.is_none() {
                self.names = Some(row.iter().map(|v| v.to_string()).collect());
            }
            // A text-only row carries no numbers to plot (header, or a log line).
            out.pop_row();
        } else {
            self.seen_data = true;
        }
        Ok(())
    }

    fn channel_names(&self) -> Option<&[String]> {
        self.names.as_deref()
    }
}
