//! Analysis of telemetry, the same for live and recorded data: a summary of each dataset
//! ([`summary`]), the time ranges where a condition holds ([`find`]), the spectrum's peaks
//! ([`spectrum`]) and the difference of two summaries ([`compare`]).
//!
//! Every analysis takes one dataset's samples in time order, one at a time
//! (`push(t, reading)`), and keeps memory bounded whatever the window's length: a recorded
//! hour is read in one streaming pass, never loaded. Where the samples come from (the live
//! rings, a session in SQLite) is the caller's business; this crate knows no source, file
//! or project.

pub mod compare;
pub mod find;
pub mod quantile;
pub mod spectrum;
pub mod summary;

pub use compare::{compare, Difference};
pub use find::{Condition, Direction, Finder, Found, Range};
pub use spectrum::{Peak, Spectrum, Welch};
pub use summary::{Accumulator, Frames, Percentiles, Reading, Summary};
