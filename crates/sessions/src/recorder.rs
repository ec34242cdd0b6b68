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
//! A recording starts and stops between two chunks: a chunk is recorded together with
//! every frame the pipeline cuts from it, or neither is, so a replay of the session's raw
//! chunks gives back exactly its frames. The sink decides at each chunk whether it records
//! it; [`Recorder::stop`] (and a [`Recorder::start`] that replaces a recording) waits for
//! the pipeline to finish the chunk it is on – one chunk's parsing, since the pipeline says
//! when it pauses ([`FrameSink::idle`]). A frame that straddles the start (begun in a chunk
//! from before it) is recorded as parsed but its first bytes are not, so a replay of a
//! session started mid-run may differ in that first frame.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

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

struct Shared {
    slot: Option<Slot>,
    /// The pipeline recorded a chunk and may still be cutting frames from it: the slot
    /// stays as it is until the chunk is done.
    in_chunk: bool,
    /// A stop (or a replacing start) waits for the chunk to be done: the pipeline records
    /// no new chunk meanwhile, so a busy pipeline cannot keep the stop waiting.
    changing: bool,
}

struct Inner {
    project: Project,
    /// Mirrors `slot.is_some()`, so an idle recorder costs no lock on the hot path.
    active: AtomicBool,
    shared: Mutex<Shared>,
    /// Signalled when the pipeline is done with a recorded chunk.
    chunk_done: Condvar,
}

/// How long a stop waits for the pipeline to finish a chunk. Parsing one chunk takes
/// microseconds; only a pipeline thread that is stuck or gone waits this long, and then
/// the recording stops anyway (the chunk's last frames may be missing from it).
const CHUNK_WAIT: Duration = Duration::from_secs(5);

impl Inner {
    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shared state once the pipeline is between two chunks, to change the slot.
    fn between_chunks(&self) -> MutexGuard<'_, Shared> {
        let mut shared = self.shared();
        if shared.in_chunk {
            shared.changing = true;
            let (mut waited, timeout) = self
                .chunk_done
                .wait_timeout_while(shared, CHUNK_WAIT, |s| s.in_chunk)
                .unwrap_or_else(|p| p.into_inner());
            if timeout.timed_out() {
                tracing::warn!(
                    "the pipeline did not finish its chunk; changing the recording anyway"
                );
                waited.in_chunk = false;
            }
            waited.changing = false;
            shared = waited;
        }
        shared
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
                shared: Mutex::new(Shared {
                    slot: None,
                    in_chunk: false,
                    changing: false,
                }),
                chunk_done: Condvar::new(),
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
            recording: false,
        }
    }

    /// Starts recording into `writer` from the next chunk on. Returns the writer it
    /// replaces, if one was still recording; the caller should close it.
    pub fn start(&self, writer: SessionWriter) -> Option<SessionWriter> {
        let sink = writer.sink();
        let mut shared = self.inner.between_chunks();
        let previous = shared.slot.replace(Slot { writer, sink });
        self.inner.active.store(true, Ordering::Release);
        previous.map(|s| s.writer)
    }

    /// The session being recorded and its counts so far.
    pub fn current(&self) -> Option<WriterReport> {
        self.inner.shared().slot.as_ref().map(|s| s.writer.report())
    }

    /// Stops recording and hands back the writer, to be closed (which may wait for its
    /// queue to drain, so do it off any latency-sensitive thread).
    pub fn stop(&self) -> Option<SessionWriter> {
        let mut shared = self.inner.between_chunks();
        self.inner.active.store(false, Ordering::Release);
        shared.slot.take().map(|s| s.writer)
    }
}

/// The [`FrameSink`] side of a [`Recorder`].
pub struct RecorderSink {
    inner: Arc<Inner>,
    /// The chunk the pipeline is on was recorded, so its frames are too.
    recording: bool,
}

impl RecorderSink {
    /// The pipeline is done with the chunk it was on.
    fn chunk_done(&mut self, shared: &mut Shared) {
        if std::mem::take(&mut self.recording) {
            shared.in_chunk = false;
            self.inner.chunk_done.notify_all();
        }
    }
}

impl FrameSink for RecorderSink {
    fn chunk(&mut self, source: usize, chunk: &Chunk) {
        if !self.recording && !self.inner.active.load(Ordering::Acquire) {
            return;
        }
        let inner = self.inner.clone();
        let mut shared = inner.shared();
        self.chunk_done(&mut shared);
        if shared.changing {
            return;
        }
        if let Some(slot) = shared.slot.as_mut() {
            slot.sink.chunk(source, chunk);
            self.recording = true;
            shared.in_chunk = true;
        }
    }

    fn frame(&mut self, event: &FrameEvent<'_>, datasets: &[DatasetInfo]) {
        if !self.recording {
            return;
        }
        if let Some(slot) = self.inner.shared().slot.as_mut() {
            slot.sink.frame(event, datasets);
        }
    }

    fn idle(&mut self) {
        if !self.recording && !self.inner.active.load(Ordering::Acquire) {
            return;
        }
        let inner = self.inner.clone();
        let mut shared = inner.shared();
        self.chunk_done(&mut shared);
        if let Some(slot) = shared.slot.as_mut() {
            slot.sink.idle();
        }
    }

    fn finish(&mut self) {
        let inner = self.inner.clone();
        self.chunk_done(&mut inner.shared());
        let recorder = Recorder { inner };
        if let Some(writer) = recorder.stop() {
            let id = writer.id();
            if let Err(e) = writer.close() {
                tracing::error!(session = id, "closing the recording failed: {e}");
            }
        }
    }
}
