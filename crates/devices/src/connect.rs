//! Starting the right driver for a project source's `connection`.
//!
//! Secrets never live in the project: a source that needs one (an MQTT password, a TLS
//! client key) gets it from the [`Secrets`] the caller supplies.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sextant_telemetry::project::{Connection, Source as SourceConfig};

use crate::ble::BleDriver;
use crate::csv_replay::{CsvReplayDriver, RowFormat};
use crate::message_replay::{self, MessageReplayDriver};
use crate::modbus::ModbusDriver;
use crate::mqtt::MqttDriver;
use crate::net::{TcpDriver, UdpDriver};
use crate::process::{NamedPipeDriver, ProcessDriver};
use crate::replay::{ReplayControl, ReplayDriver};
use crate::serial::SerialDriver;
use crate::sim_source::SimulatorDriver;
use crate::slcan::SlcanDriver;
#[cfg(target_os = "linux")]
use crate::socketcan::SocketCanDriver;
use crate::source::{DeviceError, Reconnect, RunOptions, Source};
use crate::tls::Credentials;

/// Where passwords and keys come from (the secret store in the app, a value in tests).
pub trait Secrets: Send + Sync {
    /// The credentials of `source`, or an error saying why the stored ones may not be used
    /// for it (they were given for another destination).
    fn credentials(&self, source: &SourceConfig) -> Result<Credentials, DeviceError>;
}

/// No secrets at all.
pub struct NoSecrets;

impl Secrets for NoSecrets {
    fn credentials(&self, _: &SourceConfig) -> Result<Credentials, DeviceError> {
        Ok(Credentials::default())
    }
}

/// The same credentials for every source (tests, one-source command lines).
impl Secrets for Credentials {
    fn credentials(&self, _: &SourceConfig) -> Result<Credentials, DeviceError> {
        Ok(self.clone())
    }
}

/// Extra handles some sources expose while they run.
#[derive(Default)]
pub struct Extras {
    /// Pause/step/seek/speed of a replay source.
    pub replay: Option<Arc<ReplayControl>>,
}

/// Starts the driver `config.connection` describes, on the current tokio runtime.
///
/// `source_index` selects which recorded source a replay plays from a multi-source capture.
pub fn start(
    config: &SourceConfig,
    source_index: usize,
    options: RunOptions,
    secrets: &dyn Secrets,
) -> Result<(Source, Extras), DeviceError> {
    let mut extras = Extras::default();
    let source = match &config.connection {
        Connection::Serial(s) => {
            let options = RunOptions {
                reconnect: if s.auto_reconnect {
                    options.reconnect
                } else {
                    Reconnect::off()
                },
                ..options
            };
            Source::spawn(SerialDriver::new(s.clone())?, options)
        }
        Connection::Tcp { host, port, tls } => Source::spawn(
            TcpDriver {
                host: host.clone(),
                port: *port,
                tls: *tls,
                credentials: if *tls {
                    secrets.credentials(config)?
                } else {
                    Credentials::default()
                },
            },
            options,
        ),
        Connection::Udp {
            local_port,
            remote_host,
            remote_port,
            multicast_group,
            multicast_interface,
        } => Source::spawn(
            UdpDriver {
                local_port: *local_port,
                remote_host: remote_host.clone(),
                remote_port: *remote_port,
                multicast_group: multicast_group.clone(),
                multicast_interface: multicast_interface.clone(),
            },
            options,
        ),
        Connection::Mqtt(m) => Source::spawn(
            MqttDriver::new(m.clone(), secrets.credentials(config)?)?,
            options,
        ),
        Connection::Process {
            program,
            args,
            working_dir,
        } => Source::spawn(
            ProcessDriver {
                program: program.clone(),
                args: args.clone(),
                working_dir: working_dir.clone(),
                include_stderr: false,
            },
            options,
        ),
        Connection::NamedPipe { path } => {
            Source::spawn(NamedPipeDriver { path: path.clone() }, options)
        }
        Connection::Simulator(s) => Source::spawn(SimulatorDriver::new(s.clone()), options),
        Connection::Replay { path, speed } => {
            let (source, control) = start_replay(config, path, *speed, source_index, options);
            extras.replay = Some(control);
            source
        }
        Connection::Ble(b) => Source::spawn(BleDriver::new(b.clone())?, options),
        Connection::Modbus(m) => Source::spawn(ModbusDriver::new(m.clone())?, options),
        // An SLCAN adapter is a serial port speaking the Lawicel protocol; it works on
        // every OS. SocketCAN is Linux's kernel CAN stack.
        Connection::Can(c) if c.slcan => Source::spawn(SlcanDriver::new(c.clone())?, options),
        #[cfg(target_os = "linux")]
        Connection::Can(c) => Source::spawn(SocketCanDriver::new(c.clone())?, options),
        #[cfg(not(target_os = "linux"))]
        Connection::Can(_) => {
            return Err(DeviceError::fatal(format!(
                "source `{}`: SocketCAN exists only on Linux; use an SLCAN adapter (set `slcan`)",
                config.id
            )))
        }
    };
    Ok((source, extras))
}

/// Starts a replay of the recording at `path`, returning the handle that pauses, steps,
/// seeks and changes its speed. A replay never reconnects.
fn start_replay(
    config: &SourceConfig,
    path: &str,
    speed: f64,
    source_index: usize,
    options: RunOptions,
) -> (Source, Arc<ReplayControl>) {
    let control = ReplayControl::new(speed);
    let options = RunOptions {
        reconnect: Reconnect::off(),
        ..options
    };
    // A CSV export plays through the CSV player, a message capture (JSON Lines) one message
    // at a time; anything else is a raw capture.
    let source = if message_replay::is_message_capture(Path::new(path)) {
        Source::spawn(
            MessageReplayDriver {
                path: PathBuf::from(path),
                index: source_index,
                id: config.id.clone(),
                control: control.clone(),
            },
            options,
        )
    } else if path.to_ascii_lowercase().ends_with(".csv") {
        Source::spawn(
            CsvReplayDriver {
                path: PathBuf::from(path),
                control: control.clone(),
                format: RowFormat::for_parser(&config.parser),
            },
            options,
        )
    } else {
        Source::spawn(
            ReplayDriver {
                path: PathBuf::from(path),
                source: Some(u16::try_from(source_index).unwrap_or(u16::MAX)),
                control: control.clone(),
            },
            options,
        )
    };
    (source, control)
}
