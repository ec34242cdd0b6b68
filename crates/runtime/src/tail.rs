//! The last frames of a live run, kept for `dashboard.tail` and for pausing the view.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use sextant_devices::wiring::FrameSink;
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::{FrameEvent, Value};

/// How many frames the tail keeps.
pub const TAIL_FRAMES: usize = 1000;

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
}

impl Tail {
    pub fn sink(&self) -> TailSink {
        TailSink { tail: self.clone() }
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
