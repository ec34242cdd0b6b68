//! Frame checksums: the nine algorithms of the spec, computed over a frame's payload and
//! carried after its end delimiter.
//!
//! The definitions are Serial Studio's, so a device already configured for it (and every
//! imported project) verifies unchanged; each is a catalogued CRC with a published check
//! value over `"123456789"`:
//!
//! | name | algorithm | check |
//! |---|---|---|
//! | `crc8` | CRC-8/NRSC-5 (poly 0x31, init 0xFF) | `F7` |
//! | `crc16` | CRC-16/IBM-3740, a.k.a. CCITT-FALSE (poly 0x1021, init 0xFFFF) | `29B1` |
//! | `crc16-modbus` | CRC-16/MODBUS (poly 0x8005 reflected, init 0xFFFF) | `4B37` |
//! | `crc16-ccitt` | CRC-16/XMODEM (poly 0x1021, init 0) | `31C3` |
//! | `crc32` | CRC-32/ISO-HDLC (zlib's) | `CBF43926` |
//!
//! Multi-byte checksums travel big-endian (most significant byte first), except
//! CRC-16-MODBUS, which Modbus sends low byte first.

use crc::{Crc, CRC_16_IBM_3740, CRC_16_MODBUS, CRC_16_XMODEM, CRC_32_ISO_HDLC, CRC_8_NRSC_5};

pub use crate::project::ChecksumKind;

const CRC8: Crc<u8> = Crc::<u8>::new(&CRC_8_NRSC_5);
const CRC16: Crc<u16> = Crc::<u16>::new(&CRC_16_IBM_3740);
const CRC16_MODBUS: Crc<u16> = Crc::<u16>::new(&CRC_16_MODBUS);
const CRC16_CCITT: Crc<u16> = Crc::<u16>::new(&CRC_16_XMODEM);
const CRC32: Crc<u32> = Crc::<u32>::new(&CRC_32_ISO_HDLC);

impl ChecksumKind {
    /// Every kind, in the order of the spec.
    pub const ALL: [ChecksumKind; 10] = [
        ChecksumKind::None,
        ChecksumKind::Xor8,
        ChecksumKind::Mod256,
        ChecksumKind::Crc8,
        ChecksumKind::Crc16,
        ChecksumKind::Crc16Modbus,
        ChecksumKind::Crc16Ccitt,
        ChecksumKind::Fletcher16,
        ChecksumKind::Crc32,
        ChecksumKind::Adler32,
    ];

    /// How many bytes the checksum occupies on the wire.
    #[allow(clippy::len_without_is_empty)] // `is_none` is the natural "empty" question
    pub fn len(self) -> usize {
        match self {
            ChecksumKind::None => 0,
            ChecksumKind::Xor8 | ChecksumKind::Mod256 | ChecksumKind::Crc8 => 1,
            ChecksumKind::Crc16
            | ChecksumKind::Crc16Modbus
            | ChecksumKind::Crc16Ccitt
            | ChecksumKind::Fletcher16 => 2,
            ChecksumKind::Crc32 | ChecksumKind::Adler32 => 4,
        }
    }

    pub fn is_none(self) -> bool {
        self == ChecksumKind::None
    }

    /// The checksum value of `data`.
    pub fn compute(self, data: &[u8]) -> u32 {
        match self {
            ChecksumKind::None => 0,
            ChecksumKind::Xor8 => data.iter().fold(0u8, |acc, b| acc ^ b) as u32,
            ChecksumKind::Mod256 => data.iter().fold(0u8, |acc, b| acc.wrapping_add(*b)) as u32,
            ChecksumKind::Crc8 => CRC8.checksum(data) as u32,
            ChecksumKind::Crc16 => CRC16.checksum(data) as u32,
            ChecksumKind::Crc16Modbus => CRC16_MODBUS.checksum(data) as u32,
            ChecksumKind::Crc16Ccitt => CRC16_CCITT.checksum(data) as u32,
            ChecksumKind::Fletcher16 => fletcher16(data) as u32,
            ChecksumKind::Crc32 => CRC32.checksum(data),
            ChecksumKind::Adler32 => adler32(data),
        }
    }

    /// The bytes that follow the end delimiter for `data`, in wire order.
    pub fn encode(self, data: &[u8]) -> Vec<u8> {
        let value = self.compute(data);
        let be = value.to_be_bytes();
        match self.len() {
            0 => Vec::new(),
            1 => vec![be[3]],
            2 if self == ChecksumKind::Crc16Modbus => vec![be[3], be[2]],
            2 => vec![be[2], be[3]],
            _ => be.to_vec(),
        }
    }

    /// Whether `trailer` (exactly [`len`](Self::len) bytes) is the checksum of `payload`.
    pub fn verify(self, payload: &[u8], trailer: &[u8]) -> bool {
        if trailer.len() != self.len() {
            return false;
        }
        if self.is_none() {
            return true;
        }
        self.encode(payload) == trailer
    }
}

fn fletcher16(data: &[u8]) -> u16 {
    let (mut a, mut b) = (0u32, 0u32);
    // 5802 bytes is the longest run before the sums can overflow u32, so reduce per block.
    for block in data.chunks(5802) {
        for &byte in block {
            a += byte as u32;
            b += a;
        }
        a %= 255;
        b %= 255;
    }
    ((b << 8) | a) as u16
}

fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    for block in data.chunks(5552) {
        for &byte in block {
            a += byte as u32;
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}
