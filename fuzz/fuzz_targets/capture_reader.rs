//! Any bytes as a raw capture file: records or a clear error, never a panic; what was read
//! writes back to the same bytes, so a capture cut by a crash loses only its last record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sextant_devices::capture::{CaptureReader, CaptureWriter, MAGIC};

fuzz_target!(|data: &[u8]| {
    // Half the inputs get the magic, so the records themselves are explored.
    let mut file = Vec::new();
    if data.first().is_some_and(|b| b & 1 == 0) {
        file.extend_from_slice(MAGIC);
    }
    file.extend_from_slice(data.get(1..).unwrap_or_default());
    let Ok(mut reader) = CaptureReader::new(&file[..]) else {
        return;
    };
    let mut records = Vec::new();
    let clean = loop {
        match reader.next_record() {
            Ok(Some(r)) => records.push(r),
            Ok(None) => break !reader.truncated,
            Err(_) => break false,
        }
    };
    let mut writer = CaptureWriter::new(Vec::new()).expect("writes to memory");
    for r in &records {
        writer
            .write(r.source, r.timestamp, &r.data)
            .expect("writes to memory");
    }
    let written = writer.into_inner();
    assert!(
        file.starts_with(&written),
        "records read back to different bytes"
    );
    if clean {
        assert_eq!(written, file, "a clean capture lost bytes");
    }
});
