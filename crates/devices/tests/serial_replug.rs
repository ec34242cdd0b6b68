//! A serial device unplugged and plugged back a hundred times (a socat pseudo-terminal
//! killed and recreated): the source reconnects every time, reads what the device says
//! after each replug, and the process's open file descriptors and threads stay flat.
//!
//! A test binary of its own, so no other test's descriptors or threads move the counts.

mod common;

use std::io::Write;
use std::time::Duration;

use common::{collect, require, PtyPair};
use sextant_devices::serial::SerialDriver;
use sextant_devices::{Reconnect, RunOptions, Source, Status};
use sextant_telemetry::project::SerialSettings;

const REPLUGS: usize = 100;

/// Descriptors open in this process now.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Threads in this process now.
fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("/proc/self/status names the thread count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_replugs_leave_descriptors_and_threads_flat() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = dir.path().join("ttyA");
    let mut source = Source::spawn(
        SerialDriver::new(SerialSettings {
            port: port.display().to_string(),
            baud: 115_200,
            ..SerialSettings::default()
        })
        .unwrap(),
        RunOptions {
            reconnect: Reconnect {
                enabled: true,
                initial: Duration::from_millis(20),
                max: Duration::from_millis(100),
            },
            ..RunOptions::default()
        },
    );
    let h = source.handle();
    // Counted after a few cycles, once the runtime's worker and blocking pools have
    // grown to what one cycle needs.
    let mut baseline = None;
    for cycle in 0..REPLUGS {
        let mut pty = PtyPair::start(dir.path());
        tokio::time::timeout(
            Duration::from_secs(10),
            h.wait_for(|s| *s == Status::Connected),
        )
        .await
        .unwrap_or_else(|_| panic!("cycle {cycle}: no reconnect: {}", h.status()));
        let line = format!("cycle {cycle}\n");
        {
            let mut peer = std::fs::OpenOptions::new()
                .write(true)
                .open(&pty.b)
                .unwrap();
            peer.write_all(line.as_bytes()).unwrap();
        }
        let got = collect(&mut source, line.len(), Duration::from_secs(10)).await;
        assert_eq!(
            String::from_utf8_lossy(&got),
            line,
            "cycle {cycle}: what the device said after the replug"
        );
        pty.unplug();
        tokio::time::timeout(
            Duration::from_secs(10),
            h.wait_for(|s| matches!(s, Status::Reconnecting { .. })),
        )
        .await
        .unwrap_or_else(|_| panic!("cycle {cycle}: the unplug was not noticed: {}", h.status()));
        if cycle == 4 {
            baseline = Some((open_fds(), threads()));
        }
    }
    let (fds0, threads0) = baseline.unwrap();
    let (fds, threads_now) = (open_fds(), threads());
    println!(
        "after {REPLUGS} replugs: {fds} descriptors (at cycle 5: {fds0}), {threads_now} threads (at cycle 5: {threads0}), {} connects",
        h.stats().connects
    );
    // One of slack each: a blocking-pool thread or a descriptor the runtime opens lazily.
    assert!(
        fds <= fds0 + 1,
        "descriptors grew from {fds0} to {fds} over {} replugs",
        REPLUGS - 5
    );
    assert!(
        threads_now <= threads0 + 1,
        "threads grew from {threads0} to {threads_now} over {} replugs",
        REPLUGS - 5
    );
    assert!(h.stats().connects >= REPLUGS as u64);
    h.close().await;
}
