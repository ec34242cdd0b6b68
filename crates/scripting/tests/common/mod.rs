//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use sextant_scripting::{
    FrameInput, Language, Limits, NoHost, ScriptError, ScriptParser, ScriptTransform, ScriptValue,
};

/// Short limits so watchdog and memory tests finish quickly.
pub fn test_limits() -> Limits {
    Limits {
        timeout: Duration::from_millis(50),
        memory_bytes: 16 * 1024 * 1024,
        max_consecutive_timeouts: 3,
        deadline: None,
    }
}

pub fn parser(language: Language, source: &str) -> ScriptParser {
    match ScriptParser::compile(language, source, test_limits(), Arc::new(NoHost)) {
        Ok(parser) => parser,
        Err(e) => panic!("script should compile: {e}"),
    }
}

pub fn compile_error(language: Language, source: &str) -> ScriptError {
    match ScriptParser::compile(language, source, test_limits(), Arc::new(NoHost)) {
        Ok(_) => panic!("script should not compile"),
        Err(e) => e,
    }
}

pub fn transform(language: Language, source: &str) -> ScriptTransform {
    match ScriptTransform::compile(language, source, test_limits(), Arc::new(NoHost)) {
        Ok(t) => t,
        Err(e) => panic!("script should compile: {e}"),
    }
}

pub fn parse_text(parser: &mut ScriptParser, text: &str) -> Vec<Vec<ScriptValue>> {
    match parser.parse(FrameInput::Text(text)) {
        Ok(rows) => rows,
        Err(e) => panic!("parse({text:?}) failed: {e}"),
    }
}

pub fn n(value: f64) -> ScriptValue {
    ScriptValue::Number(value)
}

pub fn t(value: &str) -> ScriptValue {
    ScriptValue::Text(value.to_owned())
}

pub fn nums(values: &[f64]) -> Vec<ScriptValue> {
    values.iter().copied().map(ScriptValue::Number).collect()
}
