//! Bluetooth LE against the real Linux stack: inside the QEMU guest that tests/vm/run boots,
//! `btvirt -L -l2` gives the kernel two virtual LE controllers on one emulated radio, the
//! real `bluetoothd` runs on a system D-Bus of the guest's own, and
//! tests/vm_gatt_server.py registers a GATT application and an advertisement with it: a
//! device named `Sextant VM Sensor` with service FFE0, a notify characteristic FFE1 (a
//! counter every 100 ms, and an echo of every write) and a write characteristic FFE2.
//! btleplug (through `scan` and `BleDriver`) then scans, connects, resolves the services,
//! subscribes, receives notifications and writes, over real HCI, L2CAP and ATT.
//!
//! `BleDriver` takes the first adapter btleplug lists, and that order is not fixed (it
//! comes from a hash map), while an emulated controller that advertises hears nothing. So
//! the GATT application is served on both controllers, and the one that starts discovering
//! stops advertising while the other starts: whichever one btleplug scans with finds the
//! other (see tests/vm_gatt_server.py).
//!
//! On the host this test is `#[ignore]`d; run with `--ignored` outside the guest it fails.
#![cfg(target_os = "linux")]

mod common;
mod vm_guest;

use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::wait_until;
use sextant_devices::ble::{parse_uuid, scan, BleDriver};
use sextant_devices::{DeviceError, Driver, Reconnect, RunOptions, Source, Status};
use sextant_telemetry::project::BleSettings;
use vm_guest::require_guest;

const NAME: &str = "Sextant VM Sensor";
const GATT_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vm_gatt_server.py");
/// BlueZ under emulation: connecting and resolving services take many seconds.
const PATIENCE: Duration = Duration::from_secs(90);

/// A background program, stopped when this test process ends however it ends: a shell
/// runs it and kills it once its stdin (held here) closes.
struct Daemon {
    _shell: Child,
    _stdin: ChildStdin,
}

fn daemon(program: &str, args: &[&str], log: &Path) -> Daemon {
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(r#"log="$1"; shift; "$@" >"$log" 2>&1 & read _; kill $!"#)
        .arg("sh")
        .arg(log)
        .arg(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let stdin = shell.stdin.take().unwrap();
    Daemon {
        _shell: shell,
        _stdin: stdin,
    }
}

fn log_of(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("sextant-vm-{name}.log"))
}

fn read_log(name: &str) -> String {
    std::fs::read_to_string(log_of(name)).unwrap_or_default()
}

/// Everything the daemons logged, for failure messages.
fn logs() -> String {
    ["btvirt", "dbus", "bluetoothd", "gatt"]
        .iter()
        .map(|n| format!("--- {n}:\n{}", read_log(n)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The address BlueZ reports for adapter `hciN`, once bluetoothd has it.
fn adapter_address(name: &str) -> Option<String> {
    let out = Command::new("dbus-send")
        .args([
            "--system",
            "--print-reply",
            "--dest=org.bluez",
            &format!("/org/bluez/{name}"),
            "org.freedesktop.DBus.Properties.Get",
            "string:org.bluez.Adapter1",
            "string:Address",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text.find("string \"")? + 8;
    let end = start + text[start..].find('"')?;
    Some(text[start..end].to_string())
}

struct Bluetooth {
    /// Addresses of hci0 and hci1.
    addresses: Vec<String>,
    _daemons: Vec<Daemon>,
}

/// Starts btvirt, the system bus, bluetoothd and the GATT server (once per process).
fn bluetooth() -> &'static Bluetooth {
    static BT: OnceLock<Bluetooth> = OnceLock::new();
    BT.get_or_init(|| {
        let started = Instant::now();
        let mut daemons = vec![daemon("btvirt", &["-L", "-l2"], &log_of("btvirt"))];
        assert!(
            wait_until(PATIENCE, || ["hci0", "hci1"].iter().all(|h| Path::new(
                "/sys/class/bluetooth"
            )
            .join(h)
            .exists())),
            "btvirt made no controllers hci0 and hci1 (it needs /dev/vhci and the AF_ALG \
             modules):\n{}",
            logs()
        );
        std::fs::create_dir_all("/run/dbus").unwrap();
        daemons.push(daemon(
            "dbus-daemon",
            &["--system", "--nofork", "--nopidfile"],
            &log_of("dbus"),
        ));
        assert!(
            wait_until(PATIENCE, || Path::new("/run/dbus/system_bus_socket")
                .exists()),
            "the system bus did not start:\n{}",
            logs()
        );
        daemons.push(daemon("bluetoothd", &["-n"], &log_of("bluetoothd")));
        let mut addresses = Vec::new();
        assert!(
            wait_until(PATIENCE, || {
                addresses = ["hci0", "hci1"]
                    .iter()
                    .filter_map(|h| adapter_address(h))
                    .collect();
                addresses.len() == 2
            }),
            "bluetoothd did not list both adapters:\n{}",
            logs()
        );
        daemons.push(daemon(
            "/usr/bin/python3",
            &[GATT_SERVER, "hci0", "hci1"],
            &log_of("gatt"),
        ));
        assert!(
            wait_until(PATIENCE, || read_log("gatt").contains("ready")),
            "the GATT server did not get ready:\n{}",
            logs()
        );
        eprintln!(
            "bluetooth: controllers {addresses:?} serving `{NAME}` after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Bluetooth {
            addresses,
            _daemons: daemons,
        }
    })
}

/// Drops every LE link between the two controllers, from whichever side has it (the
/// other side's `btmgmt` just reports "Not Connected").
fn drop_connections(addresses: &[String]) {
    for (index, other) in [(0, &addresses[1]), (1, &addresses[0])] {
        let _ = Command::new("btmgmt")
            .args([
                "--index",
                &index.to_string(),
                "disconnect",
                "-t",
                "1",
                other,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn settings(service: &str, notify: &str, write: Option<&str>) -> BleSettings {
    BleSettings {
        device: NAME.into(),
        service: service.into(),
        notify_characteristic: notify.into(),
        write_characteristic: write.map(Into::into),
    }
}

fn driver(service: &str, notify: &str, write: Option<&str>) -> BleDriver {
    let mut driver = BleDriver::new(settings(service, notify, write)).unwrap();
    driver.scan_timeout = Duration::from_secs(30);
    driver
}

/// BLE end to end, in order: the scan comes first, while BlueZ knows nothing of the
/// device but what it advertises.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs inside the QEMU guest via tests/vm/run"]
async fn scan_connect_notify_write_reconnect_and_refuse_wrong_settings() {
    require_guest();
    let bt = bluetooth();
    scan_lists_the_advertising_peripheral(bt).await;
    notifications_and_writes_through_a_source(bt).await;
    a_wrong_service_or_characteristic_is_explained().await;
}

async fn scan_lists_the_advertising_peripheral(bt: &Bluetooth) {
    // The first discovery: nothing advertised before it, so it hears the other adapter
    // at once (see tests/vm_gatt_server.py).
    let devices = scan(Duration::from_secs(8)).await.expect("the scan runs");
    eprintln!("scan: {devices:?}");
    let sensor = devices
        .iter()
        .find(|d| d.name.as_deref() == Some(NAME))
        .unwrap_or_else(|| panic!("`{NAME}` not among {devices:?}\n{}", logs()));
    assert!(
        bt.addresses.contains(&sensor.address),
        "{} is neither controller {:?}",
        sensor.address,
        bt.addresses
    );
    // The RSSI is not checked: btvirt reports 127 ("not available"), which comes through
    // as `Some(127)` or `None`.
    // Only what the advertisement says: nothing has connected and read its GATT services.
    assert_eq!(
        sensor.services,
        [parse_uuid("ffe0").unwrap()],
        "the advertised service: {sensor:?}"
    );
}

async fn notifications_and_writes_through_a_source(bt: &Bluetooth) {
    let options = RunOptions {
        reconnect: Reconnect {
            enabled: true,
            initial: Duration::from_millis(500),
            max: Duration::from_secs(2),
        },
        ..RunOptions::default()
    };
    let started = Instant::now();
    let mut source = Source::spawn(driver("ffe0", "ffe1", Some("ffe2")), options);
    let h = source.handle();
    let st = tokio::time::timeout(
        PATIENCE,
        h.wait_for(|s| matches!(s, Status::Connected | Status::Error(_))),
    )
    .await;
    assert!(
        matches!(st, Ok(Status::Connected)),
        "not connected: {}\n{}",
        h.status(),
        logs()
    );
    eprintln!(
        "ble: scanned, connected, resolved and subscribed in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The counter: consecutive values, one notification per chunk.
    let mut counters = Vec::new();
    while counters.len() < 5 {
        let chunk = tokio::time::timeout(PATIENCE, source.chunks.recv())
            .await
            .expect("notifications arrive")
            .expect("the source runs");
        assert_eq!(chunk.data.len(), 4, "{:?}", chunk.data);
        counters.push(u32::from_le_bytes(chunk.data[..].try_into().unwrap()));
    }
    for pair in counters.windows(2) {
        assert_eq!(pair[1], pair[0] + 1, "notifications lost: {counters:?}");
    }

    // A write reaches the peripheral, which echoes it as a notification.
    h.write(Bytes::from_static(b"hello")).await.unwrap();
    let end = Instant::now() + PATIENCE;
    loop {
        let chunk = tokio::time::timeout_at(end.into(), source.chunks.recv())
            .await
            .expect("the echo arrives")
            .expect("the source runs");
        if chunk.data.starts_with(b"echo:") {
            assert_eq!(&chunk.data[..], b"echo:hello");
            break;
        }
    }
    assert!(
        read_log("gatt").contains("written 68656c6c6f"),
        "{}",
        logs()
    );
    let stats = h.stats();
    assert_eq!(stats.dropped_chunks, 0, "{stats:?}");
    assert_eq!(stats.bytes_written, 5, "{stats:?}");

    // The link drops (as when the device goes out of range): the source reconnects,
    // subscribes again and notifications resume.
    let subscriptions = read_log("gatt").matches("\nsubscribed").count();
    let dropped = Instant::now();
    drop_connections(&bt.addresses);
    let st = tokio::time::timeout(
        PATIENCE,
        h.wait_for(|s| matches!(s, Status::Reconnecting { .. })),
    )
    .await
    .expect("a dropped link must be reported");
    assert!(st.to_string().contains("disconnected"), "{st}");
    let st = tokio::time::timeout(
        PATIENCE,
        h.wait_for(|s| matches!(s, Status::Connected | Status::Error(_))),
    )
    .await;
    assert!(
        matches!(st, Ok(Status::Connected)),
        "not reconnected: {}\n{}",
        h.status(),
        logs()
    );
    assert!(h.stats().connects >= 2, "{:?}", h.stats());
    eprintln!(
        "ble: reconnected {:.1} s after the link dropped",
        dropped.elapsed().as_secs_f64()
    );
    let end = Instant::now() + PATIENCE;
    loop {
        let chunk = tokio::time::timeout_at(end.into(), source.chunks.recv())
            .await
            .expect("notifications resume")
            .expect("the source runs");
        if chunk.data.len() == 4 {
            break;
        }
    }
    assert!(read_log("gatt").matches("\nsubscribed").count() > subscriptions);

    // Closing unsubscribes and disconnects.
    h.close().await;
    h.wait_for(|s| *s == Status::Closed).await;
    assert!(
        wait_until(PATIENCE, || read_log("gatt").contains("unsubscribed")),
        "{}",
        logs()
    );
}

async fn a_wrong_service_or_characteristic_is_explained() {
    // (settings, what the error must say)
    let cases: [(BleDriver, &[&str]); 2] = [
        (
            driver("180d", "2a37", None),
            &[
                "has no GATT service 0000180d-",
                "0000ffe0-0000-1000-8000-00805f9b34fb (HM-10 serial, short 0xffe0)",
            ],
        ),
        (
            driver("ffe0", "ffe2", None),
            &["characteristic 0000ffe2-", "cannot notify", "write"],
        ),
    ];
    for (mut driver, needles) in cases {
        let e = match driver.open().await {
            Ok(_) => panic!("opened with wrong settings"),
            Err(e) => e,
        };
        assert!(matches!(e, DeviceError::Fatal(_)), "{e:?}\n{}", logs());
        for needle in needles {
            assert!(e.to_string().contains(needle), "{needle} not in: {e}");
        }
    }
}
