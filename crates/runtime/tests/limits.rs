//! The runtime's caps, pushed past: undo history, checkpoints, and the live tail (frames
//! and each source's raw bytes) keep exactly their newest entries and drop the oldest;
//! text handed to `project.openContent` and the CSV `sessions.csv` hands over are refused
//! one byte past their cap, naming it, and taken at it.

use bytes::Bytes;
use serde_json::{json, Value};
use sextant_commands::{CommandError, ErrorCode, Policy};
use sextant_runtime::commands::{MAX_DOWNLOAD_BYTES, MAX_OPEN_CONTENT_BYTES};
use sextant_runtime::tail::{Tail, TAIL_BYTES, TAIL_FRAMES};
use sextant_runtime::{Caller, Runtime, Workspace, CHECKPOINT_LIMIT, UNDO_LIMIT};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::project::Project;
use sextant_telemetry::{Chunk, FrameEvent, FrameSink, Timestamp};

/// A user who approved every edit they were asked about.
fn edits() -> Policy {
    Policy {
        auto_approve_edits: true,
        ..Policy::default()
    }
}

fn call(rt: &mut Runtime, name: &str, params: Value) -> Value {
    rt.execute(Caller::Assistant, name, params.clone(), edits(), false)
        .unwrap_or_else(|e| panic!("{name} {params}: {e:?}"))
}

fn group_titles(rt: &Runtime) -> Vec<String> {
    rt.workspace
        .project()
        .groups
        .iter()
        .map(|g| g.title.clone())
        .collect()
}

#[test]
fn undo_reaches_back_exactly_undo_limit_edits_then_refuses() {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    let made = UNDO_LIMIT + 10;
    for i in 0..made {
        call(
            &mut rt,
            "project.group.add",
            json!({"title": format!("G{i}")}),
        );
    }
    assert_eq!(rt.workspace.project().groups.len(), made);
    let history = call(&mut rt, "project.history", json!({}));
    assert_eq!(history["undo"].as_array().unwrap().len(), UNDO_LIMIT);

    let mut undone = 0;
    let refusal = loop {
        match rt.execute(Caller::Assistant, "project.undo", json!({}), edits(), false) {
            Ok(_) => undone += 1,
            Err(e) => break e,
        }
        assert!(undone <= made, "undo was never refused");
    };
    assert_eq!(
        undone, UNDO_LIMIT,
        "exactly the newest UNDO_LIMIT edits undo"
    );
    assert_eq!(refusal.code, ErrorCode::Failed, "{refusal:?}");
    assert!(
        refusal.message.contains("nothing to undo"),
        "the refusal says why: {refusal:?}"
    );
    // The 10 oldest edits fell out of the history: their groups stay.
    let oldest: Vec<String> = (0..made - UNDO_LIMIT).map(|i| format!("G{i}")).collect();
    assert_eq!(group_titles(&rt), oldest);
    let history = call(&mut rt, "project.history", json!({}));
    assert_eq!(history["undo"], json!([]));
    assert_eq!(history["redo"].as_array().unwrap().len(), UNDO_LIMIT);
}

#[test]
fn only_the_newest_checkpoint_limit_checkpoints_are_kept() {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    let taken = CHECKPOINT_LIMIT + 5;
    let ids: Vec<u64> = (0..taken)
        .map(|i| {
            call(
                &mut rt,
                "assistant.checkpoint",
                json!({"label": format!("cp {i}")}),
            )["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let listed = call(&mut rt, "assistant.listCheckpoints", json!({}));
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), CHECKPOINT_LIMIT);
    let listed_ids: Vec<u64> = listed.iter().map(|c| c["id"].as_u64().unwrap()).collect();
    assert_eq!(listed_ids, ids[taken - CHECKPOINT_LIMIT..], "oldest first");
    let labels: Vec<&str> = listed
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (taken - CHECKPOINT_LIMIT..taken)
        .map(|i| format!("cp {i}"))
        .collect();
    assert_eq!(labels, expected);

    // A dropped checkpoint is gone, not just hidden from the list.
    let e = rt
        .execute(
            Caller::Assistant,
            "assistant.restore",
            json!({"id": ids[0]}),
            edits(),
            true,
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{e:?}");
    // A Confirm-tier call that changes nothing (an undo with nothing to undo) takes a
    // checkpoint and drops it again.
    let refused = rt
        .execute(Caller::Assistant, "project.undo", json!({}), edits(), true)
        .unwrap_err();
    assert!(refused.message.contains("nothing to undo"), "{refused:?}");
    // That refused call took a checkpoint and dropped it (it changed nothing): the ring,
    // full, still holds the same fifty – a call that changes nothing costs none of them.
    let after = call(&mut rt, "assistant.listCheckpoints", json!({}));
    let after_ids: Vec<u64> = after
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        after_ids, listed_ids,
        "a call that changed nothing cost a checkpoint"
    );
}

fn frame(sink: &mut impl FrameSink, i: usize, datasets: &[DatasetInfo]) {
    let values = [sextant_telemetry::Value::Number(i as f64)];
    sink.frame(
        &FrameEvent {
            source: 0,
            timestamp: Timestamp {
                elapsed_ns: i as u64 * 1_000_000,
                unix_ns: 0,
            },
            values: &values,
        },
        datasets,
    );
}

#[test]
fn the_tail_keeps_the_newest_tail_frames_frames() {
    let tail = Tail::default();
    let mut sink = tail.sink();
    let datasets = vec![DatasetInfo {
        id: "d".into(),
        title: "D".into(),
        group: "G".into(),
        units: String::new(),
        source: Some(0),
        slot: Some(0),
    }];
    let pushed = TAIL_FRAMES + 10;
    for i in 0..pushed {
        frame(&mut sink, i, &datasets);
    }
    let (columns, frames) = tail.last(usize::MAX);
    assert_eq!(columns, datasets);
    assert_eq!(frames.len(), TAIL_FRAMES);
    let values: Vec<f64> = frames.iter().map(|(_, v)| v[0].as_f64().unwrap()).collect();
    let expected: Vec<f64> = (pushed - TAIL_FRAMES..pushed).map(|i| i as f64).collect();
    assert_eq!(values, expected, "the newest, oldest first");
    assert_eq!(frames[0].0, (pushed - TAIL_FRAMES) as f64 / 1000.0);
    let (_, newest) = tail.last(3);
    let newest: Vec<f64> = newest.iter().map(|(_, v)| v[0].as_f64().unwrap()).collect();
    assert_eq!(newest, expected[TAIL_FRAMES - 3..]);
}

fn chunk(data: Vec<u8>) -> Chunk {
    Chunk {
        data: Bytes::from(data),
        timestamp: Timestamp::default(),
    }
}

#[test]
fn the_tail_keeps_the_newest_tail_bytes_of_each_source() {
    let tail = Tail::default();
    let mut sink = tail.sink();
    // Source 0: many small chunks, past the cap; a byte's value follows its position.
    let all: Vec<u8> = (0..TAIL_BYTES + 1000).map(|k| (k % 251) as u8).collect();
    for piece in all.chunks(100) {
        sink.chunk(0, &chunk(piece.to_vec()));
    }
    // Source 2: a little, then one chunk bigger than the cap by itself.
    sink.chunk(2, &chunk(b"old".to_vec()));
    let big: Vec<u8> = (0..TAIL_BYTES + 7).map(|k| (k % 13) as u8 + 100).collect();
    sink.chunk(2, &chunk(big.clone()));

    assert_eq!(tail.recent_bytes(0), all[all.len() - TAIL_BYTES..]);
    assert_eq!(tail.recent_bytes(2), big[big.len() - TAIL_BYTES..]);
    assert!(tail.recent_bytes(1).is_empty(), "sources are kept apart");

    // A ring that is full takes a small chunk by dropping exactly as many old bytes.
    sink.chunk(0, &chunk(vec![0xEE; 5]));
    let now = tail.recent_bytes(0);
    assert_eq!(now.len(), TAIL_BYTES);
    assert_eq!(now[..TAIL_BYTES - 5], all[all.len() - TAIL_BYTES + 5..]);
    assert_eq!(now[TAIL_BYTES - 5..], [0xEE; 5]);
}

/// Runs a command whose params or answer are megabytes: a failure names the command, not
/// the whole text.
fn run(rt: &mut Runtime, name: &str, params: Value) -> Result<Value, CommandError> {
    rt.execute(Caller::Ui, name, params, edits(), true)
}

#[test]
fn open_content_one_byte_past_its_cap_is_refused_naming_it_and_at_the_cap_opens() {
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    call(&mut rt, "project.setTitle", json!({"title": "Padded"}));
    let text = rt.workspace.project().to_json_string();
    call(&mut rt, "project.new", json!({}));
    assert!(text.len() < MAX_OPEN_CONTENT_BYTES);
    // A real project, padded with JSON whitespace to exactly the cap.
    let mut at_cap = text.clone();
    at_cap.push_str(&" ".repeat(MAX_OPEN_CONTENT_BYTES - text.len()));
    assert_eq!(at_cap.len(), MAX_OPEN_CONTENT_BYTES);
    let mut over = at_cap.clone();
    over.push(' ');

    let e = run(
        &mut rt,
        "project.openContent",
        json!({"name": "big.json", "content": over}),
    )
    .expect_err("one byte over the cap was taken");
    assert_eq!(e.code, ErrorCode::InvalidParams, "{e:?}");
    assert_eq!(e.path.as_deref(), Some("content"), "{e:?}");
    assert!(
        e.message
            .contains(&format!("over {} MiB", MAX_OPEN_CONTENT_BYTES >> 20)),
        "the refusal names the cap: {e:?}"
    );
    assert_eq!(
        rt.workspace.project().title,
        "Untitled",
        "the open project stays"
    );

    let opened = run(
        &mut rt,
        "project.openContent",
        json!({"name": "big.json", "content": at_cap}),
    )
    .unwrap_or_else(|e| panic!("exactly at the cap was refused: {e:?}"));
    assert_eq!(opened["ok"], true, "{opened}");
    assert_eq!(rt.workspace.project().title, "Padded");
}

/// Records a session whose CSV export is exactly `bytes` long: one text column, every row
/// at `elapsed_s` 0, texts of 64 KiB and a last one that makes up the rest.
fn session_with_csv_of(db: &std::path::Path, bytes: usize) -> i64 {
    use sextant_sessions::{NewSession, SessionWriter, WriterOptions};
    use sextant_telemetry::Value as Cell;
    let writer = SessionWriter::start(
        db,
        NewSession {
            title: format!("{bytes} bytes"),
            project: Project::default(),
            tags: Vec::new(),
        },
        // Fed faster than it writes: the queue holds the whole CSV's worth of text.
        WriterOptions {
            queue_bytes: 1 << 40,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let feed = writer.feed();
    let column = DatasetInfo {
        id: "t".into(),
        title: "T".into(),
        group: "G".into(),
        units: String::new(),
        source: Some(0),
        slot: Some(0),
    };
    feed.columns(std::slice::from_ref(&column));
    let header = "elapsed_s,G/T\n".len();
    // `0.000000,` + the text + `\n`; plain letters are never quoted.
    let row = |text: usize| "0.000000,".len() + text + 1;
    const TEXT: usize = 64 << 10;
    let mut left = bytes - header;
    let mut texts = Vec::new();
    while left > 0 {
        let text = if left >= row(TEXT) + row(0) {
            TEXT
        } else {
            left - row(0)
        };
        texts.push(text);
        left -= row(text);
    }
    for &text in &texts {
        let values = [Cell::Text("x".repeat(text))];
        assert!(feed.frame(&FrameEvent {
            source: 0,
            timestamp: Timestamp::default(),
            values: &values,
        }));
    }
    let id = writer.id();
    drop(feed);
    let report = writer.close().unwrap();
    assert_eq!(report.frames, texts.len() as u64, "{report:?}");
    assert_eq!(report.dropped_frames, 0, "{report:?}");
    id
}

#[test]
fn a_session_csv_one_byte_past_its_cap_is_refused_naming_it_and_at_the_cap_is_handed_over() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.sqlite");
    let at_cap = session_with_csv_of(&db, MAX_DOWNLOAD_BYTES);
    let over = session_with_csv_of(&db, MAX_DOWNLOAD_BYTES + 1);
    let mut rt = Runtime::new(Workspace::new(Project::default()));
    run(&mut rt, "sessions.setDatabase", json!({"path": db})).unwrap();

    // Both doors a page downloads through hold the same cap.
    for (command, params) in [
        ("sessions.csv", json!({"id": over})),
        ("sessions.download", json!({"id": over, "format": "csv"})),
    ] {
        let e =
            run(&mut rt, command, params).expect_err("a CSV one byte over the cap was handed over");
        assert_eq!(e.code, ErrorCode::Failed, "{command}: {e:?}");
        assert!(
            e.message
                .contains(&format!("over {} MiB", MAX_DOWNLOAD_BYTES >> 20)),
            "the refusal names the cap: {e:?}"
        );
        assert!(
            e.message.contains("export it to a file"),
            "and the way out: {e:?}"
        );
    }
    // The way out works: the same session exports to a file, one byte over the cap.
    let file = dir.path().join("over.csv");
    let exported = run(
        &mut rt,
        "sessions.exportCsv",
        json!({"id": over, "path": file}),
    )
    .unwrap();
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        MAX_DOWNLOAD_BYTES as u64 + 1,
        "{exported}"
    );

    let download = run(&mut rt, "sessions.csv", json!({"id": at_cap}))
        .unwrap_or_else(|e| panic!("a CSV exactly at the cap was refused: {e:?}"));
    let csv = download["csv"].as_str().unwrap();
    assert_eq!(csv.len(), MAX_DOWNLOAD_BYTES);
    assert!(csv.starts_with("elapsed_s,G/T\n0.000000,xxx"));
    assert!(csv.ends_with("xxx\n"));
    assert_eq!(download["rows"], csv.lines().count() as u64 - 1);
    let file = run(
        &mut rt,
        "sessions.download",
        json!({"id": at_cap, "format": "csv"}),
    )
    .unwrap_or_else(|e| panic!("a file exactly at the cap was refused: {e:?}"));
    assert_eq!(file["size"], MAX_DOWNLOAD_BYTES as u64);
}
