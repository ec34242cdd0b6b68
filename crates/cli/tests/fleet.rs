//! Many benches, one dashboard, over brokers people already run: two headless `sextant run`
//! benches publish their frames to the mosquitto on their side of a bridge; a `sextant
//! serve` on the other side subscribes to both and shows them as one project. Three
//! Sextant processes and two real brokers; every value the dashboard shows is one a bench
//! measured (its CSV export), and each bench's values land in its own datasets.

#[path = "../../devices/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

struct Mosquitto {
    child: Child,
}

impl Mosquitto {
    /// A broker on `port` of loopback, with `extra` configuration (a bridge).
    fn start(dir: &Path, name: &str, port: u16, extra: &str) -> Mosquitto {
        let config = dir.join(format!("{name}.conf"));
        std::fs::write(
            &config,
            format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n{extra}"),
        )
        .unwrap();
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto starts");
        assert!(
            common::wait_until(Duration::from_secs(5), || {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            }),
            "{name} broker did not listen"
        );
        Mosquitto { child }
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child process stopped when the test ends, passing or not.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A bench: the simulator's saw (`offset` ± 10) as `Motor/Speed`, published as JSON.
fn bench(name: &str, offset: f64, broker: u16) -> Value {
    json!({
        "format": "sextant-project", "schemaVersion": 1, "title": name,
        "sources": [{"id": "sim", "connection": {"type": "simulator", "frameRateHz": 200,
            "channels": [{"name": "speed", "waveform": "saw", "frequencyHz": 0.7,
                          "amplitude": 10, "offset": offset}]},
            "parser": {"kind": "delimited"}}],
        "groups": [{"id": "motor", "title": "Motor",
                    "datasets": [{"id": "speed", "title": "Speed", "index": 1}]}],
        "mqttPublisher": {"enabled": true, "host": "127.0.0.1", "port": broker,
                          "topic": format!("lab/{name}"), "format": "json", "rateHz": 20}
    })
}

/// The dashboard: one MQTT source per bench, reading the publisher's JSON.
fn dashboard(broker: u16) -> Value {
    let source = |bench: &str| {
        json!({"id": bench, "connection": {"type": "mqtt", "host": "127.0.0.1", "port": broker,
                                           "topic": format!("lab/{bench}")},
               "framing": {"mode": "none"},
               "parser": {"kind": "json", "paths": ["/values/Motor~1Speed"]}})
    };
    let group = |bench: &str| {
        json!({"id": format!("{bench}-group"), "title": bench,
               "datasets": [{"id": format!("{bench}-speed"), "title": "Speed", "index": 1,
                             "source": bench}]})
    };
    json!({
        "format": "sextant-project", "schemaVersion": 1, "title": "Lab",
        "sources": [source("bench-a"), source("bench-b")],
        "groups": [group("bench-a"), group("bench-b")]
    })
}

/// One request over the newline-delimited JSON API; its result.
fn command(addr: &str, name: &str, params: Value) -> Value {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let request = json!({"type": "command", "id": 1, "command": name, "params": params});
    stream.write_all(format!("{request}\n").as_bytes()).unwrap();
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).unwrap();
    let v: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(v["success"], true, "{name}: {v}");
    v["result"].clone()
}

/// The values of column `name` of a CSV export, sorted.
fn csv_column(path: &Path, name: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = header.iter().position(|h| *h == name).unwrap();
    let mut values: Vec<f64> = lines
        .filter_map(|l| l.split(',').nth(at)?.parse().ok())
        .collect();
    values.sort_by(f64::total_cmp);
    values
}

/// Whether `v` is one of `measured` (sorted), to the CSV's 15 significant digits.
fn measured(measured: &[f64], v: f64) -> bool {
    let i = measured.partition_point(|m| *m < v);
    [i.saturating_sub(1), i]
        .iter()
        .filter_map(|&k| measured.get(k))
        .any(|m| (m - v).abs() <= 1e-12 * m.abs().max(1.0))
}

#[test]
fn two_benches_publish_over_a_bridge_to_one_dashboard() {
    if !common::require("mosquitto", "mosquitto") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (central_port, edge_port) = (common::free_port(), common::free_port());
    let _central = Mosquitto::start(dir.path(), "central", central_port, "");
    // The benches' side: everything under lab/ goes over the bridge to the central broker.
    let _edge = Mosquitto::start(
        dir.path(),
        "edge",
        edge_port,
        &format!(
            "connection central\naddress 127.0.0.1:{central_port}\ntopic lab/# out 0\n\
             restart_timeout 1\n"
        ),
    );

    let lab = dir.path().join("lab.json");
    std::fs::write(&lab, dashboard(central_port).to_string()).unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(["serve", "--api", "--port", "0", "--project"])
        .arg(&lab)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(serve.stderr.take().unwrap());
    let _serve = Stopped(serve);
    let addr = loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "serve ended early");
        if let Some(rest) = line.strip_prefix("API server listening on ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    command(&addr, "io.connect", json!({}));
    assert!(
        common::wait_until(Duration::from_secs(10), || {
            let status = command(&addr, "io.status", json!({}));
            status["sources"]
                .as_array()
                .is_some_and(|s| s.iter().all(|s| s["status"] == "connected"))
        }),
        "the dashboard's sources did not connect"
    );

    let benches: Vec<(Child, std::path::PathBuf)> = [("bench-a", 100.0), ("bench-b", 500.0)]
        .iter()
        .map(|(name, offset)| {
            let project = dir.path().join(format!("{name}.json"));
            std::fs::write(&project, bench(name, *offset, edge_port).to_string()).unwrap();
            let csv = dir.path().join(format!("{name}.csv"));
            let child = Command::new(env!("CARGO_BIN_EXE_sextant"))
                .args(["run", "--publish", "--seconds", "5", "--project"])
                .arg(&project)
                .arg("--csv")
                .arg(&csv)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, csv)
        })
        .collect();
    // Without --publish, a project that publishes is refused, naming where frames would go.
    let refused = Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(["run", "--seconds", "1", "--project"])
        .arg(dir.path().join("bench-a.json"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("--publish") && said.contains(&format!("127.0.0.1:{edge_port}")),
        "{said}"
    );
    let mut csvs = Vec::new();
    for (child, csv) in benches {
        let out = child.wait_with_output().unwrap();
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{log}");
        let published: u64 = log
            .lines()
            .find_map(|l| l.strip_prefix("MQTT publisher: "))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("the bench says what it published: {log}"));
        assert!(
            published >= 40,
            "{published} published in 5 s at 20 Hz: {log}"
        );
        csvs.push(csv);
    }

    let tail = command(&addr, "dashboard.tail", json!({"count": 1000}));
    let columns: Vec<&str> = tail["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(columns, ["bench-a-speed", "bench-b-speed"]);
    for (k, csv) in csvs.iter().enumerate() {
        let bench = csv_column(csv, "Motor/Speed");
        let other = csv_column(&csvs[1 - k], "Motor/Speed");
        let shown: Vec<f64> = tail["frames"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["values"][k].as_f64())
            .collect();
        // Over the bridge, most of the ~100 publishes arrive (the first may precede it).
        assert!(
            shown.len() >= 40,
            "{}: {} values shown",
            columns[k],
            shown.len()
        );
        for v in &shown {
            assert!(
                measured(&bench, *v),
                "{}: {v} is not a value the bench measured",
                columns[k]
            );
            assert!(
                !measured(&other, *v),
                "{}: {v} came from the other bench",
                columns[k]
            );
        }
    }
}
