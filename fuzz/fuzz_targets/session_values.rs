//! Any bytes as a session's stored frame values: values or a clear error, never a panic;
//! whatever decodes encodes back to exactly the same bytes (numbers keep their bits).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sextant_sessions::codec::{decode, encode};

fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Ok(values) => assert_eq!(
            encode(&values),
            data,
            "a stored frame re-encodes differently"
        ),
        Err(message) => assert!(
            message.starts_with("value "),
            "an error that names no value: {message}"
        ),
    }
});
