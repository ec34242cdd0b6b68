//! Host functions seen from scripts: `tableGet`/`tableSet` through [`SharedTables`], dataset
//! getters and `clearPlots` through a recording host, and [`NoHost`].

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use sextant_scripting::{
    FrameInput, Host, Language, NoHost, ScriptParser, ScriptValue, SharedTables,
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
    fn table_set(&self, _: &str, _: &str, _: ScriptValue) {}
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
