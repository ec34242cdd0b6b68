//! UART / serial ports through the `serialport` crate, read on a dedicated thread.
//!
//! A blocking reader thread (not tokio-serial) keeps the hot path off the async runtime
//! and gives the lowest latency the OS allows; it hands chunks to the runner through a
//! channel, which keeps [`Link::read`] cancel-safe. Writes go through a cloned handle.

use std::io::{Read, Write};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use serialport::{
    DataBits, FlowControl as SpFlow, Parity as SpParity, SerialPort, StopBits as SpStop,
};
use sextant_telemetry::project::{FlowControl, Parity, SerialSettings, StopBits};
use sextant_telemetry::Timestamp;
use tokio::sync::mpsc;

use crate::source::{DeviceError, Driver, Link};

/// Highest rate we accept; the spec's ceiling for USB-UART bridges.
pub const MAX_BAUD: u32 = 15_000_000;

/// One port found on the system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    pub path: String,
    /// USB vendor/product and description when the OS knows them.
    pub description: String,
}

/// Ports present right now (behind `io.listSerialPorts`; call again after a device is
/// plugged in or out – nothing watches for it).
pub fn list_ports() -> Vec<PortInfo> {
    let mut ports: Vec<PortInfo> = serialport::available_ports()
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let description = match p.port_type {
                serialport::SerialPortType::UsbPort(u) => format!(
                    "USB {:04x}:{:04x} {} {}",
                    u.vid,
                    u.pid,
                    u.manufacturer.unwrap_or_default(),
                    u.product.unwrap_or_default()
                )
                .trim()
                .to_string(),
                serialport::SerialPortType::BluetoothPort => "Bluetooth".into(),
                serialport::SerialPortType::PciPort => "PCI".into(),
                serialport::SerialPortType::Unknown => String::new(),
            };
            PortInfo {
                path: p.port_name,
                description,
            }
        })
        .collect();
    ports.sort_by(|a, b| a.path.cmp(&b.path));
    ports
}

/// Opens serial ports with the project's settings.
pub struct SerialDriver {
    settings: SerialSettings,
}

impl SerialDriver {
    pub fn new(settings: SerialSettings) -> Result<Self, DeviceError> {
        if settings.port.is_empty() {
            return Err(DeviceError::fatal("no serial port is selected"));
        }
        if settings.baud == 0 || settings.baud > MAX_BAUD {
            return Err(DeviceError::fatal(format!(
                "baud rate {} is out of range (1 to {MAX_BAUD})",
                settings.baud
            )));
        }
        if !(5..=8).contains(&settings.data_bits) {
            return Err(DeviceError::fatal(format!(
                "{} data bits is not possible; use 5, 6, 7 or 8",
                settings.data_bits
            )));
        }
        Ok(SerialDriver { settings })
    }
}

fn open_error(port: &str, e: &serialport::Error) -> DeviceError {
    use serialport::ErrorKind;
    let detail = e.to_string();
    match e.kind() {
        ErrorKind::NoDevice => DeviceError::transient(format!("{port} is not present (unplugged?)")),
        ErrorKind::Io(std::io::ErrorKind::NotFound) => {
            DeviceError::transient(format!("{port} does not exist (unplugged?)"))
        }
        ErrorKind::Io(std::io::ErrorKind::PermissionDenied) => DeviceError::fatal(format!(
            "permission denied opening {port}: add your user to the `dialout` group (then log in again)"
        )),
        _ if detail.contains("busy") || detail.contains("Device or resource busy") => {
            DeviceError::transient(format!("{port} is busy: another program has it open"))
        }
        ErrorKind::InvalidInput => DeviceError::fatal(format!("{port}: {detail}")),
        _ => DeviceError::transient(format!("could not open {port}: {detail}")),
    }
}

impl Driver for SerialDriver {
    type Link = SerialLink;

    fn describe(&self) -> String {
        format!("serial {} @ {}", self.settings.port, self.settings.baud)
    }

    async fn open(&mut self) -> Result<SerialLink, DeviceError> {
        let s = self.settings.clone();
        tokio::task::spawn_blocking(move || open_port(&s))
            .await
            .map_err(|e| DeviceError::transient(format!("serial open task failed: {e}")))?
    }
}

fn open_port(s: &SerialSettings) -> Result<SerialLink, DeviceError> {
    let builder = serialport::new(&s.port, s.baud)
        .data_bits(match s.data_bits {
            5 => DataBits::Five,
            6 => DataBits::Six,
            7 => DataBits::Seven,
            _ => DataBits::Eight,
        })
        .parity(match s.parity {
            Parity::None => SpParity::None,
            Parity::Even => SpParity::Even,
            Parity::Odd => SpParity::Odd,
            Parity::Mark | Parity::Space => {
                return Err(DeviceError::fatal(
                    "mark and space parity are not supported by this platform's serial driver",
                ))
            }
        })
        .stop_bits(match s.stop_bits {
            StopBits::One => SpStop::One,
            StopBits::Two => SpStop::Two,
            StopBits::OnePointFive => {
                return Err(DeviceError::fatal(
                    "1.5 stop bits is not supported by this platform's serial driver",
                ))
            }
        })
        .flow_control(match s.flow_control {
            FlowControl::None => SpFlow::None,
            FlowControl::RtsCts => SpFlow::Hardware,
            FlowControl::XonXoff => SpFlow::Software,
        })
        .timeout(Duration::from_millis(50));
    let mut port = builder.open().map_err(|e| open_error(&s.port, &e))?;
    check_baud(&s.port, s.baud, port.baud_rate())?;
    // What the OS buffered before this open (a device streaming while nobody listened)
    // arrived at no time Sextant saw: read in one go, it would all be stamped with the
    // connect time and draw a vertical spike. The run starts with what arrives from now.
    if let Err(e) = port.clear(serialport::ClearBuffer::Input) {
        tracing::debug!(port = %s.port, "could not discard bytes buffered before the open: {e}");
    }
    // DTR/RTS are meaningless (and refused) under hardware flow control.
    if s.flow_control != FlowControl::RtsCts {
        let dtr = port.write_data_terminal_ready(s.dtr);
        set_control_line(&mut *port, &s.port, "DTR", s.dtr, dtr)?;
        let rts = port.write_request_to_send(s.rts);
        set_control_line(&mut *port, &s.port, "RTS", s.rts, rts)?;
    }
    let writer = port
        .try_clone()
        .map_err(|e| DeviceError::transient(format!("could not share {}: {e}", s.port)))?;
    let (tx, rx) = mpsc::channel(256);
    let name = s.port.clone();
    thread::Builder::new()
        .name(format!("serial {name}"))
        .spawn(move || read_loop(port, tx))
        .map_err(|e| DeviceError::transient(format!("could not start the reader thread: {e}")))?;
    Ok(SerialLink {
        rx,
        writer: Some(writer),
        name,
    })
}

/// Never runs at a rate the user did not ask for: `read_back` is the rate the OS reports
/// for the open port, and anything but `requested` (a driver that rounded or fell back)
/// refuses the port.
fn check_baud(
    name: &str,
    requested: u32,
    read_back: serialport::Result<u32>,
) -> Result<(), DeviceError> {
    match read_back {
        Ok(actual) if actual == requested => Ok(()),
        Ok(actual) => Err(DeviceError::fatal(format!(
            "{name} cannot run at {requested} baud (the driver set {actual}); pick a rate the adapter supports"
        ))),
        Err(e) => Err(open_error(name, &e)),
    }
}

/// Judges the result of setting a modem control line (`DTR` or `RTS`) to `level`.
///
/// A port that has no modem control lines at all – a pseudo-terminal, many virtual ports –
/// refuses every such request, and reading the lines fails too; there is nothing to set,
/// so that is logged and the port is used. A port that has the lines but refused to set
/// one fails the open with an error naming the line, the level and the port.
fn set_control_line(
    port: &mut dyn SerialPort,
    name: &str,
    line: &str,
    level: bool,
    result: serialport::Result<()>,
) -> Result<(), DeviceError> {
    let Err(e) = result else { return Ok(()) };
    let has_lines = port.read_carrier_detect().is_ok();
    match control_line_error(name, line, level, &e, has_lines) {
        Some(error) => Err(error),
        None => {
            tracing::warn!(
                "{name} has no modem control lines ({e}); {line} is not set {}",
                level_name(level)
            );
            Ok(())
        }
    }
}

fn level_name(level: bool) -> &'static str {
    if level {
        "high"
    } else {
        "low"
    }
}

/// The error for a control line that could not be set, or `None` when the port has no
/// modem control lines (`has_lines` false), so there was nothing to set.
fn control_line_error(
    name: &str,
    line: &str,
    level: bool,
    error: &serialport::Error,
    has_lines: bool,
) -> Option<DeviceError> {
    if !has_lines {
        return None;
    }
    let message = format!(
        "could not set {line} {} on {name}: {error} (the port refused its modem control line)",
        level_name(level)
    );
    Some(match error.kind() {
        // The adapter went away between the open and this call: worth retrying.
        serialport::ErrorKind::NoDevice | serialport::ErrorKind::Io(_) => {
            DeviceError::transient(message)
        }
        _ => DeviceError::fatal(message),
    })
}

/// Reads until the port fails or the link is dropped.
fn read_loop(mut port: Box<dyn SerialPort>, tx: mpsc::Sender<Result<Bytes, String>>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match port.read(&mut buf) {
            Ok(0) => {
                let _ = tx.blocking_send(Err("the port reported end of file".into()));
                return;
            }
            Ok(n) => {
                if tx
                    .blocking_send(Ok(Bytes::copy_from_slice(&buf[..n])))
                    .is_err()
                {
                    return; // link dropped: the source closed or reconnects
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                if tx.is_closed() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = tx.blocking_send(Err(format!(
                    "read failed ({e}); the device was unplugged or reset"
                )));
                return;
            }
        }
    }
}

pub struct SerialLink {
    rx: mpsc::Receiver<Result<Bytes, String>>,
    writer: Option<Box<dyn SerialPort>>,
    name: String,
}

impl Link for SerialLink {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        match self.rx.recv().await {
            Some(Ok(data)) => Ok(Some((data, None))),
            Some(Err(e)) => Err(DeviceError::transient(format!("{}: {e}", self.name))),
            None => Err(DeviceError::transient(format!(
                "{}: reader stopped",
                self.name
            ))),
        }
    }

    async fn write(&mut self, data: Bytes) -> Result<(), DeviceError> {
        let mut writer = self
            .writer
            .take()
            .ok_or_else(|| DeviceError::transient("port is closing"))?;
        let name = self.name.clone();
        let (writer, result) = tokio::task::spawn_blocking(move || {
            let r = writer.write_all(&data).and_then(|_| writer.flush());
            (writer, r)
        })
        .await
        .map_err(|e| DeviceError::transient(format!("serial write task failed: {e}")))?;
        self.writer = Some(writer);
        result.map_err(|e| DeviceError::transient(format!("write to {name} failed: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_that_reads_back_different_is_refused() {
        // What a USB bridge does with a rate it cannot divide down to: round or fall back.
        // (A pseudo-terminal stores any rate exactly, so the serial tests cannot show this.)
        for (requested, actual) in [(250_000, 230_400), (3_000_000, 9_600), (1_000_000, 0)] {
            let e = check_baud("/dev/ttyUSB0", requested, Ok(actual)).unwrap_err();
            assert!(matches!(e, DeviceError::Fatal(_)), "{e:?}");
            assert_eq!(
                e.to_string(),
                format!(
                    "/dev/ttyUSB0 cannot run at {requested} baud (the driver set {actual}); pick a rate the adapter supports"
                )
            );
        }
    }

    #[test]
    fn a_rate_that_reads_back_equal_is_used() {
        for rate in [300, 115_200, 1_234_567, MAX_BAUD] {
            assert!(check_baud("COM3", rate, Ok(rate)).is_ok());
        }
    }

    #[test]
    fn a_rate_that_cannot_be_read_back_is_an_open_error() {
        let gone = serialport::Error::new(serialport::ErrorKind::NoDevice, "No such device");
        let e = check_baud("/dev/ttyACM0", 115_200, Err(gone)).unwrap_err();
        assert!(matches!(e, DeviceError::Transient(_)), "{e:?}");
        assert!(e.to_string().contains("/dev/ttyACM0 is not present"), "{e}");
    }

    #[test]
    fn a_refused_control_line_is_an_error_naming_line_level_and_port() {
        let refused = serialport::Error::new(serialport::ErrorKind::Unknown, "Invalid argument");
        let e = control_line_error("/dev/ttyUSB0", "DTR", true, &refused, true).unwrap();
        assert!(matches!(e, DeviceError::Fatal(_)), "{e:?}");
        let shown = e.to_string();
        assert!(
            shown
                == "could not set DTR high on /dev/ttyUSB0: Invalid argument (the port refused its modem control line)",
            "{shown}"
        );
        let gone = serialport::Error::new(serialport::ErrorKind::NoDevice, "No such device");
        let e = control_line_error("COM3", "RTS", false, &gone, true).unwrap();
        assert!(matches!(e, DeviceError::Transient(_)), "{e:?}");
        assert!(
            e.to_string().starts_with("could not set RTS low on COM3"),
            "{e}"
        );
    }

    #[test]
    fn a_port_without_modem_lines_has_nothing_to_set() {
        let refused = serialport::Error::new(serialport::ErrorKind::Unknown, "Not a typewriter");
        assert!(control_line_error("/dev/pts/3", "DTR", true, &refused, false).is_none());
    }
}
