//! JavaScript parsers and transforms: the result contract, the sandbox and error reporting.

mod common;

use common::*;
use sextant_scripting::{FrameInput, Language::JavaScript as Js, ScriptErrorKind, ScriptValue};

#[test]
fn comma_split_gives_one_row() {
    let mut p = parser(
        Js,
        "function parse(frame) { return frame.split(',').map(Number); }",
    );
    assert_eq!(parse_text(&mut p, "1,2,3"), vec![nums(&[1.0, 2.0, 3.0])]);
}

#[test]
fn lexical_entry_function_is_found() {
    let mut p = parser(Js, "const parse = (frame) => frame.split(',');");
    assert_eq!(parse_text(&mut p, "a,b"), vec![vec![t("a"), t("b")]]);
}

#[test]
fn null_undefined_and_empty_array_give_no_rows() {
    let mut p = parser(
        Js,
        r#"function parse(f) {
             if (f === "null") return null;
             if (f === "undefined") return undefined;
             return [];
           }"#,
    );
    assert!(parse_text(&mut p, "null").is_empty());
    assert!(parse_text(&mut p, "undefined").is_empty());
    assert!(parse_text(&mut p, "empty").is_empty());
}

#[test]
fn array_of_arrays_gives_one_row_per_inner_array() {
    let mut p = parser(Js, "function parse(f) { return [[1, 2], [3, 4], [5]]; }");
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![nums(&[1.0, 2.0]), nums(&[3.0, 4.0]), nums(&[5.0])]
    );
}

#[test]
fn mixed_result_expands_with_padding() {
    let mut p = parser(
        Js,
        "function parse(f) { return [12.5, 'ok', [1, 2, 3], [4, 5], []]; }",
    );
    let null = ScriptValue::Null;
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![
            vec![n(12.5), t("ok"), n(1.0), n(4.0), null.clone()],
            vec![n(12.5), t("ok"), n(2.0), n(5.0), null.clone()],
            vec![n(12.5), t("ok"), n(3.0), n(5.0), null],
        ]
    );
}

#[test]
fn scalar_types_convert() {
    let mut p = parser(
        Js,
        "function parse(f) { return [true, false, 'txt', 2 ** 40, -0.5, null, undefined, {}]; }",
    );
    let null = ScriptValue::Null;
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![vec![
            n(1.0),
            n(0.0),
            t("txt"),
            n(1_099_511_627_776.0),
            n(-0.5),
            null.clone(),
            null.clone(),
            null
        ]]
    );
}

#[test]
fn non_array_result_is_a_runtime_error() {
    let mut p = parser(Js, "function parse(f) { return 42; }");
    let err = p.parse(FrameInput::Text("x")).unwrap_err();
    assert_eq!(err.kind, ScriptErrorKind::Runtime);
}

#[test]
fn bytes_arrive_as_number_array() {
    let mut p = parser(
        Js,
        r#"function parse(b) {
             return [b.length, b[0], b[b.length - 1], (b[1] << 8) | b[0], Array.isArray(b)];
           }"#,
    );
    let rows = p
        .parse(FrameInput::Bytes(&[0x34, 0x12, 0x00, 0xFF]))
        .unwrap();
    assert_eq!(rows, vec![nums(&[4.0, 52.0, 255.0, 4660.0, 1.0])]);
}

#[test]
fn transform_numbers_and_text() {
    let mut double = transform(Js, "function transform(v) { return v * 2; }");
    assert_eq!(double.transform(n(21.0)).unwrap(), n(42.0));
    assert_eq!(double.transform(n(0.25)).unwrap(), n(0.5));

    let mut gear = transform(
        Js,
        r#"const names = ["neutral", "first", "second", "third"];
           function transform(v) { return names[v] ?? ("gear " + v); }"#,
    );
    assert_eq!(gear.transform(n(3.0)).unwrap(), t("third"));
    assert_eq!(gear.transform(n(7.0)).unwrap(), t("gear 7"));

    let mut upper = transform(Js, "function transform(v) { return v.toUpperCase(); }");
    assert_eq!(upper.transform(t("abc")).unwrap(), t("ABC"));

    let mut nothing = transform(Js, "function transform(v) { return [v]; }");
    assert_eq!(nothing.transform(n(1.0)).unwrap(), ScriptValue::Null);
}

#[test]
fn state_persists_between_calls() {
    let mut p = parser(Js, "let count = 0; function parse(f) { return [++count]; }");
    parse_text(&mut p, "a");
    assert_eq!(parse_text(&mut p, "b"), vec![nums(&[2.0])]);
}

#[test]
fn sandbox_has_no_loader_timers_or_system_modules() {
    let mut p = parser(
        Js,
        r#"
        let imported = "pending";
        import("os").then(() => { imported = "loaded"; }, () => { imported = "refused"; });
        function parse(f) {
          return [typeof require, typeof std, typeof os, typeof setTimeout,
                  typeof setInterval, typeof process, typeof fetch, imported];
        }
        "#,
    );
    let undefined = t("undefined");
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![vec![
            undefined.clone(),
            undefined.clone(),
            undefined.clone(),
            undefined.clone(),
            undefined.clone(),
            undefined.clone(),
            undefined,
            t("refused"),
        ]]
    );
}

#[test]
fn static_import_does_not_compile() {
    let err = compile_error(
        Js,
        "import * as std from 'std';\nfunction parse(f) { return []; }",
    );
    assert_eq!(err.kind, ScriptErrorKind::Compile);
}

#[test]
fn console_log_does_not_fail() {
    let mut p = parser(
        Js,
        "function parse(f) { console.log('frame', f, {a: 1}); return [1]; }",
    );
    assert_eq!(parse_text(&mut p, "x"), vec![nums(&[1.0])]);
}

#[test]
fn syntax_error_reports_its_line() {
    let err = compile_error(
        Js,
        "function parse(f) {\n  return [1];\n  let x = = 2;\n}\n",
    );
    assert_eq!(err.kind, ScriptErrorKind::Compile);
    assert_eq!(err.line, Some(3), "{err}");
}

#[test]
fn runtime_error_reports_its_line() {
    let mut p = parser(
        Js,
        "function parse(f) {\n  let t = null;\n\n  return t.x;\n}\n",
    );
    let err = p.parse(FrameInput::Text("x")).unwrap_err();
    assert_eq!(err.kind, ScriptErrorKind::Runtime);
    assert_eq!(err.line, Some(4), "{err}");
    assert!(err.message.contains("TypeError"), "{err}");

    let mut p = parser(
        Js,
        "function parse(f) {\n  throw new Error('bad frame');\n}\n",
    );
    let err = p.parse(FrameInput::Text("x")).unwrap_err();
    assert_eq!(err.line, Some(2), "{err}");
    assert!(err.message.contains("bad frame"), "{err}");
}

#[test]
fn missing_entry_function_is_a_compile_error() {
    let err = compile_error(Js, "function notParse(f) { return []; }");
    assert_eq!(err.kind, ScriptErrorKind::Compile);
    assert!(err.message.contains("parse(frame)"), "{err}");

    let err = compile_error(Js, "var parse = 3;");
    assert_eq!(err.kind, ScriptErrorKind::Compile);
}

#[test]
fn top_level_error_is_a_compile_error_with_line() {
    let err = compile_error(Js, "function parse(f) {}\nlet x = null;\nx();\n");
    assert_eq!(err.kind, ScriptErrorKind::Compile);
    assert_eq!(err.line, Some(3), "{err}");
}

#[test]
fn parser_works_after_moving_to_another_thread() {
    let mut p = parser(Js, "function parse(f) { return f.split(','); }");
    parse_text(&mut p, "warm,up");
    let rows = std::thread::spawn(move || p.parse(FrameInput::Text("a,b")))
        .join()
        .expect("thread panicked")
        .expect("parse failed");
    assert_eq!(rows, vec![vec![t("a"), t("b")]]);
}

#[test]
fn promise_jobs_run_after_each_call() {
    let mut p = parser(
        Js,
        r#"let settled = 0;
           function parse(f) { Promise.resolve().then(() => { settled++; }); return [settled]; }"#,
    );
    assert_eq!(parse_text(&mut p, "a"), vec![nums(&[0.0])]);
    assert_eq!(parse_text(&mut p, "b"), vec![nums(&[1.0])]);
}
