//! The one `Source` abstraction every driver sits behind.
//!
//! A driver only knows how to *open* its device ([`Driver::open`]) and, once open, how to
//! read the next chunk and write bytes ([`Link`]). Everything else is shared and lives
//! here: the task that runs the driver, timestamps, the bounded chunk queue with counted
//! drops, status reporting, writes, close, and reconnection with capped exponential
//! backoff. A driver therefore cannot get reconnection or accounting subtly wrong.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::queue;
use bytes::Bytes;
use sextant_telemetry::Timestamp;
use tokio::sync::{mpsc, oneshot, watch};

/// One read from a device (defined beside the frames it becomes, in the telemetry core).
pub use sextant_telemetry::sink::Chunk;

/// What a source is doing, for the UI's status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Connecting,
    Connected,
    /// Lost or failed; trying again after `retry_in`.
    Reconnecting {
        attempt: u32,
        retry_in: Duration,
        reason: String,
    },
    /// Failed and not retrying (auto-reconnect off, or a configuration error).
    Error(String),
    /// A finite source (a replay) played to its end.
    Finished,
    Closed,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Connecting => f.write_str("connecting"),
            Status::Connected => f.write_str("connected"),
            Status::Reconnecting {
                attempt,
                retry_in,
                reason,
            } => write!(
                f,
                "reconnecting (attempt {attempt}, next try in {:.1} s): {reason}",
                retry_in.as_secs_f64()
            ),
            Status::Error(e) => write!(f, "error: {e}"),
            Status::Finished => f.write_str("finished"),
            Status::Closed => f.write_str("closed"),
        }
    }
}

/// Why a device operation failed. Messages are meant for the user: they say what failed
/// and, where we know, what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// Worth retrying: the device went away, the broker is down, the port is busy.
    #[error("{0}")]
    Transient(String),
    /// Retrying cannot help: a bad setting, an unsupported baud rate, a missing program.
    #[error("{0}")]
    Fatal(String),
    #[error("this source cannot send data")]
    NotWritable,
    /// A finite source (a replay) reached its end.
    #[error("finished")]
    Finished,
}

impl DeviceError {
    pub fn transient(msg: impl Into<String>) -> Self {
        DeviceError::Transient(msg.into())
    }
    pub fn fatal(msg: impl Into<String>) -> Self {
        DeviceError::Fatal(msg.into())
    }
}

/// An open connection to a device.
///
/// `read` must be cancel-safe: the runner drops a pending read to serve a write or a
/// close, and no received bytes may be lost when that happens. Reading from a channel fed
/// by a reader thread or task, or `AsyncRead::read` on a socket, both are.
pub trait Link: Send + 'static {
    /// The next chunk. `Ok(None)` means the device closed the connection (end of file).
    /// A link that knows when its bytes were produced (replay) returns a timestamp.
    fn read(
        &mut self,
    ) -> impl Future<Output = Result<Option<(Bytes, Option<Timestamp>)>, DeviceError>> + Send;

    /// Sends bytes to the device, where the bus allows it.
    fn write(&mut self, _data: Bytes) -> impl Future<Output = Result<(), DeviceError>> + Send {
        async { Err(DeviceError::NotWritable) }
    }
}

/// Knows how to open one kind of device.
pub trait Driver: Send + 'static {
    type Link: Link;

    /// What the source is, for messages: `serial /dev/ttyUSB0 @ 115200`.
    fn describe(&self) -> String;

    /// Opens the device. Called again for every reconnection attempt.
    fn open(&mut self) -> impl Future<Output = Result<Self::Link, DeviceError>> + Send;

    /// The session's clock, given once before the first `open`. A device without a clock
    /// of its own ignores it: its chunks are stamped as they arrive. One that knows when
    /// it produced its bytes (the simulator) stamps them on this clock, so a stall of the
    /// machine does not bunch their times.
    fn use_clock(&mut self, _clock: Clock) {}
}

/// Reconnection policy: capped exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    pub enabled: bool,
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect {
            enabled: true,
            initial: Duration::from_millis(100),
            max: Duration::from_secs(5),
        }
    }
}

impl Reconnect {
    pub fn off() -> Self {
        Reconnect {
            enabled: false,
            ..Reconnect::default()
        }
    }

    /// The wait before attempt `n` (1-based): initial · 2ⁿ⁻¹, capped at `max`.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1).min(20))
            .unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }
}

/// Counters for one source; readable at any time from any thread.
#[derive(Debug, Default)]
pub struct SourceStats {
    pub bytes: AtomicU64,
    pub chunks: AtomicU64,
    /// Chunks thrown away because the consumer's queue was full.
    pub dropped_chunks: AtomicU64,
    pub dropped_bytes: AtomicU64,
    pub bytes_written: AtomicU64,
    pub connects: AtomicU64,
}

/// A plain copy of [`SourceStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub bytes: u64,
    pub chunks: u64,
    pub dropped_chunks: u64,
    pub dropped_bytes: u64,
    pub bytes_written: u64,
    pub connects: u64,
}

impl SourceStats {
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            bytes: self.bytes.load(Ordering::Relaxed),
            chunks: self.chunks.load(Ordering::Relaxed),
            dropped_chunks: self.dropped_chunks.load(Ordering::Relaxed),
            dropped_bytes: self.dropped_bytes.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            connects: self.connects.load(Ordering::Relaxed),
        }
    }
}

/// The session clock: every chunk of every source is stamped against the same origin.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
    origin_unix_ns: i64,
}

impl Clock {
    pub fn start() -> Self {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        Clock {
            origin: Instant::now(),
            origin_unix_ns: unix,
        }
    }

    pub fn now(&self) -> Timestamp {
        self.at(Instant::now())
    }

    /// The time of `instant` on this clock; an instant before the origin is the origin.
    pub fn at(&self, instant: Instant) -> Timestamp {
        let elapsed = instant.saturating_duration_since(self.origin).as_nanos() as u64;
        Timestamp {
            elapsed_ns: elapsed,
            unix_ns: self.origin_unix_ns + elapsed as i64,
        }
    }
}

/// How long a source's task may keep its worker thread without handing it back.
const YIELD_EVERY: Duration = Duration::from_millis(2);

enum Control {
    Write(Bytes, oneshot::Sender<Result<(), DeviceError>>),
    Close,
}

/// Options for running a source.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    pub reconnect: Reconnect,
    /// Chunks the queue holds before new ones are dropped (and counted)…
    pub queue_chunks: usize,
    /// …and bytes.
    pub queue_bytes: usize,
    pub clock: Clock,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            reconnect: Reconnect::default(),
            queue_chunks: 4096,
            queue_bytes: 32 << 20,
            clock: Clock::start(),
        }
    }
}

/// A running source: its chunks, status, counters, and a way to write or close it.
pub struct Source {
    pub chunks: queue::Receiver<Chunk>,
    handle: SourceHandle,
}

/// The control side of a running source; cheap to clone and share.
#[derive(Clone)]
pub struct SourceHandle {
    name: Arc<str>,
    status: watch::Receiver<Status>,
    stats: Arc<SourceStats>,
    control: mpsc::Sender<Control>,
}

impl Source {
    /// Starts `driver` on the current tokio runtime.
    pub fn spawn<D: Driver>(mut driver: D, options: RunOptions) -> Source {
        driver.use_clock(options.clock);
        let (chunk_tx, chunk_rx) = queue::bounded(options.queue_chunks, options.queue_bytes);
        let (status_tx, status_rx) = watch::channel(Status::Connecting);
        let (control_tx, control_rx) = mpsc::channel(64);
        let stats = Arc::new(SourceStats::default());
        let name: Arc<str> = driver.describe().into();
        tokio::spawn(run(
            driver,
            options,
            chunk_tx,
            status_tx,
            control_rx,
            stats.clone(),
        ));
        Source {
            chunks: chunk_rx,
            handle: SourceHandle {
                name,
                status: status_rx,
                stats,
                control: control_tx,
            },
        }
    }

    pub fn handle(&self) -> SourceHandle {
        self.handle.clone()
    }

    /// Splits into the chunk stream and the control handle.
    pub fn into_parts(self) -> (queue::Receiver<Chunk>, SourceHandle) {
        (self.chunks, self.handle)
    }
}

impl SourceHandle {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// A receiver that sees every status change.
    pub fn status_watch(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Sends bytes to the device; fails when it is not connected or cannot be written.
    pub async fn write(&self, data: impl Into<Bytes>) -> Result<(), DeviceError> {
        let (tx, rx) = oneshot::channel();
        self.control
            .send(Control::Write(data.into(), tx))
            .await
            .map_err(|_| DeviceError::fatal("the source is closed"))?;
        rx.await.unwrap_or_else(|_| {
            Err(DeviceError::fatal(
                "the source closed before the write completed",
            ))
        })
    }

    /// Stops the source; its status becomes `Closed` and its chunk stream ends.
    pub async fn close(&self) {
        let _ = self.control.send(Control::Close).await;
    }

    /// Waits until the status satisfies `pred` (or the source task ends).
    pub async fn wait_for(&self, mut pred: impl FnMut(&Status) -> bool) -> Status {
        let mut rx = self.status.clone();
        loop {
            let now = rx.borrow_and_update().clone();
            if pred(&now) {
                return now;
            }
            if rx.changed().await.is_err() {
                return rx.borrow().clone();
            }
        }
    }
}

/// What ended a connected session.
enum Ended {
    Closed,
    Finished,
    Lost(String),
}

async fn run<D: Driver>(
    mut driver: D,
    options: RunOptions,
    chunks: queue::Sender<Chunk>,
    status: watch::Sender<Status>,
    mut control: mpsc::Receiver<Control>,
    stats: Arc<SourceStats>,
) {
    let mut attempt = 0u32;
    let last = loop {
        if attempt == 0 {
            status.send_replace(Status::Connecting);
        }
        let failure = match driver.open().await {
            Ok(mut link) => {
                attempt = 0;
                stats.connects.fetch_add(1, Ordering::Relaxed);
                status.send_replace(Status::Connected);
                match session(&mut link, &options, &chunks, &mut control, &stats).await {
                    Ended::Closed => break None,
                    Ended::Finished => break Some(Status::Finished),
                    Ended::Lost(reason) => DeviceError::Transient(reason),
                }
            }
            Err(e) => e,
        };
        let reason = failure.to_string();
        tracing::debug!(source = %driver.describe(), %reason, "source failed");
        if !options.reconnect.enabled
            || matches!(failure, DeviceError::Fatal(_) | DeviceError::Finished)
        {
            break Some(Status::Error(reason));
        }
        attempt += 1;
        let retry_in = options.reconnect.delay(attempt);
        status.send_replace(Status::Reconnecting {
            attempt,
            retry_in,
            reason,
        });
        let sleep = tokio::time::sleep(retry_in);
        tokio::pin!(sleep);
        let closed = loop {
            tokio::select! {
                _ = &mut sleep => break false,
                msg = control.recv() => match msg {
                    None | Some(Control::Close) => break true,
                    Some(Control::Write(_, reply)) => {
                        let _ = reply.send(Err(DeviceError::transient("the device is not connected")));
                    }
                },
            }
        };
        if closed {
            break None;
        }
    };
    // Publish the final status first, then end the chunk stream: a consumer that sees the
    // stream end can rely on the status saying why.
    if let Some(final_status) = last {
        status.send_replace(final_status);
        drop(chunks);
        // Stay alive so writes fail with a reason and an explicit close is acknowledged.
        wait_for_close(&mut control).await;
    } else {
        status.send_replace(Status::Closed);
        drop(chunks);
    }
    status.send_replace(Status::Closed);
}

async fn wait_for_close(control: &mut mpsc::Receiver<Control>) {
    while let Some(msg) = control.recv().await {
        match msg {
            Control::Close => return,
            Control::Write(_, reply) => {
                let _ = reply.send(Err(DeviceError::fatal(
                    "the source failed and is not reconnecting",
                )));
            }
        }
    }
}

async fn session<L: Link>(
    link: &mut L,
    options: &RunOptions,
    chunks: &queue::Sender<Chunk>,
    control: &mut mpsc::Receiver<Control>,
    stats: &SourceStats,
) -> Ended {
    let mut last_yield = Instant::now();
    loop {
        // A link that always has data ready (the simulator catching up, a device faster
        // than the pipeline) never waits, and a task that never waits keeps its worker
        // thread from every other task: the forwarder to the pipeline among them, which
        // then sat unrun while the queue between them filled and dropped. Hand the worker
        // back now and then.
        if last_yield.elapsed() >= YIELD_EVERY {
            tokio::task::yield_now().await;
            last_yield = Instant::now();
        }
        tokio::select! {
            // Control first, so a flood of data cannot starve a close.
            biased;
            msg = control.recv() => match msg {
                None | Some(Control::Close) => return Ended::Closed,
                Some(Control::Write(data, reply)) => {
                    let n = data.len() as u64;
                    let result = link.write(data).await;
                    if result.is_ok() {
                        stats.bytes_written.fetch_add(n, Ordering::Relaxed);
                    }
                    let lost = matches!(&result, Err(DeviceError::Transient(_)));
                    let reason = result.as_ref().err().map(|e| e.to_string());
                    let _ = reply.send(result);
                    if lost {
                        return Ended::Lost(reason.unwrap_or_default());
                    }
                }
            },
            read = link.read() => match read {
                Ok(Some((data, stamped))) => {
                    if data.is_empty() {
                        continue;
                    }
                    let n = data.len() as u64;
                    stats.bytes.fetch_add(n, Ordering::Relaxed);
                    stats.chunks.fetch_add(1, Ordering::Relaxed);
                    let timestamp = stamped.unwrap_or_else(|| options.clock.now());
                    // A chunk owns exactly its bytes from here on. A driver's chunk may be
                    // a slice of a bigger read buffer (a TCP read, an MQTT packet), which
                    // it would keep alive in every queue it waits in; the queues count
                    // bytes, and count them right only so. One copy of what a device
                    // sends costs far less than the memory it could pin.
                    let data = Bytes::copy_from_slice(&data);
                    // Never wait on a slow consumer: drop and count instead.
                    match chunks.try_send(Chunk { data, timestamp }) {
                        Ok(()) => {}
                        Err(queue::TrySendError::Full(_)) => {
                            stats.dropped_chunks.fetch_add(1, Ordering::Relaxed);
                            stats.dropped_bytes.fetch_add(n, Ordering::Relaxed);
                        }
                        // Nobody listens any more: stop the source.
                        Err(queue::TrySendError::Closed(_)) => return Ended::Closed,
                    }
                }
                Ok(None) => return Ended::Lost("the device closed the connection".into()),
                Err(DeviceError::Finished) => return Ended::Finished,
                Err(e) => return Ended::Lost(e.to_string()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let r = Reconnect {
            enabled: true,
            initial: Duration::from_millis(100),
            max: Duration::from_secs(2),
        };
        let delays: Vec<u128> = (1..=8).map(|a| r.delay(a).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        assert_eq!(r.delay(u32::MAX), Duration::from_secs(2));
    }
}
