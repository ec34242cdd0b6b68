//! A recording slot for a live wiring.
//!
//! A wiring's sinks are fixed when it starts, but a user starts and stops recording while
//! the sources run. So a live run carries a [`Recorder`] from the start: its sink does
//! nothing (one atomic load per chunk and frame) until a [`SessionWriter`] is put in the
//! slot, and records into it until it is taken out again. When every source has ended, the
//! sink closes whatever is still recording, so a disconnect ends the session cleanly.
//! The recorder knows the project its wiring was built from (which may since have been
//! edited), and embeds that one in every session it starts.
//!
//! Chunks and frames both pass through the pipeline thread, so a recording starts and
//! stops between two chunks. A frame that straddles the start (begun in a chunk from
//! before it) is recorded as parsed but its first bytes are not, so a replay of a session
//! started mid-run may differ in that first frame.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::project::Project;
use sextant_telemetry::Chunk;
use sextant_telemetry::FrameEvent;
use sextant_telemetry::FrameSink;

use crate::writer::{NewSession, SessionSink, SessionWriter, WriterOptions, WriterReport};
use crate::{SessionError, SessionId};

struct Slot {
    writer: SessionWriter,
    sink: SessionSink,
}

struct Inner {
    project: Project,
    /// Mirrors `slot.is_some()`, so an idle recorder costs no lock on the hot path.
    active: AtomicBool,
    slot: Mutex<Option<Slot>>,
}

impl Inner {
    fn slot(&self) -> MutexGuard<'_, Option<Slot>> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Start/stop recording of a running wiring. Clones share the slot.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

impl Recorder {
    /// A recorder for a wiring running `project`.
    pub fn new(project: Project) -> Recorder {
        Recorder {
            inner: Arc::new(Inner {
                project,
                active: AtomicBool::new(false),
                slot: Mutex::new(None),
            }),
        }
    }

    /// The project the wiring runs, embedded in every session this recorder starts.
    pub fn project(&self) -> &Project {
        &self.inner.project
    }

    /// Starts a new session in the database at `db`, recording from the next chunk on.
    pub fn record(
        &self,
        db: &Path,
        title: &str,
        tags: Vec<String>,
        options: WriterOptions,
    ) -> Result<SessionId, SessionError> {
        if let Some(current) = self.current() {
            return Err(SessionError::Invalid(format!(
                "already recording session {}; stop that recording first",
                current.id
            )));
        }
        let writer = SessionWriter::start(
            db,
            NewSession {
                title: title.to_string(),
                project: self.inner.project.clone(),
                tags,
            },
            options,
        )?;
        let id = writer.id();
        if let Some(previous) = self.start(writer) {
            // Only a racing second caller gets here; keep the newer recording.
            let _ = previous.close();
        }
        Ok(id)
    }

    /// The sink to give the wiring when it starts.
    pub fn sink(&self) -> RecorderSink {
        RecorderSink {
            inner: self.inner.clone(),
        }
    }

    /// Starts recording into `writer`. Returns the writer it replaces, if one was still
    /// recording; the caller should close it.
    pub fn start(&self, writer: SessionWriter) -> Option<SessionWriter> {
        let sink = writer.sink();
        let mut slot = self.inner.slot();
        let previous = slot.replace(Slot { writer, sink });
        self.inner.active.store(true, Ordering::Release);
        previous.map(|s| s.writer)
    }

    /// The session being recorded and its counts so far.
    pub fn current(&self) -> Option<WriterReport> {
        self.inner.slot().as_ref().map(|s| s.writer.report())
    }

    /// Stops recording and hands back the writer, to be closed (which may wait for its
    /// queue to drain, so do it off any latency-sensitive thread).
    pub fn stop(&self) -> Option<SessionWriter> {
        let mut slot = self.inner.slot();
        self.inner.active.store(false, Ordering::Release);
        slot.take().map(|s| s.writer)
    }
}

/// The [`FrameSink`] side of a [`Recorder`].
pub struct RecorderSink {
    inner: Arc<Inner>,
}

impl FrameSink for RecorderSink {
    fn chunk(&mut self, source: usize, chunk: &Chunk) {
        if !self.inner.active.load(Ordering::Acquire) {
            return;
        }
        if let Some(slot) = self.inner.slot().as_mut() {
            slot.sink.chunk(source, chunk);
        }
    }

    fn frame(&mut self, event: &FrameEvent<'_>, datasets: &[DatasetInfo]) {
        if !self.inner.active.load(Ordering::Acquire) {
            return;
        }
        if let Some(slot) = self.inner.slot().as_mut() {
            slot.sink.frame(event, datasets);
        }
    }

    fn finish(&mut self) {
        let recorder = Recorder {
            inner: self.inner.clone(),
        };
        if let Some(writer) = recorder.stop() {
            let id = writer.id();
            if let Err(e) = writer.close() {
                tracing::error!(session = id, "closing the recording failed: {e}");
            }
        }
    }
}
