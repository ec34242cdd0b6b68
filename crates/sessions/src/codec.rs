//! The encoding of one frame's values in a `frames.vals` blob.
//!
//! One entry per dataset, in column order, each a tag byte and its payload:
//!
//! | tag | value  | payload                                   |
//! |-----|--------|-------------------------------------------|
//! | 0   | null   | none                                      |
//! | 1   | number | 8 bytes, the `f64` bit pattern, little-endian |
//! | 2   | text   | `u32` byte length (little-endian), then UTF-8 |
//!
//! Numbers keep their exact bits (NaN and infinities included), so a CSV exported from a
//! session prints every value exactly as the live export did.

use sextant_telemetry::Value;

const NULL: u8 = 0;
const NUMBER: u8 = 1;
const TEXT: u8 = 2;

/// Appends the encoding of `values` to `out`.
pub fn encode_into(values: &[Value], out: &mut Vec<u8>) {
    for v in values {
        match v {
            Value::Null => out.push(NULL),
            Value::Number(n) => {
                out.push(NUMBER);
                out.extend_from_slice(&n.to_bits().to_le_bytes());
            }
            Value::Text(t) => {
                // A text longer than 4 GiB cannot come out of a frame (frames are capped
                // far below that); clamp rather than corrupt the row if one ever did.
                let bytes = &t.as_bytes()[..t.len().min(u32::MAX as usize)];
                out.push(TEXT);
                out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                out.extend_from_slice(bytes);
            }
        }
    }
}

/// The encoding of `values`.
pub fn encode(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 9);
    encode_into(values, &mut out);
    out
}

/// Decodes a blob into `out` (cleared first); `Err` names what is wrong with it.
pub fn decode_into(mut blob: &[u8], out: &mut Vec<Value>) -> Result<(), String> {
    out.clear();
    while let Some((&tag, rest)) = blob.split_first() {
        blob = rest;
        match tag {
            NULL => out.push(Value::Null),
            NUMBER => {
                let (bits, rest) = blob
                    .split_first_chunk::<8>()
                    .ok_or_else(|| format!("value {} is a cut-off number", out.len()))?;
                out.push(Value::Number(f64::from_bits(u64::from_le_bytes(*bits))));
                blob = rest;
            }
            TEXT => {
                let (len, rest) = blob
                    .split_first_chunk::<4>()
                    .ok_or_else(|| format!("value {} is a cut-off text length", out.len()))?;
                let len = u32::from_le_bytes(*len) as usize;
                if rest.len() < len {
                    return Err(format!("value {} is a cut-off text", out.len()));
                }
                let text = std::str::from_utf8(&rest[..len])
                    .map_err(|e| format!("value {} is not UTF-8: {e}", out.len()))?;
                out.push(Value::Text(text.to_string()));
                blob = &rest[len..];
            }
            other => return Err(format!("value {} has unknown tag {other}", out.len())),
        }
    }
    Ok(())
}

/// Decodes a blob.
pub fn decode(blob: &[u8]) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    decode_into(blob, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_value_round_trips_exactly() {
        let values = vec![
            Value::Number(1.5),
            Value::Null,
            Value::Text("a, \"quoted\"\nline – ünïcode".into()),
            Value::Number(f64::NAN),
            Value::Number(f64::NEG_INFINITY),
            Value::Number(-0.0),
            Value::Text(String::new()),
            Value::Number(0.1 + 0.2),
        ];
        let blob = encode(&values);
        let back = decode(&blob).unwrap();
        assert_eq!(back.len(), values.len());
        for (a, b) in values.iter().zip(&back) {
            match (a, b) {
                (Value::Number(x), Value::Number(y)) => assert_eq!(x.to_bits(), y.to_bits()),
                _ => assert_eq!(a, b),
            }
        }
        assert!(decode(&[]).unwrap().is_empty());
    }

    #[test]
    fn damaged_blobs_are_reported_not_panicked_on() {
        let blob = encode(&[Value::Number(2.0), Value::Text("abc".into())]);
        // Byte 9 is the boundary between the two values: a shorter row, not a damaged one.
        for cut in (1..blob.len()).filter(|&c| c != 9) {
            assert!(decode(&blob[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(decode(&blob[..9]).unwrap(), vec![Value::Number(2.0)]);
        assert!(decode(&[9]).unwrap_err().contains("unknown tag"));
        assert!(decode(&[2, 2, 0, 0, 0, 0xff, 0xfe])
            .unwrap_err()
            .contains("UTF-8"));
    }
}
