//! Replaying a recorded session: its raw chunks for one source, in order, with their
//! recorded timestamps.
//!
//! This module only says where the records come from; the pacing, pause, step, seek and
//! speed are the device layer's replay link (the workspace runtime puts the two together,
//! so this crate needs no device driver). Opening indexes the source's chunks (rowid and
//! elapsed time, 16 bytes each); a chunk's bytes are read when it is due.
//!
//! One time base for a session: its times count from its first recorded frame, in a replay
//! as in its CSV export (which counts from its first row), so the replay's axis and the
//! exported file read the same seconds. A chunk's time is its recorded time minus that
//! origin (the same for every source of the session, so their order and spacing are kept);
//! a replay through a fresh pipeline reproduces the recorded frames' values exactly.

use bytes::Bytes;
use rusqlite::Connection;
use sextant_telemetry::Timestamp;

use crate::{schema, SessionError, SessionId};

/// The raw chunks of one source of one session, indexed by rowid.
pub struct SessionRecords {
    conn: Connection,
    rowids: Vec<i64>,
    /// Each chunk's time from the session's origin (see the module docs).
    times: Vec<u64>,
    /// The recorded time the session's times count from, ns.
    origin: u64,
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
                    (SELECT MIN(elapsed_ns) FROM chunks WHERE session = s.id), 0) \
             FROM sessions s WHERE s.id = ?1",
            [session],
            |r| r.get(0),
        )?;
        let origin = origin.max(0) as u64;
        let (rowids, times) = {
            let mut stmt = conn.prepare(
                "SELECT rowid, elapsed_ns FROM chunks WHERE session = ?1 AND source = ?2 ORDER BY rowid",
            )?;
            let mut rows = stmt.query(rusqlite::params![session, source as i64])?;
            let (mut rowids, mut times) = (Vec::new(), Vec::new());
            while let Some(row) = rows.next()? {
                rowids.push(row.get::<_, i64>(0)?);
                times.push((row.get::<_, i64>(1)?.max(0) as u64).saturating_sub(origin));
            }
            (rowids, times)
        };
        Ok(SessionRecords {
            conn,
            rowids,
            times,
            origin,
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
        let read = || -> rusqlite::Result<(Vec<u8>, i64, i64)> {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT bytes, elapsed_ns, unix_ns FROM chunks WHERE rowid = ?1")?;
            stmt.query_row([self.rowids[i]], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        };
        match read() {
            Ok((bytes, elapsed_ns, unix_ns)) => Ok((
                Bytes::from(bytes),
                Timestamp {
                    elapsed_ns: (elapsed_ns.max(0) as u64).saturating_sub(self.origin),
                    unix_ns,
                },
            )),
            Err(rusqlite::Error::QueryReturnedNoRows) => Err(SessionError::Invalid(
                "the session was deleted while replaying it".into(),
            )),
            Err(e) => Err(SessionError::Sql(e)),
        }
    }
}
