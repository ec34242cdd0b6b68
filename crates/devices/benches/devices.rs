//! Per-driver throughput on this machine, end to end through the real components:
//! a pty pair (socat), a mosquitto broker, and the simulator through the whole pipeline.
//!
//! Run: `cargo bench -p sextant-devices --bench devices` (prints one line per figure).
//! Needs `socat` and `mosquitto` on PATH; a missing one is reported and skipped.

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use sextant_devices::mqtt::MqttDriver;
use sextant_devices::serial::SerialDriver;
use sextant_devices::sim_source::SimulatorDriver;
use sextant_devices::simulator::{demo_project, demo_settings, Simulator};
use sextant_devices::wiring::{Wiring, WiringOptions};
use sextant_devices::{Credentials, RunOptions, Source, Status};
use sextant_telemetry::project::{MqttSettings, SerialSettings};
use sextant_telemetry::{Pipeline, Timestamp};

fn main() {
    // `cargo bench` passes `--bench`; a word after `--` runs only the benches named with it
    // (`cargo bench -p sextant-devices --bench devices -- generating`).
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let run = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if run("pty") {
            pty().await;
        }
        if run("mqtt") {
            mqtt().await;
        }
        if run("simulator-live") {
            simulator_live().await;
        }
    });
    if run("simulator-pipeline") {
        simulator_pipeline_max();
    }
    if run("simulator-generating") {
        simulator_generation();
    }
}

async fn pty() {
    if !common::require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pty = common::PtyPair::start(dir.path());
    let settings = SerialSettings {
        port: pty.a.display().to_string(),
        baud: 3_000_000,
        ..SerialSettings::default()
    };
    let mut source = Source::spawn(SerialDriver::new(settings).unwrap(), RunOptions::default());
    let h = source.handle();
    h.wait_for(|s| *s == Status::Connected).await;
    const TOTAL: usize = 256 * 1024 * 1024;
    let peer = pty.b.clone();
    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(peer).unwrap();
        let block = vec![0x5Au8; 64 * 1024];
        for _ in 0..TOTAL / block.len() {
            f.write_all(&block).unwrap();
        }
    });
    let mut got = 0usize;
    while got < TOTAL {
        match tokio::time::timeout(Duration::from_secs(10), source.chunks.recv()).await {
            Ok(Some(c)) => got += c.data.len(),
            _ => break,
        }
    }
    let secs = started.elapsed().as_secs_f64();
    writer.join().unwrap();
    let stats = h.stats();
    println!(
        "serial/pty: {:.1} MB/s ({} MiB in {secs:.2} s, {} chunks dropped, {} bytes lost)",
        got as f64 / secs / 1e6,
        got / (1024 * 1024),
        stats.dropped_chunks,
        TOTAL - got
    );
    h.close().await;
}

async fn mqtt() {
    if !common::require("mosquitto", "mosquitto") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = common::Broker::start(dir.path());
    for qos in [0u8, 1] {
        let settings = MqttSettings {
            port: broker.port,
            topic: "bench/#".into(),
            client_id: format!("bench-sub-{qos}"),
            ..MqttSettings::default()
        };
        let mut driver = MqttDriver::new(settings, Credentials::default()).unwrap();
        driver.qos = qos;
        let mut source = Source::spawn(
            driver,
            RunOptions {
                queue_chunks: 1 << 20,
                ..RunOptions::default()
            },
        );
        let h = source.handle();
        h.wait_for(|s| *s == Status::Connected).await;
        let mut opts =
            rumqttc::MqttOptions::new(format!("bench-pub-{qos}"), "127.0.0.1", broker.port);
        opts.set_inflight(1000);
        let (client, mut events) = rumqttc::AsyncClient::new(opts, 10_000);
        tokio::spawn(async move { while events.poll().await.is_ok() {} });
        const N: usize = 200_000;
        let pub_qos = if qos == 0 {
            rumqttc::QoS::AtMostOnce
        } else {
            rumqttc::QoS::AtLeastOnce
        };
        let started = Instant::now();
        let sender = tokio::spawn(async move {
            for i in 0..N {
                client
                    .publish("bench/x", pub_qos, false, format!("{i},1.5,2.5,3.5"))
                    .await
                    .unwrap();
            }
            client
        });
        let mut got = 0usize;
        while got < N {
            match tokio::time::timeout(Duration::from_secs(5), source.chunks.recv()).await {
                Ok(Some(_)) => got += 1,
                _ => break,
            }
        }
        let secs = started.elapsed().as_secs_f64();
        let _ = sender.await;
        println!(
            "mqtt/QoS {qos}: {:.0} msg/s end to end ({got}/{N} received in {secs:.2} s, {} dropped by us)",
            got as f64 / secs,
            h.stats().dropped_chunks
        );
        h.close().await;
    }
}

async fn simulator_live() {
    let mut settings = demo_settings();
    settings.frame_rate_hz = 10_000_000.0;
    let project = demo_project();
    let source = Source::spawn(SimulatorDriver::new(settings), RunOptions::default());
    let (chunks, h) = source.into_parts();
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, chunks)],
        vec![],
        WiringOptions::default(),
    );
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    h.close().await;
    let stats = wiring.stats.clone();
    let pipeline = tokio::task::spawn_blocking(move || wiring.join())
        .await
        .unwrap();
    // Until the pipeline has parsed what was queued at the close: rows parsed after a
    // clock stopped at the close would count queued work as speed.
    let secs = started.elapsed().as_secs_f64();
    let rows = pipeline.stats(0).unwrap().rows;
    println!(
        "simulator source → wiring → pipeline (demo project, 15 datasets incl. a Lua virtual one): {:.0} frames/s sustained ({} chunks dropped by the source, {} by the wiring)",
        rows as f64 / secs,
        h.stats().dropped_chunks,
        stats.dropped_chunks.load(std::sync::atomic::Ordering::Relaxed)
    );
}

fn simulator_pipeline_max() {
    let mut settings = demo_settings();
    settings.gps = false;
    settings.imu = false;
    let mut project = demo_project();
    // Keep the plain CSV datasets only: this is the built-in path.
    project
        .groups
        .retain(|g| g.title == "Environment" || g.title == "Power");
    project.groups[1].datasets.retain(|d| !d.is_virtual);
    for g in &mut project.groups {
        for d in &mut g.datasets {
            d.transform = None;
        }
    }
    let mut sim = Simulator::new(settings);
    let mut bytes = Vec::new();
    for i in 0..200_000 {
        sim.frame_at(i as f64 * 1e-6, &mut bytes);
    }
    let mut pipeline = Pipeline::new(&project).unwrap();
    let started = Instant::now();
    let mut frames = 0u64;
    for _ in 0..5 {
        for chunk in bytes.chunks(64 * 1024) {
            pipeline.push(0, Timestamp::default(), chunk, &mut |_| frames += 1);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "simulator bytes → pipeline at max speed (5 fields, built-in parser): {:.0} frames/s",
        frames as f64 / secs
    );
}

/// What the simulator itself costs: the soak's device (16 noisy sines) generated and printed
/// as text, with nothing reading it. At 100 000 frames/s it runs on the cores the app needs,
/// where a real device does this work on its own chip.
fn simulator_generation() {
    use sextant_telemetry::project::{SimChannel, Waveform};
    let mut settings = demo_settings();
    settings.gps = false;
    settings.imu = false;
    settings.channels = (0..16)
        .map(|i| SimChannel {
            name: format!("ch{}", i + 1),
            waveform: Waveform::Sine,
            frequency_hz: 0.5 + i as f64 * 0.25,
            amplitude: 1.0,
            offset: i as f64,
            noise: 0.05,
        })
        .collect();
    let mut sim = Simulator::new(settings);
    let mut bytes = Vec::with_capacity(2 << 20);
    let (mut frames, started) = (0u64, Instant::now());
    while started.elapsed() < Duration::from_secs(2) {
        bytes.clear();
        for _ in 0..10_000 {
            sim.frame_at(frames as f64 * 1e-5, &mut bytes);
            frames += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "simulator generating the soak's 16 channels as text: {:.0} frames/s ({:.0} ns a number; {:.0} % of a core at 100 000 frames/s)",
        frames as f64 / secs,
        secs * 1e9 / (frames as f64 * 16.0),
        100_000.0 * secs / frames as f64 * 100.0
    );
}
