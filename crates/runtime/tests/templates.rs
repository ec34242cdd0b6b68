//! Every template of `project.template.apply`, applied through the command to a project
//! that already has something in it, then fed sample bytes through the whole pipeline
//! (`project.dryRun.endToEnd`): the values land in the widgets the template made.

use serde_json::{json, Value};
use sextant_commands::Policy;
use sextant_runtime::{Caller, Runtime, Workspace};
use sextant_telemetry::project::Project;

fn edits() -> Policy {
    Policy {
        auto_approve_edits: true,
        ..Policy::default()
    }
}

fn call(rt: &mut Runtime, name: &str, params: Value) -> Value {
    rt.execute(Caller::Assistant, name, params.clone(), edits(), false)
        .unwrap_or_else(|e| panic!("{name} {params}: {e:?}"))
}

/// A project with a source and a group already, so fresh ids must not collide.
fn runtime() -> Runtime {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    call(
        &mut rt,
        "project.source.add",
        json!({"source": {"title": "Existing", "parser": {"kind": "delimited"}}}),
    );
    call(
        &mut rt,
        "project.group.add",
        json!({"title": "Existing", "widget": "dataGrid"}),
    );
    rt
}

/// Applies `params`, feeds `data`, and returns `column → value` of the last row.
fn apply_and_feed(params: Value, data: &str, hex: bool) -> (Value, Vec<(String, Value)>) {
    let mut rt = runtime();
    let before = rt.workspace.project().clone();
    let applied = call(&mut rt, "project.template.apply", params);
    assert_eq!(call(&mut rt, "project.validate", json!({}))["valid"], true);
    // Nothing that was there changed; the workspace is new and names every new group.
    let after = rt.workspace.project().clone();
    assert_eq!(after.sources[0], before.sources[0]);
    assert_eq!(after.groups[0], before.groups[0]);
    let tab = after
        .workspaces
        .iter()
        .find(|w| w.id == applied["workspace"].as_str().unwrap())
        .unwrap();
    let tiles: Vec<&str> = tab
        .tiles
        .iter()
        .filter_map(|t| t.group.as_deref())
        .collect();
    let groups: Vec<&str> = applied["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap())
        .collect();
    assert_eq!(tiles, groups);
    let run = call(
        &mut rt,
        "project.dryRun.endToEnd",
        json!({"source": applied["source"], "data": data, "hex": hex}),
    );
    assert!(run["frames"].as_u64().unwrap() >= 1, "{run}");
    assert_eq!(run["parseErrors"], 0, "{run}");
    let columns: Vec<String> = run["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let row = run["rows"]
        .as_array()
        .unwrap()
        .last()
        .cloned()
        .unwrap_or(Value::Null);
    let values = columns
        .into_iter()
        .zip(row.as_array().cloned().unwrap_or_default())
        .collect();
    (applied, values)
}

fn value(values: &[(String, Value)], column: &str) -> f64 {
    values
        .iter()
        .find(|(c, _)| c == column)
        .unwrap_or_else(|| panic!("no column {column}: {values:?}"))
        .1
        .as_f64()
        .unwrap_or_else(|| panic!("{column} has no number: {values:?}"))
}

#[test]
fn uart_csv_scope() {
    let (_, v) = apply_and_feed(
        json!({"template": "uart-csv-scope", "port": "/dev/ttyUSB0"}),
        "1.5,2.5,3.5,4.5\n",
        false,
    );
    assert_eq!(value(&v, "Scope/Channel 1"), 1.5);
    assert_eq!(value(&v, "Scope/Channel 4"), 4.5);
}

#[test]
fn imu() {
    let (_, v) = apply_and_feed(
        json!({"template": "imu"}),
        "0.1,0.2,9.8,1,2,3,10,20,30\n",
        false,
    );
    assert_eq!(value(&v, "Accelerometer/Accel Z"), 9.8);
    assert_eq!(value(&v, "Gyroscope/Gyro Y"), 2.0);
    assert_eq!(value(&v, "Attitude/Yaw"), 30.0);
    // The same acceleration drawn in 3-D.
    assert_eq!(value(&v, "Motion/Accel Z"), 9.8);
}

#[test]
fn gps_nmea() {
    let (_, v) = apply_and_feed(
        json!({"template": "gps-nmea"}),
        "$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47\r\n",
        false,
    );
    assert!(
        (value(&v, "Position/Latitude") - 48.1173).abs() < 1e-3,
        "{v:?}"
    );
    assert!(
        (value(&v, "Position/Longitude") - 11.5167).abs() < 1e-3,
        "{v:?}"
    );
    assert_eq!(value(&v, "Position/Altitude"), 545.4);
    assert_eq!(value(&v, "Fix/Satellites"), 8.0);
}

#[test]
fn mqtt_subscriber() {
    let (_, v) = apply_and_feed(
        json!({"template": "mqtt-subscriber", "host": "broker.local", "topic": "lab/env"}),
        r#"{"temperature": 21.5, "humidity": 40}"#,
        false,
    );
    assert_eq!(value(&v, "Environment/Temperature"), 21.5);
    assert_eq!(value(&v, "Trend/Humidity"), 40.0);
}

#[test]
fn udp_telemetry() {
    let (_, v) = apply_and_feed(
        json!({"template": "udp-telemetry", "networkPort": 9100}),
        "7,8,9,10",
        false,
    );
    assert_eq!(value(&v, "Telemetry/Value 1"), 7.0);
    assert_eq!(value(&v, "Plot/Value 4"), 10.0);
}

#[test]
fn can_from_a_dbc() {
    let dbc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/can/vehicle.dbc"
    ))
    .unwrap();
    // One CAN frame in the pipeline's layout (`[id_hi, id_lo, len, data…]`, id 0x100):
    // EngineSpeed raw
    // 8000 × 0.25 = 2000 rpm, CoolantTemp raw 130 − 40 = 90 °C, ThrottlePos raw 125 × 0.4 = 50 %.
    let (_, v) = apply_and_feed(
        json!({"template": "can-dbc", "interface": "vcan0", "dbc": dbc}),
        "01 00 08 40 1F 82 7D 00 00 00 00",
        true,
    );
    assert_eq!(value(&v, "Engine/EngineSpeed"), 2000.0);
    assert_eq!(value(&v, "Engine/CoolantTemp"), 90.0);
    assert_eq!(value(&v, "Engine/ThrottlePos"), 50.0);
}

#[test]
fn a_template_that_cannot_be_built_says_why_and_changes_nothing() {
    let mut rt = runtime();
    let before = rt.workspace.project().to_json_string();
    for (params, want) in [
        (json!({"template": "can-dbc"}), "needs the DBC file"),
        (
            json!({"template": "can-dbc", "dbc": "not a dbc"}),
            "DBC file",
        ),
        (json!({"template": "nope"}), "template"),
    ] {
        let e = rt
            .execute(
                Caller::Assistant,
                "project.template.apply",
                params.clone(),
                edits(),
                false,
            )
            .expect_err(&params.to_string());
        assert!(
            e.message.contains(want) || e.path.as_deref().unwrap_or("").contains(want),
            "{params}: {e:?}"
        );
    }
    assert_eq!(rt.workspace.project().to_json_string(), before);
}
