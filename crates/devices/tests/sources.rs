//! TCP, UDP, process, named pipe, simulator and replay sources, each against the real thing
//! on this machine (loopback sockets, child processes, FIFOs, capture files).

mod common;

use std::io::Write as _;
use std::time::Duration;

use sextant_devices::capture::{CaptureReader, CaptureWriter};
use sextant_devices::net::{TcpDriver, UdpDriver};
use sextant_devices::process::ProcessDriver;
use sextant_devices::replay::{ReplayControl, ReplayDriver};
use sextant_devices::sim_source::SimulatorDriver;
use sextant_devices::simulator::{demo_project, demo_settings};
use sextant_devices::wiring::{CsvSink, FrameSink, Wiring, WiringOptions};
use sextant_devices::{Reconnect, RunOptions, Source, Status};
use sextant_telemetry::Pipeline;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn quick() -> RunOptions {
    RunOptions {
        reconnect: Reconnect {
            enabled: true,
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        ..RunOptions::default()
    }
}

async fn next_bytes(source: &mut Source) -> Vec<u8> {
    tokio::time::timeout(Duration::from_secs(5), source.chunks.recv())
        .await
        .expect("a chunk in time")
        .expect("stream open")
        .data
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_client_reads_writes_and_reconnects_when_the_server_returns() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut source = Source::spawn(TcpDriver::plain("127.0.0.1", port), quick());
    let h = source.handle();
    let (mut conn, _) = listener.accept().await.unwrap();
    conn.write_all(b"1,2,3\n").await.unwrap();
    assert_eq!(next_bytes(&mut source).await, b"1,2,3\n");
    h.write(&b"cmd\n"[..]).await.unwrap();
    let mut buf = [0u8; 4];
    conn.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"cmd\n");
    drop(conn);
    let st = h
        .wait_for(|s| matches!(s, Status::Reconnecting { .. }))
        .await;
    assert!(st.to_string().contains("closed the connection"), "{st}");
    let (mut conn, _) = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .unwrap()
        .unwrap();
    h.wait_for(|s| *s == Status::Connected).await;
    conn.write_all(b"again\n").await.unwrap();
    assert_eq!(next_bytes(&mut source).await, b"again\n");
    h.close().await;
}

/// A TLS device on a local port that wants a client certificate from the test CA: it
/// sends one line, then echoes back to the test what the source wrote.
async fn tls_device(dir: &std::path::Path) -> (u16, tokio::sync::mpsc::Receiver<Vec<u8>>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("ca.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        std::sync::Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let chain: Vec<_> = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let _ = tls.write_all(b"4.2,17\n").await;
                let _ = tls.flush().await;
                let mut buf = [0u8; 64];
                while let Ok(n) = tls.read(&mut buf).await {
                    if n == 0 || tx.send(buf[..n].to_vec()).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_over_tls_with_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    assert!(common::make_certs(dir.path()));
    common::make_client_certs(dir.path());
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let (port, mut written) = tls_device(dir.path()).await;
    let credentials = sextant_devices::Credentials {
        ca_pem: Some(read("ca.pem")),
        client_cert_pem: Some(read("client.pem")),
        client_key_pem: Some(read("client.key")),
        ..Default::default()
    };
    let tls = |credentials| TcpDriver {
        host: "localhost".into(),
        port,
        tls: true,
        credentials,
    };
    let mut source = Source::spawn(tls(credentials.clone()), quick());
    assert_eq!(next_bytes(&mut source).await, b"4.2,17\n");
    source.handle().write(&b"ping\n"[..]).await.unwrap();
    let echoed = tokio::time::timeout(Duration::from_secs(5), written.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(echoed, b"ping\n");
    source.handle().close().await;

    // Without the private CA the device's certificate is not trusted.
    let untrusted = Source::spawn(
        tls(sextant_devices::Credentials {
            ca_pem: None,
            ..credentials.clone()
        }),
        quick(),
    );
    let st = untrusted
        .handle()
        .wait_for(|s| matches!(s, Status::Reconnecting { .. }))
        .await
        .to_string();
    assert!(
        st.contains("TLS with") && st.contains("certificate"),
        "{st}"
    );
    untrusted.handle().close().await;

    // Without a client certificate the device refuses the handshake; nothing is read.
    let mut anonymous = Source::spawn(
        tls(sextant_devices::Credentials {
            client_cert_pem: None,
            client_key_pem: None,
            ..credentials
        }),
        quick(),
    );
    let got = tokio::time::timeout(Duration::from_millis(1500), anonymous.chunks.recv()).await;
    assert!(
        !matches!(got, Ok(Some(_))),
        "a device that wants a certificate sent data to a client without one"
    );
    anonymous.handle().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_refused_says_so() {
    let port = common::free_port();
    let source = Source::spawn(TcpDriver::plain("127.0.0.1", port), quick());
    let st = source
        .handle()
        .wait_for(|s| matches!(s, Status::Reconnecting { .. }))
        .await;
    assert!(st.to_string().contains("refused"), "{st}");
    source.handle().close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_datagrams_are_chunks_and_replies_go_back() {
    let port = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let mut source = Source::spawn(
        UdpDriver {
            local_port: port,
            remote_host: None,
            remote_port: None,
            multicast_group: None,
            multicast_interface: None,
        },
        quick(),
    );
    let h = source.handle();
    h.wait_for(|s| *s == Status::Connected).await;
    let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for msg in [&b"a=1"[..], b"b=2"] {
        peer.send_to(msg, ("127.0.0.1", port)).await.unwrap();
    }
    assert_eq!(next_bytes(&mut source).await, b"a=1");
    assert_eq!(next_bytes(&mut source).await, b"b=2");
    h.write(&b"ack"[..]).await.unwrap();
    let mut buf = [0u8; 16];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), peer.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf[..n], b"ack");
    h.close().await;

    let bad = Source::spawn(
        UdpDriver {
            local_port: 0,
            remote_host: None,
            remote_port: None,
            multicast_group: Some("10.0.0.1".into()),
            multicast_interface: None,
        },
        quick(),
    );
    let st = bad
        .handle()
        .wait_for(|s| matches!(s, Status::Error(_)))
        .await;
    assert!(st.to_string().contains("not a multicast address"), "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_output_is_read_and_its_exit_reported() {
    let mut source = Source::spawn(
        ProcessDriver {
            program: "sh".into(),
            args: vec![
                "-c".into(),
                "printf '1,2\\n'; read line; printf 'got %s\\n' \"$line\"; exit 3".into(),
            ],
            working_dir: None,
            include_stderr: false,
        },
        RunOptions {
            reconnect: Reconnect::off(),
            ..RunOptions::default()
        },
    );
    let h = source.handle();
    assert_eq!(next_bytes(&mut source).await, b"1,2\n");
    h.write(&b"hello\n"[..]).await.unwrap();
    assert_eq!(next_bytes(&mut source).await, b"got hello\n");
    let st = h.wait_for(|s| matches!(s, Status::Error(_))).await;
    assert!(st.to_string().contains("status 3"), "{st}");

    let missing = Source::spawn(
        ProcessDriver {
            program: "/no/such/program".into(),
            args: vec![],
            working_dir: None,
            include_stderr: true,
        },
        quick(),
    );
    let st = missing
        .handle()
        .wait_for(|s| matches!(s, Status::Error(_)))
        .await;
    assert!(st.to_string().contains("was not found"), "{st}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_pipe_is_read_across_writers() {
    use sextant_devices::process::NamedPipeDriver;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("feed");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(ok.success());
    let mut source = Source::spawn(
        NamedPipeDriver {
            path: fifo.display().to_string(),
        },
        quick(),
    );
    let h = source.handle();
    h.wait_for(|s| *s == Status::Connected).await;
    // Writers come and go, back to back: nothing written between them may be lost.
    for round in 0..3 {
        let mut f = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        f.write_all(format!("round {round}\n").as_bytes()).unwrap();
    }
    let mut got = Vec::new();
    while got.len() < b"round 0\nround 1\nround 2\n".len() {
        got.extend(next_bytes(&mut source).await);
    }
    assert_eq!(got, b"round 0\nround 1\nround 2\n");
    assert_eq!(h.stats().connects, 1, "one connection across all writers");
    h.close().await;
}

/// Collects frames for the test: count and the last values.
struct Count(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl FrameSink for Count {
    fn frame(
        &mut self,
        _: &sextant_telemetry::FrameEvent<'_>,
        _: &[sextant_telemetry::pipeline::DatasetInfo],
    ) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_simulator_session_replays_to_the_same_csv() {
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("session.sxcap");
    let live_csv = dir.path().join("live.csv");
    let replay_csv = dir.path().join("replay.csv");
    let project = demo_project();
    let mut settings = demo_settings();
    settings.frame_rate_hz = 2_000.0;

    // Live: the simulator through the pipeline, recording raw bytes and exporting CSV.
    let source = Source::spawn(SimulatorDriver::new(settings), RunOptions::default());
    let (chunks, h) = source.into_parts();
    let frames = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, chunks)],
        vec![
            Box::new(CsvSink::new(&live_csv)),
            Box::new(Count(frames.clone())),
        ],
        WiringOptions {
            capture: Some(CaptureWriter::create(&capture).unwrap()),
            ..WiringOptions::default()
        },
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    h.close().await;
    let live_pipeline = wiring.join();
    let live_frames = frames.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        live_frames > 200,
        "the simulator produced {live_frames} frames"
    );
    assert_eq!(live_pipeline.stats(0).unwrap().parse_errors, 0);
    // The capture file is complete once the capture thread has drained: poll for it.
    assert!(common::wait_until(Duration::from_secs(5), || {
        CaptureReader::open(&capture)
            .map(|r| r.map(|rec| rec.unwrap().data.len() as u64).sum::<u64>())
            .unwrap_or(0)
            == h.stats().bytes
    }));

    // Replay at maximum speed through a fresh pipeline: the exported CSV is identical.
    let control = ReplayControl::new(0.0);
    let replay = Source::spawn(
        ReplayDriver {
            path: capture.clone(),
            source: Some(0),
            control,
        },
        RunOptions {
            reconnect: Reconnect::off(),
            ..RunOptions::default()
        },
    );
    let (chunks, rh) = replay.into_parts();
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, chunks)],
        vec![Box::new(CsvSink::new(&replay_csv))],
        WiringOptions::default(),
    );
    rh.wait_for(|s| *s == Status::Finished).await;
    rh.close().await;
    wiring.join();
    let live = std::fs::read_to_string(&live_csv).unwrap();
    let replayed = std::fs::read_to_string(&replay_csv).unwrap();
    assert_eq!(live.lines().count() as u64, live_frames + 1);
    assert!(
        live == replayed,
        "replayed CSV differs from the live export"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_paces_pauses_steps_and_seeks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.sxcap");
    let mut w = CaptureWriter::create(&path).unwrap();
    for i in 0..20u64 {
        let ts = sextant_telemetry::Timestamp {
            elapsed_ns: i * 50_000_000, // one record every 50 ms of capture time
            unix_ns: 0,
        };
        w.write(0, ts, format!("{i}\n").as_bytes()).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let control = ReplayControl::new(1.0);
    control.pause();
    let mut source = Source::spawn(
        ReplayDriver {
            path,
            source: None,
            control: control.clone(),
        },
        RunOptions {
            reconnect: Reconnect::off(),
            ..RunOptions::default()
        },
    );
    // Paused: nothing arrives until a step releases exactly one record.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), source.chunks.recv())
            .await
            .is_err()
    );
    control.step();
    assert_eq!(next_bytes(&mut source).await, b"0\n");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), source.chunks.recv())
            .await
            .is_err()
    );
    // Seek to 0.5 s of capture time, then play at 10x: records 10..19 with their own stamps.
    control.seek(Duration::from_millis(500));
    control.set_speed(10.0);
    control.resume();
    let mut seen = Vec::new();
    while let Ok(Some(c)) = tokio::time::timeout(Duration::from_secs(5), source.chunks.recv()).await
    {
        seen.push((
            String::from_utf8(c.data.to_vec()).unwrap(),
            c.timestamp.elapsed_ns,
        ));
    }
    let texts: Vec<&str> = seen.iter().map(|(t, _)| t.trim()).collect();
    assert_eq!(
        texts,
        (10..20)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        seen[0].1, 500_000_000,
        "replayed chunks keep their recorded timestamps"
    );
    assert_eq!(source.handle().status(), Status::Finished);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_at_a_million_frames_per_second_feeds_the_pipeline() {
    let mut settings = demo_settings();
    settings.frame_rate_hz = 1_000_000.0;
    settings.gps = false;
    settings.imu = false;
    let mut project = demo_project();
    project
        .groups
        .retain(|g| g.title == "Environment" || g.title == "Power");
    let source = Source::spawn(SimulatorDriver::new(settings), RunOptions::default());
    let (chunks, h) = source.into_parts();
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, chunks)],
        vec![],
        WiringOptions::default(),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    h.close().await;
    let pipeline = wiring.join();
    let stats = pipeline.stats(0).unwrap();
    assert!(stats.rows > 10_000, "{stats:?}");
    assert_eq!(stats.parse_errors, 0);
    assert_eq!(stats.framing.oversize_dropped, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_devices_of_one_project_run_at_once_into_one_pipeline() {
    use sextant_devices::connect::{start, NoSecrets};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp_port = listener.local_addr().unwrap().port();
    let udp_port = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let project: sextant_telemetry::Project = serde_json::from_value(serde_json::json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [
            {"id": "engine", "connection": {"type": "tcp", "host": "127.0.0.1", "port": tcp_port},
             "parser": {"kind": "delimited"}},
            {"id": "battery", "connection": {"type": "udp", "localPort": udp_port},
             "framing": {"mode": "none"}, "parser": {"kind": "keyValue", "keys": ["v"]}}
        ],
        "groups": [{"id": "g", "title": "G", "datasets": [
            {"id": "rpm", "title": "RPM", "index": 1, "source": "engine"},
            {"id": "volts", "title": "Volts", "index": 1, "source": "battery"}
        ]}]
    }))
    .unwrap();
    let mut inputs = Vec::new();
    let mut handles = Vec::new();
    for (i, s) in project.sources.iter().enumerate() {
        let (source, _) = start(s, i, quick(), &NoSecrets).unwrap();
        let (chunks, h) = source.into_parts();
        inputs.push((i, chunks));
        handles.push(h);
    }
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        inputs,
        vec![],
        WiringOptions::default(),
    );
    let (mut conn, _) = listener.accept().await.unwrap();
    handles[1].wait_for(|s| *s == Status::Connected).await;
    conn.write_all(b"3200\n").await.unwrap();
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    udp.send_to(b"v=12.6", ("127.0.0.1", udp_port))
        .await
        .unwrap();
    let both = common::wait_until(Duration::from_secs(5), || {
        let snap = wiring.snapshot();
        snap.values
            == vec![
                sextant_telemetry::Value::Number(3200.0),
                sextant_telemetry::Value::Number(12.6),
            ]
    });
    assert!(both, "{:?}", wiring.snapshot().values);
    for h in &handles {
        h.close().await;
    }
    tokio::task::spawn_blocking(move || wiring.join())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_joins_a_multicast_group_on_the_chosen_interface() {
    let port = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let group: std::net::Ipv4Addr = "239.255.42.7".parse().unwrap();
    let mut source = Source::spawn(
        UdpDriver {
            local_port: port,
            remote_host: None,
            remote_port: None,
            multicast_group: Some(group.to_string()),
            // Loopback only: test traffic never leaves this machine.
            multicast_interface: Some("127.0.0.1".into()),
        },
        quick(),
    );
    source.handle().wait_for(|s| *s == Status::Connected).await;
    let sender = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    sender
        .set_multicast_if_v4(&std::net::Ipv4Addr::LOCALHOST)
        .unwrap();
    sender.set_multicast_loop_v4(true).unwrap();
    let to: std::net::SocketAddr = (group, port).into();
    sender.send_to(b"fleet=1", &to.into()).unwrap();
    assert_eq!(next_bytes(&mut source).await, b"fleet=1");
    source.handle().close().await;

    let bad = Source::spawn(
        UdpDriver {
            local_port: 0,
            remote_host: None,
            remote_port: None,
            multicast_group: Some(group.to_string()),
            multicast_interface: Some("not-an-ip".into()),
        },
        quick(),
    );
    let st = bad
        .handle()
        .wait_for(|s| matches!(s, Status::Error(_)))
        .await;
    assert!(st.to_string().contains("interface address"), "{st}");
}

/// Collects every frame's values.
struct Collect(std::sync::Arc<std::sync::Mutex<Vec<Vec<sextant_telemetry::Value>>>>);

impl FrameSink for Collect {
    fn frame(
        &mut self,
        event: &sextant_telemetry::FrameEvent<'_>,
        _: &[sextant_telemetry::pipeline::DatasetInfo],
    ) {
        self.0.lock().unwrap().push(event.values.to_vec());
    }
}

/// The CSV export and the CSV player are one CSV implementation: a text value holding a
/// line break, commas and quotes is exported quoted, read back whole, and replays to the
/// same values and the same CSV.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_export_replays_text_with_line_breaks_commas_and_quotes() {
    use sextant_devices::connect::{start, NoSecrets};
    use sextant_devices::csv_replay::{load_csv, project_for_csv};
    use sextant_devices::source::Chunk;
    use sextant_telemetry::project::{Dataset, Group, ParserConfig, Project, Source as Config};
    use sextant_telemetry::{Timestamp, Value};

    let dir = tempfile::tempdir().unwrap();
    let live_csv = dir.path().join("live.csv");
    let replay_csv = dir.path().join("replay.csv");
    let dataset = |i: u32, title: &str| Dataset {
        id: format!("ds-{i}"),
        title: title.into(),
        index: i,
        ..Dataset::default()
    };
    let project = Project {
        sources: vec![Config {
            parser: ParserConfig::Json {
                paths: vec!["n".into(), "t".into(), "e".into()],
            },
            ..Config::default()
        }],
        groups: vec![Group {
            id: "grp-1".into(),
            title: "Log".into(),
            datasets: vec![
                dataset(1, "level"),
                dataset(2, "message, full"),
                dataset(3, "empty"),
            ],
            ..Group::default()
        }],
        ..Project::default()
    };
    let text = "line one\nsays \"hi\", then, \"bye\"";
    let frames = [
        serde_json::json!({"n": 1.5, "t": text, "e": null}),
        serde_json::json!({"n": -2, "t": "plain", "e": null}),
        serde_json::json!({"n": 3, "t": "a,b", "e": null}),
    ];

    // Live: frames through the pipeline into the CSV export.
    let live_values = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (tx, rx) = sextant_devices::queue::bounded(16, 1 << 20);
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, rx)],
        vec![
            Box::new(CsvSink::new(&live_csv)),
            Box::new(Collect(live_values.clone())),
        ],
        WiringOptions::default(),
    );
    for (i, frame) in frames.iter().enumerate() {
        tx.try_send(Chunk {
            data: format!("{frame}\n").into(),
            timestamp: Timestamp {
                elapsed_ns: i as u64 * 250_000_000,
                unix_ns: 0,
            },
        })
        .unwrap();
    }
    drop(tx);
    wiring.join();
    let live_values = live_values.lock().unwrap().clone();
    assert_eq!(live_values.len(), 3);
    assert_eq!(live_values[0][1], Value::Text(text.into()));
    let live = std::fs::read_to_string(&live_csv).unwrap();
    assert!(
        live.contains("\"line one\nsays \"\"hi\"\", then, \"\"bye\"\"\""),
        "the text is exported quoted: {live}"
    );

    // Replay: the CSV player's project and driver, through a fresh pipeline.
    let (columns, _) = load_csv(&live_csv).unwrap();
    assert_eq!(columns, ["Log/level", "Log/message, full", "Log/empty"]);
    let replay_project = project_for_csv(&columns, &live_csv, 0.0);
    let (source, _) = start(
        &replay_project.sources[0],
        0,
        RunOptions {
            reconnect: Reconnect::off(),
            ..RunOptions::default()
        },
        &NoSecrets,
    )
    .unwrap();
    let (chunks, h) = source.into_parts();
    let replayed_values = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let wiring = Wiring::start(
        Pipeline::new(&replay_project).unwrap(),
        vec![(0, chunks)],
        vec![
            Box::new(CsvSink::new(&replay_csv)),
            Box::new(Collect(replayed_values.clone())),
        ],
        WiringOptions::default(),
    );
    h.wait_for(|s| *s == Status::Finished).await;
    h.close().await;
    let pipeline = wiring.join();
    assert_eq!(pipeline.stats(0).unwrap().parse_errors, 0);
    assert_eq!(*replayed_values.lock().unwrap(), live_values);
    assert_eq!(std::fs::read_to_string(&replay_csv).unwrap(), live);
}

/// A live CSV export whose datasets grow during the run (Quick Plot finding a line with
/// more channels than the first): every row is kept, the file gets the wider header once
/// at the end, earlier rows padded empty; and the export written over an earlier one
/// replaces it only when complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_csv_export_keeps_every_row_when_datasets_appear_mid_run() {
    let dir = tempfile::tempdir().unwrap();
    let csv_path = dir.path().join("live.csv");
    std::fs::write(&csv_path, "elapsed_s,earlier\n0.000000,1\n").unwrap();
    let project: sextant_telemetry::Project = serde_json::from_value(serde_json::json!({
        "schemaVersion": 1, "sources": [{"id": "s", "parser": {"kind": "quickPlot"}}]
    }))
    .unwrap();
    let (tx, rx) = sextant_devices::queue::bounded(16, 1 << 20);
    let sink = CsvSink::new(&csv_path);
    let status = sink.status();
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, rx)],
        vec![Box::new(sink)],
        WiringOptions::default(),
    );
    let lines = ["1\n", "2\n", "3,30,300\n", "4,40,400\n", "5\n"];
    for (i, line) in lines.iter().enumerate() {
        tx.try_send(sextant_telemetry::Chunk {
            data: bytes::Bytes::from(*line),
            timestamp: sextant_telemetry::Timestamp {
                elapsed_ns: i as u64 * 1_000_000,
                unix_ns: 0,
            },
        })
        .unwrap();
    }
    // While the run goes on, the earlier export is untouched.
    assert!(
        common::wait_until(Duration::from_secs(5), || {
            status.rows.load(std::sync::atomic::Ordering::Relaxed) == 5
        }),
        "rows written: {}, problem: {:?}, frames: {:?}",
        status.rows.load(std::sync::atomic::Ordering::Relaxed),
        status.problem(),
        wiring.snapshot().sources.first().map(|s| s.framing.frames)
    );
    assert_eq!(
        std::fs::read_to_string(&csv_path).unwrap(),
        "elapsed_s,earlier\n0.000000,1\n"
    );
    drop(tx);
    wiring.join();
    assert_eq!(status.problem(), None);
    let text = std::fs::read_to_string(&csv_path).unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().unwrap().clone();
    assert_eq!(header.len(), 4, "{text}");
    let rows: Vec<Vec<String>> = reader
        .records()
        .map(|r| r.unwrap().iter().map(str::to_owned).collect())
        .collect();
    assert_eq!(rows.len(), 5, "{text}");
    assert_eq!(rows[0][1..], ["1", "", ""]);
    assert_eq!(rows[2][1..], ["3", "30", "300"]);
    assert_eq!(rows[4][1], "5");
    assert!(!dir.path().join("live.csv.partial").exists());
}

/// Every message capture in `fixtures/messages/` played through a replay source (the way a
/// project whose source is a `.jsonl` replay plays it) at full speed into a fresh pipeline:
/// each message is one read, so frames without delimiters come out whole, into the values
/// worked out by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_captures_replay_one_message_a_read_into_the_expected_values() {
    use sextant_devices::message_replay::MessageReplayDriver;
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<_> = std::fs::read_dir(common::fixtures().join("messages"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 2, "{cases:?}");
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let project = sextant_telemetry::Project::load(&case.join("project.json"))
            .expect("the case's project");
        let out = dir.path().join(format!("{name}.csv"));
        let replay = Source::spawn(
            MessageReplayDriver {
                path: case.join("capture.jsonl"),
                index: 0,
                id: project.sources[0].id.clone(),
                control: ReplayControl::new(0.0),
            },
            RunOptions {
                reconnect: Reconnect::off(),
                ..RunOptions::default()
            },
        );
        let (chunks, h) = replay.into_parts();
        let wiring = Wiring::start(
            Pipeline::new(&project).unwrap(),
            vec![(0, chunks)],
            vec![Box::new(CsvSink::new(&out))],
            WiringOptions::default(),
        );
        h.wait_for(|s| *s == Status::Finished).await;
        h.close().await;
        wiring.join();
        assert_csv_values(
            &name,
            &std::fs::read_to_string(&out).unwrap(),
            &std::fs::read_to_string(case.join("expected.csv")).unwrap(),
        );
    }
}

/// Compares a CSV export with the expected one written by hand: the same header, the same
/// number of rows, and in each cell the same text, or numbers equal to 1e-9 (relative), so
/// `0.00` matches `0.000000` and `50.8` matches `50.800000000000004`. Panics naming the
/// first difference.
fn assert_csv_values(case: &str, got: &str, expected: &str) {
    let rows = |text: &str| -> Vec<Vec<String>> {
        csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(text.as_bytes())
            .records()
            .map(|r| r.unwrap().iter().map(str::to_string).collect())
            .collect()
    };
    let (got, want) = (rows(got), rows(expected));
    assert_eq!(got.first(), want.first(), "{case}: the header");
    assert_eq!(
        got.len(),
        want.len(),
        "{case}: rows\n got {got:?}\nwant {want:?}"
    );
    for (r, (g, w)) in got.iter().zip(&want).enumerate().skip(1) {
        assert_eq!(g.len(), w.len(), "{case} row {r}: {g:?} vs {w:?}");
        for (c, (a, b)) in g.iter().zip(w).enumerate() {
            let same = match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(x), Ok(y)) => (x - y).abs() <= 1e-9 * y.abs().max(1.0),
                _ => a == b,
            };
            assert!(
                same,
                "{case} row {r} column {}: got `{a}`, want `{b}`",
                want[0][c]
            );
        }
    }
}

/// The simulator keeps perfect time: each chunk is stamped with the time its last frame
/// describes, so after a stall (the machine busy, the runtime not polling it) the frames
/// it catches up on keep their own times instead of sharing the moment they were read,
/// and no chunk spans more than a tick. Each row: frames per second.
#[test]
fn a_stalled_simulator_catches_up_with_each_frame_at_its_own_time() {
    for rate in [100.0, 100_000.0] {
        // One thread: blocking it stalls the simulator as a loaded machine would.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut settings = demo_settings();
            settings.frame_rate_hz = rate;
            let clock = sextant_devices::source::Clock::start();
            let options = RunOptions {
                clock,
                ..RunOptions::default()
            };
            let mut source = Source::spawn(SimulatorDriver::new(settings), options);
            let first = tokio::time::timeout(Duration::from_secs(5), source.chunks.recv())
                .await
                .unwrap()
                .unwrap();
            std::thread::sleep(Duration::from_millis(150));
            let per_tick = (rate * sextant_devices::sim_source::TICK.as_secs_f64()).ceil();
            let (mut previous, mut caught_up) = (first.timestamp.elapsed_ns, 0.0);
            while caught_up < 0.3 {
                let chunk = tokio::time::timeout(Duration::from_secs(5), source.chunks.recv())
                    .await
                    .unwrap()
                    .unwrap();
                let frames = chunk.data.iter().filter(|&&b| b == b'\n').count() as f64;
                let at = chunk.timestamp.elapsed_ns;
                assert!(
                    frames >= 1.0 && frames <= per_tick,
                    "at {rate} frames/s a chunk held {frames} frames, more than a tick's {per_tick}"
                );
                let step_s = (at - previous) as f64 / 1e9;
                assert!(
                    (step_s - frames / rate).abs() < 1e-6,
                    "at {rate} frames/s a chunk of {frames} frames came {step_s} s after the last"
                );
                assert!(
                    at <= clock.now().elapsed_ns,
                    "a chunk stamped in the future"
                );
                previous = at;
                caught_up += step_s;
            }
            source.handle().close().await;
        });
    }
}
