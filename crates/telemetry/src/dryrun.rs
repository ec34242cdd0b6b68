//! Read-only previews used by the editor and the assistant's auto-verify: compile a parser,
//! run it on sample frames, run a transform on sample values, run a whole project on
//! sample bytes. Nothing here touches the caller's project or pipeline; each call builds
//! throwaway state.
//!
//! A preview runs a user's script as often as it is given frames, so each is bounded twice:
//! every call by [`preview_limits`], and all of a preview's calls together by
//! [`PREVIEW_BUDGET`] (a [`Limits::deadline`]). What the budget leaves no time for is not
//! run and says so; callers take at most [`MAX_PREVIEW_FRAMES`] frames or values.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sextant_scripting::{Limits, SharedTables};

use crate::decode::decode;
use crate::framing::{Framer, FramerConfig};
use crate::parse::{build_parser, ParseError};
use crate::pipeline::{Pipeline, PipelineOptions};
use crate::project::{Decoder, ParserConfig, Project, Transform};
use crate::transform::CompiledTransform;
use crate::value::{Rows, Value};
use crate::Timestamp;

/// The most sample frames a parser dry run takes, values a transform dry run takes, and
/// frames an end-to-end run's bytes may hold.
pub const MAX_PREVIEW_FRAMES: usize = 1000;

/// The script time one preview may use in all, compiling included; what is left when it
/// runs out is not run.
pub const PREVIEW_BUDGET: Duration = Duration::from_secs(2);

/// Limits for previews: short, so a runaway script answers quickly.
pub fn preview_limits() -> Limits {
    Limits {
        timeout: std::time::Duration::from_millis(250),
        memory_bytes: 32 * 1024 * 1024,
        max_consecutive_timeouts: 1,
        deadline: None,
    }
}

/// [`preview_limits`] whose calls together end within `budget` from now, and that end.
fn budgeted(budget: Duration) -> (Limits, Instant) {
    let deadline = Instant::now() + budget;
    let limits = Limits {
        deadline: Some(deadline),
        ..preview_limits()
    };
    (limits, deadline)
}

/// What each of the `items` (frames, values) the budget left no time for says.
fn not_run(budget: Duration, items: &str) -> String {
    format!(
        "not run: this dry run used up its {} of script time on the {items} before; \
         dry-run fewer {items} at a time",
        seconds(budget)
    )
}

/// `2 s`, `0.5 s`.
fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// Compiles a parser; `Err` carries the message and, for scripts, the line.
pub fn compile_parser(config: &ParserConfig) -> Result<(), ParseError> {
    build_parser(config, preview_limits(), Arc::new(SharedTables::new())).map(|_| ())
}

/// The outcome of one sample frame.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameOutcome {
    Rows(Vec<Vec<Value>>),
    Error { message: String, line: Option<u32> },
}

/// Runs a parser on sample frames (each already cut out of the stream), within
/// [`PREVIEW_BUDGET`].
pub fn run_parser(
    config: &ParserConfig,
    decoder: Decoder,
    frames: &[Vec<u8>],
) -> Result<Vec<FrameOutcome>, ParseError> {
    run_parser_within(config, decoder, frames, PREVIEW_BUDGET)
}

/// [`run_parser`] with `budget` of script time in all: each frame left when it is used up
/// is an error saying it was not run.
pub fn run_parser_within(
    config: &ParserConfig,
    decoder: Decoder,
    frames: &[Vec<u8>],
    budget: Duration,
) -> Result<Vec<FrameOutcome>, ParseError> {
    let (limits, deadline) = budgeted(budget);
    let mut parser = build_parser(config, limits, Arc::new(SharedTables::new()))?;
    let mut rows = Rows::new();
    Ok(frames
        .iter()
        .map(|f| {
            if Instant::now() >= deadline {
                return FrameOutcome::Error {
                    message: not_run(budget, "frames"),
                    line: None,
                };
            }
            match decode(decoder, f) {
                Err(e) => FrameOutcome::Error {
                    message: e.to_string(),
                    line: None,
                },
                Ok(d) => {
                    rows.clear();
                    match parser.parse(&d, &mut rows) {
                        Ok(()) => FrameOutcome::Rows(rows.iter().map(|r| r.to_vec()).collect()),
                        Err(e) => FrameOutcome::Error {
                            message: e.message,
                            line: e.line,
                        },
                    }
                }
            }
        })
        .collect())
}

/// Runs a transform on sample values; each result or error in order, within
/// [`PREVIEW_BUDGET`].
pub fn run_transform(
    transform: &Transform,
    values: &[Value],
) -> Result<Vec<Result<Value, String>>, String> {
    run_transform_within(transform, values, PREVIEW_BUDGET)
}

/// [`run_transform`] with `budget` of script time in all: each value left when it is used
/// up is an error saying it was not run.
pub fn run_transform_within(
    transform: &Transform,
    values: &[Value],
    budget: Duration,
) -> Result<Vec<Result<Value, String>>, String> {
    let (limits, deadline) = budgeted(budget);
    let mut t = CompiledTransform::compile(transform, limits, Arc::new(SharedTables::new()))
        .map_err(|e| e.to_string())?;
    Ok(values
        .iter()
        .map(|v| {
            if Instant::now() >= deadline {
                return Err(not_run(budget, "values"));
            }
            t.apply(v).map_err(|e| e.to_string())
        })
        .collect())
}

/// What a whole project makes of sample bytes on one source.
#[derive(Debug, Clone, PartialEq)]
pub struct EndToEnd {
    /// Column names (`Group/Dataset`).
    pub columns: Vec<String>,
    /// One row of final values per produced frame.
    pub rows: Vec<Vec<Value>>,
    pub frames: u64,
    pub checksum_failed: u64,
    pub oversize_dropped: u64,
    pub parse_errors: u64,
    pub last_error: Option<String>,
}

/// How many frames source `source` of `project` cuts out of `bytes` (checksums verified,
/// over-long frames dropped): what an end-to-end run of them would parse. Runs no script.
pub fn count_frames(project: &Project, source: usize, bytes: &[u8]) -> Result<usize, String> {
    let s = project
        .sources
        .get(source)
        .ok_or_else(|| format!("the project has no source number {}", source + 1))?;
    let config = FramerConfig::from_project(&s.framing).map_err(|e| e.to_string())?;
    let mut frames = 0;
    Framer::new(config).push(bytes, &mut |_| frames += 1);
    Ok(frames)
}

/// Feeds `bytes` to source `source` of a fresh pipeline built from `project`, within
/// [`PREVIEW_BUDGET`].
pub fn end_to_end(project: &Project, source: usize, bytes: &[u8]) -> Result<EndToEnd, String> {
    end_to_end_within(project, source, bytes, PREVIEW_BUDGET)
}

/// [`end_to_end`] with `budget` of script time in all. Once it is used up, every script
/// call is cut short, the rows are those made before, and `last_error` says so.
pub fn end_to_end_within(
    project: &Project,
    source: usize,
    bytes: &[u8],
    budget: Duration,
) -> Result<EndToEnd, String> {
    let (script_limits, deadline) = budgeted(budget);
    let mut pipeline = Pipeline::with_options(project, PipelineOptions { script_limits })
        .map_err(|e| e.to_string())?;
    if source >= pipeline.source_count() {
        return Err(format!("the project has no source number {}", source + 1));
    }
    let mut rows = Vec::new();
    pipeline.push(source, Timestamp::default(), bytes, &mut |ev| {
        if Instant::now() < deadline {
            rows.push(ev.values.to_vec())
        }
    });
    let stats = pipeline.stats(source).cloned().unwrap_or_default();
    let last_error = if Instant::now() >= deadline {
        Some(format!(
            "this dry run ran out of its {} of script time: the {} rows made before that are \
             shown, and the frames after it were cut short; dry-run fewer bytes at a time",
            seconds(budget),
            rows.len()
        ))
    } else {
        stats.last_error
    };
    Ok(EndToEnd {
        columns: pipeline.datasets().iter().map(|d| d.column()).collect(),
        rows,
        frames: stats.framing.frames,
        checksum_failed: stats.framing.checksum_failed,
        oversize_dropped: stats.framing.oversize_dropped,
        parse_errors: stats.parse_errors + stats.decode_errors,
        last_error,
    })
}
