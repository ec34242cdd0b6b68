//! The database file: opening it in WAL mode, the versioned schema, and migrations.
//!
//! The schema version lives in the `meta` table (`schema_version`). [`MIGRATIONS`] holds,
//! at index `n`, the step from version `n` to `n + 1` (version 0 is an empty file), so a
//! database is brought up to date step by step in one transaction. A file from a newer
//! Sextant is refused rather than guessed at: its rows may mean something this build does
//! not know.
//!
//! Tables (version 1):
//!
//! - `sessions`: id, title, wall-clock start and end (Unix ns; the end stays NULL until
//!   the recording closes cleanly), the embedded project JSON, and counters the writer
//!   keeps current with every batch (chunks, bytes, frames, drops, first and last elapsed
//!   time), so listing never scans the big tables.
//! - `session_tags`: (session, tag).
//! - `datasets`: the CSV columns of a session, in order (`Group/Dataset`, id, units).
//! - `chunks`: raw bytes per source with elapsed and Unix timestamps.
//! - `frames`: parsed values per frame ([`crate::codec`]), with elapsed time and source.
//!
//! Version 2 adds blocks ([`crate::codec`] has their encodings):
//!
//! - `frame_blocks`: up to 1 024 parsed frames a row, with the first frame's time (what the
//!   block's deltas count from), the earliest and latest time in it, and its frame count.
//! - `chunk_blocks`: up to 1 024 raw chunks of one source a row, with the first chunk's
//!   times, the earliest and latest elapsed time, the chunk and byte counts, the per-chunk
//!   times (`times`) and the bytes (`data`).
//!
//! A recording at 100 000 frames/s wrote 100 000 rows (and as many index entries) a second
//! into `frames`; a message source (CAN, UDP) as many into `chunks`. Blocks pay that cost
//! once per block. Sessions recorded before version 2 keep their `frames` and `chunks`
//! rows, which are still read; new ones are written as blocks.
//!
//! Rows of each table are played and exported in rowid order, which is the order the
//! pipeline saw them in.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::SessionError;

/// The newest schema this build reads and writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const V1: &str = r#"
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    started_unix_ns INTEGER NOT NULL,
    ended_unix_ns INTEGER,
    project TEXT NOT NULL,
    first_elapsed_ns INTEGER,
    last_elapsed_ns INTEGER,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    byte_count INTEGER NOT NULL DEFAULT 0,
    frame_count INTEGER NOT NULL DEFAULT 0,
    dropped_chunks INTEGER NOT NULL DEFAULT 0,
    dropped_frames INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE session_tags (
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (session, tag)
) WITHOUT ROWID;
CREATE TABLE datasets (
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    dataset_id TEXT NOT NULL,
    column_name TEXT NOT NULL,
    units TEXT NOT NULL,
    PRIMARY KEY (session, position)
) WITHOUT ROWID;
CREATE TABLE chunks (
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    source INTEGER NOT NULL,
    elapsed_ns INTEGER NOT NULL,
    unix_ns INTEGER NOT NULL,
    bytes BLOB NOT NULL
);
CREATE INDEX chunks_by_source ON chunks (session, source);
CREATE TABLE frames (
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    elapsed_ns INTEGER NOT NULL,
    source INTEGER NOT NULL,
    vals BLOB NOT NULL
);
CREATE INDEX frames_by_session ON frames (session);
"#;

const V2: &str = r#"
CREATE TABLE frame_blocks (
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    first_elapsed_ns INTEGER NOT NULL,
    min_elapsed_ns INTEGER NOT NULL,
    max_elapsed_ns INTEGER NOT NULL,
    frame_count INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX frame_blocks_by_session ON frame_blocks (session);
CREATE TABLE chunk_blocks (
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    source INTEGER NOT NULL,
    first_elapsed_ns INTEGER NOT NULL,
    first_unix_ns INTEGER NOT NULL,
    min_elapsed_ns INTEGER NOT NULL,
    max_elapsed_ns INTEGER NOT NULL,
    chunk_count INTEGER NOT NULL,
    byte_count INTEGER NOT NULL,
    times BLOB NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX chunk_blocks_by_source ON chunk_blocks (session, source);
"#;

/// Step `n` brings a database from version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[V1, V2];

/// Whether `path` holds a sessions database: a regular file in SQLite's format with the
/// sessions tables (read only; a file that is not one is left untouched).
pub fn is_sessions_database(path: &Path) -> bool {
    let regular = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
    let sqlite = || {
        use std::io::Read;
        let mut magic = [0u8; 16];
        std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok_and(|()| &magic == b"SQLite format 3\0")
    };
    if !regular || !sqlite() {
        return false;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let Ok(conn) = Connection::open_with_flags(path, flags) else {
        return false;
    };
    let tables: rusqlite::Result<i64> = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' \
         AND name IN ('meta', 'sessions', 'chunks', 'frames')",
        [],
        |row| row.get(0),
    );
    tables.is_ok_and(|n| n == 4)
}

/// Opens (creating if needed) and migrates the database at `path`.
pub fn open(path: &Path) -> Result<Connection, SessionError> {
    open_with(path, OpenFlags::SQLITE_OPEN_CREATE)
}

/// Opens and migrates an existing database; a missing file is an error, not a new file.
pub fn open_existing(path: &Path) -> Result<Connection, SessionError> {
    open_with(path, OpenFlags::empty())
}

fn open_with(path: &Path, extra: OpenFlags) -> Result<Connection, SessionError> {
    let shown = || path.display().to_string();
    // A symbolic link is never followed: the file named is the file written.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW
        | extra;
    let mut conn =
        Connection::open_with_flags(path, flags).map_err(|source| SessionError::Open {
            path: shown(),
            source,
        })?;
    configure(&conn).map_err(|source| SessionError::Open {
        path: shown(),
        source,
    })?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    // The writer thread, the store and replays each hold a connection; a writer waits for
    // another's transaction instead of failing at once.
    conn.busy_timeout(Duration::from_secs(10))?;
    // WAL: readers (browse, export, replay) never block the recorder, and a crash loses at
    // most the transaction in flight. NORMAL sync is crash-safe for the application in WAL
    // mode; only a power cut can lose the last commits.
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(mode, "the sessions database could not switch to WAL mode");
    }
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")?;
    Ok(())
}

/// The schema version recorded in the file; 0 for an empty file.
pub fn version(conn: &Connection, path: &Path) -> Result<i64, SessionError> {
    let has_meta: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
        [],
        |r| r.get(0),
    )?;
    if !has_meta {
        let tables: i64 = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
            [],
            |r| r.get(0),
        )?;
        return if tables == 0 {
            Ok(0)
        } else {
            Err(SessionError::Foreign {
                path: path.display().to_string(),
            })
        };
    }
    let value: Option<String> = conn
        .query_row(
            "SELECT CAST(value AS TEXT) FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    value
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|v| *v >= 0)
        .ok_or_else(|| SessionError::Foreign {
            path: path.display().to_string(),
        })
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), SessionError> {
    // IMMEDIATE: two processes opening a fresh file at once cannot both create the schema.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = version(&tx, path)?;
    if found > SCHEMA_VERSION {
        return Err(SessionError::TooNew {
            path: path.display().to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    for step in &MIGRATIONS[found as usize..] {
        tx.execute_batch(step)?;
    }
    tx.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?1)",
        [SCHEMA_VERSION.to_string()],
    )?;
    tx.commit()?;
    Ok(())
}
