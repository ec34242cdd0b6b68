//! NMEA-0183 GGA and RMC sentences (any talker: GP, GN, GL, …).
//!
//! Each sentence fills the slots it carries and leaves the rest `Null`, so a GGA/RMC pair
//! updates position, altitude, speed and course without one overwriting the other.
//! A sentence whose `*hh` checksum is present and wrong is rejected.

use super::{as_text, FrameParser, ParseError};
use crate::decode::Decoded;
use crate::value::{Rows, Value};

/// Slot numbers (1-based, as datasets use them) and what they hold.
pub const SLOTS: [(u32, &str); 9] = [
    (1, "latitude (deg, north positive)"),
    (2, "longitude (deg, east positive)"),
    (3, "altitude (m above mean sea level, GGA)"),
    (4, "fix quality (GGA)"),
    (5, "satellites in use (GGA)"),
    (6, "HDOP (GGA)"),
    (7, "speed over ground (knots, RMC)"),
    (8, "course over ground (deg, RMC)"),
    (9, "UTC time of day (s)"),
];

pub struct NmeaParser;

fn coordinate(value: &str, hemisphere: &str) -> Option<f64> {
    let dot = value.find('.').unwrap_or(value.len());
    if dot < 3 {
        return None;
    }
    // `get`, not indexing: in a garbled sentence `dot - 2` can fall inside a character.
    let degrees: f64 = value.get(..dot - 2)?.parse().ok()?;
    let minutes: f64 = value.get(dot - 2..)?.parse().ok()?;
    let v = degrees + minutes / 60.0;
    match hemisphere {
        "N" | "E" => Some(v),
        "S" | "W" => Some(-v),
        _ => None,
    }
}

fn time_of_day(hhmmss: &str) -> Option<f64> {
    // The fixed `hhmmss` part is ASCII digits; checking that also keeps the slices below on
    // character boundaries in a garbled sentence.
    if hhmmss.len() < 6 || !hhmmss.as_bytes()[..6].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let h: f64 = hhmmss[0..2].parse().ok()?;
    let m: f64 = hhmmss[2..4].parse().ok()?;
    let s: f64 = hhmmss[4..].parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

fn num(field: Option<&&str>) -> Value {
    field
        .and_then(|f| f.parse::<f64>().ok())
        .map_or(Value::Null, Value::Number)
}

/// The XOR of the bytes between `$` and `*`.
pub fn nmea_checksum(body: &str) -> u8 {
    body.bytes().fold(0, |a, b| a ^ b)
}

impl FrameParser for NmeaParser {
    fn parse(&mut self, input: &Decoded<'_>, out: &mut Rows) -> Result<(), ParseError> {
        let text = as_text(input);
        let line = text.trim();
        let Some(line) = line.strip_prefix('$').or_else(|| line.strip_prefix('!')) else {
            return Ok(()); // not a sentence: noise between sentences is skipped
        };
        let body = match line.rsplit_once('*') {
            Some((body, sum)) => {
                let expected = u8::from_str_radix(sum.trim(), 16)
                    .map_err(|_| ParseError::new(format!("NMEA checksum `{sum}` is not hex")))?;
                let actual = nmea_checksum(body);
                if expected != actual {
                    return Err(ParseError::new(format!(
                        "NMEA checksum mismatch: sentence says {expected:02X}, data gives {actual:02X}"
                    )));
                }
                body
            }
            None => line,
        };
        let fields: Vec<&str> = body.split(',').collect();
        let kind = fields[0].get(2..).unwrap_or("");
        let mut slots = [const { Value::Null }; 9];
        match kind {
            "GGA" => {
                slots[8] = fields
                    .get(1)
                    .and_then(|t| time_of_day(t))
                    .map_or(Value::Null, Value::Number);
                if let (Some(lat), Some(ns), Some(lon), Some(ew)) =
                    (fields.get(2), fields.get(3), fields.get(4), fields.get(5))
                {
                    slots[0] = coordinate(lat, ns).map_or(Value::Null, Value::Number);
                    slots[1] = coordinate(lon, ew).map_or(Value::Null, Value::Number);
                }
                slots[3] = num(fields.get(6));
                slots[4] = num(fields.get(7));
                slots[5] = num(fields.get(8));
                slots[2] = num(fields.get(9));
            }
            "RMC" => {
                slots[8] = fields
                    .get(1)
                    .and_then(|t| time_of_day(t))
                    .map_or(Value::Null, Value::Number);
                // Status `V` means the receiver has no valid fix: report nothing positional.
                if fields.get(2) == Some(&"A") {
                    if let (Some(lat), Some(ns), Some(lon), Some(ew)) =
                        (fields.get(3), fields.get(4), fields.get(5), fields.get(6))
                    {
                        slots[0] = coordinate(lat, ns).map_or(Value::Null, Value::Number);
                        slots[1] = coordinate(lon, ew).map_or(Value::Null, Value::Number);
                    }
                    slots[6] = num(fields.get(7));
                    slots[7] = num(fields.get(8));
                }
            }
            _ => return Ok(()),
        }
        out.push_row().extend(slots);
        Ok(())
    }
}
