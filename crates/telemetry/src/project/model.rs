//! The project model: what a `.sextant.json` file holds.
//!
//! Every struct tolerates missing fields (`#[serde(default)]`) and keeps keys it does not
//! know in `extra`, so a file written by a newer minor version, or edited by hand, loads and
//! saves without losing anything. Ids (`src-1`, `grp-1`, `ds-1`) are assigned once and never
//! reused or renumbered: widgets, workspaces, transforms and the assistant refer to datasets
//! by id, not by position.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// The value of a project file's `format` key. Serial Studio files also carry a
/// `schemaVersion` (3 today), so the version alone cannot tell the two apart.
pub const FORMAT_MARKER: &str = "sextant-project";

/// The `format` key's only value; see [`FORMAT_MARKER`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FileFormat {
    #[default]
    #[serde(rename = "sextant-project")]
    SextantProject,
}

/// Keys this build does not know, kept verbatim.
pub type Extra = BTreeMap<String, Json>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Project {
    /// Always `"sextant-project"`: marks the file as Sextant's.
    pub format: FileFormat,
    /// Version of this file format; see `SCHEMA_VERSION`.
    pub schema_version: u32,
    pub title: String,
    /// Every device the project reads; they run at once.
    pub sources: Vec<Source>,
    pub groups: Vec<Group>,
    pub actions: Vec<Action>,
    pub workspaces: Vec<Workspace>,
    /// Shared constant tables readable from scripts with `tableGet`.
    pub tables: Vec<ConstTable>,
    pub mqtt_publisher: Option<MqttPublisher>,
    /// Every frame also written to a PostgreSQL (or TimescaleDB) table.
    pub postgres: Option<PostgresSink>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Default for Project {
    fn default() -> Self {
        Project {
            format: FileFormat::SextantProject,
            schema_version: SCHEMA_VERSION,
            title: "Untitled".into(),
            sources: Vec::new(),
            groups: Vec::new(),
            actions: Vec::new(),
            workspaces: Vec::new(),
            tables: Vec::new(),
            mqtt_publisher: None,
            postgres: None,
            extra: Extra::new(),
        }
    }
}

/// One device and how its bytes become values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Source {
    pub id: String,
    pub title: String,
    pub connection: Connection,
    pub framing: Framing,
    pub decoder: Decoder,
    pub parser: ParserConfig,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Default for Source {
    fn default() -> Self {
        Source {
            id: "src-1".into(),
            title: "Device".into(),
            connection: Connection::default(),
            framing: Framing::default(),
            decoder: Decoder::PlainText,
            parser: ParserConfig::QuickPlot,
            extra: Extra::new(),
        }
    }
}

/// Where the bytes come from. Secrets (passwords, keys) are never stored here: they live
/// in the OS keyring, looked up by source id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Connection {
    Serial(SerialSettings),
    Tcp {
        host: String,
        port: u16,
        /// TLS to the device; its CA and a client certificate are credentials, kept with
        /// the secrets, never here.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        tls: bool,
    },
    Udp {
        #[serde(default)]
        local_port: u16,
        #[serde(default)]
        remote_host: Option<String>,
        #[serde(default)]
        remote_port: Option<u16>,
        #[serde(default)]
        multicast_group: Option<String>,
        /// IPv4 address of the interface to join the group on; any when absent.
        #[serde(default)]
        multicast_interface: Option<String>,
    },
    Mqtt(MqttSettings),
    Can(CanSettings),
    Modbus(ModbusSettings),
    Ble(BleSettings),
    Process {
        program: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        working_dir: Option<String>,
    },
    NamedPipe {
        path: String,
    },
    Simulator(SimulatorSettings),
    /// Plays a recording as if the device were sending it.
    Replay {
        /// A capture (`sextant run --record`), a CSV export (`.csv`), or a message capture
        /// (`.jsonl`: one message a line, handed to the source whole).
        path: String,
        #[serde(default = "one")]
        speed: f64,
    },
}

fn one() -> f64 {
    1.0
}

impl Default for Connection {
    fn default() -> Self {
        Connection::Simulator(SimulatorSettings::default())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Parity {
    None,
    Even,
    Odd,
    Mark,
    Space,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StopBits {
    One,
    OnePointFive,
    Two,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FlowControl {
    None,
    RtsCts,
    XonXoff,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SerialSettings {
    pub port: String,
    /// Any rate up to 15 Mbaud; a rate the port cannot do fails the open, never falls back.
    pub baud: u32,
    pub data_bits: u8,
    pub parity: Parity,
    pub stop_bits: StopBits,
    pub flow_control: FlowControl,
    pub dtr: bool,
    pub rts: bool,
    pub auto_reconnect: bool,
}

impl Default for SerialSettings {
    fn default() -> Self {
        SerialSettings {
            port: String::new(),
            baud: 115_200,
            data_bits: 8,
            parity: Parity::None,
            stop_bits: StopBits::One,
            flow_control: FlowControl::None,
            dtr: true,
            rts: true,
            auto_reconnect: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MqttVersion {
    #[serde(rename = "3.1.1")]
    V311,
    #[serde(rename = "5")]
    V5,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct MqttSettings {
    pub host: String,
    pub port: u16,
    pub client_id: String,
    /// User name only; the password is a secret kept outside the project.
    pub username: Option<String>,
    pub topic: String,
    pub version: MqttVersion,
    pub keep_alive_s: u16,
    pub clean_session: bool,
    pub tls: bool,
    /// PEM file of the certificate authority to trust for TLS (a private broker's CA);
    /// the system's roots are used when absent.
    pub ca_file: Option<String>,
}

impl Default for MqttSettings {
    fn default() -> Self {
        MqttSettings {
            host: "127.0.0.1".into(),
            port: 1883,
            client_id: String::new(),
            username: None,
            topic: "#".into(),
            version: MqttVersion::V311,
            keep_alive_s: 30,
            clean_session: true,
            tls: false,
            ca_file: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct CanSettings {
    /// SocketCAN interface (`can0`, `vcan0`) or a serial port for an SLCAN adapter.
    pub interface: String,
    pub slcan: bool,
    pub bitrate: u32,
    pub fd: bool,
    pub data_bitrate: Option<u32>,
    pub listen_only: bool,
}

impl Default for CanSettings {
    fn default() -> Self {
        CanSettings {
            interface: "can0".into(),
            slcan: false,
            bitrate: 500_000,
            fd: false,
            data_bitrate: None,
            listen_only: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RegisterKind {
    Coil,
    Discrete,
    Holding,
    Input,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisterGroup {
    pub kind: RegisterKind,
    pub start: u16,
    pub count: u16,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ModbusSettings {
    /// `tcp` uses host/port; `rtu` uses the serial settings.
    pub rtu: bool,
    pub host: String,
    pub port: u16,
    pub serial: Option<SerialSettings>,
    pub slave_id: u8,
    pub poll_interval_ms: u32,
    pub groups: Vec<RegisterGroup>,
}

impl Default for ModbusSettings {
    fn default() -> Self {
        ModbusSettings {
            rtu: false,
            host: "127.0.0.1".into(),
            port: 502,
            serial: None,
            slave_id: 1,
            poll_interval_ms: 100,
            groups: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct BleSettings {
    /// Device name or address to connect to.
    pub device: String,
    pub service: String,
    pub notify_characteristic: String,
    pub write_characteristic: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Waveform {
    Sine,
    Square,
    Saw,
    Noise,
    RandomWalk,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SimChannel {
    pub name: String,
    pub waveform: Waveform,
    pub frequency_hz: f64,
    pub amplitude: f64,
    pub offset: f64,
    /// Peak-to-peak amplitude of added uniform noise.
    pub noise: f64,
}

impl Default for SimChannel {
    fn default() -> Self {
        SimChannel {
            name: "ch".into(),
            waveform: Waveform::Sine,
            frequency_hz: 1.0,
            amplitude: 1.0,
            offset: 0.0,
            noise: 0.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SimulatorSettings {
    pub frame_rate_hz: f64,
    pub channels: Vec<SimChannel>,
    /// Append a GPS track (lat, lon, alt) to every frame.
    pub gps: bool,
    /// Append an IMU (ax, ay, az, gx, gy, gz) to every frame.
    pub imu: bool,
    pub seed: u64,
}

impl Default for SimulatorSettings {
    fn default() -> Self {
        SimulatorSettings {
            frame_rate_hz: 100.0,
            channels: Vec::new(),
            gps: false,
            imu: false,
            seed: 1,
        }
    }
}

/// How frames are cut out of the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FrameMode {
    /// A frame ends at an end delimiter.
    EndOnly,
    /// A frame is the bytes between a start and an end delimiter.
    StartEnd,
    /// A frame begins at a start delimiter and ends where the next one begins.
    StartOnly,
    /// Every chunk the source delivers is one frame (message buses).
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DelimiterFormat {
    /// Text with `\n`, `\r`, `\t`, `\\` and `\xHH` escapes.
    Text,
    /// Hex bytes, e.g. `AA 55` or `0xAA,0x55`.
    Hex,
}

/// The checksum after a frame's end delimiter. By catalogue name: `crc8` is CRC-8/NRSC-5,
/// `crc16` CRC-16/CCITT-FALSE (IBM-3740), `crc16-modbus` CRC-16/MODBUS (sent low byte
/// first), `crc16-ccitt` CRC-16/XMODEM, `crc32` CRC-32/ISO-HDLC; `xor8`, `mod256`,
/// `fletcher16` and `adler32` are what they say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ChecksumKind {
    #[serde(rename = "none")]
    None,
    #[serde(rename = "xor8")]
    Xor8,
    #[serde(rename = "mod256")]
    Mod256,
    #[serde(rename = "crc8")]
    Crc8,
    #[serde(rename = "crc16")]
    Crc16,
    #[serde(rename = "crc16-modbus")]
    Crc16Modbus,
    #[serde(rename = "crc16-ccitt")]
    Crc16Ccitt,
    #[serde(rename = "fletcher16")]
    Fletcher16,
    #[serde(rename = "crc32")]
    Crc32,
    #[serde(rename = "adler32")]
    Adler32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Framing {
    pub mode: FrameMode,
    pub delimiter_format: DelimiterFormat,
    pub start: String,
    /// Up to 8 alternative end patterns; the earliest match in the stream wins.
    pub end: Vec<String>,
    /// Checksum bytes that follow the end delimiter and cover the payload.
    pub checksum: ChecksumKind,
    /// Longest frame kept; longer ones are discarded and counted.
    pub max_frame_bytes: usize,
}

impl Default for Framing {
    fn default() -> Self {
        Framing {
            mode: FrameMode::EndOnly,
            delimiter_format: DelimiterFormat::Text,
            start: String::new(),
            end: vec!["\\n".into()],
            checksum: ChecksumKind::None,
            max_frame_bytes: 64 * 1024,
        }
    }
}

/// How a frame's payload is handed to the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Decoder {
    /// UTF-8, invalid sequences replaced.
    PlainText,
    /// The parser gets the payload bytes spelled as a lowercase hex string.
    Hex,
    /// The parser gets the payload bytes spelled as a base64 string.
    Base64,
    /// The parser gets the payload bytes unchanged.
    Binary,
    /// The payload is COBS-encoded (frame it with a `00` end delimiter).
    Cobs,
    /// The payload is SLIP-encoded (frame it with a `C0` end delimiter).
    Slip,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ScriptLanguage {
    Lua,
    #[serde(rename = "javascript")]
    JavaScript,
}

/// Turns a decoded frame into values for parser slots 1, 2, 3…
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ParserConfig {
    /// Zero-config CSV lines; a first all-text row names the channels.
    QuickPlot,
    Delimited {
        #[serde(default = "comma")]
        separator: String,
    },
    FixedWidth {
        widths: Vec<usize>,
    },
    KeyValue {
        /// Key at position `i` feeds slot `i + 1`.
        keys: Vec<String>,
        #[serde(default = "comma")]
        pair_separator: String,
        #[serde(default = "equals")]
        value_separator: String,
    },
    Json {
        /// Path at position `i` feeds slot `i + 1`, e.g. `imu.accel[0]` or `/imu/accel/0`;
        /// `/values/Motor~1Speed` reaches a key with a `/` in it (`~1`, as in JSON Pointer).
        paths: Vec<String>,
    },
    /// NMEA-0183 GGA/RMC; slots are listed in `parse::nmea::SLOTS`.
    Nmea,
    Binary {
        fields: Vec<BinaryField>,
    },
    Script {
        language: ScriptLanguage,
        code: String,
    },
    /// CAN frames (one chunk each, in the `can_frame` byte layout) decoded by a message
    /// layout, usually imported from a DBC file. Slot `i + 1` is the `i`-th signal,
    /// counting the messages in order and each message's signals in order. A frame updates
    /// only its own message's signals (and of those, only the multiplexed ones whose
    /// switch value matches); every other slot stays `Null`.
    Can {
        messages: Vec<CanMessage>,
    },
}

fn comma() -> String {
    ",".into()
}
fn equals() -> String {
    "=".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BinaryType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Endian {
    Little,
    Big,
}

/// One field of a binary layout. Without `offset` a field starts where the previous ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BinaryField {
    #[serde(rename = "type")]
    pub ty: BinaryType,
    #[serde(default = "little")]
    pub endian: Endian,
    #[serde(default)]
    pub offset: Option<usize>,
    /// Multiplier applied to the raw integer (1 when absent).
    #[serde(default)]
    pub scale: Option<f64>,
}

fn little() -> Endian {
    Endian::Little
}

/// One CAN message of a [`ParserConfig::Can`] layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanMessage {
    /// The CAN id, without any flag.
    pub id: u32,
    /// A 29-bit extended id rather than an 11-bit standard one.
    #[serde(default)]
    pub extended: bool,
    #[serde(default)]
    pub name: String,
    pub signals: Vec<CanSignal>,
}

/// How a signal's raw bits are read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CanValueType {
    #[default]
    Unsigned,
    /// Two's complement.
    Signed,
    /// IEEE 754: a 32-bit float or a 64-bit double (the signal's size says which).
    Float,
}

/// One signal of a CAN message: `physical = raw * factor + offset`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanSignal {
    #[serde(default)]
    pub name: String,
    /// DBC bit numbering: for `little` (Intel) the least significant bit, for `big`
    /// (Motorola) the most significant bit, counting bit 0 as the LSB of byte 0.
    pub start_bit: u16,
    /// Bits, 1 to 64.
    pub size: u8,
    #[serde(default = "little")]
    pub byte_order: Endian,
    #[serde(default)]
    pub value_type: CanValueType,
    #[serde(default = "unit_factor")]
    pub factor: f64,
    #[serde(default)]
    pub offset: f64,
    /// Present only when a multiplexor (switch) signal has one of the given raw values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mux: Option<CanMux>,
}

fn unit_factor() -> f64 {
    1.0
}

/// The multiplexing condition of a signal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanMux {
    /// Name of the switch signal in the same message (itself possibly multiplexed).
    pub switch: String,
    /// Inclusive `[min, max]` ranges of the switch's raw value; `[[3, 3]]` for `m3`.
    pub ranges: Vec<[u64; 2]>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Group {
    pub id: String,
    pub title: String,
    pub widget: GroupWidget,
    pub datasets: Vec<Dataset>,
    /// What an `output` group shows: buttons, toggles, sliders, knobs and text fields that
    /// send to a device.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub controls: Vec<Control>,
    /// How an `image` group finds pictures in its source's bytes (absent: by their magic
    /// bytes, in the first source).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageStream>,
    /// A `painter` group's JavaScript: `paint(ctx, datasets, w, h)` draws the group on a
    /// canvas each frame (Serial Studio's `paint(ctx, w, h)` with a global `datasets` runs
    /// too), `onFrame()` runs before it when defined. It runs in the page, in a worker of its
    /// own with no network, no DOM and a time budget.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub painter_code: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum GroupWidget {
    #[default]
    None,
    DataGrid,
    MultiPlot,
    Accelerometer,
    Gyroscope,
    Gps,
    Plot3d,
    BarPanel,
    LedPanel,
    Terminal,
    Painter,
    Image,
    WebView,
    /// Output controls ([`Group::controls`]) rather than datasets.
    Output,
}

/// Where an image view's pictures come from: JPEG, PNG or WebP files cut out of a source's
/// raw bytes, between whatever else the device sends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ImageStream {
    /// Source id; the first source when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub detection: ImageDetection,
    /// With `markers`: the hex bytes an image starts with, e.g. "FF D8".
    #[serde(skip_serializing_if = "String::is_empty")]
    pub start: String,
    /// With `markers`: the hex bytes an image ends with, e.g. "FF D9".
    #[serde(skip_serializing_if = "String::is_empty")]
    pub end: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// How an image view finds its pictures in the byte stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ImageDetection {
    /// By each format's magic bytes and structure (JPEG, PNG, WebP).
    #[default]
    Auto,
    /// From the `start` bytes through the next `end` bytes, both included.
    Markers,
}

/// One output control: what a person sets, and the script that turns it into bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Control {
    pub id: String,
    pub title: String,
    pub kind: ControlKind,
    /// Source id the bytes go to; the first source when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The range and step of a slider or knob.
    pub min: f64,
    pub max: f64,
    pub step: f64,
    /// The value a slider, knob or toggle starts at.
    pub initial: f64,
    /// What a toggle says when on and when off (absent: "On" and "Off" in the person's
    /// language).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub off_label: Option<String>,
    /// JavaScript defining `transmit(value)`, which returns the string of bytes to send:
    /// value is 1 for a button, 0 or 1 for a toggle, a number for a slider or knob, the
    /// text for a text field.
    pub transmit: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            id: String::new(),
            title: String::new(),
            kind: ControlKind::Button,
            source: None,
            min: 0.0,
            max: 100.0,
            step: 1.0,
            initial: 0.0,
            on_label: None,
            off_label: None,
            transmit: String::new(),
            extra: Extra::default(),
        }
    }
}

/// How an output control looks and what value it hands its script.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ControlKind {
    #[default]
    Button,
    Toggle,
    Slider,
    Knob,
    TextField,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DatasetWidget {
    #[default]
    None,
    Bar,
    Gauge,
    Compass,
    Meter,
    Clock,
}

/// What a dataset means to a group widget (GPS, accelerometer, gyroscope, 3-D plot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    Lat,
    Lon,
    Alt,
    X,
    Y,
    Z,
    Yaw,
    Pitch,
    Roll,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlarmBand {
    pub min: f64,
    pub max: f64,
    pub severity: Severity,
    #[serde(default)]
    pub label: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TransformLanguage {
    /// One-line arithmetic on `value` (or `x`), e.g. `value * 0.1 - 40`.
    Expression,
    Lua,
    #[serde(rename = "javascript")]
    JavaScript,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transform {
    pub language: TransformLanguage,
    pub code: String,
}

/// What a plot puts on its X axis.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "camelCase")]
pub enum XAxis {
    /// Receive time of the frame.
    #[default]
    Time,
    /// Sample number.
    Samples,
    /// Another dataset's value (XY plot).
    Dataset { id: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Dataset {
    /// Stable unique id; never reused within a project.
    pub id: String,
    pub title: String,
    pub units: String,
    /// 1-based parser slot this dataset reads; ignored for virtual datasets.
    pub index: u32,
    /// The source whose parser feeds this dataset; the first source when absent.
    pub source: Option<String>,
    /// Computed by its transform from other datasets and tables, not read from a slot.
    #[serde(rename = "virtual")]
    pub is_virtual: bool,
    pub widget: DatasetWidget,
    pub role: Option<Role>,
    pub graph: bool,
    pub fft: bool,
    pub fft_samples: u32,
    pub led: bool,
    pub led_threshold: Option<f64>,
    /// Its plot has a logarithmic y axis (Serial Studio's `log`).
    pub log: bool,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub alarms: Vec<AlarmBand>,
    pub transform: Option<Transform>,
    pub x_axis: XAxis,
    // A plain comment: a doc comment here would make the generated TypeScript type of the
    // field an intersection no string satisfies (the enum's own doc says what it is).
    #[serde(skip_serializing_if = "is_default")]
    pub interpolation: Interpolation,
    /// Its plot shows a window aligned on an edge, like an oscilloscope's trigger.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// Its plot keeps the highest and lowest values seen (since switched on or reset).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub peak_hold: bool,
    /// A waterfall view: its spectrum (of `fftSamples` samples) row after row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waterfall: Option<Waterfall>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A waterfall (spectrogram): the newest spectrum on top, older ones scrolling down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Waterfall {
    #[serde(default)]
    pub colormap: Colormap,
    /// How many spectra (rows) it keeps, one per drawn frame: 16 to 2048.
    #[serde(default = "waterfall_history")]
    pub history: u32,
}

impl Default for Waterfall {
    fn default() -> Self {
        Waterfall {
            colormap: Colormap::default(),
            history: waterfall_history(),
        }
    }
}

impl Waterfall {
    /// The fewest and most rows a waterfall keeps.
    pub const HISTORY: std::ops::RangeInclusive<u32> = 16..=2048;
}

fn waterfall_history() -> u32 {
    256
}

/// How a waterfall colours power, from low to high.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Colormap {
    #[default]
    Viridis,
    Inferno,
    Turbo,
    Gray,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// How a dataset's plot joins its points (`linear` when the dataset does not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Interpolation {
    /// Straight lines between the points.
    #[default]
    Linear,
    /// Each value held until the next (a sample-and-hold staircase).
    Step,
    /// A vertical line from zero to each point, with a dot on top.
    Stem,
    /// Dots only, nothing between them.
    None,
}

/// Which way a trigger's level is crossed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TriggerEdge {
    #[default]
    Rising,
    Falling,
}

/// When a triggered plot redraws.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TriggerMode {
    /// On each new edge; with no edge in the data, the plot rolls as if untriggered.
    #[default]
    Auto,
    /// On each new edge; with no edge, the last triggered window stays.
    Normal,
    /// Once, on the first edge after it is armed; it stays until armed again.
    Single,
}

/// An oscilloscope trigger on a time plot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    /// The dataset whose edge triggers; the plotted one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    #[serde(default)]
    pub edge: TriggerEdge,
    /// The value the edge crosses.
    pub level: f64,
    /// How much of the window lies before the edge, from 0 to 1.
    #[serde(default = "half")]
    pub pre_trigger: f64,
    #[serde(default)]
    pub mode: TriggerMode,
}

fn half() -> f64 {
    0.5
}

impl Default for Dataset {
    fn default() -> Self {
        Dataset {
            id: String::new(),
            title: String::new(),
            units: String::new(),
            index: 1,
            source: None,
            is_virtual: false,
            widget: DatasetWidget::None,
            role: None,
            graph: true,
            fft: false,
            fft_samples: 1024,
            led: false,
            led_threshold: None,
            log: false,
            min: None,
            max: None,
            alarms: Vec::new(),
            transform: None,
            x_axis: XAxis::Time,
            interpolation: Interpolation::Linear,
            trigger: None,
            waterfall: None,
            peak_hold: false,
            extra: Extra::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum LineEnding {
    #[default]
    None,
    Lf,
    Cr,
    CrLf,
}

/// A button that sends fixed bytes to a source, on the dashboard and in the project.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Action {
    pub id: String,
    pub title: String,
    pub source: Option<String>,
    pub payload: String,
    /// `payload` is hex bytes rather than text.
    pub hex: bool,
    pub line_ending: LineEnding,
    /// The timer's interval: the action sends every N ms once its timer runs (when
    /// [`Action::timer`] says). Absent: no timer, a click sends once.
    pub timer_ms: Option<u64>,
    /// When the timer runs (only with `timerMs`); absent: from each connection on.
    #[serde(skip_serializing_if = "ActionTimer::is_default")]
    pub timer: ActionTimer,
    /// How many times a `repeat` timer sends per click; absent: 3, as Serial Studio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat_count: Option<u32>,
    /// Send once each time the source connects (a device that must be woken or told to
    /// stream), before any timer's first send.
    pub on_connect: bool,
    #[serde(flatten)]
    pub extra: Extra,
}

/// When an action's timer runs (Serial Studio's timer modes, by what they do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ActionTimer {
    /// From each connection of its source until it disconnects (a device that answers only
    /// when polled).
    #[default]
    WhileConnected,
    /// From the first click until the source disconnects.
    StartOnClick,
    /// A click starts it, the next click stops it.
    ToggleOnClick,
    /// A click sends `repeatCount` times, `timerMs` apart.
    Repeat,
}

impl ActionTimer {
    fn is_default(&self) -> bool {
        *self == ActionTimer::default()
    }
}

impl Action {
    /// Sends per click of a `repeat` timer.
    pub const DEFAULT_REPEAT: u32 = 3;
    /// The shortest timer interval: faster polling floods a serial line and the console.
    pub const MIN_TIMER_MS: u64 = 10;

    /// Whether it sends without a click once its source connects: a send on connect, or a
    /// timer that runs while connected. Connecting a project with such an action touches
    /// the device, so it needs the consent a send does.
    pub fn sends_by_itself(&self) -> bool {
        self.on_connect || self.polls_while_connected()
    }

    /// Whether its timer runs by itself from each connection on.
    pub fn polls_while_connected(&self) -> bool {
        self.timer == ActionTimer::WhileConnected && self.timer_ms.is_some()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Workspace {
    pub id: String,
    pub title: String,
    pub tiles: Vec<Tile>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A widget placed on a workspace grid; it shows a group or a single dataset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Tile {
    pub group: Option<String>,
    pub dataset: Option<String>,
    /// Which of a dataset's views the tile shows; absent: the dataset's first view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<TileView>,
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

/// One of the ways a dataset can be drawn (it may have several: a gauge, a plot, an FFT…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TileView {
    /// The dataset's own widget (gauge, bar, compass, meter, clock).
    Widget,
    Plot,
    Fft,
    Led,
    Waterfall,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TableValue {
    Number(f64),
    Text(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TableEntry {
    pub name: String,
    pub value: TableValue,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ConstTable {
    pub name: String,
    pub entries: Vec<TableEntry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PublishFormat {
    Json,
    Csv,
    Raw,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct MqttPublisher {
    pub enabled: bool,
    pub host: String,
    pub port: u16,
    pub topic: String,
    pub format: PublishFormat,
    pub rate_hz: u32,
    pub tls: bool,
    pub client_id: String,
    pub username: Option<String>,
}

impl Default for MqttPublisher {
    fn default() -> Self {
        MqttPublisher {
            enabled: false,
            host: "127.0.0.1".into(),
            port: 1883,
            topic: "sextant/frames".into(),
            format: PublishFormat::Json,
            rate_hz: 10,
            tls: false,
            client_id: String::new(),
            username: None,
        }
    }
}

/// Where the PostgreSQL sink writes: one row per value, `(time, bench, dataset, value,
/// text)`, into `table` (created when missing; a TimescaleDB hypertable when the extension
/// is installed). The password stays in the keyring, never in the project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct PostgresSink {
    pub enabled: bool,
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
    /// `table` or `schema.table`: letters, digits and `_`, at most 63 characters each.
    pub table: String,
    /// The `bench` column of every row, telling many benches apart in one table; the
    /// project's title when empty.
    pub bench: String,
    pub tls: bool,
}

impl Default for PostgresSink {
    fn default() -> Self {
        PostgresSink {
            enabled: false,
            host: "127.0.0.1".into(),
            port: 5432,
            database: "postgres".into(),
            user: "postgres".into(),
            table: "sextant_samples".into(),
            bench: String::new(),
            tls: false,
        }
    }
}

impl Project {
    /// Every dataset in group order, with the index of its group.
    pub fn datasets(&self) -> impl Iterator<Item = &Dataset> {
        self.groups.iter().flat_map(|g| g.datasets.iter())
    }

    /// The id of the source feeding `dataset` (its own, else the first source's).
    pub fn source_of<'a>(&'a self, dataset: &'a Dataset) -> Option<&'a str> {
        dataset
            .source
            .as_deref()
            .or_else(|| self.sources.first().map(|s| s.id.as_str()))
    }

    /// A fresh id `prefix-N` not used by any source, group, dataset, action or workspace.
    pub fn next_id(&self, prefix: &str) -> String {
        let used = self
            .sources
            .iter()
            .map(|s| s.id.as_str())
            .chain(self.groups.iter().map(|g| g.id.as_str()))
            .chain(self.datasets().map(|d| d.id.as_str()))
            .chain(self.actions.iter().map(|a| a.id.as_str()))
            .chain(self.workspaces.iter().map(|w| w.id.as_str()));
        let highest = used
            .filter_map(|id| {
                id.strip_prefix(prefix)?
                    .strip_prefix('-')?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .unwrap_or(0);
        format!("{prefix}-{}", highest + 1)
    }
}
