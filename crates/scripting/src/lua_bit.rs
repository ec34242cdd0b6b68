//! LuaJIT's `bit` library for the Lua 5.4 sandbox, as C functions: Serial Studio's Lua
//! parsers call `bit.band`, `bit.bxor`, `bit.lshift`… for checksums and binary fields, often
//! once per byte of a frame.
//!
//! Why native: the library was Lua code in the sandbox's prelude (each call a closure, a
//! vararg fold and a conversion in Lua), and Serial Studio's NMEA template, which XORs every
//! byte of a sentence for its checksum, spent most of its time there.
//!
//! Semantics are LuaJIT's, as the prelude had them (the prelude's code is the oracle of
//! the differential test below): every operand is reduced to a signed 32-bit integer – an
//! integral number (or a string of one) wraps modulo 2^32; another number is rounded to
//! the nearest integer, ties to even, after reduction modulo 2^32; NaN and ±∞ give 0; any
//! other value is an error naming its type – and every result is a signed 32-bit integer.

use std::ffi::c_int;

use mlua::ffi::{self, lua_State};
use mlua::{Lua, Table};

/// A number's low 32 bits, as a signed integer.
fn wrap(value: i64) -> i64 {
    i64::from(value as u32 as i32)
}

/// A float reduced as LuaJIT's `tobit` does: modulo 2^32 (Lua's `%`: the result takes the
/// divisor's sign), then rounded half to even.
fn float_bits(x: f64) -> i64 {
    const TWO_32: f64 = 4_294_967_296.0;
    if !x.is_finite() {
        return 0;
    }
    let mut r = x % TWO_32;
    if r < 0.0 {
        r += TWO_32;
    }
    let floor = r.floor();
    let fraction = r - floor;
    // `floor` is at most 2^32, so exact as an integer.
    let mut f = floor as i64;
    if fraction > 0.5 || (fraction == 0.5 && f % 2 == 1) {
        f += 1;
    }
    wrap(f)
}

/// Argument `arg` as a 32-bit operand; raises the library's error for a value that is not
/// a number or a numeral.
unsafe fn operand(state: *mut lua_State, arg: c_int) -> i64 {
    let mut integral = 0;
    // Integers, integral floats, and strings of either (`math.tointeger`).
    let i = ffi::lua_tointegerx(state, arg, &mut integral);
    if integral != 0 {
        return wrap(i);
    }
    let x = match ffi::lua_type(state, arg) {
        ffi::LUA_TNUMBER => ffi::lua_tonumber(state, arg),
        ffi::LUA_TSTRING => {
            let mut len = 0;
            let text = ffi::lua_tolstring(state, arg, &mut len);
            if ffi::lua_stringtonumber(state, text) != len + 1 {
                not_a_number(state, arg);
            }
            let x = ffi::lua_tonumber(state, -1);
            ffi::lua_pop(state, 1);
            x
        }
        _ => not_a_number(state, arg),
    };
    float_bits(x)
}

unsafe fn not_a_number(state: *mut lua_State, arg: c_int) -> ! {
    let kind = ffi::lua_type(state, arg);
    // A missing argument is `nil`, as Lua's `type` says of it.
    let name = if kind == ffi::LUA_TNONE {
        c"nil".as_ptr()
    } else {
        ffi::lua_typename(state, kind)
    };
    ffi::luaL_error(
        state,
        c"bad argument to bit operation (number expected, got %s)".as_ptr(),
        name,
    );
    unreachable!("luaL_error does not return")
}

unsafe fn push(state: *mut lua_State, value: i64) -> c_int {
    ffi::lua_pushinteger(state, value);
    1
}

/// `band`/`bor`/`bxor`: the first argument (`nil` when there is none) folded with each
/// further one, in order.
unsafe fn fold(state: *mut lua_State, op: fn(i64, i64) -> i64) -> c_int {
    let mut acc = operand(state, 1);
    for arg in 2..=ffi::lua_gettop(state) {
        acc = op(acc, operand(state, arg));
    }
    push(state, wrap(acc))
}

/// The shift count of argument `arg`: its operand's low five bits.
unsafe fn shift(state: *mut lua_State, arg: c_int) -> u32 {
    (operand(state, arg) & 31) as u32
}

unsafe extern "C-unwind" fn tobit(state: *mut lua_State) -> c_int {
    push(state, operand(state, 1))
}

unsafe extern "C-unwind" fn band(state: *mut lua_State) -> c_int {
    fold(state, |a, b| a & b)
}

unsafe extern "C-unwind" fn bor(state: *mut lua_State) -> c_int {
    fold(state, |a, b| a | b)
}

unsafe extern "C-unwind" fn bxor(state: *mut lua_State) -> c_int {
    fold(state, |a, b| a ^ b)
}

unsafe extern "C-unwind" fn bnot(state: *mut lua_State) -> c_int {
    push(state, wrap(!operand(state, 1)))
}

unsafe extern "C-unwind" fn lshift(state: *mut lua_State) -> c_int {
    let x = operand(state, 1);
    push(state, wrap(x << shift(state, 2)))
}

unsafe extern "C-unwind" fn rshift(state: *mut lua_State) -> c_int {
    let x = operand(state, 1) & 0xFFFF_FFFF;
    push(state, wrap(x >> shift(state, 2)))
}

unsafe extern "C-unwind" fn arshift(state: *mut lua_State) -> c_int {
    // An arithmetic shift of a 32-bit value is floor division by a power of two.
    let x = operand(state, 1);
    push(state, x >> shift(state, 2))
}

unsafe extern "C-unwind" fn rol(state: *mut lua_State) -> c_int {
    let u = (operand(state, 1) & 0xFFFF_FFFF) as u64;
    let s = shift(state, 2);
    push(state, wrap(((u << s) | (u >> (32 - s))) as i64))
}

unsafe extern "C-unwind" fn ror(state: *mut lua_State) -> c_int {
    let u = (operand(state, 1) & 0xFFFF_FFFF) as u64;
    let s = shift(state, 2);
    push(state, wrap(((u >> s) | (u << (32 - s))) as i64))
}

unsafe extern "C-unwind" fn bswap(state: *mut lua_State) -> c_int {
    let u = operand(state, 1) as u32;
    push(state, i64::from(u.swap_bytes() as i32))
}

/// `tohex(x [, n])`: the low `|n|` hex digits of `x` (8 when `n` is nil), upper case when
/// `n` is negative, at most 8.
unsafe extern "C-unwind" fn tohex(state: *mut lua_State) -> c_int {
    let digits = if ffi::lua_isnoneornil(state, 2) != 0 {
        8
    } else {
        operand(state, 2)
    };
    let upper = digits < 0;
    let digits = digits.abs().min(8) as usize;
    let value = if digits == 0 {
        0
    } else {
        operand(state, 1) & ((1i64 << (4 * digits)) - 1)
    };
    // Written into a buffer on the stack: a Lua error (here only a failed allocation) may
    // leave this frame at any API call, so nothing in it needs dropping.
    let alphabet: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut text = [0u8; 8];
    for (i, byte) in text[..digits].iter_mut().enumerate() {
        *byte = alphabet[((value >> (4 * (digits - 1 - i))) & 0xF) as usize];
    }
    ffi::lua_pushlstring(state, text.as_ptr().cast(), digits);
    1
}

/// The library's functions, by name.
const FUNCTIONS: &[(&str, ffi::lua_CFunction)] = &[
    ("tobit", tobit),
    ("band", band),
    ("bor", bor),
    ("bxor", bxor),
    ("bnot", bnot),
    ("lshift", lshift),
    ("rshift", rshift),
    ("arshift", arshift),
    ("rol", rol),
    ("ror", ror),
    ("bswap", bswap),
    ("tohex", tohex),
];

/// Sets the global `bit` to a table of the library's functions.
pub(crate) fn install(lua: &Lua) -> mlua::Result<()> {
    let bit: Table = lua.create_table()?;
    for &(name, function) in FUNCTIONS {
        // SAFETY: each function follows the C function protocol and takes no upvalues.
        bit.set(name, unsafe { lua.create_c_function(function) }?)?;
    }
    lua.globals().set("bit", bit)
}

#[cfg(test)]
mod tests {
    use mlua::Lua;

    use super::*;

    /// The library as it was, in Lua, checked against LuaJIT when it was written: the
    /// oracle.
    const ORACLE: &str = r#"
local tonumber, tointeger, floor, huge, format, select, type, error =
  tonumber, math.tointeger, math.floor, math.huge, string.format, select, type, error
local function sign(x)
  return ((x & 0xFFFFFFFF) ~ 0x80000000) - 0x80000000
end
local function tobit(x)
  local i = tointeger(x)
  if i then return sign(i) end
  if type(x) ~= 'number' then
    local n = tonumber(x)
    if n == nil then error("bad argument to bit operation (number expected, got " .. type(x) .. ")", 3) end
    x = n
    i = tointeger(x)
    if i then return sign(i) end
  end
  if x ~= x or x == huge or x == -huge then return 0 end
  local r = x % 4294967296.0
  local f = floor(r)
  local d = r - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then f = f + 1 end
  return sign(tointeger(f) or 0)
end
local function fold(op)
  local function go(acc, n, ...)
    if n == 0 then return acc end
    return go(op(acc, tobit((...))), n - 1, select(2, ...))
  end
  return function(x, ...)
    return sign(go(tobit(x), select('#', ...), ...))
  end
end
local bit = {}
bit.tobit = tobit
bit.band = fold(function(a, b) return a & b end)
bit.bor = fold(function(a, b) return a | b end)
bit.bxor = fold(function(a, b) return a ~ b end)
bit.bnot = function(x) return sign(~tobit(x)) end
bit.lshift = function(x, n) return sign(tobit(x) << (tobit(n) & 31)) end
bit.rshift = function(x, n) return sign((tobit(x) & 0xFFFFFFFF) >> (tobit(n) & 31)) end
bit.arshift = function(x, n) return tobit(x) // (1 << (tobit(n) & 31)) end
bit.rol = function(x, n)
  local u, s = tobit(x) & 0xFFFFFFFF, tobit(n) & 31
  return sign((u << s) | (u >> (32 - s)))
end
bit.ror = function(x, n)
  local u, s = tobit(x) & 0xFFFFFFFF, tobit(n) & 31
  return sign((u >> s) | (u << (32 - s)))
end
bit.bswap = function(x)
  local u = tobit(x) & 0xFFFFFFFF
  return sign(((u >> 24) & 0xFF) | ((u >> 8) & 0xFF00) | ((u << 8) & 0xFF0000) | ((u << 24) & 0xFF000000))
end
bit.tohex = function(x, n)
  n = n == nil and 8 or tobit(n)
  local conv = 'x'
  if n < 0 then n = -n; conv = 'X' end
  if n > 8 then n = 8 end
  if n == 0 then return '' end
  return format('%0' .. n .. conv, tobit(x) & ((1 << (4 * n)) - 1))
end
_G.bit = bit
"#;

    /// Renders a call's results or its error exactly; an error's position is left out (the
    /// oracle's points into its own code when a later operand is wrong).
    const RENDER: &str = r#"
        return function(expr)
          local r = table.pack(pcall(load('return ' .. expr)))
          if not r[1] then return 'error ' .. tostring(r[2]):gsub('^[^:]*:%d+: ', '') end
          local out = {}
          for i = 2, r.n do
            local v = r[i]
            out[#out + 1] = (math.type(v) or type(v)) .. ' ' .. tostring(v)
          end
          return table.concat(out, ', ')
        end
    "#;

    #[test]
    fn the_native_library_agrees_with_the_lua_one_it_replaces() {
        let oracle = Lua::new();
        oracle.load(ORACLE).set_name("=oracle").exec().unwrap();
        let native = Lua::new();
        install(&native).unwrap();
        let (want, got): (mlua::Function, mlua::Function) = (
            oracle.load(RENDER).set_name("=render").eval().unwrap(),
            native.load(RENDER).set_name("=render").eval().unwrap(),
        );
        let operands = [
            "0",
            "1",
            "-1",
            "255",
            "0x7fffffff",
            "0x80000000",
            "0xffffffff",
            "2^32",
            "2^32 + 5",
            "-2^31",
            "-2^31 - 1",
            "2^53",
            "-2^53",
            "math.maxinteger",
            "math.mininteger",
            "0.5",
            "1.5",
            "2.5",
            "-0.5",
            "-1.5",
            "-2.5",
            "0.49999999999999994",
            "-0.3",
            "4294967295.5",
            "4294967296.5",
            "-4294967296.5",
            "1e20",
            "-1e20",
            "1e300",
            "-0.0",
            "0/0",
            "1/0",
            "-1/0",
            "'12'",
            "'0x10'",
            "'2.5'",
            "' 7 '",
            "'3.0'",
            "'1e3'",
            "'-0x7fffffff'",
            "'abc'",
            "''",
            "nil",
            "true",
            "{}",
            "print",
        ];
        let mut expressions = Vec::new();
        for a in operands {
            for f in ["tobit", "bnot", "bswap", "tohex"] {
                expressions.push(format!("bit.{f}({a})"));
            }
            expressions.push(format!("bit.band({a})"));
            for b in operands {
                for f in [
                    "band", "bor", "bxor", "lshift", "rshift", "arshift", "rol", "ror", "tohex",
                ] {
                    expressions.push(format!("bit.{f}({a}, {b})"));
                }
            }
            expressions.push(format!("bit.bxor({a}, 0x0f, 0xf0, {a})"));
        }
        for n in -10..=10 {
            expressions.push(format!("bit.tohex(0x1234abcd, {n})"));
            expressions.push(format!("bit.tohex(-1, {n})"));
        }
        for e in [
            "bit.band()",
            "bit.bor()",
            "bit.tobit()",
            "bit.bxor(1, nil)",
            "bit.band(1, 2, 3, 'x')",
            "bit.tohex()",
            "bit.lshift(1)",
        ] {
            expressions.push(e.to_owned());
        }
        let mut differences = Vec::new();
        for e in &expressions {
            let (x, y): (String, String) = (
                want.call(e.as_str()).unwrap(),
                got.call(e.as_str()).unwrap(),
            );
            if x != y {
                differences.push(format!("{e}: Lua {x}, native {y}"));
            }
        }
        assert!(expressions.len() > 10_000, "{}", expressions.len());
        assert!(
            differences.is_empty(),
            "{} of {} differ:\n{}",
            differences.len(),
            expressions.len(),
            differences.join("\n")
        );
    }

    #[test]
    fn an_error_names_the_callers_line() {
        let lua = Lua::new();
        install(&lua).unwrap();
        let err = lua
            .load("local x = 1\nreturn bit.band(1, {})")
            .set_name("=script")
            .exec()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("script:2: bad argument to bit operation (number expected, got table)"),
            "{err}"
        );
    }
}
