//! Framing cases from fixtures/telemetry/framing.json: each is checked as one chunk, byte by
//! byte, and split in two at every position — a frame must never depend on how reads fell.

mod common;

use sextant_telemetry::framing::{Framer, FramerConfig};
use sextant_telemetry::project::Framing;

struct Outcome {
    frames: Vec<Vec<u8>>,
    oversize: u64,
    checksum_failed: u64,
    discarded: u64,
}

fn run(config: &FramerConfig, chunks: &[Vec<u8>]) -> Outcome {
    let mut framer = Framer::new(config.clone());
    let mut frames = Vec::new();
    for c in chunks {
        framer.push(c, &mut |f| frames.push(f.to_vec()));
        assert!(
            framer.pending() <= config.max_frame_bytes + 16,
            "buffer must stay bounded, holds {}",
            framer.pending()
        );
    }
    let s = framer.stats();
    assert_eq!(s.frames as usize, frames.len(), "frame counter");
    Outcome {
        frames,
        oversize: s.oversize_dropped,
        checksum_failed: s.checksum_failed,
        discarded: s.bytes_discarded,
    }
}

#[test]
fn framing_cases() {
    let cases = common::load_json("telemetry/framing.json");
    for case in cases.as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let framing: Framing = serde_json::from_value(case["framing"].clone()).unwrap();
        let config = FramerConfig::from_project(&framing).unwrap();
        let chunks: Vec<Vec<u8>> = case["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| common::bytes_of(c.as_str().unwrap()))
            .collect();
        let want: Vec<Vec<u8>> = case["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| common::bytes_of(c.as_str().unwrap()))
            .collect();
        let want_over = case["oversize"].as_u64().unwrap();
        let want_crc = case["checksum_failed"].as_u64().unwrap();
        let check = |how: &str, got: &Outcome| {
            assert_eq!(got.frames, want, "{name} ({how}): frames");
            assert_eq!(got.oversize, want_over, "{name} ({how}): oversize counter");
            assert_eq!(
                got.checksum_failed, want_crc,
                "{name} ({how}): checksum counter"
            );
        };
        let given = run(&config, &chunks);
        check("as given", &given);
        if !case["split_invariant"].as_bool().unwrap() {
            continue;
        }
        let check = |how: &str, got: Outcome| {
            check(how, &got);
            assert_eq!(
                got.discarded, given.discarded,
                "{name} ({how}): discarded bytes counter"
            );
        };
        let stream: Vec<u8> = chunks.concat();
        let bytewise: Vec<Vec<u8>> = stream.iter().map(|b| vec![*b]).collect();
        check("byte by byte", run(&config, &bytewise));
        for cut in 0..=stream.len() {
            let two = vec![stream[..cut].to_vec(), stream[cut..].to_vec()];
            check(&format!("split at {cut}"), run(&config, &two));
        }
    }
}

#[test]
fn endless_garbage_never_grows_the_buffer() {
    for mode in ["endOnly", "startEnd", "startOnly"] {
        let framing: Framing = serde_json::from_value(serde_json::json!({
            "mode": mode, "start": "$", "end": ["\\n"], "maxFrameBytes": 1024
        }))
        .unwrap();
        let mut framer = Framer::new(FramerConfig::from_project(&framing).unwrap());
        let junk = vec![b'x'; 64 * 1024];
        let mut junk_with_starts = junk.clone();
        junk_with_starts[100] = b'$';
        for _ in 0..200 {
            framer.push(&junk, &mut |_| panic!("no frame in garbage"));
            framer.push(&junk_with_starts, &mut |_| {});
            assert!(
                framer.pending() <= 1024 + 8,
                "{mode}: pending {}",
                framer.pending()
            );
        }
        let stats = framer.stats();
        assert!(stats.bytes_discarded > 10_000_000, "{mode}: {stats:?}");
    }
}

#[test]
fn frames_after_oversize_recover() {
    let framing: Framing = serde_json::from_value(
        serde_json::json!({"mode": "endOnly", "end": ["\\n"], "maxFrameBytes": 16}),
    )
    .unwrap();
    let mut framer = Framer::new(FramerConfig::from_project(&framing).unwrap());
    let mut got = Vec::new();
    framer.push(&vec![b'a'; 1_000_000], &mut |f| got.push(f.to_vec()));
    framer.push(b"tail-of-long\nnext\n", &mut |f| got.push(f.to_vec()));
    assert_eq!(got, vec![b"next".to_vec()]);
    assert_eq!(framer.stats().oversize_dropped, 1);
}
