//! The project's PostgreSQL sink through the runtime, against a real server: without the
//! password the person is told the server's refusal; the password entered at the person's
//! door reaches the server and never the project file; `io.status` counts what went in; and
//! the table holds exactly the values the live CSV export wrote from the same frames.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sextant_postgres::test_server::{TestServer, PASSWORD, USER};
use sextant_runtime::credentials::{CredentialTarget, CredentialsRequest, Destination, Protocol};
use sextant_runtime::{CredentialVault, Runtime, RuntimeHandle, Workspace};
use sextant_secrets::SecretStore;
use sextant_telemetry::Project;

fn project(port: u16) -> Project {
    serde_json::from_value(json!({
        "title": "Rig 3",
        "sources": [{"id": "sim", "connection": {"type": "simulator", "frameRateHz": 500,
                     "channels": [{"name": "a", "waveform": "sine", "frequencyHz": 3, "amplitude": 2},
                                  {"name": "b", "waveform": "saw", "frequencyHz": 1, "amplitude": 5}]},
                     "parser": {"kind": "delimited"}}],
        "groups": [{"id": "g", "title": "Motor", "datasets": [
            {"id": "a", "title": "Current", "index": 1},
            {"id": "b", "title": "Speed", "index": 2}]}],
        "postgres": {"enabled": true, "host": "127.0.0.1", "port": port,
                     "database": "postgres", "user": USER, "table": "rig_samples"}
    }))
    .expect("a valid project")
}

async fn ui(h: &RuntimeHandle, command: &str, params: Value) -> Value {
    // `true`: the person said yes to what Connect sends (here, every value to the database).
    h.call_from_ui(command, params, true)
        .await
        .unwrap_or_else(|e| panic!("{command}: {}", e.message))
}

async fn until(h: &RuntimeHandle, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let status = ui(h, "io.status", json!({})).await;
        if check(&status["postgres"]) {
            return status;
        }
        assert!(Instant::now() < end, "{what}: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connected_project_writes_every_value_to_its_postgres_table() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rig.json");
    let csv = dir.path().join("live.csv");
    let project = project(server.port);
    std::fs::write(&file, project.to_json_string()).unwrap();
    let vault = CredentialVault::with_store(
        SecretStore::encrypted_file(&dir.path().join("secrets")).unwrap(),
    );
    let h = Runtime::new(Workspace::opened(project, file.clone()))
        .with_credentials(vault)
        .spawn(None);

    // Nothing saved: the run goes on, and the sink says what the server said.
    ui(&h, "io.connect", json!({})).await;
    let status = until(&h, "the refusal shown", |p| p["problem"].is_string()).await;
    let problem = status["postgres"]["problem"].as_str().unwrap();
    assert!(
        problem.contains("password") && problem.contains("127.0.0.1"),
        "{problem}"
    );
    assert_eq!(status["postgres"]["writtenFrames"], 0);
    ui(&h, "io.disconnect", json!({})).await;

    // The password, through the person's door, for this server.
    let saved = h
        .credentials(CredentialsRequest::Set {
            target: CredentialTarget::Postgres,
            destination: Destination {
                protocol: Protocol::Postgres,
                host: "127.0.0.1".into(),
                port: server.port,
                tls: false,
            },
            password: Some(PASSWORD.into()),
            ca_pem: None,
            client_cert_pem: None,
            client_key_pem: None,
            clear: vec![],
        })
        .await
        .unwrap();
    assert!(saved.password);
    ui(&h, "csvExport.enable", json!({"path": csv})).await;
    ui(&h, "io.connect", json!({})).await;
    let status = until(&h, "values written", |p| {
        p["writtenFrames"].as_u64().unwrap_or(0) >= 500 && p["connected"] == true
    })
    .await;
    assert!(status["postgres"].get("problem").is_none(), "{status}");
    assert_eq!(status["postgres"]["droppedFrames"], 0, "{status}");
    ui(&h, "io.disconnect", json!({})).await;
    assert!(!std::fs::read_to_string(&file).unwrap().contains(PASSWORD));

    // The CSV export saw the same frames: the table must hold the same values. Its writer
    // puts the file in place once it has written the last row.
    let end = Instant::now() + Duration::from_secs(30);
    while !csv.exists() {
        assert!(Instant::now() < end, "the CSV export never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header, ["elapsed_s", "Motor/Current", "Motor/Speed"]);
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').skip(1).map(|c| c.parse().unwrap()).collect())
        .collect();
    let frames = rows.len() as i64;
    assert!(frames >= 500);
    let client = server.client().await;
    // The writer finishes what was queued after the run: wait for the count to settle.
    let end = Instant::now() + Duration::from_secs(30);
    let per_dataset = loop {
        let got: Vec<(String, String, i64, f64)> = client
            .query(
                "SELECT dataset, min(bench), count(value), sum(value) FROM rig_samples \
                 GROUP BY dataset ORDER BY dataset",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        if got.iter().all(|g| g.2 == frames) && got.len() == 2 {
            break got;
        }
        assert!(Instant::now() < end, "{got:?}, the CSV has {frames} rows");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for (i, (dataset, bench, _, sum)) in per_dataset.iter().enumerate() {
        assert_eq!(dataset, header[i + 1]);
        assert_eq!(bench, "Rig 3", "the project's title names the bench");
        // The CSV prints 15 significant digits; the table holds the exact doubles.
        let csv_sum: f64 = rows.iter().map(|r| r[i]).sum();
        assert!(
            (sum - csv_sum).abs() <= 1e-9 * rows.iter().map(|r| r[i].abs()).sum::<f64>().max(1.0),
            "{dataset}: table {sum}, CSV {csv_sum}"
        );
    }
}
