//! `project.template.apply`: the most common asks ("make me an IMU dashboard") as one
//! Confirm command. Each template is a project fragment – a source with its framing,
//! decoder and parser, the groups whose widgets show it, a workspace of tiles – added to
//! the open project with fresh ids (nothing already there is touched), as one undoable
//! edit. A template is built in code from the project model, so it cannot drift from what
//! the model accepts; each has a test that applies it and feeds it sample bytes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sextant_commands::{CommandError, Registry, Tier};
use sextant_telemetry::project::{
    CanSettings, Connection, Dataset, DatasetWidget, FrameMode, Framing, Group, GroupWidget,
    MqttSettings, ParserConfig, Project, Role, SerialSettings, Source, Tile, Workspace as Tab,
};

use crate::Workspace;

/// Which template, and where its device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TemplateId {
    /// Four channels of comma-separated values per line over a serial port, on one scope.
    UartCsvScope,
    /// An IMU sending `ax,ay,az,gx,gy,gz,roll,pitch,yaw` lines: accelerometer, gyroscope,
    /// attitude and a 3-D plot of the acceleration.
    Imu,
    /// A GPS receiver speaking NMEA-0183 (GGA/RMC) over serial: a map and the fix.
    GpsNmea,
    /// JSON messages `{"temperature":…,"humidity":…}` from an MQTT topic.
    MqttSubscriber,
    /// Comma-separated values per UDP datagram.
    UdpTelemetry,
    /// A CAN bus decoded by a DBC file (given as `dbc`): one dataset per signal.
    CanDbc,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ApplyParams {
    template: TemplateId,
    /// The serial port (`uart-csv-scope`, `imu`, `gps-nmea`); empty: choose it later.
    #[serde(default)]
    port: Option<String>,
    /// The baud rate of a serial template.
    #[serde(default)]
    baud: Option<u32>,
    /// The broker host (`mqtt-subscriber`).
    #[serde(default)]
    host: Option<String>,
    /// The MQTT topic (`mqtt-subscriber`).
    #[serde(default)]
    topic: Option<String>,
    /// The UDP port to listen on (`udp-telemetry`), or the broker port.
    #[serde(default)]
    network_port: Option<u16>,
    /// The CAN interface (`can-dbc`), e.g. `can0` or `vcan0`.
    #[serde(default)]
    interface: Option<String>,
    /// The DBC file's text (`can-dbc`).
    #[serde(default)]
    dbc: Option<String>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Applied {
    /// The new source's id.
    source: String,
    /// The new groups' ids.
    groups: Vec<String>,
    /// The new workspace's id.
    workspace: String,
}

#[rustfmt::skip]
pub fn register(r: &mut Registry<Workspace>) {
    r.register("project.template.apply", Tier::Confirm, "Adds a ready-made setup for a common device (UART CSV scope, IMU, GPS over NMEA, MQTT subscriber, UDP telemetry, CAN from a DBC): a source, its widgets and a workspace, with fresh ids; the rest of the project is untouched (undoable).", project_template_apply);
}

/// A dataset reading `index` of the template's source.
fn ds(title: &str, units: &str, index: u32) -> Dataset {
    Dataset {
        title: title.into(),
        units: units.into(),
        index,
        graph: true,
        ..Dataset::default()
    }
}

fn serial(p: &ApplyParams, baud: u32) -> Connection {
    Connection::Serial(SerialSettings {
        port: p.port.clone().unwrap_or_default(),
        baud: p.baud.unwrap_or(baud),
        ..SerialSettings::default()
    })
}

fn csv_source(title: &str, connection: Connection) -> Source {
    Source {
        title: title.into(),
        connection,
        parser: ParserConfig::Delimited {
            separator: ",".into(),
        },
        ..Source::default()
    }
}

/// One message (an MQTT publish, a UDP datagram) is one frame.
fn message_framing() -> Framing {
    Framing {
        mode: FrameMode::None,
        end: Vec::new(),
        ..Framing::default()
    }
}

fn group(title: &str, widget: GroupWidget, datasets: Vec<Dataset>) -> Group {
    Group {
        title: title.into(),
        widget,
        datasets,
        ..Group::default()
    }
}

fn with_role(mut d: Dataset, role: Role) -> Dataset {
    d.role = Some(role);
    d
}

/// One template's project fragment: its source, its groups (ids still empty) and the
/// title of its workspace.
type Fragment = (Source, Vec<Group>, String);

/// The fragment: one source and its groups (ids still empty).
fn fragment(p: &ApplyParams) -> Result<Fragment, CommandError> {
    Ok(match p.template {
        TemplateId::UartCsvScope => uart_csv_scope(p),
        TemplateId::Imu => imu(p),
        TemplateId::GpsNmea => gps_nmea(p),
        TemplateId::MqttSubscriber => mqtt_subscriber(p),
        TemplateId::UdpTelemetry => udp_telemetry(p),
        TemplateId::CanDbc => can_dbc(p)?,
    })
}

/// Four CSV channels from a serial port on one multi-plot.
fn uart_csv_scope(p: &ApplyParams) -> Fragment {
    (
        csv_source("UART", serial(p, 115_200)),
        vec![group(
            "Scope",
            GroupWidget::MultiPlot,
            (1..=4)
                .map(|i| ds(&format!("Channel {i}"), "", i))
                .collect(),
        )],
        "Scope".into(),
    )
}

/// An IMU's CSV lines: accelerometer, gyroscope, an attitude grid with a compass, and the
/// acceleration as a 3-D trail (how the board moves).
fn imu(p: &ApplyParams) -> Fragment {
    let accel: Vec<Dataset> = ["X", "Y", "Z"]
        .iter()
        .zip([Role::X, Role::Y, Role::Z])
        .enumerate()
        .map(|(i, (a, r))| with_role(ds(&format!("Accel {a}"), "m/s²", i as u32 + 1), r))
        .collect();
    let motion = accel
        .iter()
        .cloned()
        .map(|mut d| {
            d.graph = false;
            d
        })
        .collect();
    let gyro = ["X", "Y", "Z"]
        .iter()
        .zip([Role::X, Role::Y, Role::Z])
        .enumerate()
        .map(|(i, (a, r))| with_role(ds(&format!("Gyro {a}"), "°/s", i as u32 + 4), r))
        .collect();
    let mut yaw = with_role(ds("Yaw", "°", 9), Role::Yaw);
    yaw.widget = DatasetWidget::Compass;
    let attitude = vec![
        with_role(ds("Roll", "°", 7), Role::Roll),
        with_role(ds("Pitch", "°", 8), Role::Pitch),
        yaw,
    ];
    (
        csv_source("IMU", serial(p, 115_200)),
        vec![
            group("Accelerometer", GroupWidget::Accelerometer, accel),
            group("Gyroscope", GroupWidget::Gyroscope, gyro),
            group("Attitude", GroupWidget::DataGrid, attitude),
            group("Motion", GroupWidget::Plot3d, motion),
        ],
        "IMU".into(),
    )
}

/// An NMEA receiver on a serial port: the position on a map and the fix in a grid.
fn gps_nmea(p: &ApplyParams) -> Fragment {
    (
        Source {
            title: "GPS".into(),
            connection: serial(p, 9_600),
            parser: ParserConfig::Nmea,
            ..Source::default()
        },
        vec![
            group(
                "Position",
                GroupWidget::Gps,
                vec![
                    with_role(ds("Latitude", "°", 1), Role::Lat),
                    with_role(ds("Longitude", "°", 2), Role::Lon),
                    with_role(ds("Altitude", "m", 3), Role::Alt),
                ],
            ),
            group(
                "Fix",
                GroupWidget::DataGrid,
                vec![
                    ds("Fix quality", "", 4),
                    ds("Satellites", "", 5),
                    ds("HDOP", "", 6),
                    ds("Speed", "kn", 7),
                    ds("Course", "°", 8),
                ],
            ),
        ],
        "GPS".into(),
    )
}

/// JSON temperature and humidity messages from an MQTT topic.
fn mqtt_subscriber(p: &ApplyParams) -> Fragment {
    (
        Source {
            title: "MQTT".into(),
            connection: Connection::Mqtt(MqttSettings {
                host: p.host.clone().unwrap_or_else(|| "127.0.0.1".into()),
                port: p.network_port.unwrap_or(1883),
                topic: p.topic.clone().unwrap_or_else(|| "sensors/#".into()),
                ..MqttSettings::default()
            }),
            parser: ParserConfig::Json {
                paths: vec!["temperature".into(), "humidity".into()],
            },
            framing: message_framing(),
            ..Source::default()
        },
        vec![
            group(
                "Environment",
                GroupWidget::DataGrid,
                vec![
                    {
                        let mut t = ds("Temperature", "°C", 1);
                        t.widget = DatasetWidget::Gauge;
                        t
                    },
                    ds("Humidity", "%", 2),
                ],
            ),
            group(
                "Trend",
                GroupWidget::MultiPlot,
                vec![ds("Temperature", "°C", 1), ds("Humidity", "%", 2)],
            ),
        ],
        "MQTT".into(),
    )
}

/// Four CSV values per UDP datagram, in a grid and on a plot.
fn udp_telemetry(p: &ApplyParams) -> Fragment {
    (
        Source {
            framing: message_framing(),
            ..csv_source(
                "UDP",
                Connection::Udp {
                    local_port: p.network_port.unwrap_or(9000),
                    remote_host: None,
                    remote_port: None,
                    multicast_group: None,
                    multicast_interface: None,
                },
            )
        },
        vec![
            group(
                "Telemetry",
                GroupWidget::DataGrid,
                (1..=4).map(|i| ds(&format!("Value {i}"), "", i)).collect(),
            ),
            group(
                "Plot",
                GroupWidget::MultiPlot,
                (1..=4).map(|i| ds(&format!("Value {i}"), "", i)).collect(),
            ),
        ],
        "UDP".into(),
    )
}

/// A CAN interface decoded by the DBC file given in `dbc`: the DBC import's source
/// settings and a data grid per message.
fn can_dbc(p: &ApplyParams) -> Result<Fragment, CommandError> {
    let text = p
        .dbc
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            CommandError::invalid(
                "dbc",
                "the can-dbc template needs the DBC file's text in `dbc`",
            )
        })?;
    let dbc = sextant_devices::dbc::parse_dbc(text)
        .map_err(|e| CommandError::invalid("dbc", format!("the DBC file: {e}")))?;
    if dbc.signal_count() == 0 {
        return Err(CommandError::invalid(
            "dbc",
            "the DBC file defines no signals",
        ));
    }
    // The DBC import sets the source's framing (one CAN frame a chunk), decoder and
    // parser and adds a data grid per message: done on a scratch project holding
    // only this source, then moved over with fresh ids.
    let mut scratch = Project {
        sources: vec![Source {
            id: "src-t".into(),
            title: "CAN".into(),
            connection: Connection::Can(CanSettings {
                interface: p.interface.clone().unwrap_or_else(|| "can0".into()),
                ..CanSettings::default()
            }),
            ..Source::default()
        }],
        ..Project::default()
    };
    scratch.groups.clear();
    scratch.workspaces.clear();
    dbc.apply(&mut scratch, "src-t")
        .map_err(|e| CommandError::invalid("dbc", format!("the DBC file: {e}")))?;
    let source = scratch.sources.remove(0);
    let groups = std::mem::take(&mut scratch.groups);
    Ok((source, groups, "CAN".into()))
}

fn project_template_apply(ws: &mut Workspace, p: ApplyParams) -> Result<Applied, CommandError> {
    let (mut source, mut groups, tab) = fragment(&p)?;
    ws.edit(&format!("apply template {:?}", p.template), |proj| {
        source.id = proj.next_id("src");
        proj.sources.push(source.clone());
        let mut tiles = Vec::new();
        let mut ids = Vec::new();
        for (n, g) in groups.iter_mut().enumerate() {
            g.id = proj.next_id("grp");
            for d in &mut g.datasets {
                d.id = String::new();
                d.source = Some(source.id.clone());
            }
            // Ids one by one, so each is unique against what is already there.
            let mut datasets = std::mem::take(&mut g.datasets);
            let gid = g.id.clone();
            proj.groups.push(g.clone());
            for d in &mut datasets {
                d.id = proj.next_id("ds");
                let group = proj
                    .groups
                    .iter_mut()
                    .find(|x| x.id == gid)
                    .expect("just added");
                group.datasets.push(d.clone());
            }
            g.datasets = datasets;
            tiles.push(Tile {
                group: Some(gid.clone()),
                x: (n as u32 % 2) * 6,
                y: (n as u32 / 2) * 4,
                w: 6,
                h: 4,
                ..Tile::default()
            });
            ids.push(gid);
        }
        let workspace = proj.next_id("ws");
        proj.workspaces.push(Tab {
            id: workspace.clone(),
            title: tab.clone(),
            tiles,
            ..Tab::default()
        });
        let issues = proj.validate();
        if !issues.is_empty() {
            return Err(CommandError::failed(format!(
                "the template does not fit this project: {}",
                issues
                    .iter()
                    .map(|i| format!("{}: {}", i.path, i.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        Ok(Applied {
            source: source.id.clone(),
            groups: ids,
            workspace,
        })
    })
}
