//! Session recording against real SQLite files: browsing and editing, schema versions, a
//! flooded writer, durability across reopening, and a recorder killed mid-session. (A
//! session replayed as a device source is tested in the runtime, which builds that source.)

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sextant_devices::simulator::demo_project;
use sextant_sessions::{NewSession, SessionError, SessionStore, SessionWriter, WriterOptions};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::{Chunk, FrameEvent, FrameSink, Pipeline, Timestamp, Value};

fn new_session(title: &str) -> NewSession {
    NewSession {
        title: title.into(),
        project: demo_project(),
        tags: Vec::new(),
    }
}

fn datasets() -> Vec<DatasetInfo> {
    Pipeline::new(&demo_project()).unwrap().datasets().to_vec()
}

/// A synthetic frame of the demo project's width: numbers, a text and a null.
fn values(i: u64, width: usize) -> Vec<Value> {
    (0..width)
        .map(|k| match k {
            0 => Value::Text(format!("row {i}, \"quoted\"")),
            1 => Value::Null,
            _ => Value::Number(i as f64 * 0.1 + k as f64),
        })
        .collect()
}

/// Records `n` synthetic frames 10 ms apart; returns the session id.
fn record_synthetic(db: &Path, title: &str, n: u64) -> i64 {
    let writer = SessionWriter::start(db, new_session(title), WriterOptions::default()).unwrap();
    let feed = writer.feed();
    let ds = datasets();
    feed.columns(&ds);
    for i in 0..n {
        let row = values(i, ds.len());
        assert!(feed.frame(&FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: i * 10_000_000,
                unix_ns: 1_700_000_000_000_000_000 + (i * 10_000_000) as i64,
            },
            values: &row,
        }));
    }
    let report = writer.close().unwrap();
    assert_eq!(report.frames, n);
    report.id
}

fn csv_of(store: &SessionStore, id: i64) -> String {
    let mut out = Vec::new();
    store.export_csv(id, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn sessions_list_tag_rename_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let a = record_synthetic(&db, "first", 101);
    let b = record_synthetic(&db, "", 5);
    let mut store = SessionStore::open(&db).unwrap();

    let list = store.list(None).unwrap();
    assert_eq!(list.iter().map(|s| s.id).collect::<Vec<_>>(), [a, b]);
    assert_eq!(list[0].title, "first");
    assert_eq!(
        list[1].title,
        format!("Session {b}"),
        "an empty title gets a default"
    );
    assert_eq!(list[0].frames, 101);
    assert!((list[0].duration_s - 1.0).abs() < 1e-9, "{:?}", list[0]);
    assert!(list[0].ended_unix_ms.unwrap() >= list[0].started_unix_ms);

    assert_eq!(store.tag(a, " field test ").unwrap(), ["field test"]);
    assert_eq!(store.tag(a, "bench").unwrap(), ["bench", "field test"]);
    assert_eq!(store.tag(a, "bench").unwrap(), ["bench", "field test"]);
    let tagged = store.list(Some("bench")).unwrap();
    assert_eq!(tagged.len(), 1);
    assert_eq!(tagged[0].id, a);
    assert_eq!(store.untag(a, "bench").unwrap(), ["field test"]);
    assert!(store.list(Some("bench")).unwrap().is_empty());
    let bad = store.tag(a, "").unwrap_err();
    assert!(bad.to_string().contains("1 to 64 characters"), "{bad}");

    store.rename(b, "second").unwrap();
    assert_eq!(store.summary(b).unwrap().title, "second");
    assert!(store.rename(b, "  ").is_err());
    assert!(matches!(
        store.rename(12345, "x"),
        Err(SessionError::NotFound(12345))
    ));

    store.delete(a).unwrap();
    let left = store.list(None).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].id, b);
    let gone = store.get(a).unwrap_err();
    assert!(
        gone.to_string().contains(&format!("no session {a}")),
        "{gone}"
    );
    assert!(matches!(store.delete(a), Err(SessionError::NotFound(_))));
    // Every table that holds a session's rows, found from the schema (so a table added
    // later is checked too), is empty of the deleted one and still has the other's.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let tables: Vec<String> = conn
        .prepare(
            "SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c \
             WHERE m.type = 'table' AND c.name = 'session'",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(tables.len() >= 5, "{tables:?}");
    for table in &tables {
        let rows = |id: i64| -> i64 {
            conn.query_row(
                &format!("SELECT count(*) FROM {table} WHERE session = ?1"),
                [id],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(rows(a), 0, "a deleted session leaves no rows in {table}");
        if ["frame_blocks", "datasets"].contains(&table.as_str()) {
            assert!(rows(b) > 0, "the other session keeps its rows in {table}");
        }
    }
    store.vacuum().unwrap();
    assert_eq!(store.summary(b).unwrap().frames, 5);
}

#[test]
fn text_null_and_number_values_round_trip_through_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let id = record_synthetic(&db, "values", 3);
    let store = SessionStore::open(&db).unwrap();
    let mut back = Vec::new();
    store
        .for_each_frame(id, |t, source, v| {
            back.push((t.elapsed_ns, source, v.to_vec()));
            Ok(())
        })
        .unwrap();
    let width = datasets().len();
    for (i, (ns, source, v)) in back.iter().enumerate() {
        assert_eq!((*ns, *source), (i as u64 * 10_000_000, 0));
        assert_eq!(*v, values(i as u64, width));
    }
    // The same rows through the live CSV writer give the same text.
    let mut expected = Vec::new();
    let columns: Vec<String> = datasets().iter().map(|d| d.column()).collect();
    let mut w = sextant_telemetry::csv::CsvWriter::new(&mut expected, &columns).unwrap();
    for (ns, _, v) in &back {
        let t = Timestamp {
            elapsed_ns: *ns,
            unix_ns: 0,
        };
        w.write_row_ns(t.elapsed_ns, v).unwrap();
    }
    drop(w);
    assert_eq!(csv_of(&store, id), String::from_utf8(expected).unwrap());
    assert!(csv_of(&store, id).contains("\"row 1, \"\"quoted\"\"\",,"));

    let out = dir.path().join("export.csv");
    assert_eq!(store.export_csv_file(id, &out).unwrap(), 3);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), csv_of(&store, id));
}

#[test]
fn a_database_from_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let id = record_synthetic(&db, "old", 2);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
            [(sextant_sessions::SCHEMA_VERSION + 1).to_string()],
        )
        .unwrap();
    let e = SessionStore::open(&db).err().expect("refused");
    let text = e.to_string();
    assert!(matches!(e, SessionError::TooNew { .. }), "{e:?}");
    assert!(
        text.contains("newer Sextant")
            && text.contains(&format!(
                "schema version {}",
                sextant_sessions::SCHEMA_VERSION + 1
            )),
        "{text}"
    );
    let e = SessionWriter::start(&db, new_session("new"), WriterOptions::default())
        .err()
        .expect("refused");
    assert!(matches!(e, SessionError::TooNew { .. }), "{e:?}");
    let e = sextant_sessions::replay::SessionRecords::open(&db, id, 0)
        .err()
        .expect("refused");
    assert!(matches!(e, SessionError::TooNew { .. }), "{e:?}");

    // Somebody else's SQLite file, and a file that is not SQLite at all.
    let foreign = dir.path().join("other.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE customers (name TEXT);")
        .unwrap();
    let e = SessionStore::open(&foreign).err().expect("refused");
    assert!(
        e.to_string().contains("not a Sextant sessions database"),
        "{e}"
    );
    let garbage = dir.path().join("garbage.db");
    std::fs::write(
        &garbage,
        b"this is not a database, just some text padding it out....",
    )
    .unwrap();
    let e = SessionStore::open(&garbage).err().expect("refused");
    assert!(
        e.to_string()
            .contains("could not open the sessions database"),
        "{e}"
    );
    assert!(e.to_string().contains("not a database"), "{e}");
}

#[test]
fn a_flooded_writer_drops_and_counts_instead_of_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let writer = SessionWriter::start(
        &db,
        new_session("flood"),
        WriterOptions {
            queue: 256,
            batch_rows: 100,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    // Another connection holds the write lock: the writer cannot commit anything, so it is
    // as slow as a writer can be.
    let mut blocker = rusqlite::Connection::open(&db).unwrap();
    let lock = blocker
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let feed = writer.feed();
    let ds = datasets();
    feed.columns(&ds);
    let row = values(0, ds.len());
    const OFFERED: u64 = 100_000;
    let mut accepted = 0u64;
    for i in 0..OFFERED {
        let event = FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: i,
                unix_ns: 0,
            },
            values: &row,
        };
        accepted += feed.frame(&event) as u64;
    }
    let stats = writer.stats();
    // Every offer returned while the writer had committed nothing: the producer never
    // waited for it.
    assert_eq!(stats.commits.load(Ordering::Relaxed), 0);
    assert_eq!(stats.written_frames.load(Ordering::Relaxed), 0);
    let dropped = stats.dropped_frames.load(Ordering::Relaxed);
    assert_eq!(accepted + dropped, OFFERED);
    assert_eq!(stats.queued_frames.load(Ordering::Relaxed), accepted);
    assert!(dropped > OFFERED / 2, "dropped {dropped} of {OFFERED}");

    lock.rollback().unwrap();
    let report = writer.close().unwrap();
    assert_eq!(report.frames, accepted, "every accepted row is written");
    assert_eq!(report.dropped_frames, dropped);
    let summary = SessionStore::open(&db).unwrap().summary(report.id).unwrap();
    assert_eq!(summary.frames, accepted);
    assert_eq!(
        summary.dropped_frames, dropped,
        "the session says what it lost"
    );
}

/// A writer that cannot commit holds at most `queue_bytes` of raw data however few rows
/// that is, drops and counts the rest, and writes every byte it took, byte for byte.
#[test]
fn a_flooded_writer_caps_what_it_holds_in_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    const CAP: usize = 1 << 20;
    let writer = SessionWriter::start(
        &db,
        new_session("big reads"),
        WriterOptions {
            // Rows alone would let the whole flood in.
            queue: 1 << 20,
            queue_bytes: CAP,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let mut blocker = rusqlite::Connection::open(&db).unwrap();
    let lock = blocker
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    // Reads of 100 KiB, each cut from a buffer of 1 MiB that lives on: what the queue holds
    // is the chunk's bytes, not the buffer they share.
    let mut sink = writer.sink();
    let buffer = bytes::Bytes::from(
        (0..(1usize << 20))
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>(),
    );
    const OFFERED: usize = 200;
    let mut sent = Vec::new();
    for i in 0..OFFERED {
        let start = (i * 4099) % (buffer.len() - 100 * 1024);
        let chunk = Chunk {
            data: buffer.slice(start..start + 100 * 1024),
            timestamp: Timestamp {
                elapsed_ns: i as u64 * 1_000_000,
                unix_ns: 1_700_000_000_000_000_000 + i as i64 * 1_000_000,
            },
        };
        sink.chunk(0, &chunk);
        sent.push(chunk);
        sink.idle();
    }
    let stats = writer.stats();
    let queued = stats.queued_chunks.load(Ordering::Relaxed) as usize;
    let dropped = stats.dropped_chunks.load(Ordering::Relaxed) as usize;
    assert_eq!(queued + dropped, OFFERED);
    assert!(
        queued * 100 * 1024 <= CAP && queued >= 8,
        "{queued} chunks of 100 KiB queued under a cap of 1 MiB"
    );
    assert_eq!(stats.written_chunks.load(Ordering::Relaxed), 0);

    lock.rollback().unwrap();
    drop(sink);
    let report = writer.close().unwrap();
    assert_eq!(
        (report.chunks as usize, report.dropped_chunks as usize),
        (queued, dropped)
    );
    assert_eq!(report.bytes as usize, queued * 100 * 1024);
    // The chunks that went in are the first ones offered (the queue was empty then), whole
    // and in order.
    let mut records = sextant_sessions::SessionRecords::open(&db, report.id, 0).unwrap();
    assert_eq!(records.times().len(), queued);
    for (i, chunk) in sent.iter().take(queued).enumerate() {
        let (data, ts) = records.load(i).unwrap();
        assert_eq!(data, chunk.data, "chunk {i}");
        assert_eq!(ts.unix_ns, chunk.timestamp.unix_ns, "chunk {i}");
    }
}

/// A sink gathers rows into batches on the pipeline thread; what it holds goes on when the
/// pipeline has caught up, so a device that goes quiet has its last frames recorded
/// without waiting for the recording to stop.
#[test]
fn a_sinks_batch_goes_to_the_writer_when_the_pipeline_is_idle() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let writer = SessionWriter::start(&db, new_session("quiet"), WriterOptions::default()).unwrap();
    let mut sink = writer.sink();
    let ds = datasets();
    for i in 0..3u64 {
        let row = values(i, ds.len());
        sink.frame(
            &FrameEvent {
                source: 0,
                timestamp: Timestamp {
                    elapsed_ns: i,
                    unix_ns: 0,
                },
                values: &row,
            },
            &ds,
        );
    }
    std::thread::sleep(WriterOptions::default().batch_interval * 3);
    assert_eq!(
        writer.stats().written_frames.load(Ordering::Relaxed),
        0,
        "three frames wait in the sink's batch until the pipeline pauses"
    );
    sink.idle();
    let end = Instant::now() + Duration::from_secs(10);
    while writer.stats().written_frames.load(Ordering::Relaxed) < 3 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(writer.stats().written_frames.load(Ordering::Relaxed), 3);
    let row = values(3, ds.len());
    sink.frame(
        &FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: 3,
                unix_ns: 0,
            },
            values: &row,
        },
        &ds,
    );
    // A recording stopped drops its sink: what it held is written before the end.
    drop(sink);
    let report = writer.close().unwrap();
    assert_eq!(report.frames, 4);
    let csv = csv_of(&SessionStore::open(&db).unwrap(), report.id);
    assert!(csv.contains("row 3, \"\"quoted\"\""), "{csv}");
}

#[test]
fn a_session_survives_reopening_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let id = record_synthetic(&db, "durable", 250);
    let expected = csv_of(&SessionStore::open(&db).unwrap(), id);
    // Every connection is closed: the WAL has been checkpointed into the main file.
    assert!(!dir.path().join("sessions.db-wal").exists());
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    let store = SessionStore::open(&copy).unwrap();
    let s = store.summary(id).unwrap();
    assert_eq!((s.title.as_str(), s.frames), ("durable", 250));
    assert_eq!(csv_of(&store, id), expected);
    assert_eq!(store.project(id).unwrap(), demo_project());
}

#[test]
fn dropping_a_writer_mid_session_keeps_what_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let writer = SessionWriter::start(
        &db,
        new_session("abandoned"),
        WriterOptions {
            batch_rows: 50,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let id = writer.id();
    let feed = writer.feed();
    let ds = datasets();
    feed.columns(&ds);
    let row = values(7, ds.len());
    let mut i = 0u64;
    let end = Instant::now() + Duration::from_secs(10);
    while writer.stats().written_frames.load(Ordering::Relaxed) < 200 && Instant::now() < end {
        feed.frame(&FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: i,
                unix_ns: 0,
            },
            values: &row,
        });
        i += 1;
        std::thread::sleep(Duration::from_micros(100));
    }
    let committed = writer.stats().written_frames.load(Ordering::Relaxed);
    assert!(committed >= 200);
    drop(writer);
    // The producer side may outlive the writer (a sink still in a pipeline): harmless.
    feed.frame(&FrameEvent {
        source: 0,
        timestamp: Timestamp::default(),
        values: &row,
    });
    drop(feed);

    let store = SessionStore::open(&db).unwrap();
    // The abandoned writer's thread outlives the drop and commits the batch it holds: read
    // once it has (the session stops growing), or the two reads may see two states.
    let settled = Instant::now() + Duration::from_secs(10);
    let (s, rows) = loop {
        let s = store.summary(id).unwrap();
        let rows = store.for_each_frame(id, |_, _, _| Ok(())).unwrap();
        let again = store.summary(id).unwrap();
        if (again.frames == s.frames && rows == s.frames) || Instant::now() > settled {
            break (s, rows);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(s.ended_unix_ms, None, "an abandoned recording has no end");
    assert!(s.frames >= committed, "{} < {committed}", s.frames);
    assert_eq!(rows, s.frames, "the counters match the committed rows");
}

/// Set for the child process of the crash test: the database to record into until killed.
const CRASH_DB: &str = "SEXTANT_SESSIONS_CRASH_DB";

/// The child half of `a_recorder_killed_mid_session_leaves_a_readable_database`: the same
/// test binary, re-run with `CRASH_DB` set, records until the parent kills it.
fn crash_child_records_until_killed(db: std::ffi::OsString) {
    let writer = SessionWriter::start(
        Path::new(&db),
        new_session("killed"),
        WriterOptions {
            batch_rows: 20,
            batch_interval: Duration::from_millis(20),
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let feed = writer.feed();
    let ds = datasets();
    feed.columns(&ds);
    for i in 0.. {
        let row = values(i, ds.len());
        feed.chunk(
            0,
            &sextant_telemetry::Chunk {
                data: format!("{i}\n").into_bytes().into(),
                timestamp: Timestamp {
                    elapsed_ns: i * 1_000_000,
                    unix_ns: 0,
                },
            },
        );
        feed.frame(&FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: i * 1_000_000,
                unix_ns: 0,
            },
            values: &row,
        });
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_recorder_killed_mid_session_leaves_a_readable_database() {
    if let Some(db) = std::env::var_os(CRASH_DB) {
        // We are the child the test below spawned.
        crash_child_records_until_killed(db);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_recorder_killed_mid_session_leaves_a_readable_database",
        ])
        .env(CRASH_DB, &db)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until a few batches are committed, then kill it mid-batch (SIGKILL: no unwinding,
    // no destructors, no final commit).
    let end = Instant::now() + Duration::from_secs(30);
    let committed = loop {
        // Open only once the child has created the file and switched it to WAL (the -wal
        // file exists from then on), so the two never race to create the schema.
        let ready = dir.path().join("sessions.db-wal").exists();
        let frames = ready
            .then(|| SessionStore::open(&db).ok())
            .flatten()
            .and_then(|s| s.list(None).ok())
            .and_then(|l| l.first().map(|s| s.frames))
            .unwrap_or(0);
        if frames >= 100 || Instant::now() > end {
            break frames;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(committed >= 100, "the child committed {committed} frames");

    let store = SessionStore::open(&db).unwrap();
    let list = store.list(None).unwrap();
    assert_eq!(list.len(), 1);
    let s = &list[0];
    assert_eq!(s.title, "killed");
    assert_eq!(s.ended_unix_ms, None);
    assert!(s.frames >= committed);
    assert_eq!(
        store.for_each_frame(s.id, |_, _, _| Ok(())).unwrap(),
        s.frames
    );
    let csv = csv_of(&store, s.id);
    assert_eq!(csv.lines().count() as u64, s.frames + 1);
    // Raw chunks and frames were committed in the same transactions.
    let chunks: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT (SELECT count(*) FROM chunks) + (SELECT coalesce(sum(chunk_count), 0) FROM chunk_blocks)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(chunks as u64, s.chunks);
    assert!(s.chunks.abs_diff(s.frames) <= 1, "{s:?}");
    // Every committed chunk replays, in order, with its bytes and time.
    let mut records = sextant_sessions::SessionRecords::open(&db, s.id, 0).unwrap();
    assert_eq!(records.times().len() as u64, s.chunks);
    for i in 0..records.times().len() {
        let (bytes, t) = records.load(i).unwrap();
        assert_eq!(&bytes[..], format!("{i}\n").as_bytes());
        assert_eq!(t.elapsed_ns, i as u64 * 1_000_000);
    }
    let integrity: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
}

/// The tables as Sextant wrote them before schema version 2 (one row per frame and per
/// chunk), to make the file an older build left behind.
const SCHEMA_V1: &str = r#"
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, started_unix_ns INTEGER NOT NULL,
    ended_unix_ns INTEGER, project TEXT NOT NULL, first_elapsed_ns INTEGER,
    last_elapsed_ns INTEGER, chunk_count INTEGER NOT NULL DEFAULT 0,
    byte_count INTEGER NOT NULL DEFAULT 0, frame_count INTEGER NOT NULL DEFAULT 0,
    dropped_chunks INTEGER NOT NULL DEFAULT 0, dropped_frames INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE session_tags (
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tag TEXT NOT NULL, PRIMARY KEY (session, tag)
) WITHOUT ROWID;
CREATE TABLE datasets (
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    position INTEGER NOT NULL, dataset_id TEXT NOT NULL, column_name TEXT NOT NULL,
    units TEXT NOT NULL, PRIMARY KEY (session, position)
) WITHOUT ROWID;
CREATE TABLE chunks (
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    source INTEGER NOT NULL, elapsed_ns INTEGER NOT NULL, unix_ns INTEGER NOT NULL,
    bytes BLOB NOT NULL
);
CREATE INDEX chunks_by_source ON chunks (session, source);
CREATE TABLE frames (
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    elapsed_ns INTEGER NOT NULL, source INTEGER NOT NULL, vals BLOB NOT NULL
);
CREATE INDEX frames_by_session ON frames (session);
INSERT INTO meta VALUES ('schema_version', '1');
"#;

#[test]
fn a_version_1_file_reads_as_before_and_records_new_sessions_in_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let ds = datasets();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(SCHEMA_V1).unwrap();
        conn.execute(
            "INSERT INTO sessions (id, title, started_unix_ns, project, first_elapsed_ns, \
             last_elapsed_ns, chunk_count, byte_count, frame_count) \
             VALUES (1, 'old', 0, ?1, 5000000000, 5020000000, 3, 9, 3)",
            [demo_project().to_json_string()],
        )
        .unwrap();
        for (i, d) in ds.iter().enumerate() {
            conn.execute(
                "INSERT INTO datasets VALUES (1, ?1, ?2, ?3, ?4)",
                rusqlite::params![i as i64, d.id, d.column(), d.units],
            )
            .unwrap();
        }
        for i in 0..3u64 {
            let t = 5_000_000_000 + i * 10_000_000;
            conn.execute(
                "INSERT INTO chunks VALUES (1, 0, ?1, ?2, ?3)",
                rusqlite::params![
                    t as i64,
                    1_700_000_000_000_000_000i64 + t as i64,
                    format!("c{i}\n").into_bytes()
                ],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO frames VALUES (1, ?1, 0, ?2)",
                rusqlite::params![
                    t as i64,
                    sextant_sessions::codec::encode(&values(i, ds.len()))
                ],
            )
            .unwrap();
        }
    }
    // The new session is recorded by this build, into the same file, after the old one.
    let new = record_synthetic(&db, "new", 2_500);
    let store = SessionStore::open(&db).unwrap();
    let version: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, sextant_sessions::SCHEMA_VERSION.to_string());

    // The old session: its rows, its CSV, its sources and its replay, as a v1 build read them.
    let old = store.get(1).unwrap();
    assert_eq!((old.summary.frames, old.summary.chunks), (3, 3));
    assert_eq!(
        old.sources,
        vec![sextant_sessions::SourceSummary {
            index: 0,
            chunks: 3,
            bytes: 9
        }]
    );
    let csv = csv_of(&store, 1);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4, "{csv}");
    assert!(
        lines[1].starts_with("0.000000,\"row 0, \"\"quoted\"\"\",,2,"),
        "{csv}"
    );
    assert!(lines[3].starts_with("0.020000,\"row 2, "), "{csv}");
    let mut records = sextant_sessions::SessionRecords::open(&db, 1, 0).unwrap();
    assert_eq!(records.times(), [0, 10_000_000, 20_000_000]);
    let (bytes, t) = records.load(2).unwrap();
    assert_eq!((&bytes[..], t.elapsed_ns), (&b"c2\n"[..], 20_000_000));

    // The new session went into blocks, not rows, and reads back whole.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [new], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT count(*) FROM frames WHERE session = ?1"), 0);
    let blocks = count("SELECT count(*) FROM frame_blocks WHERE session = ?1");
    assert!(
        (3..=10).contains(&blocks),
        "2 500 frames in {blocks} blocks"
    );
    assert_eq!(
        count("SELECT sum(frame_count) FROM frame_blocks WHERE session = ?1"),
        2_500
    );
    let mut seen = 0u64;
    store
        .for_each_frame(new, |t, source, v| {
            assert_eq!((t.elapsed_ns, source), (seen * 10_000_000, 0));
            assert_eq!(v, values(seen, ds.len()));
            seen += 1;
            Ok(())
        })
        .unwrap();
    assert_eq!(seen, 2_500);
    assert_eq!(csv_of(&store, new).lines().count(), 2_501);
}

/// A message source recorded into a session replays one message a read, as it was live:
/// each of `fixtures/messages/`'s captures is played through a replay source into a wiring
/// that exports CSV and records the session; then the session's chunks, loaded block by
/// block, go through a fresh pipeline. Both that and the session's own CSV export equal the
/// live CSV, byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sources_session_replays_one_message_a_read() {
    use sextant_devices::message_replay::MessageReplayDriver;
    use sextant_devices::replay::ReplayControl;
    use sextant_devices::wiring::{CsvSink, Wiring, WiringOptions};
    use sextant_devices::{Reconnect, RunOptions, Source, Status};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/messages");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 2, "{cases:?}");
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let project = sextant_telemetry::Project::load(&case.join("project.json")).unwrap();
        let live = dir.path().join(format!("{name}-live.csv"));
        let writer = SessionWriter::start(
            &db,
            NewSession {
                title: name.clone(),
                project: project.clone(),
                tags: Vec::new(),
            },
            WriterOptions::default(),
        )
        .unwrap();
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
            vec![Box::new(CsvSink::new(&live)), Box::new(writer.sink())],
            WiringOptions::default(),
        );
        h.wait_for(|s| *s == Status::Finished).await;
        h.close().await;
        wiring.join();
        let report = writer.close().unwrap();
        let live = std::fs::read_to_string(&live).unwrap();
        assert!(live.lines().count() > 3, "{name}: {live}");

        let store = SessionStore::open(&db).unwrap();
        assert_eq!(
            csv_of(&store, report.id),
            live,
            "{name}: the session's export"
        );
        let mut records = sextant_sessions::SessionRecords::open(&db, report.id, 0).unwrap();
        let messages = std::fs::read_to_string(case.join("capture.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count();
        assert_eq!(
            records.times().len(),
            messages,
            "{name}: one chunk per message"
        );
        let mut pipeline = Pipeline::new(&project).unwrap();
        let columns: Vec<String> = pipeline.datasets().iter().map(|d| d.column()).collect();
        let mut out = sextant_telemetry::csv::CsvWriter::new(Vec::new(), &columns).unwrap();
        for i in 0..records.times().len() {
            let (bytes, t) = records.load(i).unwrap();
            pipeline.push(0, t, &bytes, &mut |ev| {
                out.write_row_ns(ev.timestamp.elapsed_ns, ev.values)
                    .unwrap();
            });
        }
        out.flush().unwrap();
        let replayed = String::from_utf8(out.into_inner().unwrap()).unwrap();
        assert_eq!(replayed, live, "{name}: the session replayed");
    }
}

/// A long range read in shares, one after another in the shares' order, is the same walk
/// as the whole range at once: every frame once, in recorded order, for the whole session
/// and for a range inside it; a short range is one share.
#[test]
fn shares_of_a_range_walk_every_frame_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let id = record_synthetic(&db, "long", 40_000);
    let store = SessionStore::open(&db).unwrap();
    let wanted = [0, 1, 2, 5];
    let walk = |from: f64, to: f64, share: Option<&sextant_sessions::Share>| {
        let mut seen = Vec::new();
        let mut collect = |t: f64, cells: &[sextant_sessions::codec::Cell]| {
            seen.push((t, cells.to_vec()));
            Ok(())
        };
        match share {
            Some(s) => store.for_each_cells_in_share(id, from, to, s, &wanted, &mut collect),
            None => store.for_each_cells_between(id, from, to, &wanted, &mut collect),
        }
        .unwrap();
        seen
    };
    for (from, to, most, want_shares) in [
        (0.0, f64::INFINITY, 4, 2..=4),
        (0.0, f64::INFINITY, 2, 2..=2),
        (100.0, 300.0, 4, 1..=2),
        (0.0, f64::INFINITY, 1, 1..=1),
        (10.0, 20.0, 4, 1..=1),
    ] {
        let shares = store.shares(id, from, to, most).unwrap();
        assert!(
            want_shares.contains(&shares.len()),
            "{from}..{to} in at most {most}: {} shares",
            shares.len()
        );
        let whole = walk(from, to, None);
        let pieces: Vec<_> = shares
            .iter()
            .flat_map(|s| {
                let piece = walk(from, to, Some(s));
                assert!(
                    !piece.is_empty(),
                    "{from}..{to}: an empty share of {shares:?}"
                );
                piece
            })
            .collect();
        assert_eq!(pieces.len(), whole.len(), "{from}..{to}");
        assert!(
            pieces == whole,
            "{from}..{to}: the shares walk another order"
        );
        let expected = if to.is_finite() {
            ((to - from) * 100.0).round() as usize + 1
        } else {
            40_000
        };
        assert_eq!(whole.len(), expected, "{from}..{to}");
    }
}
