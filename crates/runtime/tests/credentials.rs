//! Source credentials against a real mosquitto that wants a password over TLS (its
//! certificates made with openssl here): a wrong password is refused with the broker's
//! reason, the right one lets data flow, the project file never holds a secret, nothing a
//! command returns shows one, and an edit that points the source elsewhere (another host,
//! TLS off) gets no password at all.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sextant_runtime::credentials::{
    CredentialPart, CredentialTarget, CredentialsRequest, Destination, Protocol,
};
use sextant_runtime::{CredentialVault, Runtime, RuntimeHandle, Workspace};
use sextant_secrets::SecretStore;
use sextant_telemetry::Project;
use tokio::io::AsyncReadExt;

const PASSWORD: &str = "c0rrect horse";

fn sh(dir: &Path, script: &str) {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("cd {} && {script}", dir.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "failed (openssl and mosquitto must be installed): {script}"
    );
}

/// A broker on `localhost` that takes only `bench` / [`PASSWORD`], over TLS under a
/// private CA.
fn locked_broker(dir: &Path) -> (u16, Child) {
    sh(dir, "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca");
    sh(dir, "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost");
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=DNS:localhost\n").unwrap();
    sh(dir, "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf");
    sh(
        dir,
        &format!("mosquitto_passwd -c -b passwd bench '{PASSWORD}'"),
    );
    sh(
        dir,
        "chmod 0644 ca.pem server.pem server.key passwd && chmod 0755 .",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = dir.join("broker.conf");
    std::fs::write(
        &conf,
        format!(
            "per_listener_settings true\nlistener {port} 127.0.0.1\nallow_anonymous false\n\
             password_file {d}/passwd\ncafile {d}/ca.pem\ncertfile {d}/server.pem\n\
             keyfile {d}/server.key\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let child = Command::new("mosquitto")
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mosquitto must be installed");
    let end = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < end, "mosquitto did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (port, child)
}

fn project(port: u16) -> Project {
    serde_json::from_value(json!({
        "title": "Bench",
        "sources": [{"id": "broker", "title": "Lab broker",
                     "connection": {"type": "mqtt", "host": "localhost", "port": port,
                                    "tls": true, "username": "bench", "topic": "bench/#"},
                     "parser": {"kind": "delimited", "separator": ","}}],
        "groups": [{"id": "g", "title": "G", "datasets": [{"id": "v", "title": "V", "index": 1}]}],
    }))
    .expect("a valid project")
}

fn destination(port: u16) -> Destination {
    Destination {
        protocol: Protocol::Mqtt,
        host: "localhost".into(),
        port,
        tls: true,
    }
}

fn target() -> CredentialTarget {
    CredentialTarget::Source {
        id: "broker".into(),
    }
}

async fn ui(h: &RuntimeHandle, command: &str, params: Value) -> Value {
    h.call_from_ui(command, params, true)
        .await
        .unwrap_or_else(|e| panic!("{command}: {}", e.message))
}

/// The source's status once it is neither connecting nor connected, or `connected`.
async fn settled(h: &RuntimeHandle) -> String {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let status = ui(h, "io.status", json!({})).await;
        let text = status["sources"][0]["status"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if !text.is_empty() && text != "connecting" {
            return text;
        }
        assert!(Instant::now() < end, "the source never settled: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn set(port: u16, password: Option<&str>, ca: Option<String>) -> CredentialsRequest {
    CredentialsRequest::Set {
        target: target(),
        destination: destination(port),
        password: password.map(str::to_string),
        ca_pem: ca,
        client_cert_pem: None,
        client_key_pem: None,
        clear: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_reaches_only_the_broker_it_was_given_for() {
    let dir = tempfile::tempdir().unwrap();
    let (port, mut broker) = locked_broker(dir.path());
    let ca = std::fs::read_to_string(dir.path().join("ca.pem")).unwrap();
    let file = dir.path().join("bench.json");
    let project = project(port);
    std::fs::write(&file, project.to_json_string()).unwrap();
    let vault = CredentialVault::with_store(
        SecretStore::encrypted_file(&dir.path().join("secrets")).unwrap(),
    );
    let h = Runtime::new(Workspace::opened(project, file.clone()))
        .with_credentials(vault)
        .spawn(None);

    // Nothing saved: the broker's refusal, and where to enter a password.
    ui(&h, "io.connect", json!({})).await;
    let st = settled(&h).await;
    assert!(
        st.contains("certificate") || st.contains("refused"),
        "without the CA the broker is not trusted, or refuses: {st}"
    );
    ui(&h, "io.disconnect", json!({})).await;

    // The CA and a wrong password: refused, in the broker's words, not retried.
    let status = h
        .credentials(set(port, Some("tr0ub4dor"), Some(ca.clone())))
        .await
        .unwrap();
    assert!(status.password && status.ca_certificate && !status.client_key);
    assert_eq!(status.saved_for, Some(destination(port)));
    ui(&h, "io.connect", json!({})).await;
    let st = settled(&h).await;
    assert!(
        st.starts_with("error") && st.contains("refused the connection") && st.contains("password"),
        "{st}"
    );
    ui(&h, "io.disconnect", json!({})).await;

    // The right password (the CA is kept: same destination): data flows.
    let status = h
        .credentials(set(port, Some(PASSWORD), None))
        .await
        .unwrap();
    assert!(status.password && status.ca_certificate);
    ui(&h, "io.connect", json!({})).await;
    assert_eq!(settled(&h).await, "connected");
    let mut opts = rumqttc::MqttOptions::new("bench-pub", "localhost", port);
    opts.set_credentials("bench", PASSWORD);
    opts.set_transport(rumqttc::Transport::tls(ca.clone().into_bytes(), None, None));
    let (client, mut events) = rumqttc::AsyncClient::new(opts, 10);
    let pump = tokio::spawn(async move { while events.poll().await.is_ok() {} });
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        client
            .publish("bench/v", rumqttc::QoS::AtLeastOnce, false, "3.5\n")
            .await
            .unwrap();
        let status = ui(&h, "io.status", json!({})).await;
        if status["sources"][0]["frames"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(Instant::now() < end, "no frame arrived: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pump.abort();
    ui(&h, "io.disconnect", json!({})).await;

    // No secret on disk, nor in anything a command returns (what a model reads).
    ui(&h, "project.save", json!({})).await;
    let on_disk = std::fs::read_to_string(&file).unwrap();
    let mut seen = vec![on_disk];
    for command in ["project.get", "project.source.list", "io.status"] {
        seen.push(ui(&h, command, json!({})).await.to_string());
    }
    for text in &seen {
        assert!(
            !text.contains(PASSWORD) && !text.contains("BEGIN CERTIFICATE"),
            "{text}"
        );
    }
    assert!(
        h.specs()
            .iter()
            .all(|s| !s.name.contains("credential") && !s.name.contains("secret")),
        "no registry command reaches the credentials"
    );

    // Pointed at another broker: a listener there hears nothing, and the reason is given.
    let evil = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let evil_port = evil.local_addr().unwrap().port();
    let heard = Arc::new(Mutex::new(Vec::<u8>::new()));
    let log = heard.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = evil.accept().await {
            let mut buf = [0u8; 512];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                log.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        }
    });
    for connection in [
        json!({"type": "mqtt", "host": "127.0.0.1", "port": evil_port, "tls": false,
               "username": "bench", "topic": "bench/#"}),
        json!({"type": "mqtt", "host": "localhost", "port": port, "tls": false,
               "username": "bench", "topic": "bench/#"}),
    ] {
        ui(
            &h,
            "project.source.update",
            json!({"id": "broker", "changes": {"connection": connection}}),
        )
        .await;
        let refused = h.call_from_ui("io.connect", json!({}), true).await;
        let text = match refused {
            Err(e) => e.message,
            Ok(_) => settled(&h).await,
        };
        assert!(
            text.contains("were given for the MQTT broker at localhost")
                && text.contains("enter them again"),
            "{text}"
        );
        let _ = h.call_from_ui("io.disconnect", json!({}), true).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let heard = String::from_utf8_lossy(&heard.lock().unwrap()).into_owned();
    assert!(
        !heard.contains(PASSWORD),
        "the password went elsewhere: {heard:?}"
    );

    // Saved under a new name, the project keeps its credentials; forgetting removes them.
    let copy = dir.path().join("bench-copy.json");
    ui(&h, "project.save", json!({"path": copy})).await;
    let status = h
        .credentials(CredentialsRequest::Status { target: target() })
        .await
        .unwrap();
    assert!(status.password && status.ca_certificate, "{status:?}");
    let status = h
        .credentials(CredentialsRequest::Set {
            target: target(),
            destination: destination(port),
            password: None,
            ca_pem: None,
            client_cert_pem: None,
            client_key_pem: None,
            clear: vec![CredentialPart::Password],
        })
        .await
        .unwrap();
    assert!(!status.password && status.ca_certificate);
    let status = h
        .credentials(CredentialsRequest::Forget { target: target() })
        .await
        .unwrap();
    assert!(!status.ca_certificate && status.saved_for.is_none());
    let _ = broker.kill();
    let _ = broker.wait();
}
