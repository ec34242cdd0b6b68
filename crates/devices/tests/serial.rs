//! Serial sources over real pseudo-terminal pairs (socat), through the `serialport` stack.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{collect, require, wait_until, PtyPair};
use sextant_devices::serial::SerialDriver;
use sextant_devices::wiring::{Wiring, WiringOptions};
use sextant_devices::{Reconnect, RunOptions, Source, Status};
use sextant_telemetry::project::SerialSettings;
use sextant_telemetry::{Pipeline, Project};

fn settings(port: &std::path::Path, baud: u32) -> SerialSettings {
    SerialSettings {
        port: port.display().to_string(),
        baud,
        ..SerialSettings::default()
    }
}

fn fast_reconnect() -> RunOptions {
    RunOptions {
        reconnect: Reconnect {
            enabled: true,
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        ..RunOptions::default()
    }
}

/// The normal path of the baud rate read-back: every rate, standard or not, reads back as
/// set and the port is used (a mismatch is refused; `serial.rs`'s unit tests show that,
/// since a pseudo-terminal stores any rate exactly).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_at_standard_and_custom_rates_and_writes_back() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    for baud in [115_200, 1_234_567, 3_000_000] {
        let mut source = Source::spawn(
            SerialDriver::new(settings(&pty.a, baud)).unwrap(),
            RunOptions::default(),
        );
        let h = source.handle();
        let st = tokio::time::timeout(
            Duration::from_secs(5),
            h.wait_for(|s| *s == Status::Connected),
        )
        .await;
        assert!(st.is_ok(), "{baud}: not connected: {}", h.status());
        let mut peer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&pty.b)
            .unwrap();
        let line = format!("baud={baud},1,2,3\n");
        peer.write_all(line.as_bytes()).unwrap();
        let got = collect(&mut source, line.len(), Duration::from_secs(5)).await;
        assert_eq!(String::from_utf8_lossy(&got), line, "{baud}");
        h.write(&b"ping\r\n"[..]).await.unwrap();
        let mut back = [0u8; 6];
        peer.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"ping\r\n");
        assert_eq!(h.stats().bytes_written, 6);
        h.close().await;
        h.wait_for(|s| *s == Status::Closed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_megabytes_arrive_byte_exact() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    let mut source = Source::spawn(
        SerialDriver::new(settings(&pty.a, 3_000_000)).unwrap(),
        RunOptions::default(),
    );
    let h = source.handle();
    h.wait_for(|s| *s == Status::Connected).await;
    let payload: Vec<u8> = (0..10 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let to_send = payload.clone();
    let peer_path = pty.b.clone();
    let writer = std::thread::spawn(move || {
        let mut peer = std::fs::OpenOptions::new()
            .write(true)
            .open(peer_path)
            .unwrap();
        for block in to_send.chunks(4096) {
            peer.write_all(block).unwrap();
        }
    });
    let got = collect(&mut source, payload.len(), Duration::from_secs(120)).await;
    writer.join().unwrap();
    let stats = h.stats();
    assert_eq!(stats.dropped_chunks, 0, "{stats:?}");
    assert_eq!(got.len(), payload.len(), "{stats:?}");
    assert!(got == payload, "the 10 MB stream arrived altered");
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unplug_reconnects_and_resumes() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut pty = PtyPair::start(dir.path());
    let mut source = Source::spawn(
        SerialDriver::new(settings(&pty.a, 115_200)).unwrap(),
        fast_reconnect(),
    );
    let h = source.handle();
    h.wait_for(|s| *s == Status::Connected).await;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pty.b)
        .unwrap()
        .write_all(b"before\n")
        .unwrap();
    assert_eq!(
        collect(&mut source, 7, Duration::from_secs(5)).await,
        b"before\n"
    );

    pty.unplug();
    let st = tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| matches!(s, Status::Reconnecting { .. })),
    )
    .await
    .expect("an unplugged port must report reconnecting");
    assert!(st.to_string().contains("reconnecting"), "{st}");

    let pty = PtyPair::start(dir.path());
    tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| *s == Status::Connected),
    )
    .await
    .expect("the source must reconnect when the port comes back");
    assert!(h.stats().connects >= 2);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pty.b)
        .unwrap()
        .write_all(b"after\n")
        .unwrap();
    assert_eq!(
        collect(&mut source, 6, Duration::from_secs(5)).await,
        b"after\n"
    );
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_port_and_bad_settings_give_clear_errors() {
    let mut s = SerialSettings::default();
    assert!(SerialDriver::new(s.clone()).is_err(), "no port selected");
    s.port = "/dev/does-not-exist".into();
    s.baud = 16_000_000;
    let e = SerialDriver::new(s.clone()).err().unwrap();
    assert!(e.to_string().contains("out of range"), "{e}");
    s.baud = 9600;
    let source = Source::spawn(
        SerialDriver::new(s).unwrap(),
        RunOptions {
            reconnect: Reconnect::off(),
            ..RunOptions::default()
        },
    );
    let st = source
        .handle()
        .wait_for(|s| matches!(s, Status::Error(_)))
        .await;
    assert!(st.to_string().contains("/dev/does-not-exist"), "{st}");
    let e = source.handle().write(&b"x"[..]).await.unwrap_err();
    assert!(!e.to_string().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_on_serial_drops_and_counts_an_over_long_line() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    let project: Project = serde_json::from_value(serde_json::json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "uart", "parser": {"kind": "delimited"},
                     "framing": {"mode": "endOnly", "end": ["\\n"], "maxFrameBytes": 64}}],
        "groups": [{"id": "g", "title": "G", "datasets": [{"id": "d", "title": "V", "index": 1}]}]
    }))
    .unwrap();
    let source = Source::spawn(
        SerialDriver::new(settings(&pty.a, 921_600)).unwrap(),
        RunOptions::default(),
    );
    let (chunks, h) = source.into_parts();
    h.wait_for(|s| *s == Status::Connected).await;
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, chunks)],
        vec![],
        WiringOptions::default(),
    );
    let mut peer = std::fs::OpenOptions::new()
        .write(true)
        .open(&pty.b)
        .unwrap();
    peer.write_all(b"1\n").unwrap();
    peer.write_all(&[b'7'; 10_000]).unwrap();
    peer.write_all(b"\n2\n").unwrap();
    assert!(wait_until(Duration::from_secs(10), || {
        let snap = wiring.snapshot();
        snap.sources.first().is_some_and(|s| s.framing.frames == 2)
    }));
    h.close().await;
    let pipeline = wiring.join();
    let stats = pipeline.stats(0).unwrap();
    assert_eq!(stats.framing.oversize_dropped, 1, "{stats:?}");
    assert_eq!(stats.rows, 2);
}

/// Bytes a device sent while nobody listened arrived at no time Sextant saw: they are not
/// read at the connect (all stamped with its time, they drew a vertical spike); what the
/// device sends from then on is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_buffered_before_the_open_are_not_read_at_the_connect() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    let mut peer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&pty.b)
        .unwrap();
    // Open and close the device end once so the line is set up, then let the device talk
    // to nobody.
    drop(std::fs::File::open(&pty.a).unwrap());
    peer.write_all(b"stale,1\nstale,2\nstale,3\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut source = Source::spawn(
        SerialDriver::new(settings(&pty.a, 115_200)).unwrap(),
        RunOptions::default(),
    );
    let h = source.handle();
    tokio::time::timeout(
        Duration::from_secs(5),
        h.wait_for(|s| *s == Status::Connected),
    )
    .await
    .expect("connected");
    peer.write_all(b"fresh,4\n").unwrap();
    let got = collect(&mut source, 8, Duration::from_secs(5)).await;
    assert_eq!(String::from_utf8_lossy(&got), "fresh,4\n");
    h.close().await;
}
