//! Bus-specific settings belong to their bus: the MQTT and TLS settings Serial Studio writes
//! at their defaults next to a serial, network, BLE, Modbus, CAN or process source are not
//! the person's choice and must not fill the report; a value someone set is still a Note.

use serde_json::{json, Map, Value};
use sextant_import::{import_serial_studio, ReportItem, Severity};

/// Serial Studio's MQTT/TLS settings at the values its MQTT driver starts with.
fn default_mqtt_keys() -> Value {
    json!({
        "sslEnabled": false,
        "sslProtocol": 2,
        "peerVerifyMode": 0,
        "peerVerifyDepth": 10,
        "alpnEnabled": false,
        "alpnProtocol": "x-amzn-mqtt-ca",
        "caCertificates": 0,
        "clientCertificate": "",
        "privateKey": "",
        "keyPassphrase": "",
        "mqttVersion": 2,
        "keepAlive": 60,
        "cleanSession": true,
        "autoKeepAlive": true,
        "mqttTlsEnabled": false,
        "mqttTlsCaCertificate": "",
        "mqttTlsClientCertificate": "",
        "mqttTlsPrivateKey": ""
    })
}

/// The bus types Sextant maps, with a connection that is complete for that bus.
fn buses() -> Vec<(&'static str, i64, Value)> {
    vec![
        (
            "serial",
            0,
            json!({"deviceId": {"portName": "ttyS0"}, "baudRate": 115200}),
        ),
        (
            "tcp",
            1,
            json!({"socketTypeIndex": 0, "address": "10.0.0.2", "tcpPort": 5000}),
        ),
        (
            "udp",
            1,
            json!({"socketTypeIndex": 1, "udpLocalPort": 7000}),
        ),
        (
            "ble",
            2,
            json!({"deviceId": {"name": "Tag", "address": "AA:BB"}}),
        ),
        (
            "modbus",
            4,
            json!({"protocolIndex": 1, "host": "10.0.0.3", "port": 502}),
        ),
        (
            "can",
            5,
            json!({"deviceId": {"plugin": "socketcan", "interface": "can0"}, "bitrate": 500000}),
        ),
        ("process", 8, json!({"mode": 0, "executable": "/bin/cat"})),
        (
            "mqtt",
            9,
            json!({"hostname": "broker", "topicFilter": "a/#", "port": 1883}),
        ),
    ]
}

fn merge(base: &mut Value, extra: &Value) {
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
}

/// Where the stray keys sit: in the source's `connection`, on the source, or at the root.
#[derive(Clone, Copy, Debug)]
enum Place {
    Connection,
    Source,
    Root,
}

fn document(bus: i64, connection: &Value, extra: &Value, place: Place) -> Value {
    let mut conn = connection.clone();
    let mut source = json!({
        "sourceId": 0,
        "busType": bus,
        "frameDetection": 0,
        "frameEnd": "\\n",
        "frameParserCode": "function parse(frame) { return frame.split(','); }",
        "frameParserLanguage": 0
    });
    let mut root = json!({
        "title": "T",
        "schemaVersion": 3,
        "nextUniqueId": 100,
        "groups": [{"title": "G", "widget": "", "datasets": [{"title": "D", "index": 1}]}]
    });
    match place {
        Place::Connection => merge(&mut conn, extra),
        Place::Source => merge(&mut source, extra),
        Place::Root => merge(&mut root, extra),
    }
    merge(&mut source, &json!({ "connection": conn }));
    merge(&mut root, &json!({ "sources": [source] }));
    root
}

/// Report lines about an MQTT or TLS setting.
fn mqtt_lines(items: &[ReportItem]) -> Vec<&ReportItem> {
    items
        .iter()
        .filter(|i| {
            let text = format!("{} {}", i.path, i.message).to_ascii_lowercase();
            [
                "mqtt",
                "ssl",
                "tls",
                "certificate",
                "privatekey",
                "keypassphrase",
                "peerverify",
                "alpn",
                "keepalive",
                "cleansession",
            ]
            .iter()
            .any(|w| text.contains(w))
        })
        .collect()
}

#[test]
fn default_mqtt_and_tls_keys_are_silent_on_every_bus() {
    let keys = default_mqtt_keys();
    let mut failures = Vec::new();
    for (name, bus, connection) in buses() {
        for place in [Place::Connection, Place::Source, Place::Root] {
            let doc = document(bus, &connection, &keys, place);
            let imported = import_serial_studio(&doc.to_string())
                .unwrap_or_else(|e| panic!("{name} {place:?}: {e}"));
            let lines = mqtt_lines(&imported.report.items);
            // On an MQTT source the settings are its own and at their defaults: nothing to
            // say either.
            if !lines.is_empty() {
                failures.push(format!(
                    "{name} ({place:?}): {}",
                    lines
                        .iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join(" | ")
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "MQTT/TLS lines at defaults:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_set_mqtt_value_on_another_bus_is_a_note() {
    for (name, bus, connection) in buses() {
        if bus == 9 {
            continue;
        }
        for (key, value) in [
            ("sslEnabled", json!(true)),
            ("peerVerifyDepth", json!(3)),
            ("mqttTlsClientCertificate", json!("/etc/client.pem")),
        ] {
            let mut extra = Map::new();
            extra.insert(key.to_string(), value.clone());
            let doc = document(bus, &connection, &Value::Object(extra), Place::Connection);
            let imported = import_serial_studio(&doc.to_string()).expect("imports");
            let path = format!("sources[0].connection.{key}");
            let items: Vec<_> = imported.report.at(&path).collect();
            assert_eq!(items.len(), 1, "{name} {key}: {:?}", imported.report.items);
            assert_eq!(items[0].severity, Severity::Note, "{name} {key}");
            assert!(
                !items[0].message.contains("unknown setting"),
                "{name} {key}: {}",
                items[0].message
            );
        }
    }
}

#[test]
fn a_secret_on_another_bus_is_noted_without_its_value() {
    let doc = document(
        0,
        &json!({"deviceId": {"portName": "ttyS0"}}),
        &json!({"password": "hunter2", "keyPassphrase": "s3cret"}),
        Place::Connection,
    );
    let imported = import_serial_studio(&doc.to_string()).expect("imports");
    for key in ["password", "keyPassphrase"] {
        let path = format!("sources[0].connection.{key}");
        let items: Vec<_> = imported.report.at(&path).collect();
        assert_eq!(items.len(), 1, "{key}: {:?}", imported.report.items);
    }
    let all = format!("{:?}", imported.report.items);
    assert!(!all.contains("hunter2") && !all.contains("s3cret"), "{all}");
}

#[test]
fn tls_settings_of_an_mqtt_source_are_still_reported() {
    // The bus is MQTT with TLS on and a client certificate: the person's own settings.
    let doc = document(
        9,
        &json!({"hostname": "broker", "topicFilter": "a/#", "sslEnabled": true,
                "sslProtocol": 4, "peerVerifyDepth": 10, "clientCertificate": "/etc/c.pem"}),
        &json!({}),
        Place::Connection,
    );
    let imported = import_serial_studio(&doc.to_string()).expect("imports");
    assert!(imported
        .report
        .mentions("sources[0].connection.sslProtocol"));
    assert!(imported
        .report
        .mentions("sources[0].connection.clientCertificate"));
    // Serial Studio's default depth is not the person's choice.
    assert!(!imported
        .report
        .mentions("sources[0].connection.peerVerifyDepth"));
}
