//! The chat database file: opening it in WAL mode, the versioned schema, and migrations.
//!
//! Same scheme as the sessions database: the version lives in `meta` (`schema_version`);
//! `MIGRATIONS` holds at index `n` the step from version `n` to `n + 1` (0 is an empty
//! file); a file from a newer Sextant, or a file with other tables and no version, is
//! refused rather than guessed at.
//!
//! Tables (version 1, and what version 2 adds):
//!
//! - `chats`: id, title, creation time (Unix ms). The title is a label of the chat, not
//!   part of the conversation, so renaming changes this row and logs no event.
//! - `events`: (chat, seq) → time, kind, JSON payload. Triggers make the table
//!   append-only: an update always fails, and a delete fails unless its chat is already
//!   gone (deleting a whole chat cascades to its events).
//! - v2 `chats.project`: the project file the chat was started in (NULL: none), the
//!   archive's visibility boundary.
//! - v2 `archive_docs` (one row per event: chat, seq, time, kind) and `archive_fts` (FTS5,
//!   contentless, its rowid the doc's; the terms pre-tokenised by the retrieval engine's
//!   tokenizer): the full-text index of every chat, written in the append's transaction
//!   and emptied of a chat in its delete's (a trigger). `meta.archive_generation` counts
//!   every change to it; `meta.install_key` (random, 32 bytes hex) signs search cursors and
//!   derives each chat's envelope nonce.
//! - v3 `archive_docs.surface` (`current`, `shadowed`, `log_only`; NULL: not yet labelled)
//!   and `chats.labelled_seq`: each event's surface label as the fold gives it, kept so a
//!   search filters by surface in SQL. A chat's labels are valid while its log ends at
//!   `labelled_seq`; the first search after it grows folds it again. `meta.labels_version`
//!   names the fold the labels came from: a build whose fold labels differently relabels
//!   every chat.
//! - v4 `archive_result_sets`: a search's ranked matches, for its next pages (an hour).
//! - v5 `meta.chats_deleted`: how many chats were ever deleted (a trigger counts them), so
//!   a handle's kept logs are dropped when an id may have been reused.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::engine::chatlog::ChatLogError;

/// The newest schema this build reads and writes: one version per migration step, so a
/// step cannot be added without the version that makes older files take it.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const V1: &str = r#"
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE chats (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    created_unix_ms INTEGER NOT NULL
);
CREATE TABLE events (
    chat INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    unix_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (chat, seq)
) WITHOUT ROWID;
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'chat events are append-only');
END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
WHEN EXISTS (SELECT 1 FROM chats WHERE id = OLD.chat)
BEGIN
    SELECT RAISE(ABORT, 'chat events are append-only; delete the whole chat instead');
END;
"#;

const V2: &str = r#"
ALTER TABLE chats ADD COLUMN project TEXT;
CREATE INDEX chats_by_project ON chats(project);
CREATE TABLE archive_docs (
    rowid INTEGER PRIMARY KEY,
    chat INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    unix_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    UNIQUE (chat, seq)
);
-- The same tokenizer settings as the memory's index: terms arrive pre-tokenised, `_` joins
-- a code or path token.
CREATE VIRTUAL TABLE archive_fts USING fts5(
    terms, content='', contentless_delete=1,
    tokenize = "unicode61 remove_diacritics 0 categories 'L* N* Co M*' tokenchars '_'"
);
-- A chat leaves the index in its own delete's transaction (the docs go by cascade).
CREATE TRIGGER archive_forget_chat BEFORE DELETE ON chats
BEGIN
    DELETE FROM archive_fts WHERE rowid IN (SELECT rowid FROM archive_docs WHERE chat = OLD.id);
    UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'archive_generation';
END;
INSERT INTO meta (key, value) VALUES ('archive_generation', '0');
"#;

// Surface labels kept with the index: written by the search that first needs them (a fold
// of the chat), valid while the chat's log is no longer than `labelled_seq`.
const V3: &str = r#"
ALTER TABLE archive_docs ADD COLUMN surface TEXT;
ALTER TABLE chats ADD COLUMN labelled_seq INTEGER NOT NULL DEFAULT 0;
"#;

// The ranked matches of a search whose first page had a next one: the next pages go on in
// this order, so appends never invalidate a cursor (kept an hour). `IF NOT EXISTS`: builds
// from before the version was derived from the steps created this table in files they
// labelled version 3.
const V4: &str = r#"
CREATE TABLE IF NOT EXISTS archive_result_sets (
    id INTEGER PRIMARY KEY,
    made_unix_ms INTEGER NOT NULL,
    request TEXT NOT NULL,
    ranked BLOB NOT NULL
);
"#;

// Chats deleted so far, by any connection. A deleted chat's id can be taken by the next
// chat, so a handle that keeps chats' logs read (`ChatLog`) forgets them when this moves.
const V5: &str = r#"
INSERT INTO meta (key, value) VALUES ('chats_deleted', '0');
CREATE TRIGGER count_deleted_chats AFTER DELETE ON chats
BEGIN
    UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'chats_deleted';
END;
"#;

/// Step `n` brings a database from version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5];

/// Opens (creating if needed) and migrates the database at `path`.
pub fn open(path: &Path) -> Result<Connection, ChatLogError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let opened =
        Connection::open_with_flags(path, flags).and_then(|conn| configure(&conn).map(|()| conn));
    let mut conn = opened.map_err(|e| ChatLogError::from_sql(e, path))?;
    migrate(&mut conn, path)?;
    crate::engine::chatlog::archive::check_labels_version(&conn)
        .map_err(|e| ChatLogError::from_sql(e, path))?;
    Ok(conn)
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    // Two handles (the chat's writer and a browser, or two windows) wait for each other's
    // transactions instead of failing at once.
    conn.busy_timeout(Duration::from_secs(10))?;
    // WAL: readers never block the appender, and a crash loses at most the transaction in
    // flight; NORMAL sync is crash-safe for the application in WAL mode.
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(mode, "the chat database could not switch to WAL mode");
    }
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")?;
    // The archive's ranking reads every match's document size: with SQLite's default 2 MiB
    // page cache a 100 k-event archive re-reads its pages from the file on every search.
    // Mapping the file (reads become memory loads) and a larger cache keep them resident;
    // both are bounds, not allocations, so a small log costs nothing.
    conn.execute_batch("PRAGMA cache_size = -32768; PRAGMA mmap_size = 268435456;")?;
    Ok(())
}

/// The schema version recorded in the file; 0 for an empty file.
fn version(conn: &Connection, path: &Path) -> Result<i64, ChatLogError> {
    let sql = |e| ChatLogError::from_sql(e, path);
    let has_meta: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
            [],
            |r| r.get(0),
        )
        .map_err(sql)?;
    let foreign = || ChatLogError::Foreign {
        path: path.display().to_string(),
    };
    if !has_meta {
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
                [],
                |r| r.get(0),
            )
            .map_err(sql)?;
        return if tables == 0 { Ok(0) } else { Err(foreign()) };
    }
    let value: Option<String> = conn
        .query_row(
            "SELECT CAST(value AS TEXT) FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    value
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|v| *v >= 0)
        .ok_or_else(foreign)
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), ChatLogError> {
    let sql = |e| ChatLogError::from_sql(e, path);
    // IMMEDIATE: two handles opening a fresh file at once cannot both create the schema.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    let found = version(&tx, path)?;
    if found > SCHEMA_VERSION {
        return Err(ChatLogError::TooNew {
            path: path.display().to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    for (version, step) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(step).map_err(sql)?;
        if version + 1 == 2 {
            // What SQL alone cannot do: index the chats logged before the archive existed,
            // and make this install's key.
            crate::engine::chatlog::archive::index_all(&tx).map_err(sql)?;
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('install_key', ?1)",
                [crate::engine::chatlog::archive::new_install_key()],
            )
            .map_err(sql)?;
        }
    }
    tx.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?1)",
        [SCHEMA_VERSION.to_string()],
    )
    .map_err(sql)?;
    tx.commit().map_err(sql)?;
    Ok(())
}
