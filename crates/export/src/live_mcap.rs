//! Recording a live run as MCAP: [`McapSink`] writes every raw chunk and every frame of a
//! connection, as they come, into an MCAP file laid out exactly as a recorded session's
//! export ([`crate::mcap_log`]), so Foxglove Studio or PlotJuggler open it the moment the
//! run ends, with no export pass over the session afterwards.
//!
//! The pipeline thread only queues what it sees (a bounded queue, in items and bytes; what
//! does not fit is dropped and counted, never waited for). A thread of its own encodes and
//! compresses into `<path>.partial`, which takes the place of `path` when the run ends
//! complete: a failed or cut-off recording never truncates the file an earlier run left.
//!
//! Times count from the run's first frame (`elapsed_s`, and the log time from that frame's
//! Unix time); chunks delivered before it are due at 0, as in an export.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::Bytes;
use sextant_devices::queue::{self, TryRecvError, Weigh};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::{Chunk, FrameEvent, FrameSink, Project, Value};

use crate::layout::Column;
use crate::mcap_log::{project_json, McapLog};
use crate::ExportError;

/// Items and bytes queued for the writer thread; past either, what comes is dropped and
/// counted in [`LiveMcapStatus::dropped`].
pub const LIVE_MCAP_QUEUE_ITEMS: usize = 65_536;
pub const LIVE_MCAP_QUEUE_BYTES: usize = 64 << 20;

/// How long a written message may wait in memory before it is handed to the file, when
/// the writer has caught up: what a crash or a full disk costs, at most.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// The live counters of an [`McapSink`], shared with whoever shows them.
#[derive(Debug, Default)]
pub struct LiveMcapStatus {
    /// Frames written (into the `.partial` file until the run ends).
    pub frames: AtomicU64,
    /// Raw chunks written.
    pub chunks: AtomicU64,
    /// Frames and chunks lost: the writer could not keep up, or had stopped on a failure.
    pub dropped: AtomicU64,
    problem: Mutex<Option<sextant_fsutil::WriteProblem>>,
}

impl LiveMcapStatus {
    /// Why writing stopped, when it did.
    pub fn problem(&self) -> Option<sextant_fsutil::WriteProblem> {
        self.problem
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn fail(&self, e: &ExportError) {
        let problem = match e {
            ExportError::Io(io) => sextant_fsutil::WriteProblem::from_io(io),
            other => {
                sextant_fsutil::WriteProblem::from_io(&std::io::Error::other(other.to_string()))
            }
        };
        *self.problem.lock().unwrap_or_else(|p| p.into_inner()) = Some(problem);
    }
}

/// What the pipeline thread hands the writer.
enum Item {
    /// Every dataset so far, when there are more than before.
    Columns(Vec<Column>),
    Chunk {
        source: usize,
        elapsed_ns: u64,
        data: Bytes,
    },
    Frame {
        source: usize,
        elapsed_ns: u64,
        unix_ns: i64,
        values: Vec<Value>,
    },
}

impl Weigh for Item {
    fn weight(&self) -> usize {
        std::mem::size_of::<Item>()
            + match self {
                Item::Columns(c) => c.len() * std::mem::size_of::<Column>(),
                Item::Chunk { data, .. } => data.len(),
                Item::Frame { values, .. } => (values.len() * std::mem::size_of::<Value>())
                    .saturating_add(
                        values
                            .iter()
                            .map(|v| match v {
                                Value::Text(t) => t.len(),
                                _ => 0,
                            })
                            .sum(),
                    ),
            }
    }
}

/// A live MCAP recording of one run; give it to the wiring as a sink.
pub struct McapSink {
    /// The queue's caps: items, bytes.
    queue: (usize, usize),
    path: PathBuf,
    project: serde_json::Value,
    sources: Vec<String>,
    tx: Option<queue::Sender<Item>>,
    writer: Option<JoinHandle<()>>,
    /// Datasets the writer has been told of.
    width: usize,
    status: Arc<LiveMcapStatus>,
}

impl McapSink {
    /// A recording into `path` of a run of `project` (attached to the file; its sources
    /// name the raw channels).
    pub fn new(path: impl Into<PathBuf>, project: &Project) -> McapSink {
        McapSink::with_queue(path, project, LIVE_MCAP_QUEUE_ITEMS, LIVE_MCAP_QUEUE_BYTES)
    }

    /// [`McapSink::new`] with a queue of `items` and `bytes` (the benchmark holds a whole
    /// run in it, to time the writer alone).
    pub fn with_queue(
        path: impl Into<PathBuf>,
        project: &Project,
        items: usize,
        bytes: usize,
    ) -> McapSink {
        McapSink {
            queue: (items, bytes),
            path: path.into(),
            project: project_json(project),
            sources: project.sources.iter().map(|s| s.id.clone()).collect(),
            tx: None,
            writer: None,
            width: 0,
            status: Arc::default(),
        }
    }

    /// The recording's counters and problem, live.
    pub fn status(&self) -> Arc<LiveMcapStatus> {
        self.status.clone()
    }

    /// Queues `item` for the writer; false when the queue had no room for it.
    fn send(&mut self, item: Item) -> bool {
        if self.tx.is_none() {
            let (tx, rx) = queue::bounded(self.queue.0, self.queue.1);
            self.writer = Some(self.spawn_writer(rx));
            self.tx = Some(tx);
        }
        self.tx.as_ref().is_some_and(|tx| tx.try_send(item).is_ok())
    }

    /// Queues a chunk or a frame; what finds the queue full is dropped and counted.
    fn send_counted(&mut self, item: Item) {
        if !self.send(item) {
            self.status.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn spawn_writer(&self, mut rx: queue::Receiver<Item>) -> JoinHandle<()> {
        let path = self.path.clone();
        let status = self.status.clone();
        let project = self.project.clone();
        let sources = self.sources.clone();
        let writer = thread::Builder::new().name("mcap-recording".into());
        let spawned = writer.spawn(move || {
            let mut run = || -> Result<(), ExportError> {
                let mut file = sextant_fsutil::StreamedFile::create(&path)?;
                // The log writes through a second handle of the same open file, so the
                // file stays here to be put in place when the log is done.
                let out = file.file().try_clone()?;
                let mut writer = Writer::new(out, &project, &sources, &status);
                let mut flushed = Instant::now();
                loop {
                    let item = match rx.try_recv() {
                        Ok(item) => item,
                        Err(TryRecvError::Disconnected) => break,
                        // Caught up: what was written goes to the file within FLUSH_EVERY,
                        // without waking more often than that while a device is quiet.
                        Err(TryRecvError::Empty) if writer.unflushed => {
                            let due = FLUSH_EVERY.saturating_sub(flushed.elapsed());
                            if due.is_zero() {
                                writer.flush()?;
                                flushed = Instant::now();
                            } else {
                                thread::sleep(due.min(Duration::from_millis(50)));
                            }
                            continue;
                        }
                        Err(TryRecvError::Empty) => match rx.blocking_recv() {
                            Some(item) => item,
                            None => break,
                        },
                    };
                    writer.take(item)?;
                }
                writer.finish()?;
                file.finish()?;
                Ok(())
            };
            if let Err(e) = run() {
                tracing::error!(path = %path.display(), "the MCAP recording failed: {e}");
                status.fail(&e);
                // What still comes is lost, and counted: the hot path never waits here.
                while rx.blocking_recv().is_some() {
                    status.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        spawned.expect("spawning the MCAP recording thread")
    }
}

impl FrameSink for McapSink {
    fn chunk(&mut self, source: usize, chunk: &Chunk) {
        self.send_counted(Item::Chunk {
            source,
            elapsed_ns: chunk.timestamp.elapsed_ns,
            data: chunk.data.clone(),
        });
    }

    fn frame(&mut self, event: &FrameEvent<'_>, datasets: &[DatasetInfo]) {
        if datasets.len() > self.width {
            // Rare (the first frame, a dataset Quick Plot found): the columns only then.
            // Told again at the next frame if the queue had no room for them now.
            let columns = datasets
                .iter()
                .map(|d| Column {
                    id: d.id.clone(),
                    name: d.column(),
                    group: d.group.clone(),
                    title: d.title.clone(),
                    units: d.units.clone(),
                    source: d.source,
                })
                .collect();
            if self.send(Item::Columns(columns)) {
                self.width = datasets.len();
            }
        }
        self.send_counted(Item::Frame {
            source: event.source,
            elapsed_ns: event.timestamp.elapsed_ns,
            unix_ns: event.timestamp.unix_ns,
            values: event.values.to_vec(),
        });
    }

    fn finish(&mut self) {
        self.tx = None;
        if let Some(w) = self.writer.take() {
            if w.join().is_err() {
                tracing::error!("the MCAP recording thread panicked");
            }
        }
    }
}

impl Drop for McapSink {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The writer thread's state: the file is started at the first frame, whose times the
/// others count from.
struct Writer<'a> {
    project: &'a serde_json::Value,
    sources: &'a [String],
    status: &'a LiveMcapStatus,
    columns: Vec<Column>,
    /// Columns the file has channels for.
    written_columns: usize,
    /// Chunks that came before the first frame.
    early: Vec<(usize, u64, Bytes)>,
    /// The file, until the log is started on it.
    out: Option<std::fs::File>,
    /// Messages were written since the last flush.
    unflushed: bool,
    started: Option<(McapLog<std::fs::File>, u64)>,
}

impl<'a> Writer<'a> {
    fn new(
        out: std::fs::File,
        project: &'a serde_json::Value,
        sources: &'a [String],
        status: &'a LiveMcapStatus,
    ) -> Writer<'a> {
        Writer {
            project,
            sources,
            status,
            columns: Vec::new(),
            written_columns: 0,
            early: Vec::new(),
            out: Some(out),
            unflushed: false,
            started: None,
        }
    }

    fn source_id(&self, index: usize) -> String {
        self.sources
            .get(index)
            .cloned()
            .unwrap_or_else(|| format!("source {index}"))
    }

    /// Starts the file, its times counting from `origin_ns` (elapsed) at `start_unix_ns`.
    fn start(&mut self, origin_ns: u64, start_unix_ns: i64) -> Result<(), ExportError> {
        let Some(file) = self.out.take() else {
            return Ok(());
        };
        let start_ns = start_unix_ns.max(0) as u64;
        let mut metadata = BTreeMap::new();
        metadata.insert(
            "startedUnixMs".to_string(),
            (start_ns / 1_000_000).to_string(),
        );
        let log = McapLog::create(
            file,
            start_ns,
            ("sextant.recording", metadata),
            self.project,
        )?;
        self.started = Some((log, origin_ns));
        self.add_columns()?;
        for (source, elapsed_ns, data) in std::mem::take(&mut self.early) {
            self.chunk(source, elapsed_ns, &data)?;
        }
        Ok(())
    }

    fn add_columns(&mut self) -> Result<(), ExportError> {
        if let Some((log, _)) = &mut self.started {
            if self.columns.len() > self.written_columns {
                log.add_groups(&self.columns, self.written_columns)?;
                self.written_columns = self.columns.len();
            }
        }
        Ok(())
    }

    fn chunk(&mut self, source: usize, elapsed_ns: u64, data: &[u8]) -> Result<(), ExportError> {
        let id = self.source_id(source);
        if let Some((log, origin)) = &mut self.started {
            log.raw(source, &id, elapsed_ns.saturating_sub(*origin), data)?;
            self.status.chunks.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ExportError> {
        self.unflushed = false;
        match &mut self.started {
            Some((log, _)) => log.flush(),
            None => Ok(()),
        }
    }

    fn take(&mut self, item: Item) -> Result<(), ExportError> {
        self.unflushed = true;
        match item {
            Item::Columns(columns) => {
                self.columns = columns;
                self.add_columns()?;
            }
            Item::Chunk {
                source,
                elapsed_ns,
                data,
            } => {
                if self.started.is_some() {
                    self.chunk(source, elapsed_ns, &data)?;
                } else {
                    self.early.push((source, elapsed_ns, data));
                }
            }
            Item::Frame {
                source,
                elapsed_ns,
                unix_ns,
                values,
            } => {
                if self.started.is_none() {
                    self.start(elapsed_ns, unix_ns)?;
                }
                if let Some((log, origin)) = &mut self.started {
                    log.frame(elapsed_ns.saturating_sub(*origin), source, &values)?;
                    self.status.frames.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }

    /// Completes the file; a run without a frame still makes a valid file, with its chunks.
    fn finish(mut self) -> Result<(), ExportError> {
        if self.started.is_none() {
            let origin = self.early.first().map_or(0, |(_, t, _)| *t);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64);
            self.start(origin, now)?;
        }
        if let Some((log, _)) = self.started.take() {
            log.finish()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sextant_telemetry::Timestamp;

    /// Frames offered faster than the writer takes them, through a queue of four: what
    /// does not fit is dropped and counted, what fits is in the file, and the two add up.
    #[test]
    fn what_a_full_queue_cannot_take_is_dropped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.mcap");
        let project: Project = serde_json::from_value(serde_json::json!({
            "format": "sextant-project", "schemaVersion": 1,
            "sources": [{"id": "s", "connection": {"type": "tcp", "host": "127.0.0.1", "port": 9},
                         "parser": {"kind": "delimited"}}],
            "groups": [{"id": "g", "title": "G", "datasets": [{"id": "v", "title": "V", "index": 1}]}]
        }))
        .unwrap();
        let datasets = vec![DatasetInfo {
            id: "v".into(),
            title: "V".into(),
            group: "G".into(),
            units: String::new(),
            source: Some(0),
            slot: Some(0),
        }];
        let mut sink = McapSink::with_queue(&path, &project, 4, 1 << 20);
        let status = sink.status();
        const OFFERED: u64 = 20_000;
        for i in 0..OFFERED {
            let values = [Value::Number(i as f64)];
            sink.frame(
                &FrameEvent {
                    source: 0,
                    timestamp: Timestamp {
                        elapsed_ns: i * 1_000_000,
                        unix_ns: 1_700_000_000_000_000_000,
                    },
                    values: &values,
                },
                &datasets,
            );
        }
        sink.finish();
        let written = status.frames.load(Ordering::Relaxed);
        let dropped = status.dropped.load(Ordering::Relaxed);
        assert!(
            dropped > 0,
            "a queue of four took {written} frames offered at once"
        );
        // The columns went first, into an empty queue; every frame is written or counted.
        assert_eq!(written + dropped, OFFERED);
        let bytes = std::fs::read(&path).unwrap();
        let in_file = mcap::MessageStream::new(&bytes)
            .unwrap()
            .map(|m| m.unwrap())
            .filter(|m| m.channel.topic == "/G")
            .count();
        assert_eq!(in_file as u64, written);
    }

    fn dataset(id: &str, group: &str) -> DatasetInfo {
        DatasetInfo {
            id: id.into(),
            title: id.to_uppercase(),
            group: group.into(),
            units: String::new(),
            source: Some(0),
            slot: None,
        }
    }

    /// Datasets that appear mid-run (Quick Plot finding more channels): a group that grows
    /// goes on under its topic with a schema that has them, a new group gets its topic.
    #[test]
    fn datasets_that_appear_mid_run_are_recorded_under_their_groups_topics() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.mcap");
        let mut sink = McapSink::new(&path, &Project::default());
        let mut datasets = vec![dataset("a", "G")];
        for i in 0..6u64 {
            if i == 3 {
                datasets.push(dataset("b", "G"));
                datasets.push(dataset("c", "H"));
            }
            let values: Vec<Value> = (0..datasets.len())
                .map(|d| Value::Number((i * 10 + d as u64) as f64))
                .collect();
            sink.frame(
                &FrameEvent {
                    source: 0,
                    timestamp: Timestamp {
                        elapsed_ns: i * 1_000,
                        unix_ns: 0,
                    },
                    values: &values,
                },
                &datasets,
            );
        }
        sink.finish();
        let bytes = std::fs::read(&path).unwrap();
        let mut got: Vec<(String, String)> = Vec::new();
        for m in mcap::MessageStream::new(&bytes).unwrap() {
            let m = m.unwrap();
            let schema =
                String::from_utf8(m.channel.schema.as_ref().unwrap().data.to_vec()).unwrap();
            if m.channel.topic == "/G" {
                assert_eq!(
                    schema.contains("\"B\""),
                    m.data.windows(3).any(|w| w == b"\"B\""),
                    "the schema has what the message has"
                );
            }
            got.push((
                m.channel.topic.clone(),
                String::from_utf8(m.data.to_vec()).unwrap(),
            ));
        }
        let g: Vec<&str> = got
            .iter()
            .filter(|(t, _)| t == "/G")
            .map(|(_, d)| d.as_str())
            .collect();
        assert_eq!(g.len(), 6);
        assert_eq!(g[0], r#"{"elapsed_s":0.0,"A":0.0}"#);
        assert_eq!(g[5], r#"{"elapsed_s":5e-6,"A":50.0,"B":51.0}"#);
        let h: Vec<&str> = got
            .iter()
            .filter(|(t, _)| t == "/H")
            .map(|(_, d)| d.as_str())
            .collect();
        assert_eq!(
            h,
            [
                r#"{"elapsed_s":3e-6,"C":32.0}"#,
                r#"{"elapsed_s":4e-6,"C":42.0}"#,
                r#"{"elapsed_s":5e-6,"C":52.0}"#
            ]
        );
    }
}
