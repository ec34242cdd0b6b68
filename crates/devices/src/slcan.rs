//! SLCAN (Lawicel) CAN adapters on a serial port: CANable, CANtact, USBtin, Lawicel
//! CAN232/CANUSB and their many clones. Works wherever a serial port does, including
//! machines without SocketCAN.
//!
//! The protocol is ASCII, one command or frame per line, each ended by `\r`. On open the
//! driver sends `\r` and `C` (end any half-written command, close a channel a previous
//! session left open; refusals of these are ignored), `S0`–`S8` for the bitrate, `Y<n>`
//! for a CAN FD data bitrate when one is set, then `O` (or `L` for listen-only). Close
//! sends `C`. The adapter answers a command with `\r` (accepted) or BEL, `0x07`
//! (refused). Many CANable firmwares answer nothing at all, so silence after a short wait
//! counts as accepted; only an explicit BEL fails the open.
//!
//! Received lines:
//!
//! ```text
//! tIIILDD…[SSSS]        standard data frame, L = 0–8 bytes
//! TIIIIIIIILDD…[SSSS]   extended data frame
//! rIIIL[SSSS]           standard remote request (RIIIIIIIIL… extended)
//! dIIIL…  DIIIIIIIIL…   CAN FD, L = DLC code 0–F (0–8, 12, 16, 20, 24, 32, 48, 64 bytes)
//! bIIIL…  BIIIIIIIIL…   CAN FD with bit-rate switch
//! z  Z                  transmit accepted (Lawicel); an empty line is a plain `\r` answer
//! ```
//!
//! `SSSS` is the adapter's optional millisecond timestamp. It wraps every 60 s and has no
//! relation to the session clock, so it is accepted and ignored: chunks are stamped on
//! arrival like every other source's. Each frame becomes one chunk in the CAN layout of
//! [`crate::can`]; a BEL outside the handshake and every malformed line are counted in
//! [`SlcanStats`] and skipped, never fatal. A written chunk in the CAN layout becomes
//! the matching transmit command; a CAN FD frame goes out with bit-rate switch (`b`/`B`)
//! exactly when a data bitrate is configured.
//!
//! The port is read on a dedicated thread, like [`crate::serial`], which hands chunks
//! over a channel and so keeps [`Link::read`] cancel-safe.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serialport::SerialPort;
use sextant_telemetry::project::CanSettings;
use sextant_telemetry::Timestamp;
use tokio::sync::mpsc;

use crate::can::{
    check_settings, describe_bitrate, fd_dlc_from_len, fd_len_from_dlc, frame_to_send, CanFrame,
    CanId, FrameKind, CLASSIC_MAX_LEN,
};
use crate::source::{DeviceError, Driver, Link};

/// Bitrates of the `S0`–`S8` commands.
pub const BITRATES: [(u32, &str); 9] = [
    (10_000, "S0"),
    (20_000, "S1"),
    (50_000, "S2"),
    (100_000, "S3"),
    (125_000, "S4"),
    (250_000, "S5"),
    (500_000, "S6"),
    (800_000, "S7"),
    (1_000_000, "S8"),
];

/// CAN FD data bitrates of the `Y<n>` command (CANable 2.0 and compatible firmware).
pub const DATA_BITRATES: [(u32, &str); 4] = [
    (1_000_000, "Y1"),
    (2_000_000, "Y2"),
    (4_000_000, "Y4"),
    (5_000_000, "Y5"),
];

/// Serial rate used for the adapter's port. USB adapters ignore it; adapters on a real
/// UART need the rate they were set to ([`SlcanDriver::with_serial_baud`]).
pub const DEFAULT_SERIAL_BAUD: u32 = 115_200;

/// How long to wait for the answer to `S`, `Y`, `O` or `L` before taking silence as
/// acceptance.
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_millis(500);

/// Longest line the protocol produces: `D` + 8 id + 1 DLC + 128 data + 4 timestamp.
pub const MAX_LINE: usize = 1 + 8 + 1 + 128 + 4;

const BEL: u8 = 0x07;
/// After `\rC\r`, the adapter is done answering once it has been quiet this long.
const SETTLE_QUIET: Duration = Duration::from_millis(100);
/// …or at the latest after this (an adapter left open may stream frames throughout).
const SETTLE_MAX: Duration = Duration::from_secs(1);
const HANDSHAKE_READ_TIMEOUT: Duration = Duration::from_millis(20);
const READ_TIMEOUT: Duration = Duration::from_millis(50);

/// The `S<n>` command for a bitrate; a rate SLCAN cannot set is a fatal error.
pub fn bitrate_command(rate: u32) -> Result<&'static str, DeviceError> {
    BITRATES
        .iter()
        .find(|(r, _)| *r == rate)
        .map(|(_, cmd)| *cmd)
        .ok_or_else(|| {
            DeviceError::fatal(format!(
                "SLCAN adapters cannot run at {}: pick 10, 20, 50, 100, 125, 250, 500 or \
                 800 kbit/s, or 1 Mbit/s",
                describe_bitrate(rate)
            ))
        })
}

/// The `Y<n>` command for a CAN FD data bitrate.
pub fn data_bitrate_command(rate: u32) -> Result<&'static str, DeviceError> {
    DATA_BITRATES
        .iter()
        .find(|(r, _)| *r == rate)
        .map(|(_, cmd)| *cmd)
        .ok_or_else(|| {
            DeviceError::fatal(format!(
                "SLCAN adapters cannot set a CAN FD data bitrate of {}: pick 1, 2, 4 or \
                 5 Mbit/s, or clear the data bitrate to keep the adapter's default",
                describe_bitrate(rate)
            ))
        })
}

/// Why a received line was skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("unexpected line `{0}`: not a frame, an answer or a transmit acknowledgement")]
    Unknown(String),
    #[error("frame line `{0}` is cut short")]
    Short(String),
    #[error("frame line `{0}` has a character that is not a hex digit")]
    NotHex(String),
    #[error("frame line `{line}`: {reason}")]
    Invalid { line: String, reason: String },
    #[error(
        "frame line `{line}` has {extra} characters after the data; only a 4-digit \
         timestamp may follow"
    )]
    Trailing { line: String, extra: usize },
    #[error("a line longer than {MAX_LINE} characters arrived without `\\r`; it was dropped")]
    TooLong,
}

/// One thing the adapter said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An empty line: a command was accepted.
    Accepted,
    /// BEL: a command was refused, or the adapter reports an error.
    Refused,
    /// `z` / `Z`: a transmit command was accepted.
    Sent,
    /// A received frame, already in the chunk layout of [`crate::can`].
    Frame(Vec<u8>),
    /// Anything else; counted and skipped.
    Malformed(LineError),
}

/// A line for messages: lossy text, cut to a readable length.
fn shown(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let mut out: String = text.chars().take(40).collect();
    if text.chars().count() > 40 {
        out.push('…');
    }
    out
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn hex_number(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0u32, |acc, &c| Some((acc << 4) | hex_digit(c)? as u32))
}

/// Reads one line (without its `\r`). Never panics, whatever the bytes.
pub fn parse_line(line: &[u8]) -> Event {
    match parse_frame_line(line) {
        Ok(event) => event,
        Err(e) => Event::Malformed(e),
    }
}

fn parse_frame_line(line: &[u8]) -> Result<Event, LineError> {
    let Some((&command, rest)) = line.split_first() else {
        return Ok(Event::Accepted);
    };
    let (extended, kind) = match command {
        b't' => (false, FrameKind::Data),
        b'T' => (true, FrameKind::Data),
        b'r' => (false, FrameKind::Remote),
        b'R' => (true, FrameKind::Remote),
        b'd' | b'b' => (false, FrameKind::Fd),
        b'D' | b'B' => (true, FrameKind::Fd),
        b'z' | b'Z' if rest.is_empty() => return Ok(Event::Sent),
        _ => return Err(LineError::Unknown(shown(line))),
    };
    let short = || LineError::Short(shown(line));
    let not_hex = || LineError::NotHex(shown(line));
    let invalid = |reason: String| LineError::Invalid {
        line: shown(line),
        reason,
    };
    let id_len = if extended { 8 } else { 3 };
    let id = hex_number(rest.get(..id_len).ok_or_else(short)?).ok_or_else(not_hex)?;
    let id = if extended {
        CanId::extended(id)
    } else {
        CanId::standard(id)
    }
    .map_err(|e| invalid(e.to_string()))?;
    let dlc = hex_digit(*rest.get(id_len).ok_or_else(short)?).ok_or_else(not_hex)?;
    let len = match kind {
        FrameKind::Fd => fd_len_from_dlc(dlc).unwrap_or(0) as usize,
        _ if dlc as usize <= CLASSIC_MAX_LEN => dlc as usize,
        _ => {
            return Err(invalid(format!(
                "length {dlc} is more than a classic frame's 8 bytes"
            )))
        }
    };
    let data_start = id_len + 1;
    let data_end = data_start
        + if kind == FrameKind::Remote {
            0
        } else {
            2 * len
        };
    let data_hex = rest.get(data_start..data_end).ok_or_else(short)?;
    let mut data = [0u8; 64];
    for (byte, pair) in data.iter_mut().zip(data_hex.chunks_exact(2)) {
        *byte = (hex_digit(pair[0]).ok_or_else(not_hex)? << 4)
            | hex_digit(pair[1]).ok_or_else(not_hex)?;
    }
    let trailer = &rest[data_end..];
    match trailer.len() {
        0 => {}
        4 if trailer.iter().all(|&c| hex_digit(c).is_some()) => {}
        4 => return Err(not_hex()),
        extra => {
            return Err(LineError::Trailing {
                line: shown(line),
                extra,
            })
        }
    }
    let frame = match kind {
        FrameKind::Data => CanFrame::data(id, &data[..len]),
        FrameKind::Remote => CanFrame::remote(id, len),
        FrameKind::Fd => CanFrame::fd(id, &data[..len]),
    }
    .map_err(|e| invalid(e.to_string()))?;
    Ok(Event::Frame(frame.to_bytes()))
}

/// Splits the adapter's byte stream into events. Memory stays bounded: an over-long
/// line is dropped (and reported) at its `\r`.
#[derive(Debug, Default)]
pub struct LineDecoder {
    line: Vec<u8>,
    overflow: bool,
}

impl LineDecoder {
    pub fn new() -> Self {
        LineDecoder::default()
    }

    pub fn push(&mut self, bytes: &[u8], out: &mut impl FnMut(Event)) {
        for &b in bytes {
            match b {
                b'\r' => {
                    if self.overflow {
                        self.overflow = false;
                        out(Event::Malformed(LineError::TooLong));
                    } else {
                        out(parse_line(&self.line));
                    }
                    self.line.clear();
                }
                BEL => {
                    // A BEL is an answer of its own; whatever came before it on the line
                    // was never finished.
                    if self.overflow {
                        out(Event::Malformed(LineError::TooLong));
                    } else if !self.line.is_empty() {
                        out(Event::Malformed(LineError::Short(shown(&self.line))));
                    }
                    self.overflow = false;
                    self.line.clear();
                    out(Event::Refused);
                }
                // Some adapters end lines with `\r\n`.
                b'\n' => {}
                _ if self.overflow => {}
                _ if self.line.len() >= MAX_LINE => {
                    self.overflow = true;
                    self.line.clear();
                }
                _ => self.line.push(b),
            }
        }
    }
}

/// The transmit command for a frame, `\r` included.
pub fn encode_command(frame: &CanFrame<'_>, bit_rate_switch: bool) -> Vec<u8> {
    let extended = frame.id().is_extended();
    let command = match (frame.kind(), bit_rate_switch) {
        (FrameKind::Data, _) => 't',
        (FrameKind::Remote, _) => 'r',
        (FrameKind::Fd, false) => 'd',
        (FrameKind::Fd, true) => 'b',
    };
    let mut out = String::with_capacity(1 + 8 + 1 + 2 * frame.payload().len() + 1);
    out.push(if extended {
        command.to_ascii_uppercase()
    } else {
        command
    });
    // Writing into a String cannot fail.
    let _ = if extended {
        write!(out, "{:08X}", frame.id().raw())
    } else {
        write!(out, "{:03X}", frame.id().raw())
    };
    let dlc = match frame.kind() {
        FrameKind::Fd => fd_dlc_from_len(frame.len()).unwrap_or(0),
        _ => frame.len() as u8,
    };
    let _ = write!(out, "{dlc:X}");
    for b in frame.payload() {
        let _ = write!(out, "{b:02X}");
    }
    out.push('\r');
    out.into_bytes()
}

/// Counters of one SLCAN driver, kept across reconnections.
#[derive(Debug, Default)]
pub struct SlcanCounters {
    frames: AtomicU64,
    malformed: AtomicU64,
    refused: AtomicU64,
    last_problem: Mutex<Option<String>>,
}

/// A plain copy of [`SlcanCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlcanStats {
    /// Frames received and passed on.
    pub frames: u64,
    /// Lines that were not valid SLCAN, skipped.
    pub malformed_lines: u64,
    /// BELs the adapter sent outside the handshake (a refused transmit, a bus error).
    pub adapter_errors: u64,
    /// The most recent of those problems, for the UI.
    pub last_problem: Option<String>,
}

impl SlcanCounters {
    pub fn snapshot(&self) -> SlcanStats {
        SlcanStats {
            frames: self.frames.load(Ordering::Relaxed),
            malformed_lines: self.malformed.load(Ordering::Relaxed),
            adapter_errors: self.refused.load(Ordering::Relaxed),
            last_problem: self
                .last_problem
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }

    fn problem(&self, counter: &AtomicU64, message: String) {
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%message, "slcan");
        *self.last_problem.lock().unwrap_or_else(|p| p.into_inner()) = Some(message);
    }

    /// Counts a non-frame event; returns the frame of a frame event.
    fn account(&self, event: Event) -> Option<Vec<u8>> {
        match event {
            Event::Frame(chunk) => {
                self.frames.fetch_add(1, Ordering::Relaxed);
                return Some(chunk);
            }
            Event::Malformed(e) => self.problem(&self.malformed, e.to_string()),
            Event::Refused => self.problem(
                &self.refused,
                "the adapter signalled an error (BEL): a frame it could not send, or a bus \
                 problem"
                    .into(),
            ),
            Event::Accepted | Event::Sent => {}
        }
        None
    }
}

/// Opens an SLCAN adapter with the project's CAN settings (`interface` is the serial
/// port).
pub struct SlcanDriver {
    settings: CanSettings,
    serial_baud: u32,
    answer_timeout: Duration,
    counters: Arc<SlcanCounters>,
}

impl SlcanDriver {
    pub fn new(settings: CanSettings) -> Result<Self, DeviceError> {
        let settings = CanSettings {
            slcan: true,
            ..settings
        };
        check_settings(&settings)?;
        bitrate_command(settings.bitrate)?;
        if let Some(rate) = settings.data_bitrate {
            data_bitrate_command(rate)?;
        }
        Ok(SlcanDriver {
            settings,
            serial_baud: DEFAULT_SERIAL_BAUD,
            answer_timeout: DEFAULT_ANSWER_TIMEOUT,
            counters: Arc::default(),
        })
    }

    /// The serial rate of an adapter on a real UART (USB adapters ignore it).
    pub fn with_serial_baud(mut self, baud: u32) -> Self {
        self.serial_baud = baud;
        self
    }

    /// How long to wait for each command's answer before taking silence as acceptance.
    pub fn with_answer_timeout(mut self, timeout: Duration) -> Self {
        self.answer_timeout = timeout;
        self
    }

    /// Live counters (frames, malformed lines, adapter errors); grab them before the
    /// driver moves into a source.
    pub fn counters(&self) -> Arc<SlcanCounters> {
        self.counters.clone()
    }
}

impl Driver for SlcanDriver {
    type Link = SlcanLink;

    fn describe(&self) -> String {
        let s = &self.settings;
        let mut text = format!("SLCAN {} @ {}", s.interface, describe_bitrate(s.bitrate));
        if s.fd {
            text.push_str(" + CAN FD");
            if let Some(rate) = s.data_bitrate {
                let _ = write!(text, " {}", describe_bitrate(rate));
            }
        }
        if s.listen_only {
            text.push_str(" (listen-only)");
        }
        text
    }

    async fn open(&mut self) -> Result<SlcanLink, DeviceError> {
        let settings = self.settings.clone();
        let baud = self.serial_baud;
        let timeout = self.answer_timeout;
        let counters = self.counters.clone();
        tokio::task::spawn_blocking(move || open_adapter(settings, baud, timeout, counters))
            .await
            .map_err(|e| DeviceError::transient(format!("SLCAN open task failed: {e}")))?
    }
}

fn open_error(port: &str, e: &serialport::Error) -> DeviceError {
    use serialport::ErrorKind;
    let detail = e.to_string();
    match e.kind() {
        ErrorKind::NoDevice | ErrorKind::Io(std::io::ErrorKind::NotFound) => {
            DeviceError::transient(format!("{port} is not present (is the SLCAN adapter plugged in?)"))
        }
        ErrorKind::Io(std::io::ErrorKind::PermissionDenied) => DeviceError::fatal(format!(
            "permission denied opening {port}: add your user to the `dialout` group (then log in again)"
        )),
        _ if detail.contains("busy") => DeviceError::transient(format!(
            "{port} is busy: another program (slcand?) has the adapter open"
        )),
        ErrorKind::InvalidInput => DeviceError::fatal(format!("{port}: {detail}")),
        _ => DeviceError::transient(format!("could not open {port}: {detail}")),
    }
}

/// The port during the handshake: events read so far and not yet consumed.
struct Wire {
    port: Box<dyn SerialPort>,
    name: String,
    decoder: LineDecoder,
    pending: VecDeque<Event>,
}

impl Wire {
    fn send(&mut self, command: &[u8]) -> Result<(), DeviceError> {
        self.port
            .write_all(command)
            .and_then(|_| self.port.flush())
            .map_err(|e| DeviceError::transient(format!("could not write to {}: {e}", self.name)))
    }

    /// One read with the short handshake timeout; whether bytes arrived.
    fn fill(&mut self) -> Result<bool, DeviceError> {
        let mut buf = [0u8; 1024];
        match self.port.read(&mut buf) {
            Ok(0) => Err(DeviceError::transient(format!(
                "{} closed during the SLCAN handshake",
                self.name
            ))),
            Ok(n) => {
                let pending = &mut self.pending;
                self.decoder.push(&buf[..n], &mut |e| pending.push_back(e));
                Ok(true)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(DeviceError::transient(format!(
                "reading {} failed during the SLCAN handshake: {e}",
                self.name
            ))),
        }
    }

    /// Reads and throws away everything until `answers` answers arrived or the line
    /// went quiet: what the adapter says to the opening `\rC\r`, and frames of a channel
    /// a previous session left open.
    fn settle(&mut self, answers: usize) -> Result<(), DeviceError> {
        let start = Instant::now();
        let mut last_activity = start;
        let mut seen = 0;
        while seen < answers && start.elapsed() < SETTLE_MAX {
            if self.fill()? {
                last_activity = Instant::now();
            } else if last_activity.elapsed() >= SETTLE_QUIET {
                break;
            }
            for e in self.pending.drain(..) {
                if matches!(e, Event::Accepted | Event::Refused) {
                    seen += 1;
                }
            }
        }
        self.pending.clear();
        Ok(())
    }

    /// Waits for the answer to the last command: `Some(true)` accepted, `Some(false)`
    /// refused, `None` no answer in time. Frames before the answer are dropped (the
    /// channel is not ours yet); events after it stay pending.
    fn answer(&mut self, timeout: Duration) -> Result<Option<bool>, DeviceError> {
        let deadline = Instant::now() + timeout;
        loop {
            while let Some(e) = self.pending.pop_front() {
                match e {
                    Event::Accepted => return Ok(Some(true)),
                    Event::Refused => return Ok(Some(false)),
                    _ => {}
                }
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            self.fill()?;
        }
    }
}

fn handshake(wire: &mut Wire, s: &CanSettings, timeout: Duration) -> Result<(), DeviceError> {
    // `\r` ends a command a crashed session may have left half-written; `C` closes a
    // channel left open. An adapter with nothing to end or close refuses them: fine.
    wire.send(b"\rC\r")?;
    wire.settle(2)?;

    let command = bitrate_command(s.bitrate)?;
    wire.send(format!("{command}\r").as_bytes())?;
    if wire.answer(timeout)? == Some(false) {
        return Err(DeviceError::fatal(format!(
            "the SLCAN adapter on {} refused bitrate {} (`{command}`): pick a rate it supports",
            wire.name,
            describe_bitrate(s.bitrate)
        )));
    }
    if let (true, Some(rate)) = (s.fd, s.data_bitrate) {
        let command = data_bitrate_command(rate)?;
        wire.send(format!("{command}\r").as_bytes())?;
        if wire.answer(timeout)? == Some(false) {
            return Err(DeviceError::fatal(format!(
                "the SLCAN adapter on {} refused CAN FD data bitrate {} (`{command}`): use a \
                 CAN FD capable adapter and firmware, or turn CAN FD off",
                wire.name,
                describe_bitrate(rate)
            )));
        }
    }
    let open = if s.listen_only { "L" } else { "O" };
    wire.send(format!("{open}\r").as_bytes())?;
    match wire.answer(timeout)? {
        Some(false) if s.listen_only => Err(DeviceError::fatal(format!(
            "the SLCAN adapter on {} refused listen-only mode (`L`): its firmware does not \
             support it; turn listen-only off",
            wire.name
        ))),
        Some(false) => Err(DeviceError::transient(format!(
            "the SLCAN adapter on {} refused to open the CAN channel (`O`); it may be in an \
             error state: check the bus wiring and termination, or replug it",
            wire.name
        ))),
        _ => Ok(()),
    }
}

fn open_adapter(
    settings: CanSettings,
    baud: u32,
    timeout: Duration,
    counters: Arc<SlcanCounters>,
) -> Result<SlcanLink, DeviceError> {
    let name = settings.interface.clone();
    let port = serialport::new(&name, baud)
        .timeout(HANDSHAKE_READ_TIMEOUT)
        .open()
        .map_err(|e| open_error(&name, &e))?;
    let mut wire = Wire {
        port,
        name: name.clone(),
        decoder: LineDecoder::new(),
        pending: VecDeque::new(),
    };
    handshake(&mut wire, &settings, timeout)?;
    let Wire {
        mut port,
        decoder,
        pending,
        ..
    } = wire;
    // Frames that arrived right behind the open answer belong to this session.
    let early: Vec<Bytes> = pending
        .into_iter()
        .filter_map(|e| counters.account(e))
        .map(Bytes::from)
        .collect();
    port.set_timeout(READ_TIMEOUT)
        .map_err(|e| DeviceError::transient(format!("could not configure {name}: {e}")))?;
    let writer = port
        .try_clone()
        .map_err(|e| DeviceError::transient(format!("could not share {name}: {e}")))?;
    let (tx, rx) = mpsc::channel(256);
    let thread_counters = counters.clone();
    thread::Builder::new()
        .name(format!("slcan {name}"))
        .spawn(move || read_loop(port, decoder, early, tx, thread_counters))
        .map_err(|e| DeviceError::transient(format!("could not start the reader thread: {e}")))?;
    Ok(SlcanLink {
        rx,
        writer: Some(writer),
        bit_rate_switch: settings.data_bitrate.is_some(),
        settings,
        name,
    })
}

/// Reads until the port fails or the link is dropped.
fn read_loop(
    mut port: Box<dyn SerialPort>,
    mut decoder: LineDecoder,
    early: Vec<Bytes>,
    tx: mpsc::Sender<Result<Bytes, String>>,
    counters: Arc<SlcanCounters>,
) {
    for chunk in early {
        if tx.blocking_send(Ok(chunk)).is_err() {
            return;
        }
    }
    let mut buf = vec![0u8; 16 * 1024];
    let mut frames: Vec<Bytes> = Vec::new();
    loop {
        match port.read(&mut buf) {
            Ok(0) => {
                let _ = tx.blocking_send(Err("the port reported end of file".into()));
                return;
            }
            Ok(n) => {
                decoder.push(&buf[..n], &mut |e| {
                    if let Some(chunk) = counters.account(e) {
                        frames.push(Bytes::from(chunk));
                    }
                });
                for chunk in frames.drain(..) {
                    if tx.blocking_send(Ok(chunk)).is_err() {
                        return; // link dropped: the source closed or reconnects
                    }
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
                    "read failed ({e}); the adapter was unplugged or reset"
                )));
                return;
            }
        }
    }
}

pub struct SlcanLink {
    rx: mpsc::Receiver<Result<Bytes, String>>,
    writer: Option<Box<dyn SerialPort>>,
    settings: CanSettings,
    bit_rate_switch: bool,
    name: String,
}

impl Link for SlcanLink {
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
        let frame = frame_to_send(&data, &self.settings)?;
        let command = encode_command(&frame, self.bit_rate_switch);
        let mut writer = self
            .writer
            .take()
            .ok_or_else(|| DeviceError::transient("the adapter's port is closing"))?;
        let (writer, result) = tokio::task::spawn_blocking(move || {
            let r = writer.write_all(&command).and_then(|_| writer.flush());
            (writer, r)
        })
        .await
        .map_err(|e| DeviceError::transient(format!("SLCAN write task failed: {e}")))?;
        self.writer = Some(writer);
        result.map_err(|e| DeviceError::transient(format!("write to {} failed: {e}", self.name)))
    }
}

impl Drop for SlcanLink {
    fn drop(&mut self) {
        // Close the channel so the adapter stops sending; two bytes, and an unplugged
        // adapter just fails the write.
        if let Some(writer) = self.writer.as_mut() {
            let _ = writer.write_all(b"C\r").and_then(|_| writer.flush());
        }
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
    fn frame_lines_become_chunks() {
        // (line, chunk in the CAN layout), worked out by hand.
        let cases: &[(&str, &str)] = &[
            ("t12381122334455667788", "0123081122334455667788"),
            ("t7FF0", "07ff00"),
            ("t0012aBcD", "000102abcd"),
            ("t1232AABB1234", "012302aabb"), // with a timestamp
            ("T1ABCDEF03010203", "9abcdef003010203"),
            ("T000000010", "8000000100"),
            ("r1238", "412308"),
            ("r123000FF", "412300"), // remote with a timestamp
            ("R18FF00012", "d8ff000102"),
            (
                "d1239000102030405060708090A0B",
                "21230c000102030405060708090a0b",
            ),
            ("b0010", "200100"),
            ("D1234567880102030405060708", "b2345678080102030405060708"),
        ];
        for (line, want) in cases {
            assert_eq!(
                parse_line(line.as_bytes()),
                Event::Frame(hex(want)),
                "{line}"
            );
        }
        let long: String = "B18FF0001F".to_string() + &"AB".repeat(64);
        match parse_line(long.as_bytes()) {
            Event::Frame(chunk) => {
                assert_eq!(chunk.len(), 5 + 64);
                assert_eq!(&chunk[..5], &hex("b8ff000140"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn answers_and_malformed_lines() {
        assert_eq!(parse_line(b""), Event::Accepted);
        assert_eq!(parse_line(b"z"), Event::Sent);
        assert_eq!(parse_line(b"Z"), Event::Sent);
        let bad: &[(&[u8], &str)] = &[
            (b"hello", "unexpected line"),
            (b"V1013", "unexpected line"),
            (b"t12", "cut short"),
            (b"t123", "cut short"),
            (b"t1232AA", "cut short"),
            (b"tXYZ0", "not a hex digit"),
            (b"t1232AAZZ", "not a hex digit"),
            (b"t8000", "does not fit"),
            (b"T200000000", "does not fit"),
            (b"t1239", "more than a classic"),
            (b"r1239", "more than a classic"),
            (b"t1231AA12", "only a 4-digit timestamp"),
            (b"t1231AA12345", "only a 4-digit timestamp"),
            (b"t1231AAXXXX", "not a hex digit"),
            (b"z1", "unexpected line"),
            (b"\xff\xfe", "unexpected line"),
            (b"t12\xc3\xa9", "not a hex digit"),
        ];
        for (line, needle) in bad {
            match parse_line(line) {
                Event::Malformed(e) => assert!(e.to_string().contains(needle), "{line:?}: {e}"),
                other => panic!("{line:?}: expected malformed, got {other:?}"),
            }
        }
    }

    #[test]
    fn decoder_handles_any_split_bel_and_overflow() {
        let stream = b"t1231AA\r\x07garbage\rT000000010\r\rz\r";
        let want = vec![
            Event::Frame(hex("012301aa")),
            Event::Refused,
            Event::Malformed(LineError::Unknown("garbage".into())),
            Event::Frame(hex("8000000100")),
            Event::Accepted,
            Event::Sent,
        ];
        for split in 0..=stream.len() {
            let mut d = LineDecoder::new();
            let mut got = Vec::new();
            d.push(&stream[..split], &mut |e| got.push(e));
            d.push(&stream[split..], &mut |e| got.push(e));
            assert_eq!(got, want, "split at {split}");
        }
        let mut d = LineDecoder::new();
        let mut got = Vec::new();
        d.push(b"t12\x07", &mut |e| got.push(e));
        assert!(matches!(got[0], Event::Malformed(LineError::Short(_))));
        assert_eq!(got[1], Event::Refused);

        // A line without end: bounded memory, one report, then back in step.
        let mut d = LineDecoder::new();
        let mut got = Vec::new();
        d.push(&vec![b'7'; 100_000], &mut |e| got.push(e));
        assert!(got.is_empty());
        assert!(d.line.len() <= MAX_LINE);
        d.push(b"\rt1230\r", &mut |e| got.push(e));
        assert_eq!(
            got,
            vec![
                Event::Malformed(LineError::TooLong),
                Event::Frame(hex("012300"))
            ]
        );
    }

    #[test]
    fn random_streams_never_panic_and_frames_are_valid_chunks() {
        let alphabet = b"tTrRdDbBzZ0123456789ABCDEFabcdefXx \r\r\r\x07\n\xff";
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut decoder = LineDecoder::new();
        let mut frames = 0;
        for _ in 0..20 {
            let bytes: Vec<u8> = (0..50_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect();
            decoder.push(&bytes, &mut |e| {
                if let Event::Frame(chunk) = e {
                    frames += 1;
                    assert!(CanFrame::decode(&chunk).is_ok(), "{chunk:02x?}");
                }
            });
            assert!(decoder.line.len() <= MAX_LINE);
        }
        // Short valid lines do turn up in noise (`t1230`, `r7FF8`, …).
        assert!(frames > 0);
    }

    #[test]
    fn chunks_become_transmit_commands() {
        let data: Vec<u8> = (0..64).collect();
        let s = |id| CanId::standard(id).unwrap();
        let x = |id| CanId::extended(id).unwrap();
        let cases: Vec<(CanFrame<'_>, bool, &str)> = vec![
            (
                CanFrame::data(s(0x123), &[0xDE, 0xAD]).unwrap(),
                false,
                "t1232DEAD\r",
            ),
            (CanFrame::data(s(0x7FF), &[]).unwrap(), false, "t7FF0\r"),
            (
                CanFrame::data(x(0x18FF_0001), &[1]).unwrap(),
                false,
                "T18FF0001101\r",
            ),
            (CanFrame::remote(s(0x100), 8).unwrap(), false, "r1008\r"),
            (CanFrame::remote(x(0x5), 0).unwrap(), false, "R000000050\r"),
            (
                CanFrame::fd(s(0x42), &data[..12]).unwrap(),
                false,
                "d0429000102030405060708090A0B\r",
            ),
            (
                CanFrame::fd(x(0x42), &data[..2]).unwrap(),
                true,
                "B0000004220001\r",
            ),
        ];
        for (frame, brs, want) in cases {
            let cmd = encode_command(&frame, brs);
            assert_eq!(String::from_utf8_lossy(&cmd), want);
            // What we send, an adapter echoing it as a received frame gives back.
            let line = &cmd[..cmd.len() - 1];
            assert_eq!(parse_line(line), Event::Frame(frame.to_bytes()), "{want}");
        }
        let cmd = encode_command(&CanFrame::fd(s(1), &data).unwrap(), true);
        assert_eq!(cmd.len(), 1 + 3 + 1 + 128 + 1);
        assert_eq!(&cmd[..5], b"b001F");
    }

    #[test]
    fn bitrates_map_to_commands_or_clear_errors() {
        assert_eq!(bitrate_command(10_000).unwrap(), "S0");
        assert_eq!(bitrate_command(500_000).unwrap(), "S6");
        assert_eq!(bitrate_command(1_000_000).unwrap(), "S8");
        let e = bitrate_command(83_333).unwrap_err();
        assert!(matches!(e, DeviceError::Fatal(_)));
        assert!(e.to_string().contains("83.333 kbit/s"), "{e}");
        assert!(e.to_string().contains("pick 10, 20, 50"), "{e}");
        assert_eq!(data_bitrate_command(2_000_000).unwrap(), "Y2");
        assert!(data_bitrate_command(3_000_000).is_err());
        let e = SlcanDriver::new(CanSettings {
            interface: "/dev/ttyACM0".into(),
            bitrate: 33_333,
            ..CanSettings::default()
        })
        .err()
        .unwrap();
        assert!(e.to_string().contains("cannot run at"), "{e}");
    }

    #[test]
    fn describe_names_port_rate_and_modes() {
        let d = SlcanDriver::new(CanSettings {
            interface: "/dev/ttyACM0".into(),
            fd: true,
            data_bitrate: Some(2_000_000),
            listen_only: true,
            ..CanSettings::default()
        })
        .unwrap();
        assert_eq!(
            d.describe(),
            "SLCAN /dev/ttyACM0 @ 500 kbit/s + CAN FD 2 Mbit/s (listen-only)"
        );
    }
}
