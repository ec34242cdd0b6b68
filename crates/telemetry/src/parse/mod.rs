//! Parsers: a decoded frame → rows of values for parser slots 1, 2, 3…
//!
//! Every parser writes into a reused [`Rows`] buffer; a parser that finds nothing in a
//! frame leaves it empty (the frame is skipped), and one that cannot make sense of a frame
//! returns a [`ParseError`] (the frame is dropped and counted, the stream goes on).

mod binary;
mod can;
mod delimited;
mod json;
mod keyvalue;
pub mod nmea;
mod quickplot;
pub(crate) mod script;

use std::sync::Arc;

pub use binary::BinaryParser;
pub use can::CanParser;
pub use delimited::{DelimitedParser, FixedWidthParser};
pub use json::JsonParser;
pub use keyvalue::KeyValueParser;
pub use nmea::NmeaParser;
pub use quickplot::QuickPlotParser;
pub use script::ScriptFrameParser;

use crate::decode::Decoded;
use crate::project::ParserConfig;
use crate::value::Rows;
use sextant_scripting::{Host, Limits};

/// A frame that could not be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    /// Line of the user's script the error points at, when a script failed.
    pub line: Option<u32>,
    pub message: String,
}

impl ParseError {
    pub fn new(message: impl Into<String>) -> Self {
        ParseError {
            line: None,
            message: message.into(),
        }
    }
}

/// Turns one decoded frame into rows.
pub trait FrameParser: Send {
    /// Appends the frame's rows to `out`, which the caller has cleared.
    fn parse(&mut self, input: &Decoded<'_>, out: &mut Rows) -> Result<(), ParseError>;

    /// Channel names the parser learned from the data (quick-plot header row).
    fn channel_names(&self) -> Option<&[String]> {
        None
    }
}

/// Builds the parser a project configures.
pub fn build_parser(
    config: &ParserConfig,
    limits: Limits,
    host: Arc<dyn Host>,
) -> Result<Box<dyn FrameParser>, ParseError> {
    Ok(match config {
        ParserConfig::QuickPlot => Box::new(QuickPlotParser::new()),
        ParserConfig::Delimited { separator } => Box::new(DelimitedParser::new(separator)?),
        ParserConfig::FixedWidth { widths } => Box::new(FixedWidthParser::new(widths.clone())?),
        ParserConfig::KeyValue {
            keys,
            pair_separator,
            value_separator,
        } => Box::new(KeyValueParser::new(keys, pair_separator, value_separator)?),
        ParserConfig::Json { paths } => Box::new(JsonParser::new(paths)?),
        ParserConfig::Nmea => Box::new(NmeaParser),
        ParserConfig::Binary { fields } => Box::new(BinaryParser::new(fields.clone())?),
        ParserConfig::Script { language, code } => {
            Box::new(ScriptFrameParser::compile(*language, code, limits, host)?)
        }
        ParserConfig::Can { messages } => Box::new(CanParser::new(messages)?),
    })
}

/// The payload as text, whatever the decoder produced.
pub(crate) fn as_text<'a>(input: &'a Decoded<'_>) -> std::borrow::Cow<'a, str> {
    match input {
        Decoded::Text(t) => std::borrow::Cow::Borrowed(t.as_ref()),
        Decoded::Bytes(b) => String::from_utf8_lossy(b),
    }
}
