//! A recorded session played back as a device source: the session store's chunks
//! ([`SessionRecords`]) paced by the device layer's replay link, with the same controls
//! as a capture or CSV replay. It lives here, where both are known, so neither the store
//! nor the drivers depend on the other.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use sextant_devices::replay::{ReplayControl, ReplayLink, ReplayRecords};
use sextant_devices::{DeviceError, Driver};
use sextant_sessions::{SessionId, SessionRecords};
use sextant_telemetry::Timestamp;

/// Plays the chunks `source` delivered in session `session` of the database at `db`.
pub struct SessionReplayDriver {
    pub db: PathBuf,
    pub session: SessionId,
    /// Index of the source in the session's project.
    pub source: usize,
    /// One control per driver (a seek or step is consumed by the link that sees it).
    pub control: Arc<ReplayControl>,
}

/// A session's chunks as replay records.
pub struct Records(SessionRecords);

impl ReplayRecords for Records {
    fn times(&self) -> &[u64] {
        self.0.times()
    }

    fn load(&mut self, i: usize) -> Result<(Bytes, Timestamp), DeviceError> {
        self.0
            .load(i)
            .map_err(|e| DeviceError::fatal(format!("reading the recorded session failed: {e}")))
    }
}

impl Driver for SessionReplayDriver {
    type Link = ReplayLink<Records>;

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
        Ok(ReplayLink::new(Records(records), self.control.clone()))
    }
}
