//! User `parse(frame)` scripts (Lua or JavaScript) as a [`FrameParser`].

use std::sync::Arc;

use sextant_scripting::{FrameInput, Host, Language, Limits, ScriptParser, ScriptValue};

use super::{FrameParser, ParseError};
use crate::decode::Decoded;
use crate::project::ScriptLanguage;
use crate::value::{Rows, Value};

pub struct ScriptFrameParser {
    inner: ScriptParser,
}

pub(crate) fn language(l: ScriptLanguage) -> Language {
    match l {
        ScriptLanguage::Lua => Language::Lua,
        ScriptLanguage::JavaScript => Language::JavaScript,
    }
}

pub(crate) fn from_script(v: ScriptValue) -> Value {
    match v {
        ScriptValue::Number(n) => Value::Number(n),
        ScriptValue::Text(t) => Value::Text(t),
        ScriptValue::Null => Value::Null,
    }
}

pub(crate) fn to_script(v: &Value) -> ScriptValue {
    match v {
        Value::Number(n) => ScriptValue::Number(*n),
        Value::Text(t) => ScriptValue::Text(t.clone()),
        Value::Null => ScriptValue::Null,
    }
}

impl ScriptFrameParser {
    pub fn compile(
        lang: ScriptLanguage,
        code: &str,
        limits: Limits,
        host: Arc<dyn Host>,
    ) -> Result<Self, ParseError> {
        let inner =
            ScriptParser::compile(language(lang), code, limits, host).map_err(ParseError::from)?;
        Ok(ScriptFrameParser { inner })
    }
}

impl From<sextant_scripting::ScriptError> for ParseError {
    fn from(e: sextant_scripting::ScriptError) -> Self {
        ParseError {
            line: e.line,
            message: e.to_string(),
        }
    }
}

impl FrameParser for ScriptFrameParser {
    fn parse(&mut self, input: &Decoded<'_>, out: &mut Rows) -> Result<(), ParseError> {
        let frame = match input {
            Decoded::Text(t) => FrameInput::Text(t),
            Decoded::Bytes(b) => FrameInput::Bytes(b),
        };
        for row in self.inner.parse(frame)? {
            out.push_row().extend(row.into_iter().map(from_script));
        }
        Ok(())
    }
}
