//! Sources: one Serial Studio source object (schema 3) or the project root of a legacy
//! single-source file becomes a Sextant [`Source`] — connection, framing, checksum, decoder
//! and parser.
//!
//! Serial Studio keeps bus settings as an opaque `connection` object of driver properties;
//! several of them are positions in lists the running app builds (port index, device
//! index), which mean nothing on another machine, so those are reported rather than mapped.

use serde_json::{json, Map, Value};
use sextant_telemetry::project::{
    BleSettings, CanSettings, ChecksumKind, Connection, Decoder, DelimiterFormat, FlowControl,
    FrameMode, Framing, ModbusSettings, MqttSettings, MqttVersion, Parity, ParserConfig,
    RegisterGroup, RegisterKind, ScriptLanguage, SerialSettings, Source, StopBits,
    TransformLanguage,
};

use crate::json::{show, Obj};
use crate::report::ImportReport;
use crate::shim;
use crate::text::{escape_delimiter, hex_text, read_hex, resolve_escapes, simplified, split_args};

/// Where the source settings come from: a `sources[]` entry or the legacy project root.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Schema3,
    Legacy,
}

/// Extra inputs that only the first source of a file receives.
#[derive(Default)]
pub(crate) struct RootExtras<'a> {
    /// The legacy top-level `frameParser` code, used when the source has none.
    pub legacy_parser: Option<(&'a str, String)>,
    /// The legacy top-level `separator`, passed to old two-argument parsers.
    pub separator: Option<String>,
}

/// A converted source and what the rest of the import needs to know about it.
pub(crate) struct ImportedSource {
    pub source: Source,
    /// Serial Studio's numeric `sourceId`.
    pub ss_id: i64,
    /// The language a transform without an explicit language runs in: Serial Studio uses
    /// the source parser's language, and Lua for built-in templates.
    pub transform_language: TransformLanguage,
}

/// Serial Studio's parser language codes.
const LANG_JS: i64 = 0;
const LANG_LUA: i64 = 1;
const LANG_TEMPLATE: i64 = 2;

pub(crate) fn import_source(
    obj: &mut Obj,
    shape: Shape,
    id: String,
    ordinal: usize,
    extras: RootExtras,
    r: &mut ImportReport,
) -> ImportedSource {
    let mut ss_id = 0;
    let mut title = String::new();
    if shape == Shape::Schema3 {
        ss_id = obj.i64("sourceId", r).unwrap_or(ordinal as i64);
        title = simplified(&obj.string("title", r).unwrap_or_default());
    }
    if title.is_empty() {
        title = format!("Device {}", ordinal + 1);
    }

    let connection = match shape {
        Shape::Schema3 => connection(obj, r),
        Shape::Legacy => {
            r.push(
                obj.path().to_string(),
                "this file does not record which device to connect to (Serial Studio keeps \
                 that in its own settings); the source is a serial port with no port chosen",
            );
            Connection::Serial(SerialSettings::default())
        }
    };
    let framing = framing(obj, shape, r);
    let (parser, decoder, transform_language) = parser_and_decoder(obj, shape, extras, r);
    if shape == Shape::Schema3 {
        obj.unmapped(
            "streamLane",
            &[],
            "Sextant does not split a source into stream lanes",
            r,
        );
        stray_mqtt_settings(obj, false, r);
    }

    ImportedSource {
        source: Source {
            id,
            title,
            connection,
            framing,
            decoder,
            parser,
            extra: Default::default(),
        },
        ss_id,
        transform_language,
    }
}

// ---------------------------------------------------------------------------------------
// Framing
// ---------------------------------------------------------------------------------------

fn framing(obj: &mut Obj, shape: Shape, r: &mut ImportReport) -> Framing {
    let hex = obj.bool("hexadecimalDelimiters", r).unwrap_or(false);
    // A legacy file without `frameDetection` always meant start + end delimiters.
    let default_detection = if shape == Shape::Legacy { 1 } else { 0 };
    let detection_path = obj.at("frameDetection");
    let mut mode = match obj.i64("frameDetection", r).unwrap_or(default_detection) {
        0 => FrameMode::EndOnly,
        1 => FrameMode::StartEnd,
        2 => FrameMode::None,
        3 => FrameMode::StartOnly,
        other => {
            r.push(
                detection_path.clone(),
                format!("unknown frame detection {other}; using end delimiter only"),
            );
            FrameMode::EndOnly
        }
    };

    let start_path = obj.at("frameStart");
    let end_path = obj.at("frameEnd");
    let start_text = obj.string("frameStart", r).unwrap_or_default();
    // Schema 3 sources default a missing end delimiter to a newline, as Serial Studio does.
    let end_text = match obj.string("frameEnd", r) {
        Some(t) => t,
        None if shape == Shape::Schema3 => "\\n".to_string(),
        None => String::new(),
    };
    let start = delimiter_bytes(&start_text, hex, &start_path, r);
    let mut end = delimiter_bytes(&end_text, hex, &end_path, r);

    if matches!(mode, FrameMode::StartEnd | FrameMode::StartOnly) && start.is_empty() {
        let fallback = if mode == FrameMode::StartEnd {
            "end delimiter only"
        } else {
            "no delimiters (each chunk is a frame)"
        };
        r.push(
            start_path.clone(),
            format!(
                "this frame detection needs a start delimiter but none is set; using {fallback}"
            ),
        );
        mode = if mode == FrameMode::StartEnd {
            FrameMode::EndOnly
        } else {
            FrameMode::None
        };
    }
    if matches!(mode, FrameMode::EndOnly | FrameMode::StartEnd) && end.is_empty() {
        r.push(
            end_path.clone(),
            "this frame detection needs an end delimiter but none is set; using a newline",
        );
        end = b"\n".to_vec();
    }

    let checksum_path = obj.at("checksumAlgorithm");
    let legacy_checksum_path = obj.at("checksum");
    let modern = obj.string("checksumAlgorithm", r);
    let legacy = obj.string("checksum", r);
    let (name, name_path) = match modern {
        Some(name) => (name, checksum_path),
        None => (legacy.unwrap_or_default(), legacy_checksum_path),
    };
    let checksum = match checksum_kind(&name) {
        Ok(kind) => kind,
        Err(why) => {
            r.push(name_path, why);
            ChecksumKind::None
        }
    };

    let (format, encode): (DelimiterFormat, fn(&[u8]) -> String) = if hex {
        (DelimiterFormat::Hex, hex_text)
    } else {
        (DelimiterFormat::Text, escape_delimiter)
    };
    Framing {
        mode,
        delimiter_format: format,
        start: encode(&start),
        end: if end.is_empty() {
            Vec::new()
        } else {
            vec![encode(&end)]
        },
        checksum,
        ..Framing::default()
    }
}

/// The bytes a Serial Studio delimiter stands for.
fn delimiter_bytes(text: &str, hex: bool, path: &str, r: &mut ImportReport) -> Vec<u8> {
    let resolved = resolve_escapes(text);
    if !hex {
        return resolved;
    }
    let read = read_hex(&String::from_utf8_lossy(&resolved));
    if read.skipped_junk {
        r.push(
            path.to_string(),
            format!(
                "{} has characters that are not hex digits; they were skipped, as Serial Studio does",
                show(&Value::String(text.to_string()))
            ),
        );
    }
    if read.odd {
        r.push(
            path.to_string(),
            format!(
                "{} has an odd number of hex digits; the last one was dropped",
                show(&Value::String(text.to_string()))
            ),
        );
    }
    read.bytes
}

/// Serial Studio checksum names. Sextant's checksums are defined as Serial Studio's (see
/// `sextant_telemetry::checksum`), so every name maps to the same algorithm.
fn checksum_kind(name: &str) -> Result<ChecksumKind, String> {
    let key = name.trim().to_ascii_uppercase();
    Ok(match key.as_str() {
        "" | "NONE" => ChecksumKind::None,
        "XOR-8" | "XOR8" => ChecksumKind::Xor8,
        "MOD-256" | "MOD256" => ChecksumKind::Mod256,
        "CRC-8" | "CRC8" => ChecksumKind::Crc8,
        "CRC-16" | "CRC16" => ChecksumKind::Crc16,
        "CRC-16-MODBUS" => ChecksumKind::Crc16Modbus,
        "CRC-16-CCITT" => ChecksumKind::Crc16Ccitt,
        "FLETCHER-16" | "FLETCHER16" => ChecksumKind::Fletcher16,
        "CRC-32" | "CRC32" => ChecksumKind::Crc32,
        "ADLER-32" | "ADLER32" => ChecksumKind::Adler32,
        _ => {
            return Err(format!(
            "unknown checksum {:?}; Serial Studio treats it as no checksum, and so does the import",
            name
        ))
        }
    })
}

// ---------------------------------------------------------------------------------------
// Decoder and parser
// ---------------------------------------------------------------------------------------

fn parser_and_decoder(
    obj: &mut Obj,
    shape: Shape,
    extras: RootExtras,
    r: &mut ImportReport,
) -> (ParserConfig, Decoder, TransformLanguage) {
    let decoder_path = obj.at("decoderMethod");
    let legacy_decoder_path = obj.at("decoder");
    let method = obj.i64("decoderMethod", r);
    let legacy_method = obj.i64("decoder", r);
    let (method, decoder_path) = match method {
        Some(m) => (m, decoder_path),
        None => (legacy_method.unwrap_or(0), legacy_decoder_path),
    };

    let (language, code_path, mut code) = match shape {
        Shape::Schema3 => {
            let language = obj.i64("frameParserLanguage", r).unwrap_or(LANG_JS);
            let path = obj.at("frameParserCode");
            let code = obj.string("frameParserCode", r).unwrap_or_default();
            (language, path, code)
        }
        Shape::Legacy => {
            let path = obj.at("frameParser");
            let code = obj.string("frameParser", r).unwrap_or_default();
            (LANG_JS, path, code)
        }
    };
    let mut code_path = code_path;
    if code.trim().is_empty() && language != LANG_TEMPLATE {
        if let Some((path, legacy)) = extras.legacy_parser {
            code = legacy;
            code_path = path.to_string();
        }
    }

    let transform_language = if language == LANG_JS {
        TransformLanguage::JavaScript
    } else {
        TransformLanguage::Lua
    };

    let parser = match language {
        LANG_JS | LANG_LUA => {
            let script_language = if language == LANG_JS {
                ScriptLanguage::JavaScript
            } else {
                ScriptLanguage::Lua
            };
            script_parser(script_language, code, &code_path, extras.separator, r)
        }
        LANG_TEMPLATE => {
            if !code.trim().is_empty() {
                r.push(
                    code_path.clone(),
                    "script code is kept by Serial Studio but unused with a built-in parser \
                     template; not imported",
                );
            }
            template_parser(obj, r)
        }
        other => {
            r.lost(
                obj.at("frameParserLanguage"),
                format!(
                    "unknown parser language {other}; the source uses Sextant's zero-config \
                     quick plot parser"
                ),
            );
            ParserConfig::QuickPlot
        }
    };
    if language != LANG_TEMPLATE {
        obj.unmapped(
            "frameParserTemplate",
            &[],
            "only used with parser language 2",
            r,
        );
        obj.unmapped(
            "frameParserParams",
            &[],
            "only used with parser language 2",
            r,
        );
    }

    (
        parser,
        decoder(method, &decoder_path, r),
        transform_language,
    )
}

fn script_parser(
    language: ScriptLanguage,
    code: String,
    path: &str,
    separator: Option<String>,
    r: &mut ImportReport,
) -> ParserConfig {
    if code.trim().is_empty() {
        // Serial Studio substitutes its default template, which splits a line on commas.
        r.push(
            path.to_string(),
            "no parser code; Serial Studio's default splits each frame on commas, so the \
             source uses Sextant's delimited parser with \",\"",
        );
        return ParserConfig::Delimited {
            separator: ",".into(),
        };
    }
    if language == ScriptLanguage::JavaScript {
        let two_args = shim::js_parse_params(&code).is_some_and(|p| p.len() >= 2);
        if two_args {
            if let Some(separator) = separator {
                let resolved = String::from_utf8_lossy(&resolve_escapes(&separator)).into_owned();
                if shim::is_legacy_split_parser(&code) && !resolved.is_empty() {
                    // Serial Studio migrates exactly this parser to a plain split; the
                    // built-in delimited parser is the same thing without a script.
                    return ParserConfig::Delimited {
                        separator: escape_delimiter(resolved.as_bytes()),
                    };
                }
                r.push(
                    path.to_string(),
                    "parse() takes the legacy separator argument; a wrapper that passes the \
                     project's separator was appended to the script",
                );
                return ParserConfig::Script {
                    language,
                    code: shim::separator_argument(&code, &resolved),
                };
            }
        }
    }
    ParserConfig::Script { language, code }
}

/// Serial Studio's built-in parser templates (parser language 2), mapped to the closest
/// Sextant built-in parser.
fn template_parser(obj: &mut Obj, r: &mut ImportReport) -> ParserConfig {
    let template_path = obj.at("frameParserTemplate");
    let template = obj.string("frameParserTemplate", r).unwrap_or_default();
    let params_path = obj.at("frameParserParams");
    let empty = Map::new();
    let params_map = obj.object("frameParserParams", r).unwrap_or(&empty);
    let mut p = Obj::new(params_map, params_path);

    let parser = match template.trim() {
        "" => quick_plot(
            r,
            &template_path,
            "parser language 2 without a template".into(),
        ),
        name => match PARSER_TEMPLATES
            .iter()
            .find(|(names, _)| names.contains(&name))
        {
            Some((_, build)) => build(&mut p, &template_path, r),
            None => quick_plot(
                r,
                &template_path,
                format!("built-in template {name:?} has no Sextant equivalent"),
            ),
        },
    };
    p.finish(r);
    parser
}

/// Builds the Sextant parser for one Serial Studio template from its parameters object;
/// the second argument is the template's path in the file.
type TemplateBuilder = fn(&mut Obj, &str, &mut ImportReport) -> ParserConfig;

/// Serial Studio's template names, and the builder of the Sextant parser each maps to.
const PARSER_TEMPLATES: [(&[&str], TemplateBuilder); 5] = [
    (&["delimited"], delimited_template),
    (&["fixed_width"], fixed_width_template),
    (&["key_value"], key_value_template),
    (&["json_data"], json_template),
    (&["nmea_0183", "nmea0183", "nmea"], nmea_template),
];

/// The fallback for a template Sextant cannot map: the zero-config quick plot parser.
fn quick_plot(r: &mut ImportReport, template_path: &str, why: String) -> ParserConfig {
    r.push(
        template_path.to_string(),
        format!("{why}; the source uses Sextant's zero-config quick plot parser"),
    );
    ParserConfig::QuickPlot
}

/// The `delimited` template: Sextant's delimited parser (no quoting, trimming or skipping).
fn delimited_template(p: &mut Obj, _template_path: &str, r: &mut ImportReport) -> ParserConfig {
    let sep = p.string("separator", r).unwrap_or_else(|| ",".into());
    let sep = escape_delimiter(&resolve_escapes(&sep));
    p.unmapped(
        "quoteChar",
        &[],
        "Sextant's delimited parser has no quoting",
        r,
    );
    p.unmapped(
        "trimFields",
        &[],
        "Sextant's delimited parser does not trim fields",
        r,
    );
    p.unmapped(
        "skipEmpty",
        &[],
        "Sextant's delimited parser keeps empty fields",
        r,
    );
    if sep.is_empty() {
        r.push(p.at("separator"), "empty separator; using \",\"");
        ParserConfig::Delimited {
            separator: ",".into(),
        }
    } else {
        ParserConfig::Delimited { separator: sep }
    }
}

/// The `fixed_width` template: Sextant's fixed-width parser, or a split on spaces when
/// the widths are unusable (as Serial Studio does).
fn fixed_width_template(p: &mut Obj, _template_path: &str, r: &mut ImportReport) -> ParserConfig {
    let entries = key_list(p, "widths", r);
    let widths: Vec<usize> = entries
        .iter()
        .filter_map(|w| w.parse::<usize>().ok())
        .filter(|w| *w > 0)
        .collect();
    p.unmapped(
        "trimFields",
        &[json!(true)],
        "Sextant's fixed-width parser does not trim fields",
        r,
    );
    if widths.is_empty() || widths.len() != entries.len() {
        r.push(
            p.at("widths"),
            "no usable column widths (Serial Studio then splits on whitespace); the \
             source uses Sextant's delimited parser with a single space",
        );
        ParserConfig::Delimited {
            separator: " ".into(),
        }
    } else {
        ParserConfig::FixedWidth { widths }
    }
}

/// The `key_value` template: Sextant's key=value parser for the listed keys.
fn key_value_template(p: &mut Obj, template_path: &str, r: &mut ImportReport) -> ParserConfig {
    let keys = key_list(p, "keys", r);
    let pair = p.string("pairSeparator", r).unwrap_or_else(|| ",".into());
    let kv = p.string("kvSeparator", r).unwrap_or_else(|| "=".into());
    p.unmapped(
        "numericOnly",
        &[json!(true)],
        "Sextant's key=value parser does not skip text values",
        r,
    );
    if keys.is_empty() {
        return quick_plot(r, template_path, "key=value template without keys".into());
    }
    // Sextant reads these separators with escapes, as it does delimiters.
    let escape = |s: String, default: &str| {
        if s.is_empty() {
            default.to_string()
        } else {
            escape_delimiter(&resolve_escapes(&s))
        }
    };
    ParserConfig::KeyValue {
        keys,
        pair_separator: escape(pair, ","),
        value_separator: escape(kv, "="),
    }
}

/// The `json_data` template: Sextant's JSON parser for the listed fields.
fn json_template(p: &mut Obj, template_path: &str, r: &mut ImportReport) -> ParserConfig {
    let paths = key_list(p, "fields", r);
    if paths.is_empty() {
        quick_plot(r, template_path, "JSON template without fields".into())
    } else {
        ParserConfig::Json { paths }
    }
}

/// The NMEA-0183 template: Sextant's NMEA parser, whose slots may be ordered differently.
fn nmea_template(_p: &mut Obj, template_path: &str, r: &mut ImportReport) -> ParserConfig {
    r.push(
        template_path.to_string(),
        "NMEA-0183 mapped to Sextant's NMEA parser, whose slot order may differ; \
         check the dataset indices",
    );
    ParserConfig::Nmea
}

/// A comma-separated list (or a JSON list) of names, as Serial Studio's templates take.
fn key_list(p: &mut Obj, key: &str, r: &mut ImportReport) -> Vec<String> {
    match p.raw(key) {
        Some(Value::String(s)) => s
            .split(',')
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(|s| s.trim().to_string()))
            .filter(|k| !k.is_empty())
            .collect(),
        Some(other) => {
            r.push(
                p.at(key),
                format!(
                    "expected a comma-separated list, found {}; ignored",
                    show(other)
                ),
            );
            Vec::new()
        }
        None => Vec::new(),
    }
}

/// Serial Studio's decoder codes. Its "hexadecimal" and "base64" decoders hand the parser
/// the frame bytes spelled as hex or base64 text, which is what Sextant's decoders of the
/// same names do.
fn decoder(method: i64, path: &str, r: &mut ImportReport) -> Decoder {
    match method {
        0 => Decoder::PlainText,
        1 => Decoder::Hex,
        2 => Decoder::Base64,
        3 => Decoder::Binary,
        other => {
            r.push(
                path.to_string(),
                format!("unknown decoder {other}; using plain text"),
            );
            Decoder::PlainText
        }
    }
}

// ---------------------------------------------------------------------------------------
// Connection
// ---------------------------------------------------------------------------------------

/// Serial Studio's standard baud list; small `baudRate` values index into it.
const BAUD_RATES: [u32; 16] = [
    110, 150, 300, 1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400, 256000, 460800,
    576000, 921600,
];

fn connection(obj: &mut Obj, r: &mut ImportReport) -> Connection {
    let bus_path = obj.at("busType");
    let bus = obj.i64("busType", r).unwrap_or(0);
    let conn_path = obj.at("connection");
    let empty = Map::new();
    let settings = match obj.object("connection", r) {
        Some(map) => map,
        None => {
            if matches!(bus, 0 | 1 | 2 | 4 | 5 | 8 | 9) {
                r.push(
                    conn_path.clone(),
                    "no connection settings recorded; Sextant's defaults for this bus are used",
                );
            }
            &empty
        }
    };
    let mut c = Obj::new(settings, conn_path);
    let connection = match bus {
        0 => Connection::Serial(serial(&mut c, "portIndex", r)),
        1 => network(&mut c, r),
        2 => ble(&mut c, r),
        4 => modbus(&mut c, r),
        5 => can(&mut c, r),
        8 => process(&mut c, r),
        9 => mqtt(&mut c, r),
        other => {
            let name = if other == 3 { " (audio input)" } else { "" };
            r.lost(
                bus_path,
                format!(
                    "bus type {other}{name} is not supported by Sextant; the source is a \
                     serial port with no port chosen"
                ),
            );
            // Everything under `connection` belongs to the unsupported bus.
            for key in settings.keys() {
                let _ = c.raw(key);
            }
            if !settings.is_empty() {
                r.push(
                    c.path().to_string(),
                    format!(
                        "{} setting(s) of the unsupported bus not imported",
                        settings.len()
                    ),
                );
            }
            Connection::Serial(SerialSettings::default())
        }
    };
    // On an MQTT source these are spellings the mapping above does not know.
    stray_mqtt_settings(&mut c, bus == MQTT_BUS, r);
    c.finish(r);
    connection
}

/// Serial Studio's bus type number of the MQTT subscriber.
const MQTT_BUS: i64 = 9;

/// The MQTT subscriber's settings with Serial Studio's defaults for them (the values its
/// MQTT driver starts with). Serial Studio can write these next to another bus's settings;
/// there they say nothing about the source.
fn mqtt_defaults() -> [(&'static str, Value); 21] {
    [
        ("hostname", json!("127.0.0.1")),
        ("port", json!(1883)),
        ("topicFilter", json!("")),
        ("clientId", json!("")),
        ("username", json!("")),
        ("password", json!("")),
        // List positions: "MQTT 5.0" is the third version, "Secure Protocols Only" the
        // third TLS protocol, "Auto Verify Peer" the first verify mode.
        ("mqttVersion", json!(2)),
        ("cleanSession", json!(true)),
        ("keepAlive", json!(60)),
        ("autoKeepAlive", json!(true)),
        ("sslEnabled", json!(false)),
        ("sslProtocol", json!(2)),
        ("peerVerifyMode", json!(0)),
        ("peerVerifyDepth", json!(10)),
        ("alpnEnabled", json!(false)),
        ("alpnProtocol", json!("x-amzn-mqtt-ca")),
        ("caCertificates", json!(0)),
        ("clientCertificate", json!("")),
        ("privateKey", json!("")),
        ("keyPassphrase", json!("")),
        ("mqttTopic", json!("")),
    ]
}

/// Whether `key` names an MQTT or TLS setting (`mqttTls…`, `ssl…`, certificates).
fn is_mqtt_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    mqtt_defaults().iter().any(|(k, _)| *k == key)
        || lower.starts_with("mqtt")
        || lower.starts_with("ssl")
        || lower.starts_with("tls")
        || lower.contains("certificate")
}

/// MQTT and TLS settings nothing above read: in an object that does not describe an MQTT
/// source (another bus's connection, a source, the project root), or spellings an MQTT
/// connection does not map (`own`). At Serial Studio's defaults (or blank) they are not the
/// person's choice and are dropped silently; any other value is a Note. Secrets are named,
/// never shown.
pub(crate) fn stray_mqtt_settings(c: &mut Obj, own: bool, r: &mut ImportReport) {
    let defaults = mqtt_defaults();
    for key in c.unread_keys() {
        if !is_mqtt_key(key) {
            continue;
        }
        let Some(value) = c.raw(key) else { continue };
        let default = defaults.iter().find(|(k, _)| *k == key).map(|(_, v)| v);
        if crate::json::is_blank(value) || default.is_some_and(|d| crate::json::same(d, value)) {
            continue;
        }
        let lower = key.to_ascii_lowercase();
        let secret = ["password", "passphrase", "privatekey", "secret"]
            .iter()
            .any(|w| lower.contains(w));
        let what = if secret {
            String::new()
        } else {
            format!(" ({})", show(value))
        };
        let why = if own {
            "Sextant has no such MQTT setting"
        } else {
            "an MQTT setting, but this is not an MQTT source's connection"
        };
        r.note(c.at(key), format!("`{key}`{what} not imported: {why}"));
    }
}

/// A serial port name as Sextant opens it: Qt records `ttyUSB0`, Sextant wants a path.
fn port_path(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    let windows = upper.starts_with("COM") || name.starts_with("\\\\");
    if name.is_empty() || name.starts_with('/') || windows {
        name.to_string()
    } else {
        format!("/dev/{name}")
    }
}

fn index_setting<T: Copy>(
    c: &mut Obj,
    key: &str,
    options: &[T],
    default: T,
    r: &mut ImportReport,
) -> T {
    match c.i64(key, r) {
        None => default,
        Some(i) => match usize::try_from(i).ok().and_then(|i| options.get(i)) {
            Some(v) => *v,
            None => {
                r.push(c.at(key), format!("unknown choice {i}; using the default"));
                default
            }
        },
    }
}

fn baud(c: &mut Obj, r: &mut ImportReport) -> Option<u32> {
    let path = c.at("baudRate");
    let v = c.i64("baudRate", r)?;
    if v >= 110 {
        match u32::try_from(v) {
            Ok(b) if b <= 15_000_000 => Some(b),
            _ => {
                r.push(
                    path,
                    format!("baud rate {v} is above 15 Mbaud; using 115200"),
                );
                None
            }
        }
    } else {
        match usize::try_from(v).ok().and_then(|i| BAUD_RATES.get(i)) {
            Some(b) => Some(*b),
            None => {
                r.push(path, format!("baud rate {v} is not valid; using 115200"));
                None
            }
        }
    }
}

/// UART settings; Modbus RTU shares the same keys apart from the port index key.
fn serial(c: &mut Obj, port_index_key: &str, r: &mut ImportReport) -> SerialSettings {
    let mut s = SerialSettings::default();
    if let Some(b) = baud(c, r) {
        s.baud = b;
    }
    s.parity = index_setting(
        c,
        "parityIndex",
        &[
            Parity::None,
            Parity::Even,
            Parity::Odd,
            Parity::Space,
            Parity::Mark,
        ],
        Parity::None,
        r,
    );
    s.data_bits = index_setting(c, "dataBitsIndex", &[5u8, 6, 7, 8], 8, r);
    s.stop_bits = index_setting(
        c,
        "stopBitsIndex",
        &[StopBits::One, StopBits::OnePointFive, StopBits::Two],
        StopBits::One,
        r,
    );
    s.flow_control = index_setting(
        c,
        "flowControlIndex",
        &[FlowControl::None, FlowControl::RtsCts, FlowControl::XonXoff],
        FlowControl::None,
        r,
    );
    if let Some(dtr) = c.bool("dtr", r) {
        s.dtr = dtr;
    }
    if let Some(a) = c.bool("autoReconnect", r) {
        s.auto_reconnect = a;
    }

    let port_index_path = c.at(port_index_key);
    let port_index = c.i64(port_index_key, r);
    let mut port = None;
    if let Some(id) = device_id(c, r) {
        let mut d = Obj::new(id, c.at("deviceId"));
        port = d.string("portName", r).filter(|p| !p.trim().is_empty());
        // Hardware ids let Serial Studio find the same adapter under another name.
        for key in ["vid", "pid", "serial", "description"] {
            d.unmapped(
                key,
                &[],
                "Sextant opens the port by name and does not match adapters by hardware id",
                r,
            );
        }
        d.finish(r);
    }
    match port {
        Some(p) => s.port = port_path(p.trim()),
        None => {
            let why = match port_index {
                Some(i) if i > 0 => format!(
                    "the port is recorded only as position {i} in Serial Studio's port list; \
                     choose the port in Sextant"
                ),
                _ => "no serial port recorded; choose the port in Sextant".to_string(),
            };
            r.push(port_index_path, why);
        }
    }
    s
}

fn device_id<'a>(c: &mut Obj<'a>, r: &mut ImportReport) -> Option<&'a Map<String, Value>> {
    c.object("deviceId", r)
}

fn port_number(c: &mut Obj, key: &str, r: &mut ImportReport) -> Option<u16> {
    let path = c.at(key);
    let v = c.i64(key, r)?;
    match u16::try_from(v) {
        Ok(p) => Some(p),
        Err(_) => {
            r.push(path, format!("{v} is not a port number; using the default"));
            None
        }
    }
}

fn network(c: &mut Obj, r: &mut ImportReport) -> Connection {
    let socket_path = c.at("socketTypeIndex");
    let socket = c.i64("socketTypeIndex", r).unwrap_or(0);
    let address = c
        .string("address", r)
        .map(|a| a.trim().to_string())
        .unwrap_or_default();
    let port_given = c.has("tcpPort");
    let tcp_port = port_number(c, "tcpPort", r);
    let local = port_number(c, "udpLocalPort", r);
    let remote = port_number(c, "udpRemotePort", r);
    let multicast = c.bool("udpMulticast", r).unwrap_or(false);
    for key in [
        "webSocketUrl",
        "wsUrl",
        "url",
        "httpUrl",
        "httpMethod",
        "httpMethodIndex",
        "httpPollInterval",
        "httpHeaders",
        "httpBody",
        "wsSendFormat",
        "ignoreTlsErrors",
    ] {
        c.unmapped_lost(
            key,
            &[],
            "WebSocket and HTTP sources are not supported by Sextant",
            r,
        );
    }
    match socket {
        1 => Connection::Udp {
            local_port: local.unwrap_or(0),
            remote_host: if address.is_empty() || multicast {
                None
            } else {
                Some(address.clone())
            },
            remote_port: remote.filter(|p| *p != 0),
            multicast_group: if multicast && !address.is_empty() {
                Some(address)
            } else {
                None
            },
            multicast_interface: None,
        },
        other => {
            if other != 0 {
                r.lost(
                    socket_path,
                    format!(
                        "socket type {other} (WebSocket/HTTP) is not supported by Sextant; \
                         imported as a TCP client"
                    ),
                );
            }
            let host = if address.is_empty() {
                r.push(c.at("address"), "no host recorded; using 127.0.0.1");
                "127.0.0.1".to_string()
            } else {
                address
            };
            let port = match tcp_port {
                Some(p) if p != 0 => p,
                _ => {
                    if !port_given {
                        r.push(c.at("tcpPort"), "no TCP port recorded; using 23, change it");
                    }
                    23
                }
            };
            Connection::Tcp {
                host,
                port,
                tls: false,
            }
        }
    }
}

fn ble(c: &mut Obj, r: &mut ImportReport) -> Connection {
    let mut settings = BleSettings::default();
    let index_path = c.at("deviceIndex");
    let index = c.i64("deviceIndex", r);
    if let Some(id) = device_id(c, r) {
        let mut d = Obj::new(id, c.at("deviceId"));
        let name = d.string("name", r).unwrap_or_default();
        let address = d.string("address", r).unwrap_or_default();
        settings.device = if address.trim().is_empty() {
            name.trim().to_string()
        } else {
            address.trim().to_string()
        };
        d.finish(r);
    }
    if settings.device.is_empty() {
        r.push(
            index_path,
            match index {
                Some(i) if i >= 0 => format!(
                    "the device is recorded only as position {i} in Serial Studio's scan list; \
                     pick the device in Sextant"
                ),
                _ => "no device recorded; pick the device in Sextant".to_string(),
            },
        );
    }
    settings.service = c.string("serviceUuid", r).unwrap_or_default();
    settings.notify_characteristic = c.string("notifyCharacteristicUuid", r).unwrap_or_default();
    let ch_path = c.at("characteristicIndex");
    let ch = c.i64("characteristicIndex", r);
    if settings.notify_characteristic.trim().is_empty() {
        if let Some(i) = ch.filter(|i| *i >= 0) {
            r.push(
                ch_path,
                format!(
                    "the characteristic is recorded only as position {i} in a list; pick the \
                     notify characteristic in Sextant"
                ),
            );
        }
    }
    Connection::Ble(settings)
}

fn modbus(c: &mut Obj, r: &mut ImportReport) -> Connection {
    let mut m = ModbusSettings {
        // Protocol 0 is RTU (serial), 1 is TCP.
        rtu: c.i64("protocolIndex", r).unwrap_or(0) != 1,
        ..ModbusSettings::default()
    };
    let slave_path = c.at("slaveAddress");
    if let Some(s) = c.i64("slaveAddress", r) {
        match u8::try_from(s) {
            Ok(id) if (1..=247).contains(&id) => m.slave_id = id,
            _ => r.push(
                slave_path,
                format!("slave address {s} is outside 1–247; using 1"),
            ),
        }
    }
    let poll_path = c.at("pollInterval");
    if let Some(p) = c.i64("pollInterval", r) {
        if (10..=60_000).contains(&p) {
            m.poll_interval_ms = p as u32;
        } else {
            r.push(
                poll_path,
                format!("poll interval {p} ms is outside 10–60000; using 100"),
            );
        }
    }
    if let Some(host) = c.string("host", r).filter(|h| !h.trim().is_empty()) {
        m.host = host.trim().to_string();
    }
    if let Some(port) = port_number(c, "port", r).filter(|p| *p != 0) {
        m.port = port;
    }
    if m.rtu {
        m.serial = Some(serial(c, "serialPortIndex", r));
    } else {
        // Serial settings of a TCP project are leftovers of the UI; nothing to keep.
        c.skip(&[
            "serialPortIndex",
            "baudRate",
            "parityIndex",
            "dataBitsIndex",
            "stopBitsIndex",
            "deviceId",
        ]);
    }
    let groups_path = c.at("registerGroups");
    if let Some(groups) = c.array("registerGroups", r) {
        for (i, g) in groups.iter().enumerate() {
            let path = crate::json::index(&groups_path, i);
            let Some(map) = g.as_object() else {
                r.push(
                    path,
                    format!("expected an object, found {}; ignored", show(g)),
                );
                continue;
            };
            let mut o = Obj::new(map, path.clone());
            let kind = match o.i64("type", r) {
                Some(0) => Some(RegisterKind::Holding),
                Some(1) => Some(RegisterKind::Input),
                Some(2) => Some(RegisterKind::Coil),
                Some(3) => Some(RegisterKind::Discrete),
                _ => None,
            };
            let start = o.i64("start", r).and_then(|v| u16::try_from(v).ok());
            let count = o.i64("count", r).and_then(|v| u16::try_from(v).ok());
            o.finish(r);
            match (kind, start, count) {
                (Some(kind), Some(start), Some(count)) if count > 0 => {
                    m.groups.push(RegisterGroup { kind, start, count })
                }
                _ => r.push(
                    path,
                    "register group with an unknown type, start or count; skipped",
                ),
            }
        }
    }
    Connection::Modbus(m)
}

fn can(c: &mut Obj, r: &mut ImportReport) -> Connection {
    let mut s = CanSettings::default();
    let mut plugin = String::new();
    let iface_path = c.at("interfaceIndex");
    let _ = c.i64("pluginIndex", r);
    let iface_index = c.i64("interfaceIndex", r);
    let mut iface = None;
    if let Some(id) = device_id(c, r) {
        let mut d = Obj::new(id, c.at("deviceId"));
        plugin = d.string("plugin", r).unwrap_or_default();
        iface = d.string("interface", r).filter(|i| !i.trim().is_empty());
        d.finish(r);
    }
    match plugin.trim().to_ascii_lowercase().as_str() {
        "" | "socketcan" | "virtualcan" => {}
        "slcan" | "serialcan" => s.slcan = true,
        other => r.push(
            c.at("deviceId.plugin"),
            format!("CAN backend {other:?} is not supported; SocketCAN is used"),
        ),
    }
    match iface {
        Some(i) => s.interface = i.trim().to_string(),
        None => r.push(
            iface_path,
            match iface_index {
                Some(i) => {
                    format!("the interface is recorded only as position {i} in a list; using can0")
                }
                None => "no interface recorded; using can0".to_string(),
            },
        ),
    }
    let bitrate_path = c.at("bitrate");
    if let Some(b) = c.i64("bitrate", r) {
        match u32::try_from(b) {
            Ok(b) if b >= 10_000 => s.bitrate = b,
            _ => r.push(
                bitrate_path,
                format!("bitrate {b} is a list position, not a rate; using 500000"),
            ),
        }
    }
    if let Some(fd) = c.bool("canFD", r) {
        s.fd = fd;
    }
    if let Some(d) = c.i64("dataBitrate", r).and_then(|d| u32::try_from(d).ok()) {
        if s.fd && d > 0 {
            s.data_bitrate = Some(d);
        }
    }
    if let Some(l) = c.bool("listenOnly", r) {
        s.listen_only = l;
    }
    c.unmapped(
        "loopback",
        &[],
        "Sextant does not put the CAN interface in loopback",
        r,
    );
    c.unmapped(
        "tpReassembly",
        &[],
        "Sextant does not reassemble multi-frame (ISO-TP) messages",
        r,
    );
    Connection::Can(s)
}

fn process(c: &mut Obj, r: &mut ImportReport) -> Connection {
    let mode = c.i64("mode", r).unwrap_or(0);
    let program = c.string("executable", r).unwrap_or_default();
    let args = c.string("arguments", r).unwrap_or_default();
    let dir = c.string("workingDir", r).filter(|d| !d.trim().is_empty());
    let pipe = c.string("pipePath", r).unwrap_or_default();
    if mode == 1 {
        if pipe.trim().is_empty() {
            r.push(c.at("pipePath"), "no named pipe recorded");
        }
        Connection::NamedPipe { path: pipe }
    } else {
        if mode != 0 {
            r.push(
                c.at("mode"),
                format!("unknown process mode {mode}; launching a program"),
            );
        }
        if program.trim().is_empty() {
            r.push(c.at("executable"), "no program recorded");
        }
        Connection::Process {
            program,
            args: split_args(&args),
            working_dir: dir,
        }
    }
}

fn mqtt(c: &mut Obj, r: &mut ImportReport) -> Connection {
    let mut m = MqttSettings::default();
    if let Some(h) = c.string("hostname", r).filter(|h| !h.trim().is_empty()) {
        m.host = h.trim().to_string();
    }
    if let Some(p) = port_number(c, "port", r).filter(|p| *p != 0) {
        m.port = p;
    }
    m.topic = c.string("topicFilter", r).unwrap_or_else(|| "#".into());
    if m.topic.trim().is_empty() {
        r.push(
            c.at("topicFilter"),
            "no topic filter recorded; subscribing to #",
        );
        m.topic = "#".into();
    }
    m.client_id = c.string("clientId", r).unwrap_or_default();
    m.username = c.string("username", r).filter(|u| !u.is_empty());
    if c.raw("password").is_some_and(|p| !crate::json::is_blank(p)) {
        // Never echo the secret itself.
        r.push(
            c.at("password"),
            "a password is stored in the file; not imported (Sextant keeps secrets in the OS \
             keyring, enter it there)",
        );
    }
    let version_path = c.at("mqttVersion");
    // Serial Studio stores a list position (0: 3.1, 1: 3.1.1, 2: 5.0); accept Qt's protocol
    // numbers (3, 4, 5) too. Its default is MQTT 5.
    m.version = match c.i64("mqttVersion", r) {
        None | Some(2) | Some(5) => MqttVersion::V5,
        Some(1) | Some(4) => MqttVersion::V311,
        Some(0) | Some(3) => {
            r.push(
                version_path,
                "MQTT 3.1 is not supported; using MQTT 3.1.1, which brokers accept from 3.1 clients",
            );
            MqttVersion::V311
        }
        Some(other) => {
            r.push(
                version_path,
                format!("unknown MQTT version {other}; using 5"),
            );
            MqttVersion::V5
        }
    };
    if let Some(clean) = c.bool("cleanSession", r) {
        m.clean_session = clean;
    }
    let ka_path = c.at("keepAlive");
    if let Some(ka) = c.i64("keepAlive", r) {
        match u16::try_from(ka) {
            Ok(ka) => m.keep_alive_s = ka,
            Err(_) => r.push(
                ka_path,
                format!("keep-alive {ka} s is out of range; using 30"),
            ),
        }
    }
    c.unmapped(
        "autoKeepAlive",
        &[json!(true)],
        "Sextant always sends keep-alive pings",
        r,
    );
    if let Some(tls) = c.bool("sslEnabled", r) {
        m.tls = tls;
    }
    for key in [
        "sslProtocol",
        "peerVerifyMode",
        "peerVerifyDepth",
        "alpnEnabled",
        "alpnProtocol",
    ] {
        if m.tls {
            // Serial Studio's defaults are not a choice the person made.
            let defaults: Vec<Value> = mqtt_defaults()
                .into_iter()
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v)
                .collect();
            c.unmapped(key, &defaults, "Sextant uses its own TLS settings", r);
        } else {
            c.skip(&[key]);
        }
    }
    for key in [
        "caCertificates",
        "clientCertificate",
        "privateKey",
        "keyPassphrase",
    ] {
        c.unmapped(
            key,
            &[],
            "certificates and keys are not imported; configure TLS in Sextant",
            r,
        );
    }
    Connection::Mqtt(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_names_map_by_algorithm() {
        assert_eq!(checksum_kind(""), Ok(ChecksumKind::None));
        assert_eq!(checksum_kind("CRC-16"), Ok(ChecksumKind::Crc16));
        assert_eq!(checksum_kind("CRC-16-CCITT"), Ok(ChecksumKind::Crc16Ccitt));
        assert_eq!(checksum_kind("CRC-8"), Ok(ChecksumKind::Crc8));
        assert_eq!(
            checksum_kind("CRC-16-MODBUS"),
            Ok(ChecksumKind::Crc16Modbus)
        );
        assert_eq!(checksum_kind("CRC-32"), Ok(ChecksumKind::Crc32));
        assert_eq!(checksum_kind("Adler-32"), Ok(ChecksumKind::Adler32));
        assert_eq!(checksum_kind("Fletcher-16"), Ok(ChecksumKind::Fletcher16));
        assert_eq!(checksum_kind("XOR-8"), Ok(ChecksumKind::Xor8));
        assert_eq!(checksum_kind("MOD-256"), Ok(ChecksumKind::Mod256));
        assert!(checksum_kind("SHA-1").is_err());
    }

    #[test]
    fn serial_studio_crc16_is_ccitt_false() {
        // The check value of CRC-16/CCITT-FALSE over "123456789" is 0x29B1; Serial Studio's
        // table-free CRC-16 produces the same, and so must Sextant's `crc16`.
        fn serial_studio_crc16(data: &[u8]) -> u16 {
            let mut crc: u16 = 0xFFFF;
            for &b in data {
                let mut x = ((crc >> 8) as u8) ^ b;
                x ^= x >> 4;
                crc = (crc << 8) ^ ((x as u16) << 12) ^ ((x as u16) << 5) ^ (x as u16);
            }
            crc
        }
        assert_eq!(serial_studio_crc16(b"123456789"), 0x29B1);
        assert_eq!(ChecksumKind::Crc16.compute(b"123456789"), 0x29B1);
        assert_eq!(
            ChecksumKind::Crc16.compute(b"3200,88.5"),
            serial_studio_crc16(b"3200,88.5") as u32
        );
    }

    #[test]
    fn port_names_become_paths() {
        assert_eq!(port_path("ttyUSB0"), "/dev/ttyUSB0");
        assert_eq!(port_path("/dev/ttyACM1"), "/dev/ttyACM1");
        assert_eq!(port_path("COM3"), "COM3");
        assert_eq!(port_path("cu.usbserial-10"), "/dev/cu.usbserial-10");
    }
}
