//! The shared display state, the pipeline-side sink that fills it and the per-subscriber
//! cursor that turns it into display frames.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::Chunk;
use sextant_telemetry::FrameSink;
use sextant_telemetry::{FrameEvent, Value};

use crate::block::Block;
use crate::encode::{Encoder, Overview, Window};
use crate::stream::{MAX_RATE_HZ, MIN_RATE_HZ};

/// Newest samples kept per dataset: the most any window or raw tail can show.
pub const WINDOW_SAMPLES: usize = 1 << 16;
/// Newest raw console bytes kept (a late subscriber starts with these).
pub const CONSOLE_BYTES: usize = 256 * 1024;
/// Frames the sink holds back while a tick has the state locked.
const PENDING_FRAMES: usize = WINDOW_SAMPLES;
/// What a console record costs against [`CONSOLE_BYTES`] beside its bytes (its time,
/// source and length on the wire), so even empty records – an empty timed send – are
/// trimmed instead of piling up for the whole run.
pub const CONSOLE_RECORD_COST: usize = 16;

/// What a subscriber wants drawn; see `docs/ui-protocol.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct DisplayOptions {
    /// Display ticks per second, [`MIN_RATE_HZ`] to [`MAX_RATE_HZ`]: the display rate,
    /// `refreshHz` end to end (the UI setting, `dashboard.setView`, the project). `rateHz`,
    /// its earlier name, is still read, so an older UI keeps working.
    #[serde(alias = "rateHz")]
    pub refresh_hz: f64,
    /// Points per dataset window after min/max decimation (2 to 100000).
    pub points: u32,
    /// Visible window in seconds.
    pub time_range_s: f64,
    /// Dataset index → how many newest samples to send undecimated too.
    pub raw: BTreeMap<u32, u32>,
    /// Dataset index → the most window points to send for it, below `points`: a plot
    /// needs no more than about two per pixel of its width, whatever `points` says, and a
    /// dataset no plot draws needs none (0: only its newest value). Datasets not listed
    /// get `points`.
    pub windows: BTreeMap<u32, u32>,
    /// Whether to send the console's bytes: only a page showing a console needs them, and a
    /// fast text device sends megabytes a second. Turned on later, the bytes still kept
    /// (up to [`CONSOLE_BYTES`]) arrive first.
    pub console: bool,
}

impl Default for DisplayOptions {
    fn default() -> Self {
        DisplayOptions {
            refresh_hz: 60.0,
            points: 1000,
            time_range_s: 10.0,
            raw: BTreeMap::new(),
            windows: BTreeMap::new(),
            console: true,
        }
    }
}

impl DisplayOptions {
    /// Checks the ranges, naming the first bad field. The only check of the display rate:
    /// both shells call it before a stream sees the options.
    pub fn validate(&self) -> Result<(), String> {
        if !(MIN_RATE_HZ..=MAX_RATE_HZ).contains(&self.refresh_hz) {
            return Err(format!(
                "refreshHz must be between {MIN_RATE_HZ} and {MAX_RATE_HZ} (got {})",
                self.refresh_hz
            ));
        }
        if !(2..=100_000).contains(&self.points) {
            return Err(format!(
                "points must be between 2 and 100000 (got {})",
                self.points
            ));
        }
        if !(self.time_range_s.is_finite() && self.time_range_s > 0.0) {
            return Err(format!(
                "timeRangeS must be a positive number of seconds (got {})",
                self.time_range_s
            ));
        }
        Ok(())
    }
}

/// One dataset as the UI names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DatasetMeta {
    pub index: usize,
    pub id: String,
    pub title: String,
    pub group: String,
    pub units: String,
    pub source: Option<usize>,
}

/// The live samples [`Scope::recent`] copied out.
#[derive(Debug, Clone, Default)]
pub struct Recent {
    /// Session time of the newest frame.
    pub now_s: Option<f64>,
    pub datasets: Vec<RecentDataset>,
}

/// One dataset's copied samples, oldest first.
#[derive(Debug, Clone, Default)]
pub struct RecentDataset {
    pub id: String,
    /// `Group/Dataset`, as the CSV export names it.
    pub column: String,
    pub units: String,
    pub t: Vec<f64>,
    pub v: Vec<f64>,
    /// The oldest sample the display still keeps, whether copied or not: how far back the
    /// live data reaches.
    pub oldest_kept_s: Option<f64>,
    /// Whether older samples were let go (the window is full): before `oldest_kept_s`
    /// there was data that is no longer kept.
    pub trimmed: bool,
}

pub(crate) struct ConsoleRecord {
    /// Increases by one per record for the life of the scope.
    pub id: u64,
    pub t: f64,
    pub source: u32,
    pub bytes: Vec<u8>,
}

/// Raw samples per overview block.
pub const BLOCK: usize = 256;
/// Overview blocks kept per dataset: with [`BLOCK`], the newest ~4.2 M samples (42 s at
/// 100 k frames/s) stay drawable as min/max even after the raw window has moved on.
pub const OVERVIEW_BLOCKS: usize = 16 * 1024;

/// One dataset: its newest samples in two columns (up to [`WINDOW_SAMPLES`], grown only
/// if used) and, for windows longer than that, a min/max overview of older blocks – a
/// two-level pyramid, so a 10 s plot at 100 k frames/s is still the whole 10 s.
#[derive(Default)]
pub(crate) struct Series {
    pub t: VecDeque<f64>,
    pub v: VecDeque<f64>,
    pub overview: VecDeque<Block>,
    open: Option<Block>,
    /// Samples pushed since the run began: where the ring and the blocks sit in the run.
    pushed: u64,
}

impl Series {
    /// The window of samples from `from_t` on, with the overview blocks located among them.
    pub(crate) fn window(&self, from_t: f64) -> Window<'_> {
        let blocks_done = self.pushed / BLOCK as u64;
        Window::new(&self.t, &self.v, from_t).with_blocks(
            &self.overview,
            blocks_done - self.overview.len() as u64,
            self.pushed - self.t.len() as u64,
        )
    }

    pub(crate) fn push(&mut self, t: f64, v: f64) {
        self.pushed += 1;
        if self.t.len() == WINDOW_SAMPLES {
            self.t.pop_front();
            self.v.pop_front();
        }
        self.t.push_back(t);
        self.v.push_back(v);
        match &mut self.open {
            Some(block) => {
                block.add(t, v);
                if block.len() == BLOCK {
                    if self.overview.len() == OVERVIEW_BLOCKS {
                        self.overview.pop_front();
                    }
                    self.overview.push_back(*block);
                    self.open = None;
                }
            }
            None => self.open = Some(Block::new(t, v)),
        }
    }
}

#[derive(Default)]
pub(crate) struct State {
    /// Bumped by [`Scope::reset`] (a new run): subscribers resend the dataset list.
    pub generation: u64,
    /// Bumped whenever the dataset list changes.
    pub columns_rev: u64,
    pub columns: Vec<DatasetMeta>,
    pub series: Vec<Series>,
    pub last: Vec<f64>,
    pub text: Vec<Option<String>>,
    /// Session time of the newest frame.
    pub now: Option<f64>,
    pub frames: u64,
    pub console: VecDeque<ConsoleRecord>,
    pub console_bytes: usize,
    pub next_console_id: u64,
}

impl State {
    fn set_columns(&mut self, datasets: &[DatasetInfo]) {
        self.columns = datasets
            .iter()
            .enumerate()
            .map(|(index, d)| DatasetMeta {
                index,
                id: d.id.clone(),
                title: d.title.clone(),
                group: d.group.clone(),
                units: d.units.clone(),
                source: d.source,
            })
            .collect();
        self.series.resize_with(datasets.len(), Series::default);
        self.last.resize(datasets.len(), f64::NAN);
        self.text.resize(datasets.len(), None);
        self.columns_rev += 1;
    }

    fn push_frame(&mut self, t: f64, values: &[Value]) {
        for (i, value) in values.iter().enumerate().take(self.series.len()) {
            // Text that reads as a number is that number (the one numeric view of a value).
            if let Some(x) = value.as_f64() {
                self.series[i].push(t, x);
                self.last[i] = x;
                self.text[i] = None;
                continue;
            }
            match value {
                Value::Text(s) => {
                    // A gap in the plot; the text shows in grids and readouts.
                    self.series[i].push(t, f64::NAN);
                    self.last[i] = f64::NAN;
                    self.text[i] = Some(s.clone());
                }
                // A number always has its numeric view (above).
                Value::Number(_) | Value::Null => {}
            }
        }
        self.now = Some(t);
        self.frames += 1;
    }

    fn push_console(&mut self, t: f64, source: u32, bytes: &[u8]) {
        // One huge chunk keeps only its tail: the console shows the newest bytes.
        let bytes = &bytes[bytes
            .len()
            .saturating_sub(CONSOLE_BYTES - CONSOLE_RECORD_COST)..];
        self.console_bytes += bytes.len() + CONSOLE_RECORD_COST;
        self.console.push_back(ConsoleRecord {
            id: self.next_console_id,
            t,
            source,
            bytes: bytes.to_vec(),
        });
        self.next_console_id += 1;
        while self.console_bytes > CONSOLE_BYTES {
            let Some(old) = self.console.pop_front() else {
                break;
            };
            self.console_bytes -= old.bytes.len() + CONSOLE_RECORD_COST;
        }
    }
}

/// The display state shared by the pipeline (writer) and every display subscriber.
#[derive(Clone, Default)]
pub struct Scope {
    state: Arc<Mutex<State>>,
}

/// Set in a console record's source when Sextant sent the bytes to the device (a console
/// send, an action, an action's timer) rather than received them.
pub const SENT: u32 = 1 << 31;

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Scope {
    pub fn new() -> Scope {
        Scope::default()
    }

    /// A sink for a new run's pipeline. Forgets the previous run's data.
    pub fn sink(&self) -> ScopeSink {
        self.reset();
        ScopeSink {
            generation: lock(&self.state).generation,
            state: self.state.clone(),
            pending: Pending::default(),
            columns_seen: None,
        }
    }

    /// Forgets all data (a new run starts); subscribers get the new dataset list.
    pub fn reset(&self) {
        let mut s = lock(&self.state);
        let generation = s.generation + 1;
        let next_console_id = s.next_console_id;
        *s = State {
            generation,
            next_console_id,
            ..State::default()
        };
    }

    /// Bytes sent to source `source` at `t` seconds into the run: the console shows them
    /// among the received ones, marked as sent ([`SENT`]). Called by the sender, never by
    /// the pipeline, so the lock is the runtime's brief wait, not the hot path's.
    pub fn sent(&self, t: f64, source: u32, bytes: &[u8]) {
        lock(&self.state).push_console(t, source | SENT, bytes);
    }

    /// Frames parsed since the last reset.
    pub fn frames(&self) -> u64 {
        lock(&self.state).frames
    }

    /// Copies of the newest samples of every dataset from `since_s` seconds of session time
    /// on (everything kept when `None`), for analysis off the pipeline's path. A text
    /// reading is NaN here: the display keeps numbers only.
    pub fn recent(&self, since_s: Option<f64>) -> Recent {
        let s = lock(&self.state);
        let datasets = s
            .columns
            .iter()
            .zip(&s.series)
            .map(|(meta, series)| {
                let from = since_s.map_or(0, |since| series.t.partition_point(|t| *t < since));
                RecentDataset {
                    id: meta.id.clone(),
                    column: sextant_telemetry::pipeline::column_name(&meta.group, &meta.title),
                    units: meta.units.clone(),
                    t: series.t.range(from..).copied().collect(),
                    v: series.v.range(from..).copied().collect(),
                    oldest_kept_s: series.t.front().copied(),
                    trimmed: series.t.len() == WINDOW_SAMPLES,
                }
            })
            .collect();
        Recent {
            now_s: s.now,
            datasets,
        }
    }

    /// A new subscriber: its first frame carries the dataset list and the kept console bytes.
    pub fn subscribe(&self) -> Subscriber {
        Subscriber::default()
    }

    /// The next display frame for `sub`, or `None` when nothing changed since its last one.
    pub fn frame(&self, options: &DisplayOptions, sub: &mut Subscriber) -> Option<Vec<u8>> {
        let s = lock(&self.state);
        let fresh = sub.generation != Some(s.generation) || sub.columns_rev != s.columns_rev;
        let console_from = if sub.generation.is_none() {
            0
        } else {
            sub.console_next
        };
        let has_console = options.console && s.console.back().is_some_and(|r| r.id >= console_from);
        if !fresh && !has_console && sub.frames == s.frames {
            return None;
        }
        let mut enc = Encoder::new(sub.seq, s.now.unwrap_or(f64::NAN), s.frames);
        if fresh {
            let meta = serde_json::json!({ "datasets": s.columns });
            enc.meta(meta.to_string().as_bytes());
        }
        let text: serde_json::Map<String, serde_json::Value> = s
            .text
            .iter()
            .enumerate()
            .filter_map(|(i, t)| Some((i.to_string(), serde_json::Value::from(t.clone()?))))
            .collect();
        if !text.is_empty() {
            enc.text(serde_json::Value::Object(text).to_string().as_bytes());
        }
        let now = s.now.unwrap_or(0.0);
        let from_t = now - options.time_range_s;
        for (i, series) in s.series.iter().enumerate() {
            let raw = options
                .raw
                .get(&(i as u32))
                .map_or(0, |&n| (n as usize).min(WINDOW_SAMPLES));
            let points = options
                .windows
                .get(&(i as u32))
                .map_or(options.points, |&n| n.min(options.points));
            // Two points (a min and a max) per bucket; no buckets: no window at all.
            let buckets = if points == 0 {
                0
            } else {
                (points as usize / 2).max(1)
            };
            let window = series.window(from_t);
            enc.dataset(
                i as u32,
                s.last[i],
                &Overview::new(&series.overview, from_t, window.first_time()),
                &window,
                (buckets, now - from_t),
                raw,
            );
        }
        if options.console {
            for r in s.console.iter().filter(|r| r.id >= console_from) {
                enc.console(r.t, r.source, &r.bytes);
            }
        }
        sub.generation = Some(s.generation);
        sub.columns_rev = s.columns_rev;
        sub.frames = s.frames;
        if options.console {
            sub.console_next = s.next_console_id;
        }
        sub.seq = sub.seq.wrapping_add(1);
        Some(enc.finish())
    }
}

/// Where one subscriber is: what it has already been sent.
#[derive(Debug, Default, Clone)]
pub struct Subscriber {
    seq: u32,
    generation: Option<u64>,
    columns_rev: u64,
    frames: u64,
    console_next: u64,
}

impl Subscriber {
    /// Sends the dataset list again with the next frame (a new view of the same page),
    /// without replaying console bytes already sent.
    pub fn resend_meta(&mut self) {
        self.columns_rev = u64::MAX;
    }
}

/// Frames and console bytes waiting while a tick holds the state.
#[derive(Default)]
struct Pending {
    frames: VecDeque<(f64, Vec<Value>)>,
    console: VecDeque<(f64, u32, Vec<u8>)>,
    /// What `console` costs, counted as the console itself counts.
    console_bytes: usize,
    columns: Option<Vec<DatasetInfo>>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.frames.is_empty() && self.console.is_empty() && self.columns.is_none()
    }

    fn drain_into(&mut self, s: &mut State) {
        if let Some(columns) = self.columns.take() {
            s.set_columns(&columns);
        }
        for (t, values) in self.frames.drain(..) {
            s.push_frame(t, &values);
        }
        for (t, source, bytes) in self.console.drain(..) {
            s.push_console(t, source, &bytes);
        }
        self.console_bytes = 0;
    }
}

/// The pipeline-thread side of a [`Scope`]. Never blocks on a display tick.
pub struct ScopeSink {
    /// The run this sink was made for: once a newer run reset the scope, what an ending
    /// pipeline still sends (its thread is joined in the background) is dropped instead of
    /// mixing into the new run's data.
    generation: u64,
    state: Arc<Mutex<State>>,
    pending: Pending,
    /// Length of the dataset list last seen, to notice quick-plot columns appearing.
    columns_seen: Option<usize>,
}

/// The state unless a tick holds it right now.
fn try_lock(state: &Mutex<State>) -> Option<MutexGuard<'_, State>> {
    match state.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

impl FrameSink for ScopeSink {
    fn frame(&mut self, event: &FrameEvent<'_>, datasets: &[DatasetInfo]) {
        let t = event.timestamp.elapsed_s();
        let columns_changed = self.columns_seen != Some(datasets.len());
        self.columns_seen = Some(datasets.len());
        // The guard borrows a clone of the Arc, leaving `self.pending` free to change.
        let state = self.state.clone();
        match try_lock(&state) {
            Some(s) if s.generation != self.generation => {}
            Some(mut s) => {
                self.pending.drain_into(&mut s);
                if columns_changed {
                    s.set_columns(datasets);
                }
                s.push_frame(t, event.values);
            }
            None => {
                if columns_changed {
                    self.pending.columns = Some(datasets.to_vec());
                }
                if self.pending.frames.len() == PENDING_FRAMES {
                    self.pending.frames.pop_front();
                }
                self.pending.frames.push_back((t, event.values.to_vec()));
            }
        };
    }

    fn chunk(&mut self, source: usize, chunk: &Chunk) {
        let t = chunk.timestamp.elapsed_s();
        let state = self.state.clone();
        match try_lock(&state) {
            Some(s) if s.generation != self.generation => {}
            Some(mut s) => {
                self.pending.drain_into(&mut s);
                s.push_console(t, source as u32, &chunk.data)
            }
            None => {
                let keep = chunk.data.len().min(CONSOLE_BYTES - CONSOLE_RECORD_COST);
                let data = &chunk.data[chunk.data.len() - keep..];
                let pending = &mut self.pending;
                pending.console.push_back((t, source as u32, data.to_vec()));
                pending.console_bytes += keep + CONSOLE_RECORD_COST;
                // Bound the backlog like the console itself.
                while pending.console_bytes > CONSOLE_BYTES {
                    let Some(old) = pending.console.pop_front() else {
                        break;
                    };
                    pending.console_bytes -= old.2.len() + CONSOLE_RECORD_COST;
                }
            }
        };
    }

    /// What met a locked state waits no longer than the pipeline's next pause: here the
    /// sink may wait for the lock, since the pipeline has nothing else to do.
    fn idle(&mut self) {
        if !self.pending.is_empty() {
            let state = self.state.clone();
            let mut s = lock(&state);
            if s.generation == self.generation {
                self.pending.drain_into(&mut s);
            } else {
                self.pending = Pending::default();
            }
        }
    }

    fn finish(&mut self) {
        self.idle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use sextant_telemetry::Timestamp;

    fn empty(i: u64) -> Chunk {
        Chunk {
            data: Bytes::new(),
            timestamp: Timestamp {
                elapsed_ns: i * 1_000_000,
                unix_ns: 0,
            },
        }
    }

    /// An empty timed send adds a record of no bytes every tick; the console and the
    /// backlog kept while a tick holds the state both trim such records too.
    #[test]
    fn empty_console_records_are_trimmed_in_the_console_and_the_backlog() {
        let most = CONSOLE_BYTES / CONSOLE_RECORD_COST;
        let scope = Scope::new();
        let mut sink = scope.sink();
        for i in 0..100_000 {
            sink.chunk(0, &empty(i));
        }
        assert_eq!(lock(&scope.state).console.len(), most);
        {
            let _tick = lock(&scope.state);
            for i in 0..100_000 {
                sink.chunk(0, &empty(i));
            }
            assert_eq!(sink.pending.console.len(), most);
        }
        sink.finish();
        assert!(sink.pending.console.is_empty());
        assert_eq!(lock(&scope.state).console.len(), most);
    }

    fn one_dataset() -> Vec<DatasetInfo> {
        vec![DatasetInfo {
            id: "d".into(),
            title: "D".into(),
            group: "G".into(),
            units: String::new(),
            source: Some(0),
            slot: Some(0),
        }]
    }

    /// Frame `i`: at `i` ms, value `i`.
    fn push(sink: &mut ScopeSink, i: usize, datasets: &[DatasetInfo]) {
        let values = [Value::Number(i as f64)];
        sink.frame(
            &FrameEvent {
                source: 0,
                timestamp: Timestamp {
                    elapsed_ns: i as u64 * 1_000_000,
                    unix_ns: 0,
                },
                values: &values,
            },
            datasets,
        );
    }

    fn ms(i: usize) -> f64 {
        Timestamp {
            elapsed_ns: i as u64 * 1_000_000,
            unix_ns: 0,
        }
        .elapsed_s()
    }

    /// A frame that meets a reader holding the state is held back, not waited for; once
    /// the pipeline pauses (a device gone quiet, a replay held at its end) it is shown, and
    /// what a replaced run held back never mixes into the new one.
    #[test]
    fn frames_held_back_from_a_busy_display_are_shown_when_the_pipeline_pauses() {
        let scope = Scope::new();
        let mut sink = scope.sink();
        let ds = one_dataset();
        push(&mut sink, 0, &ds);
        let reader = lock(&scope.state);
        push(&mut sink, 1, &ds);
        push(&mut sink, 2, &ds);
        drop(reader);
        assert_eq!(
            scope.frames(),
            1,
            "the pipeline did not wait for the reader"
        );
        sink.idle();
        assert_eq!(scope.frames(), 3);
        assert_eq!(lock(&scope.state).series[0].v.back(), Some(&2.0));
        sink.idle();
        assert_eq!(scope.frames(), 3, "nothing is shown twice");

        let reader = lock(&scope.state);
        push(&mut sink, 3, &ds);
        drop(reader);
        let _next_run = scope.sink();
        sink.idle();
        assert_eq!(scope.frames(), 0, "the next run starts empty");
        assert!(sink.pending.is_empty());
    }

    #[test]
    fn the_raw_window_keeps_exactly_the_newest_window_samples() {
        let scope = Scope::new();
        let mut sink = scope.sink();
        let ds = one_dataset();
        let pushed = WINDOW_SAMPLES + 10;
        for i in 0..pushed {
            push(&mut sink, i, &ds);
        }
        let s = lock(&scope.state);
        let series = &s.series[0];
        assert_eq!(series.t.len(), WINDOW_SAMPLES);
        assert_eq!(series.v.len(), WINDOW_SAMPLES, "the columns stay aligned");
        assert_eq!(series.v.front(), Some(&10.0), "the 10 oldest were dropped");
        assert_eq!(series.t.front(), Some(&ms(10)));
        assert_eq!(series.v.back(), Some(&((pushed - 1) as f64)));
        assert!(
            series
                .v
                .iter()
                .enumerate()
                .all(|(k, v)| *v == (k + 10) as f64),
            "in order, no gaps"
        );
        assert_eq!(s.frames, pushed as u64, "every frame was counted");
    }

    /// The overview is fed through the sink like any run: 16 384 + 5 blocks of 256
    /// samples (about 4.2 M frames; a few seconds unoptimised).
    #[test]
    fn the_overview_keeps_exactly_the_newest_overview_blocks() {
        let scope = Scope::new();
        let mut sink = scope.sink();
        let ds = one_dataset();
        let extra = 5;
        let pushed = BLOCK * (OVERVIEW_BLOCKS + extra);
        for i in 0..pushed {
            push(&mut sink, i, &ds);
        }
        let s = lock(&scope.state);
        let series = &s.series[0];
        assert_eq!(series.overview.len(), OVERVIEW_BLOCKS);
        assert!(
            series.open.is_none(),
            "the last block closed on its 256th sample"
        );
        // Block k covers samples k·BLOCK ..= k·BLOCK + BLOCK − 1; the first `extra` are gone.
        for (n, b) in series.overview.iter().enumerate() {
            let first = (n + extra) * BLOCK;
            let last = first + BLOCK - 1;
            assert_eq!((b.t0, b.t1), (ms(first), ms(last)), "block {n}");
            assert_eq!((b.vmin, b.vmax), (first as f64, last as f64), "block {n}");
        }
        assert_eq!(series.t.len(), WINDOW_SAMPLES);
    }

    /// While a tick holds the state, the sink holds back at most PENDING_FRAMES frames,
    /// dropping the oldest, and hands the rest over once the state is free.
    #[test]
    fn frames_held_back_during_a_tick_keep_exactly_the_newest_pending_frames() {
        let scope = Scope::new();
        let mut sink = scope.sink();
        let ds = one_dataset();
        push(&mut sink, 0, &ds);
        let extra = 7;
        let pushed = PENDING_FRAMES + extra;
        {
            let _tick = lock(&scope.state);
            for i in 1..=pushed {
                push(&mut sink, i, &ds);
            }
            assert_eq!(sink.pending.frames.len(), PENDING_FRAMES);
            let oldest = sink.pending.frames.front().unwrap();
            assert_eq!(oldest.1, vec![Value::Number((1 + extra) as f64)]);
            assert_eq!(oldest.0, ms(1 + extra));
            let newest = sink.pending.frames.back().unwrap();
            assert_eq!(newest.1, vec![Value::Number(pushed as f64)]);
        }
        sink.finish();
        assert!(sink.pending.frames.is_empty());
        let s = lock(&scope.state);
        assert_eq!(
            s.frames,
            1 + PENDING_FRAMES as u64,
            "the dropped frames never reach the scope"
        );
        let v = &s.series[0].v;
        assert_eq!(v.len(), WINDOW_SAMPLES);
        assert_eq!(v.back(), Some(&(pushed as f64)));
        // The window (as long as the backlog) holds exactly the frames kept back.
        assert_eq!(v.front(), Some(&((1 + extra) as f64)));
    }
}
