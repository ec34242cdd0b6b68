//! Replay: a capture (or a CSV export) played back through the same pipeline, at 1×, N×
//! or maximum speed, with pause, single-step and seek.
//!
//! The capture is indexed once on open (time and file offset of every record), so seeking
//! is a file seek, and memory stays small whatever the capture's size. Chunks keep their
//! recorded timestamps, so a replayed session exports the same CSV as the live one.
//! [`ReplayLink`] paces any [`ReplayRecords`], so other record stores (recorded sessions)
//! replay with the same [`ReplayControl`] semantics.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sextant_telemetry::Timestamp;
use tokio::sync::Notify;

use crate::capture::{CaptureError, CaptureReader, MAGIC};
use crate::source::{DeviceError, Driver, Link};

/// Live controls of a replay, shared between the UI side and the replay link.
#[derive(Debug, Default)]
pub struct ReplayControl {
    state: Mutex<ControlState>,
    notify: Notify,
}

#[derive(Debug, Clone, Copy)]
struct ControlState {
    paused: bool,
    /// Playback speed; 0 means as fast as possible.
    speed: f64,
    /// Records to release while paused.
    steps: u32,
    /// Jump to this capture time (ns from the first record).
    seek_ns: Option<u64>,
    /// Bumped on every change so the link re-anchors its pacing.
    generation: u64,
    /// Capture time of the last record played (ns from the first record).
    position_ns: u64,
    /// Capture time from the first record to the last.
    duration_ns: u64,
    /// At the last record, pause there (a seek or Play goes on) instead of ending the
    /// source: what an interactive player does. A command-line replay ends.
    hold_at_end: bool,
    /// Paused at the end after playing the last record (with `hold_at_end`).
    at_end: bool,
    /// Resumed at the end: play again from the first record.
    restart: bool,
}

/// Where a replay is, for the UI's progress bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayProgress {
    pub paused: bool,
    /// 0 = as fast as possible.
    pub speed: f64,
    pub position_s: f64,
    pub duration_s: f64,
    /// Played to the end and held there: Play starts again from the beginning.
    pub at_end: bool,
}

impl Default for ControlState {
    fn default() -> Self {
        ControlState {
            paused: false,
            speed: 1.0,
            steps: 0,
            seek_ns: None,
            generation: 0,
            position_ns: 0,
            duration_ns: 0,
            hold_at_end: false,
            at_end: false,
            restart: false,
        }
    }
}

impl ReplayControl {
    pub fn new(speed: f64) -> Arc<Self> {
        let c = ReplayControl::default();
        c.state.lock().expect("fresh").speed = speed.max(0.0);
        Arc::new(c)
    }

    fn update(&self, f: impl FnOnce(&mut ControlState)) {
        {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut s);
            s.generation += 1;
        }
        self.notify.notify_one();
    }

    /// Holds at the last record instead of ending the source (see [`ReplayProgress::at_end`]).
    pub fn hold_at_end(&self) {
        self.update(|s| s.hold_at_end = true);
    }
    pub fn pause(&self) {
        self.update(|s| s.paused = true);
    }
    /// Goes on; at the end, plays again from the beginning.
    pub fn resume(&self) {
        self.update(|s| {
            s.paused = false;
            if s.at_end {
                s.at_end = false;
                s.restart = true;
            }
        });
    }
    /// Releases one record while paused.
    pub fn step(&self) {
        self.update(|s| s.steps += 1);
    }
    /// 1.0 = real time, 10.0 = ten times faster, 0 = as fast as possible.
    pub fn set_speed(&self, speed: f64) {
        self.update(|s| {
            s.speed = if speed.is_finite() {
                speed.max(0.0)
            } else {
                0.0
            }
        });
    }
    /// Continues from the first record at or after `offset` into the capture.
    pub fn seek(&self, offset: Duration) {
        self.update(|s| {
            s.seek_ns = Some(offset.as_nanos() as u64);
            s.at_end = false;
            s.restart = false;
        });
    }
    pub fn progress(&self) -> ReplayProgress {
        let s = *self.state.lock().unwrap_or_else(|p| p.into_inner());
        ReplayProgress {
            paused: s.paused,
            speed: s.speed,
            position_s: s.position_ns as f64 / 1e9,
            duration_s: s.duration_ns as f64 / 1e9,
            at_end: s.at_end,
        }
    }

    pub fn is_paused(&self) -> bool {
        self.state.lock().map(|s| s.paused).unwrap_or(false)
    }
}

/// Plays a capture file; only records of `source` when set (multi-source captures).
pub struct ReplayDriver {
    pub path: PathBuf,
    pub source: Option<u16>,
    pub control: Arc<ReplayControl>,
}

impl Driver for ReplayDriver {
    type Link = ReplayLink;

    fn describe(&self) -> String {
        format!("replay {}", self.path.display())
    }

    async fn open(&mut self) -> Result<ReplayLink, DeviceError> {
        let path = self.path.clone();
        let source = self.source;
        let (times, offsets) = tokio::task::spawn_blocking(move || build_index(&path, source))
            .await
            .map_err(|e| DeviceError::fatal(format!("indexing failed: {e}")))??;
        let file = File::open(&self.path).map_err(|e| {
            DeviceError::fatal(format!("could not open {}: {e}", self.path.display()))
        })?;
        Ok(ReplayLink::new(
            CaptureRecords {
                file: BufReader::with_capacity(256 * 1024, file),
                times,
                offsets,
            },
            self.control.clone(),
        ))
    }
}

/// Where a replay's records come from. Their capture times are known up front, so seeking
/// is a binary search and pacing needs no lookahead; a record's bytes are loaded only when
/// it is due. A capture file is one; a recorded session in a database is another.
pub trait ReplayRecords: Send + 'static {
    /// Capture time (ns since the session started) of every record, in play order.
    fn times(&self) -> &[u64];
    /// The bytes and timestamps of record `i` (`i < times().len()`).
    fn load(&mut self, i: usize) -> Result<(Bytes, Timestamp), DeviceError>;
}

/// The records of a capture file, indexed by file offset.
pub struct CaptureRecords {
    file: BufReader<File>,
    times: Vec<u64>,
    offsets: Vec<u64>,
}

impl ReplayRecords for CaptureRecords {
    fn times(&self) -> &[u64] {
        &self.times
    }

    fn load(&mut self, i: usize) -> Result<(Bytes, Timestamp), DeviceError> {
        self.file
            .seek(SeekFrom::Start(self.offsets[i]))
            .map_err(|e| DeviceError::fatal(format!("capture seek failed: {e}")))?;
        let mut header_and_body = CaptureReader::without_magic(&mut self.file);
        match header_and_body.next_record() {
            Ok(Some(r)) => Ok((r.data, r.timestamp)),
            Ok(None) => Err(DeviceError::fatal("the capture changed while replaying")),
            Err(CaptureError::Io(e)) => {
                Err(DeviceError::fatal(format!("capture read failed: {e}")))
            }
            Err(e) => Err(DeviceError::fatal(e.to_string())),
        }
    }
}

/// Capture times and file offsets of the records to play.
fn build_index(
    path: &std::path::Path,
    source: Option<u16>,
) -> Result<(Vec<u64>, Vec<u64>), DeviceError> {
    let file = File::open(path)
        .map_err(|e| DeviceError::fatal(format!("could not open {}: {e}", path.display())))?;
    let mut reader = CaptureReader::new(CountingReader {
        inner: BufReader::new(file),
        pos: 0,
    })
    .map_err(|e| DeviceError::fatal(format!("{}: {e}", path.display())))?;
    let mut times = Vec::new();
    let mut offsets = Vec::new();
    loop {
        let offset = reader_pos(&reader);
        match reader.next_record() {
            Ok(Some(r)) => {
                if source.is_none_or(|s| s == r.source) {
                    times.push(r.timestamp.elapsed_ns);
                    offsets.push(offset);
                }
            }
            Ok(None) => break,
            Err(e) => return Err(DeviceError::fatal(format!("{}: {e}", path.display()))),
        }
    }
    if reader.truncated {
        tracing::warn!(path = %path.display(), "capture ends inside a record; replaying what is complete");
    }
    Ok((times, offsets))
}

struct CountingReader<R> {
    inner: R,
    pos: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

fn reader_pos<R: Read>(r: &CaptureReader<CountingReader<R>>) -> u64 {
    r.input_ref().pos
}

/// Plays [`ReplayRecords`] with their recorded timestamps, paced by a [`ReplayControl`].
pub struct ReplayLink<R: ReplayRecords = CaptureRecords> {
    records: R,
    next: usize,
    /// A record loaded but not yet released (kept across a cancelled read).
    pending: Option<(Bytes, Timestamp)>,
    /// Pacing anchor: (wall time, capture time) of the last re-anchoring.
    anchor: Option<(Instant, u64)>,
    generation: u64,
    control: Arc<ReplayControl>,
}

impl<R: ReplayRecords> ReplayLink<R> {
    /// A link that plays `records` from the first, under `control` (one control per link:
    /// a seek or a step is consumed by the link that sees it).
    pub fn new(records: R, control: Arc<ReplayControl>) -> Self {
        if let (Some(first), Some(last)) = (records.times().first(), records.times().last()) {
            let mut s = control.state.lock().unwrap_or_else(|p| p.into_inner());
            s.duration_ns = last.saturating_sub(*first);
        }
        ReplayLink {
            records,
            next: 0,
            pending: None,
            anchor: None,
            generation: u64::MAX,
            control,
        }
    }

    /// Records this replay will play.
    pub fn len(&self) -> usize {
        self.records.times().len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.times().is_empty()
    }
}

impl<R: ReplayRecords> Link for ReplayLink<R> {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        loop {
            let state = *self.control.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.generation != self.generation {
                self.generation = state.generation;
                self.anchor = None;
                if let Some(target) = state.seek_ns {
                    let times = self.records.times();
                    let base = times.first().copied().unwrap_or(0);
                    self.next = times.partition_point(|t| t.saturating_sub(base) < target);
                    self.pending = None;
                    let mut s = self.control.state.lock().unwrap_or_else(|p| p.into_inner());
                    s.seek_ns = None;
                } else if state.restart {
                    // Play after the end starts again, as a media player does.
                    self.next = 0;
                    self.pending = None;
                    let mut s = self.control.state.lock().unwrap_or_else(|p| p.into_inner());
                    s.restart = false;
                }
            }
            if state.paused && state.steps == 0 {
                self.control.notify.notified().await;
                continue;
            }
            if self.pending.is_none() {
                if self.next >= self.records.times().len() {
                    if !state.hold_at_end {
                        return Err(DeviceError::Finished);
                    }
                    // Nothing left to step through either; wait for a seek or Play.
                    {
                        let mut s = self.control.state.lock().unwrap_or_else(|p| p.into_inner());
                        s.paused = true;
                        s.at_end = true;
                        s.steps = 0;
                        // Seen as a change, so the next read does not re-anchor on it.
                        self.generation = s.generation;
                    }
                    self.control.notify.notified().await;
                    continue;
                }
                self.pending = Some(self.records.load(self.next)?);
                self.next += 1;
            }
            let t = self.pending.as_ref().expect("just loaded").1.elapsed_ns;
            if !state.paused && state.speed > 0.0 {
                let (wall, cap) = *self.anchor.get_or_insert((Instant::now(), t));
                let due = wall
                    + Duration::from_secs_f64(t.saturating_sub(cap) as f64 / 1e9 / state.speed);
                if due > Instant::now() {
                    tokio::select! {
                        _ = tokio::time::sleep_until(due.into()) => {}
                        _ = self.control.notify.notified() => continue,
                    }
                }
            }
            if state.paused {
                let mut s = self.control.state.lock().unwrap_or_else(|p| p.into_inner());
                s.steps = s.steps.saturating_sub(1);
            }
            let (data, timestamp) = self.pending.take().expect("pending record");
            let base = self.records.times().first().copied().unwrap_or(0);
            self.control
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .position_ns = self.records.times()[self.next - 1].saturating_sub(base);
            return Ok(Some((data, Some(timestamp))));
        }
    }
}

/// Whether a file starts like a capture (otherwise it is raw bytes).
pub fn is_capture(path: &std::path::Path) -> bool {
    let mut magic = [0u8; 8];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map(|_| &magic == MAGIC)
        .unwrap_or(false)
}
