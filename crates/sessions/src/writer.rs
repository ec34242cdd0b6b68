//! Recording: a [`SessionWriter`] owns one session's rows and writes them on a thread of
//! its own.
//!
//! ```text
//! pipeline thread ── SessionSink ──> queue of batches ──> writer thread ──> SQLite
//!   (rows gathered into batches)     (capped in rows and bytes;   (one transaction
//!                                     full: drop + count)          per commit)
//! ```
//!
//! The producers never wait: a batch that would take the queue past
//! [`WriterOptions::queue`] rows or [`WriterOptions::queue_bytes`] bytes is dropped and
//! its rows counted, so a slow disk can never stall ingestion, and a writer that fell
//! behind holds a bounded amount of memory whatever the rows' size. A [`SessionSink`]
//! copies each raw chunk into its batch rather than keep the chunk's own buffer (which may
//! be a whole read buffer) alive in the queue. The writer commits every
//! [`WriterOptions::batch_interval`] or [`WriterOptions::batch_rows`] rows, whichever
//! comes first, and keeps the session's counters (rows, bytes, drops, first and last time)
//! current in the same transaction, so whatever was committed before a crash is a
//! consistent session.
//!
//! [`SessionWriter::close`] drains what was queued before it, stamps the session's end
//! time and returns the final counts. Dropping a writer without closing it abandons the
//! recording: the batch in hand is committed, the end time stays empty, and the session
//! reads back like one cut short by a crash.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, TransactionBehavior};
use schemars::JsonSchema;
use serde::Serialize;
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::project::Project;
use sextant_telemetry::Chunk;
use sextant_telemetry::FrameEvent;
use sextant_telemetry::FrameSink;

use crate::{codec, schema, SessionError, SessionId, WriteProblem};

/// Tuning of a [`SessionWriter`].
#[derive(Debug, Clone, Copy)]
pub struct WriterOptions {
    /// Rows (chunks and frames) queued before new ones are dropped.
    pub queue: usize,
    /// Bytes queued (raw chunks' bytes, encoded frames and their times) before new rows
    /// are dropped. With `queue`, it bounds what a writer that fell behind holds whatever
    /// the rows' size: 24-byte CAN frames and 100 KiB simulator reads alike.
    pub queue_bytes: usize,
    /// Commit once this many rows are in hand…
    pub batch_rows: usize,
    /// …or this long after the first row of a batch arrived.
    pub batch_interval: Duration,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            // Ten seconds of a 100 000 frames/s device, if its frames are small…
            queue: 1 << 20,
            // …and a few seconds of it when they are not.
            queue_bytes: 64 << 20,
            batch_rows: 10_000,
            batch_interval: Duration::from_millis(100),
        }
    }
}

/// What a new session starts with.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// Shown in lists; `Session <id>` when empty.
    pub title: String,
    /// The project the session is recorded with, embedded so the session replays and
    /// exports on its own.
    pub project: Project,
    pub tags: Vec<String>,
}

/// Live counters of a writer; readable from any thread.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Rows accepted into the queue.
    pub queued_chunks: AtomicU64,
    pub queued_frames: AtomicU64,
    /// Rows dropped because the queue was full (or their batch failed to commit).
    pub dropped_chunks: AtomicU64,
    pub dropped_frames: AtomicU64,
    /// Rows committed to the database.
    pub written_chunks: AtomicU64,
    pub written_frames: AtomicU64,
    pub written_bytes: AtomicU64,
    pub commits: AtomicU64,
    /// Batches that failed to commit.
    pub errors: AtomicU64,
    /// Why the last batch failed, while the failure lasts (a later commit clears it).
    pub problem: std::sync::Mutex<Option<WriteProblem>>,
}

/// A writer's counts, live or final.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriterReport {
    pub id: SessionId,
    /// Raw chunks committed.
    pub chunks: u64,
    /// Raw bytes committed.
    pub bytes: u64,
    /// Parsed frames committed.
    pub frames: u64,
    /// Raw chunks lost because the writer could not keep up.
    pub dropped_chunks: u64,
    /// Parsed frames lost because the writer could not keep up.
    pub dropped_frames: u64,
    /// Batches that failed to commit (their rows count as dropped).
    pub errors: u64,
    /// Why the recording is not being saved right now (the disk is full…); absent while
    /// commits succeed. The person is shown it: recording goes on and resumes saving by
    /// itself once the cause is gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<WriteProblem>,
}

impl WriterStats {
    fn report(&self, id: SessionId) -> WriterReport {
        WriterReport {
            id,
            chunks: self.written_chunks.load(Ordering::Relaxed),
            bytes: self.written_bytes.load(Ordering::Relaxed),
            frames: self.written_frames.load(Ordering::Relaxed),
            dropped_chunks: self.dropped_chunks.load(Ordering::Relaxed),
            dropped_frames: self.dropped_frames.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            problem: self
                .problem
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }
}

enum Msg {
    Columns(Vec<(String, String, String)>),
    Rows(Batch),
    Close,
}

impl Msg {
    fn rows(&self) -> usize {
        match self {
            Msg::Rows(batch) => batch.rows.len(),
            _ => 0,
        }
    }
}

/// Rows travel to the writer thread in batches. The hot path encodes each frame straight
/// into the batch's one buffer and copies each raw chunk's bytes beside it: a row costs no
/// allocation and no queue operation of its own, and what the queue holds is exactly what
/// it counts (a chunk sharing its read buffer would keep the whole buffer alive).
#[derive(Default)]
struct Batch {
    rows: Vec<Row>,
    data: Vec<u8>,
    chunks: u64,
    frames: u64,
}

#[derive(Clone, Copy)]
struct Row {
    frame: bool,
    source: u32,
    elapsed_ns: u64,
    unix_ns: i64,
    /// Where this row's bytes end in [`Batch::data`] (they start where the previous
    /// row's end).
    end: usize,
}

impl Batch {
    fn push_chunk(&mut self, source: usize, chunk: &Chunk) {
        self.data.extend_from_slice(&chunk.data);
        self.push_row(
            false,
            source,
            chunk.timestamp.elapsed_ns,
            chunk.timestamp.unix_ns,
        );
        self.chunks += 1;
    }

    fn push_frame(&mut self, event: &FrameEvent<'_>) {
        codec::encode_into(event.values, &mut self.data);
        self.push_row(true, event.source, event.timestamp.elapsed_ns, 0);
        self.frames += 1;
    }

    fn push_row(&mut self, frame: bool, source: usize, elapsed_ns: u64, unix_ns: i64) {
        self.rows.push(Row {
            frame,
            source: source as u32,
            elapsed_ns,
            unix_ns,
            end: self.data.len(),
        });
    }

    /// What the batch holds, as counted against [`WriterOptions::queue_bytes`].
    fn weight(&self) -> usize {
        self.data.len() + self.rows.len() * std::mem::size_of::<Row>()
    }

    fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Each row with its bytes.
    fn iter(&self) -> impl Iterator<Item = (&Row, &[u8])> {
        let mut start = 0;
        self.rows.iter().map(move |row| {
            let bytes = &self.data[start..row.end];
            start = row.end;
            (row, bytes)
        })
    }

    fn clear(&mut self) {
        self.rows.clear();
        self.data.clear();
        self.chunks = 0;
        self.frames = 0;
    }
}

/// The queue between the producers and the writer thread, capped by rows and by bytes.
struct Queue {
    tx: mpsc::Sender<Msg>,
    rows: AtomicUsize,
    bytes: AtomicUsize,
    max_rows: usize,
    max_bytes: usize,
    /// Written batches, emptied, for the producers to fill again: their buffers keep the
    /// size they grew to, and the hot path allocates nothing once the recording runs.
    spent: Mutex<Vec<Batch>>,
}

/// What became of a batch offered to the [`Queue`].
enum Offer {
    Taken,
    /// Dropped: the writer is that far behind.
    Full,
    /// The recording has ended; later rows belong to no session.
    Ended,
}

/// Spent batches kept for reuse while the writer is behind; more are freed.
const SPENT_BATCHES: usize = 64;

/// Spent batches kept once the writer has caught up: what a writer that keeps up has in
/// flight (one filling, one or two queued, one being written) with room to spare. The
/// rest of what a backlog left are freed, and their memory given back with the backlog's
/// ([`sextant_heap::Backlog`]); kept, 64 batches of up to 256 KiB each held a recording's
/// memory 15 MiB above its level for as long as it ran.
const SPENT_BATCHES_CAUGHT_UP: usize = 8;

/// A [`SessionSink`] sends its batch on once it holds this many rows or bytes (or when the
/// pipeline has caught up): big enough that queueing costs nothing per row, small enough
/// that a dropped batch is a blip.
const SINK_BATCH_ROWS: usize = 512;
const SINK_BATCH_BYTES: usize = 256 << 10;

impl Queue {
    /// Takes `batch` if the queue has room for it (an empty queue takes any batch, so one
    /// outsized chunk is not refused for ever); `Err` gives it back.
    fn offer(&self, batch: Batch) -> Offer {
        let (rows, bytes) = (batch.rows.len(), batch.weight());
        let rows_before = self.rows.fetch_add(rows, Ordering::AcqRel);
        let bytes_before = self.bytes.fetch_add(bytes, Ordering::AcqRel);
        let room = rows_before == 0
            || (rows_before + rows <= self.max_rows && bytes_before + bytes <= self.max_bytes);
        if !room {
            self.release(rows, bytes);
            self.recycle(batch);
            return Offer::Full;
        }
        match self.tx.send(Msg::Rows(batch)) {
            Ok(()) => Offer::Taken,
            Err(mpsc::SendError(msg)) => {
                self.release(rows, bytes);
                if let Msg::Rows(batch) = msg {
                    self.recycle(batch);
                }
                Offer::Ended
            }
        }
    }

    fn release(&self, rows: usize, bytes: usize) {
        self.rows.fetch_sub(rows, Ordering::AcqRel);
        self.bytes.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// An empty batch, reusing a spent one's buffers when there is one.
    fn fresh(&self) -> Batch {
        self.spent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_default()
    }

    /// Gives back a batch the writer is done with.
    fn spend(&self, batch: Batch) {
        self.release(batch.rows.len(), batch.weight());
        self.recycle(batch);
    }

    /// Bytes queued and not yet written.
    fn held(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }

    /// After a commit's batches are spent: once nothing is queued, frees the spent
    /// batches a backlog left past what a writer that keeps up needs, and has `backlog`
    /// give their memory back if the queue had held a large one.
    fn after_commit(&self, backlog: &mut sextant_heap::Backlog) {
        let held = self.held();
        if held == 0 {
            self.spent
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .truncate(SPENT_BATCHES_CAUGHT_UP);
        }
        backlog.observe(held);
    }

    /// Keeps an unqueued batch's buffers for the producers.
    fn recycle(&self, mut batch: Batch) {
        batch.clear();
        let mut spent = self.spent.lock().unwrap_or_else(PoisonError::into_inner);
        if spent.len() < SPENT_BATCHES {
            spent.push(batch);
        }
    }
}

/// The producer side of a writer: cheap to clone, never blocks.
#[derive(Clone)]
pub struct Feed {
    queue: Arc<Queue>,
    stats: Arc<WriterStats>,
}

impl Feed {
    /// Queues `batch`, counting its rows as queued or dropped; `false` when it was dropped
    /// (or the recording has ended).
    fn send(&self, batch: Batch) -> bool {
        let (chunks, frames) = (batch.chunks, batch.frames);
        let s = &self.stats;
        match self.queue.offer(batch) {
            Offer::Taken => {
                s.queued_chunks.fetch_add(chunks, Ordering::Relaxed);
                s.queued_frames.fetch_add(frames, Ordering::Relaxed);
                true
            }
            Offer::Full => {
                s.dropped_chunks.fetch_add(chunks, Ordering::Relaxed);
                s.dropped_frames.fetch_add(frames, Ordering::Relaxed);
                false
            }
            Offer::Ended => false,
        }
    }

    /// Queues a raw chunk; `false` when it was dropped (or the recording has ended).
    pub fn chunk(&self, source: usize, chunk: &Chunk) -> bool {
        let mut batch = self.queue.fresh();
        batch.push_chunk(source, chunk);
        self.send(batch)
    }

    /// Queues the session's columns. They are never dropped: rows are what a full queue
    /// refuses, and a frame without its columns could not be exported.
    pub fn columns(&self, datasets: &[DatasetInfo]) {
        let columns = datasets
            .iter()
            .map(|d| (d.id.clone(), d.column(), d.units.clone()))
            .collect();
        // After the recording ended there is nobody to tell.
        let _ = self.queue.tx.send(Msg::Columns(columns));
    }

    /// Queues a parsed frame; `false` when it was dropped (or the recording has ended).
    pub fn frame(&self, event: &FrameEvent<'_>) -> bool {
        let mut batch = self.queue.fresh();
        batch.push_frame(event);
        self.send(batch)
    }

    pub fn stats(&self) -> &Arc<WriterStats> {
        &self.stats
    }
}

/// Records a wiring's raw chunks and frames into one session (see [`FrameSink::chunk`]).
/// Rows are gathered into batches on the pipeline thread and sent on when a batch is full,
/// when the pipeline has caught up, and when the sink is dropped (a recording stopped).
pub struct SessionSink {
    feed: Feed,
    batch: Batch,
    columns_sent: bool,
}

impl SessionSink {
    pub fn new(feed: Feed) -> SessionSink {
        SessionSink {
            batch: feed.queue.fresh(),
            feed,
            columns_sent: false,
        }
    }

    /// Sends the batch in hand on.
    pub fn flush(&mut self) {
        if !self.batch.is_empty() {
            let next = self.feed.queue.fresh();
            self.feed.send(std::mem::replace(&mut self.batch, next));
        }
    }

    fn flush_if_full(&mut self) {
        if self.batch.rows.len() >= SINK_BATCH_ROWS || self.batch.data.len() >= SINK_BATCH_BYTES {
            self.flush();
        }
    }
}

impl FrameSink for SessionSink {
    fn chunk(&mut self, source: usize, chunk: &Chunk) {
        self.batch.push_chunk(source, chunk);
        self.flush_if_full();
    }

    fn frame(&mut self, event: &FrameEvent<'_>, datasets: &[DatasetInfo]) {
        // The columns go first, like a CSV header: the writer takes messages in order, and
        // this frame is still in the batch in hand.
        if !self.columns_sent {
            self.feed.columns(datasets);
            self.columns_sent = true;
        }
        self.batch.push_frame(event);
        self.flush_if_full();
    }

    fn idle(&mut self) {
        self.flush();
    }

    fn finish(&mut self) {
        self.flush();
    }
}

impl Drop for SessionSink {
    fn drop(&mut self) {
        self.flush();
    }
}

/// One session being recorded.
pub struct SessionWriter {
    id: SessionId,
    feed: Option<Feed>,
    stats: Arc<WriterStats>,
    abandon: Arc<AtomicBool>,
    /// The recording's outcome, once its thread has written the last row.
    done: Option<mpsc::Receiver<thread::Result<Result<(), SessionError>>>>,
}

pub(crate) fn unix_now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Checks a tag: non-empty, short, one line.
pub(crate) fn check_tag(tag: &str) -> Result<String, SessionError> {
    let tag = tag.trim();
    if tag.is_empty() || tag.chars().count() > 64 || tag.chars().any(char::is_control) {
        return Err(SessionError::Invalid(format!(
            "tag `{tag}` is not usable: a tag is 1 to 64 characters on one line"
        )));
    }
    Ok(tag.to_string())
}

impl SessionWriter {
    /// Creates the session in the database at `db` (created if missing) and starts the
    /// writer thread.
    pub fn start(
        db: &Path,
        session: NewSession,
        options: WriterOptions,
    ) -> Result<SessionWriter, SessionError> {
        let tags = session
            .tags
            .iter()
            .map(|t| check_tag(t))
            .collect::<Result<Vec<_>, _>>()?;
        let mut conn = schema::open(db)?;
        let id = {
            let tx = conn.transaction()?;
            tx.execute(
                "INSERT INTO sessions (title, started_unix_ns, project) VALUES (?1, ?2, ?3)",
                params![
                    session.title.trim(),
                    unix_now_ns(),
                    session.project.to_json_string()
                ],
            )?;
            let id = tx.last_insert_rowid();
            if session.title.trim().is_empty() {
                tx.execute(
                    "UPDATE sessions SET title = ?2 WHERE id = ?1",
                    params![id, format!("Session {id}")],
                )?;
            }
            for tag in &tags {
                tx.execute(
                    "INSERT OR IGNORE INTO session_tags (session, tag) VALUES (?1, ?2)",
                    params![id, tag],
                )?;
            }
            tx.commit()?;
            id
        };
        // Unbounded as a channel: the queue's own counts of rows and bytes bound it.
        let (tx, rx) = mpsc::channel();
        let queue = Arc::new(Queue {
            tx,
            rows: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            max_rows: options.queue.max(1),
            max_bytes: options.queue_bytes.max(1),
            spent: Mutex::new(Vec::new()),
        });
        let stats = Arc::new(WriterStats::default());
        let abandon = Arc::new(AtomicBool::new(false));
        let mut state = Thread {
            conn,
            id,
            queue: queue.clone(),
            stats: stats.clone(),
            abandon: abandon.clone(),
            options,
            totals: Totals::default(),
            block: codec::BlockBuilder::default(),
            chunk_blocks: Vec::new(),
            backlog: sextant_heap::Backlog::new(),
        };
        let (done_tx, done) = mpsc::sync_channel(1);
        on_recording_thread(Box::new(move || {
            // A panic ends this recording, not the thread: it goes back to wait for the next.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| state.run(rx)));
            drop(state);
            Box::new(move || drop(done_tx.send(outcome)))
        }))
        .map_err(SessionError::Io)?;
        Ok(SessionWriter {
            id,
            feed: Some(Feed {
                queue,
                stats: stats.clone(),
            }),
            stats,
            abandon,
            done: Some(done),
        })
    }

    pub fn id(&self) -> SessionId {
        self.id
    }

    /// A producer handle (for raw chunks or frames from anywhere).
    pub fn feed(&self) -> Feed {
        self.feed.clone().expect("the feed lives until close")
    }

    /// A sink that records a wiring's raw chunks and frames into this session.
    pub fn sink(&self) -> SessionSink {
        SessionSink::new(self.feed())
    }

    pub fn stats(&self) -> &Arc<WriterStats> {
        &self.stats
    }

    /// The counts so far.
    pub fn report(&self) -> WriterReport {
        self.stats.report(self.id)
    }

    /// Writes everything queued before this call, stamps the session's end, and waits for
    /// the writer thread. Rows offered afterwards are ignored.
    pub fn close(mut self) -> Result<WriterReport, SessionError> {
        if let Some(feed) = self.feed.take() {
            // A blocking send is right here: closing may wait for the queue to drain, the
            // producers never do.
            let _ = feed.queue.tx.send(Msg::Close);
        }
        let result = match self.done.take().map(|done| done.recv()) {
            Some(Ok(Ok(r))) => r,
            // It panicked, or its thread is gone without a word.
            Some(Ok(Err(_)) | Err(_)) => Err(SessionError::WriterPanicked(self.id)),
            None => Ok(()),
        };
        result.map(|()| self.stats.report(self.id))
    }
}

impl Drop for SessionWriter {
    fn drop(&mut self) {
        if self.done.is_some() {
            // Abandoned: the thread commits what it holds and stops; the session keeps no
            // end time, like one cut short by a crash.
            self.abandon.store(true, Ordering::Relaxed);
        }
    }
}

/// A recording's work, run on a recording thread. What it returns runs once the thread is
/// idle again: telling the recording's owner it is done then means that the next recording
/// started finds this thread waiting.
type Job = Box<dyn FnOnce() -> Box<dyn FnOnce()> + Send>;

/// Recording threads that have finished a session, waiting for the next one.
///
/// Why not a thread per recording: a recording's high-water memory (SQLite's page cache,
/// the block being built, a batch in hand) stays in its thread's allocator arena after it
/// is freed, and glibc gives each new thread whichever arena an ended thread left. Over many
/// recordings every arena came to hold one recording's high-water mark: an hour-long soak,
/// with a new recording every three minutes, rose 16 MiB in steps at the rotations, spread
/// over five arenas. A thread that lives on keeps recording in the arena it has.
static IDLE: Mutex<Vec<mpsc::Sender<Job>>> = Mutex::new(Vec::new());

/// Runs `job` on an idle recording thread, or on a new one when every one is busy (as
/// many threads as recordings ever ran at once; they live as long as the process).
fn on_recording_thread(job: Job) -> std::io::Result<()> {
    let idle = IDLE.lock().unwrap_or_else(PoisonError::into_inner).pop();
    let job = match idle {
        Some(thread) => match thread.send(job) {
            Ok(()) => return Ok(()),
            // Its thread is gone (it cannot be, short of an abort): start another.
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    let (tx, rx) = mpsc::channel::<Job>();
    let again = tx.clone();
    tx.send(job).expect("the receiver is right here");
    thread::Builder::new()
        .name("session-writer".into())
        .spawn(move || {
            for job in rx {
                let then = job();
                IDLE.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(again.clone());
                then();
            }
        })
        .map(drop)
}

/// What the session row says so far (only advanced after a successful commit).
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    chunks: u64,
    bytes: u64,
    frames: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
}

impl Totals {
    fn seen(&mut self, ns: u64) {
        self.first_ns = Some(self.first_ns.map_or(ns, |f| f.min(ns)));
        self.last_ns = Some(self.last_ns.map_or(ns, |l| l.max(ns)));
    }
}

struct Thread {
    conn: Connection,
    id: SessionId,
    queue: Arc<Queue>,
    stats: Arc<WriterStats>,
    abandon: Arc<AtomicBool>,
    options: WriterOptions,
    totals: Totals,
    /// The block of frames being built; kept to reuse its buffer.
    block: codec::BlockBuilder,
    /// The block of chunks being built for each source, by source index.
    chunk_blocks: Vec<codec::ChunkBlockBuilder>,
    /// What the queue held, to give back the memory of a backlog once it has drained.
    backlog: sextant_heap::Backlog,
}

impl Thread {
    fn run(&mut self, rx: mpsc::Receiver<Msg>) -> Result<(), SessionError> {
        let mut batch: Vec<Msg> = Vec::new();
        // Rows in `batch`.
        let mut rows = 0;
        let mut deadline: Option<Instant> = None;
        loop {
            // Without a batch in hand, still wake now and then to notice an abandonment.
            let wait = deadline.map_or(self.options.batch_interval, |d| {
                d.saturating_duration_since(Instant::now())
            });
            let mut closing = false;
            let mut abandoned = false;
            match rx.recv_timeout(wait) {
                Ok(Msg::Close) => closing = true,
                Ok(msg) => {
                    rows += msg.rows();
                    batch.push(msg);
                    deadline.get_or_insert_with(|| Instant::now() + self.options.batch_interval);
                    // Take what else is queued without looking at the clock per message:
                    // at 100 000 rows/s, two clock reads a row were a tenth of this thread.
                    while rows < self.options.batch_rows {
                        match rx.try_recv() {
                            Ok(Msg::Close) => {
                                closing = true;
                                break;
                            }
                            Ok(msg) => {
                                rows += msg.rows();
                                batch.push(msg);
                            }
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Disconnected) => {
                                abandoned = true;
                                break;
                            }
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                // Every producer and the writer itself are gone without a close.
                Err(RecvTimeoutError::Disconnected) => abandoned = true,
            }
            abandoned |= self.abandon.load(Ordering::Relaxed);
            let due = closing
                || abandoned
                || rows >= self.options.batch_rows
                || deadline.is_some_and(|d| Instant::now() >= d);
            if due && !batch.is_empty() {
                self.commit(&mut batch);
                rows = 0;
                deadline = None;
            }
            if closing {
                self.conn.execute(
                    "UPDATE sessions SET ended_unix_ns = ?2, dropped_chunks = ?3, dropped_frames = ?4 WHERE id = ?1",
                    params![self.id, unix_now_ns(), self.dropped_chunks(), self.dropped_frames()],
                )?;
                return Ok(());
            }
            if abandoned {
                return Ok(());
            }
        }
    }

    fn dropped_chunks(&self) -> i64 {
        self.stats.dropped_chunks.load(Ordering::Relaxed) as i64
    }

    fn dropped_frames(&self) -> i64 {
        self.stats.dropped_frames.load(Ordering::Relaxed) as i64
    }

    fn commit(&mut self, batch: &mut Vec<Msg>) {
        // What is queued now includes this batch: a writer that takes its whole backlog
        // into one transaction would otherwise never see it.
        self.backlog.observe(self.queue.held());
        match self.write(batch) {
            Ok(next) => {
                let s = &self.stats;
                s.written_chunks
                    .fetch_add(next.chunks - self.totals.chunks, Ordering::Relaxed);
                s.written_frames
                    .fetch_add(next.frames - self.totals.frames, Ordering::Relaxed);
                s.written_bytes
                    .fetch_add(next.bytes - self.totals.bytes, Ordering::Relaxed);
                s.commits.fetch_add(1, Ordering::Relaxed);
                self.totals = next;
                *s.problem.lock().unwrap_or_else(|p| p.into_inner()) = None;
            }
            Err(e) => {
                // The rows are lost; count them as dropped so the session says so, and
                // keep recording: the next batch may well succeed (a full disk freed).
                let (chunks, frames) = batch.iter().fold((0, 0), |(c, f), m| match m {
                    Msg::Rows(b) => (c + b.chunks, f + b.frames),
                    _ => (c, f),
                });
                self.stats
                    .dropped_chunks
                    .fetch_add(chunks, Ordering::Relaxed);
                self.stats
                    .dropped_frames
                    .fetch_add(frames, Ordering::Relaxed);
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                *self.stats.problem.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(crate::write_problem(&e));
                tracing::error!(session = self.id, "recording a batch failed: {e}");
            }
        }
        for msg in batch.drain(..) {
            if let Msg::Rows(rows) = msg {
                self.queue.spend(rows);
            }
        }
        self.queue.after_commit(&mut self.backlog);
    }

    /// Writes one batch in one transaction; the totals it leaves the session row with.
    fn write(&mut self, batch: &[Msg]) -> rusqlite::Result<Totals> {
        let mut t = self.totals;
        let (dropped_chunks, dropped_frames) = (self.dropped_chunks(), self.dropped_frames());
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut chunk_block = tx.prepare_cached(
                "INSERT INTO chunk_blocks (session, source, first_elapsed_ns, first_unix_ns, min_elapsed_ns, max_elapsed_ns, chunk_count, byte_count, times, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?;
            // One block in the making per source: a replay reads one source's chunks.
            let sources = &mut self.chunk_blocks;
            sources.iter_mut().for_each(codec::ChunkBlockBuilder::clear);
            let mut store_chunks =
                |source: usize, chunks: &mut codec::ChunkBlockBuilder| -> rusqlite::Result<()> {
                    if chunks.is_empty() {
                        return Ok(());
                    }
                    let (first_elapsed, first_unix) = chunks.first();
                    let (min, max) = chunks.span();
                    chunk_block.execute(params![
                        self.id,
                        source as i64,
                        first_elapsed as i64,
                        first_unix,
                        min as i64,
                        max as i64,
                        chunks.chunks(),
                        chunks.data().len() as i64,
                        chunks.times(),
                        chunks.data()
                    ])?;
                    chunks.clear();
                    Ok(())
                };
            let mut block = tx.prepare_cached(
                "INSERT INTO frame_blocks (session, first_elapsed_ns, min_elapsed_ns, max_elapsed_ns, frame_count, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            // Frames go in blocks (see `codec`); a block never spans two commits, so what
            // a crash leaves is still whole batches.
            let frames = &mut self.block;
            frames.clear();
            let mut store = |frames: &mut codec::BlockBuilder| -> rusqlite::Result<()> {
                if frames.is_empty() {
                    return Ok(());
                }
                let (min, max) = frames.span();
                block.execute(params![
                    self.id,
                    frames.first_ns() as i64,
                    min as i64,
                    max as i64,
                    frames.frames(),
                    frames.data()
                ])?;
                frames.clear();
                Ok(())
            };
            let mut column = tx.prepare_cached(
                "INSERT OR IGNORE INTO datasets (session, position, dataset_id, column_name, units) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for msg in batch {
                match msg {
                    Msg::Columns(columns) => {
                        for (i, (id, name, units)) in columns.iter().enumerate() {
                            column.execute(params![self.id, i as i64, id, name, units])?;
                        }
                    }
                    Msg::Rows(rows) => {
                        for (row, data) in rows.iter() {
                            let source = row.source as usize;
                            if row.frame {
                                if frames.is_full() {
                                    store(frames)?;
                                }
                                frames.push(source, row.elapsed_ns, data);
                                t.frames += 1;
                            } else {
                                if sources.len() <= source {
                                    sources.resize_with(source + 1, Default::default);
                                }
                                let chunks = &mut sources[source];
                                if chunks.is_full() {
                                    store_chunks(source, chunks)?;
                                }
                                chunks.push(row.elapsed_ns, row.unix_ns, data);
                                t.chunks += 1;
                                t.bytes += data.len() as u64;
                            }
                            t.seen(row.elapsed_ns);
                        }
                    }
                    Msg::Close => {}
                }
            }
            store(frames)?;
            for (source, chunks) in sources.iter_mut().enumerate() {
                store_chunks(source, chunks)?;
            }
        }
        tx.execute(
            "UPDATE sessions SET chunk_count = ?2, byte_count = ?3, frame_count = ?4,
                 first_elapsed_ns = ?5, last_elapsed_ns = ?6,
                 dropped_chunks = ?7, dropped_frames = ?8
             WHERE id = ?1",
            params![
                self.id,
                t.chunks as i64,
                t.bytes as i64,
                t.frames as i64,
                t.first_ns.map(|n| n as i64),
                t.last_ns.map(|n| n as i64),
                dropped_chunks,
                dropped_frames,
            ],
        )?;
        tx.commit()?;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> (Queue, mpsc::Receiver<Msg>) {
        let (tx, rx) = mpsc::channel();
        let queue = Queue {
            tx,
            rows: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            max_rows: 1 << 20,
            max_bytes: 64 << 20,
            spent: Mutex::new(Vec::new()),
        };
        (queue, rx)
    }

    fn full_batch() -> Batch {
        let mut batch = Batch::default();
        for i in 0..SINK_BATCH_ROWS {
            batch.data.extend_from_slice(&[i as u8; 200]);
            batch.push_row(true, 0, i as u64, 0);
        }
        batch
    }

    fn spent(queue: &Queue) -> usize {
        queue.spent.lock().unwrap().len()
    }

    /// A writer that fell 40 batches behind keeps them for the producers while it is
    /// behind, and only what a writer that keeps up needs once the queue is empty.
    #[test]
    fn a_drained_backlog_leaves_only_the_batches_a_writer_that_keeps_up_needs() {
        let (queue, rx) = queue();
        let mut backlog = sextant_heap::Backlog::new();
        for _ in 0..40 {
            assert!(matches!(queue.offer(full_batch()), Offer::Taken));
        }
        assert!(queue.held() > 0);
        // The writer takes and writes half: the other half is still queued.
        for _ in 0..20 {
            let Ok(Msg::Rows(batch)) = rx.try_recv() else {
                panic!("a batch was lost")
            };
            queue.spend(batch);
        }
        queue.after_commit(&mut backlog);
        assert_eq!(
            spent(&queue),
            20,
            "batches were freed while the writer was behind"
        );
        for _ in 0..20 {
            let Ok(Msg::Rows(batch)) = rx.try_recv() else {
                panic!("a batch was lost")
            };
            queue.spend(batch);
        }
        assert_eq!(queue.held(), 0);
        assert_eq!(spent(&queue), 40);
        queue.after_commit(&mut backlog);
        assert_eq!(spent(&queue), SPENT_BATCHES_CAUGHT_UP);
        // A writer that keeps up is never short of batches by it.
        let mut batch = queue.fresh();
        assert!(
            batch.data.capacity() >= SINK_BATCH_ROWS * 200,
            "a kept batch lost its buffer"
        );
        batch.push_row(true, 0, 0, 0);
        assert!(matches!(queue.offer(batch), Offer::Taken));
        let Ok(Msg::Rows(batch)) = rx.try_recv() else {
            panic!("a batch was lost")
        };
        queue.spend(batch);
        queue.after_commit(&mut backlog);
        assert_eq!(spent(&queue), SPENT_BATCHES_CAUGHT_UP);
    }
}
