//! SocketCAN against a real Linux kernel: `vcan` interfaces of the QEMU guest that
//! tests/vm/run boots (this host's kernel has no AF_CAN). The driver under test is
//! `SocketCanDriver` behind the shared `Source` runner; its peer on the bus is a plain raw
//! CAN FD socket. Every test makes its own interface, so they can run in parallel.
//!
//! Covered: classic, extended, remote and CAN FD frames in both directions; the kernel's
//! own refusals (FD frames on a classic-only interface, a missing, a down or a non-CAN
//! interface) as clear errors; an interface that disappears and comes back; a paced flood
//! of 5000 frames reconciled frame by frame; and fixtures/can/vehicle.dbc decoded end to
//! end (project → `connect::start` → wiring → pipeline).
//!
//! On the host these tests are `#[ignore]`d; run with `--ignored` outside the guest they fail.
#![cfg(target_os = "linux")]

mod common;
#[path = "can/vehicle.rs"]
mod vehicle;
mod vm_guest;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::wait_until;
use sextant_devices::can::{CanFrame, CanId, FrameKind};
use sextant_devices::connect::{self, NoSecrets};
use sextant_devices::dbc::read_dbc;
use sextant_devices::slcan::{parse_line, Event};
use sextant_devices::socketcan::SocketCanDriver;
use sextant_devices::wiring::{FrameSink, Wiring, WiringOptions};
use sextant_devices::{DeviceError, Driver, Reconnect, RunOptions, Source, SourceHandle, Status};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::project::{CanSettings, Connection, Source as ProjectSource};
use sextant_telemetry::{FrameEvent, Pipeline, Project, Value};
use socketcan::id::FdFlags;
use socketcan::{
    CanAnyFrame, CanDataFrame, CanFdFrame, CanFdSocket, CanRemoteFrame, EmbeddedFrame, ExtendedId,
    Frame as _, Id, Socket, StandardId,
};
use vm_guest::{require_guest, Vcan};

/// MTU of a vcan that carries CAN FD frames; 16 carries classic frames only.
const FD_MTU: u32 = 72;
const CLASSIC_MTU: u32 = 16;
/// Linux's errno for a full socket send buffer.
const ENOBUFS: i32 = 105;

fn settings(interface: &str) -> CanSettings {
    CanSettings {
        interface: interface.into(),
        fd: true,
        data_bitrate: Some(2_000_000),
        ..CanSettings::default()
    }
}

fn fast_reconnect() -> RunOptions {
    RunOptions {
        reconnect: Reconnect {
            enabled: true,
            initial: Duration::from_millis(100),
            max: Duration::from_millis(300),
        },
        ..RunOptions::default()
    }
}

/// Everything waits generously: the guest runs about ten times slower than the host.
const PATIENCE: Duration = Duration::from_secs(30);

async fn connected(h: &SourceHandle) {
    let st = tokio::time::timeout(
        PATIENCE,
        h.wait_for(|s| matches!(s, Status::Connected | Status::Error(_))),
    )
    .await;
    assert!(
        matches!(st, Ok(Status::Connected)),
        "not connected: {}",
        h.status()
    );
}

async fn next_chunk(source: &mut Source) -> Vec<u8> {
    match tokio::time::timeout(PATIENCE, source.chunks.recv()).await {
        Ok(Some(c)) => c.data.to_vec(),
        Ok(None) => panic!("the source ended: {}", source.handle().status()),
        Err(_) => panic!("no chunk within {PATIENCE:?}: {}", source.handle().status()),
    }
}

/// A frame as the kernel takes it: the test's own conversion, independent of the driver's.
fn to_socket(chunk: &[u8], bit_rate_switch: bool) -> CanAnyFrame {
    let frame = CanFrame::decode(chunk).expect("a CAN chunk");
    let id: Id = match frame.id() {
        CanId::Standard(raw) => StandardId::new(raw).unwrap().into(),
        CanId::Extended(raw) => ExtendedId::new(raw).unwrap().into(),
    };
    match frame.kind() {
        FrameKind::Data => CanAnyFrame::Normal(CanDataFrame::new(id, frame.payload()).unwrap()),
        FrameKind::Remote => {
            CanAnyFrame::Remote(CanRemoteFrame::new_remote(id, frame.len()).unwrap())
        }
        FrameKind::Fd => {
            let flags = if bit_rate_switch {
                FdFlags::BRS
            } else {
                FdFlags::empty()
            };
            CanAnyFrame::Fd(CanFdFrame::with_flags(id, frame.payload(), flags).unwrap())
        }
    }
}

/// What the kernel delivered, as a chunk, and whether it had the bit-rate-switch flag.
fn from_socket(frame: &CanAnyFrame) -> (Vec<u8>, bool) {
    fn our_id(id: Id) -> CanId {
        match id {
            Id::Standard(s) => CanId::Standard(s.as_raw()),
            Id::Extended(e) => CanId::Extended(e.as_raw()),
        }
    }
    match frame {
        CanAnyFrame::Normal(f) => (
            CanFrame::data(our_id(f.id()), f.data()).unwrap().to_bytes(),
            false,
        ),
        CanAnyFrame::Remote(f) => (
            CanFrame::remote(our_id(f.id()), f.dlc())
                .unwrap()
                .to_bytes(),
            false,
        ),
        CanAnyFrame::Fd(f) => (
            CanFrame::fd(our_id(f.id()), f.data()).unwrap().to_bytes(),
            f.is_brs(),
        ),
        CanAnyFrame::Error(e) => panic!("unexpected error frame {:x}", e.raw_id()),
    }
}

/// The other node on the bus: a raw CAN FD socket.
struct Peer(CanFdSocket);

impl Peer {
    fn open(interface: &str) -> Peer {
        let socket = CanFdSocket::open(interface)
            .unwrap_or_else(|e| panic!("peer socket on {interface}: {e}"));
        socket.set_read_timeout(PATIENCE).unwrap();
        Peer(socket)
    }

    fn send(&self, chunk: &[u8], bit_rate_switch: bool) {
        let frame = to_socket(chunk, bit_rate_switch);
        let end = Instant::now() + PATIENCE;
        loop {
            match self.0.write_frame(&frame) {
                Ok(()) => return,
                // The socket's send buffer is momentarily full.
                Err(e) if e.raw_os_error() == Some(ENOBUFS) && Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("peer write failed: {e}"),
            }
        }
    }

    fn recv(&self) -> (Vec<u8>, bool) {
        let frame = self
            .0
            .read_frame()
            .unwrap_or_else(|e| panic!("the peer received nothing: {e}"));
        from_socket(&frame)
    }
}

/// Frames of every kind the layout has, as chunks.
fn sample_chunks() -> Vec<Vec<u8>> {
    let std = |id| CanId::standard(id).unwrap();
    let ext = |id| CanId::extended(id).unwrap();
    let data: Vec<u8> = (0..64).map(|b| b * 3 + 1).collect();
    vec![
        CanFrame::data(std(0x123), &data[..8]).unwrap().to_bytes(),
        CanFrame::data(ext(0x18FF_0001), &data[..3])
            .unwrap()
            .to_bytes(),
        CanFrame::data(std(0), &[]).unwrap().to_bytes(),
        CanFrame::remote(std(0x7FF), 4).unwrap().to_bytes(),
        CanFrame::remote(ext(0x1), 8).unwrap().to_bytes(),
        CanFrame::fd(std(0x42), &data[..12]).unwrap().to_bytes(),
        CanFrame::fd(std(0x43), &data[..1]).unwrap().to_bytes(),
        CanFrame::fd(ext(0x1FFF_FFFF), &data).unwrap().to_bytes(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs inside the QEMU guest via tests/vm/run"]
async fn classic_and_fd_frames_both_ways() {
    require_guest();
    let bus = Vcan::new("sxcan0", FD_MTU);
    let peer = Peer::open(&bus.name);
    let driver = SocketCanDriver::new(settings(&bus.name)).unwrap();
    assert_eq!(
        driver.describe(),
        "SocketCAN sxcan0 @ 500 kbit/s + CAN FD 2 Mbit/s"
    );
    let mut source = Source::spawn(driver, RunOptions::default());
    let h = source.handle();
    connected(&h).await;

    let samples = sample_chunks();
    for chunk in &samples {
        peer.send(chunk, true);
    }
    for (i, want) in samples.iter().enumerate() {
        assert_eq!(&next_chunk(&mut source).await, want, "received frame {i}");
    }

    // Writes reach the bus; FD frames carry the bit-rate switch because a data bitrate
    // is set.
    for chunk in &samples {
        h.write(chunk.clone()).await.unwrap();
    }
    for (i, want) in samples.iter().enumerate() {
        let (got, brs) = peer.recv();
        assert_eq!(&got, want, "sent frame {i}");
        assert_eq!(
            brs,
            CanFrame::decode(want).unwrap().is_fd(),
            "BRS of frame {i}"
        );
    }
    let stats = h.stats();
    assert_eq!(stats.chunks, samples.len() as u64, "{stats:?}");
    assert_eq!(stats.dropped_chunks, 0, "{stats:?}");

    // A chunk that is not a frame fails that write only.
    let e = h.write(&b"\x01"[..]).await.unwrap_err();
    assert!(
        e.to_string().contains("cannot send this as a CAN frame"),
        "{e}"
    );
    assert_eq!(h.status(), Status::Connected);
    h.close().await;
    h.wait_for(|s| *s == Status::Closed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs inside the QEMU guest via tests/vm/run"]
async fn the_kernels_refusals_are_clear_errors() {
    require_guest();
    // An interface that does not exist, and one that is not CAN at all.
    for (interface, needle) in [
        ("sxcan9", "sxcan9 does not exist"),
        ("lo", "not a CAN interface"),
    ] {
        let mut driver = SocketCanDriver::new(settings(interface)).unwrap();
        let e = driver.open().await.err().expect("must not open");
        assert!(matches!(e, DeviceError::Transient(_)), "{e:?}");
        assert!(e.to_string().contains(needle), "{e}");
    }

    // CAN FD frames on an interface that carries classic frames only: the kernel says
    // EINVAL, the user is told how to enable FD, and the link stays up.
    let bus = Vcan::new("sxcan1", CLASSIC_MTU);
    let peer = Peer::open(&bus.name);
    let source = Source::spawn(
        SocketCanDriver::new(settings(&bus.name)).unwrap(),
        RunOptions::default(),
    );
    let h = source.handle();
    connected(&h).await;
    let fd = CanFrame::fd(CanId::Standard(0x10), &[7; 16])
        .unwrap()
        .to_bytes();
    let e = h.write(fd).await.unwrap_err();
    assert!(matches!(e, DeviceError::Fatal(_)), "{e:?}");
    assert!(
        e.to_string()
            .contains("sxcan1 does not accept CAN FD frames"),
        "{e}"
    );
    assert!(e.to_string().contains("mtu 72"), "{e}");
    assert_eq!(h.status(), Status::Connected);
    let classic = CanFrame::data(CanId::Standard(0x10), &[1, 2])
        .unwrap()
        .to_bytes();
    h.write(classic.clone()).await.unwrap();
    assert_eq!(peer.recv(), (classic.clone(), false));
    h.close().await;

    // Listen-only on a virtual bus (no bit timing to set) is enforced by refusing writes.
    let source = Source::spawn(
        SocketCanDriver::new(CanSettings {
            listen_only: true,
            ..settings(&bus.name)
        })
        .unwrap(),
        RunOptions::default(),
    );
    let h = source.handle();
    connected(&h).await;
    let e = h.write(classic).await.unwrap_err();
    assert!(e.to_string().contains("listen-only"), "{e}");
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs inside the QEMU guest via tests/vm/run"]
async fn an_interface_that_goes_down_or_away_reconnects() {
    require_guest();
    let bus = Vcan::new("sxcan2", FD_MTU);
    let mut source = Source::spawn(
        SocketCanDriver::new(settings(&bus.name)).unwrap(),
        fast_reconnect(),
    );
    let h = source.handle();
    connected(&h).await;
    let frame = |byte: u8| {
        CanFrame::data(CanId::Standard(0x55), &[byte])
            .unwrap()
            .to_bytes()
    };
    Peer::open(&bus.name).send(&frame(1), false);
    assert_eq!(next_chunk(&mut source).await, frame(1));

    // Down: the kernel reports ENETDOWN to the socket; the user is told to bring it up.
    bus.down();
    let st = tokio::time::timeout(
        PATIENCE,
        h.wait_for(|s| matches!(s, Status::Reconnecting { .. })),
    )
    .await
    .expect("a downed interface must be reported");
    assert!(st.to_string().contains("ip link set sxcan2 up"), "{st}");
    bus.up();
    connected(&h).await;
    Peer::open(&bus.name).send(&frame(2), false);
    assert_eq!(next_chunk(&mut source).await, frame(2));

    // Away, as an unplugged USB adapter: reconnecting until it is back.
    bus.delete();
    let st = tokio::time::timeout(
        PATIENCE,
        h.wait_for(|s| matches!(s, Status::Reconnecting { .. })),
    )
    .await
    .expect("a vanished interface must be reported");
    assert!(st.to_string().contains("reconnecting"), "{st}");
    // A few attempts fail while it is gone ("does not exist").
    let _ = tokio::time::timeout(
        PATIENCE,
        h.wait_for(|s| matches!(s, Status::Reconnecting { attempt, .. } if *attempt >= 2)),
    )
    .await
    .expect("it keeps trying");
    assert!(
        h.status().to_string().contains("does not exist"),
        "{}",
        h.status()
    );
    let bus = Vcan::new("sxcan2", FD_MTU);
    connected(&h).await;
    assert!(h.stats().connects >= 3, "{:?}", h.stats());
    Peer::open(&bus.name).send(&frame(3), false);
    assert_eq!(next_chunk(&mut source).await, frame(3));
    h.close().await;
}

/// Frame `seq` of the flood: classic standard and CAN FD extended frames in turn, each
/// carrying its sequence number.
fn flood_chunk(seq: u64) -> Vec<u8> {
    let bytes = seq.to_le_bytes();
    if seq.is_multiple_of(2) {
        CanFrame::data(CanId::Standard((seq % 0x800) as u16), &bytes)
            .unwrap()
            .to_bytes()
    } else {
        let payload: Vec<u8> = bytes.iter().cycle().take(64).copied().collect();
        CanFrame::fd(CanId::Extended(seq as u32), &payload)
            .unwrap()
            .to_bytes()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs inside the QEMU guest via tests/vm/run"]
async fn a_paced_flood_arrives_whole_and_in_order() {
    require_guest();
    const FRAMES: u64 = 5000;
    // At most this many frames are in flight: a raw socket's default receive buffer holds
    // a few hundred, and an unpaced sender overruns it under emulation (the kernel drops
    // what does not fit, and no counter of ours could see it).
    const WINDOW: u64 = 64;
    let bus = Vcan::new("sxcan3", FD_MTU);
    let mut source = Source::spawn(
        SocketCanDriver::new(settings(&bus.name)).unwrap(),
        RunOptions::default(),
    );
    let h = source.handle();
    connected(&h).await;

    let received = Arc::new(AtomicU64::new(0));
    let sender = {
        let received = received.clone();
        let name = bus.name.clone();
        std::thread::spawn(move || {
            let peer = Peer::open(&name);
            for seq in 0..FRAMES {
                assert!(
                    wait_until(PATIENCE, || seq - received.load(Ordering::Acquire) < WINDOW),
                    "stalled: frame {seq} sent, {} received",
                    received.load(Ordering::Acquire)
                );
                peer.send(&flood_chunk(seq), true);
            }
        })
    };
    let started = Instant::now();
    for seq in 0..FRAMES {
        let got = next_chunk(&mut source).await;
        assert_eq!(got, flood_chunk(seq), "frame {seq}");
        received.store(seq + 1, Ordering::Release);
    }
    let elapsed = started.elapsed();
    sender.join().expect("the sender finished");
    // Nothing more, nothing twice.
    let extra = tokio::time::timeout(Duration::from_millis(500), source.chunks.recv()).await;
    assert!(extra.is_err(), "an extra chunk arrived: {extra:?}");
    let stats = h.stats();
    assert_eq!(stats.chunks, FRAMES, "{stats:?}");
    assert_eq!(stats.dropped_chunks, 0, "{stats:?}");
    let bytes: u64 = (0..FRAMES).map(|s| flood_chunk(s).len() as u64).sum();
    assert_eq!(stats.bytes, bytes, "{stats:?}");
    eprintln!(
        "flood: {FRAMES} frames in {:.2} s ({:.0} frames/s under emulation, window {WINDOW})",
        elapsed.as_secs_f64(),
        FRAMES as f64 / elapsed.as_secs_f64()
    );
    h.close().await;
}

struct Recorder(Arc<Mutex<Vec<Vec<Value>>>>);

impl FrameSink for Recorder {
    fn frame(&mut self, event: &FrameEvent<'_>, _datasets: &[DatasetInfo]) {
        self.0.lock().unwrap().push(event.values.to_vec());
    }
}

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

/// An SLCAN line of tests/can/vehicle.rs as the chunk of the frame it stands for.
fn chunk_of_line(line: &str) -> Vec<u8> {
    match parse_line(line.as_bytes()) {
        Event::Frame(chunk) => chunk.to_vec(),
        _ => panic!("{line} is not a frame line"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs inside the QEMU guest via tests/vm/run"]
async fn dbc_decoded_end_to_end_over_socketcan() {
    require_guest();
    let bus = Vcan::new("sxcan4", FD_MTU);
    let mut project = Project {
        title: "Vehicle".into(),
        ..Project::default()
    };
    project.sources.push(ProjectSource {
        id: "src-1".into(),
        title: "CAN".into(),
        connection: Connection::Can(settings(&bus.name)),
        ..ProjectSource::default()
    });
    read_dbc(&fixture("can/vehicle.dbc"))
        .unwrap()
        .apply(&mut project, "src-1")
        .unwrap();
    assert_eq!(project.validate(), vec![], "the imported project is valid");

    // The project's own source configuration picks and starts the SocketCAN driver.
    let (source, _) = connect::start(&project.sources[0], 0, RunOptions::default(), &NoSecrets)
        .expect("the CAN source starts");
    let (chunk_rx, h) = source.into_parts();
    connected(&h).await;
    let pipeline = Pipeline::new(&project).unwrap();
    let titles: Vec<String> = pipeline
        .datasets()
        .iter()
        .map(|d| d.title.clone())
        .collect();
    assert_eq!(titles, vehicle::SIGNALS);
    let events = Arc::new(Mutex::new(Vec::new()));
    let wiring = Wiring::start(
        pipeline,
        vec![(0, chunk_rx)],
        vec![Box::new(Recorder(events.clone()))],
        WiringOptions::default(),
    );

    // The drive, with a remote request and a frame of an unknown id before each frame.
    let peer = Peer::open(&bus.name);
    for (line, _) in vehicle::FRAMES {
        for noise in vehicle::IGNORED {
            peer.send(&chunk_of_line(noise), false);
        }
        peer.send(&chunk_of_line(line), line.starts_with('b'));
    }
    assert!(
        wait_until(PATIENCE, || events.lock().unwrap().len()
            >= vehicle::FRAMES.len()),
        "only {} frames decoded",
        events.lock().unwrap().len()
    );
    h.close().await;
    let pipeline = wiring.join();

    let events = events.lock().unwrap().clone();
    assert_eq!(events.len(), vehicle::FRAMES.len());
    let mut expected: HashMap<&str, f64> = HashMap::new();
    for (i, ((_, updates), values)) in vehicle::FRAMES.iter().zip(&events).enumerate() {
        expected.extend(updates.iter().copied());
        for (title, value) in titles.iter().zip(values) {
            match (expected.get(title.as_str()), value) {
                (None, Value::Null) => {}
                (Some(want), Value::Number(got)) if vehicle::close(*got, *want) => {}
                (want, got) => panic!("after frame {i}: {title} is {got:?}, want {want:?}"),
            }
        }
    }
    let stats = pipeline.stats(0).unwrap();
    assert_eq!(
        stats.frames_parsed,
        vehicle::FRAMES.len() as u64,
        "{stats:?}"
    );
    assert_eq!(stats.parse_errors, 0, "{stats:?}");
    let sent = (vehicle::FRAMES.len() * (1 + vehicle::IGNORED.len())) as u64;
    assert_eq!(
        h.stats().chunks,
        sent,
        "every frame on the bus became a chunk"
    );
}
