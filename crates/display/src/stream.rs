//! The one display loop every shell runs: [`Scope::stream`].
//!
//! A subscriber's frames are ticked out at the rate of its [`DisplayOptions`], which arrive
//! through a `watch` channel (`None`: stop ticking, keep the place), into a bounded `mpsc`
//! the shell drains towards the page (`sextant serve`'s WebSocket writer, the desktop's Tauri
//! `Channel`). The loop owns one [`Subscriber`](crate::Subscriber) for its whole life, so
//! new options never replay the console; a tick that finds the queue full is skipped (its
//! data goes out with the next frame), so a slow page never makes frames pile up; the loop
//! ends when the queue's receiver or the options' sender is dropped.
//!
//! The display rate is bounded here, once: [`MIN_RATE_HZ`] and [`MAX_RATE_HZ`], which
//! [`DisplayOptions::validate`] checks and the UI reads (generated into
//! `ui/src/lib/display/limits.gen.ts` by this crate's `ui_limits` test).

use std::time::Duration;

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch};
use tokio::time::{interval, Interval, MissedTickBehavior};

use crate::{DisplayOptions, Scope};

/// The slowest display rate a subscriber may ask for, in ticks per second.
pub const MIN_RATE_HZ: f64 = 1.0;
/// The fastest display rate a subscriber may ask for, in ticks per second.
pub const MAX_RATE_HZ: f64 = 240.0;
/// Display frames a shell lets wait for its page at most (the depth of the queue it gives
/// [`Scope::stream`]): more ticks than that while the page is busy are skipped.
pub const FRAMES_IN_FLIGHT: usize = 2;

impl DisplayOptions {
    /// The time between two ticks. Validated options are within the rate's bounds already;
    /// any others are held to them, so the loop never divides by a bad rate.
    pub fn tick_period(&self) -> Duration {
        let hz = if self.refresh_hz.is_nan() {
            MIN_RATE_HZ
        } else {
            self.refresh_hz.clamp(MIN_RATE_HZ, MAX_RATE_HZ)
        };
        Duration::from_secs_f64(1.0 / hz)
    }
}

/// What woke the loop.
enum Wake {
    /// New options (`false`: their sender is gone).
    Options(bool),
    /// The queue's receiver is gone.
    Closed,
    Tick,
}

fn ticker(period: Duration) -> Interval {
    // The first tick is at once: a (re)started view gets its frame without waiting.
    let mut tick = interval(period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    tick
}

impl Scope {
    /// Sends one subscriber its display frames into `frames` at the rate of the newest
    /// `options` until `frames` closes or the options' sender goes.
    ///
    /// - One subscriber for the whole run: changing options (rate, points, raw tails) never
    ///   replays console bytes or resends the dataset list; `None` pauses without losing
    ///   the place.
    /// - A tick when `frames` is full is skipped before any frame is made, so the
    ///   subscriber's next frame carries everything the skipped ones would have: the queue
    ///   never holds more than its capacity (give it [`FRAMES_IN_FLIGHT`]).
    /// - A new rate starts a new tick schedule (its first tick at once); other changes keep
    ///   the schedule.
    pub async fn stream(
        self,
        mut options: watch::Receiver<Option<DisplayOptions>>,
        frames: mpsc::Sender<Vec<u8>>,
    ) {
        let mut sub = self.subscribe();
        let mut current = options.borrow_and_update().clone();
        let mut ticks = current.as_ref().map(|o| ticker(o.tick_period()));
        loop {
            let wake = tokio::select! {
                biased;
                changed = options.changed() => Wake::Options(changed.is_ok()),
                () = frames.closed() => Wake::Closed,
                () = next_tick(ticks.as_mut()) => Wake::Tick,
            };
            match wake {
                Wake::Options(false) | Wake::Closed => return,
                Wake::Options(true) => {
                    let next = options.borrow_and_update().clone();
                    let period = next.as_ref().map(DisplayOptions::tick_period);
                    if period != current.as_ref().map(DisplayOptions::tick_period) {
                        ticks = period.map(ticker);
                    }
                    current = next;
                }
                Wake::Tick => {
                    let Some(opts) = &current else { continue };
                    match frames.try_reserve() {
                        Ok(permit) => {
                            if let Some(frame) = self.frame(opts, &mut sub) {
                                permit.send(frame);
                            }
                        }
                        Err(TrySendError::Full(())) => {}
                        Err(TrySendError::Closed(())) => return,
                    }
                }
            }
        }
    }
}

/// The next tick, or never while paused.
async fn next_tick(ticks: Option<&mut Interval>) {
    match ticks {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode_header;
    use bytes::Bytes;
    use sextant_telemetry::pipeline::DatasetInfo;
    use sextant_telemetry::{Chunk, FrameEvent, FrameSink, Timestamp, Value};

    const HZ: f64 = 10.0;
    const PERIOD: Duration = Duration::from_millis(100);

    fn datasets() -> Vec<DatasetInfo> {
        vec![DatasetInfo {
            id: "d0".into(),
            title: "Dataset 0".into(),
            group: "G".into(),
            units: "V".into(),
            source: Some(0),
            slot: Some(0),
        }]
    }

    fn ts(t: f64) -> Timestamp {
        Timestamp {
            elapsed_ns: (t * 1e9).round() as u64,
            unix_ns: 0,
        }
    }

    fn push(sink: &mut impl FrameSink, t: f64) {
        let values = [Value::Number(t)];
        let event = FrameEvent {
            source: 0,
            timestamp: ts(t),
            values: &values,
        };
        sink.frame(&event, &datasets());
    }

    fn at(refresh_hz: f64) -> Option<DisplayOptions> {
        Some(DisplayOptions {
            refresh_hz,
            ..DisplayOptions::default()
        })
    }

    /// A stream of `scope` into a queue `depth` deep, with options `first`.
    fn start(
        scope: &Scope,
        first: Option<DisplayOptions>,
        depth: usize,
    ) -> (
        watch::Sender<Option<DisplayOptions>>,
        mpsc::Receiver<Vec<u8>>,
        tokio::task::JoinHandle<()>,
    ) {
        let (options, options_rx) = watch::channel(first);
        let (frames, frames_rx) = mpsc::channel(depth);
        let task = tokio::spawn(scope.clone().stream(options_rx, frames));
        (options, frames_rx, task)
    }

    fn drain(rx: &mut mpsc::Receiver<Vec<u8>>) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn it_ticks_at_the_rate_asked_for() {
        let scope = Scope::new();
        let mut sink = scope.sink();
        let (_options, mut rx, _task) = start(&scope, at(HZ), 64);
        // New data half-way between ticks: every tick has something to send.
        tokio::time::sleep(PERIOD / 2).await;
        for i in 0..20 {
            push(&mut sink, i as f64);
            tokio::time::sleep(PERIOD).await;
        }
        // Ticks at 0, 100, …, 2000 ms: the first (dataset list) and one per push.
        let got = drain(&mut rx);
        assert_eq!(got.len(), 21);
        let seqs: Vec<u32> = got.iter().map(|f| decode_header(f).unwrap().seq).collect();
        assert_eq!(seqs, (0..21).collect::<Vec<_>>());
        assert_eq!(decode_header(got.last().unwrap()).unwrap().frames, 20);
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_rate_changes_the_ticks() {
        let scope = Scope::new();
        let mut sink = scope.sink();
        let (options, mut rx, _task) = start(&scope, at(HZ), 256);
        tokio::time::sleep(PERIOD / 2).await;
        for i in 0..10 {
            push(&mut sink, i as f64);
            tokio::time::sleep(PERIOD).await;
        }
        assert_eq!(drain(&mut rx).len(), 11);
        // 100 Hz from now on: a second of new data every 5 ms gives 100 frames.
        options.send_replace(at(100.0));
        tokio::time::sleep(Duration::from_micros(2500)).await;
        for i in 0..200 {
            push(&mut sink, 10.0 + i as f64);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let n = drain(&mut rx).len();
        assert!((100..=101).contains(&n), "{n} frames in a second at 100 Hz");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_skips_ticks_and_never_holds_more_than_its_depth() {
        let scope = Scope::new();
        let mut sink = scope.sink();
        let (_options, mut rx, _task) = start(&scope, at(HZ), FRAMES_IN_FLIGHT);
        tokio::time::sleep(PERIOD / 2).await;
        for i in 0..10 {
            push(&mut sink, i as f64);
            tokio::time::sleep(PERIOD).await;
            assert!(rx.len() <= FRAMES_IN_FLIGHT);
        }
        // Ten ticks while nobody read: two frames wait, the others were never made.
        let waiting = drain(&mut rx);
        assert_eq!(waiting.len(), FRAMES_IN_FLIGHT);
        let seqs: Vec<u32> = waiting
            .iter()
            .map(|f| decode_header(f).unwrap().seq)
            .collect();
        assert_eq!(seqs, [0, 1]);
        // The next frame follows on from them and carries everything since.
        push(&mut sink, 10.0);
        tokio::time::sleep(PERIOD).await;
        let next = drain(&mut rx);
        assert_eq!(next.len(), 1);
        let h = decode_header(&next[0]).unwrap();
        assert_eq!((h.seq, h.frames), (2, 11));
    }

    #[tokio::test(start_paused = true)]
    async fn new_options_do_not_resubscribe() {
        let scope = Scope::new();
        let mut sink = scope.sink();
        push(&mut sink, 0.0);
        sink.chunk(
            0,
            &Chunk {
                data: Bytes::from_static(b"hello\r\n"),
                timestamp: ts(0.0),
            },
        );
        let (options, mut rx, _task) = start(&scope, at(HZ), 64);
        tokio::time::sleep(PERIOD / 2).await;
        let first = drain(&mut rx);
        assert_eq!(first.len(), 1);
        let h = decode_header(&first[0]).unwrap();
        assert!(h.meta_bytes > 0 && h.console == 1, "{h:?}");

        // Other options, a pause and back: same subscriber, so no console bytes again.
        options.send_replace(Some(DisplayOptions {
            refresh_hz: 30.0,
            points: 10,
            ..DisplayOptions::default()
        }));
        tokio::time::sleep(PERIOD).await;
        options.send_replace(None);
        push(&mut sink, 1.0);
        tokio::time::sleep(PERIOD * 5).await;
        assert!(drain(&mut rx).is_empty(), "no frames while stopped");
        options.send_replace(at(HZ));
        tokio::time::sleep(PERIOD / 2).await;
        let after = drain(&mut rx);
        assert_eq!(after.len(), 1);
        let h = decode_header(&after[0]).unwrap();
        assert_eq!((h.seq, h.console, h.meta_bytes, h.frames), (1, 0, 0, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_ends_when_its_queue_or_its_options_go() {
        let scope = Scope::new();
        for first in [at(HZ), None] {
            let (_options, rx, task) = start(&scope, first, FRAMES_IN_FLIGHT);
            tokio::time::sleep(PERIOD * 3).await;
            drop(rx);
            tokio::time::timeout(PERIOD, task)
                .await
                .expect("the loop ends with its queue")
                .unwrap();
        }
        let (options, _rx, task) = start(&scope, at(HZ), FRAMES_IN_FLIGHT);
        drop(options);
        tokio::time::timeout(PERIOD, task)
            .await
            .expect("the loop ends with its options")
            .unwrap();
    }

    #[test]
    fn a_bad_rate_never_reaches_the_clock() {
        for (hz, period) in [
            (f64::NAN, 1.0),
            (0.0, 1.0),
            (-5.0, 1.0),
            (1e9, 1.0 / MAX_RATE_HZ),
            (f64::INFINITY, 1.0 / MAX_RATE_HZ),
            (50.0, 0.02),
        ] {
            let o = DisplayOptions {
                refresh_hz: hz,
                ..DisplayOptions::default()
            };
            assert!(
                (o.tick_period().as_secs_f64() - period).abs() < 1e-9,
                "{hz}"
            );
        }
    }
}
