//! Wiring running sources to a telemetry pipeline on a thread of its own.
//!
//! ```text
//! source 0 ─┐ forwarder (tokio)                       ┌─> sinks (series, CSV queue, …)
//! source 1 ─┼──────────────> bounded queue ──> pipeline thread ─┤
//! source N ─┘   (drops counted when full)                └─> capture writer thread
//! ```
//!
//! The pipeline thread owns the `Pipeline` and runs it flat out; nothing it calls may
//! block on a consumer. Sinks run on that thread, so they must be quick: the CSV sink only
//! queues rows for its own writer thread (and counts what it had to drop).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use bytes::Bytes;
use sextant_telemetry::pipeline::{DatasetInfo, Pipeline, SourceStats as ParseStats};
use sextant_telemetry::{FrameEvent, Timestamp, Value};

use crate::capture::CaptureWriter;
use crate::queue;
use crate::source::Chunk;

/// Something that consumes frames on the pipeline thread (defined in the telemetry core,
/// so consumers need not depend on the drivers).
pub use sextant_telemetry::sink::FrameSink;

/// Chunks and bytes queued for the capture writer thread; a chunk past a full queue is
/// dropped and counted in [`WiringStats::capture_dropped`].
pub const CAPTURE_QUEUE_CHUNKS: usize = 65_536;
pub const CAPTURE_QUEUE_BYTES: usize = 64 << 20;

/// Rows and bytes queued for a live CSV export's writer thread; a row past a full queue is
/// dropped and counted in [`CsvExportStatus::dropped`]. (A row of 16 numbers is about
/// 0.5 KiB; a project of 500 datasets would fill the byte cap at 4 000 rows.)
pub const CSV_QUEUE_ROWS: usize = 65_536;
pub const CSV_QUEUE_BYTES: usize = 64 << 20;

/// Written rows' buffers kept for reuse once the CSV writer has caught up: what a writer
/// that keeps up has in flight at 100 000 rows/s through a 10 ms stall. A backlog's other
/// buffers are freed then, and their memory given back with the queue's
/// ([`sextant_heap::Backlog`]); kept, they held the backlog's peak for the rest of the run.
pub const CSV_SPENT_ROWS_CAUGHT_UP: usize = 1024;

/// The CSV writer gives written rows back in bunches of this many (or when it has caught
/// up): one lock for many rows, not one a row on each side.
const CSV_GIVE_BACK_EVERY: usize = 64;

/// Written rows' buffers, back from the CSV writer to be filled again.
#[derive(Debug, Default)]
struct SpentRows(Mutex<Vec<Vec<Value>>>);

impl SpentRows {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<Value>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn take(&self) -> Option<Vec<Value>> {
        self.lock().pop()
    }

    /// Moves `rows` (emptied) into the pool.
    fn give_back(&self, rows: &mut Vec<Vec<Value>>) {
        self.lock().append(rows);
    }

    /// Frees all but `keep` buffers.
    fn keep(&self, keep: usize) {
        self.lock().truncate(keep);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Counters of the wiring itself.
#[derive(Debug, Default)]
pub struct WiringStats {
    /// Chunks dropped because the pipeline fell behind.
    pub dropped_chunks: AtomicU64,
    pub frames: AtomicU64,
    /// Chunks the capture writer could not keep up with.
    pub capture_dropped: AtomicU64,
    pub capture_errors: AtomicU64,
}

/// What the pipeline thread publishes after every chunk: the latest values and counters.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub datasets: Vec<DatasetInfo>,
    pub values: Vec<Value>,
    pub last_timestamp: Timestamp,
    pub sources: Vec<ParseStats>,
}

/// A running pipeline.
pub struct Wiring {
    thread: Option<JoinHandle<Pipeline>>,
    pub stats: Arc<WiringStats>,
    snapshot: Arc<Mutex<Snapshot>>,
}

/// Options for [`Wiring::start`].
pub struct WiringOptions {
    /// Chunks buffered between the sources and the pipeline thread…
    pub queue_chunks: usize,
    /// …and bytes.
    pub queue_bytes: usize,
    /// Record every raw chunk here (source index = position in `inputs`).
    pub capture: Option<CaptureWriter<std::io::BufWriter<std::fs::File>>>,
}

impl Default for WiringOptions {
    fn default() -> Self {
        WiringOptions {
            queue_chunks: 8192,
            queue_bytes: 64 << 20,
            capture: None,
        }
    }
}

impl Wiring {
    /// Starts forwarding `inputs` (source index, chunk stream) into `pipeline`. Must be
    /// called inside a tokio runtime (the forwarders are tasks).
    pub fn start(
        mut pipeline: Pipeline,
        inputs: Vec<(usize, queue::Receiver<Chunk>)>,
        mut sinks: Vec<Box<dyn FrameSink>>,
        options: WiringOptions,
    ) -> Wiring {
        let stats = Arc::new(WiringStats::default());
        let snapshot = Arc::new(Mutex::new(Snapshot::default()));
        let (tx, mut rx) =
            queue::bounded::<(usize, Chunk)>(options.queue_chunks, options.queue_bytes);

        let capture_tx = options
            .capture
            .map(|writer| spawn_capture(writer, stats.clone()));
        for (source, mut chunks) in inputs {
            let tx = tx.clone();
            let stats = stats.clone();
            let capture_tx = capture_tx.clone();
            tokio::spawn(async move {
                while let Some(chunk) = chunks.recv().await {
                    if let Some(cap) = &capture_tx {
                        // Bytes clones share the buffer: recording costs no copy here.
                        if cap
                            .try_send((source as u16, chunk.timestamp, chunk.data.clone()))
                            .is_err()
                        {
                            stats.capture_dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    match tx.try_send((source, chunk)) {
                        Ok(()) => {}
                        Err(queue::TrySendError::Full(_)) => {
                            stats.dropped_chunks.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(queue::TrySendError::Closed(_)) => return,
                    }
                }
            });
        }
        drop(tx);
        drop(capture_tx);

        let thread_stats = stats.clone();
        let thread_snapshot = snapshot.clone();
        let thread = thread::Builder::new()
            .name("pipeline".into())
            .spawn(move || {
                while let Some((source, chunk)) = rx.blocking_recv() {
                    let datasets_before = pipeline.datasets().len();
                    let mut frames = 0u64;
                    let mut last: Option<(Timestamp, Vec<Value>)> = None;
                    for sink in sinks.iter_mut() {
                        sink.chunk(source, &chunk);
                    }
                    {
                        let datasets = pipeline.datasets().to_vec();
                        pipeline.push(source, chunk.timestamp, &chunk.data, &mut |ev| {
                            frames += 1;
                            for sink in sinks.iter_mut() {
                                sink.frame(ev, &datasets);
                            }
                            match &mut last {
                                Some((t, v)) => {
                                    *t = ev.timestamp;
                                    v.clone_from_slice(ev.values);
                                }
                                None => last = Some((ev.timestamp, ev.values.to_vec())),
                            }
                        });
                    }
                    thread_stats.frames.fetch_add(frames, Ordering::Relaxed);
                    let mut snap = thread_snapshot.lock().unwrap_or_else(|p| p.into_inner());
                    if snap.datasets.len() != pipeline.datasets().len() || datasets_before == 0 {
                        snap.datasets = pipeline.datasets().to_vec();
                    }
                    if let Some((t, v)) = last {
                        snap.last_timestamp = t;
                        snap.values = v;
                    }
                    snap.sources = (0..pipeline.source_count())
                        .filter_map(|i| pipeline.stats(i).cloned())
                        .collect();
                    drop(snap);
                    if rx.is_empty() {
                        for sink in sinks.iter_mut() {
                            sink.idle();
                        }
                    }
                }
                for sink in sinks.iter_mut() {
                    sink.finish();
                }
                pipeline
            })
            .expect("spawning the pipeline thread");
        Wiring {
            thread: Some(thread),
            stats,
            snapshot,
        }
    }

    /// The latest values and counters.
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits until every input stream has ended (sources closed or finished) and returns
    /// the pipeline, with its final counters.
    pub fn join(mut self) -> Pipeline {
        self.thread
            .take()
            .expect("joined once")
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    }
}

fn spawn_capture(
    mut writer: CaptureWriter<std::io::BufWriter<std::fs::File>>,
    stats: Arc<WiringStats>,
) -> queue::Sender<(u16, Timestamp, Bytes)> {
    let (tx, mut rx) =
        queue::bounded::<(u16, Timestamp, Bytes)>(CAPTURE_QUEUE_CHUNKS, CAPTURE_QUEUE_BYTES);
    thread::Builder::new()
        .name("capture".into())
        .spawn(move || {
            while let Some((source, ts, data)) = rx.blocking_recv() {
                if writer.write(source, ts, &data).is_err() {
                    stats.capture_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            if writer.flush().is_err() {
                stats.capture_errors.fetch_add(1, Ordering::Relaxed);
            }
        })
        .expect("spawning the capture thread");
    tx
}

/// A live CSV export of every frame. The rows are written on a thread of their own (the
/// hot path only queues them, dropping and counting when the disk cannot keep up) into
/// `<path>.partial`, which replaces `path` only when the run ends complete: a failed or
/// cut-off export never truncates the file an earlier run left there. How it goes – rows
/// written, rows dropped, and why writing stopped – is in [`CsvSink::status`].
pub struct CsvSink {
    tx: Option<queue::Sender<(u64, Vec<Value>)>>,
    /// Rows the writer has written, their buffers back to be filled again (see
    /// [`CsvSink::frame`]).
    spent: Option<Arc<SpentRows>>,
    /// A row that found the queue full, kept to be filled again.
    held: Option<Vec<Value>>,
    /// How many datasets the rows have now; the columns they had at the first row make the
    /// header, and when datasets appear later (Quick Plot finding more channels) the file
    /// is given the wider header once, at the end of the run.
    width: usize,
    columns: Arc<std::sync::Mutex<Vec<String>>>,
    path: std::path::PathBuf,
    writer: Option<JoinHandle<()>>,
    status: Arc<CsvExportStatus>,
}

/// The live counters of a [`CsvSink`], shared with whoever shows them.
#[derive(Debug, Default)]
pub struct CsvExportStatus {
    /// Rows written (into the `.partial` file until the run ends).
    pub rows: AtomicU64,
    /// Rows lost: the writer could not keep up, or had stopped on a failure.
    pub dropped: AtomicU64,
    problem: std::sync::Mutex<Option<sextant_fsutil::WriteProblem>>,
}

impl CsvExportStatus {
    /// Why writing stopped, when it did.
    pub fn problem(&self) -> Option<sextant_fsutil::WriteProblem> {
        self.problem
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn fail(&self, e: &std::io::Error) {
        *self.problem.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(sextant_fsutil::WriteProblem::from_io(e));
    }
}

impl CsvSink {
    pub fn new(path: impl Into<std::path::PathBuf>) -> CsvSink {
        CsvSink {
            tx: None,
            spent: None,
            held: None,
            width: 0,
            columns: Arc::default(),
            path: path.into(),
            writer: None,
            status: Arc::default(),
        }
    }

    /// The export's counters and problem, live.
    pub fn status(&self) -> Arc<CsvExportStatus> {
        self.status.clone()
    }

    fn start(&mut self, columns: Vec<String>) {
        let (tx, rx) = csv_queue();
        let spent = Arc::new(SpentRows::default());
        self.writer = Some(self.spawn_writer(columns, rx, Some(spent.clone())));
        self.tx = Some(tx);
        self.spent = Some(spent);
    }

    /// The writer thread: writes the rows `rx` brings under the header `columns`, and
    /// gives each written row's buffer back to `spent`.
    fn spawn_writer(
        &self,
        columns: Vec<String>,
        mut rx: CsvReceiver,
        spent: Option<Arc<SpentRows>>,
    ) -> JoinHandle<()> {
        let path = self.path.clone();
        let status = self.status.clone();
        let latest = self.columns.clone();
        // Named: unnamed, it took the name of the pipeline thread that starts it, and a
        // profile showed the CSV writer's number formatting as the pipeline's.
        let writer = thread::Builder::new().name("csv-export".into());
        let spawned = writer.spawn(move || {
            let mut run = || -> std::io::Result<()> {
                let file = sextant_fsutil::StreamedFile::create(&path)?;
                let mut csv = sextant_telemetry::csv::CsvWriter::new_growing(
                    std::io::BufWriter::new(file),
                    &columns,
                )?;
                let mut written = Vec::with_capacity(CSV_GIVE_BACK_EVERY);
                // The most rows queued since the writer last caught up.
                let mut behind = 0;
                while let Some((t, mut row)) = rx.blocking_recv() {
                    csv.write_row_ns(t, &row)?;
                    status.rows.fetch_add(1, Ordering::Relaxed);
                    let Some(spent) = &spent else { continue };
                    row.clear();
                    written.push(row);
                    let queued = rx.len();
                    behind = behind.max(queued);
                    if queued == 0 || written.len() >= CSV_GIVE_BACK_EVERY {
                        spent.give_back(&mut written);
                    }
                    if queued == 0 && behind > CSV_SPENT_ROWS_CAUGHT_UP {
                        spent.keep(CSV_SPENT_ROWS_CAUGHT_UP);
                        behind = 0;
                    }
                }
                let file = csv.into_inner()?.into_inner().map_err(|e| e.into_error())?;
                let last = latest.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if last.len() > columns.len() {
                    file.finish_rewritten(|input, out| {
                        sextant_telemetry::csv::widen(input, out, &last).map(|_| ())
                    })
                } else {
                    file.finish()
                }
            };
            if let Err(e) = run() {
                tracing::error!(path = %path.display(), "CSV export failed: {e}");
                status.fail(&e);
                // What still comes is lost, and counted: the hot path never waits here.
                while rx.blocking_recv().is_some() {
                    status.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        spawned.expect("spawning the CSV export thread")
    }
}

type CsvReceiver = queue::Receiver<(u64, Vec<Value>)>;

/// The queue between a [`CsvSink`] and its writer thread: [`CSV_QUEUE_ROWS`] rows, and
/// [`CSV_QUEUE_BYTES`].
fn csv_queue() -> (queue::Sender<(u64, Vec<Value>)>, CsvReceiver) {
    queue::bounded(CSV_QUEUE_ROWS, CSV_QUEUE_BYTES)
}

impl FrameSink for CsvSink {
    fn frame(&mut self, event: &FrameEvent<'_>, datasets: &[DatasetInfo]) {
        if self.tx.is_none() || datasets.len() > self.width {
            // Rare (the first row, a dataset appearing): the names are built only then.
            let names: Vec<String> = datasets.iter().map(|d| d.column()).collect();
            self.width = names.len();
            *self.columns.lock().unwrap_or_else(|p| p.into_inner()) = names.clone();
            if self.tx.is_none() {
                self.start(names);
            }
        }
        if let Some(tx) = &self.tx {
            // A written row's buffer is filled again; a new one only when none is back,
            // that is when every row there is waits in the queue. So the rows' memory
            // never passes a full queue's, and a queue that fills again and again (a disk
            // that stalls now and then) takes no new memory, and no allocator work a row.
            let mut row = self
                .held
                .take()
                .or_else(|| self.spent.as_ref().and_then(|s| s.take()))
                .unwrap_or_default();
            row.clear();
            row.extend_from_slice(event.values);
            if let Err(
                queue::TrySendError::Full((_, row)) | queue::TrySendError::Closed((_, row)),
            ) = tx.try_send((event.timestamp.elapsed_ns, row))
            {
                self.status.dropped.fetch_add(1, Ordering::Relaxed);
                self.held = Some(row);
            }
        }
    }

    fn finish(&mut self) {
        self.tx = None;
        self.spent = None;
        self.held = None;
        if let Some(w) = self.writer.take() {
            if w.join().is_err() {
                tracing::error!("CSV writer thread panicked");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datasets() -> Vec<DatasetInfo> {
        vec![DatasetInfo {
            id: "v".into(),
            title: "V".into(),
            group: "G".into(),
            units: String::new(),
            source: Some(0),
            slot: Some(0),
        }]
    }

    fn row(sink: &mut CsvSink, i: usize, datasets: &[DatasetInfo]) {
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

    /// A sink that holds every frame back until the pipeline pauses, like the display
    /// when its state is busy: it shows `shown` frames.
    struct HoldsBack {
        held: u64,
        shown: Arc<AtomicU64>,
    }

    impl FrameSink for HoldsBack {
        fn frame(&mut self, _: &FrameEvent<'_>, _: &[DatasetInfo]) {
            self.held += 1;
        }
        fn idle(&mut self) {
            self.shown
                .fetch_add(std::mem::take(&mut self.held), Ordering::SeqCst);
        }
    }

    /// The pipeline tells its sinks when it has parsed all it was given, while the device
    /// is still connected: a source gone quiet leaves no frame held back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sinks_are_told_when_the_pipeline_has_caught_up() {
        let project: sextant_telemetry::Project = serde_json::from_value(serde_json::json!({
            "format": "sextant-project", "schemaVersion": 1,
            "sources": [{"id": "s", "connection": {"type": "tcp", "host": "127.0.0.1", "port": 9},
                         "parser": {"kind": "delimited"}}],
            "groups": [{"id": "g", "title": "G", "datasets": [{"id": "v", "title": "V", "index": 1}]}]
        }))
        .unwrap();
        let (tx, chunks) = queue::bounded(16, 1 << 20);
        let shown = Arc::new(AtomicU64::new(0));
        let wiring = Wiring::start(
            Pipeline::new(&project).unwrap(),
            vec![(0, chunks)],
            vec![Box::new(HoldsBack {
                held: 0,
                shown: shown.clone(),
            })],
            WiringOptions::default(),
        );
        let mut sent = 0;
        for burst in 1..=3u64 {
            for i in 0..burst * 100 {
                let chunk = Chunk {
                    data: Bytes::from(format!("{i}\n")),
                    timestamp: Timestamp {
                        elapsed_ns: sent * 1_000,
                        unix_ns: 0,
                    },
                };
                while let Err(queue::TrySendError::Full(_)) = tx.try_send(chunk.clone()) {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                sent += 1;
            }
            // The input stays open: only a pause tells the sink to show what it holds.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while shown.load(Ordering::SeqCst) != sent && std::time::Instant::now() < deadline {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            assert_eq!(shown.load(Ordering::SeqCst), sent, "after burst {burst}");
        }
        drop(tx);
        wiring.join();
        assert_eq!(shown.load(Ordering::SeqCst), sent);
    }

    /// A writer that cannot keep up, made certain: the sink's queue is the one `start`
    /// makes, but its writer thread starts only once the rows are offered. Every row past
    /// the full queue is dropped and counted; the queue's rows are all written.
    #[test]
    fn rows_past_a_full_csv_queue_are_dropped_and_counted() {
        const PAST: usize = 100;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("live.csv");
        let datasets = datasets();
        let mut sink = CsvSink::new(&path);
        let status = sink.status();
        let columns: Vec<String> = datasets.iter().map(|d| d.column()).collect();
        *sink.columns.lock().unwrap() = columns.clone();
        sink.width = columns.len();
        let (tx, rx) = csv_queue();
        sink.tx = Some(tx);

        for i in 0..CSV_QUEUE_ROWS + PAST {
            row(&mut sink, i, &datasets);
        }
        assert_eq!(status.dropped.load(Ordering::SeqCst), PAST as u64);
        assert_eq!(status.rows.load(Ordering::SeqCst), 0);

        // The writer catches up: exactly the queue's rows reach the file, the oldest ones.
        sink.writer = Some(sink.spawn_writer(columns, rx, None));
        sink.finish();
        assert!(status.problem().is_none(), "{:?}", status.problem());
        assert_eq!(status.rows.load(Ordering::SeqCst), CSV_QUEUE_ROWS as u64);
        assert_eq!(status.dropped.load(Ordering::SeqCst), PAST as u64);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), CSV_QUEUE_ROWS + 1);
        assert_eq!(lines[0], "elapsed_s,G/V");
        assert_eq!(lines[1], "0.000000,0");
        assert_eq!(
            lines[CSV_QUEUE_ROWS],
            format!(
                "{:.6},{}",
                (CSV_QUEUE_ROWS - 1) as f64 / 1000.0,
                CSV_QUEUE_ROWS - 1
            )
        );
    }

    /// A written row's buffer is filled again instead of a new one: the rows' memory is a
    /// full queue's at most, however often the queue fills. The producer's side, made
    /// certain with a queue this test empties itself; then the writer thread's side.
    #[test]
    fn written_rows_are_filled_again_not_allocated_anew() {
        let dir = tempfile::tempdir().unwrap();
        let datasets = datasets();
        let mut sink = CsvSink::new(dir.path().join("live.csv"));
        sink.width = 1;
        let (tx, mut rx) = csv_queue();
        let spent = Arc::new(SpentRows::default());
        sink.tx = Some(tx);
        sink.spent = Some(spent.clone());

        for i in 0..3 {
            row(&mut sink, i, &datasets);
        }
        let mut first = Vec::new();
        for _ in 0..3 {
            let (_, mut r) = rx.try_recv().unwrap();
            first.push(r.as_ptr());
            r.clear();
            spent.give_back(&mut vec![r]);
        }
        // The pool is a stack: the last given back is the first filled.
        first.reverse();
        for i in 3..6 {
            row(&mut sink, i, &datasets);
        }
        let mut again = Vec::new();
        for i in 3..6 {
            let (t, r) = rx.try_recv().unwrap();
            assert_eq!(
                (t, &r[..]),
                ((i * 1_000_000) as u64, &[Value::Number(i as f64)][..])
            );
            again.push(r.as_ptr());
        }
        assert_eq!(
            again, first,
            "the rows were not the written ones filled again"
        );

        // A row that finds the queue full is kept, and is the next one filled.
        for i in 0..CSV_QUEUE_ROWS + 1 {
            row(&mut sink, i, &datasets);
        }
        assert_eq!(sink.status.dropped.load(Ordering::SeqCst), 1);
        let held = sink
            .held
            .as_ref()
            .map(|r| r.as_ptr())
            .expect("the dropped row is kept");
        rx.try_recv().unwrap();
        row(&mut sink, 7, &datasets);
        assert!(sink.held.is_none());
        let last = std::iter::from_fn(|| rx.try_recv().ok()).last().unwrap();
        assert_eq!(last.1.as_ptr(), held);

        // The writer thread sends what it wrote back.
        let mut sink = CsvSink::new(dir.path().join("live2.csv"));
        let status = sink.status();
        for i in 0..10 {
            row(&mut sink, i, &datasets);
        }
        let spent = sink.spent.take().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let back = loop {
            if let Some(row) = spent.take() {
                break row;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no written row came back"
            );
            thread::sleep(std::time::Duration::from_millis(5));
        };
        assert!(back.is_empty() && back.capacity() >= 1);
        sink.finish();
        assert_eq!(status.rows.load(Ordering::SeqCst), 10);
    }

    /// A writer that fell a whole queue behind gives back every written row while it
    /// catches up, and keeps only what a writer that keeps up needs once it has: the rest
    /// are freed, not held for the rest of the run.
    #[test]
    fn a_caught_up_csv_writer_keeps_only_the_rows_it_needs() {
        let dir = tempfile::tempdir().unwrap();
        let datasets = datasets();
        let mut sink = CsvSink::new(dir.path().join("live.csv"));
        let status = sink.status();
        let columns: Vec<String> = datasets.iter().map(|d| d.column()).collect();
        *sink.columns.lock().unwrap() = columns.clone();
        sink.width = columns.len();
        let (tx, rx) = csv_queue();
        sink.tx = Some(tx);
        let spent = Arc::new(SpentRows::default());
        sink.spent = Some(spent.clone());
        // The backlog: the writer starts only once 20 000 rows wait.
        const BACKLOG: usize = 20_000;
        for i in 0..BACKLOG {
            row(&mut sink, i, &datasets);
        }
        sink.writer = Some(sink.spawn_writer(columns, rx, Some(spent.clone())));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while status.rows.load(Ordering::SeqCst) < BACKLOG as u64 {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer did not catch up"
            );
            thread::sleep(std::time::Duration::from_millis(5));
        }
        // The last row's give-back and the trim follow its count by a moment.
        while spent.len() > CSV_SPENT_ROWS_CAUGHT_UP && std::time::Instant::now() < deadline {
            thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            spent.len(),
            CSV_SPENT_ROWS_CAUGHT_UP,
            "a caught-up writer kept the backlog's rows"
        );
        sink.finish();
        assert_eq!(status.rows.load(Ordering::SeqCst), BACKLOG as u64);
        assert_eq!(status.dropped.load(Ordering::SeqCst), 0);
    }
}
