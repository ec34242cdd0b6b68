//! Every checksum against its published check value (table in fixtures/telemetry/checksums.json).

mod common;

use sextant_telemetry::checksum::ChecksumKind;

#[test]
fn published_check_values() {
    let cases = common::load_json("telemetry/checksums.json");
    let mut kinds_seen = std::collections::HashSet::new();
    for case in cases.as_array().unwrap() {
        let kind: ChecksumKind = serde_json::from_value(case["kind"].clone()).unwrap();
        let input = case["input"].as_str().unwrap().as_bytes();
        let check = u32::from_str_radix(case["check"].as_str().unwrap(), 16).unwrap();
        assert_eq!(
            kind.compute(input),
            check,
            "{kind:?} of {:?}",
            case["input"]
        );
        // The wire form is the value big-endian unless the table says otherwise.
        let wire = match case.get("wire") {
            Some(w) => common::bytes_of(&format!("hex:{}", w.as_str().unwrap())),
            None => check.to_be_bytes()[4 - kind.len()..].to_vec(),
        };
        assert_eq!(kind.encode(input), wire, "{kind:?} wire bytes");
        assert!(kind.verify(input, &wire));
        let mut corrupted = wire.clone();
        corrupted[0] ^= 0x01;
        assert!(
            !kind.verify(input, &corrupted),
            "{kind:?} must reject a flipped bit"
        );
        assert!(
            !kind.verify(input, &wire[1..]),
            "{kind:?} must reject a short trailer"
        );
        kinds_seen.insert(case["kind"].as_str().unwrap().to_string());
    }
    assert_eq!(
        kinds_seen.len(),
        9,
        "all nine checksums have a published vector"
    );
}

#[test]
fn long_inputs_do_not_overflow() {
    let data = vec![0xFFu8; 100_000];
    // Reference values computed by the unblocked definitions (mod after every byte).
    let (mut a, mut b) = (0u32, 0u32);
    for &x in &data {
        a = (a + x as u32) % 255;
        b = (b + a) % 255;
    }
    assert_eq!(ChecksumKind::Fletcher16.compute(&data), (b << 8) | a);
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &data {
        a = (a + x as u32) % 65521;
        b = (b + a) % 65521;
    }
    assert_eq!(ChecksumKind::Adler32.compute(&data), (b << 16) | a);
}

/// Every kind's value over the catalogue's check string `"123456789"`, against the
/// names the docs use (those of the catalogue of parametrised CRC algorithms): `crc16` is
/// CCITT-FALSE (29B1), `crc16-ccitt` is XMODEM (31C3), and neither is CRC-16/ARC (BB3D).
#[test]
fn check_string_matches_the_catalogue_names() {
    let catalogue = [
        (ChecksumKind::Xor8, 0x31, "XOR-8"),
        (ChecksumKind::Mod256, 0xDD, "MOD-256"),
        (ChecksumKind::Crc8, 0xF7, "CRC-8/NRSC-5"),
        (ChecksumKind::Crc16, 0x29B1, "CRC-16/IBM-3740 (CCITT-FALSE)"),
        (ChecksumKind::Crc16Modbus, 0x4B37, "CRC-16/MODBUS"),
        (ChecksumKind::Crc16Ccitt, 0x31C3, "CRC-16/XMODEM"),
        (ChecksumKind::Fletcher16, 0x1EDE, "Fletcher-16"),
        (ChecksumKind::Crc32, 0xCBF4_3926, "CRC-32/ISO-HDLC"),
        (ChecksumKind::Adler32, 0x091E_01DE, "Adler-32"),
    ];
    let named: Vec<ChecksumKind> = catalogue.iter().map(|(k, _, _)| *k).collect();
    let every: Vec<ChecksumKind> = ChecksumKind::ALL
        .into_iter()
        .filter(|k| !k.is_none())
        .collect();
    assert_eq!(named, every, "every checksum kind has its catalogue entry");
    for (kind, check, name) in catalogue {
        assert_eq!(
            kind.compute(b"123456789"),
            check,
            "{kind:?} must be {name} (check value {check:X})"
        );
        assert_ne!(
            kind.compute(b"123456789"),
            0xBB3D,
            "{kind:?} is not CRC-16/ARC"
        );
    }
}
