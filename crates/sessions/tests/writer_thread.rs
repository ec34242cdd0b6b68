//! Recordings run on threads that live on (see `writer.rs`, `IDLE`): recordings one after
//! another use one thread, and only recordings at once need more. In a process of its own,
//! so no other test's recordings are counted.

use sextant_sessions::{NewSession, SessionWriter, WriterOptions};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::project::Project;
use sextant_telemetry::{FrameEvent, Timestamp, Value};

/// Threads of this process named as recording threads.
fn recording_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "session-writer")
        .count()
}

/// Recording threads once every thread started so far has named itself: a new thread sets
/// its name from inside, when it first runs, so right after `spawn` it may not be counted
/// yet. Waits (up to a generous bound, for a busy machine) until `expected` are seen, then
/// counts once more, so too many still fails.
fn recording_threads_once_named(expected: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while recording_threads() < expected && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    recording_threads()
}

fn start(db: &std::path::Path, title: &str) -> SessionWriter {
    let writer = SessionWriter::start(
        db,
        NewSession {
            title: title.into(),
            project: Project::default(),
            tags: vec![],
        },
        WriterOptions::default(),
    )
    .unwrap();
    let feed = writer.feed();
    feed.columns(&[DatasetInfo {
        id: "v".into(),
        title: "V".into(),
        group: "G".into(),
        units: String::new(),
        source: Some(0),
        slot: Some(0),
    }]);
    for n in 0..2_000u64 {
        assert!(feed.frame(&FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: n * 1_000_000,
                unix_ns: 0,
            },
            values: &[Value::Number(n as f64)],
        }));
    }
    writer
}

#[test]
fn recordings_one_after_another_share_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    assert_eq!(recording_threads(), 0);
    for k in 0..5 {
        let report = start(&db, &format!("one {k}")).close().unwrap();
        assert_eq!(report.frames, 2_000);
        assert_eq!(recording_threads(), 1, "after recording {k}");
    }
    // Three at once need three; afterwards they all wait for the next.
    let three: Vec<_> = (0..3).map(|k| start(&db, &format!("three {k}"))).collect();
    assert_eq!(recording_threads_once_named(3), 3);
    for w in three {
        assert_eq!(w.close().unwrap().frames, 2_000);
    }
    // An abandoned recording (dropped, not closed) gives its thread back too.
    drop(start(&db, "abandoned"));
    for k in 0..3 {
        start(&db, &format!("again {k}")).close().unwrap();
    }
    assert_eq!(recording_threads(), 3);
    let store = sextant_sessions::SessionStore::open(&db).unwrap();
    assert_eq!(store.list(None).unwrap().len(), 12);
}
