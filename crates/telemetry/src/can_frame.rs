//! The byte layout of one CAN frame on its way from a CAN source to a parser.
//!
//! Every CAN driver (SocketCAN, SLCAN) hands the pipeline one chunk per frame in this
//! layout, and every CAN-aware parser (the DBC decoder in `parse::can`, user scripts)
//! reads it back. It lives here, in the pure core, because both sides need the one
//! definition: the devices crate encodes it and the parsers decode it.
//!
//! ```text
//! standard (11-bit id):  [flags | id10..8,      id7..0,                      len, data…]
//! extended (29-bit id):  [0x80 | flags | id28..24, id23..16, id15..8, id7..0, len, data…]
//! ```
//!
//! That is the spec's layout (`[id_hi, id_lo, dlc, data…]` and
//! `[0x80|id28..24, id23..16, id15..8, id7..0, dlc, data…]`). What it leaves open is
//! decided here:
//!
//! - **Flags** sit in byte 0's spare high bits: `0x80` extended id, `0x40` remote
//!   transmission request (RTR), `0x20` CAN FD. A classic data frame sets none of the
//!   optional ones, so it is byte for byte the spec's layout and scripts written for the
//!   spec keep working. Bits `0x18` of a standard frame are reserved and must be zero.
//! - **`len`** is the number of data bytes (0–8 classic; 0–8, 12, 16, 20, 24, 32, 48 or
//!   64 for CAN FD), not the 4-bit FD DLC code, so a script slices the payload as
//!   `frame.slice(3, 3 + frame[2])` without a lookup table.
//! - **RTR**: a remote frame carries no data bytes; its `len` is the requested length
//!   (0–8). CAN FD has no remote frames. Parsers that decode signals skip remote frames.
//! - The bit-rate-switch and error-state flags of CAN FD are transmission details, not
//!   data: they are not carried. Error frames are not data either and never become chunks.

use std::fmt;

/// Byte-0 flag: the id is a 29-bit extended id.
pub const EXTENDED_FLAG: u8 = 0x80;
/// Byte-0 flag: a remote transmission request (no data).
pub const RTR_FLAG: u8 = 0x40;
/// Byte-0 flag: a CAN FD frame.
pub const FD_FLAG: u8 = 0x20;
/// Byte-0 bits a standard-id frame must leave clear.
const STANDARD_RESERVED: u8 = 0x18;

pub const MAX_STANDARD_ID: u32 = 0x7FF;
pub const MAX_EXTENDED_ID: u32 = 0x1FFF_FFFF;
/// Most data bytes of a classic frame.
pub const CLASSIC_MAX_LEN: usize = 8;
/// Most data bytes of a CAN FD frame.
pub const FD_MAX_LEN: usize = 64;
/// Longest chunk this layout produces: extended header (5 bytes) plus 64 data bytes.
pub const MAX_CHUNK_LEN: usize = 5 + FD_MAX_LEN;

/// Data lengths of CAN FD frames, indexed by their 4-bit DLC code.
const FD_LENGTHS: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64];

/// The data length a CAN FD DLC code (0–15) stands for.
pub fn fd_len_from_dlc(code: u8) -> Option<u8> {
    FD_LENGTHS.get(code as usize).copied()
}

/// The CAN FD DLC code of an exact data length; `None` when no code has that length.
pub fn fd_dlc_from_len(len: usize) -> Option<u8> {
    FD_LENGTHS
        .iter()
        .position(|&l| l as usize == len)
        .map(|code| code as u8)
}

/// A CAN identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CanId {
    /// 11-bit id, 0..=0x7FF.
    Standard(u16),
    /// 29-bit id, 0..=0x1FFF_FFFF.
    Extended(u32),
}

impl CanId {
    pub fn standard(id: u32) -> Result<CanId, LayoutError> {
        if id > MAX_STANDARD_ID {
            return Err(LayoutError::IdOutOfRange {
                id,
                extended: false,
            });
        }
        Ok(CanId::Standard(id as u16))
    }

    pub fn extended(id: u32) -> Result<CanId, LayoutError> {
        if id > MAX_EXTENDED_ID {
            return Err(LayoutError::IdOutOfRange { id, extended: true });
        }
        Ok(CanId::Extended(id))
    }

    /// The id without any flag.
    pub fn raw(self) -> u32 {
        match self {
            CanId::Standard(id) => id as u32,
            CanId::Extended(id) => id,
        }
    }

    pub fn is_extended(self) -> bool {
        matches!(self, CanId::Extended(_))
    }
}

impl fmt::Display for CanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CanId::Standard(id) => write!(f, "0x{id:03X}"),
            CanId::Extended(id) => write!(f, "0x{id:08X} (extended)"),
        }
    }
}

/// What kind of frame a chunk holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// A classic data frame, 0–8 bytes.
    Data,
    /// A classic remote transmission request: no data, a requested length 0–8.
    Remote,
    /// A CAN FD data frame, up to 64 bytes.
    Fd,
}

impl fmt::Display for FrameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FrameKind::Data => "classic CAN",
            FrameKind::Remote => "remote (RTR)",
            FrameKind::Fd => "CAN FD",
        })
    }
}

/// Why bytes are not a CAN frame in this layout, or a frame cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error(
        "a CAN frame chunk needs at least {need} bytes (id, length), got {got}; \
         frame the source with mode `none` so each CAN frame stays one chunk"
    )]
    TooShort { got: usize, need: usize },
    #[error("CAN id 0x{id:X} does not fit in {} bits", if *extended { 29 } else { 11 })]
    IdOutOfRange { id: u32, extended: bool },
    #[error(
        "byte 0 of a standard-id CAN frame is 0x{0:02X}: bits 0x18 are reserved and must be \
         zero (is this really a CAN frame chunk?)"
    )]
    ReservedBits(u8),
    #[error(
        "{len} data bytes is not possible for a {kind} frame (classic and remote: 0 to 8; \
         CAN FD: 0 to 8, 12, 16, 20, 24, 32, 48 or 64)"
    )]
    BadLength { len: usize, kind: FrameKind },
    #[error("the CAN frame declares {declared} data bytes but {actual} follow the header")]
    LengthMismatch { declared: usize, actual: usize },
    #[error("a frame cannot be both a remote request and CAN FD: CAN FD has no remote frames")]
    RemoteFd,
    #[error("a remote (RTR) frame carries no data bytes, but {0} follow the header")]
    RemoteWithData(usize),
}

/// One CAN frame, borrowing its data. Built only through the checked constructors or
/// [`CanFrame::decode`], so every value encodes to a valid chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanFrame<'a> {
    id: CanId,
    kind: FrameKind,
    /// Data length; for a remote frame, the requested length.
    len: u8,
    data: &'a [u8],
}

impl<'a> CanFrame<'a> {
    /// A classic data frame with 0–8 bytes.
    pub fn data(id: CanId, data: &'a [u8]) -> Result<CanFrame<'a>, LayoutError> {
        if data.len() > CLASSIC_MAX_LEN {
            return Err(LayoutError::BadLength {
                len: data.len(),
                kind: FrameKind::Data,
            });
        }
        Ok(CanFrame {
            id,
            kind: FrameKind::Data,
            len: data.len() as u8,
            data,
        })
    }

    /// A CAN FD data frame; its length must be one CAN FD can carry.
    pub fn fd(id: CanId, data: &'a [u8]) -> Result<CanFrame<'a>, LayoutError> {
        if fd_dlc_from_len(data.len()).is_none() {
            return Err(LayoutError::BadLength {
                len: data.len(),
                kind: FrameKind::Fd,
            });
        }
        Ok(CanFrame {
            id,
            kind: FrameKind::Fd,
            len: data.len() as u8,
            data,
        })
    }

    /// A remote transmission request for `len` (0–8) bytes.
    pub fn remote(id: CanId, len: usize) -> Result<CanFrame<'static>, LayoutError> {
        if len > CLASSIC_MAX_LEN {
            return Err(LayoutError::BadLength {
                len,
                kind: FrameKind::Remote,
            });
        }
        Ok(CanFrame {
            id,
            kind: FrameKind::Remote,
            len: len as u8,
            data: &[],
        })
    }

    pub fn id(&self) -> CanId {
        self.id
    }

    pub fn kind(&self) -> FrameKind {
        self.kind
    }

    /// Data length in bytes; for a remote frame, the requested length.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The data bytes (empty for a remote frame).
    pub fn payload(&self) -> &'a [u8] {
        self.data
    }

    pub fn is_remote(&self) -> bool {
        self.kind == FrameKind::Remote
    }

    pub fn is_fd(&self) -> bool {
        self.kind == FrameKind::Fd
    }

    fn header_len(&self) -> usize {
        if self.id.is_extended() {
            5
        } else {
            3
        }
    }

    /// Bytes the encoded chunk takes.
    pub fn encoded_len(&self) -> usize {
        self.header_len() + self.data.len()
    }

    /// Appends the frame in the chunk layout to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let flags = match self.kind {
            FrameKind::Data => 0,
            FrameKind::Remote => RTR_FLAG,
            FrameKind::Fd => FD_FLAG,
        };
        match self.id {
            CanId::Standard(id) => {
                out.push(flags | ((id >> 8) as u8 & 0x07));
                out.push(id as u8);
            }
            CanId::Extended(id) => {
                out.push(EXTENDED_FLAG | flags | ((id >> 24) as u8 & 0x1F));
                out.push((id >> 16) as u8);
                out.push((id >> 8) as u8);
                out.push(id as u8);
            }
        }
        out.push(self.len);
        out.extend_from_slice(self.data);
    }

    /// The frame as a chunk.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }

    /// Reads one chunk; the chunk must hold exactly one frame.
    pub fn decode(bytes: &'a [u8]) -> Result<CanFrame<'a>, LayoutError> {
        let Some(&b0) = bytes.first() else {
            return Err(LayoutError::TooShort { got: 0, need: 3 });
        };
        let extended = b0 & EXTENDED_FLAG != 0;
        let header = if extended { 5 } else { 3 };
        if bytes.len() < header {
            return Err(LayoutError::TooShort {
                got: bytes.len(),
                need: header,
            });
        }
        let id = if extended {
            CanId::Extended(u32::from_be_bytes([
                b0 & 0x1F,
                bytes[1],
                bytes[2],
                bytes[3],
            ]))
        } else {
            if b0 & STANDARD_RESERVED != 0 {
                return Err(LayoutError::ReservedBits(b0));
            }
            CanId::Standard(u16::from_be_bytes([b0 & 0x07, bytes[1]]))
        };
        let kind = match (b0 & RTR_FLAG != 0, b0 & FD_FLAG != 0) {
            (true, true) => return Err(LayoutError::RemoteFd),
            (true, false) => FrameKind::Remote,
            (false, true) => FrameKind::Fd,
            (false, false) => FrameKind::Data,
        };
        let len = bytes[header - 1] as usize;
        let data = &bytes[header..];
        let valid_len = match kind {
            FrameKind::Data | FrameKind::Remote => len <= CLASSIC_MAX_LEN,
            FrameKind::Fd => fd_dlc_from_len(len).is_some(),
        };
        if !valid_len {
            return Err(LayoutError::BadLength { len, kind });
        }
        if kind == FrameKind::Remote && !data.is_empty() {
            return Err(LayoutError::RemoteWithData(data.len()));
        }
        if kind != FrameKind::Remote && data.len() != len {
            return Err(LayoutError::LengthMismatch {
                declared: len,
                actual: data.len(),
            });
        }
        Ok(CanFrame {
            id,
            kind,
            len: len as u8,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn spec_examples_round_trip() {
        let data = [0x11, 0x22, 0x33];
        let cases: Vec<(CanFrame<'_>, &str)> = vec![
            (
                CanFrame::data(CanId::standard(0x123).unwrap(), &data).unwrap(),
                "012303112233",
            ),
            (
                CanFrame::data(CanId::standard(0x7FF).unwrap(), &[]).unwrap(),
                "07ff00",
            ),
            (
                CanFrame::data(CanId::extended(0x1ABC_DEF0).unwrap(), &data).unwrap(),
                "9abcdef003112233",
            ),
            (
                CanFrame::data(CanId::extended(0x5).unwrap(), &[]).unwrap(),
                "8000000500",
            ),
            (
                CanFrame::remote(CanId::standard(0x100).unwrap(), 8).unwrap(),
                "410008",
            ),
            (
                CanFrame::remote(CanId::extended(0x18FF_0001).unwrap(), 2).unwrap(),
                "d8ff000102",
            ),
        ];
        for (frame, want) in cases {
            let bytes = frame.to_bytes();
            assert_eq!(bytes, hex(want), "{frame:?}");
            assert_eq!(bytes.len(), frame.encoded_len());
            assert_eq!(CanFrame::decode(&bytes).unwrap(), frame, "{want}");
        }
    }

    #[test]
    fn fd_frames_carry_up_to_64_bytes() {
        let data: Vec<u8> = (0..64).collect();
        for len in [0usize, 5, 8, 12, 16, 20, 24, 32, 48, 64] {
            let f = CanFrame::fd(CanId::standard(0x42).unwrap(), &data[..len]).unwrap();
            let bytes = f.to_bytes();
            assert_eq!(bytes[0], FD_FLAG);
            assert_eq!(bytes[2] as usize, len);
            let back = CanFrame::decode(&bytes).unwrap();
            assert!(back.is_fd());
            assert_eq!(back.payload(), &data[..len]);
        }
        let f = CanFrame::fd(CanId::extended(0x1234_5678).unwrap(), &data).unwrap();
        let bytes = f.to_bytes();
        assert_eq!(bytes.len(), MAX_CHUNK_LEN);
        assert_eq!(bytes[0], EXTENDED_FLAG | FD_FLAG | 0x12);
        assert_eq!(CanFrame::decode(&bytes).unwrap(), f);
        for bad in [9usize, 13, 63, 65] {
            let e = CanFrame::fd(CanId::Standard(1), &data.repeat(2)[..bad]).unwrap_err();
            assert!(e.to_string().contains("CAN FD"), "{e}");
        }
    }

    #[test]
    fn dlc_codes_map_both_ways() {
        for code in 0..16u8 {
            let len = fd_len_from_dlc(code).unwrap();
            assert_eq!(fd_dlc_from_len(len as usize), Some(code));
        }
        assert_eq!(fd_len_from_dlc(16), None);
        assert_eq!(fd_dlc_from_len(9), None);
    }

    #[test]
    fn bad_chunks_are_refused_with_a_reason() {
        let cases: &[(&str, &str)] = &[
            ("", "at least 3"),
            ("0123", "at least 3"),
            ("80000001", "at least 5"),
            ("1123021122", "reserved"),
            ("012309", "not possible"),
            ("0123021122ff", "declares 2"),
            ("01230211", "declares 2"),
            ("61230211", "no remote frames"),
            ("4123021122", "carries no data"),
            ("41230c", "not possible"),
            ("21230911", "not possible"),
        ];
        for (input, needle) in cases {
            let e = CanFrame::decode(&hex(input)).unwrap_err();
            assert!(e.to_string().contains(needle), "{input}: {e}");
        }
        assert!(CanId::standard(0x800).is_err());
        assert!(CanId::extended(0x2000_0000).is_err());
        assert!(CanFrame::data(CanId::Standard(1), &[0; 9]).is_err());
        assert!(CanFrame::remote(CanId::Standard(1), 9).is_err());
    }

    #[test]
    fn every_short_input_decodes_or_errors_without_panicking() {
        for b0 in 0..=255u8 {
            for len in 0..8usize {
                let mut bytes = vec![b0, 0, 0, 0, 0];
                bytes.truncate(len.min(5));
                bytes.extend(std::iter::repeat_n(0xAA, len.saturating_sub(5)));
                let _ = CanFrame::decode(&bytes);
            }
        }
    }
}
