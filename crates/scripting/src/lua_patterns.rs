//! Lua 5.4's pattern functions – `string.find`, `string.match`, `string.gmatch` and
//! `string.gsub` – ported from `lstrlib.c` so that matching runs on a step budget. The
//! string metatable indexes the same `string` table, so `("…"):find(…)` gets them too.
//!
//! Why the sandbox has its own matcher: the watchdog is an instruction-count debug hook,
//! and a debug hook never fires inside a C function. Lua's matcher is C and backtracks, so
//! `("a"):rep(1e4):find(".-.-.-.-b")` (about n⁴/24 steps) would hold a parser thread
//! forever. Here all work is counted in steps, at what it costs (testing a byte against a
//! set `[…]` takes a step per byte of the set, each `gsub` match a step per byte of a
//! string replacement): one call may take [`BASE_STEPS`] plus [`STEPS_PER_BYTE`] per
//! subject byte – linear work with sets of ordinary size fits on any subject, runaway
//! backtracking does not – and the watchdog's clock is read every 4096 steps, so the
//! call's time limit applies inside the matcher as well. Either way the call ends with an
//! ordinary Lua error that trips the watchdog, so the engine reports a timeout and a
//! script's `pcall` cannot swallow it.
//!
//! Everything else is Lua 5.4.9's behaviour, error messages and their `script:line:`
//! prefix included: character classes in the C locale, sets and ranges, `%b`, `%f`,
//! captures and position captures, back-references, anchors (none in `gmatch`), negative
//! `init`, plain `find`, and `gsub` with string, table or function replacements and a
//! maximum count. The one deliberate difference: a plain `find` is linear-time (stock
//! Lua's can be quadratic, and it too runs where the hook cannot see).
//!
//! The matcher is safe Rust; the four Lua functions are C functions on mlua's raw API,
//! transliterated from lstrlib's, because mlua's safe callbacks cost several times a C call
//! and parsers call these per field of every frame.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::{self, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::slice;
use std::sync::Arc;

use mlua::ffi::{self, lua_State};
use mlua::{Function, Lua, Table};

use crate::Watchdog;

/// Steps any single call may take, however short its subject.
pub(crate) const BASE_STEPS: u64 = 10_000_000;
/// Further steps a call may take per byte of its subject.
pub(crate) const STEPS_PER_BYTE: u64 = 1_000;
/// The watchdog's clock is read whenever the steps left cross a multiple of 4096.
const CLOCK_MASK: u64 = 4096 - 1;

/// `LUA_MAXCAPTURES`.
const MAX_CAPTURES: usize = 32;
/// `MAXCCALLS`: recursion depth of the matcher, so `pattern too complex` comes where Lua's does.
const MAX_DEPTH: u32 = 200;
const ESC: u8 = b'%';
const SPECIALS: &[u8] = b"^$*+?.([%-";

/// The message of a call that used up its step budget (raised in Lua with the same text).
pub(crate) fn budget_message(steps: u64) -> String {
    format!(
        "pattern matching exceeded its step budget ({steps} steps); simplify the pattern or \
         shorten the subject"
    )
}

/// Why a match stopped without an answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum MatchError {
    /// A malformed pattern or capture use.
    Malformed(Malformed),
    /// `invalid capture index %n`, with `n` as Lua prints it.
    CaptureIndex(i32),
    /// The call used up its step budget (the budget's size).
    Budget(u64),
    /// The watchdog's deadline for the running script call passed.
    Time,
}

/// What is wrong with a pattern; [`Malformed::message`] is Lua's message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Malformed {
    EndsWithEscape,
    MissingBracket,
    MissingBalanceArguments,
    MissingFrontierSet,
    UnfinishedCapture,
    InvalidPatternCapture,
    TooManyCaptures,
    TooComplex,
}

impl Malformed {
    fn message(self) -> &'static CStr {
        match self {
            Malformed::EndsWithEscape => c"malformed pattern (ends with '%')",
            Malformed::MissingBracket => c"malformed pattern (missing ']')",
            Malformed::MissingBalanceArguments => c"malformed pattern (missing arguments to '%b')",
            Malformed::MissingFrontierSet => c"missing '[' after '%f' in pattern",
            Malformed::UnfinishedCapture => c"unfinished capture",
            Malformed::InvalidPatternCapture => c"invalid pattern capture",
            Malformed::TooManyCaptures => c"too many captures",
            Malformed::TooComplex => c"pattern too complex",
        }
    }
}

fn malformed(what: Malformed) -> MatchError {
    MatchError::Malformed(what)
}

/// The step budget of one call, with the watchdog it reads the clock of.
pub(crate) struct Meter<'a> {
    left: u64,
    budget: u64,
    watchdog: &'a Watchdog,
}

impl<'a> Meter<'a> {
    pub(crate) fn new(subject_len: usize, watchdog: &'a Watchdog) -> Self {
        let per_byte = STEPS_PER_BYTE.saturating_mul(subject_len as u64);
        Meter::with_budget(BASE_STEPS.saturating_add(per_byte), watchdog)
    }

    pub(crate) fn with_budget(budget: u64, watchdog: &'a Watchdog) -> Self {
        Meter {
            left: budget,
            budget,
            watchdog,
        }
    }

    /// One step.
    #[inline]
    fn tick(&mut self) -> Result<(), MatchError> {
        if self.left == 0 {
            return Err(MatchError::Budget(self.budget));
        }
        self.left -= 1;
        if self.left & CLOCK_MASK == 0 && self.watchdog.expired() {
            return Err(MatchError::Time);
        }
        Ok(())
    }

    /// `steps` steps at once.
    #[inline]
    fn charge(&mut self, steps: u64) -> Result<(), MatchError> {
        let before = self.left;
        let Some(after) = before.checked_sub(steps) else {
            return Err(MatchError::Budget(self.budget));
        };
        self.left = after;
        if before & !CLOCK_MASK != after & !CLOCK_MASK && self.watchdog.expired() {
            return Err(MatchError::Time);
        }
        Ok(())
    }
}

/// A capture's length in `MatchState`: still open, a position capture, or closed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Len {
    Unfinished,
    Position,
    Bytes(usize),
}

/// One capture of a successful match.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Capture {
    /// `subject[start..end]`.
    Text(usize, usize),
    /// A position capture `()`, 1-based.
    Position(usize),
}

/// The capture slots of a match: start and length. A caller owns them so an iterator can
/// keep one set for all its calls.
pub(crate) type Captures = [(usize, Len); MAX_CAPTURES];

/// Fresh capture slots.
pub(crate) const NO_CAPTURES: Captures = [(0, Len::Unfinished); MAX_CAPTURES];

/// `MatchState` of lstrlib.c; positions are indices into `src` and `pat`. Where C reads the
/// terminating `'\0'` of a Lua string, `src_at`/`pat_at` return 0.
pub(crate) struct Matcher<'a> {
    src: &'a [u8],
    pat: &'a [u8],
    depth: u32,
    level: usize,
    captures: &'a mut Captures,
    meter: Meter<'a>,
    /// Why the match stopped, once a step returned [`Stop`].
    failure: Option<MatchError>,
}

/// A match that cannot go on; the reason is in [`Matcher::failure`]. Keeps the results of
/// the matcher's steps two words wide, so they come back in registers.
struct Stop;

/// The end of the match of the rest of the pattern, `None` when it does not match.
type Step = Result<Option<usize>, Stop>;

impl<'a> Matcher<'a> {
    /// A matcher of `pat` (anchor already removed) against `src`.
    pub(crate) fn new(
        src: &'a [u8],
        pat: &'a [u8],
        captures: &'a mut Captures,
        meter: Meter<'a>,
    ) -> Self {
        Matcher {
            src,
            pat,
            depth: MAX_DEPTH,
            level: 0,
            captures,
            meter,
            failure: None,
        }
    }

    /// Tries to match the whole pattern at `s`; the end of the match on success.
    pub(crate) fn match_at(&mut self, s: usize) -> Result<Option<usize>, MatchError> {
        self.depth = MAX_DEPTH;
        self.level = 0;
        // A `Stop` always comes with a failure; `Time` is only the type's fallback.
        self.do_match(s, 0)
            .map_err(|Stop| self.failure.take().unwrap_or(MatchError::Time))
    }

    fn stop(&mut self, error: MatchError) -> Stop {
        self.failure = Some(error);
        Stop
    }

    #[inline]
    fn tick(&mut self) -> Result<(), Stop> {
        self.meter.tick().map_err(|e| self.stop(e))
    }

    #[inline]
    fn charge(&mut self, steps: usize) -> Result<(), Stop> {
        self.meter.charge(steps as u64).map_err(|e| self.stop(e))
    }

    /// Charges this call's budget for `steps` steps of work done outside the matcher, such
    /// as writing a `gsub` replacement.
    pub(crate) fn charge_outside(&mut self, steps: usize) -> Result<(), MatchError> {
        self.meter.charge(steps as u64)
    }

    /// The steps one [`Matcher::single_match`] of the class `pat[p..ep]` costs: a set is
    /// scanned byte by byte (as [`Matcher::class_end`] scans it), any other class is one
    /// comparison.
    fn class_cost(&self, p: usize, ep: usize) -> usize {
        class_cost(self.pat, p, ep)
    }

    /// How many captures the last match pushes: its captures, or the whole match when it
    /// has none and `whole` asks for it (`find` does not).
    pub(crate) fn capture_count(&self, whole: bool) -> usize {
        if self.level == 0 && whole {
            1
        } else {
            self.level
        }
    }

    /// Capture `i` of the last match `s..e` (`get_onecapture`).
    pub(crate) fn capture(&self, i: usize, s: usize, e: usize) -> Result<Capture, MatchError> {
        if i >= self.level {
            if i != 0 {
                return Err(MatchError::CaptureIndex(i as i32 + 1));
            }
            return Ok(Capture::Text(s, e));
        }
        let (init, len) = self.captures[i];
        match len {
            Len::Unfinished => Err(malformed(Malformed::UnfinishedCapture)),
            Len::Position => Ok(Capture::Position(init + 1)),
            Len::Bytes(n) => Ok(Capture::Text(init, init + n)),
        }
    }

    fn src_at(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    fn pat_at(&self, i: usize) -> u8 {
        self.pat.get(i).copied().unwrap_or(0)
    }

    fn do_match(&mut self, s: usize, p: usize) -> Step {
        if self.depth == 0 {
            return Err(self.stop(malformed(Malformed::TooComplex)));
        }
        self.depth -= 1;
        let result = self.match_items(s, p);
        self.depth += 1;
        result
    }

    /// The body of lstrlib's `match`; `continue` is its `goto init`.
    fn match_items(&mut self, mut s: usize, mut p: usize) -> Step {
        loop {
            self.tick()?;
            if p == self.pat.len() {
                return Ok(Some(s));
            }
            match self.pat[p] {
                b'(' if self.pat_at(p + 1) == b')' => {
                    return self.start_capture(s, p + 2, Len::Position)
                }
                b'(' => return self.start_capture(s, p + 1, Len::Unfinished),
                b')' => return self.end_capture(s, p + 1),
                b'$' if p + 1 == self.pat.len() => {
                    return Ok((s == self.src.len()).then_some(s));
                }
                ESC if self.pat_at(p + 1) == b'b' => match self.match_balance(s, p + 2)? {
                    Some(end) => {
                        s = end;
                        p += 4;
                    }
                    None => return Ok(None),
                },
                ESC if self.pat_at(p + 1) == b'f' => {
                    p += 2;
                    if self.pat_at(p) != b'[' {
                        return Err(self.stop(malformed(Malformed::MissingFrontierSet)));
                    }
                    let ep = self.class_end(p)?;
                    // The two scans of the set below, as in `class_cost`.
                    self.charge(2 * (ep - p))?;
                    let previous = if s == 0 { 0 } else { self.src[s - 1] };
                    if !self.match_bracket_class(previous, p, ep - 1)
                        && self.match_bracket_class(self.src_at(s), p, ep - 1)
                    {
                        p = ep;
                    } else {
                        return Ok(None);
                    }
                }
                ESC if self.pat_at(p + 1).is_ascii_digit() => {
                    match self.match_capture(s, self.pat_at(p + 1))? {
                        Some(end) => {
                            s = end;
                            p += 2;
                        }
                        None => return Ok(None),
                    }
                }
                _ => {
                    // A single-character class with an optional repetition suffix.
                    let ep = self.class_end(p)?;
                    self.charge(self.class_cost(p, ep))?;
                    let suffix = self.pat_at(ep);
                    if !self.single_match(s, p, ep) {
                        if matches!(suffix, b'*' | b'?' | b'-') {
                            p = ep + 1; // accepts the empty match
                            continue;
                        }
                        return Ok(None);
                    }
                    match suffix {
                        b'?' => {
                            if let Some(end) = self.do_match(s + 1, ep + 1)? {
                                return Ok(Some(end));
                            }
                            p = ep + 1;
                        }
                        b'+' => return self.max_expand(s + 1, p, ep),
                        b'*' => return self.max_expand(s, p, ep),
                        b'-' => return self.min_expand(s, p, ep),
                        _ => {
                            s += 1;
                            p = ep;
                        }
                    }
                }
            }
        }
    }

    /// The index just past the single-character class starting at `p`.
    fn class_end(&mut self, mut p: usize) -> Result<usize, Stop> {
        let c = self.pat[p];
        p += 1;
        match c {
            ESC => {
                if p >= self.pat.len() {
                    return Err(self.stop(malformed(Malformed::EndsWithEscape)));
                }
                Ok(p + 1)
            }
            b'[' => {
                if self.pat_at(p) == b'^' {
                    p += 1;
                }
                loop {
                    if p >= self.pat.len() {
                        return Err(self.stop(malformed(Malformed::MissingBracket)));
                    }
                    let c = self.pat[p];
                    p += 1;
                    if c == ESC && p < self.pat.len() {
                        p += 1; // skips escapes such as `%]`
                    }
                    if self.pat_at(p) == b']' {
                        return Ok(p + 1);
                    }
                }
            }
            _ => Ok(p),
        }
    }

    fn match_bracket_class(&self, c: u8, p: usize, ec: usize) -> bool {
        match_bracket_class(self.pat, c, p, ec)
    }

    fn single_match(&self, s: usize, p: usize, ep: usize) -> bool {
        self.src
            .get(s)
            .is_some_and(|&c| single_match(self.pat, c, p, ep))
    }

    fn match_balance(&mut self, s: usize, p: usize) -> Step {
        if p + 1 >= self.pat.len() {
            return Err(self.stop(malformed(Malformed::MissingBalanceArguments)));
        }
        let (open, close) = (self.pat[p], self.pat[p + 1]);
        if self.src_at(s) != open {
            return Ok(None);
        }
        let mut depth = 1;
        for (i, &c) in self.src.iter().enumerate().skip(s + 1) {
            if c == close {
                depth -= 1;
                if depth == 0 {
                    self.charge(i - s)?;
                    return Ok(Some(i + 1));
                }
            } else if c == open {
                depth += 1;
            }
        }
        self.charge(self.src.len() - s)?;
        Ok(None)
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> Step {
        // Charged before each comparison, so one scan of a long subject against a long set
        // runs on the budget and reads the clock like any other work.
        let cost = self.class_cost(p, ep);
        let mut i = 0;
        loop {
            self.charge(cost)?;
            if !self.single_match(s + i, p, ep) {
                break;
            }
            i += 1;
        }
        // Tries the rest of the pattern with the most repetitions first.
        loop {
            if let Some(end) = self.do_match(s + i, ep + 1)? {
                return Ok(Some(end));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> Step {
        let cost = self.class_cost(p, ep);
        loop {
            if let Some(end) = self.do_match(s, ep + 1)? {
                return Ok(Some(end));
            }
            self.charge(cost)?;
            if !self.single_match(s, p, ep) {
                return Ok(None);
            }
            s += 1;
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, what: Len) -> Step {
        if self.level >= MAX_CAPTURES {
            return Err(self.stop(malformed(Malformed::TooManyCaptures)));
        }
        self.captures[self.level] = (s, what);
        self.level += 1;
        let result = self.do_match(s, p)?;
        if result.is_none() {
            self.level -= 1;
        }
        Ok(result)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Step {
        let Some(l) = (0..self.level)
            .rev()
            .find(|&l| self.captures[l].1 == Len::Unfinished)
        else {
            return Err(self.stop(malformed(Malformed::InvalidPatternCapture)));
        };
        self.captures[l].1 = Len::Bytes(s - self.captures[l].0);
        let result = self.do_match(s, p)?;
        if result.is_none() {
            self.captures[l].1 = Len::Unfinished;
        }
        Ok(result)
    }

    /// A back-reference `%1`–`%9` (`digit` is the ASCII digit).
    fn match_capture(&mut self, s: usize, digit: u8) -> Step {
        let index = i32::from(digit) - i32::from(b'1');
        let capture = usize::try_from(index)
            .ok()
            .filter(|&l| l < self.level && self.captures[l].1 != Len::Unfinished)
            .map(|l| self.captures[l]);
        let Some((init, len)) = capture else {
            return Err(self.stop(MatchError::CaptureIndex(index + 1)));
        };
        // A position capture has no text; in C its length is huge, so this never matches.
        let Len::Bytes(len) = len else {
            return Ok(None);
        };
        self.charge(len)?;
        let matched =
            self.src.len() - s >= len && self.src[init..init + len] == self.src[s..s + len];
        Ok(matched.then_some(s + len))
    }
}

/// A class letter after `%` (`match_class`), in the C locale as Lua runs it.
fn match_class(c: u8, class: u8) -> bool {
    let found = match class.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        // C's isspace includes '\v', which `u8::is_ascii_whitespace` does not.
        b's' => matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0, // deprecated in Lua, still accepted
        _ => return class == c,
    };
    // An upper-case class letter is the complement.
    if class.is_ascii_lowercase() {
        found
    } else {
        !found
    }
}

/// The steps one test of a byte against the class `pat[p..ep]` costs: a set is scanned byte
/// by byte (as [`Matcher::class_end`] scans it), any other class is one comparison.
fn class_cost(pat: &[u8], p: usize, ep: usize) -> usize {
    if pat[p] == b'[' {
        ep - p
    } else {
        1
    }
}

/// Whether `c` is in the set `pat[p..=ec]` (`p` at `[`, `ec` at `]`).
fn match_bracket_class(pat: &[u8], c: u8, mut p: usize, ec: usize) -> bool {
    let at = |i: usize| pat.get(i).copied().unwrap_or(0);
    let mut found = true;
    if at(p + 1) == b'^' {
        found = false;
        p += 1;
    }
    loop {
        p += 1;
        if p >= ec {
            return !found;
        }
        if pat[p] == ESC {
            p += 1;
            if match_class(c, at(p)) {
                return found;
            }
        } else if at(p + 1) == b'-' && p + 2 < ec {
            p += 2;
            if pat[p - 2] <= c && c <= pat[p] {
                return found;
            }
        } else if pat[p] == c {
            return found;
        }
    }
}

/// Whether byte `c` is in the single-character class `pat[p..ep]`.
fn single_match(pat: &[u8], c: u8, p: usize, ep: usize) -> bool {
    match pat[p] {
        b'.' => true,
        ESC => match_class(c, pat.get(p + 1).copied().unwrap_or(0)),
        b'[' => match_bracket_class(pat, c, p, ep - 1),
        literal => literal == c,
    }
}

/// A `gmatch` pattern whose matches are the maximal runs of bytes in one class: the whole
/// pattern is that class followed by `+` (`[^,]+`, `%d+`, `%S+`, `[%w_]+`), or that inside
/// one capture (`([^,]+)`), whose text is then the whole match. [`next_run`] finds them
/// without the general matcher.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Runs {
    /// Where the class starts in the pattern (after the capture's `(`).
    class: usize,
    /// Just past the class.
    ep: usize,
    /// Whether the class is inside a capture, which costs the general matcher a step
    /// more at each attempt and at the end.
    captured: bool,
}

/// `pat` as [`Runs`]; `None` for any other pattern, a malformed one included.
pub(crate) fn repeated_class(pat: &[u8]) -> Option<Runs> {
    if let [b'(', inner @ .., b')'] = pat {
        if inner.first() != Some(&b')') {
            return class_plus(inner).map(|ep| Runs {
                class: 1,
                ep: ep + 1,
                captured: true,
            });
        }
    }
    class_plus(pat).map(|ep| Runs {
        class: 0,
        ep,
        captured: false,
    })
}

/// When the whole of `pat` is one single-character class followed by `+`, the end of the
/// class.
fn class_plus(pat: &[u8]) -> Option<usize> {
    let ep = match *pat.first()? {
        // Captures, and the items `match_items` reads before a class.
        b'(' | b')' => return None,
        ESC => match pat.get(1)? {
            b'b' | b'f' | b'0'..=b'9' => return None,
            _ => 2,
        },
        b'[' => {
            // `class_end`, without its errors: a malformed set goes to the general matcher.
            let mut p = 1;
            if pat.get(p) == Some(&b'^') {
                p += 1;
            }
            loop {
                let c = *pat.get(p)?;
                p += 1;
                if c == ESC && p < pat.len() {
                    p += 1;
                }
                if pat.get(p) == Some(&b']') {
                    break p + 1;
                }
            }
        }
        _ => 1,
    };
    (pat.get(ep) == Some(&b'+') && ep + 1 == pat.len()).then_some(ep)
}

/// The bytes of a set that only excludes one to three plain bytes (`[^,]`, `[^;\n]`): no
/// escapes, no ranges, no `]` among them. Its runs end at the next of those bytes, which
/// `memchr` finds.
fn negated_literals(set: &[u8]) -> Option<&[u8]> {
    let body = set.strip_prefix(b"[^")?.strip_suffix(b"]")?;
    let plain = !body.is_empty()
        && body.len() <= 3
        && !body.iter().any(|c| matches!(c, b'%' | b'-' | b']'));
    plain.then_some(body)
}

/// The steps the general matcher takes for a pattern of [`Runs`]: each attempt at a start
/// position (its steps, and the test of the byte there), each further byte tested, and
/// finding the pattern's end once the run is over.
struct RunSteps {
    attempt: u64,
    per_byte: u64,
    end: u64,
}

impl RunSteps {
    fn of(pat: &[u8], runs: Runs) -> Self {
        let cost = class_cost(pat, runs.class, runs.ep) as u64;
        let capture = u64::from(runs.captured);
        RunSteps {
            attempt: 1 + capture + cost,
            per_byte: cost,
            end: 1 + capture,
        }
    }
}

/// [`next_run`] for a set [`negated_literals`] accepted: the same matches and the same
/// steps, charged once per run rather than per byte.
fn next_run_until(
    src: &[u8],
    stops: &[u8],
    steps: RunSteps,
    from: usize,
    meter: &mut Meter<'_>,
) -> Result<Option<(usize, usize)>, MatchError> {
    let Some(start) = src
        .get(from..)
        .and_then(|rest| rest.iter().position(|c| !stops.contains(c)))
        .map(|at| from + at)
    else {
        // Every start position from `from` to the end of the subject fails.
        let attempts = (src.len() + 1).saturating_sub(from) as u64;
        meter.charge(attempts * steps.attempt)?;
        return Ok(None);
    };
    let rest = &src[start..];
    let length = match *stops {
        [a] => memchr::memchr(a, rest),
        [a, b] => memchr::memchr2(a, b, rest),
        [a, b, c] => memchr::memchr3(a, b, c, rest),
        _ => unreachable!("negated_literals keeps one to three bytes"),
    }
    .unwrap_or(rest.len());
    // The failed attempts before `start`, the one at `start`, a test of each byte after it
    // (the one that ends the run included), and the end.
    let failed = (start - from) as u64;
    meter.charge((failed + 1) * steps.attempt + length as u64 * steps.per_byte + steps.end)?;
    Ok(Some((start, start + length)))
}

/// The next match, at or after `from`, of a pattern of [`Runs`]: the first maximal run of
/// bytes in the class. Charges `meter` the steps the general matcher would take for the
/// same search, so budgets and the clock work as they do there.
pub(crate) fn next_run(
    src: &[u8],
    pat: &[u8],
    runs: Runs,
    from: usize,
    meter: &mut Meter<'_>,
) -> Result<Option<(usize, usize)>, MatchError> {
    let steps = RunSteps::of(pat, runs);
    if let Some(stops) = negated_literals(&pat[runs.class..runs.ep]) {
        return next_run_until(src, stops, steps, from, meter);
    }
    let in_class = |at: usize| {
        src.get(at)
            .is_some_and(|&c| single_match(pat, c, runs.class, runs.ep))
    };
    for start in from..=src.len() {
        meter.charge(steps.attempt)?;
        if in_class(start) {
            let mut end = start + 1;
            // Each further byte tested, the one that ends the run included.
            loop {
                meter.charge(steps.per_byte)?;
                if !in_class(end) {
                    break;
                }
                end += 1;
            }
            meter.charge(steps.end)?;
            return Ok(Some((start, end)));
        }
    }
    Ok(None)
}

/// `posrelatI`: a 1-based start position, negative counting from the end, clipped to 1.
fn start_position(pos: i64, len: usize) -> usize {
    if pos > 0 {
        usize::try_from(pos).unwrap_or(usize::MAX)
    } else if pos == 0 || pos.unsigned_abs() > len as u64 {
        1
    } else {
        len - pos.unsigned_abs() as usize + 1
    }
}

// ---------------------------------------------------------------------------------------
// The Lua functions: lstrlib's glue, line for line, on the C API.
//
// They are C functions, as in stock Lua, because mlua's safe callbacks cost several times
// a C call on the per-frame path. Every Lua API call here may raise a Lua error, which
// `longjmp`s out of the function, so no frame of this section ever holds a value that
// needs dropping: subject and pattern are slices of the Lua strings on the stack, results
// go straight onto the stack or into a `luaL_Buffer`, messages are static or formatted by
// Lua. The matcher itself runs under `catch_unwind`, so a bug in it becomes a Lua error,
// never a panic crossing Lua's frames.

unsafe extern "C-unwind" {
    // Exported by lauxlib.c but not declared by mlua-sys.
    fn luaL_typeerror(state: *mut lua_State, arg: c_int, tname: *const c_char) -> c_int;
}

/// Replaces the pattern functions of `lua`'s `string` table with this module's, which
/// read the clock of `watchdog`.
pub(crate) fn install(lua: &Lua, watchdog: &Arc<Watchdog>) -> mlua::Result<()> {
    // The functions reach the watchdog through a raw pointer: the state keeps it alive.
    lua.set_app_data(Arc::clone(watchdog));
    let watchdog = Arc::as_ptr(watchdog).cast_mut().cast::<c_void>();
    let string: Table = lua.globals().get("string")?;
    let functions: [(&str, ffi::lua_CFunction); 4] = [
        ("find", str_find),
        ("match", str_match),
        ("gmatch", str_gmatch),
        ("gsub", str_gsub),
    ];
    for (name, function) in functions {
        // SAFETY: pushes one closure with the watchdog as its only upvalue, which is what
        // every function above expects; the pointer is valid while the state lives.
        let function: Function = unsafe {
            lua.exec_raw((), |state| {
                ffi::lua_pushlightuserdata(state, watchdog);
                ffi::lua_pushcclosure(state, function, 1);
            })?
        };
        string.set(name, function)?;
    }
    Ok(())
}

/// The watchdog stored as upvalue `index` of the running function.
unsafe fn watchdog<'a>(state: *mut lua_State, index: c_int) -> &'a Watchdog {
    &*ffi::lua_touserdata(state, ffi::lua_upvalueindex(index)).cast::<Watchdog>()
}

/// Argument `arg` as bytes (`luaL_checklstring`: numbers are converted in place).
unsafe fn check_bytes<'a>(state: *mut lua_State, arg: c_int) -> &'a [u8] {
    let mut len = 0;
    let data = ffi::luaL_checklstring(state, arg, &mut len);
    slice::from_raw_parts(data.cast::<u8>(), len)
}

/// The string at stack `index` as bytes; it must be a string.
unsafe fn bytes_at<'a>(state: *mut lua_State, index: c_int) -> &'a [u8] {
    let mut len = 0;
    let data = ffi::lua_tolstring(state, index, &mut len);
    slice::from_raw_parts(data.cast::<u8>(), len)
}

/// Runs matcher code; its errors become Lua errors.
unsafe fn run<T>(
    state: *mut lua_State,
    watchdog: &Watchdog,
    f: impl FnOnce() -> Result<T, MatchError>,
) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => value,
        Ok(Err(error)) => raise(state, watchdog, error),
        Err(panic) => {
            // Leaked, not dropped: the payload's `Drop` could panic in turn, and that panic
            // would unwind into Lua's C frames. This path is only reached by a bug.
            mem::forget(panic);
            ffi::luaL_error(state, c"internal error in the pattern matcher".as_ptr());
            unreachable!("luaL_error does not return")
        }
    }
}

unsafe fn raise(state: *mut lua_State, watchdog: &Watchdog, error: MatchError) -> ! {
    match error {
        MatchError::Malformed(what) => {
            ffi::luaL_error(state, c"%s".as_ptr(), what.message().as_ptr());
        }
        MatchError::CaptureIndex(n) => {
            ffi::luaL_error(state, c"invalid capture index %%%d".as_ptr(), n as c_int);
        }
        MatchError::Budget(steps) => {
            // Tripping the watchdog makes this a timeout no `pcall` can swallow.
            watchdog.exhaust(steps);
            ffi::luaL_error(
                state,
                c"pattern matching exceeded its step budget (%I steps); simplify the pattern or shorten the subject"
                    .as_ptr(),
                steps as ffi::lua_Integer,
            );
        }
        MatchError::Time => {
            ffi::luaL_error(state, c"script exceeded its time limit".as_ptr());
        }
    }
    unreachable!("luaL_error does not return")
}

unsafe fn push_capture(
    state: *mut lua_State,
    watchdog: &Watchdog,
    m: &Matcher<'_>,
    src: &[u8],
    i: usize,
    (s, e): (usize, usize),
) {
    match run(state, watchdog, || m.capture(i, s, e)) {
        Capture::Text(start, end) => {
            ffi::lua_pushlstring(state, src[start..].as_ptr().cast(), end - start);
        }
        Capture::Position(n) => ffi::lua_pushinteger(state, n as ffi::lua_Integer),
    }
}

unsafe fn push_captures(
    state: *mut lua_State,
    watchdog: &Watchdog,
    m: &Matcher<'_>,
    src: &[u8],
    range: (usize, usize),
    whole: bool,
) -> c_int {
    let n = m.capture_count(whole);
    ffi::luaL_checkstack(state, n as c_int, c"too many captures".as_ptr());
    for i in 0..n {
        push_capture(state, watchdog, m, src, i, range);
    }
    n as c_int
}

/// Splits a leading `^` off a pattern.
fn anchor(pattern: &[u8]) -> (bool, &[u8]) {
    match pattern.strip_prefix(b"^") {
        Some(rest) => (true, rest),
        None => (false, pattern),
    }
}

unsafe extern "C-unwind" fn str_find(state: *mut lua_State) -> c_int {
    find_aux(state, true)
}

unsafe extern "C-unwind" fn str_match(state: *mut lua_State) -> c_int {
    find_aux(state, false)
}

unsafe fn find_aux(state: *mut lua_State, find: bool) -> c_int {
    let src = check_bytes(state, 1);
    let pattern = check_bytes(state, 2);
    let init = start_position(ffi::luaL_optinteger(state, 3, 1), src.len()) - 1;
    if init > src.len() {
        ffi::lua_pushnil(state);
        return 1;
    }
    let plain = find
        && (ffi::lua_toboolean(state, 4) != 0 || !pattern.iter().any(|c| SPECIALS.contains(c)));
    if plain {
        if let Some(at) = memchr::memmem::find(&src[init..], pattern) {
            ffi::lua_pushinteger(state, (init + at + 1) as ffi::lua_Integer);
            ffi::lua_pushinteger(state, (init + at + pattern.len()) as ffi::lua_Integer);
            return 2;
        }
    } else {
        let watchdog = watchdog(state, 1);
        let (anchored, pat) = anchor(pattern);
        let mut captures = NO_CAPTURES;
        let meter = Meter::new(src.len(), watchdog);
        let mut m = Matcher::new(src, pat, &mut captures, meter);
        let mut start = init;
        loop {
            if let Some(end) = run(state, watchdog, || m.match_at(start)) {
                if !find {
                    return push_captures(state, watchdog, &m, src, (start, end), true);
                }
                ffi::lua_pushinteger(state, (start + 1) as ffi::lua_Integer);
                ffi::lua_pushinteger(state, end as ffi::lua_Integer);
                return push_captures(state, watchdog, &m, src, (start, end), false) + 2;
            }
            if anchored || start >= src.len() {
                break;
            }
            start += 1;
        }
    }
    ffi::lua_pushnil(state);
    1
}

/// Where a `gmatch` iterator is: its subject and pattern, which point into the Lua strings
/// that are the iterator's other upvalues (they keep them alive), the watchdog, and where
/// the next search starts. The head of both kinds of iterator state below.
///
/// Sound only because scripts cannot reach those upvalues: the `debug` library is not
/// loaded (see `lua.rs`). `debug.setupvalue` could replace the strings, the old ones could
/// be collected, and the pointers here would dangle.
#[repr(C)]
struct Iteration {
    src: *const u8,
    src_len: usize,
    pat: *const u8,
    pat_len: usize,
    watchdog: *const Watchdog,
    next: usize,
}

impl Iteration {
    /// The subject, the pattern and the watchdog.
    ///
    /// # Safety
    /// The iterator's upvalues must still hold the strings (see the type's doc).
    unsafe fn parts<'a>(&self) -> (&'a [u8], &'a [u8], &'a Watchdog) {
        (
            slice::from_raw_parts(self.src, self.src_len),
            slice::from_raw_parts(self.pat, self.pat_len),
            &*self.watchdog,
        )
    }
}

/// The state of a general `gmatch` iterator, a userdata upvalue of it.
#[repr(C)]
struct GMatch {
    at: Iteration,
    /// The end of the last match, `usize::MAX` before the first: an empty match right
    /// where the previous one ended is skipped.
    last: usize,
    captures: Captures,
}

/// The state of a `gmatch` iterator over a pattern [`repeated_class`] accepted: no capture
/// slots, as such a pattern never uses them.
#[repr(C)]
struct GMatchRuns {
    at: Iteration,
    runs: Runs,
}

unsafe extern "C-unwind" fn str_gmatch(state: *mut lua_State) -> c_int {
    let src = check_bytes(state, 1);
    let pat = check_bytes(state, 2);
    let init = start_position(ffi::luaL_optinteger(state, 3, 1), src.len()) - 1;
    ffi::lua_settop(state, 2); // the iterator keeps subject and pattern as upvalues
    let at = Iteration {
        src: src.as_ptr(),
        src_len: src.len(),
        pat: pat.as_ptr(),
        pat_len: pat.len(),
        watchdog: watchdog(state, 1),
        next: init.min(src.len() + 1),
    };
    // Lua aligns userdata memory for any C type.
    if let Some(runs) = repeated_class(pat) {
        let gm =
            ffi::lua_newuserdatauv(state, mem::size_of::<GMatchRuns>(), 0).cast::<GMatchRuns>();
        gm.write(GMatchRuns { at, runs });
        ffi::lua_pushcclosure(state, gmatch_runs_next, 3);
    } else {
        let gm = ffi::lua_newuserdatauv(state, mem::size_of::<GMatch>(), 0).cast::<GMatch>();
        gm.write(GMatch {
            at,
            last: usize::MAX,
            captures: NO_CAPTURES,
        });
        ffi::lua_pushcclosure(state, gmatch_next, 3);
    }
    1
}

/// The general `gmatch` iterator; upvalues: subject, pattern, [`GMatch`].
unsafe extern "C-unwind" fn gmatch_next(state: *mut lua_State) -> c_int {
    let gm = &mut *ffi::lua_touserdata(state, ffi::lua_upvalueindex(3)).cast::<GMatch>();
    let (src, pat, watchdog) = gm.at.parts();
    let mut m = Matcher::new(src, pat, &mut gm.captures, Meter::new(src.len(), watchdog));
    for start in gm.at.next..=src.len() {
        let end = run(state, watchdog, || m.match_at(start));
        if let Some(end) = end.filter(|&end| end != gm.last) {
            gm.at.next = end;
            gm.last = end;
            return push_captures(state, watchdog, &m, src, (start, end), true);
        }
    }
    0
}

/// The `gmatch` iterator of a pattern [`repeated_class`] accepted; upvalues: subject,
/// pattern, [`GMatchRuns`]. Its matches are never empty, so none is skipped.
unsafe extern "C-unwind" fn gmatch_runs_next(state: *mut lua_State) -> c_int {
    let gm = &mut *ffi::lua_touserdata(state, ffi::lua_upvalueindex(3)).cast::<GMatchRuns>();
    let (src, pat, watchdog) = gm.at.parts();
    let (runs, from) = (gm.runs, gm.at.next);
    let found = run(state, watchdog, || {
        next_run(src, pat, runs, from, &mut Meter::new(src.len(), watchdog))
    });
    match found {
        Some((start, end)) => {
            gm.at.next = end;
            ffi::lua_pushlstring(state, src[start..].as_ptr().cast(), end - start);
            1
        }
        None => 0,
    }
}

unsafe extern "C-unwind" fn str_gsub(state: *mut lua_State) -> c_int {
    let src = check_bytes(state, 1);
    let pattern = check_bytes(state, 2);
    let repl = ffi::lua_type(state, 3);
    let max = ffi::luaL_optinteger(state, 4, src.len() as ffi::lua_Integer + 1);
    if !matches!(
        repl,
        ffi::LUA_TNUMBER | ffi::LUA_TSTRING | ffi::LUA_TFUNCTION | ffi::LUA_TTABLE
    ) {
        luaL_typeerror(state, 3, c"string/function/table".as_ptr());
    }
    // A string replacement is walked for every match, so each match is charged its length.
    // (Reading it converts a number replacement to a string, as `add_s` does.)
    let repl_len = if matches!(repl, ffi::LUA_TNUMBER | ffi::LUA_TSTRING) {
        bytes_at(state, 3).len()
    } else {
        0
    };
    let watchdog = watchdog(state, 1);
    let (anchored, pat) = anchor(pattern);
    let mut captures = NO_CAPTURES;
    let mut m = Matcher::new(src, pat, &mut captures, Meter::new(src.len(), watchdog));
    // The buffer may point into itself, so it stays in place from here on.
    let mut buffer = MaybeUninit::<ffi::luaL_Buffer>::uninit();
    let b = buffer.as_mut_ptr();
    ffi::luaL_buffinit(state, b);
    let (mut at, mut last, mut count, mut changed) = (0, usize::MAX, 0, false);
    while count < max {
        let end = run(state, watchdog, || m.match_at(at));
        match end.filter(|&end| end != last) {
            Some(end) => {
                count += 1;
                run(state, watchdog, || m.charge_outside(repl_len + 1));
                changed |= add_value(state, watchdog, &m, src, (at, end), repl, b);
                at = end;
                last = end;
            }
            None if at < src.len() => {
                ffi::luaL_addchar(b, src[at] as c_char);
                at += 1;
            }
            None => break,
        }
        if anchored {
            break;
        }
    }
    if changed {
        ffi::luaL_addlstring(b, src[at..].as_ptr().cast(), src.len() - at);
        ffi::luaL_pushresult(b);
    } else {
        ffi::lua_pushvalue(state, 1);
    }
    ffi::lua_pushinteger(state, count);
    2
}

/// Adds the replacement of the match `s..e` to `b`; whether the subject changed.
unsafe fn add_value(
    state: *mut lua_State,
    watchdog: &Watchdog,
    m: &Matcher<'_>,
    src: &[u8],
    (s, e): (usize, usize),
    repl: c_int,
    b: *mut ffi::luaL_Buffer,
) -> bool {
    match repl {
        ffi::LUA_TFUNCTION => {
            ffi::lua_pushvalue(state, 3);
            let n = push_captures(state, watchdog, m, src, (s, e), true);
            ffi::lua_call(state, n, 1);
        }
        ffi::LUA_TTABLE => {
            push_capture(state, watchdog, m, src, 0, (s, e));
            ffi::lua_gettable(state, 3);
        }
        _ => {
            add_text(state, watchdog, m, src, (s, e), b);
            return true;
        }
    }
    if ffi::lua_toboolean(state, -1) == 0 {
        // nil or false keeps the original text
        ffi::lua_pop(state, 1);
        ffi::luaL_addlstring(b, src[s..].as_ptr().cast(), e - s);
        false
    } else if ffi::lua_isstring(state, -1) == 0 {
        ffi::luaL_error(
            state,
            c"invalid replacement value (a %s)".as_ptr(),
            ffi::luaL_typename(state, -1),
        );
        unreachable!("luaL_error does not return")
    } else {
        ffi::luaL_addvalue(b);
        true
    }
}

/// Adds a replacement string with `%0`–`%9` and `%%` (`add_s`).
unsafe fn add_text(
    state: *mut lua_State,
    watchdog: &Watchdog,
    m: &Matcher<'_>,
    src: &[u8],
    (s, e): (usize, usize),
    b: *mut ffi::luaL_Buffer,
) {
    let mut rest = bytes_at(state, 3);
    while let Some(at) = memchr::memchr(ESC, rest) {
        ffi::luaL_addlstring(b, rest.as_ptr().cast(), at);
        match rest.get(at + 1).copied().unwrap_or(0) {
            ESC => ffi::luaL_addchar(b, ESC as c_char),
            b'0' => ffi::luaL_addlstring(b, src[s..].as_ptr().cast(), e - s),
            c @ b'1'..=b'9' => {
                match run(state, watchdog, || m.capture(usize::from(c - b'1'), s, e)) {
                    Capture::Text(start, end) => {
                        ffi::luaL_addlstring(b, src[start..].as_ptr().cast(), end - start);
                    }
                    Capture::Position(n) => {
                        ffi::lua_pushinteger(state, n as ffi::lua_Integer);
                        ffi::luaL_addvalue(b);
                    }
                }
            }
            _ => {
                ffi::luaL_error(
                    state,
                    c"invalid use of '%c' in replacement string".as_ptr(),
                    c_int::from(ESC),
                );
            }
        }
        rest = rest.get(at + 2..).unwrap_or_default();
    }
    ffi::luaL_addlstring(b, rest.as_ptr().cast(), rest.len());
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The end of the first match of `pat` in `src`, scanning start positions as `find` does.
    fn first_match(
        src: &str,
        pat: &str,
        budget: u64,
        watchdog: &Watchdog,
    ) -> Result<Option<usize>, MatchError> {
        let mut captures = NO_CAPTURES;
        let meter = Meter::with_budget(budget, watchdog);
        let mut m = Matcher::new(src.as_bytes(), pat.as_bytes(), &mut captures, meter);
        for start in 0..=src.len() {
            if let Some(end) = m.match_at(start)? {
                return Ok(Some(end));
            }
        }
        Ok(None)
    }

    #[test]
    fn only_a_single_class_repeated_takes_the_run_scanner() {
        /// Where the class starts and ends, and whether it is captured.
        type Expected = Option<(usize, usize, bool)>;
        let table: &[(&str, Expected)] = &[
            ("[^,]+", Some((0, 4, false))),
            ("%d+", Some((0, 2, false))),
            ("%S+", Some((0, 2, false))),
            ("[%w_]+", Some((0, 5, false))),
            ("a+", Some((0, 1, false))),
            (".+", Some((0, 1, false))),
            ("[]]+", Some((0, 3, false))),
            ("[^]]+", Some((0, 4, false))),
            ("[%]]+", Some((0, 4, false))),
            ("$+", Some((0, 1, false))),
            ("^+", Some((0, 1, false))),
            ("%%+", Some((0, 2, false))),
            ("([^,]+)", Some((1, 5, true))),
            ("([^,\r\n]+)", Some((1, 7, true))),
            ("(%w+)", Some((1, 3, true))),
            ("([^)]+)", Some((1, 5, true))),
            ("(%)+)", Some((1, 3, true))),
            ("[^,]*", None),
            ("[^,]", None),
            ("[^,]+,", None),
            ("([^,]+", None),
            ("([^,]+))", None),
            ("(([^,]+))", None),
            ("()+)", None),
            ("()", None),
            ("([^,]+)()", None),
            ("%b()+", None),
            ("%f[%w]+", None),
            ("%1+", None),
            ("[^,+", None),
            ("%", None),
            ("+", None),
            ("", None),
        ];
        for (pat, expected) in table {
            let found = repeated_class(pat.as_bytes()).map(|r| (r.class, r.ep, r.captured));
            assert_eq!(found, *expected, "{pat}");
        }
    }

    #[test]
    fn the_run_scanner_finds_and_charges_what_the_general_matcher_does() {
        let watchdog = Watchdog::new();
        let patterns = [
            "[^,]+",
            "%d+",
            "%S+",
            "[%w_]+",
            "a+",
            ".+",
            "[]]+",
            "[^]]+",
            "[a-c]+",
            "%A+",
            "$+",
            "[%d%.%-]+",
            "[\0-\x1f]+",
            "%x+",
            "[^;\n]+",
            "[^abc]+",
            "[^a-c]+",
            "[^%s]+",
            "[^\0]+",
            "[^]]+",
            "([^,]+)",
            "([^,\r\n]+)",
            "(%w+)",
            "([^)]+)",
            "(%)+)",
            "([a-c]+)",
        ];
        let subjects: [&[u8]; 11] = [
            b"",
            b"a",
            b",",
            b"1.5,-2,,abc,",
            b"  x y  ",
            b"aaa]b]]c",
            b"$$x$",
            b"\0\x01\xff\x1f",
            b",,,,",
            b"0.841,0.540,21.5,-0.001,1013.25,0.002,0.000001,1",
            b"(1)),2\r\n3,,\n",
        ];
        for pat in patterns {
            let runs = repeated_class(pat.as_bytes()).expect(pat);
            for src in subjects {
                let subject = String::from_utf8_lossy(src);
                for from in 0..=src.len() + 1 {
                    // The general matcher, as `gmatch_next` drives it.
                    let mut captures = NO_CAPTURES;
                    let meter = Meter::with_budget(1_000_000, &watchdog);
                    let mut m = Matcher::new(src, pat.as_bytes(), &mut captures, meter);
                    let mut general = None;
                    for start in from..=src.len() {
                        if let Some(end) = m.match_at(start).unwrap() {
                            general = Some((start, end));
                            break;
                        }
                    }
                    if let (Some((s, e)), true) = (general, runs.captured) {
                        // What gmatch gives for a captured pattern is its capture.
                        assert_eq!(m.capture_count(true), 1, "{pat}");
                        assert_eq!(m.capture(0, s, e), Ok(Capture::Text(s, e)), "{pat}");
                    }
                    let general_left = m.meter.left;
                    let mut meter = Meter::with_budget(1_000_000, &watchdog);
                    let found = next_run(src, pat.as_bytes(), runs, from, &mut meter).unwrap();
                    assert_eq!(found, general, "{pat} in {subject:?} from {from}");
                    assert_eq!(meter.left, general_left, "steps of {pat} in {subject:?}");
                }
            }
        }
    }

    #[test]
    fn steps_are_counted_against_the_budget() {
        let watchdog = Watchdog::new();
        assert_eq!(first_match("hello", "l+", 100, &watchdog), Ok(Some(4)));
        assert_eq!(
            first_match("hello", "l+", 3, &watchdog),
            Err(MatchError::Budget(3))
        );
        let long = "a".repeat(200);
        assert_eq!(
            first_match(&long, ".-.-.-b", 1_000_000, &watchdog),
            Err(MatchError::Budget(1_000_000))
        );
        assert!(
            !watchdog.tripped(),
            "the matcher itself reports, the glue trips"
        );
    }

    #[test]
    fn the_clock_is_read_while_matching() {
        let watchdog = Watchdog::new();
        watchdog.arm(Duration::ZERO);
        let long = "a".repeat(200);
        assert_eq!(
            first_match(&long, ".-.-.-b", u64::MAX, &watchdog),
            Err(MatchError::Time)
        );
    }

    #[test]
    fn budgets_grow_with_the_subject() {
        let watchdog = Watchdog::new();
        assert_eq!(Meter::new(0, &watchdog).budget, BASE_STEPS);
        assert_eq!(
            Meter::new(10, &watchdog).budget,
            BASE_STEPS + 10 * STEPS_PER_BYTE
        );
        assert_eq!(Meter::new(usize::MAX, &watchdog).budget, u64::MAX);
    }

    /// A panic payload whose `Drop` panics too.
    struct PanicsOnDrop;

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("dropping the payload panics");
        }
    }

    /// A C function like the four above, whose matcher code has a bug.
    unsafe extern "C-unwind" fn buggy_matcher(state: *mut lua_State) -> c_int {
        run(state, watchdog(state, 1), || -> Result<(), MatchError> {
            std::panic::panic_any(PanicsOnDrop)
        });
        0
    }

    #[test]
    fn a_panic_in_the_matcher_is_a_lua_error() {
        let lua = Lua::new();
        let watchdog = Watchdog::new();
        let upvalue = Arc::as_ptr(&watchdog).cast_mut().cast::<c_void>();
        // SAFETY: as in `install`; `watchdog` outlives the state's use of it.
        let buggy: Function = unsafe {
            lua.exec_raw((), |state| {
                ffi::lua_pushlightuserdata(state, upvalue);
                ffi::lua_pushcclosure(state, buggy_matcher, 1);
            })
        }
        .unwrap();
        let (ok, message): (bool, String) = lua.load("return pcall(...)").call(buggy).unwrap();
        assert!(!ok);
        assert_eq!(message, "internal error in the pattern matcher");
        // Neither panic escaped into Lua, and the state runs on.
        let again: String = lua.load("return (('a,b'):gsub(',', ';'))").eval().unwrap();
        assert_eq!(again, "a;b");
    }

    #[test]
    fn start_positions_follow_lua() {
        assert_eq!(start_position(1, 5), 1);
        assert_eq!(start_position(0, 5), 1);
        assert_eq!(start_position(-2, 5), 4);
        assert_eq!(start_position(-5, 5), 1);
        assert_eq!(start_position(-6, 5), 1);
        assert_eq!(start_position(9, 5), 9);
        assert_eq!(start_position(i64::MIN, 5), 1);
    }
}
