//! Modbus sources: a TCP server or an RTU device on a serial line, polled register group by
//! register group at a fixed interval.
//!
//! This module owns the Modbus driver (settings validation, connecting, the poll loop,
//! writes) and, in [`map`], the register-map import that turns a CSV list of registers into
//! register groups and datasets.
//!
//! # Chunk layout
//!
//! Every poll cycle yields exactly one chunk: one line of text with every polled value, in
//! group order and, within a group, in address order, separated by commas and ended by
//! `\n`:
//!
//! ```text
//! 17,3,6,9,1000,1001,1,0,0,1\n
//! ```
//!
//! Registers (holding, input) are unsigned decimals 0–65535; coils and discrete inputs are
//! `0` or `1`. The value of group `g` at `start + k` lands in parser slot
//! `1 + (sum of the counts of the groups before g) + k` (see [`slot_of`]), so the built-in
//! delimited parser with an end-of-line frame reads it with no configuration; [`source`]
//! builds exactly that source. Text rather than a binary layout because it is what the
//! console shows, what a capture replays and what a user can read; even 2000 values make a
//! line of about 12 KB.
//!
//! Large groups are split into several requests (2000 coils or discrete inputs, 125
//! registers each, the protocol's limits) but still form one line.
//!
//! # Errors
//!
//! Opening connects and runs the first poll, so a register map the device rejects
//! (illegal address, unsupported function) fails the source with an error naming the
//! group instead of reconnecting forever. Later, a device that stops answering or closes
//! the connection fails the read with a transient error ("Modbus server 127.0.0.1:5020 is
//! not answering …") and the runner reconnects with backoff.
//!
//! # Writes
//!
//! [`Link::write`] takes small text commands, one per line:
//!
//! ```text
//! holding 10 = 1234        write one holding register (function 06)
//! holding 10 = 1, 2, -3    write several from address 10 on (function 16)
//! coil 3 = on              write one coil: on/off, 1/0, true/false (function 05)
//! coil 3 = 1, 0, 1         write several coils (function 15)
//! ```
//!
//! Register values are 0–65535, or −32768–−1 stored as two's complement; `0x` hex is
//! accepted. Input registers and discrete inputs are read-only in Modbus.
//!
//! # Concurrency
//!
//! A poll is several request/reply round trips, and dropping one halfway would leave a
//! reply in flight that the next request would mistake for its own. So the connection
//! belongs to a task of its own that polls and writes; [`Link::read`] only receives finished
//! lines from a channel, which keeps it cancel-safe.

pub mod map;

use std::fmt::Write as _;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sextant_telemetry::project::{
    FlowControl, ModbusSettings, Parity, RegisterGroup, RegisterKind, SerialSettings, StopBits,
};
use sextant_telemetry::Timestamp;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_modbus::client::{Context, Reader as _, Writer as _};
use tokio_modbus::{ExceptionCode, Slave};

use crate::source::{DeviceError, Driver, Link};

pub use map::{import_register_map, project, source, RegisterMapError};

/// Slave (unit) ids a device may have; 0 is broadcast, 248–255 are reserved.
pub const SLAVE_IDS: RangeInclusive<u8> = 1..=247;
/// Poll intervals we accept, in milliseconds.
pub const POLL_INTERVAL_MS: RangeInclusive<u32> = 10..=60_000;
/// Most coils or discrete inputs one read request may ask for.
pub const MAX_BITS_PER_READ: u16 = 2000;
/// Most registers one read request may ask for.
pub const MAX_REGISTERS_PER_READ: u16 = 125;
/// Most values one poll cycle may hold, which bounds the size of a chunk.
pub const MAX_VALUES_PER_POLL: usize = 65_536;
/// Most registers one write-multiple request may carry (function 16).
const MAX_REGISTERS_PER_WRITE: usize = 123;
/// Most coils one write-multiple request may carry (function 15).
const MAX_BITS_PER_WRITE: usize = 1968;

/// A Modbus setting that cannot work; retrying would not help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "Modbus slave id {0} is out of range: use 1 to 247 (0 is broadcast, which never answers a read)"
    )]
    SlaveId(u8),
    #[error("poll interval of {0} ms is out of range: use 10 to 60000 ms")]
    PollInterval(u32),
    #[error("there are no register groups to poll: add at least one {{kind, start, count}} group")]
    NoGroups,
    #[error("register group {group} ({kind} {start}) has a count of 0: set a count of at least 1")]
    EmptyGroup {
        group: usize,
        kind: &'static str,
        start: u16,
    },
    #[error(
        "register group {group} ({kind} {start}, count {count}) runs past address 65535: lower its start or count"
    )]
    PastEnd {
        group: usize,
        kind: &'static str,
        start: u16,
        count: u16,
    },
    #[error(
        "the register groups hold {0} values in all, more than the {MAX_VALUES_PER_POLL} one poll may read: poll fewer registers"
    )]
    TooManyValues(usize),
    #[error("no Modbus TCP host is set: enter the server's host name or IP address")]
    NoHost,
    #[error("Modbus TCP port 0 is not valid: use the server's port (502 is the standard one)")]
    NoPort,
    #[error("Modbus RTU needs serial settings: pick a serial port and baud rate")]
    NoSerial,
    #[error("Modbus RTU: {0}")]
    Serial(String),
}

impl From<SettingsError> for DeviceError {
    fn from(e: SettingsError) -> Self {
        DeviceError::Fatal(e.to_string())
    }
}

/// The short name of a register kind, as used in settings and register maps.
pub fn kind_name(kind: RegisterKind) -> &'static str {
    match kind {
        RegisterKind::Coil => "coil",
        RegisterKind::Discrete => "discrete",
        RegisterKind::Holding => "holding",
        RegisterKind::Input => "input",
    }
}

fn kind_plural(kind: RegisterKind) -> &'static str {
    match kind {
        RegisterKind::Coil => "coils",
        RegisterKind::Discrete => "discrete inputs",
        RegisterKind::Holding => "holding registers",
        RegisterKind::Input => "input registers",
    }
}

fn is_bits(kind: RegisterKind) -> bool {
    matches!(kind, RegisterKind::Coil | RegisterKind::Discrete)
}

/// Checks every setting the driver relies on; the first problem found is returned.
pub fn validate(settings: &ModbusSettings) -> Result<(), SettingsError> {
    if !SLAVE_IDS.contains(&settings.slave_id) {
        return Err(SettingsError::SlaveId(settings.slave_id));
    }
    if !POLL_INTERVAL_MS.contains(&settings.poll_interval_ms) {
        return Err(SettingsError::PollInterval(settings.poll_interval_ms));
    }
    if settings.groups.is_empty() {
        return Err(SettingsError::NoGroups);
    }
    let mut total = 0usize;
    for (i, g) in settings.groups.iter().enumerate() {
        let (group, kind, start, count) = (i + 1, kind_name(g.kind), g.start, g.count);
        if count == 0 {
            return Err(SettingsError::EmptyGroup { group, kind, start });
        }
        if u32::from(start) + u32::from(count) > 65_536 {
            return Err(SettingsError::PastEnd {
                group,
                kind,
                start,
                count,
            });
        }
        total += usize::from(count);
    }
    if total > MAX_VALUES_PER_POLL {
        return Err(SettingsError::TooManyValues(total));
    }
    if settings.rtu {
        let serial = settings.serial.as_ref().ok_or(SettingsError::NoSerial)?;
        if serial.port.is_empty() {
            return Err(SettingsError::Serial("no serial port is selected".into()));
        }
        if serial.baud == 0 || serial.baud > crate::serial::MAX_BAUD {
            return Err(SettingsError::Serial(format!(
                "baud rate {} is out of range (1 to {})",
                serial.baud,
                crate::serial::MAX_BAUD
            )));
        }
        if !(5..=8).contains(&serial.data_bits) {
            return Err(SettingsError::Serial(format!(
                "{} data bits is not possible; use 5, 6, 7 or 8",
                serial.data_bits
            )));
        }
    } else {
        if settings.host.trim().is_empty() {
            return Err(SettingsError::NoHost);
        }
        if settings.port == 0 {
            return Err(SettingsError::NoPort);
        }
    }
    Ok(())
}

/// The parser slot (1-based) that carries `kind` at `address`, given the poll's groups; the
/// first group that covers the address wins. `None` when no group covers it.
pub fn slot_of(groups: &[RegisterGroup], kind: RegisterKind, address: u16) -> Option<u32> {
    let mut before = 0u32;
    for g in groups {
        let end = u32::from(g.start) + u32::from(g.count);
        if g.kind == kind && (u32::from(g.start)..end).contains(&u32::from(address)) {
            return Some(before + u32::from(address - g.start) + 1);
        }
        before += u32::from(g.count);
    }
    None
}

/// One read request of a poll cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReadRequest {
    /// Index into the settings' groups, for messages.
    group: usize,
    kind: RegisterKind,
    start: u16,
    count: u16,
}

/// Splits the groups into requests the protocol allows.
fn plan(groups: &[RegisterGroup]) -> Vec<ReadRequest> {
    let mut requests = Vec::new();
    for (group, g) in groups.iter().enumerate() {
        let limit = if is_bits(g.kind) {
            MAX_BITS_PER_READ
        } else {
            MAX_REGISTERS_PER_READ
        };
        let mut offset = 0u16;
        while offset < g.count {
            let count = limit.min(g.count - offset);
            requests.push(ReadRequest {
                group,
                kind: g.kind,
                // Validation keeps start + count within 65536, so this cannot wrap.
                start: g.start.wrapping_add(offset),
                count,
            });
            offset += count;
        }
    }
    requests
}

/// Polls a Modbus device; see the module documentation for the chunk layout.
pub struct ModbusDriver {
    settings: ModbusSettings,
    requests: Arc<[ReadRequest]>,
    values: usize,
    /// How long to wait for each reply before calling the device gone.
    pub response_timeout: Duration,
    /// How long to wait for a TCP connection to be accepted.
    pub connect_timeout: Duration,
}

impl ModbusDriver {
    pub fn new(settings: ModbusSettings) -> Result<Self, SettingsError> {
        validate(&settings)?;
        let requests: Arc<[ReadRequest]> = plan(&settings.groups).into();
        let values = settings.groups.iter().map(|g| usize::from(g.count)).sum();
        Ok(ModbusDriver {
            settings,
            requests,
            values,
            response_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(3),
        })
    }

    /// How many read requests one poll cycle sends.
    pub fn requests_per_poll(&self) -> usize {
        self.requests.len()
    }

    /// The device as messages name it.
    fn target(&self) -> String {
        match &self.settings.serial {
            Some(serial) if self.settings.rtu => format!(
                "Modbus device {} on {}",
                self.settings.slave_id, serial.port
            ),
            _ => format!(
                "Modbus server {}:{}",
                self.settings.host, self.settings.port
            ),
        }
    }

    async fn connect(&self, target: &str) -> Result<Context, DeviceError> {
        let slave = Slave(self.settings.slave_id);
        if self.settings.rtu {
            let serial = self
                .settings
                .serial
                .as_ref()
                .ok_or(SettingsError::NoSerial)?;
            let port = open_serial(serial)?;
            return Ok(tokio_modbus::client::rtu::attach_slave(port, slave));
        }
        let (host, port) = (self.settings.host.trim(), self.settings.port);
        let stream =
            match tokio::time::timeout(self.connect_timeout, TcpStream::connect((host, port)))
                .await
            {
                Err(_) => {
                    return Err(DeviceError::transient(format!(
                        "{target} is not answering: no connection within {:.1} s",
                        self.connect_timeout.as_secs_f64()
                    )))
                }
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    return Err(DeviceError::transient(format!(
                        "{target} is not answering: connection refused (is the server running and listening on port {port}?)"
                    )))
                }
                Ok(Err(e)) => {
                    return Err(DeviceError::transient(format!(
                        "{target} is not answering: {e}"
                    )))
                }
                Ok(Ok(stream)) => stream,
            };
        // Requests are small and latency-bound: never let Nagle hold one back.
        let _ = stream.set_nodelay(true);
        Ok(tokio_modbus::client::tcp::attach_slave(stream, slave))
    }
}

impl Driver for ModbusDriver {
    type Link = ModbusLink;

    fn describe(&self) -> String {
        match &self.settings.serial {
            Some(serial) if self.settings.rtu => format!(
                "modbus rtu {} @ {} slave {}",
                serial.port, serial.baud, self.settings.slave_id
            ),
            _ => format!(
                "modbus tcp {}:{} slave {}",
                self.settings.host, self.settings.port, self.settings.slave_id
            ),
        }
    }

    async fn open(&mut self) -> Result<ModbusLink, DeviceError> {
        let target: Arc<str> = self.target().into();
        let ctx = self.connect(&target).await?;
        let mut poller = Poller {
            ctx,
            requests: self.requests.clone(),
            groups: self.settings.groups.clone().into(),
            values: self.values,
            slave: self.settings.slave_id,
            rtu: self.settings.rtu,
            target: target.clone(),
            timeout: self.response_timeout,
        };
        // The first poll runs here, so a register map the device rejects fails the source
        // (a fatal error) instead of looking like a connection to retry forever.
        let first = poller.poll().await?;
        let (chunk_tx, chunk_rx) = mpsc::channel(4);
        let (command_tx, command_rx) = mpsc::channel(16);
        let interval = Duration::from_millis(u64::from(self.settings.poll_interval_ms));
        let task = tokio::spawn(poll_loop(poller, first, interval, chunk_tx, command_rx));
        Ok(ModbusLink {
            chunks: chunk_rx,
            commands: command_tx,
            task,
            target,
        })
    }
}

/// An open Modbus connection; the polling happens on a task that this link owns.
pub struct ModbusLink {
    chunks: mpsc::Receiver<Result<Bytes, DeviceError>>,
    commands: mpsc::Sender<WriteCommand>,
    task: JoinHandle<()>,
    target: Arc<str>,
}

impl Drop for ModbusLink {
    fn drop(&mut self) {
        // Ends the poll task, which drops the connection with it.
        self.task.abort();
    }
}

impl Link for ModbusLink {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        match self.chunks.recv().await {
            Some(Ok(line)) => Ok(Some((line, None))),
            Some(Err(e)) => Err(e),
            None => Err(DeviceError::transient(format!(
                "{}: the poller stopped",
                self.target
            ))),
        }
    }

    /// Runs the text commands in `data`; see the module documentation for their syntax.
    /// A command that cannot be understood or that the device refuses fails the write
    /// without dropping the connection.
    async fn write(&mut self, data: Bytes) -> Result<(), DeviceError> {
        let ops = parse_writes(&data)?;
        let (reply_tx, reply_rx) = oneshot::channel();
        self.commands
            .send(WriteCommand {
                ops,
                reply: reply_tx,
            })
            .await
            .map_err(|_| DeviceError::transient(format!("{}: the poller stopped", self.target)))?;
        reply_rx.await.unwrap_or_else(|_| {
            Err(DeviceError::transient(format!(
                "{}: the connection closed before the write completed",
                self.target
            )))
        })
    }
}

struct WriteCommand {
    ops: Vec<WriteOp>,
    reply: oneshot::Sender<Result<(), DeviceError>>,
}

/// One parsed write command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    Registers { start: u16, values: Vec<u16> },
    Coils { start: u16, values: Vec<bool> },
}

/// Parses write commands, one per line (see the module documentation).
pub fn parse_writes(data: &[u8]) -> Result<Vec<WriteOp>, DeviceError> {
    let text = std::str::from_utf8(data).map_err(|_| {
        DeviceError::fatal("a Modbus write must be text such as `holding 10 = 1234`")
    })?;
    let ops: Vec<WriteOp> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(parse_write)
        .collect::<Result<_, _>>()?;
    if ops.is_empty() {
        return Err(DeviceError::fatal(
            "nothing to write: send a command such as `holding 10 = 1234` or `coil 3 = on`",
        ));
    }
    Ok(ops)
}

fn parse_write(line: &str) -> Result<WriteOp, DeviceError> {
    let usage = |why: &str| {
        DeviceError::fatal(format!(
            "cannot write `{line}`: {why}; write `holding ADDRESS = VALUE[, VALUE…]` or `coil ADDRESS = on|off[, …]`"
        ))
    };
    let (target, values) = line
        .split_once('=')
        .ok_or_else(|| usage("there is no `=`"))?;
    let mut words = target.split_whitespace();
    let (Some(kind), Some(address), None) = (words.next(), words.next(), words.next()) else {
        return Err(usage("expected a register kind and an address before `=`"));
    };
    let start = parse_u16(address).ok_or_else(|| usage("the address must be 0 to 65535"))?;
    let fields: Vec<&str> = values.split(',').map(str::trim).collect();
    if fields.iter().any(|f| f.is_empty()) {
        return Err(usage("a value is missing"));
    }
    let fits = |n: usize, max: usize| {
        if n > max {
            Err(usage(&format!("at most {max} values fit in one request")))
        } else if usize::from(start) + n > 65_536 {
            Err(usage("the values run past address 65535"))
        } else {
            Ok(())
        }
    };
    match kind.to_ascii_lowercase().as_str() {
        "holding" | "hr" => {
            let values = fields
                .iter()
                .map(|f| parse_register_value(f))
                .collect::<Option<Vec<u16>>>()
                .ok_or_else(|| usage("register values must be 0 to 65535 or -32768 to -1"))?;
            fits(values.len(), MAX_REGISTERS_PER_WRITE)?;
            Ok(WriteOp::Registers { start, values })
        }
        "coil" | "co" => {
            let values = fields
                .iter()
                .map(|f| parse_bool(f))
                .collect::<Option<Vec<bool>>>()
                .ok_or_else(|| usage("coil values must be on/off, 1/0 or true/false"))?;
            fits(values.len(), MAX_BITS_PER_WRITE)?;
            Ok(WriteOp::Coils { start, values })
        }
        "input" | "ir" | "discrete" | "di" => Err(usage(
            "input registers and discrete inputs are read-only in Modbus",
        )),
        _ => Err(usage(&format!("unknown register kind `{kind}`"))),
    }
}

pub(crate) fn parse_u16(s: &str) -> Option<u16> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u16::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_register_value(s: &str) -> Option<u16> {
    if let Some(v) = parse_u16(s) {
        return Some(v);
    }
    // Negative values are stored as two's complement, the usual int16 convention.
    s.parse::<i16>().ok().filter(|v| *v < 0).map(|v| v as u16)
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "1" | "true" => Some(true),
        "off" | "0" | "false" => Some(false),
        _ => None,
    }
}

/// Owns the Modbus connection and runs every request on it.
struct Poller {
    ctx: Context,
    requests: Arc<[ReadRequest]>,
    groups: Arc<[RegisterGroup]>,
    values: usize,
    slave: u8,
    rtu: bool,
    target: Arc<str>,
    timeout: Duration,
}

enum Reply {
    Bits(Vec<bool>),
    Words(Vec<u16>),
}

impl Poller {
    /// Reads every group once and renders the line.
    async fn poll(&mut self) -> Result<Bytes, DeviceError> {
        // Up to five digits and a separator per value.
        let mut line = String::with_capacity(self.values * 6 + 1);
        let requests = self.requests.clone();
        for &req in requests.iter() {
            let reply = self.read(req).await?;
            let got = match &reply {
                Reply::Bits(b) => b.len(),
                Reply::Words(w) => w.len(),
            };
            if got < usize::from(req.count) {
                return Err(DeviceError::transient(format!(
                    "{} sent {got} values for {} {}-{} where {} were asked for",
                    self.target,
                    kind_plural(req.kind),
                    req.start,
                    u32::from(req.start) + u32::from(req.count) - 1,
                    req.count
                )));
            }
            let count = usize::from(req.count);
            match reply {
                Reply::Bits(bits) => {
                    for b in &bits[..count] {
                        line.push(if *b { '1' } else { '0' });
                        line.push(',');
                    }
                }
                Reply::Words(words) => {
                    for w in &words[..count] {
                        let _ = write!(line, "{w},");
                    }
                }
            }
        }
        line.pop();
        line.push('\n');
        Ok(Bytes::from(line))
    }

    async fn read(&mut self, req: ReadRequest) -> Result<Reply, DeviceError> {
        let ctx = &mut self.ctx;
        let call = async {
            match req.kind {
                RegisterKind::Coil => ctx
                    .read_coils(req.start, req.count)
                    .await
                    .map(|r| r.map(Reply::Bits)),
                RegisterKind::Discrete => ctx
                    .read_discrete_inputs(req.start, req.count)
                    .await
                    .map(|r| r.map(Reply::Bits)),
                RegisterKind::Holding => ctx
                    .read_holding_registers(req.start, req.count)
                    .await
                    .map(|r| r.map(Reply::Words)),
                RegisterKind::Input => ctx
                    .read_input_registers(req.start, req.count)
                    .await
                    .map(|r| r.map(Reply::Words)),
            }
        };
        let what = || {
            format!(
                "reading {} {}-{}",
                kind_plural(req.kind),
                req.start,
                u32::from(req.start) + u32::from(req.count) - 1
            )
        };
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => Err(self.no_reply(&what())),
            Ok(Err(e)) => Err(self.failed(&what(), e)),
            Ok(Ok(Err(code))) => Err(self.read_exception(req, code)),
            Ok(Ok(Ok(reply))) => Ok(reply),
        }
    }

    async fn write(&mut self, op: &WriteOp) -> Result<(), DeviceError> {
        let ctx = &mut self.ctx;
        let (what, call) = match op {
            WriteOp::Registers { start, values } => (
                format!("writing holding register {start}"),
                match values.as_slice() {
                    [one] => ctx.write_single_register(*start, *one).await,
                    many => ctx.write_multiple_registers(*start, many).await,
                },
            ),
            WriteOp::Coils { start, values } => (
                format!("writing coil {start}"),
                match values.as_slice() {
                    [one] => ctx.write_single_coil(*start, *one).await,
                    many => ctx.write_multiple_coils(*start, many).await,
                },
            ),
        };
        match call {
            Err(e) => Err(self.failed(&what, e)),
            Ok(Err(code)) => Err(DeviceError::fatal(format!(
                "{} refused {what} ({}): {}",
                self.target,
                code.to_string().to_lowercase(),
                match code {
                    ExceptionCode::IllegalDataAddress =>
                        "the register does not exist or is read-only",
                    ExceptionCode::IllegalFunction => "the device does not support this write",
                    ExceptionCode::IllegalDataValue => "the device does not accept this value",
                    _ => "try again, or check the device",
                }
            ))),
            Ok(Ok(())) => Ok(()),
        }
    }

    /// Writes with a timeout; a device that stops answering drops the connection.
    async fn write_all(&mut self, ops: &[WriteOp]) -> Result<(), DeviceError> {
        for op in ops {
            match tokio::time::timeout(self.timeout, self.write(op)).await {
                Err(_) => return Err(self.no_reply("a write")),
                Ok(r) => r?,
            }
        }
        Ok(())
    }

    fn no_reply(&self, what: &str) -> DeviceError {
        DeviceError::transient(format!(
            "{} is not answering: no reply within {:.1} s to {what}{}",
            self.target,
            self.timeout.as_secs_f64(),
            if self.rtu {
                format!(" (check the wiring, baud rate and slave id {})", self.slave)
            } else {
                String::new()
            }
        ))
    }

    fn failed(&self, what: &str, e: tokio_modbus::Error) -> DeviceError {
        match e {
            tokio_modbus::Error::Transport(e) => DeviceError::transient(format!(
                "{} is not answering: {} while {what}",
                self.target,
                connection_lost(&e)
            )),
            tokio_modbus::Error::Protocol(e) => DeviceError::transient(format!(
                "{} sent a reply that does not match the request while {what} ({e}); reconnecting",
                self.target
            )),
        }
    }

    fn read_exception(&self, req: ReadRequest, code: ExceptionCode) -> DeviceError {
        let group = self.groups.get(req.group).map_or_else(String::new, |g| {
            format!(
                "register group {} ({} {}-{})",
                req.group + 1,
                kind_name(g.kind),
                g.start,
                u32::from(g.start) + u32::from(g.count) - 1
            )
        });
        let asked = format!(
            "{} {}-{}",
            kind_plural(req.kind),
            req.start,
            u32::from(req.start) + u32::from(req.count) - 1
        );
        let target = &self.target;
        match code {
            ExceptionCode::IllegalDataAddress => DeviceError::fatal(format!(
                "{group}: {target} has no {asked} (illegal data address); fix the group's start and count, or the register map"
            )),
            ExceptionCode::IllegalFunction => DeviceError::fatal(format!(
                "{group}: {target} cannot read {} (illegal function); use a register kind the device supports",
                kind_plural(req.kind)
            )),
            ExceptionCode::IllegalDataValue => DeviceError::fatal(format!(
                "{group}: {target} refused to read {asked} in one request (illegal data value); split the group into smaller ones"
            )),
            ExceptionCode::GatewayPathUnavailable | ExceptionCode::GatewayTargetDevice => {
                DeviceError::transient(format!(
                    "{group}: the gateway {target} got no answer from slave {} ({}); check the slave id and the device behind the gateway",
                    self.slave,
                    code.to_string().to_lowercase()
                ))
            }
            other => DeviceError::transient(format!(
                "{group}: {target} answered reading {asked} with an exception ({}); retrying",
                other.to_string().to_lowercase()
            )),
        }
    }
}

/// Says how a connection failed. tokio-modbus reports a connection closed by the peer as
/// the stale OS error 0 ("Success"), which would only confuse a reader.
fn connection_lost(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        _ if e.raw_os_error() == Some(0) => "the connection was closed".into(),
        ErrorKind::UnexpectedEof | ErrorKind::BrokenPipe => "the connection was closed".into(),
        ErrorKind::ConnectionReset => "the connection was reset".into(),
        _ => format!("the connection failed ({e})"),
    }
}

/// Polls on schedule and serves writes between polls, until the link is dropped or the
/// device fails.
///
/// A finished line waits in `pending` until the channel has room, and no new poll starts
/// meanwhile: a slow reader delays polls instead of losing lines, and writes are still
/// served while waiting, so a runner that is busy writing can never deadlock with us.
async fn poll_loop(
    mut poller: Poller,
    first: Bytes,
    interval: Duration,
    chunks: mpsc::Sender<Result<Bytes, DeviceError>>,
    mut commands: mpsc::Receiver<WriteCommand>,
) {
    let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
    // After a slow cycle, poll at the interval again instead of catching up in a burst.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut pending: Option<Result<Bytes, DeviceError>> = Some(Ok(first));
    loop {
        tokio::select! {
            biased;
            _ = chunks.closed() => return,
            command = commands.recv() => {
                let Some(WriteCommand { ops, reply }) = command else { return };
                let result = poller.write_all(&ops).await;
                let lost = matches!(result, Err(DeviceError::Transient(_)));
                let _ = reply.send(result);
                if lost {
                    // The runner drops the link on a transient write error; stop polling.
                    return;
                }
            }
            permit = chunks.reserve(), if pending.is_some() => {
                let Ok(permit) = permit else { return };
                if let Some(item) = pending.take() {
                    let failed = item.is_err();
                    permit.send(item);
                    if failed {
                        return;
                    }
                }
            }
            _ = ticker.tick(), if pending.is_none() => {
                pending = Some(poller.poll().await);
            }
        }
    }
}

fn open_serial(s: &SerialSettings) -> Result<tokio_serial::SerialStream, DeviceError> {
    use tokio_serial::{DataBits, SerialPortBuilderExt as _};
    let builder =
        tokio_serial::new(&s.port, s.baud)
            .data_bits(match s.data_bits {
                5 => DataBits::Five,
                6 => DataBits::Six,
                7 => DataBits::Seven,
                _ => DataBits::Eight,
            })
            .parity(match s.parity {
                Parity::None => tokio_serial::Parity::None,
                Parity::Even => tokio_serial::Parity::Even,
                Parity::Odd => tokio_serial::Parity::Odd,
                Parity::Mark | Parity::Space => return Err(DeviceError::fatal(
                    "Modbus RTU uses none, even or odd parity; mark and space are not supported",
                )),
            })
            .stop_bits(match s.stop_bits {
                StopBits::One => tokio_serial::StopBits::One,
                StopBits::Two => tokio_serial::StopBits::Two,
                StopBits::OnePointFive => {
                    return Err(DeviceError::fatal(
                        "Modbus RTU uses 1 or 2 stop bits; 1.5 is not supported",
                    ))
                }
            })
            .flow_control(match s.flow_control {
                FlowControl::None => tokio_serial::FlowControl::None,
                FlowControl::RtsCts => tokio_serial::FlowControl::Hardware,
                FlowControl::XonXoff => tokio_serial::FlowControl::Software,
            });
    builder.open_native_async().map_err(|e| {
        let port = &s.port;
        match e.kind() {
            tokio_serial::ErrorKind::NoDevice
            | tokio_serial::ErrorKind::Io(std::io::ErrorKind::NotFound) => {
                DeviceError::transient(format!("{port} is not present (unplugged?)"))
            }
            tokio_serial::ErrorKind::Io(std::io::ErrorKind::PermissionDenied) => {
                DeviceError::fatal(format!(
                    "permission denied opening {port}: add your user to the `dialout` group (then log in again)"
                ))
            }
            tokio_serial::ErrorKind::InvalidInput => DeviceError::fatal(format!("{port}: {e}")),
            _ => DeviceError::transient(format!("could not open {port}: {e}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(kind: RegisterKind, start: u16, count: u16) -> RegisterGroup {
        RegisterGroup { kind, start, count }
    }

    #[test]
    fn large_groups_split_at_protocol_limits() {
        let reqs = plan(&[
            group(RegisterKind::Holding, 10, 300),
            group(RegisterKind::Coil, 0, 2001),
            group(RegisterKind::Input, 65_535, 1),
        ]);
        let shape: Vec<(usize, u16, u16)> =
            reqs.iter().map(|r| (r.group, r.start, r.count)).collect();
        assert_eq!(
            shape,
            [
                (0, 10, 125),
                (0, 135, 125),
                (0, 260, 50),
                (1, 0, 2000),
                (1, 2000, 1),
                (2, 65_535, 1)
            ]
        );
    }

    #[test]
    fn slots_follow_group_order() {
        let groups = [
            group(RegisterKind::Holding, 100, 3),
            group(RegisterKind::Coil, 0, 8),
            group(RegisterKind::Holding, 200, 2),
        ];
        assert_eq!(slot_of(&groups, RegisterKind::Holding, 100), Some(1));
        assert_eq!(slot_of(&groups, RegisterKind::Holding, 102), Some(3));
        assert_eq!(slot_of(&groups, RegisterKind::Coil, 7), Some(11));
        assert_eq!(slot_of(&groups, RegisterKind::Holding, 201), Some(13));
        assert_eq!(slot_of(&groups, RegisterKind::Holding, 103), None);
        assert_eq!(slot_of(&groups, RegisterKind::Input, 100), None);
    }

    #[test]
    fn write_commands_parse() {
        assert_eq!(
            parse_writes(b"holding 10 = 1234\n").unwrap(),
            [WriteOp::Registers {
                start: 10,
                values: vec![1234]
            }]
        );
        assert_eq!(
            parse_writes(b"HR 0x10=1, -1 ,0xffff\r\ncoil 3 = on, 0, true\n\n").unwrap(),
            [
                WriteOp::Registers {
                    start: 16,
                    values: vec![1, 65_535, 65_535]
                },
                WriteOp::Coils {
                    start: 3,
                    values: vec![true, false, true]
                }
            ]
        );
        for (bad, why) in [
            ("holding 10 1234", "no `=`"),
            ("holding = 5", "kind and an address"),
            ("holding 70000 = 5", "0 to 65535"),
            ("holding 1 = 65536", "0 to 65535"),
            ("holding 1 = -32769", "0 to 65535"),
            ("holding 1 = 1,,2", "missing"),
            ("coil 1 = maybe", "on/off"),
            ("input 1 = 5", "read-only"),
            ("relay 1 = 5", "unknown register kind `relay`"),
            ("holding 65535 = 1, 2", "past address 65535"),
        ] {
            let e = parse_writes(bad.as_bytes()).unwrap_err();
            assert!(matches!(e, DeviceError::Fatal(_)), "{bad}: {e:?}");
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
        assert!(parse_writes(b" \n").is_err());
        assert!(parse_writes(&[0xff, 0xfe]).is_err());
    }
}
