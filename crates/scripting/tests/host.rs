//! Host functions seen from scripts: `tableGet`/`tableSet` through [`SharedTables`], dataset
//! getters and `clearPlots` through a recording host, and [`NoHost`].

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use sextant_scripting::{
    FrameInput, Host, Language, Limits, NoHost, ScriptParser, ScriptValue, SharedTables,
    TablesFull, MAX_TABLE_BYTES,
};

fn parser_with(language: Language, source: &str, host: Arc<dyn Host>) -> ScriptParser {
    match ScriptParser::compile(language, source, test_limits(), host) {
        Ok(p) => p,
        Err(e) => panic!("{language:?} script should compile: {e}"),
    }
}

#[test]
fn table_set_and_get_round_trip_across_languages() {
    let tables = Arc::new(SharedTables::new());
    let mut writer = parser_with(
        Language::Lua,
        r#"function parse(f)
             tableSet("state", "last", tonumber(f))
             tableSet("state", "label", "frame " .. f)
             tableSet("state", 7, true)
             return {}
           end"#,
        tables.clone(),
    );
    let mut reader = parser_with(
        Language::JavaScript,
        r#"function parse(f) {
             return [tableGet("state", "last"), tableGet("state", "label"),
                     tableGet("state", 7), tableGet("state", "missing") === null];
           }"#,
        tables.clone(),
    );
    assert!(writer.parse(FrameInput::Text("42")).unwrap().is_empty());
    assert_eq!(
        reader.parse(FrameInput::Text("x")).unwrap(),
        vec![vec![n(42.0), t("frame 42"), n(1.0), n(1.0)]]
    );
    assert_eq!(tables.get("state", "last"), n(42.0));
    assert_eq!(tables.get("state", "7"), n(1.0));

    // And back: JS writes, Lua reads.
    let mut js_writer = parser_with(
        Language::JavaScript,
        "function parse(f) { tableSet('state', 'js', f); return null; }",
        tables.clone(),
    );
    let mut lua_reader = parser_with(
        Language::Lua,
        "function parse(f) return {tableGet('state', 'js'), tableGet('nope', 'x') == nil} end",
        tables.clone(),
    );
    js_writer.parse(FrameInput::Text("hello")).unwrap();
    assert_eq!(
        lua_reader.parse(FrameInput::Text("x")).unwrap(),
        vec![vec![t("hello"), n(1.0)]]
    );
}

#[test]
fn constant_tables_are_readable_but_not_writable() {
    let tables = Arc::new(SharedTables::new().with_constant_table("consts", [("gain", n(2.5))]));
    for language in [Language::Lua, Language::JavaScript] {
        let source = match language {
            Language::Lua => "function parse(f) tableSet('consts', 'gain', 9) return {tableGet('consts', 'gain')} end",
            Language::JavaScript => "function parse(f) { tableSet('consts', 'gain', 9); return [tableGet('consts', 'gain')]; }",
        };
        let mut p = parser_with(language, source, tables.clone());
        assert_eq!(p.parse(FrameInput::Text("x")).unwrap(), vec![vec![n(2.5)]]);
    }
}

#[test]
fn no_host_returns_null_and_ignores_sets() {
    let mut p = parser_with(
        Language::Lua,
        "function parse(f) tableSet('a', 'b', 1) return {tableGet('a', 'b') == nil, datasetGetRaw(1) == nil} end",
        Arc::new(NoHost),
    );
    assert_eq!(
        p.parse(FrameInput::Text("x")).unwrap(),
        vec![vec![n(1.0), n(1.0)]]
    );
}

#[derive(Default)]
struct Recording {
    asked: Mutex<Vec<String>>,
    clears: AtomicUsize,
}

impl Host for Recording {
    fn table_get(&self, _: &str, _: &str) -> ScriptValue {
        ScriptValue::Null
    }
    fn table_set(&self, _: &str, _: &str, _: ScriptValue) -> Result<(), TablesFull> {
        Ok(())
    }
    fn dataset_raw(&self, id: &str) -> ScriptValue {
        self.asked.lock().unwrap().push(format!("raw {id}"));
        ScriptValue::Number(10.0)
    }
    fn dataset_final(&self, id: &str) -> ScriptValue {
        self.asked.lock().unwrap().push(format!("final {id}"));
        ScriptValue::Text("done".into())
    }
    fn clear_plots(&self) {
        self.clears.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn dataset_getters_and_clear_plots_reach_the_host() {
    for language in [Language::Lua, Language::JavaScript] {
        let host = Arc::new(Recording::default());
        let source = match language {
            Language::Lua => "function parse(f) clearPlots() return {datasetGetRaw(3), datasetGetFinal('speed')} end",
            Language::JavaScript => "function parse(f) { clearPlots(); return [datasetGetRaw(3), datasetGetFinal('speed')]; }",
        };
        let mut p = parser_with(language, source, host.clone());
        assert_eq!(
            p.parse(FrameInput::Text("x")).unwrap(),
            vec![vec![n(10.0), t("done")]],
            "{language:?}"
        );
        assert_eq!(*host.asked.lock().unwrap(), vec!["raw 3", "final speed"]);
        assert_eq!(host.clears.load(Ordering::Relaxed), 1);
    }
}

/// A script that makes a register per value (keyed by device data) stops at the tables'
/// cap with a script error naming it, in both languages; registers it already has can
/// still be written, and the host side is not refused.
#[test]
fn tables_stop_growing_at_their_cap_with_a_clear_error() {
    for (language, source) in [
        (
            Language::JavaScript,
            "function parse(frame) { for (let i = 0; i < 2000; i++) tableSet('t', frame + ':' + i, 'x'.repeat(1000)); tableSet('t', 'last', frame); return [1]; }",
        ),
        (
            Language::Lua,
            "function parse(frame) for i = 1, 2000 do tableSet('t', frame .. ':' .. i, string.rep('x', 1000)) end tableSet('t', 'last', frame) return {1} end",
        ),
    ] {
        let tables = Arc::new(SharedTables::new());
        // 2000 writes of 1 KiB a call, unoptimised, on a loaded machine, can outlast the
        // tests' 50 ms watchdog; the cap is what this test is about, not the clock.
        let limits = Limits {
            timeout: std::time::Duration::from_secs(10),
            ..test_limits()
        };
        let mut parser = match ScriptParser::compile(language, source, limits, tables.clone()) {
            Ok(p) => p,
            Err(e) => panic!("{language:?} script should compile: {e}"),
        };
        let mut refused = None;
        for frame in 0..40 {
            if let Err(e) = parser.parse(FrameInput::Text(&format!("f{frame}"))) {
                refused = Some((frame, e.to_string()));
                break;
            }
        }
        let (frame, message) = refused.unwrap_or_else(|| panic!("{language:?}: never refused"));
        // 2000 registers of ~1 KiB a frame: the 16 MiB cap is reached in the ninth frame.
        assert!((7..=9).contains(&frame), "{language:?}: refused at frame {frame}: {message}");
        assert!(message.contains("tables are full"), "{language:?}: {message}");
        let held: usize = tables.snapshot()["t"].values().map(|v| match v {
            ScriptValue::Text(t) => t.len(),
            _ => 0,
        }).sum();
        assert!(held <= MAX_TABLE_BYTES, "{language:?}: {held} bytes held");
        // An existing register can still change, by the script's host and by the app.
        assert_eq!(tables.table_set("t", "f0:0", ScriptValue::Number(1.0)), Ok(()));
        assert_eq!(tables.table_set("t", "new", ScriptValue::Text("y".repeat(1 << 20))), Err(TablesFull));
        tables.set("t", "from the app", ScriptValue::Number(2.0));
        assert_eq!(tables.get("t", "from the app"), ScriptValue::Number(2.0));
    }
}
