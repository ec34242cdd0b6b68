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
//!
//! Frames are stored in blocks (`frame_blocks.data`, [`BlockBuilder`] and
//! [`for_each_in_block`]): one row holds up to [`BLOCK_FRAMES`] frames, so a recording
//! pays SQLite's per-row cost (a B-tree insert, an index insert) once per block instead of
//! once per frame. Each frame in a block is
//!
//! | field   | encoding                                                        |
//! |---------|-----------------------------------------------------------------|
//! | source  | unsigned LEB128                                                 |
//! | time    | signed (zigzag) LEB128: ns since the previous frame, or since the block's first time for its first frame |
//! | values  | unsigned LEB128 byte length, then the values as above           |
//!
//! Raw chunks are stored in blocks too (`chunk_blocks`, [`ChunkBlockBuilder`]), one
//! source's chunks per block, in two columns: `times` holds, per chunk, its elapsed and
//! Unix times as zigzag LEB128 deltas (from the previous chunk, or from the block's first
//! times for its first) and its byte length as unsigned LEB128; `data` holds the chunks'
//! bytes back to back. Opening a replay reads only the small `times` column.
//!
//! LEB128 is written here rather than taken from a crate: it is a dozen lines, and the
//! decoder has to report a damaged block as an error, never panic.

use std::ops::ControlFlow;

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

/// Frames per block at most; a block also ends at [`BLOCK_BYTES`] and at every commit.
pub const BLOCK_FRAMES: u32 = 1024;
/// Encoded bytes per block at most (a frame larger than this gets a block to itself).
pub const BLOCK_BYTES: usize = 256 * 1024;

fn put_uleb(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn take_uleb(blob: &mut &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = blob.split_first()?;
        *blob = rest;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

/// A block of frames being built (see the module docs).
#[derive(Debug, Default)]
pub struct BlockBuilder {
    data: Vec<u8>,
    first_ns: u64,
    min_ns: u64,
    max_ns: u64,
    previous_ns: u64,
    frames: u32,
}

impl BlockBuilder {
    /// Appends one frame, its values already encoded with [`encode_into`].
    pub fn push(&mut self, source: usize, elapsed_ns: u64, values: &[u8]) {
        if self.frames == 0 {
            self.first_ns = elapsed_ns;
            self.min_ns = elapsed_ns;
            self.max_ns = elapsed_ns;
            self.previous_ns = elapsed_ns;
        }
        // Time may step back between sources' frames; the zigzag delta carries either way.
        let delta = elapsed_ns.wrapping_sub(self.previous_ns) as i64;
        put_uleb(&mut self.data, source as u64);
        put_zigzag(&mut self.data, delta);
        put_uleb(&mut self.data, values.len() as u64);
        self.data.extend_from_slice(values);
        self.previous_ns = elapsed_ns;
        self.min_ns = self.min_ns.min(elapsed_ns);
        self.max_ns = self.max_ns.max(elapsed_ns);
        self.frames += 1;
    }

    /// Whether the block should be stored before another frame is added.
    pub fn is_full(&self) -> bool {
        self.frames >= BLOCK_FRAMES || self.data.len() >= BLOCK_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// The first frame's time: what [`for_each_in_block`] counts the deltas from.
    pub fn first_ns(&self) -> u64 {
        self.first_ns
    }

    /// The earliest and the latest frame time in the block, ns.
    pub fn span(&self) -> (u64, u64) {
        (self.min_ns, self.max_ns)
    }

    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Empties the block for reuse (keeping its buffer).
    pub fn clear(&mut self) {
        self.data.clear();
        self.frames = 0;
    }
}

/// Calls `f(source, elapsed_ns, values)` for each frame of a block whose first frame's time
/// is `first_ns`, values decoded into a buffer reused across frames; `Err` names what is
/// wrong with a damaged block (the frames before the damage have been passed to `f`).
pub fn for_each_in_block<E>(
    blob: &[u8],
    first_ns: u64,
    mut f: impl FnMut(usize, u64, &[Value]) -> Result<(), E>,
) -> Result<Result<u64, E>, String> {
    let mut values = Vec::new();
    let mut n = 0u64;
    let mut failed = None;
    let walked = for_each_raw_in_block(blob, first_ns, |source, time, encoded| {
        decode_into(encoded, &mut values).map_err(|e| format!("frame {n} of the block: {e}"))?;
        n += 1;
        Ok(match f(source, time, &values) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failed = Some(e);
                ControlFlow::Break(())
            }
        })
    })?;
    Ok(match failed {
        Some(e) => Err(e),
        None => Ok(walked),
    })
}

/// One value as [`cells_into`] reads it. Text that reads as a number is that number (as
/// [`Value::as_f64`] has it); other text is only said to be text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell {
    Null,
    Number(f64),
    Text,
}

/// Decodes only the values at `wanted` positions of a frame's encoding into `out`, in the
/// order of `wanted` (a position past the frame's end is `Null`): what an analysis of a few
/// columns reads, without building every value. `slot_of[position]` is the index into
/// `wanted` of that position, or `usize::MAX` (the caller builds it once per read).
pub fn cells_into(mut blob: &[u8], slot_of: &[usize], out: &mut [Cell]) -> Result<(), String> {
    out.fill(Cell::Null);
    let mut position = 0usize;
    while let Some((&tag, rest)) = blob.split_first() {
        blob = rest;
        let slot = slot_of.get(position).copied().unwrap_or(usize::MAX);
        match tag {
            NULL => {}
            NUMBER => {
                let (bits, rest) = blob
                    .split_first_chunk::<8>()
                    .ok_or_else(|| format!("value {position} is a cut-off number"))?;
                if slot != usize::MAX {
                    out[slot] = Cell::Number(f64::from_bits(u64::from_le_bytes(*bits)));
                }
                blob = rest;
            }
            TEXT => {
                let (len, rest) = blob
                    .split_first_chunk::<4>()
                    .ok_or_else(|| format!("value {position} is a cut-off text length"))?;
                let len = u32::from_le_bytes(*len) as usize;
                if rest.len() < len {
                    return Err(format!("value {position} is a cut-off text"));
                }
                if slot != usize::MAX {
                    let text = std::str::from_utf8(&rest[..len])
                        .map_err(|e| format!("value {position} is not UTF-8: {e}"))?;
                    // Rare (a device sends numbers): the one numeric reading of text is
                    // `Value`'s, so it is asked rather than copied.
                    out[slot] = Value::Text(text.to_string())
                        .as_f64()
                        .map_or(Cell::Text, Cell::Number);
                }
                blob = &rest[len..];
            }
            other => return Err(format!("value {position} has unknown tag {other}")),
        }
        position += 1;
    }
    Ok(())
}

/// Calls `f(source, elapsed_ns, encoded values)` for each frame of a block whose first
/// frame's time is `first_ns`, the values still encoded (see [`decode_into`], [`cells_into`]).
/// `f` may stop the walk early; `Err` names what is wrong with a damaged block. Returns the
/// frames walked.
pub fn for_each_raw_in_block(
    mut blob: &[u8],
    first_ns: u64,
    mut f: impl FnMut(usize, u64, &[u8]) -> Result<ControlFlow<()>, String>,
) -> Result<u64, String> {
    let mut time = first_ns;
    let mut n = 0u64;
    while !blob.is_empty() {
        let cut = || format!("frame {n} of the block is cut off");
        let source = take_uleb(&mut blob).ok_or_else(cut)?;
        let delta = take_zigzag(&mut blob).ok_or_else(cut)?;
        let len = take_uleb(&mut blob).ok_or_else(cut)?;
        time = time.wrapping_add(delta as u64);
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= blob.len())
            .ok_or_else(cut)?;
        let (encoded, rest) = blob.split_at(len);
        blob = rest;
        n += 1;
        if f(source as usize, time, encoded)?.is_break() {
            break;
        }
    }
    Ok(n)
}

fn put_zigzag(out: &mut Vec<u8>, delta: i64) {
    put_uleb(out, ((delta << 1) ^ (delta >> 63)) as u64);
}

fn take_zigzag(blob: &mut &[u8]) -> Option<i64> {
    let z = take_uleb(blob)?;
    Some(((z >> 1) as i64) ^ -((z & 1) as i64))
}

/// A block of one source's raw chunks being built (see the module docs).
#[derive(Debug, Default)]
pub struct ChunkBlockBuilder {
    times: Vec<u8>,
    data: Vec<u8>,
    first: (u64, i64),
    previous: (u64, i64),
    min_ns: u64,
    max_ns: u64,
    chunks: u32,
}

impl ChunkBlockBuilder {
    /// Appends one chunk with its elapsed and Unix times.
    pub fn push(&mut self, elapsed_ns: u64, unix_ns: i64, bytes: &[u8]) {
        if self.chunks == 0 {
            self.first = (elapsed_ns, unix_ns);
            self.previous = self.first;
            self.min_ns = elapsed_ns;
            self.max_ns = elapsed_ns;
        }
        put_zigzag(
            &mut self.times,
            elapsed_ns.wrapping_sub(self.previous.0) as i64,
        );
        put_zigzag(&mut self.times, unix_ns.wrapping_sub(self.previous.1));
        put_uleb(&mut self.times, bytes.len() as u64);
        self.data.extend_from_slice(bytes);
        self.previous = (elapsed_ns, unix_ns);
        self.min_ns = self.min_ns.min(elapsed_ns);
        self.max_ns = self.max_ns.max(elapsed_ns);
        self.chunks += 1;
    }

    /// Whether the block should be stored before another chunk is added.
    pub fn is_full(&self) -> bool {
        self.chunks >= BLOCK_FRAMES || self.data.len() >= BLOCK_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.chunks == 0
    }

    pub fn chunks(&self) -> u32 {
        self.chunks
    }

    /// The first chunk's elapsed and Unix times: what the deltas count from.
    pub fn first(&self) -> (u64, i64) {
        self.first
    }

    /// The earliest and the latest elapsed time in the block, ns.
    pub fn span(&self) -> (u64, u64) {
        (self.min_ns, self.max_ns)
    }

    pub fn times(&self) -> &[u8] {
        &self.times
    }

    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Empties the block for reuse (keeping its buffers).
    pub fn clear(&mut self) {
        self.times.clear();
        self.data.clear();
        self.chunks = 0;
    }
}

/// One chunk of a stored block: its times and where its bytes are in the block's `data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkEntry {
    pub elapsed_ns: u64,
    pub unix_ns: i64,
    pub offset: usize,
    pub len: usize,
}

/// The chunks of a block from its `times` column and first times; `data_len` is the length
/// of its `data` column, so a damaged block is an error here, not a bad slice later.
pub fn chunk_entries(
    mut times: &[u8],
    first: (u64, i64),
    data_len: usize,
) -> Result<Vec<ChunkEntry>, String> {
    let mut out = Vec::new();
    let (mut elapsed_ns, mut unix_ns) = first;
    let mut offset = 0usize;
    while !times.is_empty() {
        let cut = || format!("chunk {} of the block is cut off", out.len());
        let de = take_zigzag(&mut times).ok_or_else(cut)?;
        let du = take_zigzag(&mut times).ok_or_else(cut)?;
        let len = take_uleb(&mut times).ok_or_else(cut)?;
        elapsed_ns = elapsed_ns.wrapping_add(de as u64);
        unix_ns = unix_ns.wrapping_add(du);
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= data_len - offset)
            .ok_or_else(|| format!("chunk {} of the block runs past its bytes", out.len()))?;
        out.push(ChunkEntry {
            elapsed_ns,
            unix_ns,
            offset,
            len,
        });
        offset += len;
    }
    if offset != data_len {
        return Err(format!(
            "the block's times account for {offset} of its {data_len} bytes"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_the_wanted_values_in_the_wanted_order() {
        let blob = encode(&[
            Value::Number(1.5),
            Value::Text("x".into()),
            Value::Null,
            Value::Text(" 2.5 ".into()),
            Value::Number(-0.25),
        ]);
        // Position 9 is past the frame's end; 2 is a null.
        let wanted = [4, 0, 3, 1, 9, 2];
        let mut slot_of = vec![usize::MAX; 10];
        for (k, &p) in wanted.iter().enumerate() {
            slot_of[p] = k;
        }
        let mut cells = vec![Cell::Text; wanted.len()];
        cells_into(&blob, &slot_of, &mut cells).unwrap();
        assert_eq!(
            cells,
            [
                Cell::Number(-0.25),
                Cell::Number(1.5),
                Cell::Number(2.5),
                Cell::Text,
                Cell::Null,
                Cell::Null
            ]
        );
        assert!(cells_into(&blob[..blob.len() - 3], &slot_of, &mut cells).is_err());
    }

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

    type Frame = (usize, u64, Vec<Value>);

    fn read_block(b: &BlockBuilder) -> Result<Vec<Frame>, String> {
        let mut out = Vec::new();
        let n = for_each_in_block(b.data(), b.first_ns(), |source, t, v| {
            out.push((source, t, v.to_vec()));
            Ok::<(), ()>(())
        })?
        .unwrap();
        assert_eq!(n as usize, out.len());
        Ok(out)
    }

    #[test]
    fn a_block_gives_back_every_frame_with_its_source_and_time() {
        // Times that step back (two sources), jump far, repeat, and reach the top of u64.
        let times = [
            5_000_000_000u64,
            5_000_000_100,
            4_999_999_000,
            4_999_999_000,
            90_000_000_000_000,
            0,
            u64::MAX,
            1,
        ];
        let mut block = BlockBuilder::default();
        let mut want = Vec::new();
        for (i, &t) in times.iter().enumerate() {
            let values = vec![
                Value::Number(i as f64 * 0.5),
                Value::Text("x".repeat(i * 40)),
                Value::Null,
            ];
            let source = [0, 1, 300][i % 3];
            block.push(source, t, &encode(&values));
            want.push((source, t, values));
        }
        assert_eq!(block.frames() as usize, times.len());
        assert_eq!(block.span(), (0, u64::MAX));
        assert_eq!(block.first_ns(), 5_000_000_000);
        assert_eq!(read_block(&block).unwrap(), want);

        // A frame with no values at all is a frame too.
        block.clear();
        assert!(block.is_empty());
        block.push(2, 7, &[]);
        assert_eq!(read_block(&block).unwrap(), vec![(2, 7, Vec::new())]);
    }

    #[test]
    fn a_block_fills_at_its_frame_or_byte_cap() {
        let mut block = BlockBuilder::default();
        let one = encode(&[Value::Number(1.0)]);
        for i in 0..BLOCK_FRAMES {
            assert!(!block.is_full(), "full after {i} frames");
            block.push(0, i as u64, &one);
        }
        assert!(block.is_full());
        let mut big = BlockBuilder::default();
        big.push(0, 0, &encode(&[Value::Text("y".repeat(BLOCK_BYTES))]));
        assert!(big.is_full(), "one huge frame fills a block");
        assert_eq!(read_block(&big).unwrap().len(), 1);
    }

    #[test]
    fn a_damaged_block_is_reported_not_panicked_on() {
        let mut block = BlockBuilder::default();
        for i in 0..3u64 {
            // Deltas under 64 ns: every frame encodes to the same length.
            block.push(1, i * 10, &encode(&[Value::Number(i as f64)]));
        }
        let whole = block.data().to_vec();
        let frame_len = whole.len() / 3;
        for cut in 1..whole.len() {
            let mut seen = 0;
            let result = for_each_in_block(&whole[..cut], 0, |_, _, _| {
                seen += 1;
                Ok::<(), ()>(())
            });
            if cut % frame_len == 0 {
                assert_eq!(
                    result,
                    Ok(Ok(cut as u64 / frame_len as u64)),
                    "cut at {cut}"
                );
            } else {
                assert!(result.is_err(), "cut at {cut}");
                assert_eq!(seen, cut / frame_len, "the frames before the damage");
            }
        }
        // A length that runs past the end, and a LEB128 number that never ends.
        assert!(for_each_in_block(&[0, 0, 0x7f, 1], 0, |_, _, _| Ok::<(), ()>(())).is_err());
        assert!(for_each_in_block(&[0x80; 11], 0, |_, _, _| Ok::<(), ()>(())).is_err());
        // The caller's own error stops the walk and comes back as it is.
        assert_eq!(
            for_each_in_block(&whole, 0, |_, t, _| if t >= 10 { Err(t) } else { Ok(()) }),
            Ok(Err(10))
        );
    }

    #[test]
    fn a_chunk_block_gives_back_every_chunk_with_its_times() {
        let chunks: [(u64, i64, &[u8]); 5] = [
            (1_000, 1_700_000_000_000_000_000, b"abc"),
            (900, 1_699_999_999_999_999_000, b""),
            (u64::MAX, i64::MIN, b"\x00\xff"),
            (0, i64::MAX, &[7; 300]),
            (0, 0, b"z"),
        ];
        let mut block = ChunkBlockBuilder::default();
        for (e, u, b) in chunks {
            block.push(e, u, b);
        }
        assert_eq!(block.chunks(), 5);
        assert_eq!(block.span(), (0, u64::MAX));
        let entries = chunk_entries(block.times(), block.first(), block.data().len()).unwrap();
        let back: Vec<(u64, i64, &[u8])> = entries
            .iter()
            .map(|c| {
                (
                    c.elapsed_ns,
                    c.unix_ns,
                    &block.data()[c.offset..c.offset + c.len],
                )
            })
            .collect();
        assert_eq!(back, chunks);

        // Times or bytes cut short, and bytes the times do not account for.
        let (times, data) = (block.times(), block.data());
        for cut in 1..times.len() {
            assert!(
                chunk_entries(&times[..cut], block.first(), data.len()).is_err(),
                "times cut at {cut}"
            );
        }
        assert!(chunk_entries(times, block.first(), data.len() - 1).is_err());
        assert!(chunk_entries(times, block.first(), data.len() + 1).is_err());
        assert_eq!(chunk_entries(&[], (0, 0), 0), Ok(Vec::new()));
    }
}
