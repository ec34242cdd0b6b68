//! The live display: what the dashboard draws, kept apart from the pipeline.
//!
//! [`Scope`] is a [`FrameSink`] on the pipeline thread that keeps a bounded window of every
//! dataset (time and value rings), the newest text values and the newest raw console bytes.
//! Each door (the desktop app's Channel, `sextant serve`'s WebSocket) asks it once per
//! display tick for a [`frame`](Scope::frame): a binary message with every dataset's visible
//! window already decimated, laid out as little-endian columns the UI reads as typed arrays
//! without copying (`docs/ui-protocol.md`).
//!
//! The pipeline never waits for the UI: the sink only `try_lock`s the shared state; while a
//! tick holds it, frames collect in a private batch that is moved over on the next frame.

mod block;
mod encode;
mod scope;

pub use encode::{decode_header, FrameHeader, HEADER_BYTES, MAGIC};
pub use scope::{DisplayOptions, Scope, ScopeSink, Subscriber, CONSOLE_BYTES, WINDOW_SAMPLES};
