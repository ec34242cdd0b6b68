//! The PostgreSQL sink against a real PostgreSQL server (the distribution's, started by
//! `TestServer`): a million frames reconciled by count and checksum, a server restarted
//! mid-stream, a table locked until the queue overflows, and the settings a server refuses.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sextant_devices::Credentials;
use sextant_postgres::test_server::{TestServer, PASSWORD, USER};
use sextant_postgres::{Options, PostgresSink, SinkHandle, SinkStats, Target};
use sextant_telemetry::pipeline::{DatasetInfo, FrameEvent, Timestamp};
use sextant_telemetry::project::PostgresSink as Config;
use sextant_telemetry::{FrameSink, Value};

const BASE_NS: i64 = 1_765_000_000_000_000_000;

fn datasets() -> Vec<DatasetInfo> {
    [
        ("Power", "Voltage"),
        ("Power", "Current"),
        ("Status", "Mode"),
        ("Status", "Temp"),
    ]
    .iter()
    .enumerate()
    .map(|(i, (group, title))| DatasetInfo {
        id: format!("d{i}"),
        title: title.to_string(),
        group: group.to_string(),
        units: String::new(),
        source: Some(0),
        slot: Some(i),
    })
    .collect()
}

/// Frame `i`: numbers whose sums are exact in any order (multiples of 1/4 below 2^53),
/// gaps (no new value), text, and NaN and both infinities.
fn frame(i: u64) -> Vec<Value> {
    let voltage = Value::Number((i % 4000) as f64 * 0.25);
    let current = if i.is_multiple_of(5) {
        Value::Null
    } else {
        Value::Number(-(((i * 7) % 1000) as f64) * 0.5)
    };
    let mode = if i.is_multiple_of(100) {
        Value::Text(format!("mode-{}", i % 3))
    } else {
        Value::Null
    };
    let temp = match i % 1000 {
        1 => Value::Number(f64::NAN),
        2 => Value::Number(f64::INFINITY),
        3 => Value::Number(f64::NEG_INFINITY),
        _ => Value::Number(i as f64),
    };
    vec![voltage, current, mode, temp]
}

fn time_ns(i: u64) -> i64 {
    BASE_NS + i as i64 * 1_000
}

fn config(server: &TestServer, table: &str) -> Config {
    Config {
        enabled: true,
        host: "127.0.0.1".into(),
        port: server.port,
        database: "postgres".into(),
        user: USER.into(),
        table: table.into(),
        bench: String::new(),
        tls: false,
    }
}

fn target(config: Config, password: &str) -> Target {
    Target {
        config,
        bench: "bench-7".into(),
        credentials: Credentials {
            password: Some(password.into()),
            ..Credentials::default()
        },
    }
}

async fn client(server: &TestServer) -> tokio_postgres::Client {
    server.client().await
}

/// One dataset's rows: how many, numbers, texts, the sum of the finite numbers, NaNs, +inf,
/// −inf, and the bytes of the texts.
#[derive(Debug, Default, PartialEq)]
struct Sums(String, i64, i64, i64, f64, i64, i64, i64, i64);

/// What the frames `range` put in the table, computed from the frames themselves.
#[derive(Debug, Default, PartialEq)]
struct Expected {
    rows: i64,
    per_dataset: Vec<Sums>,
    /// Sum of every row's time in microseconds since the Unix epoch.
    time_us: i128,
}

fn expected(frames: impl Iterator<Item = u64> + Clone) -> Expected {
    let columns: Vec<String> = datasets().iter().map(|d| d.column()).collect();
    let mut e = Expected::default();
    for (c, column) in columns.iter().enumerate() {
        let (mut rows, mut nums, mut texts, mut sum, mut nan, mut pinf, mut ninf, mut bytes) =
            (0, 0, 0, 0.0, 0, 0, 0, 0);
        for i in frames.clone() {
            match &frame(i)[c] {
                Value::Null => continue,
                Value::Number(n) => {
                    nums += 1;
                    if n.is_nan() {
                        nan += 1;
                    } else if *n == f64::INFINITY {
                        pinf += 1;
                    } else if *n == f64::NEG_INFINITY {
                        ninf += 1;
                    } else {
                        sum += n;
                    }
                }
                Value::Text(t) => {
                    texts += 1;
                    bytes += t.len() as i64;
                }
            }
            rows += 1;
            e.time_us += (time_ns(i) / 1_000) as i128;
        }
        e.rows += rows;
        e.per_dataset.push(Sums(
            column.clone(),
            rows,
            nums,
            texts,
            sum,
            nan,
            pinf,
            ninf,
            bytes,
        ));
    }
    // As the server orders them (`ORDER BY dataset`, byte order in the C collation
    // `initdb` gave the test cluster).
    e.per_dataset.sort_by(|a, b| a.0.cmp(&b.0));
    e
}

/// What the table holds, by the server's own aggregates.
async fn actual(client: &tokio_postgres::Client, table: &str) -> Expected {
    let mut e = Expected::default();
    let rows = client
        .query(
            &format!(
                "SELECT dataset, count(*), count(value), count(text), \
                 coalesce(sum(value) FILTER (WHERE value NOT IN ('NaN', 'Infinity', '-Infinity')), 0), \
                 count(*) FILTER (WHERE value = 'NaN'), \
                 count(*) FILTER (WHERE value = 'Infinity'), \
                 count(*) FILTER (WHERE value = '-Infinity'), \
                 coalesce(sum(octet_length(text)), 0)::bigint \
                 FROM {table} GROUP BY dataset ORDER BY dataset"
            ),
            &[],
        )
        .await
        .unwrap();
    for r in rows {
        e.rows += r.get::<_, i64>(1);
        e.per_dataset.push(Sums(
            r.get(0),
            r.get(1),
            r.get(2),
            r.get(3),
            r.get(4),
            r.get(5),
            r.get(6),
            r.get(7),
            r.get(8),
        ));
    }
    let time: String = client
        .query_one(
            &format!(
                "SELECT coalesce(sum((extract(epoch FROM time) * 1000000)::bigint::numeric), 0)::text FROM {table}"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    e.time_us = time.parse().unwrap();
    e
}

/// Feeds frames `range` to `sink` on a thread of their own, as the pipeline thread would,
/// telling it the pipeline caught up every `idle_every` frames. With `pace`, waits whenever
/// more than that many frames are queued but not written, so none is dropped.
fn feed(
    mut sink: PostgresSink,
    range: std::ops::Range<u64>,
    idle_every: u64,
    pace: Option<u64>,
    between: impl Fn(u64) + Send + 'static,
) -> std::thread::JoinHandle<PostgresSink> {
    std::thread::spawn(move || {
        let datasets = datasets();
        let stats = sink.stats().clone();
        for i in range {
            let values = frame(i);
            let event = FrameEvent {
                source: 0,
                timestamp: Timestamp {
                    elapsed_ns: i * 1_000,
                    unix_ns: time_ns(i),
                },
                values: &values,
            };
            sink.frame(&event, &datasets);
            if (i + 1) % idle_every == 0 {
                sink.idle();
                between(i);
                if let Some(limit) = pace {
                    while in_flight(&stats) > limit {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
        }
        sink.idle();
        sink
    })
}

fn in_flight(stats: &SinkStats) -> u64 {
    stats.queued_frames.load(Ordering::Relaxed)
        - stats.written_frames.load(Ordering::Relaxed)
        - stats
            .dropped_frames
            .load(Ordering::Relaxed)
            .min(stats.queued_frames.load(Ordering::Relaxed))
}

async fn finish(
    sink: std::thread::JoinHandle<PostgresSink>,
    handle: SinkHandle,
) -> sextant_postgres::SinkReport {
    let sink = tokio::task::spawn_blocking(move || sink.join().unwrap())
        .await
        .unwrap();
    drop(sink);
    tokio::time::timeout(Duration::from_secs(120), handle.finished())
        .await
        .expect("the writer ends")
}

/// Writes frame 0 (so the table `samples` exists), then locks the table in a transaction
/// of another client, which the caller commits: until then every `COPY` waits.
async fn locked_after_one_frame(
    server: &TestServer,
    sink: PostgresSink,
) -> (PostgresSink, tokio_postgres::Client) {
    let stats = sink.stats().clone();
    let first = feed(sink, 0..1, 1, None, |_| {});
    let sink = tokio::task::spawn_blocking(move || first.join().unwrap())
        .await
        .unwrap();
    eventually("the first frame written", || {
        stats.written_frames.load(Ordering::Relaxed) == 1
    })
    .await;
    let locker = client(server).await;
    locker
        .batch_execute("BEGIN; LOCK TABLE samples IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    (sink, locker)
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "{what} did not happen in 30 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_frames_reach_the_table_and_reconcile_by_count_and_checksum() {
    let server = TestServer::start();
    client(&server)
        .await
        .batch_execute("CREATE SCHEMA lab")
        .await
        .unwrap();
    let (sink, handle) = PostgresSink::start(
        target(config(&server, "lab.samples_1"), PASSWORD),
        Options::default(),
    )
    .unwrap();
    const N: u64 = 1_000_000;
    let fed = feed(sink, 0..N, 1_000, Some(200_000), |_| {});
    let report = finish(fed, handle).await;
    assert_eq!(report.dropped_frames, 0, "{report:?}");
    assert_eq!(report.written_frames, N, "{report:?}");
    assert_eq!(report.problem, None);
    let client = client(&server).await;
    let want = expected(0..N);
    let got = actual(&client, "lab.samples_1").await;
    assert_eq!(got, want);
    assert_eq!(report.written_rows as i64, got.rows);
    // Every row carries the bench, and the values come back bit for bit.
    let benches: Vec<String> = client
        .query("SELECT DISTINCT bench FROM lab.samples_1", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(benches, ["bench-7"]);
    // The sink made the table, with the index a dashboard's query over one dataset wants.
    let indexes: Vec<String> = client
        .query(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'lab' AND tablename = 'samples_1'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(indexes.len(), 1, "{indexes:?}");
    assert!(
        indexes[0].ends_with("(bench, dataset, \"time\" DESC)"),
        "{indexes:?}"
    );
    for i in [0u64, 1, 2, 3, 100, 123_457, N - 1] {
        let rows = client
            .query(
                "SELECT dataset, value, text, (extract(epoch FROM time) * 1000000)::bigint \
                 FROM lab.samples_1 WHERE time = to_timestamp($1::float8 / 1000000) ORDER BY dataset",
                &[&((time_ns(i) / 1_000) as f64)],
            )
            .await
            .unwrap();
        let got: Vec<(String, Option<f64>, Option<String>, i64)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        let mut want: Vec<(String, Option<f64>, Option<String>, i64)> = datasets()
            .iter()
            .zip(frame(i))
            .filter_map(|(d, v)| {
                let t = time_ns(i) / 1_000;
                match v {
                    Value::Null => None,
                    Value::Number(n) => Some((d.column(), Some(n), None, t)),
                    Value::Text(s) => Some((d.column(), None, Some(s), t)),
                }
            })
            .collect();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(format!("{got:?}"), format!("{want:?}"), "frame {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_mid_stream_loses_nothing_and_doubles_nothing() {
    let mut server = TestServer::start();
    let (sink, handle) = PostgresSink::start(
        target(config(&server, "samples"), PASSWORD),
        Options::default(),
    )
    .unwrap();
    let stats: Arc<SinkStats> = handle.stats().clone();
    const N: u64 = 60_000;
    // ~20 000 frames a second, for three seconds.
    let (at_half_tx, at_half) = std::sync::mpsc::channel::<()>();
    let (go_on, go_on_rx) = std::sync::mpsc::channel::<()>();
    let go_on_rx = std::sync::Mutex::new(go_on_rx);
    let fed = feed(sink, 0..N, 200, None, move |i| {
        std::thread::sleep(Duration::from_millis(10));
        if i + 1 == N / 2 {
            at_half_tx.send(()).unwrap();
            go_on_rx.lock().unwrap().recv().unwrap();
        }
    });
    tokio::task::spawn_blocking(move || at_half.recv().unwrap())
        .await
        .unwrap();
    server.stop();
    go_on.send(()).unwrap();
    // The frames go on arriving while the server is away, and the sink says why they are
    // not going in.
    eventually("a problem shown", || stats.report().problem.is_some()).await;
    let problem = stats.report().problem.unwrap();
    assert!(
        problem.contains("PostgreSQL") || problem.contains("connection"),
        "{problem}"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.start_again();
    let report = finish(fed, handle).await;
    assert_eq!(report.dropped_frames, 0, "{report:?}");
    assert_eq!(report.written_frames, N, "{report:?}");
    assert!(report.connections >= 2, "{report:?}");
    assert_eq!(report.problem, None, "{report:?}");
    let client = client(&server).await;
    assert_eq!(actual(&client, "samples").await, expected(0..N));
    let distinct: i64 = client
        .query_one(
            "SELECT count(*) FROM (SELECT DISTINCT time, dataset FROM samples) d",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(distinct as u64, report.written_rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_server_fills_the_queue_and_every_dropped_frame_is_counted() {
    let server = TestServer::start();
    let options = Options {
        queue_frames: 2_048,
        batch_frames: 64,
        ..Options::default()
    };
    let (sink, handle) =
        PostgresSink::start(target(config(&server, "samples"), PASSWORD), options).unwrap();
    let stats = handle.stats().clone();
    let (sink, locker) = locked_after_one_frame(&server, sink).await;
    const N: u64 = 50_000;
    let fed = feed(sink, 1..N, 64, None, |_| {});
    let sink = tokio::task::spawn_blocking(move || fed.join().unwrap())
        .await
        .unwrap();
    assert!(
        stats.dropped_frames.load(Ordering::Relaxed) > 0,
        "{:?}",
        stats.report()
    );
    locker.batch_execute("COMMIT").await.unwrap();
    drop(sink);
    let report = tokio::time::timeout(Duration::from_secs(60), handle.finished())
        .await
        .unwrap();
    assert_eq!(
        report.written_frames + report.dropped_frames,
        N,
        "every frame offered is written or counted as dropped: {report:?}"
    );
    let client = client(&server).await;
    let rows: i64 = client
        .query_one("SELECT count(*) FROM samples", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows as u64, report.written_rows);
}

/// A sink that cannot write says why in words a person can act on, and counts the frames
/// it could not send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_a_server_refuses_are_explained_and_their_frames_counted() {
    let server = TestServer::start();
    client(&server)
        .await
        .batch_execute("CREATE TABLE other (time timestamptz, v integer)")
        .await
        .unwrap();
    let nobody = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let rows: Vec<(&str, Target, &str)> = vec![
        (
            "a wrong password",
            target(config(&server, "samples"), "not the password"),
            "password authentication failed for user \"sextant\"",
        ),
        (
            "a table of another shape",
            target(config(&server, "other"), PASSWORD),
            "the table other exists but lacks the columns bench (text), dataset (text), value (double precision), text (text)",
        ),
        (
            "no server at the port",
            target(
                Config {
                    port: nobody,
                    ..config(&server, "samples")
                },
                PASSWORD,
            ),
            &*format!("PostgreSQL at 127.0.0.1:{nobody}").leak(),
        ),
        (
            "a database that does not exist",
            target(
                Config {
                    database: "no_such_db".into(),
                    ..config(&server, "samples")
                },
                PASSWORD,
            ),
            "database \"no_such_db\" does not exist",
        ),
    ];
    for (what, target, says) in rows {
        let options = Options {
            finish_within: Duration::from_millis(500),
            ..Options::default()
        };
        let (sink, handle) = PostgresSink::start(target, options).unwrap();
        let stats = handle.stats().clone();
        let fed = feed(sink, 0..1_000, 100, None, |_| {});
        eventually(what, || stats.report().problem.is_some()).await;
        let problem = stats.report().problem.unwrap();
        assert!(problem.contains(says), "{what}: {problem}");
        let report = finish(fed, handle).await;
        assert_eq!(
            (report.written_frames, report.dropped_frames),
            (0, 1_000),
            "{what}: {report:?}"
        );
    }
    // Settings that cannot work are refused before anything starts.
    for (table, host) in [("x; DROP TABLE other", "127.0.0.1"), ("samples", " ")] {
        let bad = Config {
            table: table.into(),
            host: host.into(),
            ..config(&server, "samples")
        };
        let err = PostgresSink::start(target(bad, PASSWORD), Options::default())
            .err()
            .expect("refused");
        assert!(!err.to_string().is_empty());
    }
    // And the table refused above is as it was.
    let n: i64 = client(&server)
        .await
        .query_one("SELECT count(*) FROM other", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

/// A connection cut while its `COPY` is in flight (an administrator ending it, here while
/// the `COPY` waits for a lock): the batch goes in again on a new connection, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cut_during_a_copy_sends_that_copy_again_once() {
    let server = TestServer::start();
    let (sink, handle) = PostgresSink::start(
        target(config(&server, "samples"), PASSWORD),
        Options::default(),
    )
    .unwrap();
    let stats = handle.stats().clone();
    let (sink, admin) = locked_after_one_frame(&server, sink).await;
    const N: u64 = 5_000;
    let fed = feed(sink, 1..N, 100, None, |_| {});
    let sink = tokio::task::spawn_blocking(move || fed.join().unwrap())
        .await
        .unwrap();
    // The sink's COPY now waits for the lock; end its connection as an administrator would.
    let other = client(&server).await;
    let waiting = "SELECT pid FROM pg_stat_activity WHERE application_name = 'Sextant' \
                   AND wait_event_type = 'Lock'";
    let end = Instant::now() + Duration::from_secs(30);
    let pid: i32 = loop {
        if let Some(row) = other.query_opt(waiting, &[]).await.unwrap() {
            break row.get(0);
        }
        assert!(Instant::now() < end, "the COPY never waited for the lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    other
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    eventually("the cut noticed", || stats.report().problem.is_some()).await;
    admin.batch_execute("COMMIT").await.unwrap();
    drop(sink);
    let report = tokio::time::timeout(Duration::from_secs(60), handle.finished())
        .await
        .unwrap();
    assert_eq!(
        (report.written_frames, report.dropped_frames),
        (N, 0),
        "{report:?}"
    );
    assert!(report.connections >= 2, "{report:?}");
    assert_eq!(actual(&other, "samples").await, expected(0..N));
}

/// A table its owner made with the sink's columns is written as it is: no index added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_made_beforehand_is_written_and_its_indexes_left_alone() {
    let server = TestServer::start();
    let admin = client(&server).await;
    admin
        .batch_execute(
            "CREATE TABLE mine (time timestamptz NOT NULL, bench text NOT NULL, \
             dataset text NOT NULL, value double precision, text text, note text)",
        )
        .await
        .unwrap();
    let (sink, handle) = PostgresSink::start(
        target(config(&server, "mine"), PASSWORD),
        Options::default(),
    )
    .unwrap();
    let report = finish(feed(sink, 0..1_000, 100, None, |_| {}), handle).await;
    assert_eq!((report.written_frames, report.dropped_frames), (1_000, 0));
    assert_eq!(actual(&admin, "mine").await, expected(0..1_000));
    let indexes: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'mine'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(indexes, 0);
}
