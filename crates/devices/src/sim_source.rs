//! The simulator as a live source: generates frames at the configured rate, in real time.

use std::time::{Duration, Instant};

use bytes::Bytes;
use sextant_telemetry::project::SimulatorSettings;
use sextant_telemetry::Timestamp;

use crate::simulator::Simulator;
use crate::source::{Clock, DeviceError, Driver, Link};

/// How often the simulator emits a chunk; all frames due in that interval go together, as
/// a UART driver would deliver them. A chunk never spans more than a tick: a simulator
/// that fell behind (the machine stalled) catches up a tick's worth per chunk.
pub const TICK: Duration = Duration::from_millis(10);
/// Cap on frames per chunk, so a 10 MHz setting cannot build giant chunks: a chunk is
/// built in one go on a worker thread, and 10 000 of the demo's frames are ~1.3 MiB and a
/// few milliseconds.
const MAX_FRAMES_PER_CHUNK: u64 = 10_000;

pub struct SimulatorDriver {
    settings: SimulatorSettings,
    clock: Option<Clock>,
}

impl SimulatorDriver {
    pub fn new(settings: SimulatorSettings) -> Self {
        SimulatorDriver {
            settings,
            clock: None,
        }
    }
}

impl Driver for SimulatorDriver {
    type Link = SimulatorLink;

    fn describe(&self) -> String {
        format!("simulator @ {} frames/s", self.settings.frame_rate_hz)
    }

    fn use_clock(&mut self, clock: Clock) {
        self.clock = Some(clock);
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
            per_chunk: ((rate * TICK.as_secs_f64()).ceil() as u64).clamp(1, MAX_FRAMES_PER_CHUNK),
            clock: self.clock,
            started: Instant::now(),
            sent: 0,
            buf: Vec::with_capacity(64 * 1024),
        })
    }
}

pub struct SimulatorLink {
    sim: Simulator,
    rate: f64,
    /// Frames in a chunk at most: a tick's worth.
    per_chunk: u64,
    clock: Option<Clock>,
    started: Instant,
    sent: u64,
    buf: Vec<u8>,
}

impl Link for SimulatorLink {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        loop {
            let due = (self.started.elapsed().as_secs_f64() * self.rate) as u64;
            if due > self.sent {
                let n = (due - self.sent).min(self.per_chunk);
                self.buf.clear();
                for k in 0..n {
                    self.sim
                        .frame_at((self.sent + k) as f64 / self.rate, &mut self.buf);
                }
                self.sent += n;
                // Stamped with the time its last frame describes, not when the runner got
                // it: a simulated device keeps perfect time, so a late wake-up (a loaded
                // machine) neither bunches frames onto one time nor shifts a waveform's
                // edges, and a triggered plot stays still.
                let produced =
                    self.started + Duration::from_secs_f64((self.sent - 1) as f64 / self.rate);
                let stamp = self.clock.map(|clock| clock.at(produced));
                return Ok(Some((Bytes::copy_from_slice(&self.buf), stamp)));
            }
            // Nothing is generated before the sleep, so dropping this future loses nothing.
            let next = Duration::from_secs_f64((self.sent + 1) as f64 / self.rate);
            // Slow rates wake for each frame; fast ones batch a tick's worth per chunk.
            let wake = self.started + next.max(self.started.elapsed() + TICK);
            tokio::time::sleep_until(wake.into()).await;
        }
    }
}
