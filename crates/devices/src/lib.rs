//! Device sources: every way bytes enter Sextant, behind one [`source::Source`]
//! abstraction (timestamped chunks, status, counters, writes, reconnection).
//!
//! Drivers: [`serial`], [`net`] (TCP client, UDP/multicast), [`mqtt`], [`process`]
//! (programs and named pipes), [`sim_source`] (the demo device) and [`replay`] (captures
//! written by [`capture`]). [`connect`] starts the right driver for a project source, and
//! [`wiring`] connects running sources to a telemetry pipeline on its own thread.
//! CAN: [`can`] (one frame per chunk), [`slcan`] adapters, `socketcan` (Linux) and
//! [`dbc`] import. BLE: [`ble`] (GATT notifications through btleplug, and a device scan).
//! Modbus: [`modbus`] (TCP or RTU, polled register groups, register-map import).
//!
//! Architecture invariant: devices produce byte chunks and accept writes; they never
//! parse frames (that is `sextant-telemetry`'s job) and never touch the UI. A slow
//! consumer never stalls a device: full queues drop chunks and count them, and every
//! queue is capped in bytes as well as in chunks ([`queue`]).

pub mod ble;
pub mod can;
pub mod capture;
pub mod connect;
pub mod csv_replay;
pub mod dbc;
pub mod message_replay;
pub mod modbus;
pub mod mqtt;
pub mod net;
pub mod process;
pub mod publisher;
pub mod queue;
pub mod replay;
pub mod serial;
pub mod sim_source;
pub mod simulator;
pub mod slcan;
#[cfg(target_os = "linux")]
pub mod socketcan;
pub mod source;
pub mod tls;
pub mod wiring;

pub use tls::Credentials;

pub use source::{
    Chunk, Clock, DeviceError, Driver, Link, Reconnect, RunOptions, Source, SourceHandle, Status,
};
