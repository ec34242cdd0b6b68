//! The JavaScript engine (QuickJS): runtime and context construction with the memory cap and
//! interrupt-based watchdog, host globals and `console`, and value conversion.

use std::sync::Arc;

use rquickjs::context::EvalOptions;
use rquickjs::function::Rest;
use rquickjs::{
    Array, Coerced, Context, Ctx, Exception, Function, Object, Persistent, Runtime, Type, Value,
};

use crate::rows::{Budget, Cell, PREALLOCATE};
use crate::{
    as_integer, line_after, number_key, Entry, FrameInput, Host, Language, Limits, ScriptError,
    ScriptErrorKind, ScriptValue, Watchdog,
};

/// File name of user scripts; QuickJS stack traces read `at parse (script.js:3:9)`.
const FILE_NAME: &str = "script.js";
const LINE_MARKER: &str = "script.js:";

/// Promise jobs run after the top level and after each call, at most this many at a time
/// (the watchdog still bounds their total time). A call whose jobs go past it fails, and the
/// jobs left are dropped with the engine, which starts afresh: they would otherwise run in
/// the next call, and pile up frame after frame.
const MAX_JOBS_PER_CALL: usize = 10_000;

/// Why a call (`where_`: "in one call") or the top level was stopped at
/// [`MAX_JOBS_PER_CALL`].
fn jobs_message(where_: &str) -> String {
    format!(
        "more than {MAX_JOBS_PER_CALL} promise jobs ran {where_} (a promise chain that keeps \
         queueing itself?)"
    )
}

/// The cached entry function.
///
/// `Persistent` is `!Send` only because it carries raw pointers to the runtime and context
/// it came from. Both are owned by the same [`JsEngine`], which moves between threads as a
/// whole and only touches them under `Context::with` (the runtime lock), so sending the
/// handle along with them is sound; rquickjs marks `Runtime` and `Context` `Send` under its
/// `parallel` feature for the same reason.
struct EntryHandle(Persistent<Function<'static>>);

// SAFETY: see the type's documentation: the handle never leaves its engine and is only
// restored or released inside `Context::with` on that engine's context.
unsafe impl Send for EntryHandle {}

pub(crate) struct JsEngine {
    // Released in `Drop` under the runtime lock, before the context and runtime go away.
    entry: Option<EntryHandle>,
    context: Context,
    runtime: Runtime,
    watchdog: Arc<Watchdog>,
    limits: Limits,
    name: &'static str,
    /// What the engine was made from, to start it afresh when jobs are dropped.
    source: Arc<str>,
    host: Arc<dyn Host>,
    entry_kind: Entry,
}

impl Drop for JsEngine {
    fn drop(&mut self) {
        if let Some(EntryHandle(entry)) = self.entry.take() {
            self.context.with(|ctx| drop(entry.restore(&ctx)));
        }
    }
}

impl JsEngine {
    pub(crate) fn new(
        source: &str,
        limits: Limits,
        host: Arc<dyn Host>,
        entry: Entry,
    ) -> Result<Self, ScriptError> {
        let watchdog = Watchdog::new();
        let setup_error = |e: rquickjs::Error| {
            ScriptError::new(
                ScriptErrorKind::Compile,
                Language::JavaScript,
                None,
                e.to_string(),
            )
        };
        let runtime = Runtime::new().map_err(setup_error)?;
        runtime.set_memory_limit(limits.memory_bytes);
        let interrupt_watchdog = Arc::clone(&watchdog);
        runtime.set_interrupt_handler(Some(Box::new(move || interrupt_watchdog.expired())));
        let context = Context::full(&runtime).map_err(setup_error)?;

        watchdog.arm(limits.call_timeout());
        let globals_host = Arc::clone(&host);
        let handle = context.with(|ctx| {
            let fail = |e| classify(&ctx, e, &watchdog, limits, ScriptErrorKind::Compile);
            install_globals(&ctx, globals_host).map_err(fail)?;
            let mut options = EvalOptions::default();
            options.global = true;
            options.strict = false;
            options.filename = Some(FILE_NAME.to_owned());
            ctx.eval_with_options::<(), _>(source, options)
                .map_err(fail)?;
            if run_jobs(&ctx) == Jobs::Capped {
                let message = if watchdog.tripped() {
                    limits.timeout_message()
                } else {
                    jobs_message("at the top level")
                };
                return Err(ScriptError::new(
                    ScriptErrorKind::Timeout,
                    Language::JavaScript,
                    None,
                    message,
                ));
            }
            // Evaluated rather than read from `globalThis` so that `const parse = ...` and
            // `let parse = ...` (global lexical bindings, not properties) count too.
            let name = entry.name();
            let found: Value = ctx
                .eval(format!("typeof {name} === 'function' ? {name} : undefined"))
                .map_err(fail)?;
            match found.into_function() {
                Some(f) => Ok(EntryHandle(Persistent::save(&ctx, f))),
                None => Err(ScriptError::new(
                    ScriptErrorKind::Compile,
                    Language::JavaScript,
                    None,
                    format!(
                        "the script must define a global function {}, but it does not",
                        entry.signature()
                    ),
                )),
            }
        });
        watchdog.disarm();

        Ok(JsEngine {
            entry: Some(handle?),
            context,
            runtime,
            watchdog,
            limits,
            name: entry.name(),
            source: Arc::from(source),
            host,
            entry_kind: entry,
        })
    }

    /// This engine again, as compiled: its queued jobs and its globals gone, its top level
    /// run again. Kept as it is when that fails; the reason is returned.
    fn restart(&mut self) -> Result<(), String> {
        let source = Arc::clone(&self.source);
        match JsEngine::new(
            &source,
            self.limits,
            Arc::clone(&self.host),
            self.entry_kind,
        ) {
            Ok(fresh) => {
                *self = fresh;
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    pub(crate) fn call_parse(&mut self, input: FrameInput<'_>) -> Result<Vec<Cell>, ScriptError> {
        let name = self.name;
        self.call(|ctx, entry| {
            let arg = match input {
                FrameInput::Text(text) => {
                    rquickjs::String::from_str(ctx.clone(), text)?.into_value()
                }
                FrameInput::Bytes(bytes) => {
                    let array = Array::new(ctx.clone())?;
                    for (i, byte) in bytes.iter().enumerate() {
                        array.set(i, i32::from(*byte))?;
                    }
                    array.into_value()
                }
            };
            let result: Value = entry.call((arg,))?;
            match result.type_of() {
                Type::Undefined | Type::Null | Type::Uninitialized => Ok(Vec::new()),
                Type::Array => match result.as_array() {
                    Some(array) => cells(ctx, array),
                    None => Ok(Vec::new()),
                },
                other => Err(Exception::throw_type(
                    ctx,
                    &format!(
                        "{name}() must return an array or null, not {}",
                        other.as_str()
                    ),
                )),
            }
        })
    }

    pub(crate) fn call_transform(
        &mut self,
        value: &ScriptValue,
    ) -> Result<ScriptValue, ScriptError> {
        self.call(|ctx, entry| {
            let arg = to_js(ctx, value)?;
            let result: Value = entry.call((arg,))?;
            Ok(scalar(&result))
        })
    }

    /// Runs `body` with the entry function under the watchdog and maps its failure.
    fn call<T>(
        &mut self,
        body: impl for<'js> FnOnce(&Ctx<'js>, Function<'js>) -> rquickjs::Result<T>,
    ) -> Result<T, ScriptError> {
        let Some(EntryHandle(entry)) = &self.entry else {
            return Err(ScriptError::new(
                ScriptErrorKind::Runtime,
                Language::JavaScript,
                None,
                "the script is not loaded",
            ));
        };
        let (watchdog, limits) = (&self.watchdog, self.limits);
        watchdog.arm(limits.call_timeout());
        let (result, jobs) = self.context.with(|ctx| {
            let result = entry
                .clone()
                .restore(&ctx)
                .and_then(|f| body(&ctx, f))
                .map_err(|e| classify(&ctx, e, watchdog, limits, ScriptErrorKind::Runtime));
            let jobs = run_jobs(&ctx);
            // A job that ran out the clock makes the call a timeout even if `parse` returned.
            let result = match result {
                Ok(_) if watchdog.tripped() => Err(ScriptError::new(
                    ScriptErrorKind::Timeout,
                    Language::JavaScript,
                    None,
                    limits.timeout_message(),
                )),
                other => other,
            };
            (result, jobs)
        });
        watchdog.disarm();
        let result = if jobs == Jobs::Capped {
            // QuickJS cannot take jobs out of its queue: the ones left go with the engine.
            let message = match self.restart() {
                Ok(()) => format!(
                    "{}; the jobs left were dropped and the script started afresh",
                    jobs_message("in one call")
                ),
                Err(why) => format!(
                    "{}; the script could not start afresh to drop the jobs left: {why}",
                    jobs_message("in one call")
                ),
            };
            match result {
                Ok(_) => Err(ScriptError::new(
                    ScriptErrorKind::Timeout,
                    Language::JavaScript,
                    None,
                    message,
                )),
                other => other,
            }
        } else {
            result
        };
        if matches!(&result, Err(e) if e.kind == ScriptErrorKind::OutOfMemory) {
            // Whatever the failed call built is unreachable now; collect cycles so the next
            // call starts with the memory back.
            self.runtime.run_gc();
        }
        result
    }
}

/// Whether the queued promise jobs all ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Jobs {
    Settled,
    /// [`MAX_JOBS_PER_CALL`] ran and more were queued.
    Capped,
}

/// Runs queued promise jobs, at most [`MAX_JOBS_PER_CALL`] of them (and one more, to learn
/// whether any was left); a job's exception is dropped, as an unhandled rejection is.
fn run_jobs(ctx: &Ctx<'_>) -> Jobs {
    for _ in 0..MAX_JOBS_PER_CALL {
        if !ctx.execute_pending_job() {
            return Jobs::Settled;
        }
    }
    if ctx.execute_pending_job() {
        Jobs::Capped
    } else {
        Jobs::Settled
    }
}

fn install_globals<'js>(ctx: &Ctx<'js>, host: Arc<dyn Host>) -> rquickjs::Result<()> {
    let globals = ctx.globals();

    let h = Arc::clone(&host);
    globals.set(
        "tableGet",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, table: Value<'js>, name: Value<'js>| {
                to_js(&ctx, &h.table_get(&key(&ctx, &table)?, &key(&ctx, &name)?))
            },
        )?,
    )?;
    let h = Arc::clone(&host);
    globals.set(
        "tableSet",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, table: Value<'js>, name: Value<'js>, value: Value<'js>| {
                h.table_set(&key(&ctx, &table)?, &key(&ctx, &name)?, scalar(&value))
                    .map_err(|full| Exception::throw_range(&ctx, &full.to_string()))
            },
        )?,
    )?;
    let h = Arc::clone(&host);
    globals.set(
        "datasetGetRaw",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, id: Value<'js>| {
            to_js(&ctx, &h.dataset_raw(&key(&ctx, &id)?))
        })?,
    )?;
    let h = Arc::clone(&host);
    globals.set(
        "datasetGetFinal",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, id: Value<'js>| {
            to_js(&ctx, &h.dataset_final(&key(&ctx, &id)?))
        })?,
    )?;
    globals.set(
        "clearPlots",
        Function::new(ctx.clone(), move || host.clear_plots())?,
    )?;

    let console = Object::new(ctx.clone())?;
    for method in ["log", "info", "warn", "error", "debug"] {
        console.set(
            method,
            Function::new(ctx.clone(), |parts: Rest<Coerced<String>>| {
                let line = parts
                    .0
                    .into_iter()
                    .map(|part| part.0)
                    .collect::<Vec<_>>()
                    .join(" ");
                tracing::debug!(target: "sextant_scripting::js", "{line}");
            })?,
        )?;
    }
    globals.set("console", console)?;
    Ok(())
}

/// A table name, register name or dataset id: strings as given, numbers in integer form.
fn key<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> rquickjs::Result<String> {
    if let Some(s) = value.as_string() {
        return s.to_string();
    }
    if let Some(n) = value.as_number() {
        return Ok(number_key(n));
    }
    Err(Exception::throw_type(
        ctx,
        &format!("expected a string or number, got {}", value.type_name()),
    ))
}

fn to_js<'js>(ctx: &Ctx<'js>, value: &ScriptValue) -> rquickjs::Result<Value<'js>> {
    Ok(match value {
        ScriptValue::Number(n) => match as_integer(*n).and_then(|i| i32::try_from(i).ok()) {
            Some(i) => Value::new_int(ctx.clone(), i),
            None => Value::new_float(ctx.clone(), *n),
        },
        ScriptValue::Text(s) => rquickjs::String::from_str(ctx.clone(), s)?.into_value(),
        ScriptValue::Null => Value::new_null(ctx.clone()),
    })
}

fn scalar(value: &Value<'_>) -> ScriptValue {
    match value.type_of() {
        Type::Int | Type::Float => value
            .as_number()
            .map_or(ScriptValue::Null, ScriptValue::Number),
        Type::Bool => ScriptValue::Number(if value.as_bool() == Some(true) {
            1.0
        } else {
            0.0
        }),
        Type::String => value
            .as_string()
            .and_then(|s| s.to_string().ok())
            .map_or(ScriptValue::Null, ScriptValue::Text),
        _ => ScriptValue::Null,
    }
}

fn cells<'js>(ctx: &Ctx<'js>, array: &Array<'js>) -> rquickjs::Result<Vec<Cell>> {
    let mut budget = Budget::default();
    // `length` is script-controlled (`new Array(1e9)` allocates nothing), so it only hints.
    let mut cells = Vec::with_capacity(array.len().min(PREALLOCATE));
    for i in 0..array.len() {
        budget.take().map_err(|m| Exception::throw_range(ctx, &m))?;
        let value: Value = array.get(i)?;
        cells.push(match value.as_array() {
            Some(inner) => Cell::List(list(ctx, inner, &mut budget)?),
            None => Cell::Scalar(scalar(&value)),
        });
    }
    Ok(cells)
}

fn list<'js>(
    ctx: &Ctx<'js>,
    array: &Array<'js>,
    budget: &mut Budget,
) -> rquickjs::Result<Vec<ScriptValue>> {
    let mut values = Vec::with_capacity(array.len().min(PREALLOCATE));
    for i in 0..array.len() {
        budget.take().map_err(|m| Exception::throw_range(ctx, &m))?;
        values.push(scalar(&array.get::<Value>(i)?));
    }
    Ok(values)
}

/// Maps an rquickjs error (fetching the pending exception) to the crate's error, using the
/// watchdog rather than the message to recognise timeouts.
fn classify(
    ctx: &Ctx<'_>,
    error: rquickjs::Error,
    watchdog: &Watchdog,
    limits: Limits,
    otherwise: ScriptErrorKind,
) -> ScriptError {
    let (message, line) = match error {
        rquickjs::Error::Exception => describe(&ctx.catch()),
        other => (other.to_string(), None),
    };
    let kind = if watchdog.tripped() {
        ScriptErrorKind::Timeout
    } else if message.contains("out of memory")
        || message == rquickjs::Error::Allocation.to_string()
    {
        ScriptErrorKind::OutOfMemory
    } else {
        otherwise
    };
    let (message, line) = match kind {
        // QuickJS blames the frame that polled the interrupt, not where the time went.
        ScriptErrorKind::Timeout => (limits.timeout_message(), None),
        _ => (message, line),
    };
    ScriptError::new(kind, Language::JavaScript, line, message)
}

/// Message and script line of a thrown value.
fn describe(thrown: &Value<'_>) -> (String, Option<u32>) {
    let Some(exception) = thrown.as_exception() else {
        let text = thrown
            .get::<Coerced<String>>()
            .map(|c| c.0)
            .unwrap_or_else(|_| format!("uncaught {}", thrown.type_name()));
        return (text, None);
    };
    let name: Option<String> = exception.get("name").ok();
    let message = exception.message().unwrap_or_default();
    let line = exception
        .stack()
        .and_then(|stack| line_after(&stack, LINE_MARKER))
        .or_else(|| exception.get::<_, Option<u32>>("lineNumber").ok().flatten());
    let message = match name {
        Some(name) if !name.is_empty() => format!("{name}: {message}"),
        _ => message,
    };
    (message, line)
}
