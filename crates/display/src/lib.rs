//! The live display: what the dashboard draws, kept apart from the pipeline.
//!
//! [`Scope`] is a [`FrameSink`] on the pipeline thread that keeps a bounded window of every
//! dataset (time and value rings), the newest text values and the newest raw console bytes.
//! A subscriber asks it once per display tick for a [`frame`](Scope::frame): a binary
//! message with every dataset's visible window already decimated, laid out as little-endian
//! columns the UI reads as typed arrays without copying (`docs/ui-protocol.md`).
//!
//! [`Scope::stream`] is the one display loop, which both shells run (the desktop app's
//! Tauri `Channel`, `sextant serve`'s WebSocket): options through a `watch` channel, frames
//! into a bounded queue ([`FRAMES_IN_FLIGHT`]), a tick skipped while the queue is full, one
//! subscriber for the loop's life. The display rate's bounds are [`MIN_RATE_HZ`] and
//! [`MAX_RATE_HZ`], checked by [`DisplayOptions::validate`] and nowhere else in the
//! backend; the UI reads them from `ui/src/lib/display/limits.gen.ts`, generated from them.
//!
//! The pipeline never waits for the UI: the sink only `try_lock`s the shared state; while a
//! tick holds it, frames collect in a private batch that is moved over on the next frame.
//!
//! [`FrameSink`]: sextant_telemetry::FrameSink

mod block;
mod encode;
mod scope;
mod stream;

pub use encode::{decode_console, decode_header, FrameHeader, HEADER_BYTES, MAGIC};
pub use scope::{
    DisplayOptions, Recent, RecentDataset, Scope, ScopeSink, Subscriber, CONSOLE_BYTES, SENT,
    WINDOW_SAMPLES,
};
pub use stream::{FRAMES_IN_FLIGHT, MAX_RATE_HZ, MIN_RATE_HZ};
