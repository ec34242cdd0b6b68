//! MQTT sources against a real mosquitto broker on 127.0.0.1.

mod common;

use std::time::Duration;

use common::{require, Broker};
use rumqttc::{AsyncClient, MqttOptions, QoS};
use sextant_devices::mqtt::MqttDriver;
use sextant_devices::{Credentials, Reconnect, RunOptions, Source, Status};
use sextant_telemetry::project::{MqttSettings, MqttVersion};

fn settings(port: u16, topic: &str, version: MqttVersion) -> MqttSettings {
    MqttSettings {
        host: "127.0.0.1".into(),
        port,
        client_id: format!("sextant-test-{}", rand_suffix()),
        topic: topic.into(),
        version,
        ..MqttSettings::default()
    }
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
}

/// A publisher client whose event loop runs in the background.
async fn publisher(port: u16) -> (AsyncClient, tokio::task::JoinHandle<()>) {
    let mut opts = MqttOptions::new(format!("pub-{}", rand_suffix()), "127.0.0.1", port);
    opts.set_inflight(1000);
    opts.set_request_channel_capacity(10_000);
    let (client, mut events) = AsyncClient::new(opts, 10_000);
    let task = tokio::spawn(async move { while events.poll().await.is_ok() {} });
    (client, task)
}

async fn connected(source: &Source) {
    let h = source.handle();
    tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| *s == Status::Connected),
    )
    .await
    .unwrap_or_else(|_| panic!("not connected: {}", h.status()));
}

async fn receive(source: &mut Source, want: u64, quiet: Duration) -> Vec<bytes::Bytes> {
    let mut got = Vec::new();
    while (got.len() as u64) < want {
        match tokio::time::timeout(quiet, source.chunks.recv()).await {
            Ok(Some(c)) => got.push(c.data),
            _ => break,
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_subscription_gets_only_matching_topics() {
    if !require("mosquitto", "mosquitto") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    for version in [MqttVersion::V311, MqttVersion::V5] {
        let mut source = Source::spawn(
            MqttDriver::new(
                settings(broker.port, "plant/+/temp", version),
                Credentials::default(),
            )
            .unwrap(),
            RunOptions::default(),
        );
        connected(&source).await;
        let (client, _task) = publisher(broker.port).await;
        for (topic, payload) in [
            ("plant/a/temp", "21.5"),
            ("plant/b/humidity", "40"),
            ("plant/b/temp", "22.5"),
            ("other/a/temp", "0"),
        ] {
            client
                .publish(topic, QoS::AtLeastOnce, false, payload)
                .await
                .unwrap();
        }
        let got = receive(&mut source, 2, Duration::from_secs(5)).await;
        assert_eq!(
            got,
            vec![bytes::Bytes::from("21.5"), bytes::Bytes::from("22.5")],
            "{version:?}"
        );
        // Nothing else trickles in.
        assert!(receive(&mut source, 1, Duration::from_millis(300))
            .await
            .is_empty());
        source.handle().close().await;
    }
}

/// Two sources of one project on one broker, neither given a client id (the default): a
/// broker drops the older of two connections with one id, so with a shared default they
/// knocked each other off in turn. Each stays connected once and gets all of its messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sources_without_a_client_id_share_a_broker() {
    if !require("mosquitto", "mosquitto") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    let mut sources: Vec<Source> = ["bench/a", "bench/b"]
        .iter()
        .map(|topic| {
            let mut s = settings(broker.port, topic, MqttVersion::V311);
            s.client_id = String::new();
            Source::spawn(
                MqttDriver::new(s, Credentials::default()).unwrap(),
                RunOptions::default(),
            )
        })
        .collect();
    for source in &sources {
        connected(source).await;
    }
    let (client, _task) = publisher(broker.port).await;
    for i in 0..50 {
        for topic in ["bench/a", "bench/b"] {
            client
                .publish(topic, QoS::AtLeastOnce, false, format!("{topic} {i}"))
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for (source, topic) in sources.iter_mut().zip(["bench/a", "bench/b"]) {
        let got = receive(source, 50, Duration::from_secs(5)).await;
        let want: Vec<bytes::Bytes> = (0..50)
            .map(|i| bytes::Bytes::from(format!("{topic} {i}")))
            .collect();
        assert_eq!(got, want, "{topic}");
        assert_eq!(source.handle().stats().connects, 1, "{topic} reconnected");
        source.handle().close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_messages_reconcile_at_qos_0_and_1() {
    if !require("mosquitto", "mosquitto") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    const N: u64 = 100_000;
    for (qos, sub_qos) in [(QoS::AtMostOnce, 0u8), (QoS::AtLeastOnce, 1u8)] {
        let mut driver = MqttDriver::new(
            settings(broker.port, "load/#", MqttVersion::V311),
            Credentials::default(),
        )
        .unwrap();
        driver.qos = sub_qos;
        let mut source = Source::spawn(
            driver,
            RunOptions {
                queue_chunks: 200_000,
                ..RunOptions::default()
            },
        );
        connected(&source).await;
        let h = source.handle();
        let (client, _task) = publisher(broker.port).await;
        let sender = tokio::spawn(async move {
            for i in 0..N {
                client
                    .publish("load/x", qos, false, i.to_string())
                    .await
                    .unwrap();
            }
            client
        });
        let got = receive(&mut source, N, Duration::from_secs(10)).await;
        let _client = sender.await.unwrap();
        let stats = h.stats();
        // Every message is accounted for: received by us, or dropped and counted by us.
        let received = got.len() as u64;
        assert_eq!(received + stats.dropped_chunks, stats.chunks, "{stats:?}");
        if sub_qos == 1 {
            assert_eq!(received, N, "QoS 1 must deliver everything: {stats:?}");
            // In order, each exactly once.
            for (i, m) in got.iter().enumerate() {
                assert_eq!(m.as_ref(), i.to_string().as_bytes());
            }
        } else {
            assert!(
                received >= N * 9 / 10,
                "QoS 0 on loopback should lose little: {received}/{N}"
            );
        }
        eprintln!(
            "QoS {sub_qos}: {received}/{N} received, {} dropped",
            stats.dropped_chunks
        );
        h.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restart_restores_the_subscription() {
    if !require("mosquitto", "mosquitto") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path());
    let mut source = Source::spawn(
        MqttDriver::new(
            settings(broker.port, "dev/#", MqttVersion::V311),
            Credentials::default(),
        )
        .unwrap(),
        RunOptions {
            reconnect: Reconnect {
                enabled: true,
                initial: Duration::from_millis(100),
                max: Duration::from_millis(500),
            },
            ..RunOptions::default()
        },
    );
    connected(&source).await;
    let h = source.handle();
    broker.stop();
    tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| matches!(s, Status::Reconnecting { .. })),
    )
    .await
    .expect("a lost broker must show reconnecting");
    broker.restart();
    connected(&source).await;
    let (client, _task) = publisher(broker.port).await;
    client
        .publish("dev/1", QoS::AtLeastOnce, false, "back")
        .await
        .unwrap();
    let got = receive(&mut source, 1, Duration::from_secs(5)).await;
    assert_eq!(
        got,
        vec![bytes::Bytes::from("back")],
        "subscription restored after restart"
    );
    assert!(h.stats().connects >= 2);
    h.close().await;
}

#[tokio::test]
async fn bad_filters_are_refused_up_front() {
    for bad in ["a/#/b", "a+"] {
        let e = MqttDriver::new(
            settings(1883, bad, MqttVersion::V311),
            Credentials::default(),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("topic filter"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publisher_sends_the_latest_frames_at_its_rate() {
    use sextant_devices::publisher::MqttPublisherSink;
    use sextant_devices::sim_source::SimulatorDriver;
    use sextant_devices::simulator::{demo_project, demo_settings};
    use sextant_devices::wiring::{Wiring, WiringOptions};
    use sextant_telemetry::project::{MqttPublisher, PublishFormat};

    if !require("mosquitto", "mosquitto") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path());
    // A subscriber (our own MQTT source) listening to what the publisher sends.
    let mut listener = Source::spawn(
        MqttDriver::new(
            settings(broker.port, "fleet/+/frames", MqttVersion::V311),
            Credentials::default(),
        )
        .unwrap(),
        RunOptions::default(),
    );
    connected(&listener).await;
    for format in [PublishFormat::Json, PublishFormat::Csv] {
        let config = MqttPublisher {
            enabled: true,
            port: broker.port,
            topic: "fleet/rover-1/frames".into(),
            format,
            rate_hz: 10,
            ..MqttPublisher::default()
        };
        let publisher = MqttPublisherSink::start(&config, &Credentials::default()).unwrap();
        let stats = publisher.stats.clone();
        let mut sim = demo_settings();
        sim.frame_rate_hz = 1000.0;
        let source = Source::spawn(SimulatorDriver::new(sim), RunOptions::default());
        let (chunks, h) = source.into_parts();
        let wiring = Wiring::start(
            sextant_telemetry::Pipeline::new(&demo_project()).unwrap(),
            vec![(0, chunks)],
            vec![Box::new(publisher)],
            WiringOptions::default(),
        );
        let got = receive(&mut listener, 5, Duration::from_secs(5)).await;
        h.close().await;
        tokio::task::spawn_blocking(move || wiring.join())
            .await
            .unwrap();
        assert_eq!(got.len(), 5, "{format:?}: five publishes in time");
        let first = String::from_utf8(got[0].to_vec()).unwrap();
        match format {
            PublishFormat::Json => {
                let v: serde_json::Value = serde_json::from_str(&first).unwrap();
                let volts = v["values"]["Power/Voltage"].as_f64().unwrap();
                assert!((3.0..4.5).contains(&volts), "{first}");
            }
            _ => assert_eq!(
                first.split(',').count(),
                16,
                "elapsed + 15 datasets: {first}"
            ),
        }
        // 1000 frames/s published at 10 Hz: most frames are superseded, none block.
        let s = stats.superseded.load(std::sync::atomic::Ordering::Relaxed);
        assert!(s > 50, "superseded {s}");
    }
    let bad = MqttPublisherSink::start(
        &MqttPublisher {
            rate_hz: 100,
            ..MqttPublisher::default()
        },
        &Credentials::default(),
    );
    assert!(bad.err().unwrap().to_string().contains("out of range"));
}

use common::make_certs;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_a_broker_with_a_private_ca() {
    if !require("mosquitto", "mosquitto") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    if !make_certs(dir.path()) {
        return;
    }
    let port = common::free_port();
    let conf = dir.path().join("tls.conf");
    std::fs::write(
        &conf,
        format!(
            "listener {port} 127.0.0.1\nallow_anonymous true\ncafile {d}/ca.pem\ncertfile {d}/server.pem\nkeyfile {d}/server.key\n",
            d = dir.path().display()
        ),
    )
    .unwrap();
    let mut broker = std::process::Command::new("mosquitto")
        .arg("-c")
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(common::wait_until(Duration::from_secs(5), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    }));
    let mut tls = settings(port, "secure/#", MqttVersion::V311);
    tls.host = "localhost".into();
    tls.tls = true;
    tls.ca_file = Some(dir.path().join("ca.pem").display().to_string());
    let mut source = Source::spawn(
        MqttDriver::new(tls.clone(), Credentials::default()).unwrap(),
        RunOptions::default(),
    );
    connected(&source).await;
    // Publish over TLS with the same CA.
    let mut opts = MqttOptions::new("tls-pub", "localhost", port);
    opts.set_transport(rumqttc::Transport::tls(
        std::fs::read(dir.path().join("ca.pem")).unwrap(),
        None,
        None,
    ));
    let (client, mut events) = AsyncClient::new(opts, 10);
    tokio::spawn(async move { while events.poll().await.is_ok() {} });
    client
        .publish("secure/t", QoS::AtLeastOnce, false, "over tls")
        .await
        .unwrap();
    assert_eq!(
        receive(&mut source, 1, Duration::from_secs(5)).await,
        vec![bytes::Bytes::from("over tls")]
    );
    source.handle().close().await;

    // Without the private CA the certificate is not trusted: a clear, retried error.
    tls.ca_file = None;
    let untrusted = Source::spawn(
        MqttDriver::new(tls, Credentials::default()).unwrap(),
        RunOptions::default(),
    );
    let st = tokio::time::timeout(
        Duration::from_secs(10),
        untrusted
            .handle()
            .wait_for(|s| matches!(s, Status::Reconnecting { .. })),
    )
    .await
    .expect("an untrusted certificate must not connect");
    assert!(
        st.to_string().to_lowercase().contains("certificate") || st.to_string().contains("tls"),
        "{st}"
    );
    untrusted.handle().close().await;
    let _ = broker.kill();
    let _ = broker.wait();
}

/// A client certificate (and an old v1 one) signed by the test CA, and a password file,
/// made the way an admin makes them (openssl, mosquitto_passwd).
fn make_client_cert_and_passwords(dir: &std::path::Path) {
    assert!(require("mosquitto_passwd", "mosquitto"));
    common::make_client_certs(dir);
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cd {} && mosquitto_passwd -c -b passwd bench 'c0rrect horse' && chmod 0644 passwd",
            dir.display()
        ))
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "mosquitto_passwd failed");
}

/// A broker that wants a user name and password and a client certificate, over TLS.
fn locked_broker(dir: &std::path::Path) -> (u16, std::process::Child) {
    let port = common::free_port();
    let conf = dir.join("locked.conf");
    std::fs::write(
        &conf,
        format!(
            "per_listener_settings true\nlistener {port} 127.0.0.1\nallow_anonymous false\n\
             password_file {d}/passwd\ncafile {d}/ca.pem\ncertfile {d}/server.pem\n\
             keyfile {d}/server.key\nrequire_certificate true\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let broker = std::process::Command::new("mosquitto")
        .arg("-c")
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(common::wait_until(Duration::from_secs(5), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    }));
    (port, broker)
}

/// Waits until the source has a status that is neither connecting nor connected.
async fn refused(source: &Source) -> String {
    tokio::time::timeout(
        Duration::from_secs(10),
        source
            .handle()
            .wait_for(|s| matches!(s, Status::Reconnecting { .. } | Status::Error(_))),
    )
    .await
    .expect("a refused connection must be reported")
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_and_client_certificate_against_a_locked_broker() {
    assert!(require("mosquitto", "mosquitto"));
    let dir = tempfile::tempdir().unwrap();
    assert!(make_certs(dir.path()));
    make_client_cert_and_passwords(dir.path());
    let (port, mut broker) = locked_broker(dir.path());
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let full = Credentials {
        password: Some("c0rrect horse".into()),
        ca_pem: Some(read("ca.pem")),
        client_cert_pem: Some(read("client.pem")),
        client_key_pem: Some(read("client.key")),
    };

    for version in [MqttVersion::V311, MqttVersion::V5] {
        let mut s = settings(port, "bench/#", version);
        s.host = "localhost".into();
        s.tls = true;
        s.username = Some("bench".into());

        // The right password and certificate: data flows.
        let mut source = Source::spawn(
            MqttDriver::new(s.clone(), full.clone()).unwrap(),
            RunOptions::default(),
        );
        connected(&source).await;
        let mut opts = MqttOptions::new(format!("pub-{}", rand_suffix()), "localhost", port);
        opts.set_credentials("bench", "c0rrect horse");
        opts.set_transport(rumqttc::Transport::tls(
            read("ca.pem").into_bytes(),
            Some((
                read("client.pem").into_bytes(),
                read("client.key").into_bytes(),
            )),
            None,
        ));
        let (client, mut events) = AsyncClient::new(opts, 10);
        let pump = tokio::spawn(async move { while events.poll().await.is_ok() {} });
        client
            .publish("bench/v", QoS::AtLeastOnce, false, "12.5")
            .await
            .unwrap();
        assert_eq!(
            receive(&mut source, 1, Duration::from_secs(5)).await,
            vec![bytes::Bytes::from("12.5")],
            "{version:?}"
        );
        pump.abort();
        source.handle().close().await;

        // A wrong password: the broker's reason, in words, and no retry loop.
        let wrong = Credentials {
            password: Some("tr0ub4dor".into()),
            ..full.clone()
        };
        let source = Source::spawn(
            MqttDriver::new(s.clone(), wrong).unwrap(),
            RunOptions::default(),
        );
        let st = refused(&source).await;
        assert!(
            matches!(source.handle().status(), Status::Error(_)),
            "a wrong password is not retried: {st}"
        );
        assert!(
            st.contains("refused the connection")
                && (st.contains("not authorized") || st.contains("wrong user name or password"))
                && st.contains("password"),
            "{version:?}: {st}"
        );
        assert!(!st.contains("tr0ub4dor"), "{st}");
        source.handle().close().await;

        // No client certificate: the TLS handshake fails, and says so.
        let no_cert = Credentials {
            client_cert_pem: None,
            client_key_pem: None,
            ..full.clone()
        };
        let source = Source::spawn(
            MqttDriver::new(s.clone(), no_cert).unwrap(),
            RunOptions::default(),
        );
        let st = refused(&source).await.to_lowercase();
        assert!(
            st.contains("certificate") || st.contains("tls") || st.contains("alert"),
            "{version:?}: {st}"
        );
        source.handle().close().await;

        // A key that is not the certificate's: refused before any byte is sent.
        let mismatched = Credentials {
            client_key_pem: Some(read("server.key")),
            ..full.clone()
        };
        let source = Source::spawn(
            MqttDriver::new(s.clone(), mismatched).unwrap(),
            RunOptions::default(),
        );
        let st = refused(&source).await;
        assert!(st.contains("do not go together"), "{st}");
        source.handle().close().await;

        // An old version 1 certificate: said so, with what to do.
        let v1 = Credentials {
            client_cert_pem: Some(read("client-v1.pem")),
            ..full.clone()
        };
        let source = Source::spawn(MqttDriver::new(s, v1).unwrap(), RunOptions::default());
        let st = refused(&source).await;
        assert!(st.contains("version 1"), "{st}");
        source.handle().close().await;
    }
    let _ = broker.kill();
    let _ = broker.wait();
}

/// The broker killed (SIGKILL) in the middle of a 100 000-message QoS 1 run and started
/// again: the source reconnects and resubscribes by itself, and the count reconciles –
/// every message Sextant read is one that was published, none twice, none out of order,
/// none lost inside Sextant (`received + dropped == read`, and nothing dropped), and every
/// message published once both sides are back arrives. What the dead broker held in memory
/// (no persistence, clean sessions: MQTT's contract for them) is lost and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_killed_mid_run_the_count_reconciles() {
    use rumqttc::{Event, Packet};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    if !require("mosquitto", "mosquitto") {
        return;
    }
    const N: u64 = 100_000;
    const BEFORE: u64 = N / 2;
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path());
    let driver = MqttDriver::new(
        settings(broker.port, "load/#", MqttVersion::V311),
        Credentials::default(),
    )
    .unwrap();
    assert_eq!(driver.qos, 1, "the app subscribes at QoS 1");
    let mut source = Source::spawn(
        driver,
        RunOptions {
            queue_chunks: 200_000,
            reconnect: Reconnect {
                enabled: true,
                initial: Duration::from_millis(50),
                max: Duration::from_millis(200),
            },
            ..RunOptions::default()
        },
    );
    connected(&source).await;
    let h = source.handle();

    // A publisher that keeps polling through errors, so it reconnects after the kill, and
    // counts its connections.
    let mut opts = MqttOptions::new(format!("pub-{}", rand_suffix()), "127.0.0.1", broker.port);
    opts.set_inflight(1000);
    let (client, mut events) = AsyncClient::new(opts, 10_000);
    let connacks = Arc::new(AtomicUsize::new(0));
    let seen = connacks.clone();
    let poller = tokio::spawn(async move {
        loop {
            match events.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    });
    let first = client.clone();
    let sender = tokio::spawn(async move {
        for i in 0..BEFORE {
            first
                .publish("load/x", QoS::AtLeastOnce, false, i.to_string())
                .await
                .unwrap();
        }
    });

    // Kill the broker once a fifth of the run has arrived, while the rest streams.
    let mut got: Vec<u64> = Vec::with_capacity(N as usize);
    while (got.len() as u64) < N / 5 {
        let c = tokio::time::timeout(Duration::from_secs(10), source.chunks.recv())
            .await
            .expect("messages flow before the kill")
            .unwrap();
        got.push(std::str::from_utf8(&c.data).unwrap().parse().unwrap());
    }
    broker.restart();
    tokio::time::timeout(
        Duration::from_secs(10),
        h.wait_for(|s| matches!(s, Status::Reconnecting { .. })),
    )
    .await
    .expect("the kill is noticed");
    sender.await.unwrap();
    // Both sides back: Sextant resubscribed, the publisher reconnected.
    connected(&source).await;
    assert!(
        common::wait_until(Duration::from_secs(10), || connacks.load(Ordering::SeqCst)
            >= 2),
        "the publisher did not reconnect"
    );
    // What was in flight at the kill drains (or was lost) before the second half starts.
    got.extend(
        receive(&mut source, N, Duration::from_millis(500))
            .await
            .iter()
            .map(|m| std::str::from_utf8(m).unwrap().parse::<u64>().unwrap()),
    );
    let after_kill = got.len();
    for i in BEFORE..N {
        client
            .publish("load/x", QoS::AtLeastOnce, false, i.to_string())
            .await
            .unwrap();
    }
    got.extend(
        receive(&mut source, N - BEFORE, Duration::from_secs(10))
            .await
            .iter()
            .map(|m| std::str::from_utf8(m).unwrap().parse::<u64>().unwrap()),
    );
    poller.abort();
    let stats = h.stats();
    let received = got.len() as u64;
    assert_eq!(received + stats.dropped_chunks, stats.chunks, "{stats:?}");
    assert_eq!(
        stats.dropped_chunks, 0,
        "Sextant itself dropped messages: {stats:?}"
    );
    assert!(stats.connects >= 2, "{stats:?}");
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "messages arrived twice or out of order"
    );
    assert!(got.iter().all(|&i| i < N), "a message nobody published");
    // Everything published once both sides were back arrived, in order.
    let second: Vec<u64> = got[after_kill..].to_vec();
    assert_eq!(second, (BEFORE..N).collect::<Vec<_>>(), "after the restart");
    let lost = N - received;
    assert!(lost < BEFORE, "lost {lost}");
    println!(
        "broker killed after {} of {N}: {received} received, {lost} lost with the broker, 0 dropped by Sextant, {} connects",
        N / 5,
        stats.connects
    );
    h.close().await;
}
