//! Any bytes as a server-sent-events body, cut into chunks anywhere: the same events as
//! in one piece, never a panic, and no event carries more than the body held.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sextant_providers::{SseEvent, SseParser};

fn parse(chunks: &[&[u8]]) -> (Vec<SseEvent>, bool) {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    for chunk in chunks {
        parser.feed(chunk, &mut out);
    }
    (out, parser.has_partial())
}

fuzz_target!(|data: &[u8]| {
    let Some((&cuts, body)) = data.split_first() else {
        return;
    };
    let whole = parse(&[body]);
    // Cut at up to eight places the first byte picks, and byte by byte.
    let mut at: Vec<usize> = (0..(cuts % 8) as usize)
        .map(|i| body.len() * (i + 1) * (cuts as usize + 1) / 2048 % (body.len() + 1))
        .collect();
    at.sort_unstable();
    let mut chunks = Vec::new();
    let mut from = 0;
    for cut in at {
        chunks.push(&body[from..cut.max(from)]);
        from = cut.max(from);
    }
    chunks.push(&body[from..]);
    assert_eq!(
        parse(&chunks),
        whole,
        "events depend on where the body was cut"
    );
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(
        parse(&bytes),
        whole,
        "events depend on where the body was cut"
    );
    let carried: usize = whole.0.iter().map(|e| e.data.len() + e.event.len()).sum();
    // A lossy UTF-8 repair turns one bad byte into three; nothing else adds bytes.
    assert!(carried <= body.len() * 3);
});
