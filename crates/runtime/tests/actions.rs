//! Actions against a device on a pseudo-terminal pair: a polled device gets its polls and
//! shows data, each timer mode sends what it promises (counted by the peer, not timed), a
//! send on connect comes first, nothing is sent after a disconnect, and every send is in
//! the console.

#[path = "../../devices/tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{require, PtyPair};
use serde_json::{json, Value};
use sextant_commands::Policy;
use sextant_runtime::{Caller, Runtime, Workspace};
use sextant_telemetry::project::{Connection, Project};

/// A device on the far end of the pty: it records every byte it is sent and answers each
/// `R` with `reply`.
struct Peer {
    received: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
}

impl Peer {
    fn start(path: &Path, reply: &'static [u8]) -> Peer {
        let mut port = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .expect("the peer end opens");
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, done) = (received.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            while !done.load(Ordering::Relaxed) {
                let Ok(n) = port.read(&mut buf) else { break };
                if n == 0 {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                log.lock().unwrap().extend_from_slice(&buf[..n]);
                for _ in buf[..n].iter().filter(|b| **b == b'R') {
                    if port.write_all(reply).is_err() {
                        return;
                    }
                }
            }
        });
        Peer { received, stop }
    }

    fn received(&self) -> Vec<u8> {
        self.received.lock().unwrap().clone()
    }

    fn count(&self, byte: u8) -> usize {
        self.received().iter().filter(|b| **b == byte).count()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A person's click, or any call with the person's yes.
fn person(rt: &mut Runtime, name: &str, params: Value) -> Value {
    let policy = Policy {
        auto_approve_edits: true,
        allow_device_control: true,
        ..Policy::default()
    };
    rt.execute(Caller::Ui, name, params.clone(), policy, true)
        .unwrap_or_else(|e| panic!("{name} {params}: {e:?}"))
}

/// Every byte the console shows as sent, from a display frame (the console record carries
/// the source with the sent bit).
fn console_sent(rt: &Runtime) -> Vec<u8> {
    let options: sextant_display::DisplayOptions =
        serde_json::from_value(json!({"refreshHz": 30, "points": 100, "timeRangeS": 10})).unwrap();
    let scope = rt.workspace.scope();
    let frame = scope
        .frame(&options, &mut scope.subscribe())
        .expect("a first frame");
    sextant_display::decode_console(&frame)
        .expect("a display frame")
        .into_iter()
        .filter(|(source, _)| source & sextant_display::SENT != 0)
        .flat_map(|(_, bytes)| bytes)
        .collect()
}

/// Polls `cond` (the runtime is driven by the test's tokio runtime) for up to 15 s.
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out: {what}");
}

/// A Serial Studio shape of `fixtures/serial-studio-shapes`, imported as a person would,
/// its one serial device moved to the pty's device end.
fn shape_on(name: &str, port: &Path) -> Project {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/serial-studio-shapes")
            .join(name),
    )
    .unwrap();
    let mut project = sextant_import::import_serial_studio(&text)
        .expect("imports")
        .project;
    let Connection::Serial(serial) = &mut project.sources[0].connection else {
        panic!("{name}'s device is a serial one");
    };
    serial.port = port.display().to_string();
    project
}

/// The Hexadecimal ADC shape.
fn polled_adc(port: &Path) -> Project {
    shape_on("polled-adc.ssproj", port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_answers_only_when_polled_shows_data_from_the_imported_timer() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    // 0x03FF = 1023 counts = 5 V.
    let peer = Peer::start(&pty.b, &[0x03, 0xFF, b'\n']);
    let mut rt = Runtime::new(Workspace::new(polled_adc(&pty.a)));
    person(&mut rt, "io.connect", json!({}));

    wait_until("ten polls reached the device", || peer.count(b'R') >= 10).await;
    wait_until("the polled value is on the dashboard", || {
        person(&mut rt, "dashboard.latestFrame", json!({}))
            .to_string()
            .contains("5.0")
    })
    .await;
    let latest = person(&mut rt, "dashboard.latestFrame", json!({}));
    assert!(latest.to_string().contains("5.0"), "{latest}");
    // The send on connect came before the first poll.
    let first = peer.received();
    assert!(
        first.starts_with(b"W\n"),
        "{:?}",
        String::from_utf8_lossy(&first)
    );
    assert_eq!(peer.count(b'W'), 1, "sent once for one connection");

    person(&mut rt, "io.disconnect", json!({}));
    // The source closes asynchronously; once it reports closed, nothing is sent any more.
    wait_until("the run ended", || {
        person(&mut rt, "io.status", json!({}))["connected"] == false
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = peer.count(b'R');
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        peer.count(b'R'),
        after,
        "a poll was sent after the disconnect"
    );
}

/// A project with one serial source on `port` and `actions`.
fn with_actions(port: &Path, actions: Value) -> Project {
    serde_json::from_value(json!({
        "title": "Timers",
        "sources": [{"id": "dev", "title": "Device",
                     "connection": {"type": "serial", "port": port.display().to_string(), "baud": 115200},
                     "parser": {"kind": "delimited", "separator": ","}}],
        "groups": [{"id": "g", "title": "G", "datasets": [{"id": "v", "title": "V", "index": 1}]}],
        "actions": actions,
    }))
    .expect("a valid project")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_timer_mode_sends_what_it_promises_and_every_send_is_in_the_console() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    let peer = Peer::start(&pty.b, b"");
    let project = with_actions(
        &pty.a,
        json!([
            {"id": "once", "title": "Once", "payload": "O"},
            {"id": "burst", "title": "Burst", "payload": "B", "timerMs": 20, "timer": "repeat", "repeatCount": 4},
            {"id": "toggle", "title": "Toggle", "payload": "T", "timerMs": 20, "timer": "toggleOnClick"},
            {"id": "start", "title": "Start", "payload": "S", "timerMs": 20, "timer": "startOnClick"},
        ]),
    );
    let mut rt = Runtime::new(Workspace::new(project));
    person(&mut rt, "io.connect", json!({}));
    wait_until("the device is connected", || {
        person(&mut rt, "io.status", json!({}))["sources"][0]["status"] == "connected"
    })
    .await;
    // Nothing is sent until a click.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(peer.received(), b"", "a click-started timer sent by itself");

    let once = person(&mut rt, "project.action.run", json!({"id": "once"}));
    assert_eq!(once["timer"], "sent");
    wait_until("the single send arrived", || peer.count(b'O') == 1).await;

    let burst = person(&mut rt, "project.action.run", json!({"id": "burst"}));
    assert_eq!(
        (burst["timer"].as_str(), burst["repeats"].as_u64()),
        (Some("repeating"), Some(4))
    );
    wait_until("four sends of the burst", || peer.count(b'B') == 4).await;

    let started = person(&mut rt, "project.action.run", json!({"id": "toggle"}));
    assert_eq!(started["timer"], "started");
    assert_eq!(
        person(&mut rt, "io.status", json!({}))["runningActions"],
        json!(["toggle"])
    );
    wait_until("the toggled timer sends", || peer.count(b'T') >= 3).await;
    let stopped = person(&mut rt, "project.action.run", json!({"id": "toggle"}));
    assert_eq!(stopped["timer"], "stopped");
    assert_eq!(
        person(&mut rt, "io.status", json!({}))["runningActions"],
        json!([])
    );

    // A second click on a running start-on-click timer does not start a second one.
    person(&mut rt, "project.action.run", json!({"id": "start"}));
    person(&mut rt, "project.action.run", json!({"id": "start"}));
    wait_until("the started timer sends", || peer.count(b'S') >= 3).await;

    // Counted, not timed: after the burst and the toggle ended, their counts hold still
    // while the start-on-click timer goes on sending.
    let (t, s) = (peer.count(b'T'), peer.count(b'S'));
    wait_until("the started timer sends five more", || {
        peer.count(b'S') >= s + 5
    })
    .await;
    assert_eq!(peer.count(b'B'), 4, "the burst sent more than its count");
    assert!(
        peer.count(b'T') <= t + 1,
        "the stopped toggle went on sending: {} after {t}",
        peer.count(b'T')
    );
    // One timer per action: two clicks did not double the rate of `S`.
    let (s, burst_b) = (peer.count(b'S'), peer.count(b'B'));
    wait_until("ten more sends of S", || peer.count(b'S') >= s + 10).await;
    assert_eq!(peer.count(b'B'), burst_b);

    // Every byte sent is in the console, marked as sent (the display frame's console
    // record carries the source with the sent bit).
    let sent = console_sent(&rt);
    for byte in [b'O', b'B', b'T', b'S'] {
        assert!(sent.contains(&byte), "{} not in the console", byte as char);
    }

    person(&mut rt, "io.disconnect", json!({}));
    wait_until("the run ended", || {
        person(&mut rt, "io.status", json!({}))["connected"] == false
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = peer.count(b'S');
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer.count(b'S'), after, "the timer outlived the disconnect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_controls_send_what_their_scripts_make_and_refuse_what_they_cannot() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    let peer = Peer::start(&pty.b, b"");
    let project = shape_on("obd-ii.ssproj", &pty.a);
    let group = project
        .groups
        .iter()
        .find(|g| !g.controls.is_empty())
        .expect("the output group")
        .clone();
    let id = |title: &str| {
        group
            .controls
            .iter()
            .find(|c| c.title == title)
            .unwrap_or_else(|| panic!("a control titled {title}"))
            .id
            .clone()
    };
    let mut rt = Runtime::new(Workspace::new(project));
    let control = |c: &str, value: Value| json!({"group": group.id, "control": c, "value": value});

    // Not connected: a send says so, a preview works.
    let offline = rt
        .execute(
            Caller::Ui,
            "project.control.send",
            control(&id("Read engine speed"), json!(1)),
            Policy {
                allow_device_control: true,
                ..Policy::default()
            },
            true,
        )
        .unwrap_err();
    assert!(offline.message.contains("not connected"), "{offline:?}");
    let preview = person(
        &mut rt,
        "project.control.preview",
        control(&id("Timeout (x4 ms)"), json!(200)),
    );
    assert_eq!(preview["hex"], "41 54 53 54 43 38 0D", "{preview}");

    person(&mut rt, "io.connect", json!({}));
    wait_until("the adapter is connected", || {
        person(&mut rt, "io.status", json!({}))["sources"][0]["status"] == "connected"
    })
    .await;
    wait_until("the reset on connect", || {
        peer.received().ends_with(b"ATZ\r")
    })
    .await;

    // Each kind of control, as the person sets it; the peer reads exactly the bytes.
    let rows: &[(&str, Value, &[u8])] = &[
        ("Read engine speed", json!(null), b"010C\r"),
        ("Monitor all", json!(true), b"ATMA\r"),
        ("Monitor all", json!(0), b"\r"),
        ("Adaptive timing", json!(2), b"ATAT2\r"),
        ("Timeout (x4 ms)", json!(10), b"ATST0A\r"),
        ("Raw command", json!("atdp"), b"ATDP\r"),
    ];
    for (title, value, want) in rows {
        let before = peer.received().len();
        let reply = person(
            &mut rt,
            "project.control.send",
            control(&id(title), value.clone()),
        );
        assert_eq!(reply["queuedBytes"], want.len(), "{title}: {reply}");
        wait_until(title, || peer.received().len() >= before + want.len()).await;
        assert_eq!(&peer.received()[before..], *want, "{title} with {value}");
    }

    // What a control cannot take is refused before its script runs, and sends nothing.
    let refused: &[(&str, Value, &str)] = &[
        ("Adaptive timing", json!(3), "outside the control's range"),
        ("Adaptive timing", json!("2"), "a number between"),
        ("Monitor all", json!(2), "0 or 1"),
        ("Raw command", json!(7), "text"),
        ("Raw command", json!("x".repeat(5000)), "longer than 4096"),
    ];
    let before = peer.received().len();
    for (title, value, says) in refused {
        let err = rt
            .execute(
                Caller::Ui,
                "project.control.send",
                control(&id(title), value.clone()),
                Policy {
                    allow_device_control: true,
                    ..Policy::default()
                },
                true,
            )
            .unwrap_err();
        assert!(err.message.contains(says), "{title} {value}: {err:?}");
    }
    // Without the person's yes a DeviceGated send does not run.
    let asked = rt.execute(
        Caller::Assistant,
        "project.control.send",
        control(&id("Read engine speed"), json!(1)),
        Policy {
            allow_device_control: true,
            ..Policy::default()
        },
        false,
    );
    assert!(asked.is_err(), "{asked:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(peer.received().len(), before, "nothing was sent");

    // Every send is in the console, marked as sent.
    let sent = console_sent(&rt);
    let sent = String::from_utf8_lossy(&sent);
    for text in ["010C\r", "ATMA\r", "ATST0A\r", "ATDP\r"] {
        assert!(sent.contains(text), "{text:?} not in the console: {sent:?}");
    }
}
