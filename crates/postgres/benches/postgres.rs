//! How fast the PostgreSQL sink writes into a real server on this machine: 250 000 frames of
//! 16 datasets (4 M rows) offered as fast as the writer takes them without a drop, three
//! runs of each kind of table, each run into a fresh one: the table the sink makes (with its
//! index on `(bench, dataset, time)`), and a table made beforehand without an index (what
//! the sink and the server's COPY cost without the index's upkeep).
//!
//! `cargo bench -p sextant-postgres --bench postgres`

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sextant_devices::Credentials;
use sextant_postgres::test_server::{TestServer, PASSWORD, USER};
use sextant_postgres::{Options, PostgresSink, Target};
use sextant_telemetry::pipeline::{DatasetInfo, FrameEvent, Timestamp};
use sextant_telemetry::project::PostgresSink as Config;
use sextant_telemetry::{FrameSink, Value};

const FRAMES: u64 = 250_000;
const DATASETS: usize = 16;

fn main() {
    let server = TestServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let datasets: Vec<DatasetInfo> = (0..DATASETS)
        .map(|i| DatasetInfo {
            id: format!("d{i}"),
            title: format!("Channel {i}"),
            group: "Bench".into(),
            units: "V".into(),
            source: Some(0),
            slot: Some(i),
        })
        .collect();
    println!(
        "{FRAMES} frames of {DATASETS} datasets into PostgreSQL on 127.0.0.1 (one row a value)"
    );
    let kinds = (1..=3)
        .map(|r| ("made by the sink, indexed", r))
        .chain((4..=6).map(|r| ("made beforehand, no index", r)));
    for (kind, run) in kinds {
        if run > 3 {
            let sql = format!(
                "CREATE TABLE bench_{run} (time timestamptz NOT NULL, bench text NOT NULL, \
                 dataset text NOT NULL, value double precision, text text)"
            );
            runtime.block_on(async { server.client().await.batch_execute(&sql).await.unwrap() });
        }
        let target = Target {
            config: Config {
                enabled: true,
                host: "127.0.0.1".into(),
                port: server.port,
                database: "postgres".into(),
                user: USER.into(),
                table: format!("bench_{run}"),
                bench: String::new(),
                tls: false,
            },
            bench: "bench".into(),
            credentials: Credentials {
                password: Some(PASSWORD.into()),
                ..Credentials::default()
            },
        };
        let (mut sink, handle) = {
            let _guard = runtime.enter();
            PostgresSink::start(target, Options::default()).unwrap()
        };
        let stats = sink.stats().clone();
        let start = Instant::now();
        let mut values = vec![Value::Null; DATASETS];
        for i in 0..FRAMES {
            for (c, v) in values.iter_mut().enumerate() {
                *v = Value::Number((i as f64 * 0.001 + c as f64).sin());
            }
            let event = FrameEvent {
                source: 0,
                timestamp: Timestamp {
                    elapsed_ns: i * 1_000_000,
                    unix_ns: 1_765_000_000_000_000_000 + i as i64 * 1_000_000,
                },
                values: &values,
            };
            sink.frame(&event, &datasets);
            if i % 1_000 == 999 {
                sink.idle();
                // Never more than half the queue waiting: what is measured is the writer,
                // not how many frames a full queue throws away.
                while stats.queued_frames.load(Ordering::Relaxed)
                    - stats.written_frames.load(Ordering::Relaxed)
                    > 100_000
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
        drop(sink);
        let report = runtime.block_on(handle.finished());
        let s = start.elapsed().as_secs_f64();
        assert_eq!(report.dropped_frames, 0, "{report:?}");
        assert_eq!(report.written_frames, FRAMES);
        println!(
            "{kind}: {:.2} s, {:.0} K frames/s, {:.2} M rows/s, {} COPYs",
            s,
            FRAMES as f64 / s / 1e3,
            report.written_rows as f64 / s / 1e6,
            report.copies
        );
    }
}
