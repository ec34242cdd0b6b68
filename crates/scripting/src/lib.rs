//! Sandboxed user scripts: the `parse(frame)` parsers and `transform(value)` transforms that
//! projects carry, in Lua 5.4 (mlua, vendored) and JavaScript (QuickJS via rquickjs).
//!
//! This crate owns the *contract* a script sees (see `10-telemetry.md` §3): exactly one
//! argument, array results, 1-based dataset mapping done by the caller, Serial Studio's
//! host functions, and the sandbox (no files, network, timers or module loading; a
//! wall-clock watchdog and a memory cap per engine). It knows nothing of projects, framing
//! or datasets beyond the [`Host`] callbacks, so `sextant-telemetry` can depend on it and
//! not the other way round.
//!
//! API CONTRACT (implemented by the modules below):
//!
//! * [`ScriptParser::compile`] compiles a script that defines a global `parse(frame)`.
//!   A script without such a function fails to compile with a clear error.
//! * [`ScriptParser::parse`] calls it with a string ([`FrameInput::Text`]) or an array of
//!   byte numbers 0–255 ([`FrameInput::Bytes`]: a JS array, or a 1-based Lua table) and
//!   returns the *rows* the call produced, already expanded:
//!   - `null`/`nil`/`undefined` or an empty array → no rows (frame skipped);
//!   - an array of scalars → one row;
//!   - an array whose elements are all arrays → one row per inner array;
//!   - a *mixed* array (`[battery, temp, [x1,x2], [y1,y2]]`) → rows = the longest list's
//!     length; scalars repeat on every row; list `k` gives its `i`-th element to row `i`,
//!     a shorter list is padded with its last element (an empty list gives `Null`).
//!
//!   Numbers become [`ScriptValue::Number`], strings [`ScriptValue::Text`], booleans
//!   `Number(1.0 | 0.0)`, anything else `Null`.
//! * [`ScriptTransform::compile`] compiles a script defining `transform(value)`;
//!   [`ScriptTransform::transform`] calls it with a number or a string and returns its result
//!   as a [`ScriptValue`].
//! * [`ScriptTransmit::compile`] compiles an output control's script defining
//!   `transmit(value)`; [`ScriptTransmit::transmit`] calls it with the control's value and
//!   returns the bytes its string stands for (see the `transmit` module).
//! * Errors carry the script's line number where the engine reports one.
//! * Watchdog: a call running longer than [`Limits::timeout`] is interrupted and fails with
//!   [`ScriptErrorKind::Timeout`]; after [`Limits::max_consecutive_timeouts`] consecutive
//!   timeouts the script is disabled and every later call fails with
//!   [`ScriptErrorKind::Disabled`]. A successful call resets the count. A
//!   [`Limits::deadline`] bounds every call of a run together (a dry run's total): a call
//!   still running at it is interrupted as a timeout, and a later one as soon as the
//!   watchdog looks. Lua's pattern
//!   functions (`string.find/match/gmatch/gsub`) are the sandbox's own, which the watchdog
//!   reaches inside the match; one that exhausts its step budget also fails the call with
//!   [`ScriptErrorKind::Timeout`]. So does a JavaScript call whose promise jobs go past
//!   10 000: the jobs left are dropped with its engine, which starts afresh (its top level
//!   runs again), so none runs in a later call.
//! * Memory: an engine allocating beyond [`Limits::memory_bytes`] fails the call with
//!   [`ScriptErrorKind::OutOfMemory`]; the process is never aborted.
//! * Host functions available as globals in both languages: `tableGet(table, name)`,
//!   `tableSet(table, name, value)`, `datasetGetRaw(id)`, `datasetGetFinal(id)`,
//!   `clearPlots()`, all delegated to the [`Host`] passed at compile time. Lua also gets the
//!   LuaJIT `bit` library (`tobit, band, bor, bxor, bnot, lshift, rshift, arshift, rol, ror,
//!   bswap, tohex`) and a global `unpack` alias of `table.unpack`.
//! * Sandbox: Lua loads only `string`, `table`, `math`, `utf8` and a base library without
//!   `dofile`, `loadfile`, `load`, `require`, `collectgarbage`; no `io`, `os`, `package`,
//!   `debug`. JavaScript has no module loader and no std/os modules. `print` (Lua) and
//!   `console.log` (JS) go to `tracing` at debug level.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod host;
mod js;
mod lua;
mod lua_alarm;
mod lua_bit;
mod lua_numbers;
mod lua_patterns;
mod rows;
mod transmit;

pub use host::{Host, NoHost, SharedTables, TablesFull, MAX_TABLE_BYTES};
pub use transmit::{ScriptTransmit, MAX_TRANSMIT_BYTES};

/// Which engine runs a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    Lua,
    JavaScript,
}

/// One value crossing the script boundary.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptValue {
    Number(f64),
    Text(String),
    Null,
}

/// What a parser receives: decoded text, or raw bytes for binary decoders.
#[derive(Debug, Clone, Copy)]
pub enum FrameInput<'a> {
    Text(&'a str),
    Bytes(&'a [u8]),
}

/// Resource limits for one script engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of a single call (Serial Studio uses 500 ms).
    pub timeout: Duration,
    /// Heap cap of the engine, in bytes.
    pub memory_bytes: usize,
    /// Consecutive timeouts after which the script is disabled.
    pub max_consecutive_timeouts: u32,
    /// No call runs past this instant, whatever is left of its `timeout`: one budget for
    /// every call of a run (a dry run's total script time). A call still running at it is
    /// a timeout, and so is a later one as soon as the watchdog looks (a call too short
    /// for it to look may still finish). `None`: each call has its `timeout`, however many
    /// calls there are.
    pub deadline: Option<Instant>,
}

impl Limits {
    /// The time a call starting now may take: `timeout`, or what is left until `deadline`.
    pub fn call_timeout(&self) -> Duration {
        match self.deadline {
            Some(deadline) => self
                .timeout
                .min(deadline.saturating_duration_since(Instant::now())),
            None => self.timeout,
        }
    }

    /// Why a call that ran out of time was stopped, for its error.
    pub(crate) fn timeout_message(&self) -> String {
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => {
                "the time budget of this run was used up".to_owned()
            }
            _ => format!("call exceeded {} ms", self.timeout.as_millis()),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_millis(500),
            memory_bytes: 64 * 1024 * 1024,
            max_consecutive_timeouts: 3,
            deadline: None,
        }
    }
}

/// Why a script failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptErrorKind {
    /// Syntax error, or the required entry function is missing.
    Compile,
    /// The script raised an error or returned something unusable.
    Runtime,
    /// The watchdog interrupted a call.
    Timeout,
    /// The engine hit its memory cap.
    OutOfMemory,
    /// Too many consecutive timeouts; the script no longer runs.
    Disabled,
}

/// A script failure, with the line the engine blamed when it named one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ScriptError {
    pub kind: ScriptErrorKind,
    pub language: Language,
    pub line: Option<u32>,
    pub message: String,
}

impl ScriptError {
    fn render(&self) -> String {
        let lang = match self.language {
            Language::Lua => "Lua",
            Language::JavaScript => "JavaScript",
        };
        let what = match self.kind {
            ScriptErrorKind::Compile => "script does not compile",
            ScriptErrorKind::Runtime => "script error",
            ScriptErrorKind::Timeout => "script timed out",
            ScriptErrorKind::OutOfMemory => "script ran out of memory",
            ScriptErrorKind::Disabled => "script disabled after repeated timeouts",
        };
        match self.line {
            Some(line) => format!("{lang} {what} at line {line}: {}", self.message),
            None => format!("{lang} {what}: {}", self.message),
        }
    }
}

impl ScriptError {
    pub(crate) fn new(
        kind: ScriptErrorKind,
        language: Language,
        line: Option<u32>,
        message: impl Into<String>,
    ) -> Self {
        ScriptError {
            kind,
            language,
            line,
            message: message.into(),
        }
    }
}

/// A compiled `parse(frame)` function.
pub struct ScriptParser {
    inner: Engine,
    supervisor: Supervisor,
}

/// A compiled `transform(value)` function.
pub struct ScriptTransform {
    inner: Engine,
    supervisor: Supervisor,
}

// Both handles are moved into worker threads by their owners; fail the build, not a
// downstream crate, if an engine ever stops being `Send`.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<ScriptParser>();
    assert_send::<ScriptTransform>();
};

enum Engine {
    Lua(lua::LuaEngine),
    Js(js::JsEngine),
}

impl Engine {
    fn compile(
        language: Language,
        source: &str,
        limits: Limits,
        host: Arc<dyn Host>,
        entry: Entry,
    ) -> Result<Self, ScriptError> {
        Ok(match language {
            Language::Lua => Engine::Lua(lua::LuaEngine::new(source, limits, host, entry)?),
            Language::JavaScript => Engine::Js(js::JsEngine::new(source, limits, host, entry)?),
        })
    }

    fn language(&self) -> Language {
        match self {
            Engine::Lua(_) => Language::Lua,
            Engine::Js(_) => Language::JavaScript,
        }
    }
}

/// The global function a script must define.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    Parse,
    Transform,
    Transmit,
}

impl Entry {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Entry::Parse => "parse",
            Entry::Transform => "transform",
            Entry::Transmit => "transmit",
        }
    }

    pub(crate) fn signature(self) -> &'static str {
        match self {
            Entry::Parse => "parse(frame)",
            Entry::Transform => "transform(value)",
            Entry::Transmit => "transmit(value)",
        }
    }
}

impl ScriptParser {
    /// Compiles `source` and runs its top level; the script must define a global
    /// `parse(frame)` function.
    pub fn compile(
        language: Language,
        source: &str,
        limits: Limits,
        host: Arc<dyn Host>,
    ) -> Result<Self, ScriptError> {
        Ok(ScriptParser {
            inner: Engine::compile(language, source, limits, host, Entry::Parse)?,
            supervisor: Supervisor::new(language, limits),
        })
    }

    /// Runs `parse(frame)` on one frame and returns the rows it produced.
    pub fn parse(&mut self, input: FrameInput<'_>) -> Result<Vec<Vec<ScriptValue>>, ScriptError> {
        let inner = &mut self.inner;
        let cells = self.supervisor.run(|| match inner {
            Engine::Lua(engine) => engine.call_parse(input),
            Engine::Js(engine) => engine.call_parse(input),
        })?;
        let language = self.inner.language();
        rows::expand(cells)
            .map_err(|message| ScriptError::new(ScriptErrorKind::Runtime, language, None, message))
    }

    /// The engine running this script.
    pub fn language(&self) -> Language {
        self.inner.language()
    }

    /// Whether repeated timeouts have disabled this script.
    pub fn is_disabled(&self) -> bool {
        self.supervisor.disabled
    }
}

impl ScriptTransform {
    /// Compiles `source` and runs its top level; the script must define a global
    /// `transform(value)` function.
    pub fn compile(
        language: Language,
        source: &str,
        limits: Limits,
        host: Arc<dyn Host>,
    ) -> Result<Self, ScriptError> {
        Ok(ScriptTransform {
            inner: Engine::compile(language, source, limits, host, Entry::Transform)?,
            supervisor: Supervisor::new(language, limits),
        })
    }

    /// Runs `transform(value)` on one value.
    pub fn transform(&mut self, value: ScriptValue) -> Result<ScriptValue, ScriptError> {
        let inner = &mut self.inner;
        self.supervisor.run(|| match inner {
            Engine::Lua(engine) => engine.call_transform(&value),
            Engine::Js(engine) => engine.call_transform(&value),
        })
    }

    /// The engine running this script.
    pub fn language(&self) -> Language {
        self.inner.language()
    }

    /// Whether repeated timeouts have disabled this script.
    pub fn is_disabled(&self) -> bool {
        self.supervisor.disabled
    }
}

/// Counts consecutive timeouts and refuses calls once the script is disabled.
struct Supervisor {
    language: Language,
    max_consecutive_timeouts: u32,
    consecutive_timeouts: u32,
    disabled: bool,
}

impl Supervisor {
    fn new(language: Language, limits: Limits) -> Self {
        Supervisor {
            language,
            max_consecutive_timeouts: limits.max_consecutive_timeouts,
            consecutive_timeouts: 0,
            disabled: false,
        }
    }

    fn run<T>(&mut self, call: impl FnOnce() -> Result<T, ScriptError>) -> Result<T, ScriptError> {
        if self.disabled {
            return Err(ScriptError::new(
                ScriptErrorKind::Disabled,
                self.language,
                None,
                format!(
                    "{} consecutive calls exceeded the time limit",
                    self.consecutive_timeouts
                ),
            ));
        }
        let result = call();
        match &result {
            Ok(_) => self.consecutive_timeouts = 0,
            Err(e) if e.kind == ScriptErrorKind::Timeout => {
                self.consecutive_timeouts = self.consecutive_timeouts.saturating_add(1);
                // Zero means "never disable": a limit that disables before the first
                // timeout would make every script unusable.
                if self.max_consecutive_timeouts > 0
                    && self.consecutive_timeouts >= self.max_consecutive_timeouts
                {
                    self.disabled = true;
                }
            }
            Err(_) => {}
        }
        result
    }
}

/// Wall-clock deadline shared between an engine and its interrupt callback.
///
/// The callback runs inside the engine (every few thousand instructions), so the state is
/// atomics rather than a lock; an engine is only ever driven from one thread at a time, so
/// relaxed ordering is enough.
pub(crate) struct Watchdog {
    epoch: Instant,
    /// Nanoseconds since `epoch`; `u64::MAX` when no call is running.
    deadline: AtomicU64,
    tripped: AtomicBool,
    /// The step budget a pattern call of the running call used up; 0 when none did.
    exhausted: AtomicU64,
}

impl Watchdog {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Watchdog {
            epoch: Instant::now(),
            deadline: AtomicU64::new(u64::MAX),
            tripped: AtomicBool::new(false),
            exhausted: AtomicU64::new(0),
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Starts the budget of one call.
    pub(crate) fn arm(&self, timeout: Duration) {
        let budget = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let deadline = self.now().saturating_add(budget).min(u64::MAX - 1);
        self.tripped.store(false, Ordering::Relaxed);
        self.exhausted.store(0, Ordering::Relaxed);
        self.deadline.store(deadline, Ordering::Relaxed);
    }

    pub(crate) fn disarm(&self) {
        self.deadline.store(u64::MAX, Ordering::Relaxed);
    }

    /// Whether a call is running and past its deadline, without marking it tripped: what a
    /// thread other than the call's may ask.
    pub(crate) fn past_deadline(&self) -> bool {
        let deadline = self.deadline.load(Ordering::Relaxed);
        deadline != u64::MAX && self.now() >= deadline
    }

    /// Called from the engine's interrupt hook: true once the running call is over budget.
    pub(crate) fn expired(&self) -> bool {
        if self.tripped.load(Ordering::Relaxed) {
            return true;
        }
        let deadline = self.deadline.load(Ordering::Relaxed);
        if deadline != u64::MAX && self.now() >= deadline {
            self.tripped.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Whether the current (or last) call was interrupted.
    pub(crate) fn tripped(&self) -> bool {
        self.tripped.load(Ordering::Relaxed)
    }

    /// Ends the running call as a timeout because native work (Lua pattern matching) used
    /// up its step budget of `steps`: the time limit cannot see inside it.
    pub(crate) fn exhaust(&self, steps: u64) {
        self.exhausted.store(steps.max(1), Ordering::Relaxed);
        self.tripped.store(true, Ordering::Relaxed);
    }

    /// The budget the current (or last) call used up, if that is why it was interrupted.
    pub(crate) fn exhausted(&self) -> Option<u64> {
        Some(self.exhausted.load(Ordering::Relaxed)).filter(|&steps| steps > 0)
    }
}

/// The line number following the first `marker` (a chunk or file name plus `:`) in an
/// engine message, e.g. `script:3: unexpected symbol`.
pub(crate) fn line_after(message: &str, marker: &str) -> Option<u32> {
    message.match_indices(marker).find_map(|(at, _)| {
        let rest = &message[at + marker.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[..digits].parse().ok()
    })
}

/// Integral values cross as integers so scripts see `3`, not `3.0`, for a byte or a gear.
pub(crate) fn as_integer(value: f64) -> Option<i64> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: beyond it f64 is not exact
    (value.fract() == 0.0 && value.abs() < EXACT).then_some(value as i64)
}

/// The text form of a table or dataset key given as a number: `3`, not `3.0`.
pub(crate) fn number_key(value: f64) -> String {
    match as_integer(value) {
        Some(i) => i.to_string(),
        None => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_and_transform_are_send() {
        fn assert_send<T: Send>() {}
        assert_send::<ScriptParser>();
        assert_send::<ScriptTransform>();
    }

    #[test]
    fn line_after_finds_first_marker() {
        assert_eq!(line_after("script:3: boom", "script:"), Some(3));
        assert_eq!(line_after("x script:12: y script:4:", "script:"), Some(12));
        assert_eq!(line_after("no line", "script:"), None);
        assert_eq!(line_after("script:abc", "script:"), None);
    }

    #[test]
    fn integers_cross_as_integers() {
        assert_eq!(as_integer(3.0), Some(3));
        assert_eq!(as_integer(-0.0), Some(0));
        assert_eq!(as_integer(2.5), None);
        assert_eq!(as_integer(f64::NAN), None);
        assert_eq!(as_integer(1e300), None);
        assert_eq!(number_key(7.0), "7");
        assert_eq!(number_key(7.5), "7.5");
    }

    #[test]
    fn disabled_after_consecutive_timeouts_and_reset_by_success() {
        let limits = Limits {
            max_consecutive_timeouts: 2,
            ..Limits::default()
        };
        let mut sup = Supervisor::new(Language::Lua, limits);
        let timeout = || {
            Err::<(), _>(ScriptError::new(
                ScriptErrorKind::Timeout,
                Language::Lua,
                None,
                "t",
            ))
        };
        assert!(sup.run(timeout).is_err());
        assert!(sup.run(|| Ok(())).is_ok());
        assert!(sup.run(timeout).is_err());
        assert!(!sup.disabled);
        assert!(sup.run(timeout).is_err());
        assert!(sup.disabled);
        let err = sup.run(|| Ok(())).unwrap_err();
        assert_eq!(err.kind, ScriptErrorKind::Disabled);
    }
}
