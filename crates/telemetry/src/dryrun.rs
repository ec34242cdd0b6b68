//! Read-only previews used by the editor and the assistant's auto-verify: compile a parser,
//! run it on sample frames, run a transform on sample values, run a whole project on
//! sample bytes. Nothing here touches the caller's project or pipeline; each call builds
//! throwaway state.

use std::sync::Arc;

use sextant_scripting::{Limits, SharedTables};

use crate::decode::decode;
use crate::parse::{build_parser, ParseError};
use crate::pipeline::{Pipeline, PipelineOptions};
use crate::project::{Decoder, ParserConfig, Project, Transform};
use crate::transform::CompiledTransform;
use crate::value::{Rows, Value};
use crate::Timestamp;

/// Limits for previews: short, so a runaway script answers quickly.
pub fn preview_limits() -> Limits {
    Limits {
        timeout: std::time::Duration::from_millis(250),
        memory_bytes: 32 * 1024 * 1024,
        max_consecutive_timeouts: 1,
    }
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

/// Runs a parser on sample frames (each already cut out of the stream).
pub fn run_parser(
    config: &ParserConfig,
    decoder: Decoder,
    frames: &[Vec<u8>],
) -> Result<Vec<FrameOutcome>, ParseError> {
    let mut parser = build_parser(config, preview_limits(), Arc::new(SharedTables::new()))?;
    let mut rows = Rows::new();
    Ok(frames
        .iter()
        .map(|f| match decode(decoder, f) {
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
        })
        .collect())
}

/// Runs a transform on sample values; each result or error in order.
pub fn run_transform(
    transform: &Transform,
    values: &[Value],
) -> Result<Vec<Result<Value, String>>, String> {
    let mut t =
        CompiledTransform::compile(transform, preview_limits(), Arc::new(SharedTables::new()))
            .map_err(|e| e.to_string())?;
    Ok(values
        .iter()
        .map(|v| t.apply(v).map_err(|e| e.to_string()))
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

/// Feeds `bytes` to source `source` of a fresh pipeline built from `project`.
pub fn end_to_end(project: &Project, source: usize, bytes: &[u8]) -> Result<EndToEnd, String> {
    let mut pipeline = Pipeline::with_options(
        project,
        PipelineOptions {
            script_limits: preview_limits(),
        },
    )
    .map_err(|e| e.to_string())?;
    if source >= pipeline.source_count() {
        return Err(format!("the project has no source number {}", source + 1));
    }
    let mut rows = Vec::new();
    pipeline.push(source, Timestamp::default(), bytes, &mut |ev| {
        rows.push(ev.values.to_vec())
    });
    let stats = pipeline.stats(source).cloned().unwrap_or_default();
    Ok(EndToEnd {
        columns: pipeline.datasets().iter().map(|d| d.column()).collect(),
        rows,
        frames: stats.framing.frames,
        checksum_failed: stats.framing.checksum_failed,
        oversize_dropped: stats.framing.oversize_dropped,
        parse_errors: stats.parse_errors + stats.decode_errors,
        last_error: stats.last_error,
    })
}
