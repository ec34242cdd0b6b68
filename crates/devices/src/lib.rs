//! Device sources. Today this holds the built-in simulator's signal generator, the demo
//! device every first run opens; the async `Source` drivers (serial, network, MQTT, CAN,
//! Modbus, BLE, process, replay) join it here behind one abstraction.
//!
//! Architecture invariant: devices produce timestamped byte chunks and accept writes; they
//! never parse frames (that is `sextant-telemetry`'s job) and never touch the UI.

pub mod simulator;
