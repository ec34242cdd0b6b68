//! Linux SocketCAN interfaces (`can0`, `vcan0`, an `slcan0` made by slcand, …), classic
//! CAN and CAN FD.
//!
//! One raw socket with CAN FD frames enabled receives classic and FD frames alike, so
//! there is a single code path; whether FD frames may be *sent* is the project's `fd`
//! setting. Each frame becomes one chunk in the layout of [`crate::can`]; error frames
//! are not subscribed to and never become chunks.
//!
//! Bitrate, data bitrate, FD and listen-only belong to the interface, not to the socket.
//! When the interface has bit timing (real hardware) and it differs from the project's
//! settings, the driver reconfigures it over netlink (down, set, up). That needs
//! `CAP_NET_ADMIN`; without it the error names the `ip link` command that does the same.
//! Virtual interfaces (`vcan`) have no bit timing and are used as they are; listen-only
//! is then enforced by refusing writes.
//!
//! The socket is read on a dedicated thread with a short timeout, which hands chunks over
//! a channel and so keeps [`Link::read`] cancel-safe; writes share the socket.

use std::io;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ::socketcan::id::FdFlags;
use ::socketcan::nl::CanCtrlModes;
use ::socketcan::{
    CanAnyFrame, CanCtrlMode, CanDataFrame, CanFdFrame, CanFdSocket, CanInterface, CanRemoteFrame,
    EmbeddedFrame, ExtendedId, Id, Socket, StandardId,
};
use bytes::Bytes;
use sextant_telemetry::project::CanSettings;
use sextant_telemetry::Timestamp;
use tokio::sync::mpsc;

use crate::can::{check_settings, describe_bitrate, frame_to_send, CanFrame, CanId, FrameKind};
use crate::source::{DeviceError, Driver, Link};

const READ_TIMEOUT: Duration = Duration::from_millis(100);

/// Opens a SocketCAN interface with the project's CAN settings.
pub struct SocketCanDriver {
    settings: CanSettings,
}

impl SocketCanDriver {
    pub fn new(settings: CanSettings) -> Result<Self, DeviceError> {
        check_settings(&settings)?;
        Ok(SocketCanDriver { settings })
    }
}

impl Driver for SocketCanDriver {
    type Link = SocketCanLink;

    fn describe(&self) -> String {
        let s = &self.settings;
        let mut text = format!(
            "SocketCAN {} @ {}",
            s.interface,
            describe_bitrate(s.bitrate)
        );
        if s.fd {
            text.push_str(" + CAN FD");
            if let Some(rate) = s.data_bitrate {
                text.push(' ');
                text.push_str(&describe_bitrate(rate));
            }
        }
        if s.listen_only {
            text.push_str(" (listen-only)");
        }
        text
    }

    async fn open(&mut self) -> Result<SocketCanLink, DeviceError> {
        let settings = self.settings.clone();
        tokio::task::spawn_blocking(move || open_interface(settings))
            .await
            .map_err(|e| DeviceError::transient(format!("SocketCAN open task failed: {e}")))?
    }
}

/// What the kernel reports about an interface's configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct LinkState {
    /// `None` for interfaces without bit timing (virtual ones).
    bitrate: Option<u32>,
    data_bitrate: Option<u32>,
    fd: bool,
    listen_only: bool,
}

/// How the interface differs from the settings, in words; empty when nothing needs
/// changing (or nothing can be: a virtual interface).
fn differences(current: &LinkState, s: &CanSettings) -> Vec<String> {
    let Some(bitrate) = current.bitrate else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if bitrate != s.bitrate {
        out.push(if bitrate == 0 {
            "has no bitrate set".to_string()
        } else {
            format!("runs at {}", describe_bitrate(bitrate))
        });
    }
    if current.fd != s.fd {
        out.push(format!(
            "has CAN FD {}",
            if current.fd { "on" } else { "off" }
        ));
    }
    if let (true, Some(rate)) = (s.fd, s.data_bitrate) {
        if current.data_bitrate != Some(rate) {
            out.push(match current.data_bitrate {
                Some(now) if now > 0 => format!("has data bitrate {}", describe_bitrate(now)),
                _ => "has no data bitrate set".to_string(),
            });
        }
    }
    if current.listen_only != s.listen_only {
        out.push(format!(
            "has listen-only {}",
            if current.listen_only { "on" } else { "off" }
        ));
    }
    out
}

/// The `ip link` commands that configure the interface as the settings ask.
fn ip_commands(s: &CanSettings) -> String {
    let name = &s.interface;
    let mut set = format!("ip link set {name} type can bitrate {}", s.bitrate);
    if s.fd {
        if let Some(rate) = s.data_bitrate {
            set.push_str(&format!(" dbitrate {rate}"));
        }
        set.push_str(" fd on");
    } else {
        set.push_str(" fd off");
    }
    set.push_str(if s.listen_only {
        " listen-only on"
    } else {
        " listen-only off"
    });
    format!("ip link set {name} down && {set} && ip link set {name} up")
}

fn read_state(iface: &CanInterface) -> Result<LinkState, ::socketcan::Error> {
    let p = iface.can_params()?;
    let modes = p.ctrl_mode;
    Ok(LinkState {
        bitrate: p.bit_timing.map(|t| t.bitrate),
        data_bitrate: p.data_bit_timing.map(|t| t.bitrate),
        fd: modes.is_some_and(|m| m.has_mode(CanCtrlMode::Fd)),
        listen_only: modes.is_some_and(|m| m.has_mode(CanCtrlMode::ListenOnly)),
    })
}

fn reconfigure(iface: &CanInterface, s: &CanSettings) -> Result<(), ::socketcan::Error> {
    iface.bring_down()?;
    iface.set_bitrate(s.bitrate, None::<u32>)?;
    let mut modes = CanCtrlModes::default();
    modes.add(CanCtrlMode::Fd, s.fd);
    modes.add(CanCtrlMode::ListenOnly, s.listen_only);
    iface.set_ctrlmodes(modes)?;
    if let (true, Some(rate)) = (s.fd, s.data_bitrate) {
        iface.set_data_bitrate(rate, None::<u32>)?;
    }
    iface.bring_up()
}

/// Brings the interface to the settings where it has bit timing to set.
/// A socket binds to an interface that is down (a virtual one at least) and then receives
/// nothing: "connected" must mean the interface is up, or a reconnect reports success while
/// the bus is still down and the frames after it come back are lost.
fn ensure_up(iface: &CanInterface, name: &str) -> Result<(), DeviceError> {
    match iface.details() {
        Ok(details) if !details.is_up => Err(DeviceError::transient(format!(
            "{name} is down: bring it up with `ip link set {name} up`"
        ))),
        // Up, or the kernel would not say: opening the socket tells.
        _ => Ok(()),
    }
}

fn configure(s: &CanSettings) -> Result<(), DeviceError> {
    let name = &s.interface;
    let iface = match CanInterface::open(name) {
        Ok(iface) => iface,
        Err(::socketcan::Error::Io(e)) => return Err(socket_error(name, &e)),
        Err(e) => return Err(DeviceError::transient(format!("{name}: {e}"))),
    };
    let state = match read_state(&iface) {
        Ok(state) => state,
        Err(e) => {
            // Nothing to compare with; opening the socket says whether the bus works.
            tracing::debug!(interface = %name, error = %e, "cannot read CAN link parameters");
            return ensure_up(&iface, name);
        }
    };
    let diffs = differences(&state, s);
    if diffs.is_empty() {
        return ensure_up(&iface, name);
    }
    reconfigure(&iface, s).map_err(|e| {
        let permission = match &e {
            ::socketcan::Error::Io(io) => io.kind() == io::ErrorKind::PermissionDenied,
            ::socketcan::Error::Nl(nl) => nl.io_kind() == Some(io::ErrorKind::PermissionDenied),
            _ => false,
        };
        let why = if permission {
            "Sextant may not change it (that needs CAP_NET_ADMIN)".to_string()
        } else {
            format!("changing it failed ({e})")
        };
        DeviceError::fatal(format!(
            "{name} {}, but the project asks for {}; {why}. Configure it yourself: {}",
            diffs.join(", "),
            describe_bitrate(s.bitrate),
            ip_commands(s)
        ))
    })
}

/// Turns a socket error into a message that says what to do.
fn socket_error(name: &str, e: &io::Error) -> DeviceError {
    match e.raw_os_error() {
        Some(libc::EAFNOSUPPORT) => DeviceError::fatal(format!(
            "cannot open {name}: this system's kernel has no SocketCAN support (AF_CAN); \
             load it with `modprobe can_raw`, or use an SLCAN adapter over a serial port"
        )),
        Some(libc::ENODEV) | Some(libc::ENXIO) => DeviceError::transient(format!(
            "{name} does not exist or is not a CAN interface: plug the adapter in, or for a \
             virtual bus run `ip link add dev {name} type vcan && ip link set up {name}`"
        )),
        Some(libc::ENETDOWN) => DeviceError::transient(format!(
            "{name} is down: bring it up with `ip link set {name} up`"
        )),
        Some(libc::EPERM) | Some(libc::EACCES) => {
            DeviceError::fatal(format!("permission denied opening {name}: {e}"))
        }
        _ => DeviceError::transient(format!("{name}: {e}")),
    }
}

fn open_interface(settings: CanSettings) -> Result<SocketCanLink, DeviceError> {
    let name = settings.interface.clone();
    configure(&settings)?;
    let socket = CanFdSocket::open(&name).map_err(|e| socket_error(&name, &e))?;
    socket
        .set_read_timeout(READ_TIMEOUT)
        .map_err(|e| socket_error(&name, &e))?;
    let socket = Arc::new(socket);
    let (tx, rx) = mpsc::channel(1024);
    let reader = socket.clone();
    let thread_name = name.clone();
    thread::Builder::new()
        .name(format!("socketcan {name}"))
        .spawn(move || read_loop(&reader, &thread_name, tx))
        .map_err(|e| DeviceError::transient(format!("could not start the reader thread: {e}")))?;
    Ok(SocketCanLink {
        rx,
        socket,
        bit_rate_switch: settings.data_bitrate.is_some(),
        settings,
        name,
    })
}

fn hal_id(id: CanId) -> Option<Id> {
    Some(match id {
        CanId::Standard(raw) => Id::Standard(StandardId::new(raw)?),
        CanId::Extended(raw) => Id::Extended(ExtendedId::new(raw)?),
    })
}

fn our_id(id: Id) -> CanId {
    match id {
        Id::Standard(s) => CanId::Standard(s.as_raw()),
        Id::Extended(e) => CanId::Extended(e.as_raw()),
    }
}

/// A received frame as a chunk; `None` for error frames (not data).
fn chunk_of(frame: &CanAnyFrame) -> Option<Vec<u8>> {
    let built = match frame {
        CanAnyFrame::Normal(f) => CanFrame::data(our_id(f.id()), f.data()),
        // Classic DLC codes 9–15 still mean 8 bytes.
        CanAnyFrame::Remote(f) => CanFrame::remote(our_id(f.id()), f.dlc().min(8)),
        CanAnyFrame::Fd(f) => CanFrame::fd(our_id(f.id()), f.data()),
        CanAnyFrame::Error(_) => return None,
    };
    built.ok().map(|f| f.to_bytes())
}

/// A frame to send as the socket's frame type.
fn socket_frame_of(frame: &CanFrame<'_>, bit_rate_switch: bool) -> Option<CanAnyFrame> {
    let id = hal_id(frame.id())?;
    Some(match frame.kind() {
        FrameKind::Data => CanAnyFrame::Normal(CanDataFrame::new(id, frame.payload())?),
        FrameKind::Remote => CanAnyFrame::Remote(CanRemoteFrame::new_remote(id, frame.len())?),
        FrameKind::Fd => {
            let flags = if bit_rate_switch {
                FdFlags::BRS
            } else {
                FdFlags::empty()
            };
            CanAnyFrame::Fd(CanFdFrame::with_flags(id, frame.payload(), flags)?)
        }
    })
}

/// Reads until the socket fails or the link is dropped.
fn read_loop(socket: &CanFdSocket, name: &str, tx: mpsc::Sender<Result<Bytes, String>>) {
    loop {
        match socket.read_frame() {
            Ok(frame) => {
                let Some(chunk) = chunk_of(&frame) else {
                    tracing::debug!(interface = %name, "CAN error frame skipped");
                    continue;
                };
                if tx.blocking_send(Ok(Bytes::from(chunk))).is_err() {
                    return; // link dropped: the source closed or reconnects
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if tx.is_closed() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = tx.blocking_send(Err(socket_error(name, &e).to_string()));
                return;
            }
        }
    }
}

pub struct SocketCanLink {
    rx: mpsc::Receiver<Result<Bytes, String>>,
    socket: Arc<CanFdSocket>,
    settings: CanSettings,
    bit_rate_switch: bool,
    name: String,
}

impl Link for SocketCanLink {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        match self.rx.recv().await {
            Some(Ok(data)) => Ok(Some((data, None))),
            Some(Err(e)) => Err(DeviceError::transient(e)),
            None => Err(DeviceError::transient(format!(
                "{}: reader stopped",
                self.name
            ))),
        }
    }

    async fn write(&mut self, data: Bytes) -> Result<(), DeviceError> {
        let frame = frame_to_send(&data, &self.settings)?;
        let is_fd = frame.is_fd();
        let outgoing = socket_frame_of(&frame, self.bit_rate_switch)
            .ok_or_else(|| DeviceError::fatal("this frame cannot be built for SocketCAN"))?;
        let socket = self.socket.clone();
        let result = tokio::task::spawn_blocking(move || socket.write_frame(&outgoing))
            .await
            .map_err(|e| DeviceError::transient(format!("SocketCAN write task failed: {e}")))?;
        let name = &self.name;
        result.map_err(|e| match e.raw_os_error() {
            Some(libc::ENOBUFS) => DeviceError::fatal(format!(
                "the transmit queue of {name} is full: no other node acknowledges frames \
                 (is the bus terminated and another node powered?)"
            )),
            Some(libc::EINVAL) if is_fd => DeviceError::fatal(format!(
                "{name} does not accept CAN FD frames: enable FD on the interface \
                 (`ip link set {name} type can fd on`, or `mtu 72` for vcan)"
            )),
            _ => socket_error(name, &e),
        })
    }
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
    fn received_frames_become_chunks_and_back() {
        let data: Vec<u8> = (0..64).collect();
        let std = |id| CanId::standard(id).unwrap();
        let ext = |id| CanId::extended(id).unwrap();
        let frames = vec![
            CanFrame::data(std(0x123), &data[..8]).unwrap(),
            CanFrame::data(ext(0x18FF_0001), &data[..0]).unwrap(),
            CanFrame::remote(std(0x7FF), 4).unwrap(),
            CanFrame::remote(ext(0x1), 8).unwrap(),
            CanFrame::fd(std(0x42), &data[..12]).unwrap(),
            CanFrame::fd(ext(0x1FFF_FFFF), &data).unwrap(),
        ];
        for frame in frames {
            for brs in [false, true] {
                let socket_frame = socket_frame_of(&frame, brs).expect("buildable");
                if let CanAnyFrame::Fd(fd) = &socket_frame {
                    assert_eq!(fd.is_brs(), brs);
                }
                assert_eq!(chunk_of(&socket_frame), Some(frame.to_bytes()), "{frame:?}");
            }
        }
    }

    #[test]
    fn interface_differences_are_spelled_out() {
        let want = CanSettings {
            fd: true,
            data_bitrate: Some(2_000_000),
            ..settings()
        };
        let virtual_bus = LinkState::default();
        assert!(differences(&virtual_bus, &want).is_empty());
        let same = LinkState {
            bitrate: Some(500_000),
            data_bitrate: Some(2_000_000),
            fd: true,
            listen_only: false,
        };
        assert!(differences(&same, &want).is_empty());
        let other = LinkState {
            bitrate: Some(250_000),
            data_bitrate: None,
            fd: false,
            listen_only: true,
        };
        assert_eq!(
            differences(&other, &want),
            vec![
                "runs at 250 kbit/s",
                "has CAN FD off",
                "has no data bitrate set",
                "has listen-only on"
            ]
        );
        assert_eq!(
            ip_commands(&want),
            "ip link set can0 down && ip link set can0 type can bitrate 500000 dbitrate \
             2000000 fd on listen-only off && ip link set can0 up"
        );
    }

    #[test]
    fn socket_errors_say_what_to_do() {
        let cases = [
            (libc::EAFNOSUPPORT, "modprobe can_raw"),
            (libc::ENODEV, "type vcan"),
            (libc::ENETDOWN, "ip link set can0 up"),
        ];
        for (errno, needle) in cases {
            let e = socket_error("can0", &io::Error::from_raw_os_error(errno));
            assert!(e.to_string().contains(needle), "{e}");
        }
        assert!(matches!(
            socket_error("can0", &io::Error::from_raw_os_error(libc::EAFNOSUPPORT)),
            DeviceError::Fatal(_)
        ));
    }

    /// Runs the real open path against this machine's kernel. A missing interface must
    /// say so; a non-CAN interface must be refused either because the kernel lacks
    /// SocketCAN or because the interface is not a CAN one.
    #[tokio::test]
    async fn opening_here_fails_with_a_clear_reason() {
        let mut missing = SocketCanDriver::new(CanSettings {
            interface: "sextantcan9".into(),
            ..settings()
        })
        .unwrap();
        let e = missing.open().await.err().expect("no such interface");
        assert!(e.to_string().contains("does not exist"), "{e}");
        let mut loopback = SocketCanDriver::new(CanSettings {
            interface: "lo".into(),
            ..settings()
        })
        .unwrap();
        let e = loopback
            .open()
            .await
            .err()
            .expect("lo is not a CAN interface");
        let text = e.to_string();
        assert!(
            text.contains("AF_CAN") || text.contains("not a CAN interface"),
            "{text}"
        );
        if text.contains("AF_CAN") {
            eprintln!(
                "\n*** NOTE: this kernel has no SocketCAN (AF_CAN); SocketCAN reads and \
                 writes were not exercised here ***\n"
            );
        }
    }
}
