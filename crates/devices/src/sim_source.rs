//! The simulator as a live source: generates frames at the configured rate, in real time.

use std::time::{Duration, Instant};

use bytes::Bytes;
use sextant_telemetry::project::SimulatorSettings;
use sextant_telemetry::Timestamp;

use crate::simulator::Simulator;
use crate::source::{DeviceError, Driver, Link};

/// How often the simulator emits a chunk; all frames due in that interval go together, as
/// a UART driver would deliver them.
pub const TICK: Duration = Duration::from_millis(10);
/// Cap on frames per chunk, so a 10 MHz setting cannot build giant chunks: a chunk is
/// built in one go on a worker thread, and 10 000 of the demo's frames are ~1.3 MiB and a
/// few milliseconds.
const MAX_FRAMES_PER_CHUNK: u64 = 10_000;

pub struct SimulatorDriver {
    pub settings: SimulatorSettings,
}

impl Driver for SimulatorDriver {
    type Link = SimulatorLink;

    fn describe(&self) -> String {
        format!("simulator @ {} frames/s", self.settings.frame_rate_hz)
    }

    async fn open(&mut self) -> Result<SimulatorLink, DeviceError> {
        let rate = self.settings.frame_rate_hz;
        if !(rate.is_finite() && rate > 0.0 && rate <= 10_000_000.0) {
            return Err(DeviceError::fatal(format!(
                "simulator rate {rate} is out of range (up to 10 000 000 frames/s)"
            )));
        }
        Ok(SimulatorLink {
            sim: Simulator::new(self.settings.clone()),
            rate,
            started: Instant::now(),
            sent: 0,
            buf: Vec::with_capacity(64 * 1024),
        })
    }
}

pub struct SimulatorLink {
    sim: Simulator,
    rate: f64,
    started: Instant,
    sent: u64,
    buf: Vec<u8>,
}

impl Link for SimulatorLink {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        loop {
            let due = (self.started.elapsed().as_secs_f64() * self.rate) as u64;
            if due > self.sent {
                let n = (due - self.sent).min(MAX_FRAMES_PER_CHUNK);
                self.buf.clear();
                for k in 0..n {
                    self.sim
                        .frame_at((self.sent + k) as f64 / self.rate, &mut self.buf);
                }
                self.sent += n;
                return Ok(Some((Bytes::copy_from_slice(&self.buf), None)));
            }
            // Nothing is generated before the sleep, so dropping this future loses nothing.
            let next = Duration::from_secs_f64((self.sent + 1) as f64 / self.rate);
            // Slow rates wake for each frame; fast ones batch a tick's worth per chunk.
            let wake = self.started + next.max(self.started.elapsed() + TICK);
            tokio::time::sleep_until(wake.into()).await;
        }
    }
}
