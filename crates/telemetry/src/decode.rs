//! Decoders: what the parser receives for a frame's payload.
//!
//! This follows Serial Studio so imported scripts run unchanged: "hex" and "base64" hand
//! the parser the payload's bytes *spelled* as a hex or base64 string, "binary" hands it
//! the bytes themselves. COBS and SLIP undo their byte stuffing and hand over bytes.
//!
//! COBS and SLIP sit here, not in framing: they are byte stuffing over a frame that the
//! ordinary end-delimiter framer (`00` or `C0`) already finds, so they compose with any
//! parser (usually a binary layout) instead of being parsers of their own.

use std::borrow::Cow;

use base64::Engine as _;

pub use crate::project::Decoder;

/// A decoded payload as the parser sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded<'a> {
    Text(Cow<'a, str>),
    Bytes(Cow<'a, [u8]>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("malformed COBS frame: {0}")]
    Cobs(&'static str),
    #[error("malformed SLIP frame: {0}")]
    Slip(&'static str),
}

/// Decodes one payload.
pub fn decode(decoder: Decoder, payload: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    Ok(match decoder {
        // `from_utf8` is much faster than the lossy scan on valid input, the usual case.
        Decoder::PlainText => match std::str::from_utf8(payload) {
            Ok(text) => Decoded::Text(Cow::Borrowed(text)),
            Err(_) => Decoded::Text(String::from_utf8_lossy(payload)),
        },
        Decoder::Hex => Decoded::Text(Cow::Owned(to_hex(payload))),
        Decoder::Base64 => Decoded::Text(Cow::Owned(
            base64::engine::general_purpose::STANDARD.encode(payload),
        )),
        Decoder::Binary => Decoded::Bytes(Cow::Borrowed(payload)),
        Decoder::Cobs => Decoded::Bytes(Cow::Owned(cobs_decode(payload)?)),
        Decoder::Slip => Decoded::Bytes(Cow::Owned(slip_decode(payload)?)),
    })
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Consistent Overhead Byte Stuffing, without the trailing `00` (the framer removed it).
pub fn cobs_decode(data: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        let code = data[i] as usize;
        if code == 0 {
            return Err(DecodeError::Cobs("zero byte inside a frame"));
        }
        let end = i + code;
        if end > data.len() {
            return Err(DecodeError::Cobs("block runs past the end of the frame"));
        }
        let block = &data[i + 1..end];
        if block.contains(&0) {
            return Err(DecodeError::Cobs("zero byte inside a frame"));
        }
        out.extend_from_slice(block);
        i = end;
        if code < 0xFF && i < data.len() {
            out.push(0);
        }
    }
    Ok(out)
}

/// The inverse of [`cobs_decode`] (used by the simulator and tests).
pub fn cobs_encode(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 254 + 2);
    let mut code_at = 0;
    out.push(0);
    let mut code = 1u8;
    for &b in data {
        if b == 0 {
            out[code_at] = code;
            code_at = out.len();
            out.push(0);
            code = 1;
        } else {
            out.push(b);
            code += 1;
            if code == 0xFF {
                out[code_at] = code;
                code_at = out.len();
                out.push(0);
                code = 1;
            }
        }
    }
    out[code_at] = code;
    out
}

const SLIP_END: u8 = 0xC0;
const SLIP_ESC: u8 = 0xDB;
const SLIP_ESC_END: u8 = 0xDC;
const SLIP_ESC_ESC: u8 = 0xDD;

/// RFC 1055 SLIP, without the trailing `C0` (the framer removed it).
pub fn slip_decode(data: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(data.len());
    let mut bytes = data.iter();
    while let Some(&b) = bytes.next() {
        match b {
            SLIP_ESC => match bytes.next() {
                Some(&SLIP_ESC_END) => out.push(SLIP_END),
                Some(&SLIP_ESC_ESC) => out.push(SLIP_ESC),
                Some(_) => return Err(DecodeError::Slip("invalid escape sequence")),
                None => return Err(DecodeError::Slip("frame ends inside an escape")),
            },
            SLIP_END => {} // a leading END (sent to flush line noise) is allowed
            other => out.push(other),
        }
    }
    Ok(out)
}

/// The inverse of [`slip_decode`], without the final `C0`.
pub fn slip_encode(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 2);
    for &b in data {
        match b {
            SLIP_END => out.extend_from_slice(&[SLIP_ESC, SLIP_ESC_END]),
            SLIP_ESC => out.extend_from_slice(&[SLIP_ESC, SLIP_ESC_ESC]),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cobs_round_trips_and_rejects_garbage() {
        for data in [
            vec![],
            vec![0],
            vec![0, 0],
            vec![1, 2, 0, 3],
            (0..=255u8).collect::<Vec<_>>(),
            vec![7u8; 600],
        ] {
            let enc = cobs_encode(&data);
            assert!(!enc.contains(&0), "encoding must not contain zero");
            assert_eq!(cobs_decode(&enc).unwrap(), data);
        }
        // Wikipedia's example: 11 22 00 33 → 03 11 22 02 33
        assert_eq!(
            cobs_encode(&[0x11, 0x22, 0x00, 0x33]),
            vec![3, 0x11, 0x22, 2, 0x33]
        );
        assert!(cobs_decode(&[5, 1, 2]).is_err());
        assert!(cobs_decode(&[2, 0]).is_err());
    }

    #[test]
    fn slip_round_trips_and_rejects_garbage() {
        let data = vec![1, SLIP_END, 2, SLIP_ESC, 3];
        let enc = slip_encode(&data);
        assert!(!enc.contains(&SLIP_END));
        assert_eq!(slip_decode(&enc).unwrap(), data);
        assert!(slip_decode(&[SLIP_ESC, 1]).is_err());
        assert!(slip_decode(&[1, SLIP_ESC]).is_err());
    }

    #[test]
    fn hex_and_base64_spell_the_bytes() {
        assert_eq!(
            decode(Decoder::Hex, &[0xAA, 0x05]).unwrap(),
            Decoded::Text("aa05".into())
        );
        assert_eq!(
            decode(Decoder::Base64, b"hi").unwrap(),
            Decoded::Text("aGk=".into())
        );
        assert_eq!(
            decode(Decoder::PlainText, b"a\xffb").unwrap(),
            Decoded::Text("a\u{fffd}b".into())
        );
    }
}
