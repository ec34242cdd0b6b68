//! The chunk queues, pushed past: a source whose consumer does not read, a pipeline
//! thread that is stuck, and a capture writer stuck on its file drop chunks once their
//! queue is full (in chunks or in bytes) and count every one, so what arrived plus what
//! was dropped is exactly what was read. And a source that always has data still leaves
//! its worker thread to other tasks. (The live CSV export's queue is proved in `wiring.rs`'s unit tests.)

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
    simulator_at(
        10_000.0,
        RunOptions {
            queue_chunks,
            ..RunOptions::default()
        },
    )
}

/// The demo device at `rate_hz` frames/s, not reconnecting, with `options`' queue.
fn simulator_at(rate_hz: f64, options: RunOptions) -> Source {
    let mut settings = demo_settings();
    settings.frame_rate_hz = rate_hz;
    Source::spawn(
        SimulatorDriver::new(settings),
        RunOptions {
            reconnect: Reconnect::off(),
            ..options
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
    let (received, _) = drain_and_reconcile(&mut source).await;
    assert_eq!(received, QUEUE as u64, "the queue held exactly its size");
    assert!(h.stats().dropped_chunks > 0, "{:?}", h.stats());
}

/// Receives what a closed source's queue still holds, and checks that what arrived plus
/// what the source dropped is exactly what it read, in chunks and in bytes. Returns the
/// chunks and bytes received.
async fn drain_and_reconcile(source: &mut Source) -> (u64, u64) {
    let stats = source.handle().stats();
    let (mut received, mut received_bytes) = (0u64, 0u64);
    while let Some(chunk) = source.chunks.recv().await {
        received += 1;
        received_bytes += chunk.data.len() as u64;
    }
    assert_eq!(received + stats.dropped_chunks, stats.chunks, "{stats:?}");
    assert_eq!(
        received_bytes + stats.dropped_bytes,
        stats.bytes,
        "{stats:?}"
    );
    (received, received_bytes)
}

/// The source's queue is capped in bytes too: with room for thousands of chunks but only
/// 256 KiB, a reader that does not read finds at most 256 KiB waiting (one chunk more
/// only when that one came to an empty queue), and every chunk past it is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_queue_holds_no_more_bytes_than_its_cap() {
    const CAP: usize = 256 << 10;
    let mut source = simulator_at(
        100_000.0,
        RunOptions {
            queue_chunks: 4096,
            queue_bytes: CAP,
            ..RunOptions::default()
        },
    );
    let h = source.handle();
    until("the source to drop chunks", || {
        h.stats().dropped_chunks >= 20
    })
    .await;
    close(&h).await;
    let (received, received_bytes) = drain_and_reconcile(&mut source).await;
    assert!(
        received_bytes <= CAP as u64 || received == 1,
        "{received} chunks of {received_bytes} bytes waited under a cap of {CAP}"
    );
    assert!(received < 4096, "the chunk cap was never the limit");
}

/// A link that always has data (here the simulator asked for 10 million frames a second,
/// always behind) must not keep its worker thread for ever: on a runtime of one thread,
/// the task reading the source's chunks runs only if the source's task hands the thread
/// back. Before it did, this test never ended; a watchdog thread turns that into a failure.
#[test]
fn a_source_that_never_waits_leaves_other_tasks_their_turn() {
    let (done_tx, done) = std_mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut source = simulator_at(10_000_000.0, RunOptions::default());
            let mut got = 0;
            while got < 20 {
                source.chunks.recv().await.expect("the source ended");
                got += 1;
            }
            source.handle().close().await;
        });
        let _ = done_tx.send(());
    });
    assert!(
        done.recv_timeout(PATIENCE).is_ok(),
        "the reading task never ran: the source kept the only worker thread"
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

/// The capture writer thread stuck on its file, made certain: the capture goes into a
/// named pipe nobody reads, and the first chunk is far larger than a pipe holds, so the
/// writer takes it off the queue and waits inside writing it. Then exactly
/// `CAPTURE_QUEUE_CHUNKS` more fit in the queue; every chunk past that is dropped and
/// counted, and once the pipe is read the capture holds exactly the chunks not dropped.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_capture_queue_drops_and_counts_what_the_writer_cannot_take() {
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;

    use bytes::Bytes;
    use sextant_devices::capture::{CaptureReader, CaptureWriter};
    use sextant_devices::wiring::CAPTURE_QUEUE_CHUNKS;
    use sextant_telemetry::Timestamp;

    const PAST: usize = 100;
    // A pipe holds 64 KiB by default (1 MiB at most without privileges).
    const BIG: usize = 4 << 20;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("capture.fifo");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    // Opening either end of a named pipe waits for the other.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::File::open(fifo).unwrap())
    };
    let file = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let mut reader = reader.join().unwrap();
    let capture = CaptureWriter::new(std::io::BufWriter::new(file)).unwrap();

    let sent = CAPTURE_QUEUE_CHUNKS + PAST + 1;
    let (input, chunks) = sextant_devices::queue::bounded(sent, 1 << 30);
    let wiring = Wiring::start(
        Pipeline::new(&demo_project()).unwrap(),
        vec![(0, chunks)],
        Vec::new(),
        WiringOptions {
            capture: Some(capture),
            ..WiringOptions::default()
        },
    );
    let stats = wiring.stats.clone();
    let chunk = |data: Bytes, i: usize| Chunk {
        data,
        timestamp: Timestamp {
            elapsed_ns: i as u64,
            unix_ns: 0,
        },
    };
    input
        .try_send(chunk(Bytes::from(vec![b'x'; BIG]), 0))
        .unwrap();
    // Bytes in the pipe: the writer has taken the big chunk and is inside writing it,
    // where it stays while the pipe is full (the rest of 4 MiB will not fit).
    let (head, mut reader) = tokio::task::spawn_blocking(move || {
        let mut head = [0u8; 1];
        reader.read_exact(&mut head).unwrap();
        (head, reader)
    })
    .await
    .unwrap();

    let small = Bytes::from_static(b"y");
    for i in 1..sent {
        input.try_send(chunk(small.clone(), i)).unwrap();
    }
    drop(input);
    // The pipeline thread ends once the forwarder has offered the capture every chunk.
    tokio::task::spawn_blocking(move || wiring.join())
        .await
        .unwrap();
    assert_eq!(
        stats.capture_dropped.load(Ordering::SeqCst),
        PAST as u64,
        "exactly the chunks past a full queue are dropped, and counted"
    );

    // Reading the pipe lets the writer go on: the capture holds every chunk not dropped,
    // the queue's in the order they came.
    let rest = tokio::task::spawn_blocking(move || {
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
        rest
    })
    .await
    .unwrap();
    let bytes = [&head[..], &rest].concat();
    let mut records = CaptureReader::new(&bytes[..]).unwrap();
    let first = records.next_record().unwrap().expect("the big chunk");
    assert_eq!(first.data.len(), BIG);
    let mut held = Vec::new();
    while let Some(r) = records.next_record().unwrap() {
        assert_eq!(&r.data[..], b"y");
        held.push(r.timestamp.elapsed_ns);
    }
    let expected: Vec<u64> = (1..=CAPTURE_QUEUE_CHUNKS as u64).collect();
    assert_eq!(
        held.len(),
        CAPTURE_QUEUE_CHUNKS,
        "the queue held exactly its size"
    );
    assert!(held == expected, "the queue's chunks, in order");
    assert_eq!(
        1 + held.len() + PAST,
        sent,
        "written plus dropped is what was sent"
    );
    assert_eq!(stats.capture_errors.load(Ordering::SeqCst), 0);
}
