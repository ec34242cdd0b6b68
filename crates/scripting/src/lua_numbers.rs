//! The sandbox's `tonumber`: Lua 5.4's base-library function (`luaB_tonumber`, line for line
//! on the C API), except that a plain decimal numeral is converted by Rust's float parser
//! rather than by C's `strtod`.
//!
//! Why: a `parse(frame)` calls `tonumber` once per field of every frame, and in the 8-field
//! parse benchmark glibc's `strtod` (behind Lua's scan of the string for `.xXnN`) was the
//! largest single cost, about a tenth of the time. Rust's `f64::from_str` rounds correctly,
//! as glibc's `strtod` does, so a numeral both accept becomes the same double.
//!
//! What Lua accepts, and what it becomes, stays Lua's in every case: the fast path takes
//! only strings made of digits, signs, one kind of point and exponent letters, and only
//! when Rust's parser accepts the whole string (for such strings its grammar is `strtod`'s
//! decimal grammar); integers follow `l_str2int` exactly, overflow included. Everything
//! else – spaces, hexadecimal, `inf`/`nan`, a numeral Rust refuses, embedded zeros – goes to
//! Lua's own `lua_stringtonumber`. The differential test below runs stock `tonumber` beside
//! this one on hand-picked and generated strings.

use std::ffi::c_int;
use std::slice;

use mlua::ffi::{self, lua_State};

/// Longest string the fast path looks at; longer numerals are rare and go to Lua.
const FAST_MAX_LEN: usize = 48;

/// A numeral's value as Lua converts it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Numeral {
    Integer(ffi::lua_Integer),
    Float(ffi::lua_Number),
}

/// The value of a string made only of `0-9 + - . e E`, when Lua would accept it; `None`
/// when the string has any other byte or is not a numeral Rust's parser reads (Lua then
/// decides).
fn plain_numeral(s: &[u8]) -> Option<Numeral> {
    if s.is_empty() || s.len() > FAST_MAX_LEN {
        return None;
    }
    let mut integer = true;
    for &c in s {
        match c {
            b'0'..=b'9' | b'+' | b'-' => {}
            b'.' | b'e' | b'E' => integer = false,
            _ => return None,
        }
    }
    // `luaO_str2num` tries an integer first; one that overflows is read as a float.
    if integer {
        if let Some(i) = decimal_integer(s) {
            return Some(Numeral::Integer(i));
        }
    }
    // SAFETY: every byte was checked above to be one of thirteen ASCII characters.
    let text = unsafe { std::str::from_utf8_unchecked(s) };
    text.parse::<f64>().ok().map(Numeral::Float)
}

/// `l_str2int` for a decimal numeral without spaces: `None` when it is not one, or when it
/// does not fit (Lua then reads it as a float).
fn decimal_integer(s: &[u8]) -> Option<ffi::lua_Integer> {
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    const MAX_BY_10: u64 = (ffi::lua_Integer::MAX as u64) / 10;
    const MAX_LAST_DIGIT: u8 = (ffi::lua_Integer::MAX as u64 % 10) as u8;
    let mut a: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = c - b'0';
        if a >= MAX_BY_10 && (a > MAX_BY_10 || d > MAX_LAST_DIGIT + u8::from(negative)) {
            return None;
        }
        a = a * 10 + u64::from(d);
    }
    Some(if negative { 0u64.wrapping_sub(a) } else { a } as ffi::lua_Integer)
}

/// `b_str2int`: `s` read as an integer in `base` (2–36), with optional spaces around it;
/// `None` unless all of `s` is such a numeral. Overflow wraps, as in C.
fn base_integer(s: &[u8], base: u64) -> Option<ffi::lua_Integer> {
    // C's `isspace` in the C locale, as Lua's SPACECHARS.
    let space = |c: &u8| matches!(c, b' ' | b'\x0c' | b'\n' | b'\r' | b'\t' | b'\x0b');
    let mut i = s.iter().take_while(|c| space(c)).count();
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    if !s.get(i).is_some_and(u8::is_ascii_alphanumeric) {
        return None;
    }
    let mut n: u64 = 0;
    while let Some(&c) = s.get(i).filter(|c| c.is_ascii_alphanumeric()) {
        let digit = if c.is_ascii_digit() {
            u64::from(c - b'0')
        } else {
            u64::from(c.to_ascii_uppercase() - b'A') + 10
        };
        if digit >= base {
            return None;
        }
        n = n.wrapping_mul(base).wrapping_add(digit);
        i += 1;
    }
    i += s[i..].iter().take_while(|c| space(c)).count();
    (i == s.len()).then_some(if negative { 0u64.wrapping_sub(n) } else { n } as ffi::lua_Integer)
}

/// `tonumber(e [, base])`, as `luaB_tonumber`. Error paths raise Lua errors (a `longjmp`),
/// so nothing here holds a value that needs dropping.
pub(crate) unsafe extern "C-unwind" fn tonumber(state: *mut lua_State) -> c_int {
    if ffi::lua_isnoneornil(state, 2) != 0 {
        if ffi::lua_type(state, 1) == ffi::LUA_TNUMBER {
            ffi::lua_settop(state, 1);
            return 1;
        }
        let mut len = 0;
        let s = ffi::lua_tolstring(state, 1, &mut len);
        if !s.is_null() {
            match plain_numeral(slice::from_raw_parts(s.cast::<u8>(), len)) {
                Some(Numeral::Integer(i)) => {
                    ffi::lua_pushinteger(state, i);
                    return 1;
                }
                Some(Numeral::Float(x)) => {
                    ffi::lua_pushnumber(state, x);
                    return 1;
                }
                None if ffi::lua_stringtonumber(state, s) == len + 1 => return 1,
                None => {}
            }
        }
        ffi::luaL_checkany(state, 1);
    } else {
        let base = ffi::luaL_checkinteger(state, 2);
        ffi::luaL_checktype(state, 1, ffi::LUA_TSTRING);
        let mut len = 0;
        let s = ffi::lua_tolstring(state, 1, &mut len);
        if !(2..=36).contains(&base) {
            ffi::luaL_argerror(state, 2, c"base out of range".as_ptr());
        }
        if let Some(n) = base_integer(slice::from_raw_parts(s.cast::<u8>(), len), base as u64) {
            ffi::lua_pushinteger(state, n);
            return 1;
        }
    }
    ffi::lua_pushnil(state);
    1
}

#[cfg(test)]
mod tests {
    use mlua::{Lua, Value};

    use super::*;

    /// Renders what a call returned, or its error, exactly: integer or float (floats in
    /// `%a`, so no rounding hides a difference), and how many values came back.
    const RENDER: &str = r#"
        return function(expr)
          local f = load('return ' .. expr)
          local r = table.pack(pcall(f))
          local out = { tostring(r[1]), tostring(r.n - 1) }
          for i = 2, r.n do
            local v = r[i]
            if math.type(v) == 'float' then out[#out + 1] = 'float ' .. string.format('%a', v)
            elseif math.type(v) == 'integer' then out[#out + 1] = 'integer ' .. tostring(v)
            else out[#out + 1] = type(v) .. ' ' .. tostring(v) end
          end
          return table.concat(out, ' | ')
        end
    "#;

    fn renderer(lua: &Lua) -> mlua::Function {
        lua.load(RENDER).eval().unwrap()
    }

    fn ours() -> Lua {
        let lua = Lua::new();
        // SAFETY: `tonumber` follows the C function protocol.
        let f = unsafe { lua.create_c_function(tonumber) }.unwrap();
        lua.globals().set("tonumber", f).unwrap();
        lua
    }

    /// Each expression evaluated with stock `tonumber` and with this one, compared.
    fn differences(expressions: &[String]) -> Vec<String> {
        let (stock, fast) = (Lua::new(), ours());
        let (a, b) = (renderer(&stock), renderer(&fast));
        let mut wrong = Vec::new();
        for e in expressions {
            let x: String = a.call(e.as_str()).unwrap();
            let y: String = b.call(e.as_str()).unwrap();
            if x != y {
                wrong.push(format!("{e}: stock {x}, ours {y}"));
            }
        }
        wrong
    }

    /// A Lua string literal of `s`, byte for byte.
    fn literal(s: &[u8]) -> String {
        let mut out = String::from("\"");
        for &c in s {
            out.push_str(&format!("\\{c}"));
        }
        out.push('"');
        out
    }

    #[test]
    fn tonumber_agrees_with_stock_lua_on_every_kind_of_argument() {
        let strings: &[&[u8]] = &[
            b"0",
            b"1",
            b"-1",
            b"+1",
            b"007",
            b"-0",
            b"0.0",
            b"-0.0",
            b"3.14159",
            b"0.841",
            b"-1013.25",
            b"1e5",
            b"1E5",
            b"1e+5",
            b"1e-5",
            b"2.5e-3",
            b".5",
            b"5.",
            b"-.5",
            b"+.5",
            b".",
            b"-",
            b"+",
            b"",
            b"e5",
            b"1e",
            b"1e+",
            b"1.2.3",
            b"1..2",
            b"--1",
            b"+-1",
            b"1-2",
            b"1e5e5",
            b"12e",
            b"9223372036854775807",
            b"9223372036854775808",
            b"-9223372036854775808",
            b"-9223372036854775809",
            b"18446744073709551616",
            b"99999999999999999999999999",
            b"1e308",
            b"1e309",
            b"-1e309",
            b"1e-400",
            b"4.9e-324",
            b"2.2250738585072011e-308",
            b"0.1",
            b"0.30000000000000004",
            b"123456789012345678901234567890.5",
            b" 1",
            b"1 ",
            b"\t-2.5\n",
            b"0x10",
            b"0X1p4",
            b"-0x10",
            b"0x",
            b"0xffffffffffffffffff",
            b"inf",
            b"nan",
            b"-inf",
            b"1.5n",
            b"infinity",
            b"1\x002",
            b"\x00",
            b"12abc",
            b"1_000",
            b"\xe2\x80\x8b1",
            b"1.0000000000000000000000000000000000000000000001",
        ];
        let mut expressions: Vec<String> = strings
            .iter()
            .map(|s| format!("tonumber({})", literal(s)))
            .collect();
        for (s, base) in [
            ("'ff'", "16"),
            ("'FF'", "16"),
            ("' -ff '", "16"),
            ("'zz'", "36"),
            ("'102'", "2"),
            ("'11'", "2"),
            ("''", "10"),
            ("'-'", "10"),
            ("'7fffffffffffffff1'", "16"),
            ("'10'", "1"),
            ("'10'", "37"),
            ("'10'", "'16'"),
            ("'10'", "1.5"),
            ("10", "16"),
            ("'1\\0'", "10"),
            ("'10'", "nil"),
            ("'1e1'", "nil"),
            ("'1_0'", "36"),
        ] {
            expressions.push(format!("tonumber({s}, {base})"));
        }
        for other in [
            "tonumber()",
            "tonumber(nil)",
            "tonumber(true)",
            "tonumber({})",
            "tonumber(print)",
            "tonumber(42)",
            "tonumber(4.5)",
            "tonumber(-0.0)",
            "tonumber(1/0)",
            "tonumber(math.mininteger)",
            "tonumber(setmetatable({}, {__tostring = function() return '5' end}))",
        ] {
            expressions.push(other.to_owned());
        }
        assert_eq!(differences(&expressions), Vec::<String>::new());
    }

    #[test]
    fn tonumber_agrees_with_stock_lua_on_generated_numerals() {
        // Strings over the fast path's alphabet and its neighbours, from a fixed seed.
        const ALPHABET: &[u8] = b"0123456789012345678901234567890123456789.....eEE++--  x";
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let expressions: Vec<String> = (0..40_000)
            .map(|_| {
                let len = (next() % 26) as usize;
                let s: Vec<u8> = (0..len)
                    .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                    .collect();
                format!("tonumber({})", literal(&s))
            })
            .collect();
        let accepted = {
            let lua = ours();
            let f = renderer(&lua);
            expressions
                .iter()
                .map(|e| f.call::<String>(e.as_str()).unwrap())
                .filter(|r| r.contains("| integer ") || r.contains("| float "))
                .count()
        };
        // The generated set must exercise conversions, not only refusals.
        assert!(accepted > 2_000, "only {accepted} numerals accepted");
        assert_eq!(differences(&expressions), Vec::<String>::new());
    }

    #[test]
    fn the_fast_path_reads_plain_numerals_and_leaves_the_rest_to_lua() {
        let cases: &[(&[u8], Option<Numeral>)] = &[
            (b"42", Some(Numeral::Integer(42))),
            (b"-9223372036854775808", Some(Numeral::Integer(i64::MIN))),
            (
                b"9223372036854775808",
                Some(Numeral::Float(9_223_372_036_854_775_808.0)),
            ),
            (b"0.841", Some(Numeral::Float(0.841))),
            (b"1e3", Some(Numeral::Float(1000.0))),
            (b" 1", None),
            (b"0x10", None),
            (b"nan", None),
            (b"1e", None),
        ];
        for (s, expected) in cases {
            assert_eq!(
                plain_numeral(s),
                *expected,
                "{}",
                String::from_utf8_lossy(s)
            );
        }
        // Values must also match through Lua; `Value` equality covers integer vs float.
        let lua = ours();
        let v: Value = lua.load("return tonumber('0.841')").eval().unwrap();
        assert_eq!(v, Value::Number(0.841));
    }
}
