//! Mapping rules as data: each case is a small Serial Studio document, the values expected
//! at JSON pointers of the imported Sextant project, and the source paths the report must
//! mention.

use serde_json::{json, Value};
use sextant_import::import_serial_studio;

struct Case {
    name: &'static str,
    doc: Value,
    expect: Vec<(&'static str, Value)>,
    reported: Vec<&'static str>,
}

/// A schema 3 project with one source (`source` keys override the defaults) and one group.
fn project(source: Value, groups: Value) -> Value {
    let mut s = json!({
        "sourceId": 0,
        "busType": 0,
        "connection": {"deviceId": {"portName": "ttyS0"}},
        "frameDetection": 0,
        "frameEnd": "\\n",
        "frameParserCode": "function parse(frame) { return frame.split(','); }",
        "frameParserLanguage": 0
    });
    if let (Some(base), Some(extra)) = (s.as_object_mut(), source.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    json!({"title": "T", "schemaVersion": 3, "nextUniqueId": 100, "sources": [s], "groups": groups})
}

/// `doc` with `key` set to `value` at the top level.
fn with(mut doc: Value, key: &str, value: Value) -> Value {
    if let Some(map) = doc.as_object_mut() {
        map.insert(key.to_string(), value);
    }
    doc
}

/// `doc` without the top-level `key`.
fn without(mut doc: Value, key: &str) -> Value {
    if let Some(map) = doc.as_object_mut() {
        map.remove(key);
    }
    doc
}

fn one_group(widget: &str, datasets: Value) -> Value {
    json!([{"title": "G", "widget": widget, "datasets": datasets}])
}

fn ds(extra: Value) -> Value {
    let mut d = json!({"title": "D", "index": 1});
    if let (Some(base), Some(extra)) = (d.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    d
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let plain = || one_group("", json!([ds(json!({}))]));

    for (name, kind) in [
        ("", "none"),
        ("XOR-8", "xor8"),
        ("MOD-256", "mod256"),
        ("CRC-8", "crc8"),
        ("CRC-16", "crc16"),
        ("CRC-16-MODBUS", "crc16-modbus"),
        ("CRC-16-CCITT", "crc16-ccitt"),
        ("Fletcher-16", "fletcher16"),
        ("CRC-32", "crc32"),
        ("Adler-32", "adler32"),
    ] {
        cases.push(Case {
            name: "checksum name",
            doc: project(json!({"checksumAlgorithm": name}), plain()),
            expect: vec![("/sources/0/framing/checksum", json!(kind))],
            reported: vec![],
        });
    }
    for name in ["BLAKE3", "SHA-1"] {
        cases.push(Case {
            name: "checksum without an equivalent",
            doc: project(json!({"checksum": name}), plain()),
            expect: vec![("/sources/0/framing/checksum", json!("none"))],
            reported: vec!["sources[0].checksum"],
        });
    }
    for (code, decoder) in [(0, "plainText"), (1, "hex"), (2, "base64"), (3, "binary")] {
        cases.push(Case {
            name: "decoder code",
            doc: project(json!({"decoderMethod": code}), plain()),
            expect: vec![("/sources/0/decoder", json!(decoder))],
            reported: vec![],
        });
        cases.push(Case {
            name: "legacy decoder key",
            doc: project(json!({"decoder": code}), plain()),
            expect: vec![("/sources/0/decoder", json!(decoder))],
            reported: vec![],
        });
    }
    for (code, mode) in [
        (0, "endOnly"),
        (1, "startEnd"),
        (2, "none"),
        (3, "startOnly"),
    ] {
        cases.push(Case {
            name: "frame detection",
            doc: project(
                json!({"frameDetection": code, "frameStart": "<", "frameEnd": ">"}),
                plain(),
            ),
            expect: vec![
                ("/sources/0/framing/mode", json!(mode)),
                ("/sources/0/framing/start", json!("<")),
                ("/sources/0/framing/end/0", json!(">")),
            ],
            reported: vec![],
        });
    }
    for end in ["\\r\\n", "\r\n"] {
        cases.push(Case {
            name: "escaped and literal delimiters mean the same",
            doc: project(json!({"frameEnd": end}), plain()),
            expect: vec![
                ("/sources/0/framing/end", json!(["\\r\\n"])),
                ("/sources/0/framing/delimiterFormat", json!("text")),
            ],
            reported: vec![],
        });
    }
    cases.push(Case {
        name: "a backslash in a text delimiter stays a backslash",
        doc: project(json!({"frameEnd": "\\q;"}), plain()),
        expect: vec![("/sources/0/framing/end", json!(["\\\\q;"]))],
        reported: vec![],
    });
    cases.push(Case {
        name: "hex delimiters in any spelling",
        doc: project(
            json!({"hexadecimalDelimiters": true, "frameDetection": 1, "frameStart": "0xAA,0x55", "frameEnd": "0d0a"}),
            plain(),
        ),
        expect: vec![
            ("/sources/0/framing/delimiterFormat", json!("hex")),
            ("/sources/0/framing/start", json!("AA 55")),
            ("/sources/0/framing/end", json!(["0D 0A"])),
        ],
        reported: vec![],
    });

    // Connections per bus type.
    cases.push(Case {
        name: "UART settings",
        doc: project(
            json!({"connection": {"baudRate": 9, "parityIndex": 2, "dataBitsIndex": 2, "stopBitsIndex": 2,
                                  "flowControlIndex": 1, "dtr": false, "autoReconnect": false,
                                  "deviceId": {"portName": "COM7"}}}),
            plain(),
        ),
        expect: vec![
            ("/sources/0/connection/type", json!("serial")),
            ("/sources/0/connection/port", json!("COM7")),
            ("/sources/0/connection/baud", json!(57600)),
            ("/sources/0/connection/parity", json!("odd")),
            ("/sources/0/connection/dataBits", json!(7)),
            ("/sources/0/connection/stopBits", json!("two")),
            ("/sources/0/connection/flowControl", json!("rtsCts")),
            ("/sources/0/connection/dtr", json!(false)),
            ("/sources/0/connection/autoReconnect", json!(false)),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "a port known only by list position",
        doc: project(
            json!({"connection": {"portIndex": 3, "baudRate": 921600}}),
            plain(),
        ),
        expect: vec![
            ("/sources/0/connection/port", json!("")),
            ("/sources/0/connection/baud", json!(921600)),
        ],
        reported: vec!["sources[0].connection.portIndex"],
    });
    cases.push(Case {
        name: "TCP client",
        doc: project(json!({"busType": 1, "connection": {"socketTypeIndex": 0, "address": "10.0.0.2", "tcpPort": 8080}}), plain()),
        expect: vec![
            ("/sources/0/connection/type", json!("tcp")),
            ("/sources/0/connection/host", json!("10.0.0.2")),
            ("/sources/0/connection/port", json!(8080)),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "UDP multicast",
        doc: project(
            json!({"busType": 1, "connection": {"socketTypeIndex": 1, "address": "239.1.2.3", "udpLocalPort": 7000, "udpMulticast": true}}),
            plain(),
        ),
        expect: vec![
            ("/sources/0/connection/type", json!("udp")),
            ("/sources/0/connection/localPort", json!(7000)),
            ("/sources/0/connection/multicastGroup", json!("239.1.2.3")),
            ("/sources/0/connection/remoteHost", Value::Null),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "BLE",
        doc: project(
            json!({"busType": 2, "connection": {"deviceId": {"name": "HRM", "address": "C0:FF:EE:00:11:22"},
                   "serviceUuid": "180d", "notifyCharacteristicUuid": "2a37"}}),
            plain(),
        ),
        expect: vec![
            ("/sources/0/connection/type", json!("ble")),
            ("/sources/0/connection/device", json!("C0:FF:EE:00:11:22")),
            ("/sources/0/connection/service", json!("180d")),
            ("/sources/0/connection/notifyCharacteristic", json!("2a37")),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "Modbus TCP with register groups",
        doc: project(
            json!({"busType": 4, "frameDetection": 2, "decoderMethod": 3, "connection": {
                "protocolIndex": 1, "host": "plc.local", "port": 1502, "slaveAddress": 17, "pollInterval": 250,
                "registerGroups": [{"type": 0, "start": 100, "count": 4}, {"type": 3, "start": 0, "count": 8}]}}),
            plain(),
        ),
        expect: vec![
            ("/sources/0/connection/type", json!("modbus")),
            ("/sources/0/connection/rtu", json!(false)),
            ("/sources/0/connection/host", json!("plc.local")),
            ("/sources/0/connection/port", json!(1502)),
            ("/sources/0/connection/slaveId", json!(17)),
            ("/sources/0/connection/pollIntervalMs", json!(250)),
            ("/sources/0/connection/groups/0", json!({"kind": "holding", "start": 100, "count": 4})),
            ("/sources/0/connection/groups/1", json!({"kind": "discrete", "start": 0, "count": 8})),
            ("/sources/0/framing/mode", json!("none")),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "Modbus RTU keeps its serial settings",
        doc: project(
            json!({"busType": 4, "connection": {"protocolIndex": 0, "baudRate": 19200, "parityIndex": 1,
                   "deviceId": {"portName": "ttyUSB1"}}}),
            plain(),
        ),
        expect: vec![
            ("/sources/0/connection/rtu", json!(true)),
            ("/sources/0/connection/serial/baud", json!(19200)),
            ("/sources/0/connection/serial/parity", json!("even")),
            ("/sources/0/connection/serial/port", json!("/dev/ttyUSB1")),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "CAN FD on SocketCAN",
        doc: project(
            json!({"busType": 5, "connection": {"deviceId": {"plugin": "socketcan", "interface": "vcan0"},
                   "bitrate": 250000, "canFD": true, "dataBitrate": 2000000, "listenOnly": true}}),
            plain(),
        ),
        expect: vec![
            ("/sources/0/connection/type", json!("can")),
            ("/sources/0/connection/interface", json!("vcan0")),
            ("/sources/0/connection/bitrate", json!(250000)),
            ("/sources/0/connection/fd", json!(true)),
            ("/sources/0/connection/dataBitrate", json!(2000000)),
            ("/sources/0/connection/listenOnly", json!(true)),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "process with quoted arguments",
        doc: project(
            json!({"busType": 8, "connection": {"mode": 0, "executable": "/usr/bin/sensor-sim",
                   "arguments": "--rate 50 --name \"bench rig\"", "workingDir": "/opt/rig"}}),
            plain(),
        ),
        expect: vec![
            ("/sources/0/connection/type", json!("process")),
            (
                "/sources/0/connection/program",
                json!("/usr/bin/sensor-sim"),
            ),
            (
                "/sources/0/connection/args",
                json!(["--rate", "50", "--name", "bench rig"]),
            ),
            ("/sources/0/connection/workingDir", json!("/opt/rig")),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "named pipe",
        doc: project(
            json!({"busType": 8, "connection": {"mode": 1, "pipePath": "/run/telemetry.fifo"}}),
            plain(),
        ),
        expect: vec![
            ("/sources/0/connection/type", json!("namedPipe")),
            ("/sources/0/connection/path", json!("/run/telemetry.fifo")),
        ],
        reported: vec![],
    });
    for (version, expected, report) in [
        (0, "3.1.1", true),
        (1, "3.1.1", false),
        (2, "5", false),
        (5, "5", false),
    ] {
        cases.push(Case {
            name: "MQTT version",
            doc: project(
                json!({"busType": 9, "connection": {"hostname": "h", "topicFilter": "a/#", "mqttVersion": version, "sslEnabled": true}}),
                plain(),
            ),
            expect: vec![
                ("/sources/0/connection/version", json!(expected)),
                ("/sources/0/connection/tls", json!(true)),
                ("/sources/0/connection/topic", json!("a/#")),
            ],
            reported: if report { vec!["sources[0].connection.mqttVersion"] } else { vec![] },
        });
    }
    cases.push(Case {
        name: "unsupported bus",
        doc: project(
            json!({"busType": 3, "connection": {"deviceIndex": 2}}),
            plain(),
        ),
        expect: vec![("/sources/0/connection/type", json!("serial"))],
        reported: vec!["sources[0].busType", "sources[0].connection"],
    });

    // Parsers.
    cases.push(Case {
        name: "Lua parser",
        doc: project(json!({"frameParserLanguage": 1, "frameParserCode": "function parse(f) return {f} end"}), plain()),
        expect: vec![
            ("/sources/0/parser/kind", json!("script")),
            ("/sources/0/parser/language", json!("lua")),
            ("/sources/0/parser/code", json!("function parse(f) return {f} end")),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "delimited template",
        doc: project(
            json!({"frameParserLanguage": 2, "frameParserCode": "", "frameParserTemplate": "delimited", "frameParserParams": {"separator": "\\t"}}),
            plain(),
        ),
        expect: vec![("/sources/0/parser", json!({"kind": "delimited", "separator": "\\t"}))],
        reported: vec![],
    });
    cases.push(Case {
        name: "delimited template with quoting",
        doc: project(
            json!({"frameParserLanguage": 2, "frameParserCode": "", "frameParserTemplate": "delimited",
                   "frameParserParams": {"separator": ";", "quoteChar": "\"", "trimFields": true}}),
            plain(),
        ),
        expect: vec![("/sources/0/parser", json!({"kind": "delimited", "separator": ";"}))],
        reported: vec!["sources[0].frameParserParams.quoteChar", "sources[0].frameParserParams.trimFields"],
    });
    cases.push(Case {
        name: "key=value template",
        doc: project(
            json!({"frameParserLanguage": 2, "frameParserCode": "", "frameParserTemplate": "key_value",
                   "frameParserParams": {"keys": "t, h ,p", "pairSeparator": ";", "kvSeparator": ":"}}),
            plain(),
        ),
        expect: vec![(
            "/sources/0/parser",
            json!({"kind": "keyValue", "keys": ["t", "h", "p"], "pairSeparator": ";", "valueSeparator": ":"}),
        )],
        reported: vec![],
    });
    cases.push(Case {
        name: "JSON template",
        doc: project(
            json!({"frameParserLanguage": 2, "frameParserCode": "", "frameParserTemplate": "json_data", "frameParserParams": {"fields": "speed,rpm"}}),
            plain(),
        ),
        expect: vec![("/sources/0/parser", json!({"kind": "json", "paths": ["speed", "rpm"]}))],
        reported: vec![],
    });
    cases.push(Case {
        name: "fixed-width template",
        doc: project(
            json!({"frameParserLanguage": 2, "frameParserCode": "", "frameParserTemplate": "fixed_width", "frameParserParams": {"widths": "4,6,2"}}),
            plain(),
        ),
        expect: vec![("/sources/0/parser", json!({"kind": "fixedWidth", "widths": [4, 6, 2]}))],
        reported: vec![],
    });
    cases.push(Case {
        name: "NMEA template",
        doc: project(json!({"frameParserLanguage": 2, "frameParserCode": "", "frameParserTemplate": "nmea_0183"}), plain()),
        expect: vec![("/sources/0/parser", json!({"kind": "nmea"}))],
        reported: vec!["sources[0].frameParserTemplate"],
    });
    cases.push(Case {
        name: "template without an equivalent",
        doc: project(json!({"frameParserLanguage": 2, "frameParserCode": "", "frameParserTemplate": "mavlink"}), plain()),
        expect: vec![("/sources/0/parser", json!({"kind": "quickPlot"}))],
        reported: vec!["sources[0].frameParserTemplate"],
    });
    cases.push(Case {
        name: "empty parser code means Serial Studio's comma split",
        doc: project(json!({"frameParserCode": "  "}), plain()),
        expect: vec![(
            "/sources/0/parser",
            json!({"kind": "delimited", "separator": ","}),
        )],
        reported: vec!["sources[0].frameParserCode"],
    });
    cases.push(Case {
        name: "legacy two-argument parser gets its separator",
        doc: json!({
            "title": "Old", "frameStart": "/*", "frameEnd": "*/", "separator": ";",
            "frameParser": "function parse(frame, separator) { return frame.trim().split(separator); }",
            "groups": plain()
        }),
        expect: vec![
            ("/sources/0/parser/language", json!("javascript")),
            ("/sources/0/framing/mode", json!("startEnd")),
        ],
        reported: vec!["frameParser"],
    });
    cases.push(Case {
        name: "schema 3 falls back to the top-level parser",
        doc: json!({
            "title": "Mixed", "schemaVersion": 3,
            "frameParser": "function parse(frame) { return [frame.length]; }",
            "sources": [{"sourceId": 0, "busType": 0, "frameParserCode": "", "connection": {"deviceId": {"portName": "ttyS1"}}}],
            "groups": plain()
        }),
        expect: vec![("/sources/0/parser/code", json!("function parse(frame) { return [frame.length]; }"))],
        reported: vec![],
    });

    // Group widgets.
    for (widget, expected, report) in [
        ("datagrid", "dataGrid", false),
        ("multiplot", "multiPlot", false),
        ("accelerometer", "accelerometer", false),
        ("gyro", "gyroscope", false),
        ("gyroscope", "gyroscope", false),
        ("map", "gps", false),
        ("gps", "gps", false),
        ("plot3d", "plot3d", false),
        ("barpanel", "barPanel", false),
        ("terminal", "terminal", false),
        ("painter", "painter", false),
        ("image", "image", false),
        ("webview", "webView", true),
        ("notification-log", "none", true),
    ] {
        cases.push(Case {
            name: "group widget",
            doc: project(json!({}), one_group(widget, json!([ds(json!({}))]))),
            expect: vec![("/groups/0/widget", json!(expected))],
            reported: if report {
                vec!["groups[0].widget"]
            } else {
                vec![]
            },
        });
    }

    // Dataset widgets and roles.
    for (group, widget, expected_widget, role) in [
        ("", "bar", "bar", Value::Null),
        ("", "gauge", "gauge", Value::Null),
        ("", "compass", "compass", Value::Null),
        ("", "meter", "meter", Value::Null),
        ("map", "lat", "none", json!("lat")),
        ("map", "lon", "none", json!("lon")),
        ("map", "alt", "none", json!("alt")),
        ("accelerometer", "x", "none", json!("x")),
        ("plot3d", "z", "none", json!("z")),
        ("gyro", "x", "none", json!("pitch")),
        ("gyro", "y", "none", json!("roll")),
        ("gyro", "z", "none", json!("yaw")),
        ("gyro", "yaw", "none", json!("yaw")),
    ] {
        cases.push(Case {
            name: "dataset widget",
            doc: project(
                json!({}),
                one_group(group, json!([ds(json!({"widget": widget}))])),
            ),
            expect: vec![
                ("/groups/0/datasets/0/widget", json!(expected_widget)),
                ("/groups/0/datasets/0/role", role),
            ],
            reported: vec![],
        });
    }
    cases.push(Case {
        name: "unknown dataset widget",
        doc: project(
            json!({}),
            one_group("", json!([ds(json!({"widget": "sparkline"}))])),
        ),
        expect: vec![("/groups/0/datasets/0/widget", json!("none"))],
        reported: vec!["groups[0].datasets[0].widget"],
    });

    // Transforms and virtual datasets.
    for (lang, expected) in [
        (json!(0), "javascript"),
        (json!(1), "lua"),
        (Value::Null, "javascript"),
    ] {
        cases.push(Case {
            name: "transform language",
            doc: project(
                json!({}),
                one_group("", json!([ds(json!({"transformCode": "function transform(value) { return value; }", "transformLanguage": lang}))])),
            ),
            expect: vec![
                ("/groups/0/datasets/0/transform/language", json!(expected)),
                ("/groups/0/datasets/0/virtual", json!(false)),
            ],
            reported: vec![],
        });
    }
    cases.push(Case {
        name: "transform defaults to a Lua source's language",
        doc: project(
            json!({"frameParserLanguage": 1, "frameParserCode": "function parse(f) return {f} end"}),
            one_group("", json!([ds(json!({"transformCode": "function transform(value) return value end"}))])),
        ),
        expect: vec![("/groups/0/datasets/0/transform/language", json!("lua"))],
        reported: vec![],
    });
    cases.push(Case {
        name: "explicit virtual dataset",
        doc: project(
            json!({}),
            one_group("", json!([ds(json!({"virtual": true, "index": 0,
                "transformCode": "function transform(value) { return datasetGetFinal('x') * 2; }"}))])),
        ),
        expect: vec![("/groups/0/datasets/0/virtual", json!(true))],
        reported: vec![],
    });
    cases.push(Case {
        name: "expression transforms are not supported",
        doc: project(
            json!({}),
            one_group(
                "",
                json!([ds(
                    json!({"transformCode": "v * 2", "transformLanguage": 2})
                )]),
            ),
        ),
        expect: vec![("/groups/0/datasets/0/transform", Value::Null)],
        reported: vec!["groups[0].datasets[0].transformLanguage"],
    });

    // Ranges and alarms.
    cases.push(Case {
        name: "ranges disagreeing with each other",
        doc: project(
            json!({}),
            one_group("", json!([ds(json!({"widgetMin": 0, "widgetMax": 10, "plotMin": -5, "plotMax": 5, "fftMin": 0, "fftMax": 10}))])),
        ),
        expect: vec![("/groups/0/datasets/0/min", json!(0.0)), ("/groups/0/datasets/0/max", json!(10.0))],
        reported: vec!["groups[0].datasets[0].plotMin"],
    });
    cases.push(Case {
        name: "alarm thresholds without a range",
        doc: project(
            json!({}),
            one_group(
                "",
                json!([ds(json!({"alarmEnabled": true, "alarmHigh": 70}))]),
            ),
        ),
        expect: vec![
            ("/groups/0/datasets/0/alarms/0/min", json!(70.0)),
            ("/groups/0/datasets/0/alarms/0/max", json!(f64::MAX)),
            ("/groups/0/datasets/0/alarms/0/severity", json!("warning")),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "alarm bands win over thresholds",
        doc: project(
            json!({}),
            one_group(
                "",
                json!([ds(
                    json!({"alarmEnabled": true, "alarmHigh": 70, "min": 0, "max": 100,
                "alarmBands": [{"min": 90, "max": 100, "severity": 0, "label": "note"}]})
                )]),
            ),
        ),
        expect: vec![(
            "/groups/0/datasets/0/alarms",
            json!([{"min": 90.0, "max": 100.0, "severity": "info", "label": "note"}]),
        )],
        reported: vec![],
    });

    // X axes.
    cases.push(Case {
        name: "X axis by unique id",
        doc: project(
            json!({}),
            one_group(
                "",
                json!([
                    ds(json!({"title": "t", "uniqueId": 42})),
                    ds(json!({"title": "y", "index": 2, "xAxis": 42}))
                ]),
            ),
        ),
        expect: vec![(
            "/groups/0/datasets/1/xAxis",
            json!({"mode": "dataset", "id": "ds-1"}),
        )],
        reported: vec![],
    });
    cases.push(Case {
        name: "X axis by index in files without unique ids",
        doc: without(
            project(
                json!({}),
                one_group(
                    "",
                    json!([
                        ds(json!({"title": "t", "index": 3})),
                        ds(json!({"title": "y", "index": 2, "xAxis": 3}))
                    ]),
                ),
            ),
            "nextUniqueId",
        ),
        expect: vec![(
            "/groups/0/datasets/1/xAxis",
            json!({"mode": "dataset", "id": "ds-1"}),
        )],
        reported: vec![],
    });

    // Actions.
    for (eol, ending) in [
        ("", "none"),
        ("\\n", "lf"),
        ("\r", "cr"),
        ("\\r\\n", "crLf"),
    ] {
        cases.push(Case {
            name: "action line ending",
            doc: with(
                project(json!({}), json!([])),
                "actions",
                json!([{"title": "Go", "txData": "GO", "eol": eol}]),
            ),
            expect: vec![
                ("/actions/0/lineEnding", json!(ending)),
                ("/actions/0/payload", json!("GO")),
            ],
            reported: vec![],
        });
    }
    cases.push(Case {
        name: "binary action",
        doc: with(
            project(json!({}), json!([])),
            "actions",
            json!([{"title": "Ping", "binary": true, "txData": "aa 55 01", "timerMode": 1, "timerIntervalMs": 250}]),
        ),
        expect: vec![
            ("/actions/0/hex", json!(true)),
            ("/actions/0/payload", json!("AA 55 01")),
            ("/actions/0/timerMs", json!(250)),
        ],
        reported: vec![],
    });
    // Serial Studio's timer modes, each as the timer that does the same.
    for (mode, timer) in [
        (json!(2), "startOnClick"),
        (json!("toggleOnTrigger"), "toggleOnClick"),
        (json!(4), "repeat"),
    ] {
        cases.push(Case {
            name: "action timers started by a click",
            doc: with(
                project(json!({}), json!([])),
                "actions",
                json!([{"title": "Burst", "txData": "X", "timerMode": mode, "timerIntervalMs": 40, "repeatCount": 5}]),
            ),
            expect: vec![
                ("/actions/0/timerMs", json!(40)),
                ("/actions/0/timer", json!(timer)),
                (
                    "/actions/0/repeatCount",
                    if timer == "repeat" { json!(5) } else { Value::Null },
                ),
            ],
            reported: vec![],
        });
    }
    cases.push(Case {
        name: "a repeat timer without a count sends three times, as Serial Studio",
        doc: with(
            project(json!({}), json!([])),
            "actions",
            json!([{"title": "Burst", "txData": "X", "timerMode": "repeatNTimes"}]),
        ),
        expect: vec![
            ("/actions/0/timerMs", json!(100)),
            ("/actions/0/timer", json!("repeat")),
            ("/actions/0/repeatCount", json!(3)),
        ],
        reported: vec![],
    });
    cases.push(Case {
        name: "a timer faster than Sextant's shortest interval",
        doc: with(
            project(json!({}), json!([])),
            "actions",
            json!([{"title": "Fast", "txData": "X", "timerMode": 1, "timerIntervalMs": 2}]),
        ),
        expect: vec![("/actions/0/timerMs", json!(10))],
        reported: vec!["actions[0].timerIntervalMs"],
    });

    // Tables.
    cases.push(Case {
        name: "constant tables",
        doc: with(
            project(json!({}), json!([])),
            "tables",
            json!([{"name": "cal", "registers": [{"name": "gain", "value": 1.5}, {"name": "unit", "value": "mV"}]}]),
        ),
        expect: vec![(
            "/tables/0",
            json!({"name": "cal", "entries": [{"name": "gain", "value": 1.5}, {"name": "unit", "value": "mV"}]}),
        )],
        reported: vec![],
    });
    cases
}

#[test]
fn mapping_rules_hold() {
    let mut failures = Vec::new();
    for case in cases() {
        let text = case.doc.to_string();
        let imported = match import_serial_studio(&text) {
            Ok(i) => i,
            Err(e) => {
                failures.push(format!("{}: import failed: {e}", case.name));
                continue;
            }
        };
        let issues = imported.project.validate();
        if !issues.is_empty() {
            failures.push(format!("{}: does not validate: {issues:?}", case.name));
        }
        let out = serde_json::to_value(&imported.project).expect("project serializes");
        for (pointer, want) in &case.expect {
            let got = out.pointer(pointer).cloned().unwrap_or(Value::Null);
            let same = match (&got, want) {
                (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
                _ => &got == want,
            };
            if !same {
                failures.push(format!(
                    "{}: {pointer} is {got}, want {want}\n  from {text}",
                    case.name
                ));
            }
        }
        for path in &case.reported {
            if !imported.report.mentions(path) {
                failures.push(format!(
                    "{}: report does not mention {path}:\n{}",
                    case.name, imported.report
                ));
            }
        }
        if case.reported.is_empty() && !imported.report.is_empty() {
            failures.push(format!(
                "{}: unexpected report:\n{}\n  from {text}",
                case.name, imported.report
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
