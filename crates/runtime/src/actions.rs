//! What a project's actions send beyond one click, and the one way any byte reaches a
//! device.
//!
//! [`Sender`] is the only path a send takes (`console.send`, an action's click, its timer,
//! its send on connect): it writes through the source's handle and puts the bytes in the
//! console marked as sent, so a person sees every byte Sextant put on the wire.
//!
//! [`ActionTimers`] belongs to one live run: from the connection on it runs each action's
//! send on connect and its timer when that runs while connected (a device that answers only
//! when polled); a click starts, toggles or bursts the other timers. Dropping it – the run
//! ends – stops every task, so nothing sends after a disconnect. A timer waits for its source
//! to be connected, pauses while it reconnects, and never sends faster than
//! [`Action::MIN_TIMER_MS`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sextant_devices::{Clock, DeviceError, SourceHandle, Status};
use sextant_display::Scope;
use sextant_telemetry::project::{Action, ActionTimer};
use tokio::task::AbortHandle;
use tokio::time::MissedTickBehavior;

/// Most one-off sends (a console send, an action's click) waiting for one source at a
/// time. A device that stops taking bytes (hardware flow control, a stalled peer) makes the
/// next send fail with the reason, instead of piling up a task and its bytes per send.
pub(crate) const MAX_WAITING_SENDS: usize = 64;

/// A one-off send refused: [`MAX_WAITING_SENDS`] are still waiting for the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Busy;

impl Busy {
    pub(crate) fn message(self) -> String {
        format!(
            "the device is not taking bytes: {MAX_WAITING_SENDS} sends are still waiting for it; \
             check its connection (or flow control) and send again"
        )
    }
}

/// One source of the live run as a destination: its handle, and the console that shows
/// what is sent to it.
#[derive(Clone)]
pub(crate) struct Sender {
    handle: SourceHandle,
    index: u32,
    scope: Scope,
    clock: Clock,
    /// One-off sends started and not yet written (shared by every clone).
    waiting: Arc<AtomicUsize>,
}

impl Sender {
    pub(crate) fn new(handle: SourceHandle, index: usize, scope: Scope, clock: Clock) -> Sender {
        Sender {
            handle,
            index: index as u32,
            scope,
            clock,
            waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Starts writing `bytes` without waiting for the device; the outcome shows in the
    /// source's status. Refused while [`MAX_WAITING_SENDS`] are still waiting.
    pub(crate) fn send_soon(&self, bytes: Bytes) -> Result<(), Busy> {
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= MAX_WAITING_SENDS {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(Busy);
        }
        let sender = self.clone();
        tokio::spawn(async move {
            if let Err(e) = sender.send(bytes).await {
                tracing::warn!(source = sender.name(), "write failed: {e}");
            }
            sender.waiting.fetch_sub(1, Ordering::SeqCst);
        });
        Ok(())
    }

    /// Writes `bytes` to the device; once written, the console shows them as sent.
    pub(crate) async fn send(&self, bytes: Bytes) -> Result<(), DeviceError> {
        self.handle.write(bytes.clone()).await?;
        self.scope
            .sent(self.clock.now().elapsed_s(), self.index, &bytes);
        Ok(())
    }

    /// The source's position in the project.
    pub(crate) fn index(&self) -> usize {
        self.index as usize
    }

    /// The source's name, for logs.
    pub(crate) fn name(&self) -> &str {
        self.handle.name()
    }

    /// Waits until the source is connected; false when it ended instead.
    async fn connected(&self) -> bool {
        let status = self
            .handle
            .wait_for(|s| matches!(s, Status::Connected) || ended(s))
            .await;
        matches!(status, Status::Connected)
    }

    /// Waits until the source is no longer connected.
    async fn disconnected(&self) {
        self.handle
            .wait_for(|s| !matches!(s, Status::Connected))
            .await;
    }

    fn is_connected(&self) -> bool {
        matches!(self.handle.status(), Status::Connected)
    }
}

/// A source that will not connect again.
fn ended(status: &Status) -> bool {
    matches!(status, Status::Error(_) | Status::Finished | Status::Closed)
}

/// An action ready to send: its settings, its bytes and where they go.
#[derive(Clone)]
pub(crate) struct Armed {
    pub action: Action,
    pub bytes: Bytes,
    pub sender: Sender,
}

impl Armed {
    fn interval(&self) -> Option<Duration> {
        self.action
            .timer_ms
            .map(|ms| Duration::from_millis(ms.max(Action::MIN_TIMER_MS)))
    }
}

/// What a click did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Click {
    /// Sent once.
    Sent,
    /// Its timer started (it runs until the next click, for a toggle, or the disconnect).
    Started,
    /// Its timer was running and stopped.
    Stopped,
    /// A burst of this many sends started.
    Repeating(u32),
}

impl Click {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Click::Sent => "sent",
            Click::Started => "started",
            Click::Stopped => "stopped",
            Click::Repeating(_) => "repeating",
        }
    }
}

/// The running sends of one live run, by action id; stopped when dropped.
#[derive(Default)]
pub(crate) struct ActionTimers {
    /// Started by a click (a timer or a burst), by action id.
    clicked: HashMap<String, AbortHandle>,
    /// Started with the run (sends on connect, timers while connected).
    background: Vec<AbortHandle>,
}

impl Drop for ActionTimers {
    fn drop(&mut self) {
        for task in self.clicked.values().chain(&self.background) {
            task.abort();
        }
    }
}

impl ActionTimers {
    /// Starts what runs by itself from each connection on: sends on connect and timers
    /// that run while connected.
    pub(crate) fn start(armed: Vec<Armed>) -> ActionTimers {
        let mut timers = ActionTimers::default();
        for a in armed {
            let polls = a.action.polls_while_connected();
            if a.action.sends_by_itself() {
                timers
                    .background
                    .push(tokio::spawn(on_each_connection(a, polls)).abort_handle());
            }
        }
        timers
    }

    /// A person's click on an action (or a caller's `project.action.run`).
    pub(crate) fn click(&mut self, armed: Armed) -> Result<Click, Busy> {
        let id = armed.action.id.clone();
        self.clicked.retain(|_, task| !task.is_finished());
        let Some(every) = armed.interval() else {
            return self.once(armed);
        };
        Ok(match armed.action.timer {
            // Its timer runs by itself; a click sends once more.
            ActionTimer::WhileConnected => return self.once(armed),
            ActionTimer::StartOnClick if self.clicked.contains_key(&id) => Click::Started,
            ActionTimer::ToggleOnClick if self.clicked.contains_key(&id) => {
                if let Some(task) = self.clicked.remove(&id) {
                    task.abort();
                }
                Click::Stopped
            }
            ActionTimer::StartOnClick | ActionTimer::ToggleOnClick => {
                let task = tokio::spawn(every_tick(armed, every, None));
                self.clicked.insert(id, task.abort_handle());
                Click::Started
            }
            ActionTimer::Repeat => {
                let times = armed
                    .action
                    .repeat_count
                    .unwrap_or(Action::DEFAULT_REPEAT)
                    .max(1);
                if let Some(previous) = self.clicked.remove(&id) {
                    previous.abort();
                }
                let task = tokio::spawn(every_tick(armed, every, Some(times)));
                self.clicked.insert(id, task.abort_handle());
                Click::Repeating(times)
            }
        })
    }

    /// Whether a click-started timer of `id` is running.
    pub(crate) fn running(&self, id: &str) -> bool {
        self.clicked.get(id).is_some_and(|t| !t.is_finished())
    }

    fn once(&mut self, armed: Armed) -> Result<Click, Busy> {
        armed.sender.send_soon(armed.bytes)?;
        Ok(Click::Sent)
    }
}

/// For each connection of the source: the send on connect, then (`polls`) the timer until
/// it disconnects.
async fn on_each_connection(armed: Armed, polls: bool) {
    while armed.sender.connected().await {
        if armed.action.on_connect {
            if let Err(e) = armed.sender.send(armed.bytes.clone()).await {
                tracing::warn!(source = armed.sender.name(), "send on connect failed: {e}");
            }
        }
        match armed.interval().filter(|_| polls) {
            Some(every) => {
                // The timer's first send comes one interval after the connection, as a
                // Serial Studio timer's does: every action's send on connect (a wake-up the
                // device needs before it answers polls) goes first.
                let first = Some(every);
                tick_while_connected(&armed, every, first, None).await;
            }
            None => armed.sender.disconnected().await,
        }
    }
}

/// A click's timer: every `every` (at most `times` sends), paused while the source is not
/// connected.
async fn every_tick(armed: Armed, every: Duration, times: Option<u32>) {
    let mut left = times;
    while left != Some(0) && armed.sender.connected().await {
        left = tick_while_connected(&armed, every, None, left).await;
    }
}

/// Sends every `every` (the first after `first`, else at once) while the source stays
/// connected and sends are `left`; how many are left when it disconnected.
async fn tick_while_connected(
    armed: &Armed,
    every: Duration,
    first: Option<Duration>,
    mut left: Option<u32>,
) -> Option<u32> {
    let start = tokio::time::Instant::now() + first.unwrap_or_default();
    let mut ticks = tokio::time::interval_at(start, every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    while left != Some(0) {
        ticks.tick().await;
        if !armed.sender.is_connected() {
            break;
        }
        match armed.sender.send(armed.bytes.clone()).await {
            Ok(()) => left = left.map(|n| n - 1),
            Err(e) => {
                tracing::warn!(source = armed.sender.name(), "timed send failed: {e}");
                break;
            }
        }
    }
    left
}
