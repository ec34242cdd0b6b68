//! Lua parsers and transforms: the result contract, the LuaJIT compatibility layer, the
//! sandbox and error reporting.

mod common;

use common::*;
use sextant_scripting::{FrameInput, Language::Lua, ScriptErrorKind, ScriptValue};

#[test]
fn comma_split_gives_one_row() {
    let mut p = parser(
        Lua,
        r#"
        function parse(frame)
          local out = {}
          for field in string.gmatch(frame, "([^,]+)") do out[#out + 1] = tonumber(field) end
          return out
        end
        "#,
    );
    assert_eq!(parse_text(&mut p, "1,2,3"), vec![nums(&[1.0, 2.0, 3.0])]);
}

#[test]
fn nil_and_empty_table_give_no_rows() {
    let mut p = parser(
        Lua,
        r#"function parse(frame) if frame == "nil" then return nil end return {} end"#,
    );
    assert!(parse_text(&mut p, "nil").is_empty());
    assert!(parse_text(&mut p, "empty").is_empty());
}

#[test]
fn table_of_tables_gives_one_row_per_inner_table() {
    let mut p = parser(Lua, "function parse(f) return {{1, 2}, {3, 4}, {5}} end");
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![nums(&[1.0, 2.0]), nums(&[3.0, 4.0]), nums(&[5.0])]
    );
}

#[test]
fn mixed_result_expands_with_padding() {
    let mut p = parser(
        Lua,
        "function parse(f) return {12.5, 'ok', {1, 2, 3}, {4, 5}, {}} end",
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
        Lua,
        "function parse(f) return {true, false, 'txt', 2^53, 0.5, print} end",
    );
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![vec![
            n(1.0),
            n(0.0),
            t("txt"),
            n(9_007_199_254_740_992.0),
            n(0.5),
            ScriptValue::Null
        ]]
    );
}

#[test]
fn non_table_result_is_a_runtime_error() {
    for (result, type_name) in [
        ("42", "number"),
        ("'1,2'", "string"),
        ("true", "boolean"),
        ("print", "function"),
    ] {
        let mut p = parser(Lua, &format!("function parse(f) return {result} end"));
        let err = p.parse(FrameInput::Text("x")).unwrap_err();
        assert_eq!(err.kind, ScriptErrorKind::Runtime);
        assert_eq!(
            err.message,
            format!("parse() must return an array (table) or nil, not a {type_name}")
        );
        // The engine goes on.
        assert!(p.parse(FrameInput::Text("x")).is_err());
    }
}

#[test]
fn a_result_is_read_up_to_its_first_nil_and_raw() {
    let mut p = parser(
        Lua,
        r#"
        local hidden = setmetatable({}, { __index = function(_, i) return 'from a metamethod' end })
        function parse(f)
          if f == 'hole' then return { 1, 2, nil, 4 } end
          if f == 'bytes' then return { '\255ok', { true, '\0z', nil, 9 } } end
          if f == 'meta' then hidden[1] = 7; return hidden end
          return { 1.5, math.maxinteger, { 1, 2 }, {} }
        end
        "#,
    );
    assert_eq!(parse_text(&mut p, "hole"), vec![vec![n(1.0), n(2.0)]]);
    assert_eq!(
        parse_text(&mut p, "bytes"),
        vec![
            vec![t("\u{fffd}ok"), n(1.0)],
            vec![t("\u{fffd}ok"), t("\0z")]
        ]
    );
    assert_eq!(parse_text(&mut p, "meta"), vec![vec![n(7.0)]]);
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![
            vec![n(1.5), n(i64::MAX as f64), n(1.0), ScriptValue::Null],
            vec![n(1.5), n(i64::MAX as f64), n(2.0), ScriptValue::Null],
        ]
    );
}

#[test]
fn bytes_arrive_as_one_based_integer_table() {
    let mut p = parser(
        Lua,
        r#"
        function parse(b)
          return {#b, b[1], b[#b], bit.bor(bit.lshift(b[2], 8), b[1]), math.type(b[1])}
        end
        "#,
    );
    let rows = p
        .parse(FrameInput::Bytes(&[0x34, 0x12, 0x00, 0xFF]))
        .unwrap();
    assert_eq!(
        rows,
        vec![vec![n(4.0), n(52.0), n(255.0), n(4660.0), t("integer")]]
    );
}

#[test]
fn bit_library_matches_luajit() {
    let mut p = parser(
        Lua,
        r#"
        function parse(f)
          return {
            bit.band(0xF0, 0x3C), bit.lshift(1, 4), bit.tohex(255), bit.tohex(-1, -4),
            bit.bor(1, 2, 4), bit.bxor(0xFF, 0x0F), bit.bnot(0), bit.rshift(-1, 28),
            bit.arshift(-256, 4), bit.lshift(1, 31), bit.tobit(2^32 + 5), bit.bswap(0x12345678),
            bit.band(0xF0, 0x3C) == 0x30
          }
        end
        "#,
    );
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![vec![
            n(48.0),
            n(16.0),
            t("000000ff"),
            t("FFFF"),
            n(7.0),
            n(240.0),
            n(-1.0),
            n(15.0),
            n(-16.0),
            n(-2_147_483_648.0),
            n(5.0),
            n(2_018_915_346.0),
            n(1.0),
        ]]
    );
}

#[test]
fn unpack_is_table_unpack() {
    let mut p = parser(
        Lua,
        "function parse(f) local a, b, c = unpack({7, 8, 9}) return {a, b, c} end",
    );
    assert_eq!(parse_text(&mut p, "x"), vec![nums(&[7.0, 8.0, 9.0])]);
}

#[test]
fn transform_numbers_and_text() {
    let mut double = transform(Lua, "function transform(v) return v * 2 end");
    assert_eq!(double.transform(n(21.0)).unwrap(), n(42.0));
    assert_eq!(double.transform(n(0.25)).unwrap(), n(0.5));

    let mut gear = transform(
        Lua,
        r#"
        local names = {"first", "second", "third"}
        function transform(v) return names[v] or ("gear " .. v) end
        "#,
    );
    assert_eq!(gear.transform(n(3.0)).unwrap(), t("third"));
    assert_eq!(gear.transform(n(7.0)).unwrap(), t("gear 7"));

    let mut upper = transform(Lua, "function transform(v) return string.upper(v) end");
    assert_eq!(upper.transform(t("abc")).unwrap(), t("ABC"));

    let mut nothing = transform(Lua, "function transform(v) return {} end");
    assert_eq!(nothing.transform(n(1.0)).unwrap(), ScriptValue::Null);
}

#[test]
fn state_persists_between_calls() {
    let mut p = parser(
        Lua,
        "local count = 0 function parse(f) count = count + 1 return {count} end",
    );
    parse_text(&mut p, "a");
    assert_eq!(parse_text(&mut p, "b"), vec![nums(&[2.0])]);
}

#[test]
fn sandbox_refuses_escapes() {
    for (name, call) in [
        ("io.open", "io.open('/etc/passwd')"),
        ("os.execute", "os.execute('true')"),
        ("require", "require('os')"),
        ("dofile", "dofile('/etc/passwd')"),
        ("loadfile", "loadfile('/etc/passwd')"),
        ("load", "load('return 1')"),
        ("collectgarbage", "collectgarbage()"),
        ("debug", "debug.getinfo(1)"),
        ("package", "package.loadlib('x', 'y')"),
    ] {
        let mut p = parser(Lua, &format!("function parse(f) {call} return {{1}} end"));
        let err = p.parse(FrameInput::Text("x")).expect_err(name);
        assert_eq!(err.kind, ScriptErrorKind::Runtime, "{name}: {err}");
    }
    let mut p = parser(
        Lua,
        "function parse(f) return {type(io), type(os), type(debug), type(package), type(coroutine)} end",
    );
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![vec![t("nil"), t("nil"), t("nil"), t("nil"), t("nil")]]
    );
}

#[test]
fn finalizers_are_refused() {
    let err = compile_error(
        Lua,
        "setmetatable({}, {__gc = function() while true do end end}) function parse(f) end",
    );
    assert_eq!(err.kind, ScriptErrorKind::Compile);
    assert!(err.message.contains("__gc"), "{err}");
}

#[test]
fn print_does_not_fail() {
    let mut p = parser(
        Lua,
        "function parse(f) print('frame', f, nil, 1) return {1} end",
    );
    assert_eq!(parse_text(&mut p, "x"), vec![nums(&[1.0])]);
}

#[test]
fn syntax_error_reports_its_line() {
    let err = compile_error(
        Lua,
        "function parse(f)\n  return {1}\n  local x = = 2\nend\n",
    );
    assert_eq!(err.kind, ScriptErrorKind::Compile);
    assert_eq!(err.line, Some(3), "{err}");
}

#[test]
fn runtime_error_reports_its_line() {
    let mut p = parser(
        Lua,
        "function parse(f)\n  local t = nil\n\n  return t.x\nend\n",
    );
    let err = p.parse(FrameInput::Text("x")).unwrap_err();
    assert_eq!(err.kind, ScriptErrorKind::Runtime);
    assert_eq!(err.line, Some(4), "{err}");
    assert!(err.message.contains("nil"), "{err}");

    let mut p = parser(Lua, "function parse(f)\n  error('bad frame')\nend\n");
    let err = p.parse(FrameInput::Text("x")).unwrap_err();
    assert_eq!((err.line, err.message.as_str()), (Some(2), "bad frame"));
}

#[test]
fn missing_entry_function_is_a_compile_error() {
    let err = compile_error(Lua, "local function parse(f) return {} end");
    assert_eq!(err.kind, ScriptErrorKind::Compile);
    assert!(err.message.contains("parse(frame)"), "{err}");

    let err = compile_error(Lua, "parse = 3");
    assert_eq!(err.kind, ScriptErrorKind::Compile);

    // A parser script is not a transform script.
    let err = match sextant_scripting::ScriptTransform::compile(
        Lua,
        "function parse(f) return {} end",
        test_limits(),
        std::sync::Arc::new(sextant_scripting::NoHost),
    ) {
        Ok(_) => panic!("transform() is missing"),
        Err(e) => e,
    };
    assert_eq!(err.kind, ScriptErrorKind::Compile);
}

#[test]
fn top_level_error_is_a_compile_error_with_line() {
    let err = compile_error(Lua, "function parse(f) end\nlocal x = nil\nx()\n");
    assert_eq!(err.kind, ScriptErrorKind::Compile);
    assert_eq!(err.line, Some(3));
}
