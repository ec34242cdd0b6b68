//! Binary frames with a fixed field layout (integers 8–64 bits, f32/f64, either endianness).

use super::{FrameParser, ParseError};
use crate::decode::Decoded;
use crate::project::{BinaryField, BinaryType, Endian};
use crate::value::{Rows, Value};

pub struct BinaryParser {
    /// (offset, field) with offsets resolved once.
    fields: Vec<(usize, BinaryField)>,
    needed: usize,
}

fn width(ty: BinaryType) -> usize {
    match ty {
        BinaryType::U8 | BinaryType::I8 => 1,
        BinaryType::U16 | BinaryType::I16 => 2,
        BinaryType::U32 | BinaryType::I32 | BinaryType::F32 => 4,
        BinaryType::U64 | BinaryType::I64 | BinaryType::F64 => 8,
    }
}

impl BinaryParser {
    pub fn new(fields: Vec<BinaryField>) -> Result<Self, ParseError> {
        if fields.is_empty() {
            return Err(ParseError::new("a binary layout needs at least one field"));
        }
        let mut next = 0usize;
        let mut resolved = Vec::with_capacity(fields.len());
        for f in fields {
            let at = f.offset.unwrap_or(next);
            next = at
                .checked_add(width(f.ty))
                .ok_or_else(|| ParseError::new("field offset is too large"))?;
            resolved.push((at, f));
        }
        let needed = resolved
            .iter()
            .map(|(at, f)| at + width(f.ty))
            .max()
            .unwrap_or(0);
        Ok(BinaryParser {
            fields: resolved,
            needed,
        })
    }
}

fn read(bytes: &[u8], ty: BinaryType, endian: Endian) -> f64 {
    macro_rules! get {
        ($t:ty, $n:expr) => {{
            let mut a = [0u8; $n];
            a.copy_from_slice(&bytes[..$n]);
            match endian {
                Endian::Little => <$t>::from_le_bytes(a),
                Endian::Big => <$t>::from_be_bytes(a),
            }
        }};
    }
    match ty {
        BinaryType::U8 => bytes[0] as f64,
        BinaryType::I8 => bytes[0] as i8 as f64,
        BinaryType::U16 => get!(u16, 2) as f64,
        BinaryType::I16 => get!(i16, 2) as f64,
        BinaryType::U32 => get!(u32, 4) as f64,
        BinaryType::I32 => get!(i32, 4) as f64,
        BinaryType::U64 => get!(u64, 8) as f64,
        BinaryType::I64 => get!(i64, 8) as f64,
        BinaryType::F32 => get!(f32, 4) as f64,
        BinaryType::F64 => get!(f64, 8),
    }
}

impl FrameParser for BinaryParser {
    fn parse(&mut self, input: &Decoded<'_>, out: &mut Rows) -> Result<(), ParseError> {
        let bytes: &[u8] = match input {
            Decoded::Bytes(b) => b,
            Decoded::Text(t) => t.as_bytes(),
        };
        if bytes.len() < self.needed {
            return Err(ParseError::new(format!(
                "frame is {} bytes, the layout needs {}",
                bytes.len(),
                self.needed
            )));
        }
        let row = out.push_row();
        for (at, f) in &self.fields {
            let v = read(&bytes[*at..], f.ty, f.endian) * f.scale.unwrap_or(1.0);
            row.push(Value::Number(v));
        }
        Ok(())
    }
}
