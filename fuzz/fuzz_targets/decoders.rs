//! COBS and SLIP: decoding any bytes never panics, and encode → decode is the identity.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sextant_telemetry::decode::{cobs_decode, cobs_encode, slip_decode, slip_encode};

fuzz_target!(|data: &[u8]| {
    let _ = cobs_decode(data);
    let _ = slip_decode(data);
    assert_eq!(cobs_decode(&cobs_encode(data)).unwrap(), data);
    assert_eq!(slip_decode(&slip_encode(data)).unwrap(), data);
});
