//! The watchdog, the disable-after-repeated-timeouts rule and the memory cap, in both
//! languages.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use sextant_scripting::{FrameInput, Language, Limits, NoHost, ScriptErrorKind, ScriptParser};

const LUA_LOOP: &str = r#"
function parse(f)
  if f == "loop" then while true do end end
  return {1}
end
"#;

const JS_LOOP: &str = r#"
function parse(f) {
  if (f === "loop") { while (true) {} }
  return [1];
}
"#;

fn assert_times_out(language: Language, source: &str) {
    let mut p = parser(language, source);
    let started = Instant::now();
    let err = p.parse(FrameInput::Text("loop")).unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err.kind, ScriptErrorKind::Timeout, "{language:?}: {err}");
    assert!(
        elapsed >= Duration::from_millis(50),
        "{language:?} stopped early: {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(2),
        "{language:?} stopped late: {elapsed:?}"
    );
    // The engine survives the interruption.
    assert_eq!(parse_text(&mut p, "ok"), vec![nums(&[1.0])]);
}

#[test]
fn infinite_loop_is_interrupted() {
    assert_times_out(Language::Lua, LUA_LOOP);
    assert_times_out(Language::JavaScript, JS_LOOP);
}

#[test]
fn caught_interruption_still_times_out() {
    assert_times_out(
        Language::Lua,
        r#"
        function parse(f)
          if f == "loop" then
            while true do
              pcall(function() while true do end end)
              xpcall(function() while true do end end, function(e) while true do end end)
            end
          end
          return {1}
        end
        "#,
    );
    assert_times_out(
        Language::JavaScript,
        r#"
        function parse(f) {
          if (f === "loop") { while (true) { try { while (true) {} } catch (e) {} } }
          return [1];
        }
        "#,
    );
}

#[test]
fn top_level_loop_times_out_at_compile() {
    for (language, source) in [
        (Language::Lua, "while true do end function parse(f) end"),
        (Language::JavaScript, "while (true) {} function parse(f) {}"),
    ] {
        let err = compile_error(language, source);
        assert_eq!(err.kind, ScriptErrorKind::Timeout, "{language:?}: {err}");
    }
}

fn assert_disabled_after_three(language: Language, source: &str) {
    let mut p = parser(language, source);
    let kind = |p: &mut sextant_scripting::ScriptParser, frame: &str| {
        p.parse(FrameInput::Text(frame)).map_err(|e| e.kind)
    };
    // A success in between resets the count.
    assert_eq!(kind(&mut p, "loop"), Err(ScriptErrorKind::Timeout));
    assert_eq!(kind(&mut p, "loop"), Err(ScriptErrorKind::Timeout));
    assert!(kind(&mut p, "ok").is_ok());
    assert!(!p.is_disabled());
    for _ in 0..3 {
        assert_eq!(kind(&mut p, "loop"), Err(ScriptErrorKind::Timeout));
    }
    assert!(p.is_disabled());
    assert_eq!(kind(&mut p, "ok"), Err(ScriptErrorKind::Disabled));
    assert_eq!(kind(&mut p, "loop"), Err(ScriptErrorKind::Disabled));
}

#[test]
fn three_consecutive_timeouts_disable_the_script() {
    assert_disabled_after_three(Language::Lua, LUA_LOOP);
    assert_disabled_after_three(Language::JavaScript, JS_LOOP);
}

#[test]
fn transform_is_disabled_too() {
    let mut tr = transform(
        Language::Lua,
        "function transform(v) if v < 0 then while true do end end return v end",
    );
    for _ in 0..3 {
        assert_eq!(
            tr.transform(n(-1.0)).unwrap_err().kind,
            ScriptErrorKind::Timeout
        );
    }
    assert_eq!(
        tr.transform(n(1.0)).unwrap_err().kind,
        ScriptErrorKind::Disabled
    );
}

/// A deadline ends a call long before its own timeout would, and the calls after it too.
fn assert_deadline_bounds_the_run(language: Language, source: &str) {
    let limits = Limits {
        // Far beyond anything this test waits for: only the deadline can end the loop.
        timeout: Duration::from_secs(3600),
        deadline: Some(Instant::now() + Duration::from_millis(200)),
        ..test_limits()
    };
    let mut p = ScriptParser::compile(language, source, limits, Arc::new(NoHost))
        .unwrap_or_else(|e| panic!("{language:?}: {e}"));
    for _ in 0..2 {
        let err = p.parse(FrameInput::Text("loop")).unwrap_err();
        assert_eq!(err.kind, ScriptErrorKind::Timeout, "{language:?}: {err}");
        assert!(
            err.to_string()
                .contains("the time budget of this run was used up"),
            "{language:?}: {err}"
        );
    }
}

#[test]
fn a_deadline_bounds_every_call_of_a_run() {
    assert_deadline_bounds_the_run(Language::Lua, LUA_LOOP);
    assert_deadline_bounds_the_run(Language::JavaScript, JS_LOOP);
}

/// The test limits with a time limit a memory bomb cannot reach first: only the memory
/// cap may stop it (filling 16 MiB takes ~60 ms in a debug build, past the 50 ms the
/// watchdog tests use).
fn memory_limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(20),
        ..test_limits()
    }
}

fn assert_memory_capped(language: Language, source: &str) {
    let mut p = ScriptParser::compile(language, source, memory_limits(), Arc::new(NoHost))
        .expect("compiles");
    for _ in 0..2 {
        let err = p.parse(FrameInput::Text("bomb")).unwrap_err();
        assert_eq!(
            err.kind,
            ScriptErrorKind::OutOfMemory,
            "{language:?}: {err}"
        );
        assert_eq!(parse_text(&mut p, "ok"), vec![nums(&[1.0])], "{language:?}");
    }
}

#[test]
fn memory_bomb_hits_the_cap_and_engine_recovers() {
    assert_memory_capped(
        Language::Lua,
        r#"
        function parse(f)
          if f == "bomb" then
            local t = {}
            while true do t[#t + 1] = string.rep('x', 1e6) .. #t end
          end
          return {1}
        end
        "#,
    );
    assert_memory_capped(
        Language::JavaScript,
        r#"
        function parse(f) {
          if (f === "bomb") { let a = []; while (true) { a.push('x'.repeat(1e6) + a.length); } }
          return [1];
        }
        "#,
    );
}

#[test]
fn memory_bomb_at_top_level_fails_compile_cleanly() {
    for (language, source) in [
        (
            Language::Lua,
            "local t = {} while true do t[#t + 1] = string.rep('x', 1e6) .. #t end",
        ),
        (
            Language::JavaScript,
            "let a = []; while (true) { a.push('x'.repeat(1e6) + a.length); }",
        ),
    ] {
        let err = ScriptParser::compile(language, source, memory_limits(), Arc::new(NoHost))
            .err()
            .expect("a bomb at the top level does not compile");
        assert_eq!(
            err.kind,
            ScriptErrorKind::OutOfMemory,
            "{language:?}: {err}"
        );
    }
}

#[test]
fn oversized_results_are_refused_not_materialised() {
    for (language, source) in [
        (Language::JavaScript, "function parse(f) { return new Array(2e9); }"),
        (Language::JavaScript, "function parse(f) { const a = [1]; a[1e9] = 2; return [a]; }"),
        (
            Language::Lua,
            r#"function parse(f)
                 local long, out = {}, {}
                 for i = 1, 20000 do long[i] = i end
                 for i = 1, 100 do out[i] = i end
                 out[#out + 1] = long
                 return out
               end"#,
        ),
        (
            Language::JavaScript,
            "function parse(f) { const r = Array(100).fill(1); r.push(Array(20000).fill(2)); return r; }",
        ),
    ] {
        let mut p = parser(language, source);
        let started = Instant::now();
        let err = p.parse(FrameInput::Text("x")).unwrap_err();
        assert_eq!(err.kind, ScriptErrorKind::Runtime, "{language:?}: {err}");
        assert!(err.message.contains("values"), "{language:?}: {err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn catastrophic_regex_is_interrupted() {
    let mut p = parser(
        Language::JavaScript,
        "function parse(f) { return [/^(a+)+$/.test('a'.repeat(40) + 'b')]; }",
    );
    assert_eq!(
        p.parse(FrameInput::Text("x")).unwrap_err().kind,
        ScriptErrorKind::Timeout
    );
}

#[test]
fn looping_promise_job_counts_as_timeout() {
    let mut p = parser(
        Language::JavaScript,
        "function parse(f) { Promise.resolve().then(() => { while (true) {} }); return [1]; }",
    );
    assert_eq!(
        p.parse(FrameInput::Text("x")).unwrap_err().kind,
        ScriptErrorKind::Timeout
    );
}

/// `MAX_JOBS_PER_CALL` (10 000 promise jobs): a call whose jobs go past it fails with an
/// error that says so – not a silent success that leaves the rest queued for the next
/// frame – and the call after it runs on a clean engine: nothing it left behind runs then.
#[test]
fn promise_jobs_past_the_cap_fail_the_call_and_the_next_call_is_clean() {
    let source = r#"
        let ran = 0;
        function parse(f) {
          if (f.startsWith("chain ")) {
            let p = Promise.resolve();
            for (let i = 0; i < Number(f.slice(6)); i++) p = p.then(() => { ran++; });
          }
          if (f === "forever") {
            const again = () => { ran++; Promise.resolve().then(again); };
            again();
          }
          return [ran];
        }
    "#;
    // Time enough for any machine: only the job cap may end these calls.
    let limits = Limits {
        timeout: Duration::from_secs(60),
        ..test_limits()
    };
    let compile = |source: &str| {
        ScriptParser::compile(Language::JavaScript, source, limits, Arc::new(NoHost))
    };
    let mut p = compile(source).unwrap();
    // At the cap: every job runs and the call succeeds.
    assert_eq!(parse_text(&mut p, "chain 10000"), vec![nums(&[0.0])]);
    assert_eq!(parse_text(&mut p, "count"), vec![nums(&[10000.0])]);
    for flood in ["chain 10001", "forever"] {
        let err = p.parse(FrameInput::Text(flood)).unwrap_err();
        assert_eq!(err.kind, ScriptErrorKind::Timeout, "{flood}: {err}");
        assert!(err.message.contains("10000 promise jobs"), "{flood}: {err}");
        // The jobs it left were dropped with the engine, which started afresh: none runs
        // in the calls after it.
        assert_eq!(parse_text(&mut p, "count"), vec![nums(&[0.0])], "{flood}");
        assert_eq!(parse_text(&mut p, "count"), vec![nums(&[0.0])], "{flood}");
        assert!(!p.is_disabled());
    }
    // A script whose top level floods does not compile.
    let err =
        compile("const again = () => Promise.resolve().then(again); again(); function parse(f) {}")
            .err()
            .expect("a flooding top level fails to compile");
    assert_eq!(err.kind, ScriptErrorKind::Timeout, "{err}");
    assert!(err.message.contains("10000 promise jobs"), "{err}");
}
