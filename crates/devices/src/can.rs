//! What every CAN driver shares: the chunk layout of one frame, the checks on the
//! project's CAN settings, and turning a chunk the user writes back into a frame.
//!
//! One CAN frame is one chunk, in the byte layout of the spec:
//! standard `[id_hi, id_lo, len, data…]`, extended
//! `[0x80|id28..24, id23..16, id15..8, id7..0, len, data…]`, with RTR (`0x40`) and CAN FD
//! (`0x20`) flags in byte 0's spare bits. The layout itself is defined once, in
//! [`sextant_telemetry::can_frame`] (re-exported here), because the parsers that read
//! these chunks live in the telemetry core and the drivers that write them live here; see
//! that module for every decision about flags, lengths and remote frames.
//!
//! Drivers: [`crate::slcan`] (serial SLCAN adapters, everywhere) and, on Linux,
//! `crate::socketcan` (kernel SocketCAN, including `vcan`).

pub use sextant_telemetry::can_frame::{
    fd_dlc_from_len, fd_len_from_dlc, CanFrame, CanId, FrameKind, LayoutError, CLASSIC_MAX_LEN,
    EXTENDED_FLAG, FD_FLAG, FD_MAX_LEN, MAX_CHUNK_LEN, MAX_EXTENDED_ID, MAX_STANDARD_ID, RTR_FLAG,
};
use sextant_telemetry::project::CanSettings;

use crate::source::DeviceError;

/// Highest nominal (arbitration) bitrate of CAN.
pub const MAX_BITRATE: u32 = 1_000_000;
/// Highest CAN FD data-phase bitrate we accept; transceivers top out at 8 Mbit/s.
pub const MAX_DATA_BITRATE: u32 = 8_000_000;

/// Checks settings every CAN driver needs; a problem here is a configuration error,
/// so it is fatal (retrying cannot fix it).
pub fn check_settings(settings: &CanSettings) -> Result<(), DeviceError> {
    if settings.interface.trim().is_empty() {
        return Err(DeviceError::fatal(if settings.slcan {
            "no serial port is selected for the SLCAN adapter"
        } else {
            "no CAN interface is selected (for example `can0` or `vcan0`)"
        }));
    }
    if settings.bitrate == 0 || settings.bitrate > MAX_BITRATE {
        return Err(DeviceError::fatal(format!(
            "CAN bitrate {} bit/s is out of range: pick 10 kbit/s to 1 Mbit/s",
            settings.bitrate
        )));
    }
    match settings.data_bitrate {
        Some(_) if !settings.fd => Err(DeviceError::fatal(
            "a CAN FD data bitrate is set but CAN FD is off: turn CAN FD on or clear the data bitrate",
        )),
        Some(rate) if rate < settings.bitrate || rate > MAX_DATA_BITRATE => {
            Err(DeviceError::fatal(format!(
                "CAN FD data bitrate {rate} bit/s is out of range: it must be at least the \
                 nominal bitrate ({}) and at most {MAX_DATA_BITRATE}",
                settings.bitrate
            )))
        }
        _ => Ok(()),
    }
}

/// `500 kbit/s`, `1 Mbit/s`, `33.3 kbit/s`.
pub fn describe_bitrate(rate: u32) -> String {
    if rate >= 1_000_000 && rate.is_multiple_of(100_000) {
        format!("{} Mbit/s", rate as f64 / 1e6)
    } else {
        format!("{} kbit/s", rate as f64 / 1e3)
    }
}

/// Reads a chunk the user wants to send as one CAN frame, refusing what this bus
/// configuration cannot send. The errors are [`DeviceError::Fatal`] on purpose: a bad
/// chunk fails that one write but must not tear down a healthy connection.
pub fn frame_to_send<'a>(
    chunk: &'a [u8],
    settings: &CanSettings,
) -> Result<CanFrame<'a>, DeviceError> {
    if settings.listen_only {
        return Err(DeviceError::fatal(
            "the CAN source is listen-only: turn listen-only off to send frames",
        ));
    }
    let frame = CanFrame::decode(chunk).map_err(|e| {
        DeviceError::fatal(format!(
            "cannot send this as a CAN frame: {e}. Write one frame per chunk as \
             [id_hi, id_lo, len, data…] (standard id) or \
             [0x80|id28..24, id23..16, id15..8, id7..0, len, data…] (extended id)"
        ))
    })?;
    if frame.is_fd() && !settings.fd {
        return Err(DeviceError::fatal(
            "this is a CAN FD frame but CAN FD is off for this source: turn CAN FD on to send it",
        ));
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> CanSettings {
        CanSettings {
            interface: "can0".into(),
            ..CanSettings::default()
        }
    }

    #[test]
    fn settings_problems_are_fatal_and_explained() {
        let cases: Vec<(CanSettings, &str)> = vec![
            (
                CanSettings {
                    interface: " ".into(),
                    ..settings()
                },
                "no CAN interface",
            ),
            (
                CanSettings {
                    interface: String::new(),
                    slcan: true,
                    ..settings()
                },
                "no serial port",
            ),
            (
                CanSettings {
                    bitrate: 0,
                    ..settings()
                },
                "out of range",
            ),
            (
                CanSettings {
                    bitrate: 2_000_000,
                    ..settings()
                },
                "1 Mbit/s",
            ),
            (
                CanSettings {
                    data_bitrate: Some(2_000_000),
                    ..settings()
                },
                "turn CAN FD on",
            ),
            (
                CanSettings {
                    fd: true,
                    data_bitrate: Some(100_000),
                    ..settings()
                },
                "at least the nominal",
            ),
        ];
        for (s, needle) in cases {
            match check_settings(&s) {
                Err(DeviceError::Fatal(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("{s:?}: expected a fatal error, got {other:?}"),
            }
        }
        check_settings(&settings()).unwrap();
        check_settings(&CanSettings {
            fd: true,
            data_bitrate: Some(2_000_000),
            ..settings()
        })
        .unwrap();
    }

    #[test]
    fn writes_are_checked_against_the_bus_configuration() {
        let fd_chunk = CanFrame::fd(CanId::Standard(0x10), &[0; 12])
            .unwrap()
            .to_bytes();
        let classic = CanFrame::data(CanId::Standard(0x10), &[1, 2])
            .unwrap()
            .to_bytes();
        assert!(frame_to_send(&classic, &settings()).is_ok());
        let e = frame_to_send(&fd_chunk, &settings()).unwrap_err();
        assert!(e.to_string().contains("CAN FD is off"), "{e}");
        let fd = CanSettings {
            fd: true,
            ..settings()
        };
        assert!(frame_to_send(&fd_chunk, &fd).unwrap().is_fd());
        let e = frame_to_send(b"hello", &settings()).unwrap_err();
        assert!(matches!(e, DeviceError::Fatal(_)));
        assert!(e.to_string().contains("[id_hi, id_lo, len"), "{e}");
        let lo = CanSettings {
            listen_only: true,
            ..settings()
        };
        assert!(frame_to_send(&classic, &lo)
            .unwrap_err()
            .to_string()
            .contains("listen-only"));
    }

    #[test]
    fn bitrates_read_naturally() {
        assert_eq!(describe_bitrate(500_000), "500 kbit/s");
        assert_eq!(describe_bitrate(1_000_000), "1 Mbit/s");
        assert_eq!(describe_bitrate(2_000_000), "2 Mbit/s");
        assert_eq!(describe_bitrate(33_300), "33.3 kbit/s");
    }
}
