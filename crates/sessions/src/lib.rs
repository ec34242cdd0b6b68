//! Session recordings: everything a live run delivered, kept in one SQLite database so it
//! can be browsed, tagged, exported and replayed later.
//!
//! A session holds the project it was recorded with (embedded as JSON), every raw chunk
//! each source delivered (with its timestamps, so a replay reproduces the run bit for bit),
//! and every parsed frame (the final value of every dataset, so a CSV export needs no
//! re-parsing).
//!
//! - [`schema`] owns the database file: WAL mode, the versioned schema and its migrations.
//! - [`writer`] owns recording: a [`SessionWriter`] on a thread of its own, fed through a
//!   bounded queue that drops and counts instead of blocking, committing in batches; its
//!   [`SessionSink`] plugs into a `Wiring` and records chunks and frames in step.
//! - [`recorder`] is a slot a live wiring carries from the start, so recording can begin
//!   and end while sources keep running.
//! - [`store`] owns browsing and editing: list, get, tag, rename, delete, CSV export.
//! - [`replay`] reads a session's raw chunks back, in order, for a replay.
//! - [`codec`] is the compact encoding of a frame's values.
//!
//! Architecture invariant: recording never stalls ingestion. The pipeline thread only
//! queues; a full queue drops the row and counts it, and the count is stored with the
//! session.

pub mod codec;
pub mod recorder;
pub mod replay;
pub mod schema;
pub mod store;
pub mod writer;

pub use recorder::Recorder;
pub use replay::SessionRecords;
pub use schema::{is_sessions_database, SCHEMA_VERSION};
pub use store::{SessionDetail, SessionStore, SessionSummary, Share, SourceSummary};
pub use writer::{
    Feed, NewSession, SessionSink, SessionWriter, WriterOptions, WriterReport, WriterStats,
};

pub use sextant_fsutil::{WriteProblem, WriteProblemKind};

/// Classifies a failed SQLite write the way every write is told to a person.
pub fn write_problem(e: &rusqlite::Error) -> WriteProblem {
    use rusqlite::ErrorCode;
    let kind = match e.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => WriteProblemKind::DiskFull,
        Some(ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::CannotOpen) => {
            WriteProblemKind::Denied
        }
        _ => WriteProblemKind::Other,
    };
    WriteProblem {
        kind,
        detail: e.to_string(),
    }
}

/// A session's id in its database.
pub type SessionId = i64;

/// Why a sessions operation failed. Each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("could not open the sessions database {path}: {source}; check that the folder exists and is writable")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error("the sessions database {path} was written by a newer Sextant (schema version {found}; this one reads up to {supported}); update Sextant or choose another database file")]
    TooNew {
        path: String,
        found: i64,
        supported: i64,
    },
    #[error("{path} is not a Sextant sessions database (it has other tables and no schema version); choose another file")]
    Foreign { path: String },
    #[error("no session {0} in this database; list the sessions to see which exist")]
    NotFound(SessionId),
    #[error("{0}")]
    Invalid(String),
    #[error("the writer of session {0} stopped unexpectedly; the rows it committed before are kept, record again to continue")]
    WriterPanicked(SessionId),
    #[error("session {session} has a damaged frame row ({detail}); the database file is corrupt")]
    Corrupt { session: SessionId, detail: String },
    #[error(
        "sessions database error: {0}; if it persists, check free disk space and file permissions"
    )]
    Sql(#[from] rusqlite::Error),
    #[error("could not write the export: {}; a file already at that path is unchanged", WriteProblem::from_io(.0))]
    Io(#[from] std::io::Error),
}
