//! The sandbox's own Lua pattern functions: a differential test against stock Lua 5.4 on
//! ordinary patterns, and proof that a backtracking pattern is stopped and the engine runs on.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use sextant_scripting::{
    FrameInput, Language::Lua, Limits, NoHost, ScriptErrorKind, ScriptParser, ScriptValue,
};

/// Each case is a Lua expression. Results are rendered with their types, errors with their
/// message (position included), so stock Lua and the sandbox must agree exactly.
const CASES: &[&str] = &[
    // find: plain text, specials, init (incl. negative and out of range), plain flag
    r#"("hello world"):find("o w")"#,
    r#"("hello world"):find("o", 6)"#,
    r#"("hello world"):find("o", -3)"#,
    r#"("hello world"):find("o", -100)"#,
    r#"("hello world"):find("o", 0)"#,
    r#"("hello world"):find("o", 100)"#,
    r#"("hello"):find("", 6)"#,
    r#"("hello"):find("", 7)"#,
    r#"("hello"):find("")"#,
    r#"("hello"):find("", -2)"#,
    r#"("a.b.c"):find(".", 1, true)"#,
    r#"("a.b.c"):find("%.", 3)"#,
    r#"("a+b"):find("+", 1, true)"#,
    r#"("a+b"):find("a+b", 1, 1)"#,
    r#"("a+b"):find("a+b", 1, false)"#,
    r#"("x^y"):find("^", 1, true)"#,
    r#"("x^y"):find("x^y")"#,
    r#"("abc"):find("b", 2.0)"#,
    r#"("abc"):find("b", "2")"#,
    r#"string.find(12345, 34)"#,
    r#"string.find(1.5, "%.")"#,
    r#"("aaa"):find("a-", 2)"#,
    r#"("abc"):find("(b)(c)")"#,
    r#"("abc"):find("()b()")"#,
    r#"("abc"):find("^b")"#,
    r#"("abc"):find("^a")"#,
    r#"("abc"):find("c$")"#,
    r#"("abc"):find("b$")"#,
    r#"("a$c"):find("$c")"#,
    r#"("a$c"):find("a$c")"#,
    r#"("abc"):find("^abc$")"#,
    r#"(""):find("^$")"#,
    r#"(""):find("x*")"#,
    r#"("\0a\0"):find("%z")"#,
    r#"("a\0b"):find("\0", 1, true)"#,
    r#"("a\0b"):find("[\0]")"#,
    // match: classes and their complements
    r#"("Hello, World 42!"):match("%a+")"#,
    r#"("Hello, World 42!"):match("%A+")"#,
    r#"("Hello, World 42!"):match("%d+")"#,
    r#"("Hello, World 42!"):match("%D+")"#,
    r#"("Hello, World 42!"):match("%l+")"#,
    r#"("Hello, World 42!"):match("%L+")"#,
    r#"("Hello, World 42!"):match("%u+")"#,
    r#"("Hello, World 42!"):match("%U+")"#,
    r#"("Hello, World 42!"):match("%p+")"#,
    r#"("Hello, World 42!"):match("%P+")"#,
    r#"("Hello, World 42!"):match("%w+")"#,
    r#"("Hello, World 42!"):match("%W+")"#,
    r#"("Hello, World 42!"):match("%s+")"#,
    r#"("Hello, World 42!"):match("%S+")"#,
    r#"("Hello, World 42!"):match("%g+")"#,
    r#"("Hello, World 42!"):match("%G+")"#,
    r#"("0x1F zz"):match("%x+")"#,
    r#"("0x1F zz"):match("%X+")"#,
    r#"("a\1\2\127b"):match("%c+")"#,
    r#"("a\1\2\127b"):match("%C+")"#,
    r#"(" \t\n\v\f\rx"):match("%s*()")"#,
    r#"("\200\201abc"):match("%a+")"#,
    r#"("\200\201abc"):match("[\200-\255]+")"#,
    r#"("%d"):match("%%d")"#,
    r#"("a.b"):match("%.")"#,
    r#"("x]y"):match("%]")"#,
    // sets and ranges
    r#"("2024-11-30"):match("[%d-]+")"#,
    r#"("hello"):match("[a-f]+")"#,
    r#"("hello"):match("[^a-f]+")"#,
    r#"("a-b"):match("[a%-]+")"#,
    r#"("a-b"):match("[-a]+")"#,
    r#"("a-b"):match("[a-]+")"#,
    r#"("x]y"):match("[]]")"#,
    r#"("x]y"):match("[^]]+")"#,
    r#"("x^y"):match("[x^]+")"#,
    r#"("x^y"):match("[%^]")"#,
    r#"("ab12"):match("[%a%d]+")"#,
    r#"("ab12 "):match("[^%s]+")"#,
    r#"("zzz"):match("[z-a]")"#,
    r#"("[x]"):match("%[(.-)%]")"#,
    // repetition: * + - ? greedy and lazy
    r#"("aaab"):match("a*")"#,
    r#"("aaab"):match("a+b")"#,
    r#"("aaab"):match("a-b")"#,
    r#"("aaab"):match("a-")"#,
    r#"("aaab"):match("^(a-)(a*)b$")"#,
    r#"("color colour"):match("colou?r")"#,
    r#"("colr"):match("colou?r")"#,
    r#"("<a><b>"):match("<.*>")"#,
    r#"("<a><b>"):match("<.->")"#,
    r#"("key = value"):match("^(%w+)%s*=%s*(%w+)$")"#,
    r#"("  trim me  "):match("^%s*(.-)%s*$")"#,
    r#"("abc"):match(".-$")"#,
    r#"("abc"):match("x?y?z?")"#,
    r#"("aa"):match("a?a?a")"#,
    // captures, position captures, back-references
    r#"("hello world"):match("(h)(e)(l)(l)(o)")"#,
    r#"("hello world"):match("((h)(e))")"#,
    r#"("hello world"):match("()ll()")"#,
    r#"("hello"):match("()")"#,
    r#"("hello"):match("(h)()")"#,
    r#"("say 'hi' now"):match("(['\"])(.-)%1")"#,
    r#"("abab"):match("(ab)%1")"#,
    r#"("abba"):match("(a)(b)%2%1")"#,
    r#"("aXa"):match("()X%1")"#,
    r#"("x = 'a' y = \"b\""):match("([\"'])(.-)%1", 8)"#,
    // %b and %f
    r#"("f(a(b)c) d"):match("%b()")"#,
    r#"("f(a(b c) d"):match("%b()")"#,
    r#"("[[x]]"):match("%b[]")"#,
    r#"("|a|b|"):match("%b||")"#,
    r#"("THE (quick) fox"):find("%f[%a]%a+")"#,
    r#"("THE (quick) fox"):find("%f[%a]%a+", 5)"#,
    r#"("hello"):match("%f[%l]")"#,
    r#"("hello"):match("o%f[%z]")"#,
    r#"("hello"):match("()%f[^%z]")"#,
    r#"("one two"):gsub("%f[%w]%w+", "<%0>")"#,
    r#"("a\0b"):match("%f[%z].")"#,
    // gmatch: words, pairs, empty matches, anchors are literal, init
    r#"each(("one two  three"):gmatch("%a+"))"#,
    r#"each(("k1=v1, k2=v2"):gmatch("(%w+)=(%w+)"))"#,
    r#"each(("abc"):gmatch(""))"#,
    r#"each(("abc"):gmatch("x*"))"#,
    r#"each(("a,b,,c"):gmatch("([^,]*)"))"#,
    r#"each(("a,b,,c"):gmatch("[^,]+"))"#,
    r#"each(("^a^b"):gmatch("^%a"))"#,
    r#"each(("abc"):gmatch("()"))"#,
    r#"each(("hello world"):gmatch("o", 6))"#,
    r#"each(("hello world"):gmatch("o", -3))"#,
    r#"each(("hello"):gmatch(".", 10))"#,
    r#"each(string.gmatch(1234, "%d"))"#,
    r#"each(("a1b2"):gmatch("%a(%d)"))"#,
    // gsub: string replacements with %0-%9 and %%
    r#"("hello world"):gsub("o", "0")"#,
    r#"("hello world"):gsub("(o)", "[%1]")"#,
    r#"("hello world"):gsub("%w+", "%0 %0")"#,
    r#"("hello world"):gsub("(%w+) (%w+)", "%2 %1")"#,
    r#"("hello"):gsub("l", "%%")"#,
    r#"("hello"):gsub("l", "%1")"#,
    r#"("hello"):gsub("()l", "%1")"#,
    r#"("hello"):gsub("", "-")"#,
    r#"("abc"):gsub("%w", "%0%0", 2)"#,
    r#"("abc"):gsub("%w", "x", 0)"#,
    r#"("abc"):gsub("%w", "x", -1)"#,
    r#"("abc"):gsub("%w", "x", 2.0)"#,
    r#"("abc"):gsub("^%w", "x")"#,
    r#"("abc"):gsub("^", ">")"#,
    r#"("abc"):gsub("$", "<")"#,
    r#"("abc"):gsub("x*", "-")"#,
    r#"("abc"):gsub("b*", "-")"#,
    r#"("abc"):gsub("b", 5)"#,
    r#"("abc"):gsub("b", 1.5)"#,
    r#"("abc"):gsub("b", 2.0)"#,
    r#"("abc"):gsub("z", "y")"#,
    r#"string.gsub(123, 2, 9)"#,
    r#"("a\0b"):gsub("%z", "0")"#,
    r#"("\255\254"):gsub(".", "%0%0")"#,
    // gsub: table and function replacements
    r#"("$name is $age"):gsub("%$(%w+)", {name = "Ann", age = 42})"#,
    r#"("$name is $x"):gsub("%$(%w+)", {name = "Ann"})"#,
    r#"("$a $b"):gsub("%$(%w+)", {a = false, b = 1.25})"#,
    r#"("abc"):gsub("()", {[1] = "<", [4] = ">"})"#,
    r#"("hello world"):gsub("%w+", string.upper)"#,
    r#"("hello world"):gsub("(%w)(%w*)", function(a, b) return a:upper() .. b end)"#,
    r#"("a b c"):gsub("%w", function(w) if w == "b" then return nil end return w .. w end)"#,
    r#"("a b c"):gsub("%w", function() return false end)"#,
    r#"("1 2 3"):gsub("%d", function(d) return tonumber(d) * 2 end)"#,
    r#"("abc"):gsub("()(.)", function(p, c) return p .. c end)"#,
    r#"("x"):gsub("x", function() return {} end)"#,
    r#"("x"):gsub("x", {x = {}})"#,
    r#"("x"):gsub("x", function() error("boom") end)"#,
    r#"("ab"):gsub(".", function(c) return (c:gsub(".", "%0%0")) end)"#,
    r#"("k=v"):gsub("(%w)=(%w)", "%2=%1", 1)"#,
    // malformed patterns and capture errors
    r#"("abc"):find("%")"#,
    r#"("abc"):find("a%")"#,
    r#"("abc"):find("x%")"#,
    r#"("abc"):match("[a")"#,
    r#"("abc"):match("[a%")"#,
    r#"("abc"):match("[]")"#,
    r#"("abc"):match("[^]")"#,
    r#"("abc"):match("(a")"#,
    r#"("abc"):match("a)")"#,
    r#"("abc"):match("%1")"#,
    r#"("abc"):match("(a%1)")"#,
    r#"("abc"):match("(a)%2")"#,
    r#"("abc"):match("%0")"#,
    r#"("abc"):match("%b")"#,
    r#"("abc"):match("%ba")"#,
    r#"("abc"):match("%f")"#,
    r#"("abc"):match("%fa")"#,
    r#"("abc"):match("%f[a")"#,
    r#"("abc"):gsub("b", "%2")"#,
    r#"("abc"):gsub("(b)", "%2")"#,
    r#"("abc"):gsub("b", "%x")"#,
    r#"("abc"):gsub("b", "x%")"#,
    r#"("abc"):gsub("(b", "x")"#,
    r#"each(("abc"):gmatch("%"))"#,
    r#"each(("abc"):gmatch("(()"))"#,
    r#"("a"):rep(40):match(("(a)"):rep(33))"#,
    r#"("a"):rep(300):match(("a?"):rep(300))"#,
    r#"("a"):rep(250):match(("(a)"):rep(20) .. ("a?"):rep(210))"#,
    // bad arguments
    r#"string.find(nil, "x")"#,
    r#"string.find({}, "x")"#,
    r#"string.find("x", {})"#,
    r#"string.match("x", true)"#,
    r#"("x"):find("x", 1.5)"#,
    r#"("x"):find("x", "y")"#,
    r#"("x"):find("x", {})"#,
    r#"string.gmatch("x", "x", 2.5)"#,
    r#"("x"):gsub("x", true)"#,
    r#"("x"):gsub("x", nil)"#,
    r#"("x"):gsub("x", "y", "z")"#,
    r#"("x"):gsub({}, "y")"#,
];

/// Renders each case's results (or error) the same way in both engines. A script appends
/// `cases` (functions) and `names` (what each case is, for failure messages).
const HARNESS: &str = r#"
local function show(v)
  local t = type(v)
  if t == 'string' then
    local out = {}
    for i = 1, #v do
      local b = v:byte(i)
      out[i] = (b < 32 or b > 126 or b == 92) and ('\\' .. b) or string.char(b)
    end
    return '"' .. table.concat(out) .. '"'
  end
  if t == 'number' then return math.type(v) .. ':' .. tostring(v) end
  if t == 'nil' or t == 'boolean' then return tostring(v) end
  return t
end

local function render(r)
  local parts = {}
  for i = 1, r.n do parts[i] = show(r[i]) end
  return r.n .. '[' .. table.concat(parts, ', ') .. ']'
end

-- Every result of an iterator, until it returns nothing or nil.
function each(it)
  local out = {}
  for _ = 1, 100 do
    local r = table.pack(it())
    out[#out + 1] = render(r)
    if r[1] == nil then break end
  end
  return table.concat(out, ' ')
end

function parse(frame)
  local ok, r = pcall(function()
    -- Not a tail call, so errors carry the case's line as in any script.
    local r = table.pack(cases[tonumber(frame)]())
    return r
  end)
  if ok then return { 'ok ' .. render(r) } end
  return { 'error ' .. show(r) }
end

function describe(i) return names[i] end
"#;

/// Every pattern of this grid against every subject, through every function.
const GRID: &str = r#"
local subjects = {
  "", "a", "abc", "aaa", "hello world", "a,b,,c", "(a(b)c) [x]", "  x y  ", "k1=v1;k2=v2",
  "1.5,-2\r\n,,x\n", ",", "((b)",
  "-12.5e3", "\0\1\255", "x^y$z%", "THE (quick) fox",
}
local patterns = {
  "", "a", "a*", "a+", "a-", "a?", ".", ".-", ".*", "^a", "a$", "^$", "%a+", "%A", "%d+%.?%d*",
  "%s*", "%S+", "%w+", "%p", "[%w_]+", "[^,]*", "[^%s]+", "[a-c]+", "[%^%$]", "(a)", "(%w)(%w)",
  "()a()", "(a*(.)%w(%s*))", "(%w+)=(%w+)", "%b()", "%b[]", "%f[%w]%w+", "%f[%W]", "(.)%1",
  "^(.-)%s*$", "[%-.]", "%x+", "%u%l+", "x^y", "$", "\0", "[\0-\31]", "%c",
  "([^,]+)", "([^,\r\n]+)", "(%w+)", "([^)]+)", "[^ ]+", "[^(b]+", "([^%s]+)", "(.+)",
}
cases, names = {}, {}
local function add(name, f) cases[#cases + 1] = f; names[#names + 1] = name end
for _, s in ipairs(subjects) do
  for _, p in ipairs(patterns) do
    local d = string.format('(%q, %q)', s, p)
    add('find' .. d, function() return s:find(p) end)
    add('find from 2' .. d, function() return s:find(p, 2) end)
    add('find from -3' .. d, function() return s:find(p, -3) end)
    add('match' .. d, function() return s:match(p) end)
    add('gmatch' .. d, function() return each(s:gmatch(p)) end)
    add('gsub' .. d, function() return s:gsub(p, '<%0>') end)
    add('gsub at most 2' .. d, function() return s:gsub(p, '%1', 2) end)
    add('gsub by function' .. d, function()
      return s:gsub(p, function(...) return select('#', ...) .. '' end)
    end)
  end
end
"#;

/// Random short patterns, malformed ones included, on random short subjects. Lengths are
/// kept small so that even the worst backtracking stays cheap for the stock matcher.
const RANDOM: &str = r#"
math.randomseed(20241201)
local atoms = {
  "a", "b", ".", "%a", "%d", "%s", "%w", "%A", "%p", "[ab]", "[^a]", "[a-c]", "[%d(]", "%b()",
  "%f[%a]", "%f[%A]", "(", ")", "()", "%1", "%2", "^", "$", "*", "+", "-", "?", "%", "[", "]",
}
local letters = { "a", "b", "c", "1", " ", "(", ")", "%", "^" }
local function pick(list, most)
  local out = {}
  for i = 1, math.random(0, most) do out[i] = list[math.random(#list)] end
  return table.concat(out)
end
cases, names = {}, {}
local function add(name, f) cases[#cases + 1] = f; names[#names + 1] = name end
for _ = 1, 1500 do
  local s, p = pick(letters, 8), pick(atoms, 5)
  local d = string.format('(%q, %q)', s, p)
  add('find' .. d, function() return s:find(p) end)
  add('match' .. d, function() return s:match(p, -4) end)
  add('gmatch' .. d, function() return each(s:gmatch(p)) end)
  add('gsub' .. d, function() return s:gsub(p, '[%0]') end)
end
"#;

fn cases_script() -> String {
    let mut source = String::from(HARNESS);
    source.push_str("cases, names = {}, {}\n");
    for case in CASES {
        source.push_str(&format!(
            "cases[#cases + 1] = function() return {case} end; names[#names + 1] = [==[{case}]==]\n"
        ));
    }
    source
}

/// Runs every case of a harness script in a plain Lua 5.4 state, whose `string` functions
/// are the stock C ones, and in the sandbox; returns the number of cases and each one
/// whose rendered answer differs.
fn compare_with_stock(source: &str) -> (usize, Vec<String>) {
    let stock = mlua::Lua::new();
    stock.load(source).set_name("=script").exec().unwrap();
    let globals = stock.globals();
    let parse: mlua::Function = globals.get("parse").unwrap();
    let describe: mlua::Function = globals.get("describe").unwrap();
    let count = globals.get::<mlua::Table>("cases").unwrap().raw_len();

    let mut sandbox = patient_parser(source);
    let mut differences = Vec::new();
    for i in 1..=count {
        let frame = i.to_string();
        let want: String = parse
            .call::<mlua::Table>(frame.as_str())
            .and_then(|out| out.get(1))
            .unwrap();
        let got = match sandbox.parse(FrameInput::Text(&frame)) {
            Ok(rows) => match &rows[..] {
                [row] => match &row[..] {
                    [ScriptValue::Text(text)] => text.clone(),
                    other => format!("{other:?}"),
                },
                other => format!("{other:?}"),
            },
            Err(e) => format!("failed: {e}"),
        };
        if got != want {
            let name: String = describe.call(i).unwrap();
            differences.push(format!("{name}\n   stock: {want}\n  ported: {got}"));
        }
    }
    (count, differences)
}

fn assert_same_as_stock(source: &str) {
    let (count, differences) = compare_with_stock(source);
    assert!(count > 0);
    assert!(
        differences.is_empty(),
        "{} of {count} cases differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

#[test]
fn ordinary_patterns_behave_as_stock_lua() {
    assert_same_as_stock(&cases_script());
}

#[test]
fn a_grid_of_patterns_and_subjects_behaves_as_stock_lua() {
    assert_same_as_stock(&format!("{HARNESS}{GRID}"));
}

#[test]
fn random_patterns_behave_as_stock_lua() {
    assert_same_as_stock(&format!("{HARNESS}{RANDOM}"));
}

#[test]
fn string_methods_use_the_ported_functions() {
    // The string metatable indexes the library table, so methods are replaced too.
    let mut p = parser(
        Lua,
        r#"function parse(f)
             return { string.find == ("").find, string.gmatch == f.gmatch,
                      string.gsub == f.gsub, string.match == f.match }
           end"#,
    );
    assert_eq!(parse_text(&mut p, "x"), vec![nums(&[1.0, 1.0, 1.0, 1.0])]);
}

/// Limits whose time budget is far beyond the step budget, so the step budget (not the
/// clock) decides and the error is deterministic.
fn patient_limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(600),
        ..test_limits()
    }
}

fn patient_parser(source: &str) -> ScriptParser {
    ScriptParser::compile(Lua, source, patient_limits(), Arc::new(NoHost)).expect("compiles")
}

const BACKTRACKING: &str = r#"
local long = ("a"):rep(1e4)
function parse(frame)
  if frame == "find" then return { long:find(".-.-.-.-b") } end
  if frame == "match" then return { long:match("(.-)(.-)(.-)(.-)b") } end
  if frame == "gmatch" then
    local n = 0
    for _ in long:gmatch(".-.-.-.-b") do n = n + 1 end
    return { n }
  end
  if frame == "gsub" then return { (long:gsub(".-.-.-.-b", "")) } end
  if frame == "caught" then
    -- The budget ends the call like a timeout: pcall cannot swallow it.
    local ok = pcall(string.find, long, ".-.-.-.-b")
    return { ok and 1 or 0 }
  end
  local out = {}
  for v in frame:gmatch("[^,]+") do out[#out + 1] = tonumber(v) end
  return out
end
"#;

#[test]
fn backtracking_patterns_exhaust_the_step_budget() {
    let mut p = patient_parser(BACKTRACKING);
    for (frame, line) in [
        ("find", 4),
        ("match", 5),
        ("gmatch", 8),
        ("gsub", 11),
        ("caught", 14),
    ] {
        let err = p.parse(FrameInput::Text(frame)).unwrap_err();
        assert_eq!(err.kind, ScriptErrorKind::Timeout, "{frame}: {err}");
        assert!(
            err.message
                .starts_with("pattern matching exceeded its step budget ("),
            "{frame}: {err}"
        );
        assert!(
            err.message
                .ends_with("simplify the pattern or shorten the subject"),
            "{frame}: {err}"
        );
        assert_eq!(err.line, Some(line), "{frame}: {err}");
        // The pipeline keeps running: the same engine parses the next frame.
        assert_eq!(parse_text(&mut p, "1,2,3"), vec![nums(&[1.0, 2.0, 3.0])]);
    }
    assert!(!p.is_disabled());
}

#[test]
fn the_time_limit_applies_inside_the_matcher() {
    // A subject long enough that its step budget outlasts the 50 ms time limit.
    let mut p = parser(
        Lua,
        r#"
        local long = ("a"):rep(1e6)
        function parse(frame)
          if frame == "slow" then return { long:find(".-.-b") } end
          return { #frame }
        end
        "#,
    );
    let err = p.parse(FrameInput::Text("slow")).unwrap_err();
    assert_eq!(err.kind, ScriptErrorKind::Timeout, "{err}");
    assert_eq!(err.message, "call exceeded 50 ms");
    assert_eq!(parse_text(&mut p, "abc"), vec![nums(&[3.0])]);
}

#[test]
fn repeated_budget_exhaustion_disables_like_timeouts() {
    let mut p = patient_parser(BACKTRACKING);
    for _ in 0..3 {
        assert_eq!(
            p.parse(FrameInput::Text("find")).unwrap_err().kind,
            ScriptErrorKind::Timeout
        );
    }
    assert!(p.is_disabled());
}

#[test]
fn caught_pattern_errors_are_strings_with_a_position() {
    let mut p = parser(
        Lua,
        r#"
        function parse(f)
          local ok, err = pcall(function()
            local r = f:find("%")
            return r
          end)
          local ok2, err2 = pcall(string.gsub, f, "x", function() error("boom") end)
          return { type(err), err, err2 }
        end
        "#,
    );
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![vec![
            t("string"),
            t("script:4: malformed pattern (ends with '%')"),
            t("script:7: boom"),
        ]]
    );
}

#[test]
fn uncaught_pattern_errors_report_their_line() {
    let mut p = parser(
        Lua,
        "function parse(f)\n  local a = 1\n  return { f:match('[a') }\nend",
    );
    let err = p.parse(FrameInput::Text("x")).unwrap_err();
    assert_eq!(err.kind, ScriptErrorKind::Runtime);
    assert_eq!(err.line, Some(3), "{err}");
    assert_eq!(err.message, "malformed pattern (missing ']')");
}

#[test]
fn gsub_results_are_held_to_the_memory_cap() {
    // 1e5 matches × 1 KiB = 100 MiB, beyond the 16 MiB cap of the test limits.
    let mut p = patient_parser(
        r#"
        local subject, big = ("x"):rep(1e5), ("y"):rep(1024)
        function parse(f)
          if f == "bomb" then return { #subject:gsub("x", big) } end
          return { 1 }
        end
        "#,
    );
    let err = p.parse(FrameInput::Text("bomb")).unwrap_err();
    assert_eq!(err.kind, ScriptErrorKind::OutOfMemory, "{err}");
    assert_eq!(parse_text(&mut p, "ok"), vec![nums(&[1.0])]);
}

/// Asserts that `frame` fails with the step-budget error at `line` and that the same engine
/// then parses an ordinary frame.
fn assert_budget_exhausted(p: &mut ScriptParser, frame: &str, line: u32) {
    let err = p.parse(FrameInput::Text(frame)).unwrap_err();
    assert_eq!(err.kind, ScriptErrorKind::Timeout, "{frame}: {err}");
    assert!(
        err.message
            .starts_with("pattern matching exceeded its step budget ("),
        "{frame}: {err}"
    );
    assert_eq!(err.line, Some(line), "{frame}: {err}");
    assert_eq!(parse_text(p, "1,2,3"), vec![nums(&[1.0, 2.0, 3.0])]);
}

#[test]
fn long_sets_are_charged_for_every_byte_they_scan() {
    // Bytes of the subject are tested against a 20 000-byte set they are not in. Charged by
    // the set's length, the 30 M steps of a 20 000-byte subject are gone after about 1 500
    // tests; charged one step a test, `*` and `-` would scan 4·10⁸ bytes of set for every
    // start position, and the others would run to the end of the subject.
    let mut p = patient_parser(
        r#"
        local subject, set = ("a"):rep(2e4), ("b"):rep(2e4)
        function parse(frame)
          if frame == "star" then return { subject:find("[^" .. set .. "]*x") } end
          if frame == "lazy" then return { subject:find("[^" .. set .. "]-x") } end
          if frame == "frontier" then return { subject:find("%f[" .. set .. "]x") } end
          if frame == "once" then return { subject:find("[" .. set .. "]") } end
          if frame == "runs" then for _ in subject:gmatch("[" .. set .. "]+") do end end
          local out = {}
          for v in frame:gmatch("[^,]+") do out[#out + 1] = tonumber(v) end
          return out
        end
        "#,
    );
    assert_budget_exhausted(&mut p, "star", 4);
    assert_budget_exhausted(&mut p, "lazy", 5);
    assert_budget_exhausted(&mut p, "frontier", 6);
    assert_budget_exhausted(&mut p, "once", 7);
    assert_budget_exhausted(&mut p, "runs", 8);
    assert!(!p.is_disabled());
}

#[test]
fn sets_of_ordinary_size_fit_the_budget() {
    // A 1 000-byte set tested against every byte of a 10 000-byte subject (mostly bytes it
    // must be scanned in full for), through every function: linear work, so it fits.
    let mut p = patient_parser(
        r#"
        local set = {}
        for i = 1, 1000 do set[i] = string.char(65 + i % 26) end
        set = table.concat(set)
        local subject = ("a,"):rep(5e3)
        function parse(frame)
          local word = "[^" .. set .. ",]+"
          local n = 0
          for _ in subject:gmatch(word) do n = n + 1 end
          local _, replaced = subject:gsub(word, "%0")
          return { n, replaced, #subject:match("[a,%d" .. set .. "]*"),
                   subject:find("[" .. set .. ",]+$") }
        end
        "#,
    );
    assert_eq!(
        parse_text(&mut p, "x"),
        vec![nums(&[5e3, 5e3, 1e4, 1e4, 1e4])]
    );
}

#[test]
fn gsub_replacements_are_charged_for_their_length() {
    // Each of the 10 001 empty matches walks a replacement of 10⁶ `%0`s that add nothing,
    // so the memory cap never stops it; charged by the replacement's length this takes the
    // budget after about ten matches.
    let mut p = patient_parser(
        r#"
        local subject, repl = ("x"):rep(1e4), ("%0"):rep(1e6)
        function parse(frame)
          if frame == "gsub" then return { (subject:gsub("", repl)) } end
          local out = {}
          for v in frame:gmatch("[^,]+") do out[#out + 1] = tonumber(v) end
          return out
        end
        "#,
    );
    assert_budget_exhausted(&mut p, "gsub", 4);
    assert!(!p.is_disabled());
}
