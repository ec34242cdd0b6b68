//! The recorder of a live run starts and stops between chunks: a chunk is recorded with
//! every frame cut from it, or neither is – whenever the person presses the button, while
//! the pipeline thread is in the middle of a chunk.

use std::time::Duration;

use bytes::Bytes;
use sextant_devices::simulator::demo_project;
use sextant_sessions::{Recorder, WriterOptions};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::{Chunk, FrameEvent, FrameSink, Pipeline, Timestamp, Value};

fn at(i: u64) -> Timestamp {
    Timestamp {
        elapsed_ns: i * 1_000_000,
        unix_ns: 1_700_000_000_000_000_000 + (i * 1_000_000) as i64,
    }
}

fn chunk(i: u64) -> Chunk {
    Chunk {
        data: Bytes::from(format!("chunk {i}\n")),
        timestamp: at(i),
    }
}

struct Run {
    sink: sextant_sessions::recorder::RecorderSink,
    datasets: Vec<DatasetInfo>,
}

impl Run {
    fn frame(&mut self, i: u64) {
        let values = vec![Value::Number(i as f64); self.datasets.len()];
        self.sink.frame(
            &FrameEvent {
                source: 0,
                timestamp: at(i),
                values: &values,
            },
            &self.datasets,
        );
    }
}

fn run(recorder: &Recorder) -> Run {
    Run {
        sink: recorder.sink(),
        datasets: Pipeline::new(&demo_project()).unwrap().datasets().to_vec(),
    }
}

#[test]
fn a_stop_pressed_mid_chunk_waits_for_the_chunks_frames() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let recorder = Recorder::new(demo_project());
    let mut run = run(&recorder);
    recorder
        .record(&db, "edge", Vec::new(), WriterOptions::default())
        .unwrap();

    run.sink.chunk(0, &chunk(0));
    run.frame(0);
    run.sink.idle();
    run.sink.chunk(0, &chunk(1));
    run.frame(1);
    let stopper = std::thread::spawn({
        let recorder = recorder.clone();
        move || recorder.stop()
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !stopper.is_finished(),
        "the stop waits while the pipeline is on a recorded chunk"
    );
    run.frame(2);
    run.sink.idle();
    let writer = stopper.join().unwrap().expect("it was recording");
    run.sink.chunk(0, &chunk(3));
    run.frame(3);
    let report = writer.close().unwrap();
    assert_eq!((report.chunks, report.frames), (2, 3), "{report:?}");
}

#[test]
fn a_recording_started_mid_chunk_begins_at_the_next_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let recorder = Recorder::new(demo_project());
    let mut run = run(&recorder);

    run.sink.chunk(0, &chunk(0));
    run.frame(0);
    recorder
        .record(&db, "edge", Vec::new(), WriterOptions::default())
        .unwrap();
    run.frame(1);
    run.sink.chunk(0, &chunk(2));
    run.frame(2);
    run.frame(3);
    run.sink.idle();
    // Between chunks (the pipeline paused), a stop does not wait.
    let writer = recorder.stop().expect("it was recording");
    run.sink.chunk(0, &chunk(4));
    run.frame(4);
    let report = writer.close().unwrap();
    assert_eq!((report.chunks, report.frames), (1, 2), "{report:?}");
}

/// A recording that replaces another mid-chunk gives the chunk and its frames to the one
/// that recorded the chunk.
#[test]
fn a_recording_replaced_mid_chunk_keeps_the_chunk_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let recorder = Recorder::new(demo_project());
    let mut run = run(&recorder);
    recorder
        .record(&db, "first", Vec::new(), WriterOptions::default())
        .unwrap();
    run.sink.chunk(0, &chunk(0));
    run.frame(0);
    let second = sextant_sessions::SessionWriter::start(
        &db,
        sextant_sessions::NewSession {
            title: "second".into(),
            project: demo_project(),
            tags: Vec::new(),
        },
        WriterOptions::default(),
    )
    .unwrap();
    let starter = std::thread::spawn({
        let recorder = recorder.clone();
        move || recorder.start(second)
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(!starter.is_finished());
    run.frame(1);
    run.sink.idle();
    let first = starter.join().unwrap().expect("the first was recording");
    run.sink.chunk(0, &chunk(2));
    run.frame(2);
    run.sink.idle();
    let second = recorder.stop().unwrap();
    let first = first.close().unwrap();
    let second = second.close().unwrap();
    assert_eq!((first.chunks, first.frames), (1, 2), "{first:?}");
    assert_eq!((second.chunks, second.frames), (1, 1), "{second:?}");
}
