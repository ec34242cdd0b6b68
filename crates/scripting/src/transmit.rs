//! Output controls' scripts: `transmit(value)` turns a control's value into the bytes sent
//! to a device, in the same sandbox as parsers (watchdog, memory cap, no files or network).
//!
//! The contract is Serial Studio's, so imported projects keep working:
//! - `value` is `1` for a button, `0`/`1` for a toggle, a number for a slider or a knob,
//!   and a string for a text field;
//! - the script returns a string; each character up to U+00FF is one byte (so binary
//!   protocols build their bytes with `String.fromCharCode`), and a string holding any
//!   character past U+00FF is sent as UTF-8 (text in any language);
//! - `null`, `undefined`, an empty string or anything that is not a string (Serial Studio
//!   sends nothing for an array of numbers either) sends nothing;
//! - at most [`MAX_TRANSMIT_BYTES`] bytes, as Serial Studio.
//!
//! JavaScript scripts also get Serial Studio's Modbus helpers (`modbusWriteRegister`,
//! `modbusWriteCoil`, `modbusWriteFloat`) unless the script defines its own.

use std::sync::Arc;

use crate::{
    Engine, Entry, Host, Language, Limits, ScriptError, ScriptErrorKind, ScriptValue, Supervisor,
};

/// The most bytes one `transmit` call may produce (Serial Studio's cap).
pub const MAX_TRANSMIT_BYTES: usize = 65_536;

/// Serial Studio's Modbus payload helpers, appended after the script so its own line
/// numbers stay as written; a script's own function of the same name wins (function
/// declarations are hoisted before these run).
const JS_HELPERS: &str = r#"
;(function (g) {
  function u16(n) { n = Math.round(Number(n)) & 0xFFFF; return String.fromCharCode(n >> 8, n & 0xFF); }
  if (typeof g.modbusWriteRegister === "undefined")
    g.modbusWriteRegister = function (address, value) { return u16(address) + u16(value); };
  if (typeof g.modbusWriteCoil === "undefined")
    g.modbusWriteCoil = function (address, on) { return u16(address) + (on ? "\xFF\x00" : "\x00\x00"); };
  if (typeof g.modbusWriteFloat === "undefined")
    g.modbusWriteFloat = function (address, value) {
      var b = new Uint8Array(new Float32Array([Number(value)]).buffer);
      return u16(address) + String.fromCharCode(b[3], b[2], b[1], b[0]);
    };
})(globalThis);
"#;

/// A compiled `transmit(value)` function.
pub struct ScriptTransmit {
    inner: Engine,
    supervisor: Supervisor,
}

const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<ScriptTransmit>();
};

impl ScriptTransmit {
    /// Compiles JavaScript `source` and runs its top level; the script must define a global
    /// `transmit(value)` function. (JavaScript only, as Serial Studio: Lua's strings would
    /// not come back as the bytes the script built.)
    pub fn compile(source: &str, limits: Limits, host: Arc<dyn Host>) -> Result<Self, ScriptError> {
        let language = Language::JavaScript;
        let source = format!("{source}\n{JS_HELPERS}");
        Ok(ScriptTransmit {
            inner: Engine::compile(language, &source, limits, host, Entry::Transmit)?,
            supervisor: Supervisor::new(language, limits),
        })
    }

    /// Runs `transmit(value)` and returns the bytes to send (empty: send nothing).
    pub fn transmit(&mut self, value: ScriptValue) -> Result<Vec<u8>, ScriptError> {
        let inner = &mut self.inner;
        let result = self.supervisor.run(|| match inner {
            Engine::Lua(engine) => engine.call_transform(&value),
            Engine::Js(engine) => engine.call_transform(&value),
        })?;
        let language = self.inner.language();
        let bytes = match result {
            ScriptValue::Text(text) => string_bytes(&text),
            ScriptValue::Null => Vec::new(),
            ScriptValue::Number(n) => {
                return Err(ScriptError::new(
                    ScriptErrorKind::Runtime,
                    language,
                    None,
                    format!(
                        "transmit() returned the number {n}; it must return a string of the \
                         bytes to send (for example String(value) + \"\\n\")"
                    ),
                ))
            }
        };
        if bytes.len() > MAX_TRANSMIT_BYTES {
            return Err(ScriptError::new(
                ScriptErrorKind::Runtime,
                language,
                None,
                format!(
                    "transmit() returned {} bytes; at most {MAX_TRANSMIT_BYTES} are sent at once",
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }
}

/// The bytes a returned string stands for: one byte per character when every character
/// fits in one (a byte string built with `String.fromCharCode`), else UTF-8.
pub(crate) fn string_bytes(text: &str) -> Vec<u8> {
    if text.chars().all(|c| u32::from(c) <= 0xFF) {
        text.chars().map(|c| u32::from(c) as u8).collect()
    } else {
        text.as_bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoHost;

    fn run(source: &str, value: ScriptValue) -> Result<Vec<u8>, ScriptError> {
        ScriptTransmit::compile(source, Limits::default(), Arc::new(NoHost))?.transmit(value)
    }

    #[test]
    fn a_returned_string_is_its_bytes() {
        let cases: &[(&str, ScriptValue, &[u8])] = &[
            (
                r#"function transmit(v) { return "SET " + v + "\r\n"; }"#,
                ScriptValue::Number(42.0),
                b"SET 42\r\n",
            ),
            (
                "function transmit(v) { return String.fromCharCode(0xAA, v, 0xFF, 0); }",
                ScriptValue::Number(7.0),
                &[0xAA, 7, 0xFF, 0],
            ),
            (
                "function transmit(v) { return v + '°'; }",
                ScriptValue::Text("20".into()),
                &[b'2', b'0', 0xB0],
            ),
            (
                "function transmit(v) { return '温度' + v; }",
                ScriptValue::Text("1".into()),
                "温度1".as_bytes(),
            ),
            (
                "function transmit(v) { return null; }",
                ScriptValue::Number(1.0),
                &[],
            ),
            (
                "function transmit(v) { return [1, 2]; }",
                ScriptValue::Number(1.0),
                &[],
            ),
            (
                "function transmit(v) { return modbusWriteRegister(0x10, v); }",
                ScriptValue::Number(1234.0),
                &[0x00, 0x10, 0x04, 0xD2],
            ),
            (
                "function transmit(v) { return modbusWriteCoil(3, v); }",
                ScriptValue::Number(1.0),
                &[0x00, 0x03, 0xFF, 0x00],
            ),
            (
                "function transmit(v) { return modbusWriteFloat(1, v); }",
                ScriptValue::Number(1.5),
                &[0x00, 0x01, 0x3F, 0xC0, 0x00, 0x00],
            ),
            (
                "function modbusWriteCoil() { return 'mine'; }\n\
                 function transmit(v) { return modbusWriteCoil(1, v); }",
                ScriptValue::Number(1.0),
                b"mine",
            ),
        ];
        for (source, value, want) in cases {
            assert_eq!(
                run(source, value.clone()).unwrap(),
                *want,
                "{source} with {value:?}"
            );
        }
    }

    #[test]
    fn a_script_that_cannot_send_says_why() {
        let cases: &[(&str, ScriptErrorKind, &str)] = &[
            (
                "function output(v) { return 'x'; }",
                ScriptErrorKind::Compile,
                "transmit(value)",
            ),
            (
                "function transmit(v) { return ;;; ",
                ScriptErrorKind::Compile,
                "",
            ),
            (
                "function transmit(v) { return 5; }",
                ScriptErrorKind::Runtime,
                "must return a string",
            ),
            (
                "function transmit(v) { return 'x'.repeat(70000); }",
                ScriptErrorKind::Runtime,
                "at most 65536",
            ),
            (
                "function transmit(v) { throw new Error('no relay ' + v); }",
                ScriptErrorKind::Runtime,
                "no relay 3",
            ),
            (
                "function transmit(v) { while (true) {} }",
                ScriptErrorKind::Timeout,
                "",
            ),
        ];
        for (source, kind, says) in cases {
            let err = run(source, ScriptValue::Number(3.0)).unwrap_err();
            assert_eq!(err.kind, *kind, "{source}: {err}");
            assert!(err.to_string().contains(says), "{source}: {err}");
        }
    }

    #[test]
    fn the_script_has_no_files_or_network() {
        for source in [
            "function transmit(v) { return require('fs').readFileSync('/etc/passwd'); }",
            "function transmit(v) { return fetch('http://example.com'); }",
            "function transmit(v) { return std.loadFile('/etc/passwd'); }",
        ] {
            let err = run(source, ScriptValue::Number(1.0)).unwrap_err();
            assert_eq!(err.kind, ScriptErrorKind::Runtime, "{source}: {err}");
        }
    }
}
