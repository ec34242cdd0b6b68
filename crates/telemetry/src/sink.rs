//! What flows out of the hot path to the things that consume it: a raw [`Chunk`] as a
//! device delivered it, and the [`FrameSink`] trait every consumer of parsed frames
//! implements (the CSV writer, the session recorder, the live display, the MQTT
//! publisher).
//!
//! They live here, beside [`FrameEvent`], so a consumer depends on the telemetry core
//! only, never on the device drivers that produce the chunks.

use bytes::Bytes;

use crate::pipeline::{DatasetInfo, FrameEvent, Timestamp};

/// One read from a device: a serial read, a TCP segment, one MQTT publish, one CAN frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub data: Bytes,
    pub timestamp: Timestamp,
}

/// Something that consumes frames on the pipeline thread.
pub trait FrameSink: Send + 'static {
    fn frame(&mut self, event: &FrameEvent<'_>, datasets: &[DatasetInfo]);
    /// Called once when every source has ended.
    fn finish(&mut self) {}
    /// Called with every raw chunk just before the pipeline parses it, on the pipeline
    /// thread, so a session recorder keeps raw bytes and the frames cut from them in step
    /// (a chunk the wiring queue dropped is neither parsed nor seen here). Must not block.
    fn chunk(&mut self, _source: usize, _chunk: &Chunk) {}
    /// Called on the pipeline thread when it has parsed everything it was given and is
    /// about to wait for more. A sink that held something back rather than block the hot
    /// path (the display, when a reader had its state locked) hands it over now: a device
    /// that goes quiet, or a replay held at its end, must not leave its last frames
    /// unseen until the next one arrives. May wait briefly; the pipeline has nothing to do.
    fn idle(&mut self) {}
}
