//! The Lua 5.4 engine: sandboxed state construction, the `bit`/`unpack` compatibility
//! layer, host globals, value conversion, and each call under the watchdog, whose hook
//! [`crate::lua_alarm`] sets only when a call runs late.
//!
//! The pattern functions of the `string` library are replaced by [`crate::lua_patterns`],
//! which the watchdog can stop; `tonumber` by [`crate::lua_numbers`]'s, which reads plain
//! decimal numerals faster.

use std::ffi::{c_int, CStr};
use std::sync::Arc;

use mlua::state::{GcGenParams, GcMode};
use mlua::{ffi, Function, Lua, LuaOptions, StdLib, Value, Variadic};

use crate::lua_alarm::Alarm;
use crate::lua_bit;
use crate::lua_numbers;
use crate::lua_patterns::{self, budget_message};
use crate::rows::{Budget, Cell, PREALLOCATE};
use crate::{
    as_integer, line_after, number_key, Entry, FrameInput, Host, Language, Limits, ScriptError,
    ScriptErrorKind, ScriptValue, Watchdog,
};

/// Chunk name of user scripts; Lua prefixes positions with it (`script:3: ...`).
const CHUNK_NAME: &str = "=script";
const LINE_MARKER: &str = "script:";

/// Base-library functions that reach the file system, load code or control the collector.
const REMOVED_GLOBALS: &[&str] = &["dofile", "loadfile", "load", "require", "collectgarbage"];

/// Runs before the user script, with the Rust helpers as chunk arguments so they never
/// appear as globals.
const PRELUDE: &str = r#"
local log, tripped = ...
local select, tostring, type, error, rawget = select, tostring, type, error, rawget
local concat, unpack_ = table.concat, table.unpack

-- print goes to the host's log, not stdout.
print = function(...)
  local n = select('#', ...)
  local parts = { ... }
  for i = 1, n do parts[i] = tostring(parts[i]) end
  log(concat(parts, '\t', 1, n))
end

-- The watchdog raises an ordinary Lua error; without this a script could swallow it in a
-- pcall loop and run forever. Once the call is over budget every catch rethrows.
do
  local raw_pcall, raw_xpcall = pcall, xpcall
  local function pass(ok, ...)
    if not ok and tripped() then error((...), 0) end
    return ok, ...
  end
  pcall = function(f, ...) return pass(raw_pcall(f, ...)) end
  xpcall = function(f, handler, ...) return pass(raw_xpcall(f, handler, ...)) end
end

-- Finalizers run with debug hooks disabled, so a __gc loop would escape the watchdog.
do
  local raw_setmetatable = setmetatable
  setmetatable = function(t, mt)
    if type(mt) == 'table' and rawget(mt, '__gc') ~= nil then
      error('__gc metamethods are not available to scripts', 2)
    end
    return raw_setmetatable(t, mt)
  end
end

unpack = unpack_
"#;

pub(crate) struct LuaEngine {
    // `entry` refers into `lua`; declared first so it is released before the state closes.
    entry: Function,
    lua: Lua,
    state: MainState,
    watchdog: Arc<Watchdog>,
    alarm: Arc<Alarm>,
    limits: Limits,
    name: &'static str,
}

/// The engine's main Lua state, for the watchdog's hook (see `lua_alarm`).
struct MainState(*mut ffi::lua_State);

// SAFETY: the pointer is only used by the thread running one of the engine's calls, which
// holds the engine mutably, as mlua's own handles are.
unsafe impl Send for MainState {}

impl LuaEngine {
    pub(crate) fn new(
        source: &str,
        limits: Limits,
        host: Arc<dyn Host>,
        entry: Entry,
    ) -> Result<Self, ScriptError> {
        let watchdog = Watchdog::new();
        let compile_error =
            |e: mlua::Error| classify(e, &watchdog, limits, ScriptErrorKind::Compile);

        // Never add `StdLib::DEBUG`: besides escaping the sandbox, `debug.setupvalue` could
        // swap the strings a `gmatch` iterator keeps as upvalues, and its state holds raw
        // pointers into them (see `lua_patterns::Iteration`).
        let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8;
        let lua = Lua::new_with(libs, LuaOptions::default()).map_err(compile_error)?;
        lua.set_memory_limit(limits.memory_bytes)
            .map_err(compile_error)?;
        // Parsers make short-lived garbage every frame (substrings, result tables), the case
        // the generational collector is built for.
        lua.gc_set_mode(GcMode::Generational(GcGenParams::default()));

        let mut state = std::ptr::null_mut();
        // SAFETY: only reads the state pointer.
        unsafe { lua.exec_raw::<()>((), |s| state = s) }.map_err(compile_error)?;
        // SAFETY: `state` is this engine's main state, and nothing else sets hooks on it.
        let alarm = unsafe { Alarm::watch(state, Arc::clone(&watchdog)) };

        watchdog.arm(limits.call_timeout());
        let setup = alarm.run(state, || {
            install_globals(&lua, &watchdog, host).and_then(|()| {
                lua.load(source).set_name(CHUNK_NAME).exec()?;
                lua.globals().get::<Value>(entry.name())
            })
        });
        watchdog.disarm();
        let entry_fn = match setup.map_err(compile_error)? {
            Value::Function(f) => f,
            other => {
                let found = match other {
                    Value::Nil => "it is not defined".to_owned(),
                    other => format!("it is a {}", other.type_name()),
                };
                return Err(ScriptError::new(
                    ScriptErrorKind::Compile,
                    Language::Lua,
                    None,
                    format!(
                        "the script must define a global function {}, but {found}",
                        entry.signature()
                    ),
                ));
            }
        };

        Ok(LuaEngine {
            entry: entry_fn,
            lua,
            state: MainState(state),
            watchdog,
            alarm,
            limits,
            name: entry.name(),
        })
    }

    pub(crate) fn call_parse(&mut self, input: FrameInput<'_>) -> Result<Vec<Cell>, ScriptError> {
        // Armed around the whole exchange, conversions included, so one budget covers every
        // step a script can influence.
        self.watchdog.arm(self.limits.call_timeout());
        let result = self
            .alarm
            .run(self.state.0, || self.call_parse_armed(input));
        self.watchdog.disarm();
        result.map_err(|e| self.fail(e))
    }

    /// Calls `parse` and reads its result on Lua's C API: the result table and its values
    /// are read where they lie on the stack, never turned into mlua handles (each one a
    /// registry reference), which was most of the conversion's cost per frame.
    fn call_parse_armed(&self, input: FrameInput<'_>) -> mlua::Result<Vec<Cell>> {
        let mut read = ResultRead::default();
        let call = |state: *mut ffi::lua_State| {
            // SAFETY: the stack holds the function and its argument (pushed by `exec_raw`);
            // a Lua error raised here unwinds to `exec_raw`'s protected call, past no Rust
            // value that needs dropping (`read` lives in the caller's frame).
            unsafe {
                ffi::lua_call(state, 1, 1);
                read_result(state, &mut read);
            }
        };
        // SAFETY: `call` follows the stack protocol above.
        match input {
            FrameInput::Text(text) => unsafe { self.lua.exec_raw::<()>((&self.entry, text), call) },
            FrameInput::Bytes(bytes) => {
                let table = self
                    .lua
                    .create_sequence_from(bytes.iter().map(|&b| i64::from(b)))?;
                unsafe { self.lua.exec_raw::<()>((&self.entry, table), call) }
            }
        }?;
        match read.refused {
            None => Ok(read.cells),
            Some(Refused::TooMany(message)) => Err(mlua::Error::runtime(message)),
            Some(Refused::NotATable(type_name)) => Err(mlua::Error::runtime(format!(
                "{}() must return an array (table) or nil, not a {type_name}",
                self.name
            ))),
        }
    }

    pub(crate) fn call_transform(
        &mut self,
        value: &ScriptValue,
    ) -> Result<ScriptValue, ScriptError> {
        self.watchdog.arm(self.limits.call_timeout());
        let result = self.alarm.run(self.state.0, || {
            to_lua(&self.lua, value)
                .and_then(|arg| self.entry.call::<Value>(arg))
                .map(scalar)
        });
        self.watchdog.disarm();
        result.map_err(|e| self.fail(e))
    }

    fn fail(&self, error: mlua::Error) -> ScriptError {
        let error = classify(error, &self.watchdog, self.limits, ScriptErrorKind::Runtime);
        if error.kind == ScriptErrorKind::OutOfMemory {
            // Whatever the failed call built is garbage now; reclaim it before the next call.
            // A failure here only means memory stays tight; the next call will say so.
            let _ = self.lua.gc_collect();
        }
        error
    }
}

fn install_globals(lua: &Lua, watchdog: &Arc<Watchdog>, host: Arc<dyn Host>) -> mlua::Result<()> {
    let globals = lua.globals();
    for name in REMOVED_GLOBALS {
        globals.raw_set(*name, Value::Nil)?;
    }
    lua_patterns::install(lua, watchdog)?;
    // SAFETY: `tonumber` follows the C function protocol and takes no upvalues.
    globals.set("tonumber", unsafe {
        lua.create_c_function(lua_numbers::tonumber)
    }?)?;
    lua_bit::install(lua)?;

    let log = lua.create_function(|_, line: mlua::LuaString| {
        tracing::debug!(target: "sextant_scripting::lua", "{}", line.to_string_lossy());
        Ok(())
    })?;
    let tripped_watchdog = Arc::clone(watchdog);
    let tripped = lua.create_function(move |_, ()| Ok(tripped_watchdog.tripped()))?;
    lua.load(PRELUDE)
        .set_name("=prelude")
        .call::<()>((log, tripped))?;

    let h = Arc::clone(&host);
    globals.set(
        "tableGet",
        lua.create_function(move |lua, (table, name): (Value, Value)| {
            to_lua(lua, &h.table_get(&key(&table)?, &key(&name)?))
        })?,
    )?;
    let h = Arc::clone(&host);
    globals.set(
        "tableSet",
        lua.create_function(move |_, (table, name, value): (Value, Value, Value)| {
            h.table_set(&key(&table)?, &key(&name)?, scalar(value))
                .map_err(|full| mlua::Error::runtime(full.to_string()))
        })?,
    )?;
    let h = Arc::clone(&host);
    globals.set(
        "datasetGetRaw",
        lua.create_function(move |lua, id: Value| to_lua(lua, &h.dataset_raw(&key(&id)?)))?,
    )?;
    let h = Arc::clone(&host);
    globals.set(
        "datasetGetFinal",
        lua.create_function(move |lua, id: Value| to_lua(lua, &h.dataset_final(&key(&id)?)))?,
    )?;
    globals.set(
        "clearPlots",
        lua.create_function(move |_, _: Variadic<Value>| {
            host.clear_plots();
            Ok(())
        })?,
    )?;
    Ok(())
}

/// A table name, register name or dataset id: strings as given, numbers in integer form.
fn key(value: &Value) -> mlua::Result<String> {
    match value {
        Value::String(s) => Ok(s.to_string_lossy()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Number(n) => Ok(number_key(*n)),
        other => Err(mlua::Error::runtime(format!(
            "expected a string or number, got {}",
            other.type_name()
        ))),
    }
}

fn to_lua(lua: &Lua, value: &ScriptValue) -> mlua::Result<Value> {
    Ok(match value {
        ScriptValue::Number(n) => match as_integer(*n) {
            Some(i) => Value::Integer(i),
            None => Value::Number(*n),
        },
        ScriptValue::Text(s) => Value::String(lua.create_string(s)?),
        ScriptValue::Null => Value::Nil,
    })
}

fn scalar(value: Value) -> ScriptValue {
    match value {
        Value::Integer(i) => ScriptValue::Number(i as f64),
        Value::Number(n) => ScriptValue::Number(n),
        Value::Boolean(b) => ScriptValue::Number(if b { 1.0 } else { 0.0 }),
        Value::String(s) => ScriptValue::Text(s.to_string_lossy()),
        _ => ScriptValue::Null,
    }
}

/// What reading a `parse` result gave: its cells, or why it was refused.
#[derive(Default)]
struct ResultRead {
    cells: Vec<Cell>,
    refused: Option<Refused>,
}

enum Refused {
    /// More values than a call may return; the message says so.
    TooMany(String),
    /// The result was neither a table nor nil; Lua's name of its type.
    NotATable(&'static str),
}

/// Reads the value on top of the stack as `parse`'s result into `read`: nil is no cells; a
/// table's sequence (from 1 up to its first nil, read raw) gives a cell per value, a list
/// for a table value. Only a stack overflow can raise a Lua error here, and no Rust value
/// that needs dropping is live in this frame then.
unsafe fn read_result(state: *mut ffi::lua_State, read: &mut ResultRead) {
    match ffi::lua_type(state, -1) {
        ffi::LUA_TNIL => {}
        ffi::LUA_TTABLE => {
            // The table, an element and a nested element.
            ffi::luaL_checkstack(state, 3, c"reading the result".as_ptr());
            let mut budget = Budget::default();
            let cells = &mut read.cells;
            cells.reserve((ffi::lua_rawlen(state, -1)).min(PREALLOCATE));
            for i in 1.. {
                let kind = ffi::lua_rawgeti(state, -1, i);
                if kind == ffi::LUA_TNIL {
                    break;
                }
                if let Err(message) = budget.take() {
                    read.refused = Some(Refused::TooMany(message));
                    return;
                }
                let cell = if kind == ffi::LUA_TTABLE {
                    match read_list(state, &mut budget) {
                        Ok(list) => Cell::List(list),
                        Err(message) => {
                            read.refused = Some(Refused::TooMany(message));
                            return;
                        }
                    }
                } else {
                    Cell::Scalar(stack_scalar(state, kind))
                };
                cells.push(cell);
                ffi::lua_pop(state, 1);
            }
        }
        other => {
            let name = CStr::from_ptr(ffi::lua_typename(state, other));
            read.refused = Some(Refused::NotATable(name.to_str().unwrap_or("value")));
        }
    }
}

/// The sequence of the table on top of the stack as scalars, each counted against `budget`.
unsafe fn read_list(
    state: *mut ffi::lua_State,
    budget: &mut Budget,
) -> Result<Vec<ScriptValue>, String> {
    let mut values = Vec::with_capacity(ffi::lua_rawlen(state, -1).min(PREALLOCATE));
    for i in 1.. {
        let kind = ffi::lua_rawgeti(state, -1, i);
        if kind == ffi::LUA_TNIL {
            ffi::lua_pop(state, 1);
            break;
        }
        budget.take()?;
        values.push(stack_scalar(state, kind));
        ffi::lua_pop(state, 1);
    }
    Ok(values)
}

/// The value on top of the stack, of Lua type `kind`, as [`scalar`] converts it.
unsafe fn stack_scalar(state: *mut ffi::lua_State, kind: c_int) -> ScriptValue {
    match kind {
        ffi::LUA_TNUMBER if ffi::lua_isinteger(state, -1) != 0 => {
            ScriptValue::Number(ffi::lua_tointeger(state, -1) as f64)
        }
        ffi::LUA_TNUMBER => ScriptValue::Number(ffi::lua_tonumber(state, -1)),
        ffi::LUA_TBOOLEAN => ScriptValue::Number(if ffi::lua_toboolean(state, -1) != 0 {
            1.0
        } else {
            0.0
        }),
        ffi::LUA_TSTRING => {
            let mut len = 0;
            let data = ffi::lua_tolstring(state, -1, &mut len);
            ScriptValue::Text(
                String::from_utf8_lossy(std::slice::from_raw_parts(data.cast::<u8>(), len))
                    .into_owned(),
            )
        }
        _ => ScriptValue::Null,
    }
}

/// Maps an mlua error to the crate's error, using the watchdog (not the message, which a
/// script could forge) to recognise timeouts.
fn classify(
    error: mlua::Error,
    watchdog: &Watchdog,
    limits: Limits,
    otherwise: ScriptErrorKind,
) -> ScriptError {
    if watchdog.tripped() {
        return match watchdog.exhausted() {
            Some(steps) => ScriptError::new(
                ScriptErrorKind::Timeout,
                Language::Lua,
                line_after(&error.to_string(), LINE_MARKER),
                budget_message(steps),
            ),
            None => ScriptError::new(
                ScriptErrorKind::Timeout,
                Language::Lua,
                None,
                limits.timeout_message(),
            ),
        };
    }
    let text = error.to_string();
    let line = line_after(&text, LINE_MARKER);
    let kind = match root(&error) {
        mlua::Error::MemoryError(_) => ScriptErrorKind::OutOfMemory,
        mlua::Error::SyntaxError { .. } => ScriptErrorKind::Compile,
        // A memory error rethrown by a script's own pcall arrives as a plain runtime error.
        _ if text.contains("not enough memory") => ScriptErrorKind::OutOfMemory,
        _ => otherwise,
    };
    ScriptError::new(kind, Language::Lua, line, clean_message(&text))
}

/// The error a callback or context wrapper ultimately carries.
fn root(error: &mlua::Error) -> &mlua::Error {
    match error {
        mlua::Error::CallbackError { cause, .. } => root(cause),
        mlua::Error::WithContext { cause, .. } => root(cause),
        other => other,
    }
}

/// The message without mlua's traceback and without the position prefix the line number
/// already carries.
fn clean_message(text: &str) -> String {
    let text = text
        .split("\nstack traceback:")
        .next()
        .unwrap_or(text)
        .trim();
    let text = text.strip_prefix("runtime error: ").unwrap_or(text);
    let text = text.strip_prefix("syntax error: ").unwrap_or(text);
    let text = text.strip_prefix("memory error: ").unwrap_or(text);
    let without_position = text.strip_prefix(LINE_MARKER).and_then(|rest| {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[digits..].strip_prefix(": ").filter(|_| digits > 0)
    });
    without_position.unwrap_or(text).to_owned()
}
