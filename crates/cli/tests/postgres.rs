//! A headless bench writing to a database: `sextant run` refuses a project with a PostgreSQL
//! sink until the person passes `--publish`, then writes every value to the real server
//! (password from `PGPASSWORD`, as PostgreSQL's own tools take it) and says how many went
//! in; the table holds exactly that many.

use std::process::Command;

use serde_json::json;
use sextant_postgres::test_server::{TestServer, PASSWORD, USER};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_writes_every_value_to_postgres_once_the_person_says_so() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("rig.json");
    let body = json!({
        "format": "sextant-project", "schemaVersion": 1,
        "title": "Rig",
        "sources": [{"id": "sim", "connection": {"type": "simulator", "frameRateHz": 200,
                     "channels": [{"name": "a", "waveform": "sine", "frequencyHz": 2, "amplitude": 1},
                                  {"name": "b", "waveform": "square", "frequencyHz": 1, "amplitude": 3}]},
                     "parser": {"kind": "delimited"}}],
        "groups": [{"id": "g", "title": "Cell", "datasets": [
            {"id": "a", "title": "Voltage", "index": 1}, {"id": "b", "title": "Load", "index": 2}]}],
        "postgres": {"enabled": true, "host": "127.0.0.1", "port": server.port,
                     "database": "postgres", "user": USER, "table": "bench_rows", "bench": "rig-a"}
    });
    std::fs::write(&project, body.to_string()).unwrap();

    // Without --publish: refused, naming where the values would go.
    let refused = Command::new(env!("CARGO_BIN_EXE_sextant"))
        .args(["run", "--seconds", "1", "--project"])
        .arg(&project)
        .env("PGPASSWORD", PASSWORD)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("--publish")
            && said.contains("`bench_rows`")
            && said.contains(&format!("127.0.0.1:{}", server.port)),
        "{said}"
    );

    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_sextant"))
            .args(["run", "--publish", "--seconds", "2", "--project"])
            .arg(&project)
            .env("PGPASSWORD", PASSWORD)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    // "PostgreSQL: F frames (V values) written, D frames dropped"
    let line = log
        .lines()
        .find_map(|l| l.strip_prefix("PostgreSQL: "))
        .unwrap_or_else(|| panic!("the bench says what it wrote: {log}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let frames: i64 = words[0].parse().unwrap();
    let values: i64 = words[2].trim_start_matches('(').parse().unwrap();
    assert!(frames >= 200, "{line}");
    assert_eq!(values, frames * 2, "{line}");
    assert!(line.ends_with(", 0 frames dropped"), "{line}");

    let client = server.client().await;
    let row = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE dataset = 'Cell/Voltage'), min(bench), \
             max(bench) FROM bench_rows",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), values);
    // Every frame has both values (frames cut from one read share its time, so a time is
    // not a frame's name).
    assert_eq!(row.get::<_, i64>(1), frames);
    assert_eq!(row.get::<_, String>(2), "rig-a");
    assert_eq!(row.get::<_, String>(3), "rig-a");
}
