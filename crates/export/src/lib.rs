//! A recorded session in the formats other tools open, for people whose analysis lives
//! outside Sextant:
//!
//! - **MCAP** ([`Format::Mcap`]), which Foxglove Studio and PlotJuggler open: one channel
//!   per group with the parsed values as JSON messages under a JSON Schema, one channel per
//!   source with its raw chunks, the session's details as metadata and its project as an
//!   attachment.
//! - **Parquet** ([`Format::Parquet`]), which pandas, polars, DuckDB and Spark read: one row
//!   per frame, a `time` column (TIMESTAMP, µs, UTC), `elapsed_s` as in the CSV export, and
//!   one column per dataset – DOUBLE, or UTF-8 text when the dataset ever held text that is
//!   not a number.
//!
//! Both read the session in a stream (memory does not grow with its length) and write
//! beside the target, renamed into place only when complete: a failed export never leaves
//! half a file under the name, nor truncates the file that was there.
//!
//! A live run is recorded as MCAP, as it comes, by [`McapSink`], in the same layout.
//!
//! The CSV export stays in `sessions` (the live export writes the same CSV); this crate
//! owns the formats that bring dependencies of their own.

mod layout;
mod live_mcap;
mod mcap_log;
mod to_mcap;
mod to_parquet;

use std::io::{Seek, Write};
use std::path::Path;

use sextant_sessions::{SessionError, SessionId, SessionStore};

pub use layout::{Column, Layout};
pub use live_mcap::{LiveMcapStatus, McapSink, LIVE_MCAP_QUEUE_BYTES, LIVE_MCAP_QUEUE_ITEMS};

/// A format a session exports to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Mcap,
    Parquet,
}

impl Format {
    /// The file name extension people expect.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Mcap => "mcap",
            Format::Parquet => "parquet",
        }
    }

    /// Whether `head`, a file's first bytes, starts like a file of this format.
    pub fn recognises(self, head: &[u8]) -> bool {
        match self {
            Format::Mcap => head.starts_with(to_mcap::MAGIC),
            Format::Parquet => head.starts_with(b"PAR1"),
        }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exported {
    /// Frames (rows of parsed values).
    pub frames: u64,
    /// Raw chunks (MCAP only).
    pub chunks: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("could not write the export: {}; a file already at that path is unchanged", sextant_fsutil::WriteProblem::from_io(.0))]
    Io(#[from] std::io::Error),
    #[error("could not write the MCAP file: {0}")]
    Mcap(String),
    #[error("could not write the Parquet file: {0}")]
    Parquet(String),
}

/// Writes session `id` of the database at `db` to `path` as `format`.
pub fn export_file(
    db: &Path,
    id: SessionId,
    format: Format,
    path: &Path,
) -> Result<Exported, ExportError> {
    let store = SessionStore::open(db)?;
    let mut file = sextant_fsutil::StreamedFile::create(path)?;
    let partial = sextant_fsutil::StreamedFile::partial_path(path)?;
    let written = export_into(&store, id, format, file.file());
    let finished = written.and_then(|exported| {
        file.finish()?;
        Ok(exported)
    });
    if finished.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    finished
}

/// Writes session `id` of `store` into `out` as `format`: a file, or a buffer a page
/// downloads. What `out` held is overwritten from its current position.
pub fn export_into<W: Write + Seek + Send>(
    store: &SessionStore,
    id: SessionId,
    format: Format,
    out: &mut W,
) -> Result<Exported, ExportError> {
    let layout = Layout::of(store, id)?;
    match format {
        Format::Mcap => to_mcap::write(store, id, &layout, out),
        Format::Parquet => to_parquet::write(store, id, &layout, out),
    }
}

/// A `for_each_frame` callback's way out with an error of this crate: the store's walk
/// stops on any error, and the real one is kept here.
struct Stop(Option<ExportError>);

impl Stop {
    fn new() -> Stop {
        Stop(None)
    }

    /// Keeps `e` and returns the error that stops the walk.
    fn stop(&mut self, e: ExportError) -> SessionError {
        self.0 = Some(e);
        SessionError::Invalid("the export stopped".into())
    }

    /// The walk's result, with the kept error in place of the stopping one.
    fn result<T>(self, walked: Result<T, SessionError>) -> Result<T, ExportError> {
        match (walked, self.0) {
            (_, Some(e)) => Err(e),
            (Ok(t), None) => Ok(t),
            (Err(e), None) => Err(e.into()),
        }
    }
}

/// `wanted`, or `wanted (2)`, `wanted (3)`… – the first name not `taken`: column and topic
/// names must be unique in a file, titles need not be in a project.
fn unique(wanted: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(wanted) {
        return wanted.to_string();
    }
    (2..)
        .map(|n| format!("{wanted} ({n})"))
        .find(|k| !taken(k))
        .unwrap_or_default()
}
