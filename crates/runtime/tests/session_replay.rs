//! A recorded session replayed as a device source (`session_replay`): the simulator
//! recorded, replayed through a fresh pipeline to the same CSV, and a replay paced, paused,
//! stepped and sought.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sextant_devices::replay::ReplayControl;
use sextant_devices::sim_source::SimulatorDriver;
use sextant_devices::simulator::{demo_project, demo_settings};
use sextant_devices::wiring::{CsvSink, FrameSink, Wiring, WiringOptions};
use sextant_devices::{Reconnect, RunOptions, Source, Status};
use sextant_runtime::session_replay::SessionReplayDriver;
use sextant_sessions::{NewSession, SessionStore, SessionWriter, WriterOptions};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::{FrameEvent, Pipeline, Timestamp};

fn new_session(title: &str) -> NewSession {
    NewSession {
        title: title.into(),
        project: demo_project(),
        tags: Vec::new(),
    }
}

/// Counts frames on the pipeline thread.
struct Count(Arc<AtomicU64>);

impl FrameSink for Count {
    fn frame(&mut self, _: &FrameEvent<'_>, _: &[DatasetInfo]) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn csv_of(store: &SessionStore, id: i64) -> String {
    let mut out = Vec::new();
    store.export_csv(id, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_simulator_session_replays_to_the_same_csv() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let live_csv = dir.path().join("live.csv");
    let replay_csv = dir.path().join("replay.csv");
    let project = demo_project();
    let mut settings = demo_settings();
    settings.frame_rate_hz = 2_000.0;

    // Live: the simulator through the pipeline, into a session and the live CSV export.
    let writer = SessionWriter::start(
        &db,
        NewSession {
            title: "bench run".into(),
            project: project.clone(),
            tags: vec!["bench".into()],
        },
        WriterOptions::default(),
    )
    .unwrap();
    let source = Source::spawn(SimulatorDriver::new(settings), RunOptions::default());
    let (chunks, h) = source.into_parts();
    let frames = Arc::new(AtomicU64::new(0));
    let wiring = Wiring::start(
        Pipeline::new(&project).unwrap(),
        vec![(0, chunks)],
        vec![
            Box::new(CsvSink::new(&live_csv)),
            Box::new(writer.sink()),
            Box::new(Count(frames.clone())),
        ],
        WiringOptions::default(),
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    h.close().await;
    let live_pipeline = tokio::task::spawn_blocking(move || wiring.join())
        .await
        .unwrap();
    let live = writer.close().unwrap();
    let live_frames = frames.load(Ordering::Relaxed);
    assert!(
        live_frames > 500,
        "the simulator produced {live_frames} frames"
    );
    assert_eq!(live_pipeline.stats(0).unwrap().parse_errors, 0);
    assert_eq!(live.frames, live_frames, "{live:?}");
    assert_eq!(
        (live.dropped_frames, live.dropped_chunks),
        (0, 0),
        "{live:?}"
    );
    assert_eq!(live.bytes, h.stats().bytes, "every raw byte is recorded");

    let store = SessionStore::open(&db).unwrap();
    let recorded = csv_of(&store, live.id);
    let live_text = std::fs::read_to_string(&live_csv).unwrap();
    assert_eq!(recorded.lines().count() as u64, live_frames + 1);
    assert!(
        recorded == live_text,
        "the session's CSV differs from the live export"
    );

    // Replay the raw chunks at maximum speed through a fresh pipeline, recording again.
    let again =
        SessionWriter::start(&db, new_session("replayed"), WriterOptions::default()).unwrap();
    let replay = Source::spawn(
        SessionReplayDriver {
            db: db.clone(),
            session: live.id,
            source: 0,
            control: ReplayControl::new(0.0),
        },
        RunOptions {
            reconnect: Reconnect::off(),
            ..RunOptions::default()
        },
    );
    let (chunks, rh) = replay.into_parts();
    let wiring = Wiring::start(
        Pipeline::new(&store.project(live.id).unwrap()).unwrap(),
        vec![(0, chunks)],
        vec![Box::new(CsvSink::new(&replay_csv)), Box::new(again.sink())],
        WiringOptions::default(),
    );
    rh.wait_for(|s| *s == Status::Finished).await;
    rh.close().await;
    tokio::task::spawn_blocking(move || wiring.join())
        .await
        .unwrap();
    let replayed = again.close().unwrap();
    assert_eq!(replayed.chunks, live.chunks);
    assert_eq!(replayed.frames, live.frames);
    let replayed_text = std::fs::read_to_string(&replay_csv).unwrap();
    assert!(
        replayed_text == recorded,
        "the replayed pipeline's CSV differs from the recorded session's: {}",
        first_difference(&replayed_text, &recorded)
    );
    assert!(
        csv_of(&store, replayed.id) == recorded,
        "the replay, recorded, exports a different CSV"
    );

    let detail = store.get(live.id).unwrap();
    assert_eq!(detail.summary.tags, ["bench"]);
    assert_eq!(detail.sources.len(), 1);
    assert_eq!(detail.sources[0].bytes, live.bytes);
    assert!(detail.summary.ended_unix_ms.is_some());
    assert!(detail.summary.duration_s > 0.5, "{:?}", detail.summary);
    assert_eq!(
        detail.project["sources"][0]["connection"]["type"],
        "simulator"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_replay_paces_pauses_steps_and_seeks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let writer = SessionWriter::start(&db, new_session("paced"), WriterOptions::default()).unwrap();
    let feed = writer.feed();
    for i in 0..20u64 {
        feed.chunk(
            0,
            &sextant_devices::Chunk {
                data: format!("{i}\n").into_bytes().into(),
                timestamp: Timestamp {
                    elapsed_ns: i * 50_000_000,
                    unix_ns: 0,
                },
            },
        );
    }
    let id = writer.close().unwrap().id;
    let control = ReplayControl::new(1.0);
    control.pause();
    let mut source = Source::spawn(
        SessionReplayDriver {
            db,
            session: id,
            source: 0,
            control: control.clone(),
        },
        RunOptions {
            reconnect: Reconnect::off(),
            ..RunOptions::default()
        },
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), source.chunks.recv())
            .await
            .is_err(),
        "a paused replay sends nothing"
    );
    control.step();
    let first = tokio::time::timeout(Duration::from_secs(5), source.chunks.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&first.data[..], b"0\n");
    control.seek(Duration::from_millis(500));
    control.set_speed(10.0);
    control.resume();
    let mut seen = Vec::new();
    while let Ok(Some(c)) = tokio::time::timeout(Duration::from_secs(5), source.chunks.recv()).await
    {
        seen.push((String::from_utf8(c.data.to_vec()).unwrap(), c.timestamp));
    }
    let texts: Vec<String> = seen.iter().map(|(t, _)| t.trim().to_string()).collect();
    let expected: Vec<String> = (10..20).map(|i| i.to_string()).collect();
    assert_eq!(texts, expected);
    assert_eq!(
        seen[0].1.elapsed_ns, 500_000_000,
        "recorded timestamps are kept"
    );
    assert_eq!(source.handle().status(), Status::Finished);

    let missing = Source::spawn(
        SessionReplayDriver {
            db: dir.path().join("sessions.db"),
            session: 999,
            source: 0,
            control: ReplayControl::new(0.0),
        },
        RunOptions {
            reconnect: Reconnect::off(),
            ..RunOptions::default()
        },
    );
    let st = missing
        .handle()
        .wait_for(|s| matches!(s, Status::Error(_)))
        .await;
    assert!(st.to_string().contains("no session 999"), "{st}");
}

/// Where two CSV texts first differ, for the failure message.
fn first_difference(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    for (i, (x, y)) in la.iter().zip(&lb).enumerate() {
        if x != y {
            return format!("line {i}: {x:?} vs {y:?}");
        }
    }
    format!("{} lines vs {}", la.len(), lb.len())
}
