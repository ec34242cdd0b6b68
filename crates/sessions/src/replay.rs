//! Replaying a recorded session: its raw chunks for one source, in order, with their
//! recorded timestamps.
//!
//! This module only says where the records come from; the pacing, pause, step, seek and
//! speed are the device layer's replay link (the workspace runtime puts the two together,
//! so this crate needs no device driver). Opening reads the times of the source's chunks
//! (8 bytes each, and a locator per block); a chunk's bytes are read, a block at a time,
//! when it is due.
//!
//! One time base for a session: its times count from its first recorded frame, in a replay
//! as in its CSV export (which counts from its first row), so the replay's axis and the
//! exported file read the same seconds. A chunk's time is its recorded time minus that
//! origin (the same for every source of the session, so their order and spacing are kept);
//! a replay through a fresh pipeline reproduces the recorded frames' values exactly.

use bytes::Bytes;
use rusqlite::Connection;
use sextant_telemetry::Timestamp;

use crate::codec::{self, ChunkEntry};
use crate::{schema, SessionError, SessionId};

/// Where a run of the source's chunks is stored.
#[derive(Debug, Clone, Copy)]
struct Stored {
    /// The rowid in `chunk_blocks`, or in `chunks` for a session recorded before blocks.
    rowid: i64,
    block: bool,
    /// The index of its first chunk among the source's chunks.
    first_chunk: usize,
}

/// The block read last: a replay reads its chunks in order, so one block serves ~1 000
/// loads.
struct Loaded {
    index: usize,
    entries: Vec<ChunkEntry>,
    data: Bytes,
}

/// The raw chunks of one source of one session, in order.
pub struct SessionRecords {
    conn: Connection,
    session: SessionId,
    stored: Vec<Stored>,
    /// Each chunk's time from the session's origin (see the module docs).
    times: Vec<u64>,
    /// The recorded time the session's times count from, ns.
    origin: u64,
    loaded: Option<Loaded>,
}

impl SessionRecords {
    pub fn open(
        db: &std::path::Path,
        session: SessionId,
        source: usize,
    ) -> Result<SessionRecords, SessionError> {
        let conn = schema::open_existing(db)?;
        let found: bool = conn.query_row(
            "SELECT count(*) > 0 FROM sessions WHERE id = ?1",
            [session],
            |r| r.get(0),
        )?;
        if !found {
            return Err(SessionError::NotFound(session));
        }
        // The session's first frame, else (no frame was parsed) its first chunk.
        let origin: i64 = conn.query_row(
            "SELECT COALESCE(s.first_elapsed_ns, \
                    (SELECT MIN(t) FROM ( \
                        SELECT MIN(elapsed_ns) AS t FROM chunks WHERE session = s.id \
                        UNION ALL \
                        SELECT MIN(min_elapsed_ns) FROM chunk_blocks WHERE session = s.id)), \
                    0) \
             FROM sessions s WHERE s.id = ?1",
            [session],
            |r| r.get(0),
        )?;
        let origin = origin.max(0) as u64;
        let (mut stored, mut times) = (Vec::new(), Vec::new());
        let corrupt = |detail: String| SessionError::Corrupt { session, detail };
        {
            // A session has rows in one of the two tables: `chunks` if recorded before
            // schema version 2.
            let mut stmt = conn.prepare(
                "SELECT rowid, elapsed_ns FROM chunks WHERE session = ?1 AND source = ?2 ORDER BY rowid",
            )?;
            let mut rows = stmt.query(rusqlite::params![session, source as i64])?;
            while let Some(row) = rows.next()? {
                stored.push(Stored {
                    rowid: row.get(0)?,
                    block: false,
                    first_chunk: times.len(),
                });
                times.push((row.get::<_, i64>(1)?.max(0) as u64).saturating_sub(origin));
            }
            // Only the small `times` column is read here; the bytes wait until played.
            let mut stmt = conn.prepare(
                "SELECT rowid, first_elapsed_ns, first_unix_ns, byte_count, times FROM chunk_blocks \
                 WHERE session = ?1 AND source = ?2 ORDER BY rowid",
            )?;
            let mut rows = stmt.query(rusqlite::params![session, source as i64])?;
            while let Some(row) = rows.next()? {
                let first = (row.get::<_, i64>(1)? as u64, row.get::<_, i64>(2)?);
                let data_len = row.get::<_, i64>(3)?.max(0) as usize;
                let entries = codec::chunk_entries(
                    row.get_ref(4)?
                        .as_blob()
                        .map_err(|e| corrupt(e.to_string()))?,
                    first,
                    data_len,
                )
                .map_err(corrupt)?;
                stored.push(Stored {
                    rowid: row.get(0)?,
                    block: true,
                    first_chunk: times.len(),
                });
                times.extend(entries.iter().map(|c| c.elapsed_ns.saturating_sub(origin)));
            }
        }
        Ok(SessionRecords {
            conn,
            session,
            stored,
            times,
            origin,
            loaded: None,
        })
    }
}

impl SessionRecords {
    /// Capture time of every chunk, ns from the session's first frame, in play order.
    pub fn times(&self) -> &[u64] {
        &self.times
    }

    /// The bytes and timestamps of chunk `i` (`i < times().len()`).
    pub fn load(&mut self, i: usize) -> Result<(Bytes, Timestamp), SessionError> {
        let index = self.stored.partition_point(|s| s.first_chunk <= i) - 1;
        let stored = self.stored[index];
        let gone = || SessionError::Invalid("the session was deleted while replaying it".into());
        let (bytes, elapsed_ns, unix_ns) = if stored.block {
            if self.loaded.as_ref().is_none_or(|l| l.index != index) {
                self.loaded = Some(self.load_block(index, stored.rowid)?.ok_or_else(gone)?);
            }
            let loaded = self.loaded.as_ref().expect("loaded just above");
            let c = loaded
                .entries
                .get(i - stored.first_chunk)
                .ok_or_else(gone)?;
            (
                loaded.data.slice(c.offset..c.offset + c.len),
                c.elapsed_ns,
                c.unix_ns,
            )
        } else {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT bytes, elapsed_ns, unix_ns FROM chunks WHERE rowid = ?1")?;
            let row = stmt.query_row([stored.rowid], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?, r.get(2)?))
            });
            match row {
                Ok((bytes, elapsed_ns, unix_ns)) => {
                    (Bytes::from(bytes), elapsed_ns.max(0) as u64, unix_ns)
                }
                Err(rusqlite::Error::QueryReturnedNoRows) => return Err(gone()),
                Err(e) => return Err(SessionError::Sql(e)),
            }
        };
        Ok((
            bytes,
            Timestamp {
                elapsed_ns: elapsed_ns.saturating_sub(self.origin),
                unix_ns,
            },
        ))
    }

    fn load_block(&self, index: usize, rowid: i64) -> Result<Option<Loaded>, SessionError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT session, first_elapsed_ns, first_unix_ns, times, data FROM chunk_blocks WHERE rowid = ?1",
        )?;
        let row = stmt.query_row([rowid], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                (r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)?),
                r.get::<_, Vec<u8>>(3)?,
                r.get::<_, Vec<u8>>(4)?,
            ))
        });
        let (session, first, times, data) = match row {
            // A rowid SQLite gave to a newer session's block once this one's was deleted.
            Ok((session, ..)) if session != self.session => return Ok(None),
            Ok(row) => row,
            Err(rusqlite::Error::QueryReturnedNoRows) => return Ok(None),
            Err(e) => return Err(SessionError::Sql(e)),
        };
        let entries = codec::chunk_entries(&times, first, data.len())
            .map_err(|detail| SessionError::Corrupt { session, detail })?;
        Ok(Some(Loaded {
            index,
            entries,
            data: Bytes::from(data),
        }))
    }
}
