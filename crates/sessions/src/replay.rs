//! Replaying a recorded session: its raw chunks for one source, as a device driver.
//!
//! The pacing, pause, step, seek and speed are the capture replay's own
//! ([`sextant_devices::replay::ReplayLink`] over [`ReplayRecords`]); this module only says
//! where the records come from. Opening indexes the source's chunks (rowid and elapsed
//! time, 16 bytes each); a chunk's bytes are read when it is due. Chunks keep their
//! recorded timestamps, so a replay through a fresh pipeline reproduces the recorded
//! frames exactly.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use rusqlite::Connection;
use sextant_devices::replay::{ReplayControl, ReplayLink, ReplayRecords};
use sextant_devices::{DeviceError, Driver};
use sextant_telemetry::Timestamp;

use crate::{schema, SessionError, SessionId};

/// Plays the chunks `source` delivered in session `session` of the database at `db`.
pub struct SessionReplayDriver {
    pub db: PathBuf,
    pub session: SessionId,
    /// Index of the source in the session's project.
    pub source: usize,
    /// One control per driver (a seek or step is consumed by the link that sees it).
    pub control: Arc<ReplayControl>,
}

impl Driver for SessionReplayDriver {
    type Link = ReplayLink<SessionRecords>;

    fn describe(&self) -> String {
        format!(
            "replay of session {} (source {}) from {}",
            self.session,
            self.source,
            self.db.display()
        )
    }

    async fn open(&mut self) -> Result<Self::Link, DeviceError> {
        let (db, session, source) = (self.db.clone(), self.session, self.source);
        let records =
            tokio::task::spawn_blocking(move || SessionRecords::open(&db, session, source))
                .await
                .map_err(|e| DeviceError::fatal(format!("indexing the session failed: {e}")))?
                .map_err(|e| DeviceError::fatal(e.to_string()))?;
        Ok(ReplayLink::new(records, self.control.clone()))
    }
}

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

impl ReplayRecords for SessionRecords {
    fn times(&self) -> &[u64] {
        &self.times
    }

    fn load(&mut self, i: usize) -> Result<(Bytes, Timestamp), DeviceError> {
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
            Err(rusqlite::Error::QueryReturnedNoRows) => Err(DeviceError::fatal(
                "the session was deleted while replaying it",
            )),
            Err(e) => Err(DeviceError::fatal(format!(
                "reading the recorded session failed: {e}"
            ))),
        }
    }
}
