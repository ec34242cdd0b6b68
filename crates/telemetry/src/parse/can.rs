//! CAN frames decoded by a message layout (what a DBC file describes), without a script.
//!
//! Input is one CAN frame per frame in the [`crate::can_frame`] layout. The parser finds
//! the frame's message by id, extracts each signal's raw bits (Intel little-endian or
//! Motorola big-endian numbering, as DBC files define them), applies
//! `raw * factor + offset` and writes the value into the signal's slot. Slots are global
//! across messages: slot `i + 1` is the `i`-th signal of the layout, so every message's
//! row is as wide as the whole layout and carries `Null` for what this frame did not
//! update: other messages' signals, multiplexed signals whose switch does not match, and
//! signals that lie beyond a short frame's data.
//!
//! Frames of unknown ids and remote requests are skipped (no row); bytes that are not a
//! CAN frame chunk are a parse error (counted). The layout is checked once when the
//! parser is built, so decoding never indexes out of bounds.

use std::collections::HashMap;

use super::{FrameParser, ParseError};
use crate::can_frame::{CanFrame, MAX_EXTENDED_ID, MAX_STANDARD_ID};
use crate::decode::Decoded;
use crate::project::{CanMessage, CanSignal, CanValueType, Endian};
use crate::value::{Rows, Value};

/// Bits a CAN FD frame can hold.
const MAX_BITS: usize = 64 * 8;

struct Signal {
    /// Lowest and highest byte index the signal touches.
    first_byte: usize,
    last_byte: usize,
    /// Right shift that brings the signal's LSB to bit 0 of the gathered bytes.
    shift: u32,
    big_endian: bool,
    size: u32,
    value_type: CanValueType,
    factor: f64,
    offset: f64,
    /// (index of the switch signal, inclusive raw-value ranges).
    mux: Option<(usize, Vec<[u64; 2]>)>,
}

struct Message {
    first_slot: usize,
    signals: Vec<Signal>,
    /// Signal indices with every switch before the signals it gates.
    order: Vec<usize>,
}

pub struct CanParser {
    /// `(id, extended)` → message index.
    by_id: HashMap<(u32, bool), usize>,
    messages: Vec<Message>,
    width: usize,
    /// Per-frame scratch, reused: the raw value of each signal of the current message,
    /// `None` when it is absent (short frame, multiplexed out).
    raw: Vec<Option<u64>>,
}

fn signal_error(m: &CanMessage, s: &CanSignal, what: impl std::fmt::Display) -> ParseError {
    let id = if m.extended {
        format!("0x{:08X}", m.id)
    } else {
        format!("0x{:03X}", m.id)
    };
    ParseError::new(format!(
        "CAN message `{}` ({id}), signal `{}`: {what}",
        m.name, s.name
    ))
}

impl Signal {
    fn build(m: &CanMessage, s: &CanSignal) -> Result<Signal, ParseError> {
        let size = s.size as usize;
        if !(1..=64).contains(&size) {
            return Err(signal_error(
                m,
                s,
                format!("size {size} is not possible; a signal has 1 to 64 bits"),
            ));
        }
        if s.value_type == CanValueType::Float && size != 32 && size != 64 {
            return Err(signal_error(
                m,
                s,
                format!("a float signal has 32 or 64 bits, not {size}"),
            ));
        }
        if !s.factor.is_finite() || !s.offset.is_finite() {
            return Err(signal_error(
                m,
                s,
                "factor and offset must be finite numbers",
            ));
        }
        let start = s.start_bit as usize;
        // Both numberings as linear bit positions: Intel counts LSB-first from the start
        // bit upwards; Motorola counts MSB-first (position 0 is the MSB of byte 0) from the
        // start bit, which is the signal's MSB.
        let (first_byte, last_byte, shift, big_endian) = match s.byte_order {
            Endian::Little => {
                let last = start + size - 1;
                (start / 8, last / 8, (start % 8) as u32, false)
            }
            Endian::Big => {
                let msb = (start / 8) * 8 + (7 - start % 8);
                let lsb = msb + size - 1;
                let first = start / 8;
                let last = lsb / 8;
                let gathered = (last - first + 1) * 8;
                (first, last, (gathered - 1 - (lsb - first * 8)) as u32, true)
            }
        };
        if (last_byte + 1) * 8 > MAX_BITS {
            return Err(signal_error(
                m,
                s,
                format!(
                    "start bit {start} with {size} bits ends past byte 63, beyond the \
                     longest CAN FD frame"
                ),
            ));
        }
        Ok(Signal {
            first_byte,
            last_byte,
            shift,
            big_endian,
            size: size as u32,
            value_type: s.value_type,
            factor: s.factor,
            offset: s.offset,
            mux: None,
        })
    }

    /// The raw bits, or `None` when the frame is too short to hold them.
    fn extract(&self, data: &[u8]) -> Option<u64> {
        let bytes = data.get(self.first_byte..=self.last_byte)?;
        // At most 9 bytes (64 bits at a 7-bit offset), so a u128 gathers them all.
        let gathered = if self.big_endian {
            bytes.iter().fold(0u128, |acc, &b| (acc << 8) | b as u128)
        } else {
            bytes
                .iter()
                .rev()
                .fold(0u128, |acc, &b| (acc << 8) | b as u128)
        };
        let mask = if self.size == 64 {
            u64::MAX as u128
        } else {
            (1u128 << self.size) - 1
        };
        Some(((gathered >> self.shift) & mask) as u64)
    }

    fn physical(&self, raw: u64) -> f64 {
        let value = match self.value_type {
            CanValueType::Unsigned => raw as f64,
            CanValueType::Signed => {
                let unused = 64 - self.size;
                (((raw << unused) as i64) >> unused) as f64
            }
            CanValueType::Float if self.size == 32 => f32::from_bits(raw as u32) as f64,
            CanValueType::Float => f64::from_bits(raw),
        };
        value * self.factor + self.offset
    }
}

/// Orders signals so each switch comes before what it gates; refuses cycles.
fn evaluation_order(m: &CanMessage, signals: &[Signal]) -> Result<Vec<usize>, ParseError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Visiting,
        Done,
    }
    let mut marks = vec![Mark::New; signals.len()];
    let mut order = Vec::with_capacity(signals.len());
    for root in 0..signals.len() {
        // Walk up the chain of switches from `root`, then emit it top-down.
        let mut chain = Vec::new();
        let mut at = Some(root);
        while let Some(i) = at {
            match marks[i] {
                Mark::Done => break,
                Mark::Visiting => {
                    return Err(signal_error(
                        m,
                        &m.signals[i],
                        "its multiplexor chain loops back to itself",
                    ))
                }
                Mark::New => {
                    marks[i] = Mark::Visiting;
                    chain.push(i);
                    at = signals[i].mux.as_ref().map(|(sw, _)| *sw);
                }
            }
        }
        for &i in chain.iter().rev() {
            marks[i] = Mark::Done;
            order.push(i);
        }
    }
    Ok(order)
}

impl CanParser {
    pub fn new(messages: &[CanMessage]) -> Result<CanParser, ParseError> {
        if messages.is_empty() {
            return Err(ParseError::new(
                "a CAN layout needs at least one message; import a DBC file to get one",
            ));
        }
        let mut by_id = HashMap::new();
        let mut built = Vec::with_capacity(messages.len());
        let mut slot = 0usize;
        let mut widest = 0usize;
        for m in messages {
            let max = if m.extended {
                MAX_EXTENDED_ID
            } else {
                MAX_STANDARD_ID
            };
            if m.id > max {
                return Err(ParseError::new(format!(
                    "CAN message `{}`: id 0x{:X} does not fit a {} id (at most 0x{max:X})",
                    m.name,
                    m.id,
                    if m.extended {
                        "29-bit extended"
                    } else {
                        "11-bit standard"
                    }
                )));
            }
            if by_id.insert((m.id, m.extended), built.len()).is_some() {
                return Err(ParseError::new(format!(
                    "CAN id 0x{:X} is used by more than one message (`{}` repeats it); \
                     each message needs its own id",
                    m.id, m.name
                )));
            }
            let mut signals = m
                .signals
                .iter()
                .map(|s| Signal::build(m, s))
                .collect::<Result<Vec<_>, _>>()?;
            for (i, s) in m.signals.iter().enumerate() {
                let Some(mux) = &s.mux else { continue };
                let switch = m
                    .signals
                    .iter()
                    .position(|o| o.name == mux.switch)
                    .ok_or_else(|| {
                        signal_error(
                            m,
                            s,
                            format!("its multiplexor `{}` is not a signal of it", mux.switch),
                        )
                    })?;
                if switch == i {
                    return Err(signal_error(m, s, "a signal cannot multiplex itself"));
                }
                if mux.ranges.is_empty() || mux.ranges.iter().any(|[lo, hi]| lo > hi) {
                    return Err(signal_error(
                        m,
                        s,
                        "multiplexor ranges must be a non-empty list of [min, max] with min <= max",
                    ));
                }
                signals[i].mux = Some((switch, mux.ranges.clone()));
            }
            let order = evaluation_order(m, &signals)?;
            widest = widest.max(signals.len());
            built.push(Message {
                first_slot: slot,
                signals,
                order,
            });
            slot += m.signals.len();
        }
        Ok(CanParser {
            by_id,
            messages: built,
            width: slot,
            raw: vec![None; widest],
        })
    }
}

impl FrameParser for CanParser {
    fn parse(&mut self, input: &Decoded<'_>, out: &mut Rows) -> Result<(), ParseError> {
        let bytes: &[u8] = match input {
            Decoded::Bytes(b) => b,
            Decoded::Text(t) => t.as_bytes(),
        };
        let frame = CanFrame::decode(bytes).map_err(|e| ParseError::new(e.to_string()))?;
        if frame.is_remote() {
            return Ok(());
        }
        let key = (frame.id().raw(), frame.id().is_extended());
        let Some(&index) = self.by_id.get(&key) else {
            return Ok(());
        };
        let message = &self.messages[index];
        let data = frame.payload();
        let raw = &mut self.raw[..message.signals.len()];
        let row = out.push_row();
        row.resize(self.width, Value::Null);
        let mut any = false;
        for &i in &message.order {
            let signal = &message.signals[i];
            let gated_in = match &signal.mux {
                None => true,
                Some((switch, ranges)) => raw[*switch]
                    .is_some_and(|v| ranges.iter().any(|[lo, hi]| (*lo..=*hi).contains(&v))),
            };
            raw[i] = if gated_in { signal.extract(data) } else { None };
            if let Some(bits) = raw[i] {
                row[message.first_slot + i] = Value::Number(signal.physical(bits));
                any = true;
            }
        }
        if !any {
            out.pop_row();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::CanMux;

    fn signal(start_bit: u16, size: u8, byte_order: Endian, value_type: CanValueType) -> CanSignal {
        CanSignal {
            name: format!("s{start_bit}"),
            start_bit,
            size,
            byte_order,
            value_type,
            factor: 1.0,
            offset: 0.0,
            mux: None,
        }
    }

    fn raw_of(s: &CanSignal, data: &[u8]) -> Option<u64> {
        let m = CanMessage {
            id: 1,
            extended: false,
            name: "m".into(),
            signals: vec![s.clone()],
        };
        Signal::build(&m, s).unwrap().extract(data)
    }

    #[test]
    fn intel_and_motorola_bit_numbering() {
        use CanValueType::Unsigned as U;
        use Endian::{Big, Little};
        let data = [0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xF0];
        // (start bit, size, order, expected raw), worked out by hand from the DBC rules.
        let cases: &[(u16, u8, Endian, u64)] = &[
            (0, 8, Little, 0x12),
            (0, 16, Little, 0x3412),
            (4, 8, Little, 0x41), // high nibble of byte 0, low nibble of byte 1
            (12, 4, Little, 0x3), // high nibble of byte 1
            (0, 64, Little, 0xF0DE_BC9A_7856_3412),
            (7, 8, Big, 0x12),
            (7, 16, Big, 0x1234),
            (3, 8, Big, 0x23), // low nibble of byte 0 then high nibble of byte 1
            (15, 4, Big, 0x3), // high nibble of byte 1
            (7, 64, Big, 0x1234_5678_9ABC_DEF0),
            (39, 24, Big, 0x9ABCDE),
            (1, 1, Little, 1), // 0x12 = 0b0001_0010: bit 1 set
            (2, 1, Big, 0),
        ];
        for &(start, size, order, want) in cases {
            let s = signal(start, size, order, U);
            assert_eq!(
                raw_of(&s, &data),
                Some(want),
                "start {start} size {size} {order:?}"
            );
        }
        // A signal beyond the data of a short frame is absent, not garbage.
        assert_eq!(raw_of(&signal(56, 8, Little, U), &data[..7]), None);
        assert_eq!(raw_of(&signal(63, 8, Big, U), &data[..7]), None);
    }

    #[test]
    fn signed_float_factor_offset() {
        let m = CanMessage {
            id: 1,
            extended: false,
            name: "m".into(),
            signals: vec![],
        };
        let mut s = signal(0, 12, Endian::Little, CanValueType::Signed);
        s.factor = 0.5;
        s.offset = -1.0;
        let sig = Signal::build(&m, &s).unwrap();
        assert_eq!(sig.physical(0x800), -2048.0 * 0.5 - 1.0);
        assert_eq!(sig.physical(0x7FF), 2047.0 * 0.5 - 1.0);
        assert_eq!(sig.physical(0xFFF), -0.5 - 1.0);
        let sig = Signal::build(&m, &signal(0, 64, Endian::Little, CanValueType::Signed)).unwrap();
        assert_eq!(sig.physical(u64::MAX), -1.0);
        let sig = Signal::build(&m, &signal(0, 32, Endian::Little, CanValueType::Float)).unwrap();
        assert_eq!(sig.physical(1.5f32.to_bits() as u64), 1.5);
        let sig = Signal::build(&m, &signal(7, 64, Endian::Big, CanValueType::Float)).unwrap();
        let data = (-2.25f64).to_be_bytes();
        assert_eq!(sig.physical(sig.extract(&data).unwrap()), -2.25);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let layout: Vec<CanMessage> = serde_json::from_str(
            r#"[{"id": 1, "signals": [
                    {"name": "m", "startBit": 0, "size": 3},
                    {"name": "a", "startBit": 7, "size": 64, "byteOrder": "big",
                     "valueType": "signed", "mux": {"switch": "m", "ranges": [[1, 6]]}},
                    {"name": "f", "startBit": 448, "size": 64, "valueType": "float"}]},
                {"id": 1, "extended": true, "signals": [
                    {"name": "x", "startBit": 60, "size": 9}]}]"#,
        )
        .unwrap();
        let mut parser = CanParser::new(&layout).unwrap();
        let mut rows = Rows::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut parsed = 0;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 72) as usize;
            // Mostly well-formed headers for id 1, so the signal code runs too.
            let mut bytes: Vec<u8> = (0..len).map(|i| (x >> (i % 8 * 8)) as u8).collect();
            if !x.is_multiple_of(4) && len >= 3 {
                bytes[0] = if x.is_multiple_of(3) { 0x20 } else { 0 };
                bytes[1] = 1;
                bytes[2] = (len - 3) as u8;
            }
            rows.clear();
            if parser
                .parse(&Decoded::Bytes(bytes.as_slice().into()), &mut rows)
                .is_ok()
                && !rows.is_empty()
            {
                parsed += 1;
                assert_eq!(rows.get(0).map(|r| r.len()), Some(4));
            }
        }
        assert!(parsed > 1000, "only {parsed} frames decoded");
    }

    #[test]
    fn bad_layouts_are_refused_with_the_signal_named() {
        let ok = signal(0, 8, Endian::Little, CanValueType::Unsigned);
        let message = |signals: Vec<CanSignal>| CanMessage {
            id: 0x100,
            extended: false,
            name: "Engine".into(),
            signals,
        };
        let mut too_big = ok.clone();
        too_big.size = 65;
        let mut float12 = ok.clone();
        float12.size = 12;
        float12.value_type = CanValueType::Float;
        let mut beyond = ok.clone();
        beyond.start_bit = 510;
        let mut nan = ok.clone();
        nan.factor = f64::NAN;
        let mut missing_switch = ok.clone();
        missing_switch.mux = Some(CanMux {
            switch: "nope".into(),
            ranges: vec![[1, 1]],
        });
        let mut a = ok.clone();
        a.name = "a".into();
        a.mux = Some(CanMux {
            switch: "b".into(),
            ranges: vec![[0, 0]],
        });
        let mut b = ok.clone();
        b.name = "b".into();
        b.mux = Some(CanMux {
            switch: "a".into(),
            ranges: vec![[0, 0]],
        });
        let mut bad_range = ok.clone();
        bad_range.name = "c".into();
        bad_range.mux = Some(CanMux {
            switch: "s0".into(),
            ranges: vec![[3, 1]],
        });
        let cases: Vec<(Vec<CanMessage>, &str)> = vec![
            (vec![], "at least one message"),
            (vec![message(vec![too_big])], "1 to 64 bits"),
            (vec![message(vec![float12])], "32 or 64"),
            (vec![message(vec![beyond])], "beyond the longest"),
            (vec![message(vec![nan])], "finite"),
            (
                vec![message(vec![missing_switch])],
                "`nope` is not a signal",
            ),
            (vec![message(vec![a, b])], "loops back"),
            (vec![message(vec![ok.clone(), bad_range])], "min <= max"),
            (
                vec![message(vec![]), message(vec![])],
                "more than one message",
            ),
            (
                vec![CanMessage {
                    id: 0x800,
                    ..message(vec![])
                }],
                "11-bit",
            ),
        ];
        for (messages, needle) in cases {
            let e = CanParser::new(&messages).err().expect(needle);
            assert!(e.message.contains(needle), "{needle}: {}", e.message);
        }
    }
}
