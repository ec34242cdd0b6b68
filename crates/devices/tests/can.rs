//! CAN with real parts: SLCAN through the `serialport` stack over socat pty pairs, with a
//! simulated adapter (tests/can/adapter.rs) on the far end; DBC import of
//! fixtures/can/vehicle.dbc; and DBC-decoded values through the pipeline, checked against
//! hand-computed expectations (tests/can/vehicle.rs).
//!
//! SocketCAN needs a kernel with AF_CAN, which this suite does not assume; its logic
//! below the socket is unit-tested in the crate, its real runs happen in a VM.

#[path = "can/adapter.rs"]
mod adapter;
mod common;
#[path = "can/vehicle.rs"]
mod vehicle;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use adapter::{Adapter, AdapterOptions};
use common::{require, wait_until, PtyPair};
use sextant_devices::can::{CanFrame, CanId};
use sextant_devices::dbc::{parse_dbc, read_dbc, DbcError};
use sextant_devices::slcan::{parse_line, Event, SlcanDriver};
use sextant_devices::wiring::{FrameSink, Wiring, WiringOptions};
use sextant_devices::{DeviceError, Reconnect, RunOptions, Source, SourceHandle, Status};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::project::{
    CanMux, CanSettings, CanValueType, Connection, Endian, FrameMode, ParserConfig,
    Source as ProjectSource,
};
use sextant_telemetry::{FrameEvent, Pipeline, Project, Value};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

fn slcan_settings(port: &Path) -> CanSettings {
    CanSettings {
        interface: port.display().to_string(),
        slcan: true,
        bitrate: 500_000,
        ..CanSettings::default()
    }
}

fn fast_reconnect() -> RunOptions {
    RunOptions {
        reconnect: Reconnect {
            enabled: true,
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        ..RunOptions::default()
    }
}

async fn connected(h: &SourceHandle) {
    let st = tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| matches!(s, Status::Connected | Status::Error(_))),
    )
    .await;
    assert!(
        matches!(st, Ok(Status::Connected)),
        "not connected: {}",
        h.status()
    );
}

async fn chunks(source: &mut Source, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while got.len() < n {
            match source.chunks.recv().await {
                Some(c) => got.push(c.data.to_vec()),
                None => break,
            }
        }
    })
    .await;
    got
}

/// Received lines and the chunks they must become, in the CAN layout.
fn received_cases() -> Vec<(String, Vec<u8>)> {
    let fd12: String = (0..12).map(|b| format!("{b:02X}")).collect();
    vec![
        (
            "t12381122334455667788".into(),
            hex("0123081122334455667788"),
        ),
        ("T1ABCDEF03010203".into(), hex("9abcdef003010203")),
        ("r1234".into(), hex("412304")),
        ("R18FF00012".into(), hex("d8ff000102")),
        ("t1232AABB1234".into(), hex("012302aabb")), // adapter timestamp 0x1234
        (
            format!("d0429{fd12}"),
            [hex("20420c"), (0..12).collect()].concat(),
        ),
        (
            format!("B18FF0001F{}", "AB".repeat(64)),
            [hex("b8ff000140"), vec![0xAB; 64]].concat(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slcan_handshake_frames_garbage_writes_and_close() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    let adapter = Adapter::start(&pty.b, AdapterOptions::default());
    let driver = SlcanDriver::new(CanSettings {
        fd: true,
        data_bitrate: Some(2_000_000),
        ..slcan_settings(&pty.a)
    })
    .unwrap();
    let counters = driver.counters();
    let mut source = Source::spawn(driver, RunOptions::default());
    let h = source.handle();
    connected(&h).await;
    // End a half-written command, close, bitrate, FD data bitrate, open.
    assert_eq!(adapter.commands(), ["", "C", "S6", "Y2", "O"]);
    assert!(adapter.is_open());

    let cases = received_cases();
    let mut stream = Vec::new();
    for (i, (line, _)) in cases.iter().enumerate() {
        stream.extend_from_slice(line.as_bytes());
        stream.push(b'\r');
        if i == 2 {
            // Two malformed lines and an adapter error between good frames.
            stream.extend_from_slice(b"tXYZ\r\x07hello there\r");
        }
    }
    adapter.send(&stream);
    let got = chunks(&mut source, cases.len()).await;
    let want: Vec<Vec<u8>> = cases.iter().map(|(_, c)| c.clone()).collect();
    assert_eq!(got, want);
    let stats = counters.snapshot();
    assert_eq!(stats.frames, cases.len() as u64, "{stats:?}");
    assert_eq!(stats.malformed_lines, 2, "{stats:?}");
    assert_eq!(stats.adapter_errors, 1, "{stats:?}");
    assert!(
        stats
            .last_problem
            .as_deref()
            .unwrap_or("")
            .contains("`hello there`"),
        "{stats:?}"
    );

    // Chunks in the CAN layout become transmit commands; the adapter's `z`/`Z`
    // acknowledgements are neither frames nor problems.
    let std = |id| CanId::standard(id).unwrap();
    let ext = |id| CanId::extended(id).unwrap();
    let fd_data: Vec<u8> = (0..12).collect();
    let writes: Vec<(Vec<u8>, &str)> = vec![
        (
            CanFrame::data(std(0x123), &[0xDE, 0xAD])
                .unwrap()
                .to_bytes(),
            "t1232DEAD",
        ),
        (
            CanFrame::data(ext(0x18FF_0001), &[1, 2, 3])
                .unwrap()
                .to_bytes(),
            "T18FF00013010203",
        ),
        (CanFrame::remote(std(0x7FF), 8).unwrap().to_bytes(), "r7FF8"),
        (
            CanFrame::fd(std(0x42), &fd_data).unwrap().to_bytes(),
            "b0429000102030405060708090A0B", // bit-rate switch: a data bitrate is set
        ),
    ];
    for (chunk, _) in &writes {
        h.write(chunk.clone()).await.unwrap();
    }
    assert!(wait_until(Duration::from_secs(5), || adapter.sent().len()
        == writes.len()));
    let want: Vec<&str> = writes.iter().map(|(_, cmd)| *cmd).collect();
    assert_eq!(adapter.sent(), want);

    // A chunk that is not a CAN frame fails that write only.
    let e = h.write(&b"\x01"[..]).await.unwrap_err();
    assert!(matches!(e, DeviceError::Fatal(_)), "{e:?}");
    assert!(
        e.to_string().contains("cannot send this as a CAN frame"),
        "{e}"
    );
    assert_eq!(h.status(), Status::Connected);
    h.write(writes[0].0.clone()).await.unwrap();
    assert!(wait_until(Duration::from_secs(5), || adapter.sent().len()
        == writes.len() + 1));
    let stats = counters.snapshot();
    assert_eq!(
        (stats.malformed_lines, stats.adapter_errors),
        (2, 1),
        "{stats:?}"
    );

    let before = adapter.commands().len();
    h.close().await;
    h.wait_for(|s| *s == Status::Closed).await;
    let commands = adapter.wait_commands(before + 1);
    assert_eq!(
        commands.last().map(String::as_str),
        Some("C"),
        "{commands:?}"
    );
    assert!(!adapter.is_open());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slcan_listen_only_and_silent_firmware() {
    if !require("socat", "socat") {
        return;
    }
    // (adapter answers commands, listen-only, commands it must see)
    let cases: &[(bool, bool, &[&str])] = &[
        (true, true, &["", "C", "S6", "L"]),
        // Firmware that never answers: silence counts as acceptance.
        (false, false, &["", "C", "S6", "O"]),
    ];
    for &(answers, listen_only, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let pty = PtyPair::start(dir.path());
        let adapter = Adapter::start(
            &pty.b,
            AdapterOptions {
                answers,
                ..AdapterOptions::default()
            },
        );
        let driver = SlcanDriver::new(CanSettings {
            listen_only,
            ..slcan_settings(&pty.a)
        })
        .unwrap();
        let mut source = Source::spawn(driver, RunOptions::default());
        let h = source.handle();
        connected(&h).await;
        assert_eq!(adapter.commands(), want, "answers={answers}");
        adapter.send(b"t10020102\r");
        assert_eq!(chunks(&mut source, 1).await, [hex("0100020102")]);
        let frame = CanFrame::data(CanId::Standard(1), &[9]).unwrap().to_bytes();
        let written = h.write(frame).await;
        if listen_only {
            let e = written.unwrap_err();
            assert!(e.to_string().contains("listen-only"), "{e}");
            assert_eq!(h.status(), Status::Connected);
        } else {
            written.unwrap();
            assert!(wait_until(Duration::from_secs(5), || adapter
                .commands()
                .len()
                > want.len()));
            assert_eq!(adapter.commands()[want.len()], "t001109");
        }
        h.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slcan_refusals_and_unsupported_rates_are_clear_errors() {
    let e = SlcanDriver::new(CanSettings {
        bitrate: 83_333,
        ..slcan_settings(Path::new("/dev/ttyACM0"))
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("cannot run at 83.333 kbit/s"), "{e}");
    let e = SlcanDriver::new(CanSettings {
        fd: true,
        data_bitrate: Some(3_000_000),
        ..slcan_settings(Path::new("/dev/ttyACM0"))
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("1, 2, 4 or 5 Mbit/s"), "{e}");

    if !require("socat", "socat") {
        return;
    }
    // (bitrate, commands the adapter refuses, listen-only, text the error must have)
    let cases: &[(u32, &[&'static str], bool, &str)] = &[
        (800_000, &["S7"], false, "refused bitrate 800 kbit/s (`S7`)"),
        (500_000, &["L"], true, "refused listen-only mode"),
    ];
    for &(bitrate, refuse, listen_only, needle) in cases {
        let dir = tempfile::tempdir().unwrap();
        let pty = PtyPair::start(dir.path());
        let _adapter = Adapter::start(
            &pty.b,
            AdapterOptions {
                answers: true,
                refuse: refuse.to_vec(),
            },
        );
        let driver = SlcanDriver::new(CanSettings {
            bitrate,
            listen_only,
            ..slcan_settings(&pty.a)
        })
        .unwrap();
        let source = Source::spawn(driver, fast_reconnect());
        let st = tokio::time::timeout(
            Duration::from_secs(10),
            source
                .handle()
                .wait_for(|s| matches!(s, Status::Error(_) | Status::Connected)),
        )
        .await
        .expect("the open must end");
        match st {
            Status::Error(message) => assert!(message.contains(needle), "{message}"),
            other => panic!("a refused {needle} must be a fatal error, got {other}"),
        }
        source.handle().close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slcan_unplug_reconnects_and_resumes() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut pty = PtyPair::start(dir.path());
    let adapter = Adapter::start(&pty.b, AdapterOptions::default());
    let mut source = Source::spawn(
        SlcanDriver::new(slcan_settings(&pty.a)).unwrap(),
        fast_reconnect(),
    );
    let h = source.handle();
    connected(&h).await;
    adapter.send(b"t1231AA\r");
    assert_eq!(chunks(&mut source, 1).await, [hex("012301aa")]);

    pty.unplug();
    let st = tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| matches!(s, Status::Reconnecting { .. })),
    )
    .await
    .expect("an unplugged adapter must report reconnecting");
    assert!(st.to_string().contains("reconnecting"), "{st}");

    let pty = PtyPair::start(dir.path());
    let adapter = Adapter::start(&pty.b, AdapterOptions::default());
    connected(&h).await;
    assert!(h.stats().connects >= 2);
    // The whole handshake again, on the new adapter.
    assert_eq!(adapter.commands(), ["", "C", "S6", "O"]);
    adapter.send(b"t1231BB\r");
    assert_eq!(chunks(&mut source, 1).await, [hex("012301bb")]);
    h.close().await;
}

#[test]
fn dbc_import_maps_messages_signals_and_notes() {
    let import = read_dbc(&fixture("can/vehicle.dbc")).unwrap();
    let names: Vec<&str> = import.messages.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["Engine", "Chassis", "Battery", "Environment"]);
    let signals: Vec<&str> = import
        .messages
        .iter()
        .flat_map(|m| m.signals.iter().map(|s| s.layout.name.as_str()))
        .collect();
    assert_eq!(signals, vehicle::SIGNALS);
    assert_eq!(import.signal_count(), 14);

    let battery = &import.messages[2];
    assert_eq!((battery.id, battery.extended), (0x18FF_0001, true));
    let layout = import.layout();
    let signal = |m: usize, name: &str| {
        layout[m]
            .signals
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .clone()
    };
    let steering = signal(1, "SteeringAngle");
    assert_eq!(
        (steering.start_bit, steering.size, steering.byte_order),
        (7, 16, Endian::Big)
    );
    assert_eq!(steering.value_type, CanValueType::Signed);
    assert_eq!(steering.factor, 0.1);
    let current = signal(2, "PackCurrent");
    assert_eq!((current.factor, current.offset), (0.1, -100.0));
    assert_eq!(
        current.mux,
        Some(CanMux {
            switch: "Mux".into(),
            ranges: vec![[0, 0]]
        })
    );
    assert_eq!(signal(2, "CellTempMin").mux.unwrap().ranges, vec![[1, 1]]);
    assert_eq!(signal(2, "Mux").mux, None);
    assert_eq!(signal(2, "SoC").mux, None);
    assert_eq!(signal(3, "AmbientPressure").value_type, CanValueType::Float);

    let engine = &import.messages[0].signals[0];
    assert_eq!(engine.unit, "rpm");
    assert_eq!((engine.min, engine.max), (Some(0.0), Some(16383.75)));
    let mux = &battery.signals[0];
    assert_eq!((mux.min, mux.max), (None, None), "[0|0] means no range");

    // Nothing dropped silently.
    let notes = import.notes.join("\n");
    for needle in ["VECTOR__INDEPENDENT_SIG_MSG", "VAL_", "CM_"] {
        assert!(notes.contains(needle), "{needle} missing from:\n{notes}");
    }
}

/// A project with one SLCAN source on `port`, the DBC applied to it.
fn vehicle_project(port: &str) -> Project {
    let mut project = Project {
        title: "Vehicle".into(),
        ..Project::default()
    };
    project.sources.push(ProjectSource {
        id: "src-1".into(),
        title: "CAN".into(),
        connection: Connection::Can(CanSettings {
            fd: true,
            data_bitrate: Some(2_000_000),
            ..slcan_settings(Path::new(port))
        }),
        ..ProjectSource::default()
    });
    let import = read_dbc(&fixture("can/vehicle.dbc")).unwrap();
    let groups = import.apply(&mut project, "src-1").unwrap();
    assert_eq!(groups, ["grp-1", "grp-2", "grp-3", "grp-4"]);
    assert!(matches!(
        project.sources[0].parser,
        ParserConfig::Can { .. }
    ));
    assert_eq!(project.sources[0].framing.mode, FrameMode::None);
    assert_eq!(project.validate(), vec![], "the imported project is valid");
    // It survives a save/load round trip (the layout is project data, not a path).
    let text = serde_json::to_string(&project).unwrap();
    let again = Project::from_json_str(&text).unwrap();
    assert_eq!(again, project);
    project
}

/// Checks event values against the cumulative expectations after frame `i`.
fn check_values(titles: &[String], values: &[Value], expected: &HashMap<&str, f64>, i: usize) {
    for (title, value) in titles.iter().zip(values) {
        match (expected.get(title.as_str()), value) {
            (None, Value::Null) => {}
            (Some(want), Value::Number(got)) if vehicle::close(*got, *want) => {}
            (want, got) => panic!("after frame {i}: {title} is {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn dbc_layout_decodes_in_the_pipeline() {
    let project = vehicle_project("/dev/null");
    let mut pipeline = Pipeline::new(&project).unwrap();
    let titles: Vec<String> = pipeline
        .datasets()
        .iter()
        .map(|d| d.title.clone())
        .collect();
    assert_eq!(titles, vehicle::SIGNALS);
    let mut expected = HashMap::new();
    for (i, (line, updates)) in vehicle::FRAMES.iter().enumerate() {
        for ignored in vehicle::IGNORED {
            let Event::Frame(chunk) = parse_line(ignored.as_bytes()) else {
                panic!("{ignored}")
            };
            pipeline.push(0, Default::default(), &chunk, &mut |_| {
                panic!("{ignored} must update nothing")
            });
        }
        let Event::Frame(chunk) = parse_line(line.as_bytes()) else {
            panic!("{line} is a frame line")
        };
        expected.extend(updates.iter().copied());
        let mut events = 0;
        pipeline.push(0, Default::default(), &chunk, &mut |ev| {
            events += 1;
            check_values(&titles, ev.values, &expected, i);
        });
        assert_eq!(events, 1, "{line}");
    }
    let stats = pipeline.stats(0).unwrap();
    assert_eq!(stats.frames_parsed, vehicle::FRAMES.len() as u64);
    assert_eq!(stats.parse_errors, 0, "{stats:?}");
}

struct Recorder(Arc<Mutex<Vec<Vec<Value>>>>);

impl FrameSink for Recorder {
    fn frame(&mut self, event: &FrameEvent<'_>, _datasets: &[DatasetInfo]) {
        self.0.lock().unwrap().push(event.values.to_vec());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dbc_decoded_end_to_end_over_slcan() {
    if !require("socat", "socat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    let adapter = Adapter::start(&pty.b, AdapterOptions::default());
    let project = vehicle_project(&pty.a.display().to_string());
    let Connection::Can(settings) = project.sources[0].connection.clone() else {
        unreachable!("the project's source is CAN")
    };
    let driver = SlcanDriver::new(settings).unwrap();
    let counters = driver.counters();
    let source = Source::spawn(driver, RunOptions::default());
    let (chunk_rx, h) = source.into_parts();
    connected(&h).await;

    let pipeline = Pipeline::new(&project).unwrap();
    let titles: Vec<String> = pipeline
        .datasets()
        .iter()
        .map(|d| d.title.clone())
        .collect();
    let events = Arc::new(Mutex::new(Vec::new()));
    let wiring = Wiring::start(
        pipeline,
        vec![(0, chunk_rx)],
        vec![Box::new(Recorder(events.clone()))],
        WiringOptions::default(),
    );

    // The whole drive in one burst: frames, remote requests, an unknown id and garbage.
    let mut stream = Vec::new();
    for (line, _) in vehicle::FRAMES {
        for noise in vehicle::IGNORED.iter().chain(&["not slcan"]) {
            stream.extend_from_slice(noise.as_bytes());
            stream.push(b'\r');
        }
        stream.extend_from_slice(line.as_bytes());
        stream.push(b'\r');
    }
    adapter.send(&stream);
    assert!(
        wait_until(Duration::from_secs(10), || events.lock().unwrap().len()
            >= vehicle::FRAMES.len()),
        "only {} frames decoded",
        events.lock().unwrap().len()
    );
    h.close().await;
    let pipeline = wiring.join();

    let events = events.lock().unwrap().clone();
    assert_eq!(events.len(), vehicle::FRAMES.len());
    let mut expected = HashMap::new();
    for (i, ((_, updates), values)) in vehicle::FRAMES.iter().zip(&events).enumerate() {
        expected.extend(updates.iter().copied());
        check_values(&titles, values, &expected, i);
    }
    let stats = pipeline.stats(0).unwrap();
    assert_eq!(
        stats.frames_parsed,
        vehicle::FRAMES.len() as u64,
        "{stats:?}"
    );
    assert_eq!(stats.parse_errors, 0, "{stats:?}");
    let slcan = counters.snapshot();
    assert_eq!(
        slcan.malformed_lines,
        vehicle::FRAMES.len() as u64,
        "{slcan:?}"
    );
}

#[test]
fn bad_dbc_files_are_refused_with_a_reason() {
    match parse_dbc("BO_ 256 Engine: 8 ECU\n SG_ Broken : x|8@1+ (1,0) [0|0] \"\" ECU\n") {
        Err(DbcError::Syntax(message)) => assert!(!message.is_empty()),
        other => panic!("expected a syntax error, got {other:?}"),
    }
    let only_bad = "VERSION \"\"\n\nNS_ :\n\nBS_:\n\nBU_: ECU\n\n\
                    BO_ 1 Wide: 8 ECU\n SG_ Huge : 0|65@1+ (1,0) [0|0] \"\" ECU\n\
                     SG_ Far : 18446744073709551615|8@0+ (1,0) [0|0] \"\" ECU\n";
    match parse_dbc(only_bad) {
        Err(e @ DbcError::Empty { .. }) => {
            let DbcError::Empty { notes } = &e else {
                unreachable!()
            };
            let notes = notes.join(" ");
            assert!(notes.contains("65 bits wide"), "{notes}");
            assert!(
                notes.contains("`Wide.Far` was skipped: it ends beyond byte 63"),
                "{notes}"
            );
            assert!(e.to_string().contains("nothing to import"), "{e}");
        }
        other => panic!("expected an empty import, got {other:?}"),
    }
    let e = read_dbc(Path::new("/nonexistent/vehicle.dbc")).unwrap_err();
    assert!(e.to_string().contains("could not read the DBC file"), "{e}");
    let import = read_dbc(&fixture("can/vehicle.dbc")).unwrap();
    let e = import.apply(&mut Project::default(), "nope").unwrap_err();
    assert!(e.to_string().contains("no source with id `nope`"), "{e}");
}
