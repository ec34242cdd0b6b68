//! Sextant's telemetry core: everything between "bytes arrived" and "a dataset has a new
//! value", plus the project model that configures it.
//!
//! The flow, one module per step: [`framing`] cuts chunks into frames and verifies their
//! [`checksum`]; [`decode`] turns a payload into what the parser sees; [`parse`] turns it
//! into rows of [`Value`]s; [`transform`] (and [`expr`]) post-process dataset values;
//! [`pipeline`] wires all of that per project; [`series`] keeps history for plots and
//! [`csv`] writes it out. [`can_frame`] is the byte layout CAN sources and CAN parsers
//! share.
//!
//! Architecture invariant: this crate is pure. It does no I/O beyond the explicit
//! project save/load helpers and a caller-supplied CSV writer, spawns no threads, and knows
//! nothing of async, devices or the UI. Callers hand it byte chunks with timestamps; it
//! hands back values.

pub mod can_frame;
pub mod checksum;
pub mod csv;
pub mod decode;
pub mod dryrun;
pub mod expr;
pub mod framing;
pub mod images;
pub mod parse;
pub mod pipeline;
pub mod project;
pub mod series;
pub mod sink;
pub mod transform;
pub mod value;

pub use pipeline::{FrameEvent, Pipeline, Timestamp};
pub use project::Project;
pub use sink::{Chunk, FrameSink};
pub use value::{Rows, Value};
