//! Every checksum on any bytes: encode/verify agree, and a flipped trailer bit is caught.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sextant_telemetry::checksum::ChecksumKind;

fuzz_target!(|data: &[u8]| {
    for kind in ChecksumKind::ALL {
        let trailer = kind.encode(data);
        assert_eq!(trailer.len(), kind.len());
        assert!(kind.verify(data, &trailer));
        if !trailer.is_empty() {
            let mut bad = trailer.clone();
            bad[0] ^= 0x80;
            assert!(!kind.verify(data, &bad));
        }
    }
});
