//! The runtime's caps, pushed past: undo history, checkpoints, and the live tail (frames
//! and each source's raw bytes) keep exactly their newest entries and drop the oldest.

use bytes::Bytes;
use serde_json::{json, Value};
use sextant_commands::{ErrorCode, Policy};
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
