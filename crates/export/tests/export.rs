//! Sessions recorded through the real pipeline (the simulator live, and captures of
//! message sources replayed as devices), plus one written directly with text, gaps and
//! numbers JSON cannot hold, exported as MCAP and Parquet and read back by tools nobody
//! here wrote: the `mcap` crate's reader, and from PyPI the `mcap` package, pyarrow and
//! pandas (`tests/read_back.py`), compared with the session itself and its CSV export.

#[path = "../../devices/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value as Json;
use sextant_devices::message_replay::MessageReplayDriver;
use sextant_devices::replay::ReplayControl;
use sextant_devices::sim_source::SimulatorDriver;
use sextant_devices::simulator::{demo_project, demo_settings};
use sextant_devices::wiring::{Wiring, WiringOptions};
use sextant_devices::{Reconnect, RunOptions, Source, Status};
use sextant_export::{export_file, ExportError, Format, Layout, McapSink};
use sextant_sessions::{
    NewSession, SessionError, SessionId, SessionRecords, SessionStore, SessionWriter, WriterOptions,
};
use sextant_telemetry::{FrameEvent, FrameSink, Pipeline, Project, Timestamp, Value};

const READ_BACK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/read_back.py");
const PROBE: &str = "import mcap.reader, pyarrow.parquet, pandas, numpy, zstandard";
const INSTALL_HINT: &str =
    "run ./dev test (it installs the mcap package, pyarrow and pandas into a virtualenv and \
     sets SEXTANT_TEST_PYTHON), or pip install mcap pyarrow pandas and set \
     SEXTANT_TEST_PYTHON to that python";

fn python() -> Option<PathBuf> {
    common::python_with("the mcap package, pyarrow and pandas", PROBE, INSTALL_HINT)
}

fn read_back(python: &Path, args: &[&Path]) -> Json {
    let out = Command::new(python)
        .arg(READ_BACK)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "read_back.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The simulator's demo device live for a moment, through the wiring, into a session.
async fn record_simulator(db: &Path, beside: Vec<Box<dyn FrameSink>>) -> SessionId {
    let project = demo_project();
    let mut settings = demo_settings();
    settings.frame_rate_hz = 2_000.0;
    let writer = SessionWriter::start(db, session("simulator", &project), opts()).unwrap();
    let source = Source::spawn(SimulatorDriver::new(settings), RunOptions::default());
    let (chunks, h) = source.into_parts();
    let mut sinks: Vec<Box<dyn FrameSink>> = vec![Box::new(writer.sink())];
    sinks.extend(beside);
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, chunks)],
        sinks,
        WiringOptions::default(),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    h.close().await;
    wiring.join();
    let report = writer.close().unwrap();
    assert!(
        report.frames > 100 && report.dropped_frames == 0,
        "{report:?}"
    );
    report.id
}

/// A capture of a message source (`fixtures/messages/<case>`) replayed as a device into a
/// session.
async fn record_capture(db: &Path, case: &str, beside: Vec<Box<dyn FrameSink>>) -> SessionId {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/messages")
        .join(case);
    let project = Project::load(&dir.join("project.json")).unwrap();
    let writer = SessionWriter::start(db, session(case, &project), opts()).unwrap();
    let replay = Source::spawn(
        MessageReplayDriver {
            path: dir.join("capture.jsonl"),
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
    let mut sinks: Vec<Box<dyn FrameSink>> = vec![Box::new(writer.sink())];
    sinks.extend(beside);
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, chunks)],
        sinks,
        WiringOptions::default(),
    );
    h.wait_for(|s| *s == Status::Finished).await;
    h.close().await;
    wiring.join();
    writer.close().unwrap().id
}

/// Frames written directly: text that is a number and text that is not, empty cells
/// (no new value), NaN and infinities, and two datasets titled alike in one group.
fn record_awkward(db: &Path) -> SessionId {
    let project: Project = serde_json::from_value(serde_json::json!({
        "format": "sextant-project", "schemaVersion": 1,
        "sources": [{"id": "bench", "connection": {"type": "simulator"}, "parser": {"kind": "delimited"}}],
        "groups": [
            {"id": "g", "title": "Probe", "datasets": [
                {"id": "v", "title": "Voltage", "units": "V", "index": 1},
                {"id": "state", "title": "State", "index": 2},
                {"id": "v2", "title": "Voltage", "units": "mV", "index": 3}]},
            {"id": "h", "title": "Odd \"group\"/name", "datasets": [
                {"id": "x", "title": "X", "index": 4}]}
        ]
    }))
    .unwrap();
    let writer = SessionWriter::start(db, session("awkward", &project), opts()).unwrap();
    let feed = writer.feed();
    let datasets = Pipeline::new(&project).unwrap().datasets().to_vec();
    feed.columns(&datasets);
    for i in 0..5_000u64 {
        let text = |s: &str| Value::Text(s.to_string());
        let row = vec![
            match i % 7 {
                0 => Value::Null,
                1 => Value::Number(f64::NAN),
                2 => text(" 12.5 "),
                _ => Value::Number(i as f64 * 0.001 - 2.0),
            },
            match i % 3 {
                0 => text("idle, \"ok\""),
                1 => Value::Number(i as f64),
                _ => text("运行"),
            },
            Value::Number(if i == 10 {
                f64::INFINITY
            } else {
                1.0 / (i + 1) as f64
            }),
            if i % 2 == 0 {
                Value::Null
            } else {
                Value::Number(-(i as f64))
            },
        ];
        assert!(feed.frame(&FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: 5_000_000_000 + i * 1_000_000,
                unix_ns: 0,
            },
            values: &row,
        }));
    }
    writer.close().unwrap().id
}

fn session(title: &str, project: &Project) -> NewSession {
    NewSession {
        title: title.into(),
        project: project.clone(),
        tags: vec!["export".into()],
    }
}

fn opts() -> WriterOptions {
    WriterOptions::default()
}

async fn sessions(db: &Path) -> Vec<SessionId> {
    vec![
        record_simulator(db, vec![]).await,
        record_capture(db, "can-dbc", vec![]).await,
        record_capture(db, "udp-binary", vec![]).await,
        record_awkward(db),
    ]
}

/// FNV-1a, 64 bits: the raw bytes' fingerprint `read_back.py` computes too.
fn fnv1a(data: &[u8], mut h: u64) -> u64 {
    for b in data {
        h = (h ^ *b as u64).wrapping_mul(0x100000001B3);
    }
    h
}
const FNV_START: u64 = 0xCBF29CE484222325;

/// What each topic must hold, worked out from the session itself: per group the frames
/// whose source feeds it, each dataset's numeric sum in frame order, texts and nulls; per
/// source its chunks and their bytes.
fn expected_topics(store: &SessionStore, id: SessionId, layout: &Layout) -> BTreeMap<String, Json> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, c) in layout.columns.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| *g == c.group) {
            Some((_, cols)) => cols.push(i),
            None => groups.push((c.group.clone(), vec![i])),
        }
    }
    let mut topics = BTreeMap::new();
    for (group, cols) in &groups {
        let sources: Option<Vec<usize>> = cols.iter().map(|c| layout.columns[*c].source).collect();
        let mut keys: Vec<String> = vec!["elapsed_s".into()];
        let names: Vec<String> = cols
            .iter()
            .map(|c| {
                let title = &layout.columns[*c].title;
                let mut key = title.clone();
                let mut n = 2;
                while keys.contains(&key) {
                    key = format!("{title} ({n})");
                    n += 1;
                }
                keys.push(key.clone());
                key
            })
            .collect();
        let (mut messages, mut texts, mut nulls) = (0u64, 0u64, 0u64);
        let mut sums: BTreeMap<String, f64> = BTreeMap::new();
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        store
            .for_each_frame(id, |_, source, values| {
                if sources.as_ref().is_some_and(|s| !s.contains(&source)) {
                    return Ok(());
                }
                messages += 1;
                for (c, name) in cols.iter().zip(&names) {
                    match &values[*c] {
                        Value::Null => {}
                        Value::Text(_) => texts += 1,
                        Value::Number(n) if !n.is_finite() => nulls += 1,
                        Value::Number(n) => {
                            *sums.entry(name.clone()).or_default() += n;
                            *counts.entry(name.clone()).or_default() += 1;
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
        let title = if group.is_empty() { "Datasets" } else { group };
        topics.insert(
            format!("/{title}"),
            serde_json::json!({"messages": messages, "sums": sums, "counts": counts,
                               "texts": texts, "nulls": nulls}),
        );
    }
    for source in store.get(id).unwrap().sources {
        let mut records = SessionRecords::open(store.path(), id, source.index).unwrap();
        let (mut bytes, mut hash) = (0u64, FNV_START);
        for i in 0..records.times().len() {
            let (data, _) = records.load(i).unwrap();
            bytes += data.len() as u64;
            hash = fnv1a(&data, hash);
        }
        topics.insert(
            format!("/{}/raw", layout.source_id(source.index)),
            serde_json::json!({"messages": records.times().len(), "rawBytes": bytes,
                               "rawHash": format!("{hash:016x}")}),
        );
    }
    topics
}

/// Each topic's figures from one reader, in the shape of [`expected_topics`].
fn same_topics(what: &str, expected: &BTreeMap<String, Json>, got: &serde_json::Map<String, Json>) {
    let mut names: Vec<&String> = got.keys().collect();
    names.sort();
    assert_eq!(
        names,
        expected.keys().collect::<Vec<_>>(),
        "{what}: the topics"
    );
    for (topic, want) in expected {
        for (field, value) in want.as_object().unwrap() {
            assert_eq!(&got[topic][field], value, "{what}: {topic} {field}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcap_exports_read_back_as_the_sessions_they_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let ids = sessions(&db).await;
    let python = python();
    let store = SessionStore::open(&db).unwrap();
    for id in ids {
        let layout = Layout::of(&store, id).unwrap();
        let path = dir.path().join(format!("session-{id}.mcap"));
        let exported = export_file(&db, id, Format::Mcap, &path).unwrap();
        let summary = store.summary(id).unwrap();
        assert_eq!(exported.frames, summary.frames, "session {id}");
        assert_eq!(exported.chunks, summary.chunks, "session {id}");
        let bytes = std::fs::read(&path).unwrap();
        assert!(Format::Mcap.recognises(&bytes));
        let expected = expected_topics(&store, id, &layout);

        // The mcap crate's own reader: every message, in time order, as the session holds it.
        let mut got = serde_json::Map::new();
        let mut last = 0;
        let mut frames_by_time: Vec<(u64, Json)> = Vec::new();
        for message in mcap::MessageStream::new(&bytes).unwrap() {
            let message = message.unwrap();
            assert!(message.log_time >= last, "session {id}: out of order");
            last = message.log_time;
            let body: Json = serde_json::from_slice(&message.data).unwrap();
            let topic = got.entry(message.channel.topic.clone()).or_insert_with(|| {
                serde_json::json!({"messages": 0, "sums": {}, "counts": {},
                                    "texts": 0, "nulls": 0, "rawBytes": 0,
                                    "rawHash": format!("{FNV_START:016x}")})
            });
            topic["messages"] = (topic["messages"].as_u64().unwrap() + 1).into();
            let schema = message.channel.schema.as_ref().unwrap();
            assert_eq!(schema.encoding, "jsonschema");
            assert_eq!(message.channel.message_encoding, "json");
            if message.channel.topic.ends_with("/raw") {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(body["data"].as_str().unwrap())
                    .unwrap();
                let hash = u64::from_str_radix(topic["rawHash"].as_str().unwrap(), 16).unwrap();
                topic["rawHash"] = format!("{:016x}", fnv1a(&raw, hash)).into();
                topic["rawBytes"] = (topic["rawBytes"].as_u64().unwrap() + raw.len() as u64).into();
                continue;
            }
            let declared: Json = serde_json::from_slice(&schema.data).unwrap();
            for (key, value) in body.as_object().unwrap() {
                assert!(
                    declared["properties"].get(key).is_some(),
                    "{key} is in the schema"
                );
                if key == "elapsed_s" {
                    frames_by_time.push((message.log_time, value.clone()));
                    continue;
                }
                match value {
                    Json::Null => topic["nulls"] = (topic["nulls"].as_u64().unwrap() + 1).into(),
                    Json::String(_) => {
                        topic["texts"] = (topic["texts"].as_u64().unwrap() + 1).into()
                    }
                    n => {
                        let sum = topic["sums"][key].as_f64().unwrap_or(0.0) + n.as_f64().unwrap();
                        topic["sums"][key] = sum.into();
                        let count = topic["counts"][key].as_u64().unwrap_or(0) + 1;
                        topic["counts"][key] = count.into();
                    }
                }
            }
        }
        same_topics(&format!("session {id}, mcap crate"), &expected, &got);
        // A message's log time is the session's start plus its `elapsed_s`.
        let start_ns = summary.started_unix_ms as u64 * 1_000_000;
        for (log_time, elapsed) in &frames_by_time {
            let elapsed_ns = (elapsed.as_f64().unwrap() * 1e9).round() as u64;
            assert!(
                log_time.abs_diff(start_ns + elapsed_ns) <= 1,
                "{log_time} {elapsed}"
            );
        }

        // And the `mcap` package from PyPI.
        let Some(py) = &python else { continue };
        let read = read_back(py, &[Path::new("mcap"), &path]);
        same_topics(
            &format!("session {id}, mcap package"),
            &expected,
            read["topics"].as_object().unwrap(),
        );
        assert_eq!(read["inOrder"], true);
        let meta = &read["metadata"]["sextant.session"];
        assert_eq!(meta["title"], summary.title.as_str());
        assert_eq!(meta["tags"], "export");
        assert_eq!(
            read["attachments"]["project.json"]["data"],
            store.get(id).unwrap().project,
            "the project the session was recorded with"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_exports_read_back_with_pyarrow_as_the_csv_export() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let ids = sessions(&db).await;
    let store = SessionStore::open(&db).unwrap();
    let Some(py) = python() else { return };
    for id in ids {
        let path = dir.path().join(format!("session-{id}.parquet"));
        let csv = dir.path().join(format!("session-{id}.csv"));
        let exported = export_file(&db, id, Format::Parquet, &path).unwrap();
        let rows = store.export_csv_file(id, &csv).unwrap();
        assert_eq!(exported.frames, rows);
        assert!(Format::Parquet.recognises(&std::fs::read(&path).unwrap()));
        let read = read_back(&py, &[Path::new("parquet"), &path, &csv]);
        assert_eq!(
            read["problems"],
            serde_json::json!([]),
            "session {id}: {read}"
        );
        assert_eq!(read["rows"], rows);
        assert_eq!(read["schema"]["time"], "timestamp[us, tz=UTC]");
        assert_eq!(read["session"]["id"], id);
        let layout = Layout::of(&store, id).unwrap();
        for c in &layout.columns {
            assert!(read["schema"].get(&c.name).is_some(), "{c:?}: {read}");
        }
    }
    // The awkward session's types: numbers stay numbers (text that reads as one too), a
    // dataset that held other text is text; units are in the file's metadata.
    let awkward = dir.path().join(format!("session-{}.parquet", 4));
    let read = read_back(
        &py,
        &[
            Path::new("parquet"),
            &awkward,
            &dir.path().join("session-4.csv"),
        ],
    );
    assert_eq!(read["schema"]["Probe/Voltage"], "double", "{read}");
    assert_eq!(read["schema"]["Probe/State"], "string", "{read}");
    assert_eq!(read["schema"]["Probe/Voltage (2)"], "double", "{read}");
    assert_eq!(
        read["session"]["units"]["Probe/Voltage (2)"], "mV",
        "{read}"
    );
}

/// A long session goes out in row groups, and every row is there.
#[test]
fn a_long_session_is_written_in_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let project = demo_project();
    let writer = SessionWriter::start(&db, session("long", &project), opts()).unwrap();
    let feed = writer.feed();
    let datasets = Pipeline::new(&project).unwrap().datasets().to_vec();
    feed.columns(&datasets);
    let n = 150_000u64;
    for i in 0..n {
        let row: Vec<Value> = (0..datasets.len())
            .map(|k| Value::Number((i * k as u64) as f64))
            .collect();
        while !feed.frame(&FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: i * 1_000_000,
                unix_ns: 0,
            },
            values: &row,
        }) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let id = writer.close().unwrap().id;
    let path = dir.path().join("long.parquet");
    assert_eq!(
        export_file(&db, id, Format::Parquet, &path).unwrap().frames,
        n
    );
    let Some(py) = python() else { return };
    let csv = dir.path().join("long.csv");
    SessionStore::open(&db)
        .unwrap()
        .export_csv_file(id, &csv)
        .unwrap();
    let read = read_back(&py, &[Path::new("parquet"), &path, &csv]);
    assert_eq!(read["problems"], serde_json::json!([]), "{read}");
    assert_eq!(read["rows"], n);
    assert_eq!(read["rowGroups"], 3, "{read}");
}

/// A failed export leaves the file that was at the path, and nothing beside it.
#[test]
fn a_failed_export_leaves_the_file_that_was_there() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let id = record_awkward(&db);
    for format in [Format::Mcap, Format::Parquet] {
        let path = dir.path().join(format!("kept.{}", format.extension()));
        std::fs::write(&path, b"an earlier export").unwrap();
        let e = export_file(&db, id + 100, format, &path).unwrap_err();
        assert!(
            matches!(e, ExportError::Session(SessionError::NotFound(_))),
            "{e}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"an earlier export");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with(&format!("kept.{}", format.extension())))
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }
}

/// Every message of an MCAP file by topic, in order: its log time and payload.
fn messages_by_topic(bytes: &[u8]) -> BTreeMap<String, Vec<(u64, Vec<u8>)>> {
    let mut topics: BTreeMap<String, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
    for message in mcap::MessageStream::new(bytes).unwrap() {
        let message = message.unwrap();
        topics
            .entry(message.channel.topic.clone())
            .or_default()
            .push((message.log_time, message.data.to_vec()));
    }
    topics
}

/// A run recorded into a session and, beside it, live as MCAP: the live file holds what
/// the session holds – message for message what the session's export holds, `elapsed_s`
/// included – and the `mcap` package from PyPI reads it as the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_mcap_recording_holds_what_the_session_recorded_beside_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let python = python();
    for case in ["simulator", "can-dbc", "udp-binary"] {
        let live = dir.path().join(format!("{case}-live.mcap"));
        let project = match case {
            "simulator" => demo_project(),
            _ => Project::load(
                &Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../fixtures/messages")
                    .join(case)
                    .join("project.json"),
            )
            .unwrap(),
        };
        let sink = McapSink::new(&live, &project);
        let status = sink.status();
        let beside: Vec<Box<dyn FrameSink>> = vec![Box::new(sink)];
        let id = match case {
            "simulator" => record_simulator(&db, beside).await,
            _ => record_capture(&db, case, beside).await,
        };
        let store = SessionStore::open(&db).unwrap();
        let summary = store.summary(id).unwrap();
        use std::sync::atomic::Ordering::Relaxed;
        assert_eq!(status.dropped.load(Relaxed), 0, "{case}");
        assert_eq!(status.frames.load(Relaxed), summary.frames, "{case}");
        assert_eq!(status.chunks.load(Relaxed), summary.chunks, "{case}");
        assert!(status.problem().is_none(), "{case}");
        assert!(
            !dir.path()
                .join(format!("{case}-live.mcap.partial"))
                .exists(),
            "{case}: the file is in place, nothing left beside it"
        );

        let exported = dir.path().join(format!("{case}-export.mcap"));
        export_file(&db, id, Format::Mcap, &exported).unwrap();
        let live_bytes = std::fs::read(&live).unwrap();
        assert!(Format::Mcap.recognises(&live_bytes), "{case}");
        let live_topics = messages_by_topic(&live_bytes);
        let export_topics = messages_by_topic(&std::fs::read(&exported).unwrap());
        assert_eq!(
            live_topics.keys().collect::<Vec<_>>(),
            export_topics.keys().collect::<Vec<_>>(),
            "{case}: the same channels"
        );
        for (topic, messages) in &export_topics {
            let got = &live_topics[topic];
            assert_eq!(got.len(), messages.len(), "{case} {topic}: messages");
            for (i, ((live_time, live_data), (_, data))) in got.iter().zip(messages).enumerate() {
                assert_eq!(
                    String::from_utf8_lossy(live_data),
                    String::from_utf8_lossy(data),
                    "{case} {topic}: message {i}"
                );
                if i > 0 {
                    assert!(*live_time >= got[i - 1].0, "{case} {topic}: in time order");
                }
            }
        }

        let Some(py) = &python else { continue };
        let read = read_back(py, &[Path::new("mcap"), &live]);
        let layout = Layout::of(&store, id).unwrap();
        same_topics(
            &format!("{case} live, mcap package"),
            &expected_topics(&store, id, &layout),
            read["topics"].as_object().unwrap(),
        );
        assert!(read["metadata"]["sextant.recording"]["startedUnixMs"]
            .as_str()
            .is_some_and(|ms| ms.parse::<u64>().is_ok()));
        assert_eq!(
            read["attachments"]["project.json"]["data"],
            store.get(id).unwrap().project,
            "{case}: the project the run was wired from"
        );
    }
}

/// While a run goes on, what was recorded is in the file within a second: a reader of the
/// `.partial` file as it stands – what a crash would leave – finds the frames so far.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_mcap_recording_is_on_disk_while_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.mcap");
    let partial = dir.path().join("run.mcap.partial");
    let project = demo_project();
    let mut settings = demo_settings();
    // Slow enough that a chunk of the file's would take minutes to fill: only the
    // writer's flush puts anything on disk within the test.
    settings.frame_rate_hz = 20.0;
    let sink = McapSink::new(&path, &project);
    let status = sink.status();
    let source = Source::spawn(SimulatorDriver::new(settings), RunOptions::default());
    let (chunks, h) = source.into_parts();
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, chunks)],
        vec![Box::new(sink)],
        WiringOptions::default(),
    );
    let mut on_disk = 0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let bytes = std::fs::read(&partial).unwrap_or_default();
        // The file has no summary or footer yet: read messages until its end.
        on_disk = mcap::MessageStream::new(&bytes)
            .map(|messages| {
                messages
                    .map_while(Result::ok)
                    .filter(|m| !m.channel.topic.ends_with("/raw"))
                    .count()
            })
            .unwrap_or(0);
        if on_disk > 0 {
            break;
        }
    }
    let written = status.frames.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        on_disk > 0,
        "nothing on disk after 10 s of a run ({written} frames written)"
    );
    assert!(
        !path.exists(),
        "the file is put in place only when the run ends"
    );
    h.close().await;
    wiring.join();
    assert!(path.exists() && !partial.exists());
}
