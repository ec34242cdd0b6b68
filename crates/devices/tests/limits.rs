//! The chunk queues, pushed past: a source whose consumer does not read, and a pipeline
//! thread that is stuck, drop chunks once their queue is full and count every one, so
//! what arrived plus what was dropped is exactly what was read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::Duration;

use sextant_devices::sim_source::SimulatorDriver;
use sextant_devices::simulator::{demo_project, demo_settings};
use sextant_devices::wiring::{FrameSink, Wiring, WiringOptions};
use sextant_devices::{Chunk, Reconnect, RunOptions, Source, SourceHandle, Status};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::{FrameEvent, Pipeline};

/// A deadline for progress, never for speed: the simulator emits a chunk every 10 ms.
const PATIENCE: Duration = Duration::from_secs(30);

async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(PATIENCE, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "gave up waiting for {what}");
}

fn simulator(queue_chunks: usize) -> Source {
    let mut settings = demo_settings();
    settings.frame_rate_hz = 10_000.0;
    Source::spawn(
        SimulatorDriver { settings },
        RunOptions {
            reconnect: Reconnect::off(),
            queue_chunks,
            ..RunOptions::default()
        },
    )
}

async fn close(h: &SourceHandle) {
    h.close().await;
    h.wait_for(|s| *s == Status::Closed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_source_queue_drops_and_counts_what_it_cannot_hold() {
    const QUEUE: usize = 4;
    let mut source = simulator(QUEUE);
    let h = source.handle();
    // Nobody reads: the queue fills, then every further chunk is dropped.
    until("the source to drop chunks", || {
        h.stats().dropped_chunks >= 3 * QUEUE as u64
    })
    .await;
    close(&h).await;
    let stats = h.stats();

    let (mut received, mut received_bytes) = (0u64, 0u64);
    while let Some(chunk) = source.chunks.recv().await {
        received += 1;
        received_bytes += chunk.data.len() as u64;
    }
    assert_eq!(received, QUEUE as u64, "the queue held exactly its size");
    assert!(stats.dropped_chunks > 0, "{stats:?}");
    assert_eq!(received + stats.dropped_chunks, stats.chunks, "{stats:?}");
    assert_eq!(
        received_bytes + stats.dropped_bytes,
        stats.bytes,
        "{stats:?}"
    );
}

/// Stops the pipeline thread inside its first chunk until the test lets it go, and
/// counts the chunks the pipeline thread took.
struct Stuck {
    entered: Option<std_mpsc::Sender<()>>,
    release: std_mpsc::Receiver<()>,
    seen: Arc<AtomicU64>,
}

impl FrameSink for Stuck {
    fn frame(&mut self, _: &FrameEvent<'_>, _: &[DatasetInfo]) {}

    fn chunk(&mut self, _source: usize, _chunk: &Chunk) {
        self.seen.fetch_add(1, Ordering::SeqCst);
        if let Some(entered) = self.entered.take() {
            let _ = entered.send(());
            let _ = self.release.recv();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_wiring_queue_drops_and_counts_what_the_pipeline_cannot_take() {
    const QUEUE: usize = 4;
    // The source's own queue is roomy: the wiring's forwarder empties it as chunks come.
    let (chunks, h) = simulator(4096).into_parts();
    let (entered_tx, entered) = std_mpsc::channel();
    let (release, release_rx) = std_mpsc::channel();
    let seen = Arc::new(AtomicU64::new(0));
    let wiring = Wiring::start(
        Pipeline::new(&demo_project()).unwrap(),
        vec![(0, chunks)],
        vec![Box::new(Stuck {
            entered: Some(entered_tx),
            release: release_rx,
            seen: seen.clone(),
        })],
        WiringOptions {
            queue_chunks: QUEUE,
            ..WiringOptions::default()
        },
    );
    let stats = wiring.stats.clone();
    until("the pipeline thread to take a chunk", || {
        entered.try_recv().is_ok()
    })
    .await;
    // From here the pipeline thread takes nothing: the queue fills and the rest drop.
    let before = stats.dropped_chunks.load(Ordering::SeqCst);
    until("the wiring to drop chunks", || {
        stats.dropped_chunks.load(Ordering::SeqCst) >= before + 3 * QUEUE as u64
    })
    .await;
    close(&h).await;
    // Everything the source passed on is either in the queue, with the pipeline thread,
    // or dropped and counted: once the forwarder has passed on the last chunk, exactly
    // QUEUE + 1 are not dropped.
    until("the forwarder to pass on every chunk", || {
        let s = h.stats();
        s.chunks - s.dropped_chunks
            == stats.dropped_chunks.load(Ordering::SeqCst) + QUEUE as u64 + 1
    })
    .await;
    release.send(()).unwrap();
    tokio::task::spawn_blocking(move || wiring.join())
        .await
        .unwrap();

    let source = h.stats();
    let dropped = stats.dropped_chunks.load(Ordering::SeqCst);
    let received = seen.load(Ordering::SeqCst);
    let read = source.chunks - source.dropped_chunks;
    assert!(dropped > 0);
    assert_eq!(
        received,
        QUEUE as u64 + 1,
        "the queue held exactly its size"
    );
    assert_eq!(
        received + dropped,
        read,
        "{source:?}, wiring dropped {dropped}"
    );
}
