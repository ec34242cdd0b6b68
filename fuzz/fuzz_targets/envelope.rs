//! Any text wrapped in the untrusted envelope: nothing inside can close it or open another
//! (whatever its case, fullwidth or small-form `<`, spaces or slashes), no control or
//! invisible character survives unescaped, the source label stays one quoted attribute,
//! and the body respects its byte cap.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use sextant_assistant::context::Envelope;
use sextant_fuzz::{is_invisible, tag_likes};

const NONCE: &str = "89abcdef01234567";

#[derive(Arbitrary, Debug)]
struct Input {
    max_bytes: u16,
    source: String,
    content: String,
}

fuzz_target!(|input: Input| {
    let max = input.max_bytes as usize;
    let envelope = Envelope::with_nonce(NONCE)
        .expect("a valid nonce")
        .max_bytes(max);
    let out = envelope.wrap(&input.source, &input.content);
    let open = format!("<untrusted-{NONCE} source=\"");
    let close = format!("\n</untrusted-{NONCE}>");
    assert!(out.starts_with(&open));
    assert!(out.ends_with(&close));
    let tags = tag_likes(&out);
    assert_eq!(
        tags,
        vec![0, out.len() - close.len() + 1],
        "a tag inside: {out:?}"
    );
    let head_end = out.find("\">\n").expect("the opening tag ends");
    let source = &out[open.len()..head_end];
    assert!(
        !source.contains(['"', '<', '>', '\n', '\r']),
        "source breaks out: {source:?}"
    );
    let body = &out[head_end + 3..out.len() - close.len()];
    let body = match body.rfind("\n[truncated by Sextant: ") {
        Some(at) if input.content.len() > 0 => &body[..at],
        _ => body,
    };
    assert!(
        body.len() <= max,
        "body of {} bytes over the cap of {max}",
        body.len()
    );
    for c in out.chars() {
        assert!(
            !(c.is_control() && c != '\n' && c != '\t') && !is_invisible(c),
            "an unescaped {:?} in {out:?}",
            c
        );
    }
    if body.len() == input.content.len() {
        // Nothing to escape means nothing changed.
        let plain = input
            .content
            .chars()
            .all(|c| !c.is_control() && !is_invisible(c) || c == '\n' || c == '\t')
            && tag_likes(&input.content).is_empty()
            && !input.content.contains('\r');
        if plain {
            assert_eq!(body, input.content);
        }
    }
});
