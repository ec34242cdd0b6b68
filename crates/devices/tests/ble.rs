//! BLE sources against a BlueZ mock: `tests/ble_mock.py` runs python-dbusmock's `bluez5`
//! template with an adapter, a sensor with a GATT service, a notify and a write
//! characteristic, on a private D-Bus daemon this test binary starts. btleplug finds that
//! bus through `DBUS_SYSTEM_BUS_ADDRESS`, so these tests live in their own binary: the
//! variable is set once for the whole process and never reaches other tests.
//!
//! Needs `dbus-daemon` (package `dbus`) and a Python that can `import dbusmock` (package
//! `python3-dbusmock`); both fail the tests under CI and print a loud skip otherwise.
//! `SEXTANT_DBUSMOCK_PYTHON` picks the Python explicitly.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use common::require;
use sextant_devices::ble::{scan, BleDriver};
use sextant_devices::{DeviceError, Driver, Reconnect, RunOptions, Source, Status};
use sextant_telemetry::project::BleSettings;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

const MOCK_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ble_mock.py");
const SENSOR: &str = "Sextant Test Sensor";
const SENSOR_ADDRESS: &str = "C0:FF:EE:00:00:01";
const NUS: &str = "6e400001-b5a3-f393-e0a9-e50e24dcca9e";
const NUS_RX: &str = "6e400002-b5a3-f393-e0a9-e50e24dcca9e";
const NUS_TX: &str = "6e400003-b5a3-f393-e0a9-e50e24dcca9e";

/// One BlueZ mock at a time can own `org.bluez` on the bus, so the tests take turns.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn has_dbusmock(python: &str) -> bool {
    Command::new(python)
        .args(["-c", "import dbusmock, gi"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A Python with python-dbusmock; fails under CI and skips loudly otherwise.
fn python() -> Option<String> {
    static FOUND: OnceLock<Option<String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        if let Ok(p) = std::env::var("SEXTANT_DBUSMOCK_PYTHON") {
            assert!(
                has_dbusmock(&p),
                "SEXTANT_DBUSMOCK_PYTHON={p} cannot `import dbusmock, gi`"
            );
            return Some(p);
        }
        // The Debian package installs into the distribution's interpreter, which a
        // pyenv or virtualenv `python3` earlier on PATH does not see.
        ["python3", "/usr/bin/python3"]
            .into_iter()
            .find(|p| has_dbusmock(p))
            .map(String::from)
    });
    if found.is_none() {
        common::unavailable("python-dbusmock", "apt-get install python3-dbusmock");
    }
    found.clone()
}

/// What every test here needs: `dbus-daemon` and python-dbusmock.
fn components() -> Option<String> {
    if !require("dbus-daemon", "dbus") {
        return None;
    }
    python()
}

/// The private bus, started once per test process and pointed to by
/// `DBUS_SYSTEM_BUS_ADDRESS`. libdbus reads that variable once per process, so the bus
/// must outlive every test; a shell wrapper stops the daemon when this process exits and
/// closes the wrapper's stdin, however it exits.
fn private_bus() -> &'static str {
    static BUS: OnceLock<(String, Child, ChildStdin)> = OnceLock::new();
    let (address, _, _) = BUS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = dir.path().join("bus.conf");
        let name = format!("sextant-ble-test-{}", std::process::id());
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:abstract={name}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#
            ),
        )
        .expect("bus config written");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"dbus-daemon --nofork --config-file="$1" --print-address=1 & read _; kill $!"#)
            .arg("sh")
            .arg(&config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // "Failed to set fd limit" and the like are noise when not root.
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon starts");
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut address = String::new();
        stdout
            .read_line(&mut address)
            .expect("dbus-daemon prints its address");
        assert!(
            address.starts_with("unix:"),
            "dbus-daemon did not start: {address:?}"
        );
        // Nothing more is printed; keep the pipe drained anyway.
        std::thread::spawn(move || {
            let _ = stdout.read_to_end(&mut Vec::new());
        });
        let address = address.trim().to_string();
        std::env::set_var("DBUS_SYSTEM_BUS_ADDRESS", &address);
        (address, child, stdin)
    });
    address
}

/// The BlueZ mock, driven through its stdin/stdout commands; killed on drop.
struct Mock {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    replies: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Mock {
    async fn start(python: &str, args: &[&str]) -> Mock {
        let bus = private_bus();
        let mut child = tokio::process::Command::new(python)
            .arg(MOCK_SCRIPT)
            .args(args)
            .env("DBUS_SYSTEM_BUS_ADDRESS", bus)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the BlueZ mock starts");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut mock = Mock {
            child,
            stdin,
            replies: tokio::io::BufReader::new(stdout).lines(),
        };
        let first = mock.reply().await;
        assert_eq!(first, "ready", "the BlueZ mock did not start");
        mock
    }

    async fn reply(&mut self) -> String {
        match tokio::time::timeout(Duration::from_secs(10), self.replies.next_line()).await {
            Ok(Ok(Some(line))) => line,
            other => panic!("no reply from the BlueZ mock: {other:?}"),
        }
    }

    async fn command(&mut self, line: &str) -> String {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("the mock reads commands");
        self.stdin.flush().await.expect("flushed");
        self.reply().await
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn settings(device: &str, service: &str, write: Option<&str>) -> BleSettings {
    BleSettings {
        device: device.into(),
        service: service.into(),
        notify_characteristic: NUS_TX.into(),
        write_characteristic: write.map(Into::into),
    }
}

fn driver(settings: BleSettings) -> BleDriver {
    let mut driver = BleDriver::new(settings).expect("valid settings");
    driver.scan_timeout = Duration::from_secs(3);
    driver
}

fn quick_reconnect() -> RunOptions {
    RunOptions {
        reconnect: Reconnect {
            enabled: true,
            initial: Duration::from_millis(100),
            max: Duration::from_millis(500),
        },
        ..RunOptions::default()
    }
}

async fn wait_status(source: &Source, what: &str, pred: impl FnMut(&Status) -> bool) -> Status {
    let h = source.handle();
    tokio::time::timeout(Duration::from_secs(15), h.wait_for(pred))
        .await
        .unwrap_or_else(|_| panic!("never {what}; status: {}", h.status()))
}

async fn connected(source: &Source) {
    wait_status(source, "connected", |s| *s == Status::Connected).await;
}

async fn receive(source: &mut Source, n: usize) -> Vec<Bytes> {
    let mut got = Vec::new();
    while got.len() < n {
        match tokio::time::timeout(Duration::from_secs(5), source.chunks.recv()).await {
            Ok(Some(c)) => got.push(c.data),
            _ => break,
        }
    }
    got
}

fn counter(from: u64, to: u64) -> Vec<Bytes> {
    (from..=to).map(|i| Bytes::from(format!("{i}\n"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_lists_devices_with_name_address_rssi_and_services() {
    let Some(python) = components() else { return };
    let _turn = TURN.lock().await;
    let _mock = Mock::start(&python, &[]).await;
    let devices = scan(Duration::from_secs(1)).await.expect("scan works");
    let sensor = devices
        .iter()
        .find(|d| d.address == SENSOR_ADDRESS)
        .unwrap_or_else(|| panic!("the sensor was not found: {devices:?}"));
    assert_eq!(sensor.name.as_deref(), Some(SENSOR));
    assert_eq!(sensor.rssi, Some(-52));
    assert_eq!(sensor.services, vec![NUS.parse::<uuid::Uuid>().unwrap()]);
    // Strongest first: the sensor (-52 dBm) before the heart-rate strap (-71 dBm).
    let names: Vec<_> = devices.iter().map(|d| d.name.as_deref()).collect();
    assert_eq!(
        names,
        [Some(SENSOR), Some("Heart Rate Strap")],
        "{devices:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_arrive_in_order_and_writes_reach_the_device() {
    let Some(python) = components() else { return };
    let _turn = TURN.lock().await;
    let mut mock = Mock::start(&python, &[]).await;
    let mut source = Source::spawn(
        driver(settings(SENSOR, NUS, Some(NUS_RX))),
        RunOptions::default(),
    );
    connected(&source).await;
    assert!(
        mock.command("state").await.contains("notifying=1"),
        "subscribed"
    );

    assert_eq!(mock.command("notify 200").await, "ok 200");
    let got = receive(&mut source, 200).await;
    assert_eq!(got, counter(1, 200), "one chunk per notification, in order");
    let h = source.handle();
    assert_eq!(h.stats().dropped_chunks, 0);

    h.write(&b"hello"[..]).await.expect("write works");
    // Longer than one ATT attribute: sent as 512 bytes, then the rest.
    let long: Vec<u8> = (0..600u32).map(|i| (i % 251) as u8).collect();
    h.write(long.clone()).await.expect("long write works");
    let written = mock.command("written").await;
    let expected = format!(
        "written {}:request {}:request {}:request",
        hex(b"hello"),
        hex(&long[..512]),
        hex(&long[512..])
    );
    assert_eq!(written, expected);
    assert_eq!(h.stats().bytes_written, 605);

    h.close().await;
    // Closing the source lets go of the device.
    let mut disconnected = false;
    for _ in 0..50 {
        if mock.command("state").await.contains("connected=0") {
            disconnected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(disconnected, "closing the source disconnects the device");
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_disconnects_is_reconnected_and_resubscribed() {
    let Some(python) = components() else { return };
    let _turn = TURN.lock().await;
    let mut mock = Mock::start(&python, &[]).await;
    // By address this time (any case), and without a write characteristic.
    let mut source = Source::spawn(
        driver(settings(
            &SENSOR_ADDRESS.to_lowercase(),
            "6E400001-B5A3-F393-E0A9-E50E24DCCA9E",
            None,
        )),
        quick_reconnect(),
    );
    connected(&source).await;
    let h = source.handle();
    assert_eq!(
        h.write(&b"x"[..]).await,
        Err(DeviceError::NotWritable),
        "no write characteristic configured"
    );
    assert_eq!(mock.command("notify 3").await, "ok 3");
    assert_eq!(receive(&mut source, 3).await, counter(1, 3));

    assert_eq!(mock.command("drop").await, "ok");
    let status = wait_status(&source, "reconnecting", |s| {
        matches!(s, Status::Reconnecting { .. })
    })
    .await;
    assert!(status.to_string().contains("disconnected"), "{status}");
    connected(&source).await;
    let state = mock.command("state").await;
    assert!(
        state.contains("connected=1")
            && state.contains("notifying=1")
            && state.contains("connects=2"),
        "{state}"
    );
    assert_eq!(mock.command("notify 2").await, "ok 2");
    assert_eq!(receive(&mut source, 2).await, counter(4, 5));
    assert_eq!(h.stats().connects, 2);
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_gatt_settings_are_clear_errors_listing_what_the_device_offers() {
    let Some(python) = components() else { return };
    let _turn = TURN.lock().await;
    let mut mock = Mock::start(&python, &[]).await;

    // A wrong service: a configuration error, not retried, naming what is there.
    let source = Source::spawn(driver(settings(SENSOR, "180f", None)), quick_reconnect());
    let status = wait_status(&source, "failed", |s| matches!(s, Status::Error(_))).await;
    let text = status.to_string();
    for part in [
        "no GATT service 0000180f-0000-1000-8000-00805f9b34fb",
        SENSOR,
        "6e400001-b5a3-f393-e0a9-e50e24dcca9e (Nordic UART",
        "00001800-0000-1000-8000-00805f9b34fb (Generic Access",
    ] {
        assert!(text.contains(part), "`{part}` missing from: {text}");
    }
    source.handle().close().await;

    // A wrong notify characteristic lists the service's characteristics.
    let mut wrong = settings(SENSOR, NUS, None);
    wrong.notify_characteristic = "2a37".into();
    let e = driver(wrong).open().await.err().expect("fails");
    let text = e.to_string();
    assert!(matches!(e, DeviceError::Fatal(_)), "{e:?}");
    for part in [
        "no characteristic 00002a37-0000-1000-8000-00805f9b34fb",
        "6e400003-b5a3-f393-e0a9-e50e24dcca9e (notify)",
        "6e400002-b5a3-f393-e0a9-e50e24dcca9e (write, write without response)",
    ] {
        assert!(text.contains(part), "`{part}` missing from: {text}");
    }

    // A characteristic that cannot notify, and one that cannot be written.
    let mut wrong = settings(SENSOR, NUS, None);
    wrong.notify_characteristic = NUS_RX.into();
    let text = driver(wrong).open().await.err().expect("fails").to_string();
    assert!(text.contains("cannot notify"), "{text}");
    let text = driver(settings(SENSOR, NUS, Some(NUS_TX)))
        .open()
        .await
        .err()
        .expect("fails")
        .to_string();
    assert!(text.contains("cannot be written"), "{text}");

    // Every failed open let go of the device.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let state = mock.command("state").await;
    assert!(state.contains("connected=0"), "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_device_names_what_was_looked_for_and_what_was_seen() {
    let Some(python) = components() else { return };
    let _turn = TURN.lock().await;
    let _mock = Mock::start(&python, &[]).await;
    let mut d = driver(settings("Thermometer 9000", NUS, None));
    d.scan_timeout = Duration::from_secs(1);
    let e = d.open().await.err().expect("not found");
    assert!(
        matches!(e, DeviceError::Transient(_)),
        "worth retrying: {e:?}"
    );
    let text = e.to_string();
    for part in [
        "no BLE device named `Thermometer 9000`",
        "`Sextant Test Sensor` (C0:FF:EE:00:00:01)",
        "`Heart Rate Strap` (11:22:33:44:55:66)",
    ] {
        assert!(text.contains(part), "`{part}` missing from: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_adapter_is_reported_as_such() {
    let Some(python) = components() else { return };
    let _turn = TURN.lock().await;
    let _mock = Mock::start(&python, &["--no-adapter"]).await;
    let e = driver(settings(SENSOR, NUS, None))
        .open()
        .await
        .err()
        .expect("no adapter");
    assert!(
        e.to_string().starts_with("no Bluetooth adapter found"),
        "{e}"
    );
    let e = scan(Duration::from_millis(100))
        .await
        .expect_err("no adapter");
    assert!(
        e.to_string().starts_with("no Bluetooth adapter found"),
        "{e}"
    );
}
