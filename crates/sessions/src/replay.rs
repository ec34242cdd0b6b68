//! Replaying a recorded session: its raw chunks for one source, in order, with their
//! recorded timestamps.
//!
//! This module only says where the records come from; the pacing, pause, step, seek and
//! speed are the device layer's replay link (the workspace runtime puts the two together,
//! so this crate needs no device driver). Opening indexes the source's chunks (rowid and
//! elapsed time, 16 bytes each); a chunk's bytes are read when it is due. Chunks keep
//! their recorded timestamps, so a replay through a fresh pipeline reproduces the recorded
//! frames exactly.

use bytes::Bytes;
use rusqlite::Connection;
use sextant_telemetry::Timestamp;

use crate::{schema, SessionError, SessionId};

/// The raw chunks of one source of one session, indexed by rowid.
pub struct SessionRecords {
    conn: Connection,
    rowids: Vec<i64>,
    times: Vec<u64>,
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
        let (rowids, times) = {
            let mut stmt = conn.prepare(
                "SELECT rowid, elapsed_ns FROM chunks WHERE session = ?1 AND source = ?2 ORDER BY rowid",
            )?;
            let mut rows = stmt.query(rusqlite::params![session, source as i64])?;
            let (mut rowids, mut times) = (Vec::new(), Vec::new());
            while let Some(row) = rows.next()? {
                rowids.push(row.get::<_, i64>(0)?);
                times.push(row.get::<_, i64>(1)?.max(0) as u64);
            }
            (rowids, times)
        };
        Ok(SessionRecords {
            conn,
            rowids,
            times,
        })
    }
}

impl SessionRecords {
    /// Capture time (ns since the session started) of every chunk, in play order.
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
                    elapsed_ns: elapsed_ns.max(0) as u64,
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
