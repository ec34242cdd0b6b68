//! Per-dataset transforms: `transform(value)` in Lua or JavaScript, or a one-line expression.
//!
//! A transform that yields NaN, ±Inf, `null` or `undefined` leaves the raw value in place,
//! as Serial Studio does, so a half-written transform never blanks a plot.

use std::sync::Arc;

use sextant_scripting::{Host, Limits, ScriptTransform};

use crate::expr::Expr;
use crate::parse::script::{from_script, language, to_script};
use crate::project::{ScriptLanguage, Transform, TransformLanguage};
use crate::value::Value;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct TransformError {
    /// Line (scripts) or column (expressions) the error points at.
    pub line: Option<u32>,
    pub message: String,
}

/// A compiled transform.
pub enum CompiledTransform {
    Expr(Expr),
    Script(ScriptTransform),
}

impl CompiledTransform {
    pub fn compile(
        t: &Transform,
        limits: Limits,
        host: Arc<dyn Host>,
    ) -> Result<Self, TransformError> {
        match t.language {
            TransformLanguage::Expression => Expr::compile(&t.code)
                .map(CompiledTransform::Expr)
                .map_err(|e| TransformError {
                    line: Some(1),
                    message: e.to_string(),
                }),
            TransformLanguage::Lua | TransformLanguage::JavaScript => {
                let lang = if t.language == TransformLanguage::Lua {
                    ScriptLanguage::Lua
                } else {
                    ScriptLanguage::JavaScript
                };
                ScriptTransform::compile(language(lang), &t.code, limits, host)
                    .map(CompiledTransform::Script)
                    .map_err(|e| TransformError {
                        line: e.line,
                        message: e.to_string(),
                    })
            }
        }
    }

    /// The transformed value, or the raw one when the result is unusable.
    pub fn apply(&mut self, raw: &Value) -> Result<Value, TransformError> {
        let out = match self {
            CompiledTransform::Expr(e) => match raw.as_f64() {
                Some(x) => Value::Number(e.eval(x)),
                None => Value::Null,
            },
            CompiledTransform::Script(s) => {
                s.transform(to_script(raw))
                    .map(from_script)
                    .map_err(|e| TransformError {
                        line: e.line,
                        message: e.to_string(),
                    })?
            }
        };
        Ok(match out {
            Value::Number(n) if !n.is_finite() => raw.clone(),
            Value::Null => raw.clone(),
            v => v,
        })
    }
}
