//! Rough calls-per-second of the hot path for an 8-field comma-separated frame. Ignored by
//! default; run with
//! `cargo test --release -p sextant-scripting --test throughput -- --ignored --nocapture`.

mod common;

use std::time::Instant;

use common::*;
use sextant_scripting::{FrameInput, Language, ScriptValue};

const FRAME: &str = "1.5,2,3.25,4,5,6.125,7,8";
const ROUNDS: usize = 5;
const CALLS_PER_ROUND: usize = 200_000;

/// Best round of several, so a busy machine skews the figure as little as possible.
fn measure(label: &str, language: Language, source: &str, expected: Vec<ScriptValue>) -> f64 {
    let mut p = parser(language, source);
    assert_eq!(parse_text(&mut p, FRAME), vec![expected]);
    let mut best = 0.0f64;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..CALLS_PER_ROUND {
            let rows = p.parse(FrameInput::Text(FRAME)).expect("parse failed");
            assert_eq!(rows.len(), 1);
        }
        best = best.max(CALLS_PER_ROUND as f64 / started.elapsed().as_secs_f64());
    }
    println!("{label}: {best:.0} calls/s");
    best
}

#[test]
#[ignore = "timing measurement; run explicitly in release mode"]
fn comma_split_throughput() {
    let numbers = nums(&[1.5, 2.0, 3.25, 4.0, 5.0, 6.125, 7.0, 8.0]);
    let texts: Vec<ScriptValue> = FRAME.split(',').map(t).collect();
    measure(
        "Lua, numbers",
        Language::Lua,
        r#"
        local gmatch, tonumber = string.gmatch, tonumber
        function parse(frame)
          local out, n = {}, 0
          for field in gmatch(frame, "[^,]+") do n = n + 1; out[n] = tonumber(field) end
          return out
        end
        "#,
        numbers.clone(),
    );
    measure(
        "Lua, strings",
        Language::Lua,
        r#"
        function parse(frame)
          local result = {}
          for field in string.gmatch(frame, "([^,]+)") do table.insert(result, field) end
          return result
        end
        "#,
        texts.clone(),
    );
    measure(
        "JavaScript, numbers",
        Language::JavaScript,
        "function parse(frame) { return frame.split(',').map(Number); }",
        numbers,
    );
    measure(
        "JavaScript, strings",
        Language::JavaScript,
        "function parse(frame) { return frame.split(','); }",
        texts,
    );
}
