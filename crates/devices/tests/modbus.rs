//! Modbus sources against a real pymodbus server (`tests/modbus_server.py`) on 127.0.0.1,
//! and over a pseudo-terminal pair for RTU; plus register-map import and settings checks,
//! which need no server.
//!
//! The server runs under the Python named by `SEXTANT_TEST_PYTHON` (`./dev test` installs
//! pymodbus into a virtualenv and sets it). Without it, the virtualenv `./dev test` leaves
//! in the target directory and then `python3` are tried; if none has pymodbus the server
//! tests fail under CI and print a loud skip otherwise.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{free_port, require, wait_until, PtyPair};
use sextant_devices::modbus::{
    self, import_register_map, validate, ModbusDriver, RegisterMapError, SettingsError,
};
use sextant_devices::wiring::{Wiring, WiringOptions};
use sextant_devices::{DeviceError, Reconnect, RunOptions, Source, Status};
use sextant_telemetry::project::{
    Connection, ModbusSettings, RegisterGroup, RegisterKind, SerialSettings, TransformLanguage,
};
use sextant_telemetry::{Pipeline, Value};

const SERVER_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/modbus_server.py");
/// What the server script needs: the pymodbus 3.16+ simulator API, and pyserial for RTU.
const PROBE: &str = "import pymodbus.server, pymodbus.simulator, serial";
const INSTALL_HINT: &str =
    "run ./dev test (it installs pymodbus into a virtualenv and sets SEXTANT_TEST_PYTHON), \
     or pip install 'pymodbus[serial]>=3.16,<4' and set SEXTANT_TEST_PYTHON to that python";

/// A Python that can run the server; fails under CI and skips loudly otherwise.
fn python() -> Option<PathBuf> {
    common::python_with("pymodbus", PROBE, INSTALL_HINT)
}

/// The test server on 127.0.0.1 (or on a serial port), stopped on drop.
struct Server {
    python: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    pub port: u16,
}

impl Server {
    fn tcp(python: PathBuf, dir: &Path) -> Server {
        let port = free_port();
        let mut server = Server {
            python,
            args: vec!["tcp".into(), port.to_string()],
            log: dir.join("modbus-server.log"),
            child: None,
            port,
        };
        server.restart();
        let up = wait_until(Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() || server.exited()
        });
        assert!(
            up && !server.exited(),
            "the Modbus server did not start listening: {}",
            server.log_text()
        );
        server
    }

    fn rtu(python: PathBuf, dir: &Path, tty: &Path) -> Server {
        let mut server = Server {
            python,
            args: vec!["rtu".into(), tty.display().to_string(), "19200".into()],
            log: dir.join("modbus-server.log"),
            child: None,
            port: 0,
        };
        server.restart();
        server
    }

    fn restart(&mut self) {
        self.stop();
        let log = std::fs::File::create(&self.log).expect("server log");
        let child = Command::new(&self.python)
            .arg(SERVER_SCRIPT)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the Modbus server starts");
        self.child = Some(child);
        if self.port != 0 {
            let port = self.port;
            let up = wait_until(Duration::from_secs(20), || {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() || self.exited()
            });
            assert!(
                up && !self.exited(),
                "the Modbus server did not start listening: {}",
                self.log_text()
            );
        }
    }

    fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Sends a signal (`STOP`, `CONT`) to the server process.
    fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("the server runs").id();
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "could not send SIG{name} to the server");
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn group(kind: RegisterKind, start: u16, count: u16) -> RegisterGroup {
    RegisterGroup { kind, start, count }
}

fn tcp_settings(port: u16, groups: Vec<RegisterGroup>) -> ModbusSettings {
    ModbusSettings {
        host: "127.0.0.1".into(),
        port,
        slave_id: 1,
        poll_interval_ms: 100,
        groups,
        ..ModbusSettings::default()
    }
}

fn fast_reconnect() -> RunOptions {
    RunOptions {
        reconnect: Reconnect {
            enabled: true,
            initial: Duration::from_millis(100),
            max: Duration::from_millis(500),
        },
        ..RunOptions::default()
    }
}

async fn connected(source: &Source) {
    let h = source.handle();
    tokio::time::timeout(
        Duration::from_secs(15),
        h.wait_for(|s| *s == Status::Connected),
    )
    .await
    .unwrap_or_else(|_| panic!("not connected: {}", h.status()));
}

/// The next chunk, which must be exactly one line of numbers.
async fn next_line(source: &mut Source) -> Vec<u32> {
    let chunk = tokio::time::timeout(Duration::from_secs(10), source.chunks.recv())
        .await
        .unwrap_or_else(|_| panic!("no poll within 10 s: {}", source.handle().status()))
        .expect("the source ended");
    let text = std::str::from_utf8(&chunk.data).expect("text");
    let line = text.strip_suffix('\n').expect("ends with a newline");
    assert!(!line.contains('\n'), "one line per chunk: {text:?}");
    line.split(',')
        .map(|v| v.parse().unwrap_or_else(|_| panic!("number in {text:?}")))
        .collect()
}

// The server's data; see modbus_server.py.
fn holding(i: u32) -> u32 {
    3 * i
}
fn input(i: u32) -> u32 {
    1000 + i
}
fn coil(i: u32) -> u32 {
    u32::from(i.is_multiple_of(3))
}
fn discrete(i: u32) -> u32 {
    u32::from(i % 2 == 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_every_register_kind_on_schedule() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::tcp(py, dir.path());
    let driver = ModbusDriver::new(tcp_settings(
        server.port,
        vec![
            group(RegisterKind::Holding, 0, 10),
            group(RegisterKind::Input, 0, 5),
            group(RegisterKind::Coil, 0, 10),
            group(RegisterKind::Discrete, 0, 8),
        ],
    ))
    .unwrap();
    assert_eq!(driver.requests_per_poll(), 4);
    let mut source = Source::spawn(driver, RunOptions::default());
    connected(&source).await;
    let mut counters = Vec::new();
    for _ in 0..5 {
        let v = next_line(&mut source).await;
        assert_eq!(v.len(), 10 + 5 + 10 + 8, "{v:?}");
        counters.push(v[0]);
        let want: Vec<u32> = (1..10)
            .map(holding)
            .chain((0..5).map(input))
            .chain((0..10).map(coil))
            .chain((0..8).map(discrete))
            .collect();
        assert_eq!(v[1..], want[..]);
    }
    // The server's counter ticks every 50 ms and we poll every 100 ms: it never goes back
    // and has moved on over the five polls.
    assert!(
        counters.windows(2).all(|w| w[1] >= w[0]) && counters[4] > counters[0],
        "the counter must advance between polls: {counters:?}"
    );
    let h = source.handle();
    assert!(h.stats().chunks >= 5, "{:?}", h.stats());
    h.close().await;
    h.wait_for(|s| *s == Status::Closed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_beyond_one_request_are_split() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::tcp(py, dir.path());
    let driver = ModbusDriver::new(tcp_settings(
        server.port,
        vec![
            group(RegisterKind::Holding, 1, 299),
            group(RegisterKind::Coil, 0, 2100),
        ],
    ))
    .unwrap();
    // 299 registers = 125 + 125 + 49; 2100 coils = 2000 + 100. The server refuses any
    // single read beyond the protocol limits, so correct values prove the split.
    assert_eq!(driver.requests_per_poll(), 5);
    let mut source = Source::spawn(driver, RunOptions::default());
    connected(&source).await;
    let v = next_line(&mut source).await;
    let want: Vec<u32> = (1..300).map(holding).chain((0..2100).map(coil)).collect();
    assert_eq!(v.len(), want.len());
    assert!(v == want, "values differ from the server's");
    source.handle().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_server_reconnects_and_resumes() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::tcp(py, dir.path());
    let port = server.port;
    let mut source = Source::spawn(
        ModbusDriver::new(tcp_settings(port, vec![group(RegisterKind::Holding, 0, 4)])).unwrap(),
        fast_reconnect(),
    );
    connected(&source).await;
    let h = source.handle();
    assert_eq!(next_line(&mut source).await[1..], [3, 6, 9]);

    server.stop();
    let status = tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| matches!(s, Status::Reconnecting { .. })),
    )
    .await
    .expect("a lost server must show reconnecting");
    let Status::Reconnecting { reason, .. } = status else {
        unreachable!()
    };
    assert!(
        reason.contains(&format!("Modbus server 127.0.0.1:{port} is not answering")),
        "{reason}"
    );
    eprintln!("lost: {reason}");
    // Retries keep failing, with the same clear reason, while the server is down.
    let retry = tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| matches!(s, Status::Reconnecting { attempt, .. } if *attempt >= 2)),
    )
    .await
    .expect("retries continue");
    assert!(retry.to_string().contains("connection refused"), "{retry}");
    eprintln!("retry: {retry}");

    server.restart();
    connected(&source).await;
    // Lines polled before the server went away may still be queued; skip to fresh ones.
    while source.chunks.try_recv().is_ok() {}
    let v = next_line(&mut source).await;
    assert_eq!(v[1..], [3, 6, 9]);
    assert!(h.stats().connects >= 2, "{:?}", h.stats());
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_times_out_and_recovers() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::tcp(py, dir.path());
    let mut driver = ModbusDriver::new(tcp_settings(
        server.port,
        vec![group(RegisterKind::Input, 0, 2)],
    ))
    .unwrap();
    driver.response_timeout = Duration::from_millis(300);
    let mut source = Source::spawn(driver, fast_reconnect());
    connected(&source).await;
    let h = source.handle();
    assert_eq!(next_line(&mut source).await, [1000, 1001]);

    // A frozen server keeps its socket open (the kernel even accepts new connections) but
    // never replies: only the response timeout can tell.
    server.signal("STOP");
    let status = tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| matches!(s, Status::Reconnecting { .. })),
    )
    .await
    .expect("a silent server must show reconnecting");
    let reason = status.to_string();
    assert!(
        reason.contains("is not answering: no reply within 0.3 s"),
        "{reason}"
    );
    eprintln!("silent: {reason}");

    server.signal("CONT");
    connected(&source).await;
    while source.chunks.try_recv().is_ok() {}
    assert_eq!(next_line(&mut source).await, [1000, 1001]);
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_illegal_address_fails_naming_the_group() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::tcp(py, dir.path());
    let source = Source::spawn(
        ModbusDriver::new(tcp_settings(
            server.port,
            vec![
                group(RegisterKind::Holding, 0, 2),
                group(RegisterKind::Holding, 5000, 10),
            ],
        ))
        .unwrap(),
        fast_reconnect(),
    );
    let h = source.handle();
    let status = tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| matches!(s, Status::Error(_))),
    )
    .await
    .expect("a register map the device rejects is an error, not a retry loop");
    let Status::Error(message) = status else {
        unreachable!()
    };
    assert!(
        message.contains("register group 2 (holding 5000-5009)"),
        "{message}"
    );
    assert!(message.contains("illegal data address"), "{message}");
    eprintln!("rejected: {message}");
    h.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_registers_and_coils() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::tcp(py, dir.path());
    let mut source = Source::spawn(
        ModbusDriver::new(tcp_settings(
            server.port,
            vec![
                group(RegisterKind::Holding, 0, 8),
                group(RegisterKind::Coil, 0, 4),
            ],
        ))
        .unwrap(),
        RunOptions::default(),
    );
    connected(&source).await;
    let h = source.handle();
    let cmd = "holding 5 = 4242\nholding 2 = 7, -2\ncoil 1 = on\ncoil 0 = 0\n";
    h.write(cmd).await.unwrap();
    assert_eq!(h.stats().bytes_written, cmd.len() as u64);
    // A line polled before the write may still be queued: wait for the effect.
    let mut seen = Vec::new();
    for _ in 0..10 {
        seen = next_line(&mut source).await;
        if seen[5] == 4242 {
            break;
        }
    }
    assert_eq!(seen[1..8], [3, 7, 65_534, 12, 4242, 18, 21], "{seen:?}");
    assert_eq!(seen[8..], [0, 1, 0, 1], "{seen:?}");

    // Refusals and typos fail the write with a reason and keep the connection.
    let refused = h.write("holding 0 = 1").await.unwrap_err();
    assert!(matches!(refused, DeviceError::Fatal(_)), "{refused:?}");
    assert!(
        refused.to_string().contains("illegal data address"),
        "{refused}"
    );
    eprintln!("refused: {refused}");
    let typo = h.write("holding 1 2").await.unwrap_err();
    assert!(typo.to_string().contains("no `=`"), "{typo}");
    assert_eq!(h.status(), Status::Connected);
    next_line(&mut source).await;
    assert_eq!(h.stats().connects, 1);
    h.close().await;
}

const MAP: &str = "\
# Boiler register map
name,kind,address,count,scale,units,type,description
Counter,holding,0,,,ticks,,server counter
Setpoint,holding,2,1,0.1,°C,,
\"Pair, A\",holding,3,2,,,,two values
Offset,holding,10,1,,,i16,signed
Level,input,0x4,1,1,mm,,
Pump,coil,3,,,,,
Alarm,discrete,1,,,,,
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_register_map_drives_the_pipeline() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::tcp(py, dir.path());
    let (groups, datasets) = import_register_map(MAP).unwrap();
    let project = modbus::project(
        "Boiler",
        ModbusSettings {
            groups,
            ..tcp_settings(server.port, Vec::new())
        },
        datasets,
    );
    assert!(project.validate().is_empty(), "{:?}", project.validate());
    let Connection::Modbus(settings) = &project.sources[0].connection else {
        panic!("a Modbus source")
    };
    let source = Source::spawn(
        ModbusDriver::new(settings.clone()).unwrap(),
        RunOptions::default(),
    );
    connected(&source).await;
    let (chunks, h) = source.into_parts();
    // A negative value for the signed dataset, written through the driver.
    h.write("holding 10 = -5").await.unwrap();
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, chunks)],
        vec![],
        WiringOptions::default(),
    );
    let value = |title: &str| {
        let snap = wiring.snapshot();
        let i = snap.datasets.iter().position(|d| d.title == title)?;
        snap.values.get(i).and_then(Value::as_f64)
    };
    // Lines polled before the write may still have been on their way.
    assert!(
        wait_until(Duration::from_secs(10), || value("Offset") == Some(-5.0)),
        "the signed value did not reach the pipeline: {:?} {:?}",
        value("Offset"),
        wiring.snapshot().sources
    );
    let near = |title: &str, want: f64| {
        let got = value(title);
        assert!(
            got.is_some_and(|g| (g - want).abs() < 1e-9),
            "{title}: {got:?}, want {want}"
        );
    };
    near("Setpoint", 0.6);
    near("Pair, A 1", 9.0);
    near("Pair, A 2", 12.0);
    near("Offset", -5.0);
    near("Level", 1004.0);
    near("Pump", 1.0);
    near("Alarm", 1.0);
    let first = value("Counter").unwrap_or(0.0);
    assert!(
        wait_until(Duration::from_secs(10), || value("Counter")
            .is_some_and(|c| c > first)),
        "the counter advances through the pipeline"
    );
    h.close().await;
    let pipeline = wiring.join();
    let stats = pipeline.stats(0).unwrap();
    assert_eq!(stats.parse_errors + stats.decode_errors, 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rtu_over_a_pty_pair() {
    if !require("socat", "socat") {
        return;
    }
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pty = PtyPair::start(dir.path());
    let _server = Server::rtu(py, dir.path(), &pty.b);
    let settings = ModbusSettings {
        rtu: true,
        serial: Some(SerialSettings {
            port: pty.a.display().to_string(),
            baud: 19_200,
            ..SerialSettings::default()
        }),
        slave_id: 1,
        poll_interval_ms: 100,
        groups: vec![
            group(RegisterKind::Holding, 1, 3),
            group(RegisterKind::Input, 0, 2),
            group(RegisterKind::Coil, 0, 4),
        ],
        ..ModbusSettings::default()
    };
    let driver = ModbusDriver::new(settings).unwrap();
    // The server may still be starting: the first polls can time out and retry.
    let mut source = Source::spawn(driver, fast_reconnect());
    connected(&source).await;
    let v = next_line(&mut source).await;
    assert_eq!(v, [3, 6, 9, 1000, 1001, 1, 0, 0, 1]);
    source.handle().close().await;
}

#[test]
fn register_map_columns_groups_and_slots() {
    let (groups, datasets) = import_register_map(MAP).unwrap();
    assert_eq!(
        groups,
        [
            group(RegisterKind::Holding, 0, 1),
            group(RegisterKind::Holding, 2, 3),
            group(RegisterKind::Holding, 10, 1),
            group(RegisterKind::Input, 4, 1),
            group(RegisterKind::Coil, 3, 1),
            group(RegisterKind::Discrete, 1, 1),
        ]
    );
    let shape: Vec<(&str, &str, u32, &str)> = datasets
        .iter()
        .map(|d| (d.id.as_str(), d.title.as_str(), d.index, d.units.as_str()))
        .collect();
    assert_eq!(
        shape,
        [
            ("ds-1", "Counter", 1, "ticks"),
            ("ds-2", "Setpoint", 2, "°C"),
            ("ds-3", "Pair, A 1", 3, ""),
            ("ds-4", "Pair, A 2", 4, ""),
            ("ds-5", "Offset", 5, ""),
            ("ds-6", "Level", 6, "mm"),
            ("ds-7", "Pump", 7, ""),
            ("ds-8", "Alarm", 8, ""),
        ]
    );
    let setpoint = datasets[1].transform.as_ref().unwrap();
    assert_eq!(setpoint.language, TransformLanguage::Expression);
    assert_eq!(setpoint.code, "value * 0.1");
    assert!(datasets[0].transform.is_none());
    assert!(datasets[6].led && !datasets[0].led);

    // Without a header the columns are positional; semicolons and adjacent or
    // overlapping ranges are fine; the rows' order does not matter for grouping.
    let (groups, datasets) =
        import_register_map("\u{feff}b;hr;12;2\na;holding register;10;3;2;V\nc;ir;0\n").unwrap();
    assert_eq!(
        groups,
        [
            group(RegisterKind::Holding, 10, 4),
            group(RegisterKind::Input, 0, 1)
        ]
    );
    let slots: Vec<(&str, u32)> = datasets
        .iter()
        .map(|d| (d.title.as_str(), d.index))
        .collect();
    assert_eq!(
        slots,
        [
            ("b 1", 3),
            ("b 2", 4),
            ("a 1", 1),
            ("a 2", 2),
            ("a 3", 3),
            ("c", 5)
        ]
    );

    // A header puts the columns in any order.
    let (g, d) = import_register_map("kind,address,name\nhr,5,x\n").unwrap();
    assert_eq!(g, [group(RegisterKind::Holding, 5, 1)]);
    assert_eq!((d[0].title.as_str(), d[0].index), ("x", 1));

    // The generated project reads the chunk layout and is valid.
    let project = modbus::project(
        "Device",
        ModbusSettings {
            groups,
            ..ModbusSettings::default()
        },
        datasets,
    );
    assert!(project.validate().is_empty(), "{:?}", project.validate());
    let json = serde_json::to_value(&project).unwrap();
    assert_eq!(json["sources"][0]["parser"]["kind"], "delimited");
    assert_eq!(json["sources"][0]["connection"]["type"], "modbus");
}

#[test]
fn malformed_register_maps_name_the_line() {
    let cases: &[(&str, usize, &str)] = &[
        (
            "name,kind,address\nok,holding,1\n\n# note\nbad,holding,forty\n",
            5,
            "address `forty` is not a number",
        ),
        ("t,relay,1\n", 1, "kind `relay` is not known"),
        ("t,holding\n", 1, "the address is missing"),
        (",holding,1\n", 1, "the name is empty"),
        ("t,holding,1,0\n", 1, "count `0`"),
        ("t,holding,65535,2\n", 1, "runs past address 65535"),
        ("t,holding,1,1,abc\n", 1, "scale `abc`"),
        ("t,coil,1,1,1,,i16\n", 1, "i16 applies to registers"),
        ("t,holding,1,1,1,,f32\n", 1, "type `f32` is not known"),
        ("name,kind,addr\n", 1, "unknown column `addr`"),
        ("name,kind,address,kind\n", 1, "appears twice"),
        ("name,address\n", 1, "no `kind` column"),
        (
            "x,holding,1\ny, coil ,2,1,1,,,extra\n",
            2,
            "at most 7 are known",
        ),
        ("\"open,holding,1\n", 1, "quote is not closed"),
    ];
    for (text, line, message) in cases {
        match import_register_map(text) {
            Err(RegisterMapError::Line {
                line: l,
                message: m,
            }) => {
                assert_eq!(l, *line, "{text:?}: {m}");
                assert!(m.contains(message), "{text:?}: {m}");
                let shown = RegisterMapError::Line {
                    line: l,
                    message: m,
                }
                .to_string();
                assert!(shown.starts_with(&format!("register map line {line}: ")));
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
    assert_eq!(
        import_register_map("# nothing\n\nname,kind,address\n"),
        Err(RegisterMapError::Empty)
    );
}

#[test]
fn settings_are_validated() {
    let ok = tcp_settings(502, vec![group(RegisterKind::Holding, 0, 1)]);
    assert_eq!(validate(&ok), Ok(()));
    let with = |f: &dyn Fn(&mut ModbusSettings)| {
        let mut s = ok.clone();
        f(&mut s);
        validate(&s)
    };
    for (slave, good) in [(0, false), (1, true), (247, true), (248, false)] {
        let r = with(&|s| s.slave_id = slave);
        assert_eq!(r.is_ok(), good, "slave {slave}: {r:?}");
    }
    for (ms, good) in [(9, false), (10, true), (60_000, true), (60_001, false)] {
        let r = with(&|s| s.poll_interval_ms = ms);
        assert_eq!(r.is_ok(), good, "{ms} ms: {r:?}");
    }
    let message = |r: Result<(), SettingsError>| r.unwrap_err().to_string();
    assert!(message(with(&|s| s.slave_id = 0)).contains("use 1 to 247"));
    assert!(message(with(&|s| s.poll_interval_ms = 5)).contains("use 10 to 60000 ms"));
    assert_eq!(with(&|s| s.groups.clear()), Err(SettingsError::NoGroups));
    assert!(
        message(with(&|s| s.groups.push(group(RegisterKind::Coil, 7, 0))))
            .contains("register group 2 (coil 7) has a count of 0")
    );
    assert!(message(with(
        &|s| s.groups[0] = group(RegisterKind::Input, 65_000, 600)
    ))
    .contains("runs past address 65535"));
    assert!(matches!(
        with(&|s| s.groups = vec![group(RegisterKind::Holding, 0, 60_000); 2]),
        Err(SettingsError::TooManyValues(120_000))
    ));
    assert_eq!(with(&|s| s.host = " ".into()), Err(SettingsError::NoHost));
    assert_eq!(with(&|s| s.port = 0), Err(SettingsError::NoPort));
    assert_eq!(with(&|s| s.rtu = true), Err(SettingsError::NoSerial));
    let rtu = |serial: SerialSettings| {
        with(&|s| {
            s.rtu = true;
            s.serial = Some(serial.clone());
        })
    };
    assert!(message(rtu(SerialSettings::default())).contains("no serial port"));
    let port = |baud| SerialSettings {
        port: "/dev/ttyUSB0".into(),
        baud,
        ..SerialSettings::default()
    };
    assert!(message(rtu(port(0))).contains("baud rate 0 is out of range"));
    assert_eq!(rtu(port(9600)), Ok(()));
    // The driver refuses the same settings, as a fatal (not retried) device error.
    let e = ModbusDriver::new(ModbusSettings {
        slave_id: 0,
        ..ok.clone()
    })
    .err()
    .unwrap();
    assert!(matches!(DeviceError::from(e), DeviceError::Fatal(_)));
}
