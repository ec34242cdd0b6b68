//! The last frames of a live run, kept for `dashboard.tail` and for pausing the view; and
//! the last raw bytes of each source (`io.recentBytes`), which the assistant's auto-verify
//! feeds through a changed parser.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use sextant_devices::wiring::FrameSink;
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::{FrameEvent, Value};

/// How many frames the tail keeps.
pub const TAIL_FRAMES: usize = 1000;

/// How many of each source's newest raw bytes the tail keeps.
pub const TAIL_BYTES: usize = 4096;

/// One remembered frame: session time and every dataset's value.
pub type TailFrame = (f64, Vec<Value>);

/// Shared between the pipeline thread (which appends) and commands (which read).
#[derive(Clone, Default)]
pub struct Tail {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    frames: VecDeque<TailFrame>,
    columns: Vec<DatasetInfo>,
    /// Per source index: its newest raw bytes, at most [`TAIL_BYTES`].
    bytes: Vec<VecDeque<u8>>,
}

impl Tail {
    pub fn sink(&self) -> TailSink {
        TailSink { tail: self.clone() }
    }

    /// The newest raw bytes source `source` delivered (at most [`TAIL_BYTES`]), oldest first.
    pub fn recent_bytes(&self, source: usize) -> Vec<u8> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner
            .bytes
            .get(source)
            .map(|b| b.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The newest `n` frames, oldest first, with the dataset list.
    pub fn last(&self, n: usize) -> (Vec<DatasetInfo>, Vec<TailFrame>) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let skip = inner.frames.len().saturating_sub(n);
        (
            inner.columns.clone(),
            inner.frames.iter().skip(skip).cloned().collect(),
        )
    }
}

pub struct TailSink {
    tail: Tail,
}

impl FrameSink for TailSink {
    fn chunk(&mut self, source: usize, chunk: &sextant_telemetry::Chunk) {
        let mut inner = self.tail.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.bytes.len() <= source {
            inner.bytes.resize_with(source + 1, VecDeque::new);
        }
        let ring = &mut inner.bytes[source];
        let data: &[u8] = &chunk.data;
        let data = &data[data.len().saturating_sub(TAIL_BYTES)..];
        let over = (ring.len() + data.len()).saturating_sub(TAIL_BYTES);
        ring.drain(..over);
        ring.extend(data.iter().copied());
    }

    fn frame(&mut self, event: &FrameEvent<'_>, datasets: &[DatasetInfo]) {
        let mut inner = self.tail.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.columns.len() != datasets.len() {
            inner.columns = datasets.to_vec();
        }
        // Reuse the oldest row's allocation once the ring is full.
        let row = if inner.frames.len() >= TAIL_FRAMES {
            let (_, mut old) = inner.frames.pop_front().unwrap_or_default();
            old.clear();
            old.extend_from_slice(event.values);
            old
        } else {
            event.values.to_vec()
        };
        inner.frames.push_back((event.timestamp.elapsed_s(), row));
    }
}
