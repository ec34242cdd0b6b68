//! Any text as a Serial Studio project: an error or a project, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = sextant_import::import_serial_studio(text);
});
