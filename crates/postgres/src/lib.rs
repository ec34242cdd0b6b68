//! Frames into PostgreSQL or TimescaleDB: the project's `postgres` sink.
//!
//! ```text
//! pipeline thread ── PostgresSink ──> bounded queue ──> writer task ──> COPY … FROM STDIN
//!                    (frames in batches;                (one COPY per batch, binary;
//!                     full: drop + count)                 reconnects by itself)
//! ```
//!
//! - **Never stalls the pipeline.** The sink gathers frames into a small batch and offers
//!   it to a bounded queue with `try_send`; a full queue drops the batch and counts its
//!   frames. A batch goes when it is full or when the pipeline has caught up
//!   ([`FrameSink::idle`]), so a slow device's frames do not wait for company.
//! - **One row per value**, `(time, bench, dataset, value, text)`: the long layout Grafana
//!   and TimescaleDB's own examples query, which holds any project without a column per
//!   dataset and lets many benches share a table (`bench` tells them apart).
//! - **Nothing written twice, nothing lost silently.** A `COPY` goes in whole or not at
//!   all. One that failed because the connection went (a restart, a network fault, an
//!   administrator ending it) or the server was short of something (a full disk) is sent
//!   again, as it was, on a new connection ([`worth_again`]); while the server is away the
//!   queue fills and then drops, counted. One the server refused (a table changed under it)
//!   is dropped and counted. Either way the problem is shown until a later `COPY` goes in. So rows written + frames dropped account for
//!   every frame offered. (The one gap: a connection lost after the server committed a
//!   `COPY` but before its answer arrived sends it again. PostgreSQL cannot say which.)
//! - **The password** comes from the keyring through the caller; the project holds the
//!   host, database, user and table only.

mod copy;
mod table;
#[cfg(feature = "test-server")]
pub mod test_server;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::SinkExt;
use sextant_devices::Credentials;
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::project::PostgresSink as Config;
use sextant_telemetry::{FrameEvent, FrameSink, Value};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_postgres::Client;

pub use table::{TableName, COLUMNS};

use copy::CopyBatch;

/// Why the sink could not start or write.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SinkError {
    /// The settings cannot work (a bad table name, no host…): fix them, then connect again.
    #[error("{0}")]
    Config(String),
    /// The server is unreachable or refused the login; the sink tries again by itself.
    #[error("{0}")]
    Connect(String),
    /// The table exists with another shape.
    #[error("{0}")]
    Table(String),
    /// The server refused a statement.
    #[error("{0}")]
    Server(String),
}

impl SinkError {
    fn server(what: &str, e: &tokio_postgres::Error) -> SinkError {
        SinkError::Server(format!("{what}: {}", describe(e)))
    }
}

/// A server's error as one sentence: its message (and detail) rather than the client's
/// "db error" wrapper.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({detail})", db.message()),
            None => db.message().to_string(),
        },
        None => {
            let text = e.to_string();
            match std::error::Error::source(e) {
                Some(cause) if !text.contains(&cause.to_string()) => format!("{text}: {cause}"),
                _ => text,
            }
        }
    }
}

/// Whether a `COPY` that failed with `e` may go in if sent again: the connection went (a
/// restart, a network fault, an administrator ending it), or the server was short of
/// something for a moment (a full disk, memory, a deadlock). Anything else – a table
/// changed under the sink, a value it cannot store – would fail the same way again.
fn worth_again(e: &tokio_postgres::Error) -> bool {
    let Some(db) = e.as_db_error() else {
        // No answer from the server: the connection, not the rows.
        return true;
    };
    // SQLSTATE classes: 08 connection exception, 40 transaction rollback, 53 insufficient
    // resources, 57 operator intervention, 58 system error; and an error that ends the
    // session (FATAL, PANIC) whatever its class.
    let class = &db.code().code()[..2];
    matches!(class, "08" | "40" | "53" | "57" | "58")
        || matches!(db.severity(), "FATAL" | "PANIC")
        || e.is_closed()
}

/// Tuning of a sink.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Frames queued (in batches) before new ones are dropped.
    pub queue_frames: usize,
    /// Frames gathered on the pipeline thread before they are offered to the queue.
    pub batch_frames: usize,
    /// The most rows one `COPY` carries.
    pub copy_rows: u64,
    /// Longest wait between two tries to connect.
    pub max_backoff: Duration,
    /// After the sink is dropped, how long the writer goes on trying to send what is
    /// queued before it counts the rest as dropped.
    pub finish_within: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            queue_frames: 262_144,
            batch_frames: 256,
            copy_rows: 200_000,
            max_backoff: Duration::from_secs(10),
            finish_within: Duration::from_secs(10),
        }
    }
}

/// Live counters of a sink; readable from any thread.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Frames accepted into the queue.
    pub queued_frames: AtomicU64,
    /// Frames dropped: the queue was full, or the server refused their `COPY`.
    pub dropped_frames: AtomicU64,
    /// Frames and rows (values) in the table.
    pub written_frames: AtomicU64,
    pub written_rows: AtomicU64,
    /// `COPY` statements that went in.
    pub copies: AtomicU64,
    /// Connections made (the first one included).
    pub connections: AtomicU64,
    pub connected: AtomicBool,
    /// Why rows are not going in right now; cleared by the next `COPY` that does.
    pub problem: Mutex<Option<String>>,
}

/// A sink's counts, live or final.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkReport {
    pub queued_frames: u64,
    pub dropped_frames: u64,
    pub written_frames: u64,
    pub written_rows: u64,
    pub copies: u64,
    pub connections: u64,
    pub connected: bool,
    pub problem: Option<String>,
}

impl SinkStats {
    pub fn report(&self) -> SinkReport {
        SinkReport {
            queued_frames: self.queued_frames.load(Ordering::Relaxed),
            dropped_frames: self.dropped_frames.load(Ordering::Relaxed),
            written_frames: self.written_frames.load(Ordering::Relaxed),
            written_rows: self.written_rows.load(Ordering::Relaxed),
            copies: self.copies.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed),
            connected: self.connected.load(Ordering::Relaxed),
            problem: self
                .problem
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }

    fn set_problem(&self, problem: Option<String>) {
        *self.problem.lock().unwrap_or_else(|p| p.into_inner()) = problem;
    }
}

/// What the pipeline thread hands the writer.
struct Msg {
    /// The datasets' `Group/Dataset` names (shared by every batch of a run).
    columns: Arc<[String]>,
    /// Frames of `columns.len()` values each, flattened.
    times: Vec<i64>,
    values: Vec<Value>,
}

/// Where to connect, resolved from the project's settings and the keyring.
#[derive(Clone)]
pub struct Target {
    pub config: Config,
    /// The `bench` column: the settings' own, else the project's title.
    pub bench: String,
    pub credentials: Credentials,
}

/// The `bench` column of a project's rows: the sink's own name, else the project's title.
pub fn bench_name(config: &Config, project_title: &str) -> String {
    match config.bench.trim() {
        "" => project_title.trim().to_string(),
        bench => bench.to_string(),
    }
}

/// A [`FrameSink`] that writes every frame to a PostgreSQL table.
pub struct PostgresSink {
    tx: mpsc::Sender<Msg>,
    stats: Arc<SinkStats>,
    batch_frames: usize,
    columns: Arc<[String]>,
    times: Vec<i64>,
    values: Vec<Value>,
}

/// The writer's end, to wait for it once the sink is gone.
pub struct SinkHandle {
    stats: Arc<SinkStats>,
    task: tokio::task::JoinHandle<()>,
}

impl SinkHandle {
    pub fn stats(&self) -> &Arc<SinkStats> {
        &self.stats
    }

    /// Waits for the writer to send what was queued (or give up on it after
    /// [`Options::finish_within`]) once the sink has been dropped; the final counts.
    pub async fn finished(self) -> SinkReport {
        let _ = self.task.await;
        self.stats.report()
    }
}

impl PostgresSink {
    /// Checks the settings and starts the writer (inside a tokio runtime). It connects in
    /// the background: an unreachable server is a problem shown in the counters, not an
    /// error here, and the frames of the meantime are queued.
    pub fn start(
        target: Target,
        options: Options,
    ) -> Result<(PostgresSink, SinkHandle), SinkError> {
        let c = &target.config;
        if c.host.trim().is_empty() {
            return Err(SinkError::Config(
                "no PostgreSQL host is set: give the server's name or address".into(),
            ));
        }
        if c.database.trim().is_empty() || c.user.trim().is_empty() {
            return Err(SinkError::Config(
                "the PostgreSQL database and user must both be set".into(),
            ));
        }
        let table = TableName::parse(&c.table)?;
        let tls = if c.tls {
            let config = sextant_devices::tls::client_config(&target.credentials, None)
                .map_err(|e| SinkError::Config(e.to_string()))?;
            Some(tokio_postgres_rustls::MakeRustlsConnect::new(
                (*config).clone(),
            ))
        } else {
            None
        };
        let batch_frames = options.batch_frames.max(1);
        let (tx, rx) = mpsc::channel((options.queue_frames / batch_frames).max(1));
        let stats = Arc::new(SinkStats::default());
        let writer = Writer {
            target,
            table,
            tls,
            options,
            stats: stats.clone(),
        };
        let task = tokio::spawn(writer.run(rx));
        Ok((
            PostgresSink {
                tx,
                stats: stats.clone(),
                batch_frames,
                columns: Arc::from(Vec::new()),
                times: Vec::with_capacity(batch_frames),
                values: Vec::new(),
            },
            SinkHandle { stats, task },
        ))
    }

    pub fn stats(&self) -> &Arc<SinkStats> {
        &self.stats
    }

    /// Offers the frames gathered so far to the queue.
    fn offer(&mut self) {
        if self.times.is_empty() {
            return;
        }
        let frames = self.times.len() as u64;
        let msg = Msg {
            columns: self.columns.clone(),
            times: std::mem::replace(&mut self.times, Vec::with_capacity(self.batch_frames)),
            values: std::mem::take(&mut self.values),
        };
        match self.tx.try_send(msg) {
            Ok(()) => self
                .stats
                .queued_frames
                .fetch_add(frames, Ordering::Relaxed),
            Err(TrySendError::Full(_)) => self
                .stats
                .dropped_frames
                .fetch_add(frames, Ordering::Relaxed),
            // The writer is gone (the runtime shut down): nothing will take them.
            Err(TrySendError::Closed(_)) => self
                .stats
                .dropped_frames
                .fetch_add(frames, Ordering::Relaxed),
        };
    }
}

impl FrameSink for PostgresSink {
    fn frame(&mut self, event: &FrameEvent<'_>, datasets: &[DatasetInfo]) {
        // A run's datasets do not change; the names are made once.
        if self.columns.len() != datasets.len() {
            self.offer();
            self.columns = datasets.iter().map(|d| d.column()).collect();
        }
        self.times.push(event.timestamp.unix_ns);
        self.values.extend_from_slice(event.values);
        if self.times.len() >= self.batch_frames {
            self.offer();
        }
    }

    fn idle(&mut self) {
        self.offer();
    }

    fn finish(&mut self) {
        self.offer();
    }
}

impl Drop for PostgresSink {
    fn drop(&mut self) {
        self.offer();
    }
}

struct Writer {
    target: Target,
    table: TableName,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    options: Options,
    stats: Arc<SinkStats>,
}

/// A `COPY` ready to go, kept until it has gone in.
struct Ready {
    data: Bytes,
    rows: u64,
    frames: u64,
}

impl Writer {
    async fn connect(&self) -> Result<Client, SinkError> {
        let c = &self.target.config;
        let mut pg = tokio_postgres::Config::new();
        pg.host(c.host.trim())
            .port(c.port)
            .dbname(c.database.trim())
            .user(c.user.trim())
            .application_name("Sextant")
            .connect_timeout(Duration::from_secs(5))
            .keepalives_idle(Duration::from_secs(30));
        if let Some(password) = &self.target.credentials.password {
            pg.password(password.as_bytes());
        }
        let place = format!("PostgreSQL at {}:{}", c.host.trim(), c.port);
        let failed =
            |e: tokio_postgres::Error| SinkError::Connect(format!("{place}: {}", describe(&e)));
        let client = match &self.tls {
            Some(tls) => {
                pg.ssl_mode(tokio_postgres::config::SslMode::Require);
                let (client, connection) = pg.connect(tls.clone()).await.map_err(failed)?;
                tokio::spawn(connection);
                client
            }
            None => {
                pg.ssl_mode(tokio_postgres::config::SslMode::Disable);
                let (client, connection) =
                    pg.connect(tokio_postgres::NoTls).await.map_err(failed)?;
                tokio::spawn(connection);
                client
            }
        };
        self.table.prepare(&client).await?;
        Ok(client)
    }

    async fn copy(&self, client: &Client, ready: &Ready) -> Result<u64, tokio_postgres::Error> {
        let sink = client
            .copy_in::<_, Bytes>(&self.table.copy_statement())
            .await?;
        futures::pin_mut!(sink);
        sink.send(ready.data.clone()).await?;
        sink.finish().await
    }

    /// Gathers what is queued into one `COPY`: waits for the first message, then takes
    /// whatever else is already there, up to [`Options::copy_rows`]. `None` once the sink
    /// is gone and its queue is empty.
    async fn gather(&self, rx: &mut mpsc::Receiver<Msg>) -> Option<Ready> {
        let mut batch = CopyBatch::new();
        let mut next = rx.recv().await;
        while let Some(msg) = next {
            let width = msg.columns.len();
            for (i, t) in msg.times.iter().enumerate() {
                let row = msg.values.get(i * width..(i + 1) * width).unwrap_or(&[]);
                batch.frame(*t, &self.target.bench, &msg.columns, row);
            }
            if batch.rows >= self.options.copy_rows {
                break;
            }
            next = rx.try_recv().ok();
        }
        if batch.is_empty() {
            return None;
        }
        let (rows, frames) = (batch.rows, batch.frames);
        Some(Ready {
            data: batch.finish(),
            rows,
            frames,
        })
    }

    async fn run(self, mut rx: mpsc::Receiver<Msg>) {
        let stats = self.stats.clone();
        let mut client: Option<Client> = None;
        let mut held: Option<Ready> = None;
        let mut backoff = Duration::from_millis(200);
        // Set once the sink is gone: when the writer stops trying.
        let mut give_up_at: Option<tokio::time::Instant> = None;
        loop {
            if held.is_none() {
                match self.gather(&mut rx).await {
                    Some(ready) => held = Some(ready),
                    None => break,
                }
            }
            let Some(ready) = held.as_ref() else { continue };
            if client.as_ref().is_none_or(|c| c.is_closed()) {
                client = None;
                stats.connected.store(false, Ordering::Relaxed);
                match self.connect().await {
                    Ok(c) => {
                        client = Some(c);
                        stats.connections.fetch_add(1, Ordering::Relaxed);
                        stats.connected.store(true, Ordering::Relaxed);
                        backoff = Duration::from_millis(200);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "postgres sink: not connected");
                        stats.set_problem(Some(e.to_string()));
                        if rx.is_closed() {
                            let deadline = *give_up_at.get_or_insert_with(|| {
                                tokio::time::Instant::now() + self.options.finish_within
                            });
                            if tokio::time::Instant::now() >= deadline {
                                break;
                            }
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(self.options.max_backoff);
                        continue;
                    }
                }
            }
            let c = client.as_ref().expect("connected above");
            match self.copy(c, ready).await {
                Ok(_) => {
                    stats.written_rows.fetch_add(ready.rows, Ordering::Relaxed);
                    stats
                        .written_frames
                        .fetch_add(ready.frames, Ordering::Relaxed);
                    stats.copies.fetch_add(1, Ordering::Relaxed);
                    stats.set_problem(None);
                    held = None;
                }
                Err(e) if worth_again(&e) => {
                    // The connection went, or the server could not take rows just now: the
                    // COPY did not go in; send it again on a new connection.
                    tracing::warn!(error = %describe(&e), "postgres sink: COPY not taken");
                    stats.set_problem(Some(format!(
                        "PostgreSQL did not take the last rows ({}); trying again",
                        describe(&e)
                    )));
                    client = None;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.options.max_backoff);
                }
                Err(e) => {
                    // The server refused these rows; the same rows would be refused again.
                    stats
                        .dropped_frames
                        .fetch_add(ready.frames, Ordering::Relaxed);
                    stats.set_problem(Some(format!(
                        "PostgreSQL refused rows for the table {}: {}",
                        self.table.display(),
                        describe(&e)
                    )));
                    held = None;
                    // The table may have been changed: check it again on a new connection.
                    client = None;
                }
            }
        }
        // Whatever could not be sent before giving up.
        let mut lost = held.map_or(0, |r| r.frames);
        rx.close();
        while let Ok(msg) = rx.try_recv() {
            lost += msg.times.len() as u64;
        }
        stats.dropped_frames.fetch_add(lost, Ordering::Relaxed);
        stats.connected.store(false, Ordering::Relaxed);
    }
}
