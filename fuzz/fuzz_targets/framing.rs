//! Any framing configuration on any bytes, split anywhere: never panics, stays bounded,
//! and gives the same frames however the stream is split.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sextant_telemetry::checksum::ChecksumKind;
use sextant_telemetry::framing::{Framer, FramerConfig};
use sextant_telemetry::project::FrameMode;

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    let mode = [
        FrameMode::EndOnly,
        FrameMode::StartEnd,
        FrameMode::StartOnly,
        FrameMode::None,
    ][data[0] as usize % 4];
    let checksum = ChecksumKind::ALL[data[1] as usize % ChecksumKind::ALL.len()];
    let start_len = 1 + data[2] as usize % 3;
    let end_len = 1 + data[3] as usize % 3;
    let max = 1 + data[4] as usize * 4;
    let split = data[5] as usize;
    let rest = &data[6..];
    if rest.len() < start_len + end_len {
        return;
    }
    let (start, rest) = rest.split_at(start_len);
    let (end, stream) = rest.split_at(end_len);
    let config = FramerConfig {
        mode,
        start: start.to_vec(),
        ends: vec![end.to_vec(), b"\n".to_vec()],
        checksum,
        max_frame_bytes: max,
    };
    let mut whole = Framer::new(config.clone());
    let mut a = Vec::new();
    whole.push(stream, &mut |f| a.push(f.to_vec()));
    assert!(whole.pending() <= max + 16);
    if mode == FrameMode::None {
        return;
    }
    let cut = split.min(stream.len());
    let mut parts = Framer::new(config);
    let mut b = Vec::new();
    parts.push(&stream[..cut], &mut |f| b.push(f.to_vec()));
    parts.push(&stream[cut..], &mut |f| b.push(f.to_vec()));
    assert_eq!(a, b, "frames must not depend on read boundaries");
    assert_eq!(whole.stats(), parts.stats());
});
