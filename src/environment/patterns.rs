//! Lua 5.4's pattern matching (`lstrlib.c`), ported to Rust so that it can be stopped.
//!
//! Lua's `string.find`, `string.match`, `string.gmatch` and `string.gsub` run their
//! matcher in C, where the instruction hook never fires: a backtracking pattern such as
//! `("a"):rep(1e5):find(".-.-.-.-.-.-b")` would run for hours whatever the time limit.
//! The port below counts its steps and, every [`STEP_INTERVAL`] of them, asks the
//! execution's [`Tripwire`] whether a limit has tripped, so a runaway search ends with the
//! limit's error like any other Lua code.
//!
//! [`Matcher`] follows `lstrlib.c` (Lua 5.4.9) function by function (`match`,
//! `max_expand`, `matchbalance`, ...), with the same recursion limit and error messages,
//! so scripts see the same results. Lua strings end with a hidden `'\0'`, and the C code
//! relies on reading it; [`Matcher::pat`] and [`Matcher::src`] return `0` past the end to
//! behave the same without reading out of bounds.
//!
//! Fast paths ([`Plan`], [`Searcher`]): patterns that cannot backtrack skip the general
//! matcher with the same results and errors. A pattern without special characters is a
//! `memchr`/`memmem` search; one single-character class, alone or with `+`, is a linear
//! scan; any other pattern skips to the next byte its first class matches before running
//! the matcher. `string.find` answers plain searches of up to [`SCAN_WINDOW`] bytes in a
//! C function without allocating, and `gmatch` over a literal or one-class pattern is a C
//! iterator; longer scans check the limits every window.
//!
//! Errors: an error returned by a Rust callback reaches Lua as an mlua userdata, not as
//! the string `luaL_error` makes. So the Rust functions report a failure as values
//! (`FAIL, message, level`) and a small C function in front of each ([`front`]) raises
//! it with `lua_error`, the message prefixed with the caller's position by `luaL_where`
//! as `luaL_error` does; no Lua frame stands between the caller and the string function,
//! so even a tail call reports the same position as C Lua. Errors thrown by a `gsub`
//! replacement function (or `__index`) are caught with `pcall` and re-thrown unchanged,
//! whatever their type. Only limit errors travel as mlua errors.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::rc::Rc;

use mlua::{Function, LightUserData, Lua, LuaString, MultiValue, Table, Value, ffi};

use super::limits::Tripwire;

/// `LUA_MAXCAPTURES`.
const MAX_CAPTURES: usize = 32;
/// `MAXCCALLS`: how deep `match` may recurse before "pattern too complex".
const MAX_CALLS: usize = 200;
/// `L_ESC`.
const ESCAPE: u8 = b'%';
/// Characters that make `string.find` use the matcher rather than a plain search.
const SPECIALS: &[u8] = b"^$*+?.([%-";
/// Matcher steps between two checks of the limits: a step costs nanoseconds, a check
/// tens of them, so this stops a runaway pattern within a fraction of a millisecond.
const STEP_INTERVAL: usize = 10_000;

/// Asks whether the execution may go on. The argument is the number of bytes the caller
/// holds outside Lua's allocator (a `gsub` result being built), to be counted with Lua's.
pub(crate) type Check<'a> = &'a dyn Fn(usize) -> mlua::Result<()>;

/// Why a string function failed.
pub(crate) enum Failure {
    /// A Lua error message, raised at the caller's position (like `luaL_error`).
    Raise(String),
    /// A value thrown by a replacement function or `__index`, re-thrown unchanged.
    Rethrow(Value),
    /// A limit tripped, or Lua itself failed (memory): propagated as is.
    Host(mlua::Error),
}

impl From<mlua::Error> for Failure {
    fn from(error: mlua::Error) -> Self {
        Failure::Host(error)
    }
}

fn raise(message: impl Into<String>) -> Failure {
    Failure::Raise(message.into())
}

/// `capture[i].len` of `lstrlib.c`, with its two special values as variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CaptureLen {
    Unfinished,
    Position,
    Closed(usize),
}

#[derive(Clone, Copy, Debug)]
struct Capture {
    init: usize,
    len: CaptureLen,
}

/// The value of one capture: a piece of the subject (start and end offsets), or the
/// 1-based position captured by `()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CaptureValue {
    Text(usize, usize),
    Position(usize),
}

/// `MatchState`: one pattern matched against one subject, offsets instead of pointers.
pub(crate) struct Matcher<'a> {
    src: &'a [u8],
    pat: &'a [u8],
    /// Captures started so far (finished or not).
    level: usize,
    captures: [Capture; MAX_CAPTURES],
    /// `matchdepth`: recursive calls of `do_match` still allowed.
    calls_left: usize,
    /// Steps left before the next check of the limits.
    fuel: usize,
    /// Bytes the caller holds outside Lua, reported to `check`.
    held_bytes: usize,
    check: Check<'a>,
}

impl<'a> Matcher<'a> {
    /// A matcher of `pat` (without a leading `^` anchor: callers handle it) in `src`.
    pub(crate) fn new(src: &'a [u8], pat: &'a [u8], check: Check<'a>) -> Self {
        Matcher {
            src,
            pat,
            level: 0,
            captures: [Capture {
                init: 0,
                len: CaptureLen::Unfinished,
            }; MAX_CAPTURES],
            calls_left: MAX_CALLS,
            fuel: STEP_INTERVAL,
            held_bytes: 0,
            check,
        }
    }

    /// Matches the whole pattern starting at offset `s` of the subject; returns where the
    /// match ends. Captures are then read with [`Matcher::capture`].
    pub(crate) fn match_at(&mut self, s: usize) -> Result<Option<usize>, Failure> {
        // `reprepstate`: every attempt starts with no captures and the full depth.
        self.calls_left = MAX_CALLS;
        self.level = 0;
        self.do_match(s, 0)
    }

    /// Records that the caller now holds `bytes` outside Lua (see [`Check`]).
    pub(crate) fn hold(&mut self, bytes: usize) {
        self.held_bytes = bytes;
    }

    /// Counts `cost` steps, checking the limits whenever the fuel runs out.
    #[inline]
    pub(crate) fn spend(&mut self, cost: usize) -> Result<(), Failure> {
        match self.fuel.checked_sub(cost) {
            Some(left) if left > 0 => {
                self.fuel = left;
                Ok(())
            }
            _ => self.refuel(),
        }
    }

    #[cold]
    fn refuel(&mut self) -> Result<(), Failure> {
        self.fuel = STEP_INTERVAL;
        (self.check)(self.held_bytes).map_err(Failure::Host)
    }

    /// The pattern byte at `p`; `0` at and past the end, like C's terminating `'\0'`.
    #[inline]
    fn pat(&self, p: usize) -> u8 {
        self.pat.get(p).copied().unwrap_or(0)
    }

    /// The subject byte at `s`; `0` at and past the end, like C's terminating `'\0'`.
    #[inline]
    fn src(&self, s: usize) -> u8 {
        self.src.get(s).copied().unwrap_or(0)
    }

    /// `match`: the recursion-depth guard around [`Matcher::match_here`].
    fn do_match(&mut self, s: usize, p: usize) -> Result<Option<usize>, Failure> {
        if self.calls_left == 0 {
            return Err(raise("pattern too complex"));
        }
        self.calls_left -= 1;
        let result = self.match_here(s, p);
        self.calls_left += 1;
        result
    }

    /// The body of `match`: C's `goto init` (tail recursion) is the loop.
    fn match_here(&mut self, mut s: usize, mut p: usize) -> Result<Option<usize>, Failure> {
        loop {
            self.spend(1)?;
            if p >= self.pat.len() {
                return Ok(Some(s));
            }
            match self.pat(p) {
                b'(' => {
                    return if self.pat(p + 1) == b')' {
                        self.start_capture(s, p + 2, CaptureLen::Position)
                    } else {
                        self.start_capture(s, p + 1, CaptureLen::Unfinished)
                    };
                }
                b')' => return self.end_capture(s, p + 1),
                // `$` anchors only as the last character; elsewhere it is literal.
                b'$' if p + 1 == self.pat.len() => {
                    return Ok((s == self.src.len()).then_some(s));
                }
                ESCAPE => match self.pat(p + 1) {
                    b'b' => match self.match_balance(s, p + 2)? {
                        Some(end) => {
                            s = end;
                            p += 4;
                            continue;
                        }
                        None => return Ok(None),
                    },
                    b'f' => match self.match_frontier(s, p + 2)? {
                        Some(next) => {
                            p = next;
                            continue;
                        }
                        None => return Ok(None),
                    },
                    digit @ b'0'..=b'9' => match self.match_capture(s, digit)? {
                        Some(end) => {
                            s = end;
                            p += 2;
                            continue;
                        }
                        None => return Ok(None),
                    },
                    _ => {}
                },
                _ => {}
            }
            // A single-character class with an optional quantifier.
            let ep = self.class_end(p)?;
            let suffix = self.pat(ep);
            if !self.single_match(s, p, ep) {
                if matches!(suffix, b'*' | b'?' | b'-') {
                    // Zero repetitions are accepted.
                    p = ep + 1;
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

    /// `classend`: the offset just past the single-character class starting at `p`.
    fn class_end(&self, p: usize) -> Result<usize, Failure> {
        let first = self.pat(p);
        let mut p = p + 1;
        match first {
            ESCAPE => {
                if p >= self.pat.len() {
                    return Err(raise("malformed pattern (ends with '%')"));
                }
                Ok(p + 1)
            }
            b'[' => {
                if self.pat(p) == b'^' {
                    p += 1;
                }
                // The first character is part of the set even if it is `]`.
                loop {
                    if p >= self.pat.len() {
                        return Err(raise("malformed pattern (missing ']')"));
                    }
                    let c = self.pat(p);
                    p += 1;
                    if c == ESCAPE && p < self.pat.len() {
                        p += 1; // skip escapes such as `%]`
                    }
                    if self.pat(p) == b']' {
                        return Ok(p + 1);
                    }
                }
            }
            _ => Ok(p),
        }
    }

    /// `singlematch`: does the subject byte at `s` belong to the class `p..ep`?
    fn single_match(&self, s: usize, p: usize, ep: usize) -> bool {
        let Some(&c) = self.src.get(s) else {
            return false;
        };
        match self.pat(p) {
            b'.' => true,
            ESCAPE => match_class(c, self.pat(p + 1)),
            b'[' => self.match_bracket_class(c, p, ep.saturating_sub(1)),
            literal => literal == c,
        }
    }

    /// `matchbracketclass`: is `c` in the set whose `[` is at `p` and `]` at `ec`?
    fn match_bracket_class(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut found = true;
        if self.pat(p + 1) == b'^' {
            found = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                return !found;
            }
            let item = self.pat(p);
            if item == ESCAPE {
                p += 1;
                if match_class(c, self.pat(p)) {
                    return found;
                }
            } else if self.pat(p + 1) == b'-' && p + 2 < ec {
                p += 2;
                if item <= c && c <= self.pat(p) {
                    return found;
                }
            } else if item == c {
                return found;
            }
        }
    }

    /// `matchbalance` for `%bxy`, `p` pointing at `x`.
    fn match_balance(&mut self, s: usize, p: usize) -> Result<Option<usize>, Failure> {
        if p + 1 >= self.pat.len() {
            return Err(raise("malformed pattern (missing arguments to '%b')"));
        }
        if self.src(s) != self.pat(p) {
            return Ok(None);
        }
        let (open, close) = (self.pat(p), self.pat(p + 1));
        let mut depth = 1usize;
        let mut i = s + 1;
        while let Some(&c) = self.src.get(i) {
            // `close` is tested first, so `%b""` ends at the next quote.
            if c == close {
                depth -= 1;
                if depth == 0 {
                    self.spend(i - s)?;
                    return Ok(Some(i + 1));
                }
            } else if c == open {
                depth += 1;
            }
            i += 1;
        }
        self.spend(i - s)?;
        Ok(None)
    }

    /// `%f[set]`, `p` pointing just past `%f`: where the pattern goes on, if the
    /// frontier is at `s` (previous byte not in the set, current one in it).
    fn match_frontier(&self, s: usize, p: usize) -> Result<Option<usize>, Failure> {
        if self.pat(p) != b'[' {
            return Err(raise("missing '[' after '%f' in pattern"));
        }
        let ep = self.class_end(p)?;
        let previous = if s == 0 { 0 } else { self.src(s - 1) };
        let ec = ep.saturating_sub(1);
        let at_frontier = !self.match_bracket_class(previous, p, ec)
            && self.match_bracket_class(self.src(s), p, ec);
        Ok(at_frontier.then_some(ep))
    }

    /// `max_expand`: greedy repetition, backing off one byte at a time.
    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> Result<Option<usize>, Failure> {
        let mut count = 0;
        while self.single_match(s + count, p, ep) {
            count += 1;
        }
        self.spend(count)?;
        loop {
            if let Some(end) = self.do_match(s + count, ep + 1)? {
                return Ok(Some(end));
            }
            if count == 0 {
                return Ok(None);
            }
            count -= 1;
        }
    }

    /// `min_expand`: lazy repetition, growing one byte at a time.
    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> Result<Option<usize>, Failure> {
        loop {
            if let Some(end) = self.do_match(s, ep + 1)? {
                return Ok(Some(end));
            }
            if !self.single_match(s, p, ep) {
                return Ok(None);
            }
            s += 1;
        }
    }

    fn start_capture(
        &mut self,
        s: usize,
        p: usize,
        len: CaptureLen,
    ) -> Result<Option<usize>, Failure> {
        let level = self.level;
        let Some(slot) = self.captures.get_mut(level) else {
            return Err(raise("too many captures"));
        };
        *slot = Capture { init: s, len };
        self.level = level + 1;
        let result = self.do_match(s, p)?;
        if result.is_none() {
            self.level -= 1; // undo the capture
        }
        Ok(result)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Result<Option<usize>, Failure> {
        let l = self.capture_to_close()?;
        self.set_capture_len(
            l,
            CaptureLen::Closed(s.saturating_sub(self.capture_init(l))),
        );
        let result = self.do_match(s, p)?;
        if result.is_none() {
            self.set_capture_len(l, CaptureLen::Unfinished); // undo the capture
        }
        Ok(result)
    }

    fn capture_init(&self, l: usize) -> usize {
        self.captures.get(l).map_or(0, |c| c.init)
    }

    fn set_capture_len(&mut self, l: usize, len: CaptureLen) {
        if let Some(capture) = self.captures.get_mut(l) {
            capture.len = len;
        }
    }

    /// The innermost capture still open.
    fn capture_to_close(&self) -> Result<usize, Failure> {
        self.captures
            .get(..self.level)
            .unwrap_or_default()
            .iter()
            .rposition(|c| c.len == CaptureLen::Unfinished)
            .ok_or_else(|| raise("invalid pattern capture"))
    }

    /// `%1`-`%9` in a pattern: the text of a closed capture must appear again at `s`.
    fn match_capture(&mut self, s: usize, digit: u8) -> Result<Option<usize>, Failure> {
        let l = i32::from(digit) - i32::from(b'1');
        let capture = usize::try_from(l)
            .ok()
            .filter(|&l| l < self.level)
            .and_then(|l| self.captures.get(l))
            .filter(|c| c.len != CaptureLen::Unfinished);
        let Some(&Capture { init, len }) = capture else {
            return Err(raise(format!("invalid capture index %{}", l + 1)));
        };
        // A position capture never matches text (in C its length is negative).
        let CaptureLen::Closed(len) = len else {
            return Ok(None);
        };
        self.spend(len)?;
        let earlier = self.src.get(init..init + len);
        let here = self.src.get(s..s + len);
        Ok((earlier.is_some() && earlier == here).then_some(s + len))
    }

    /// `get_onecapture`: capture `i` of a match spanning `s..e`. With no captures in the
    /// pattern, capture 0 is the whole match.
    pub(crate) fn capture(&self, i: usize, s: usize, e: usize) -> Result<CaptureValue, Failure> {
        if i >= self.level {
            if i != 0 {
                return Err(raise(format!("invalid capture index %{}", i + 1)));
            }
            return Ok(CaptureValue::Text(s, e));
        }
        let Some(capture) = self.captures.get(i) else {
            return Err(raise(format!("invalid capture index %{}", i + 1)));
        };
        match capture.len {
            CaptureLen::Unfinished => Err(raise("unfinished capture")),
            CaptureLen::Position => Ok(CaptureValue::Position(capture.init + 1)),
            CaptureLen::Closed(len) => Ok(CaptureValue::Text(capture.init, capture.init + len)),
        }
    }

    /// How many values `push_captures` gives: the captures, or the whole match (when
    /// `whole_match` is wanted, as by `match` but not `find`) if there are none.
    pub(crate) fn capture_count(&self, whole_match: bool) -> usize {
        if self.level == 0 && whole_match {
            1
        } else {
            self.level
        }
    }

    /// `lmemfind`: the first occurrence of `needle` in the subject at or after `from`,
    /// searched with SIMD `memmem` a window at a time so that the limits are checked.
    pub(crate) fn find_plain(
        &mut self,
        needle: &[u8],
        from: usize,
    ) -> Result<Option<usize>, Failure> {
        let mut start = from;
        while start <= self.src.len() {
            // Windows overlap by the needle's length, so no occurrence is missed.
            let stop = start
                .saturating_add(SCAN_WINDOW + needle.len())
                .min(self.src.len());
            let window = self.src.get(start..stop).unwrap_or_default();
            if let Some(at) = find_bytes(window, needle) {
                self.spend(at + needle.len())?;
                return Ok(Some(start + at));
            }
            self.spend(window.len())?;
            if stop == self.src.len() {
                break;
            }
            start += SCAN_WINDOW;
        }
        Ok(None)
    }

    /// The end of a match of the one-class pattern `pat[..class_end]` (with `+` when
    /// `repeat`) at `s`: greedy repetition of a single class never backtracks.
    fn match_class_at(
        &mut self,
        s: usize,
        class_end: usize,
        repeat: bool,
    ) -> Result<Option<usize>, Failure> {
        if !self.single_match(s, 0, class_end) {
            return Ok(None);
        }
        let mut e = s + 1;
        if repeat {
            while self.single_match(e, 0, class_end) {
                e += 1;
            }
            self.spend(e - s)?;
        }
        Ok(Some(e))
    }

    /// The first `s` at or after `from` where the one-class pattern matches.
    fn find_class(&mut self, from: usize, class_end: usize) -> Result<Option<usize>, Failure> {
        let mut s = from;
        while s < self.src.len() {
            if self.single_match(s, 0, class_end) {
                self.spend(s - from)?;
                return Ok(Some(s));
            }
            s += 1;
            if (s - from).is_multiple_of(SCAN_WINDOW) {
                self.spend(SCAN_WINDOW)?;
            }
        }
        self.spend(s - from)?;
        Ok(None)
    }
}

/// Bytes a fast path scans between two checks of the limits.
const SCAN_WINDOW: usize = 1 << 20;

/// How a pattern is matched: patterns that cannot backtrack skip the general matcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// No special characters: a plain substring (not empty).
    Literal,
    /// One single-character class (`.`, `%a`, `[set]`, a literal), alone or with `+`;
    /// the class ends at the given offset.
    Class { end: usize, repeat: bool },
    /// Anything else.
    General,
}

impl Plan {
    /// The plan for `pat`, given without its `^` anchor.
    fn of(pat: &[u8], matcher: &Matcher) -> Plan {
        if pat.is_empty() {
            return Plan::General;
        }
        // `)` is no special character to `string.find`, but the matcher reads it as the
        // end of a capture (an error without one open).
        if !pat.iter().any(|b| SPECIALS.contains(b) || *b == b')') {
            return Plan::Literal;
        }
        let special_escape =
            pat.first() == Some(&ESCAPE) && matches!(pat.get(1), Some(b'b' | b'f' | b'0'..=b'9'));
        if matches!(pat[0], b'(' | b')') || special_escape || pat == b"$" {
            return Plan::General;
        }
        match matcher.class_end(0) {
            Ok(end) if end == pat.len() => Plan::Class { end, repeat: false },
            Ok(end) if end + 1 == pat.len() && pat.get(end) == Some(&b'+') => {
                Plan::Class { end, repeat: true }
            }
            _ => Plan::General,
        }
    }
}

/// A [`Matcher`] with the fastest [`Plan`] for its pattern: same results, same errors.
pub(crate) struct Searcher<'a> {
    matcher: Matcher<'a>,
    plan: Plan,
    /// The class every match must start with, if the pattern has one (see [`first_class`]).
    first: Option<(usize, usize)>,
}

/// The single-character class `p..ep` that every match of `pat` starts with: the first
/// item after any opening captures, when it is not optional and not special (`%b`, `%f`,
/// a back-reference, an anchor). Positions where it does not match can then be skipped
/// without running the matcher: the matcher would fail there before reading further
/// (it raises no error until an item matches, except for too many captures, which is
/// why a pattern opening 32 captures or more gets no first class).
fn first_class(pat: &[u8], matcher: &Matcher) -> Option<(usize, usize)> {
    let mut p = 0;
    let mut captures = 0;
    while pat.get(p) == Some(&b'(') {
        p += if pat.get(p + 1) == Some(&b')') { 2 } else { 1 };
        captures += 1;
        if captures >= MAX_CAPTURES {
            return None;
        }
    }
    match pat.get(p)? {
        b')' => return None,
        b'$' if p + 1 == pat.len() => return None,
        &ESCAPE if matches!(pat.get(p + 1), Some(b'b' | b'f' | b'0'..=b'9')) => return None,
        _ => {}
    }
    let ep = matcher.class_end(p).ok()?;
    if matches!(pat.get(ep), Some(b'*' | b'?' | b'-')) {
        return None;
    }
    Some((p, ep))
}

impl<'a> Searcher<'a> {
    /// A searcher of `pat` (without its `^` anchor) in `src`.
    pub(crate) fn new(src: &'a [u8], pat: &'a [u8], check: Check<'a>) -> Self {
        let matcher = Matcher::new(src, pat, check);
        let plan = Plan::of(pat, &matcher);
        let first = match plan {
            Plan::General => first_class(pat, &matcher),
            _ => None,
        };
        Searcher {
            matcher,
            plan,
            first,
        }
    }

    /// The first position at or after `s` where the pattern's first class matches (the
    /// subject's end if none): no match can start before it.
    fn skip_to_first_class(&mut self, s: usize) -> Result<usize, Failure> {
        let Some((p, ep)) = self.first else {
            return Ok(s);
        };
        let src = self.matcher.src;
        let literal = self.matcher.pat[p];
        let next = if ep == p + 1 && !matches!(literal, b'.' | b'[' | ESCAPE) {
            src.get(s..)
                .and_then(|rest| memchr::memchr(literal, rest))
                .map_or(src.len(), |at| s + at)
        } else {
            (s..src.len())
                .find(|&i| self.matcher.single_match(i, p, ep))
                .unwrap_or(src.len())
        };
        self.matcher.spend(next - s)?;
        Ok(next)
    }

    /// Where a match starting at `s` ends, if there is one.
    pub(crate) fn match_at(&mut self, s: usize) -> Result<Option<usize>, Failure> {
        match self.plan {
            Plan::Literal => {
                let pat = self.matcher.pat;
                self.matcher.spend(pat.len())?;
                let here = self.matcher.src.get(s..s + pat.len());
                Ok((here == Some(pat)).then_some(s + pat.len()))
            }
            Plan::Class { end, repeat } => self.matcher.match_class_at(s, end, repeat),
            Plan::General => self.matcher.match_at(s),
        }
    }

    /// The first match starting at or after `from` that does not end at `last_match`
    /// (Lua 5.4 accepts no empty match right where the previous one ended).
    pub(crate) fn next_match(
        &mut self,
        from: usize,
        last_match: Option<usize>,
    ) -> Result<Option<(usize, usize)>, Failure> {
        // Literal and class matches are never empty, so never end at `last_match`.
        match self.plan {
            Plan::Literal => {
                let pat = self.matcher.pat;
                Ok(self
                    .matcher
                    .find_plain(pat, from)?
                    .map(|s| (s, s + pat.len())))
            }
            Plan::Class { end, repeat } => match self.matcher.find_class(from, end)? {
                Some(s) => Ok(self.matcher.match_class_at(s, end, repeat)?.map(|e| (s, e))),
                None => Ok(None),
            },
            Plan::General => {
                let mut s = from;
                while s <= self.matcher.src.len() {
                    s = self.skip_to_first_class(s)?;
                    if self.first.is_some() && s == self.matcher.src.len() {
                        return Ok(None); // the first class matches no byte here
                    }
                    match self.matcher.match_at(s)? {
                        Some(e) if Some(e) != last_match => return Ok(Some((s, e))),
                        _ => s += 1,
                    }
                }
                Ok(None)
            }
        }
    }

    /// The first match at `from` (when `anchored`) or after it.
    pub(crate) fn find(
        &mut self,
        from: usize,
        anchored: bool,
    ) -> Result<Option<(usize, usize)>, Failure> {
        if anchored {
            return Ok(self.match_at(from)?.map(|e| (from, e)));
        }
        self.next_match(from, None)
    }

    pub(crate) fn matcher(&mut self) -> &mut Matcher<'a> {
        &mut self.matcher
    }
}

/// Whether `string.find` would run the matcher for `pat` rather than a plain search.
pub(crate) fn has_specials(pat: &[u8]) -> bool {
    pat.iter().any(|b| SPECIALS.contains(b))
}

/// Splits a leading `^` anchor off a pattern.
fn anchor(pat: &[u8]) -> (bool, &[u8]) {
    match pat.split_first() {
        Some((b'^', rest)) => (true, rest),
        _ => (false, pat),
    }
}

/// `string.find(src, pat)` without captures in the result: where the first match is,
/// with the same errors (an unfinished capture included) and limit checks. The library's
/// `grep` matches each line with it.
pub(crate) fn find_in(
    src: &[u8],
    pat: &[u8],
    check: Check,
) -> Result<Option<(usize, usize)>, Failure> {
    if !pat.iter().any(|b| SPECIALS.contains(b)) {
        let mut matcher = Matcher::new(src, &[], check);
        return Ok(matcher.find_plain(pat, 0)?.map(|s| (s, s + pat.len())));
    }
    let (anchored, pat) = anchor(pat);
    let mut searcher = Searcher::new(src, pat, check);
    let found = searcher.find(0, anchored)?;
    if let Some((s, e)) = found {
        let matcher = searcher.matcher();
        for i in 0..matcher.capture_count(false) {
            matcher.capture(i, s, e)?;
        }
    }
    Ok(found)
}

impl Failure {
    /// The failure as an error of a Rust function called from Lua.
    pub(crate) fn into_lua_error(self) -> mlua::Error {
        match self {
            Failure::Raise(message) => mlua::Error::RuntimeError(message),
            Failure::Rethrow(value) => mlua::Error::RuntimeError(format!("{value:?}")),
            Failure::Host(error) => error,
        }
    }
}

/// `match_class`: does byte `c` belong to class `%cl`? The classes are those of C's
/// `<ctype.h>` in the "C" locale (ASCII only); an upper-case letter is the complement,
/// and any other `cl` stands for itself (`%.` is a literal dot).
fn match_class(c: u8, cl: u8) -> bool {
    let matched = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        // C's isspace includes '\v', which Rust's is_ascii_whitespace does not.
        b's' => matches!(c, b' ' | b'\t'..=b'\r'),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0, // deprecated, still accepted by Lua
        _ => return cl == c,
    };
    if cl.is_ascii_lowercase() {
        matched
    } else {
        !matched
    }
}

/// `posrelatI`: a 1-based start position, negative counting from the end, clipped to
/// `[1, ∞)`.
fn start_position(pos: i64, len: usize) -> usize {
    if pos > 0 {
        usize::try_from(pos).unwrap_or(usize::MAX)
    } else if pos == 0 || pos.unsigned_abs() > len as u64 {
        1
    } else {
        // -len <= pos < 0
        len - (pos.unsigned_abs() as usize) + 1
    }
}

// ---------------------------------------------------------------------------------------
// The Lua functions.
// ---------------------------------------------------------------------------------------

/// The marker that starts a failure report (`FAIL, value, level`) to the C function in front ([`finish`]).
/// Lua code cannot make a light userdata, so no result can be mistaken for it.
static FAIL_MARKER: u8 = 0;

fn fail_marker() -> Value {
    Value::LightUserData(LightUserData(std::ptr::addr_of!(FAIL_MARKER) as *mut c_void))
}

/// `luaL_error`'s behaviour for the Rust functions' failure reports, in a C function
/// (no Lua frame between the caller and the string function, as in C Lua): the values
/// on the stack are returned, or `FAIL, value, level` is raised, a level-2 message
/// prefixed with the caller's position, a level-0 value re-thrown as it was.
///
/// # Safety
/// Called from a `lua_CFunction` with the results on the stack; may `lua_error`
/// (a `longjmp`), so the caller must hold nothing that needs dropping.
unsafe fn finish(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let results = ffi::lua_gettop(state);
        let failed = results >= 3
            && ffi::lua_type(state, 1) == ffi::LUA_TLIGHTUSERDATA
            && ffi::lua_touserdata(state, 1) == std::ptr::addr_of!(FAIL_MARKER) as *mut c_void;
        if !failed {
            return results;
        }
        let level = ffi::lua_tointeger(state, 3);
        ffi::lua_settop(state, 2);
        if level > 0 && ffi::lua_type(state, 2) == ffi::LUA_TSTRING {
            ffi::luaL_where(state, 1);
            ffi::lua_rotate(state, 2, 1);
            ffi::lua_concat(state, 2);
        }
        ffi::lua_error(state)
    }
}

/// Calls upvalue 1 (a Rust string function) with all the arguments, then [`finish`].
unsafe extern "C-unwind" fn front(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let n = ffi::lua_gettop(state);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_rotate(state, 1, 1);
        ffi::lua_call(state, n, ffi::LUA_MULTRET);
        finish(state)
    }
}

/// `string.find`: a plain search (or a pattern without special characters) over at most
/// [`SCAN_WINDOW`] bytes is answered here, in C-function time with no allocation;
/// everything else, and a search that would scan further (which must check the limits),
/// goes to the Rust function in upvalue 1 through [`front`].
unsafe extern "C-unwind" fn find_front(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        match quick_find(state) {
            Some(Some((start, end))) => {
                ffi::lua_pushinteger(state, start);
                ffi::lua_pushinteger(state, end);
                2
            }
            Some(None) => {
                ffi::lua_pushnil(state);
                1
            }
            None => quick_search(state, true).unwrap_or_else(|| front(state)),
        }
    }
}

/// `string.match`: [`quick_search`], else the Rust function in upvalue 1.
unsafe extern "C-unwind" fn match_front(state: *mut ffi::lua_State) -> c_int {
    unsafe { quick_search(state, false).unwrap_or_else(|| front(state)) }
}

/// What [`quick_search`] found, held as plain values so that nothing needs dropping
/// when the results are pushed (pushing may raise a Lua error).
// One per call, on the stack: boxing the captures would allocate, which this path avoids.
#[allow(clippy::large_enum_variant)]
enum Quick {
    Missing,
    Found {
        start: usize,
        end: usize,
        captures: [CaptureValue; MAX_CAPTURES],
        count: usize,
    },
    /// An error message; `true` to prefix the caller's position (`luaL_error`).
    Error(String, bool),
}

/// The bytes Lua has allocated, as `Lua::used_memory` counts them.
unsafe fn lua_memory(state: *mut ffi::lua_State) -> usize {
    unsafe {
        let kilobytes = ffi::lua_gc(state, ffi::LUA_GCCOUNT, 0);
        let bytes = ffi::lua_gc(state, ffi::LUA_GCCOUNTB, 0);
        usize::try_from(kilobytes).unwrap_or(0) * 1024 + usize::try_from(bytes).unwrap_or(0)
    }
}

/// `string.find` (`find`) or `string.match` with ordinary arguments (two strings and an
/// optional integer), run here rather than through an mlua callback: the same
/// [`Searcher`] and limit checks (the [`Tripwire`] in upvalue 2), the same results and
/// errors, without the per-call cost of converting arguments and results. `None` for
/// other arguments (the full path then reports any error exactly).
unsafe fn quick_search(state: *mut ffi::lua_State, find: bool) -> Option<c_int> {
    unsafe {
        if find && ffi::lua_toboolean(state, 4) != 0 {
            return None;
        }
        let (src, pat, init) = ordinary_args(state, if find { 4 } else { 3 })?;
        let tripwire = ffi::lua_touserdata(state, ffi::lua_upvalueindex(2))
            .cast::<Tripwire>()
            .cast_const()
            .as_ref()?;
        let check = |held: usize| tripwire.check(lua_memory(state).saturating_add(held));
        let outcome = search(src, pat, init, find, &check);
        Some(push_quick(state, outcome, find, src))
    }
}

/// `str_find_aux` into a [`Quick`].
fn search(src: &[u8], pat: &[u8], init: i64, find: bool, check: Check) -> Quick {
    let init = start_position(init, src.len()) - 1;
    if init > src.len() {
        return Quick::Missing;
    }
    let found = (|| {
        if find && !has_specials(pat) {
            let mut matcher = Matcher::new(src, &[], check);
            let start = matcher.find_plain(pat, init)?;
            return Ok(start.map(|s| {
                (
                    s,
                    s + pat.len(),
                    [CaptureValue::Position(0); MAX_CAPTURES],
                    0,
                )
            }));
        }
        let (anchored, pat) = anchor(pat);
        let mut searcher = Searcher::new(src, pat, check);
        let Some((s, e)) = searcher.find(init, anchored)? else {
            return Ok(None);
        };
        let matcher = searcher.matcher();
        let count = matcher.capture_count(!find);
        let mut captures = [CaptureValue::Position(0); MAX_CAPTURES];
        for (i, slot) in captures.iter_mut().enumerate().take(count) {
            *slot = matcher.capture(i, s, e)?;
        }
        Ok(Some((s, e, captures, count)))
    })();
    match found {
        Ok(Some((start, end, captures, count))) => Quick::Found {
            start,
            end,
            captures,
            count,
        },
        Ok(None) => Quick::Missing,
        Err(Failure::Raise(message)) => Quick::Error(message, true),
        Err(Failure::Host(error)) => Quick::Error(error.to_string(), false),
        Err(Failure::Rethrow(_)) => Quick::Error("unexpected error value".to_string(), false),
    }
}

/// Pushes a [`Quick`] outcome as `string.find`/`string.match` results, or raises it.
unsafe fn push_quick(state: *mut ffi::lua_State, outcome: Quick, find: bool, src: &[u8]) -> c_int {
    unsafe {
        match outcome {
            Quick::Missing => {
                ffi::lua_pushnil(state);
                1
            }
            Quick::Found {
                start,
                end,
                captures,
                count,
            } => {
                ffi::luaL_checkstack(state, count as c_int + 2, c"too many captures".as_ptr());
                if find {
                    ffi::lua_pushinteger(state, start as i64 + 1);
                    ffi::lua_pushinteger(state, end as i64);
                }
                for capture in captures.iter().take(count) {
                    match *capture {
                        CaptureValue::Text(a, b) => {
                            let text = piece(src, a, b);
                            ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
                        }
                        CaptureValue::Position(p) => ffi::lua_pushinteger(state, p as i64),
                    }
                }
                count as c_int + if find { 2 } else { 0 }
            }
            Quick::Error(message, at_caller) => {
                ffi::lua_pushlstring(state, message.as_ptr().cast(), message.len());
                drop(message);
                if at_caller {
                    ffi::luaL_where(state, 1);
                    ffi::lua_rotate(state, -2, 1);
                    ffi::lua_concat(state, 2);
                }
                ffi::lua_error(state)
            }
        }
    }
}

/// The borrowed bytes of the string at `index`, if it is a string (not a number).
///
/// # Safety
/// `state` must be a valid Lua state; the slice lives while the value is on the stack.
unsafe fn stack_bytes<'a>(state: *mut ffi::lua_State, index: c_int) -> Option<&'a [u8]> {
    unsafe {
        if ffi::lua_type(state, index) != ffi::LUA_TSTRING {
            return None;
        }
        let mut len = 0usize;
        let data = ffi::lua_tolstring(state, index, &mut len);
        (!data.is_null()).then(|| std::slice::from_raw_parts(data.cast::<u8>(), len))
    }
}

/// The ordinary arguments of a string function: subject and pattern (strings, not
/// numbers) and an optional integer start, with at most `max_args` arguments; `None`
/// for anything else, which the full path handles (and reports errors for).
unsafe fn ordinary_args<'a>(
    state: *mut ffi::lua_State,
    max_args: c_int,
) -> Option<(&'a [u8], &'a [u8], i64)> {
    unsafe {
        let n = ffi::lua_gettop(state);
        if !(2..=max_args).contains(&n) {
            return None;
        }
        let src = stack_bytes(state, 1)?;
        let pat = stack_bytes(state, 2)?;
        let init = match ffi::lua_type(state, 3) {
            ffi::LUA_TNONE | ffi::LUA_TNIL => 1,
            ffi::LUA_TNUMBER if ffi::lua_isinteger(state, 3) != 0 => ffi::lua_tointeger(state, 3),
            _ => return None,
        };
        Some((src, pat, init))
    }
}

/// `string.find`'s answer when it needs neither the matcher nor a limit check: the
/// 1-based start and end, `Some(None)` for no match, `None` to take the full path.
unsafe fn quick_find(state: *mut ffi::lua_State) -> Option<Option<(i64, i64)>> {
    unsafe {
        let (src, pat, init) = ordinary_args(state, 4)?;
        let plain = ffi::lua_toboolean(state, 4) != 0;
        if !plain && pat.iter().any(|b| SPECIALS.contains(b)) {
            return None;
        }
        let init = start_position(init, src.len()) - 1;
        if init > src.len() {
            return Some(None);
        }
        let window = src.get(init..)?;
        let limit = SCAN_WINDOW.saturating_add(pat.len());
        let found = find_bytes(window.get(..limit).unwrap_or(window), pat);
        match found {
            Some(at) => {
                let start = (init + at) as i64;
                Some(Some((start + 1, start + pat.len() as i64)))
            }
            None if window.len() <= limit => Some(None),
            None => None,
        }
    }
}

/// `gmatch`: for a literal or one-class pattern, a C iterator over the subject
/// ([`quick_gmatch_step`]); otherwise the Rust function in upvalue 1 gives the step
/// function (or a failure), returned wrapped in [`gmatch_step`]. Upvalue 2 checks the
/// limits.
unsafe extern "C-unwind" fn gmatch_front(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        if let Some(init) = quick_gmatch_start(state) {
            ffi::lua_settop(state, 2);
            ffi::lua_pushinteger(state, init as i64);
            ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
            ffi::lua_pushcclosure(state, quick_gmatch_step, 4);
            return 1;
        }
        if front(state) == 1 {
            ffi::lua_pushcclosure(state, gmatch_step, 1);
        }
        1
    }
}

fn no_check(_: usize) -> mlua::Result<()> {
    Ok(())
}

/// The 0-based start of a `gmatch` whose pattern needs no matcher, or `None`.
unsafe fn quick_gmatch_start(state: *mut ffi::lua_State) -> Option<usize> {
    unsafe {
        let (src, pat, init) = ordinary_args(state, 3)?;
        let plan = Plan::of(pat, &Matcher::new(src, pat, &no_check));
        if plan == Plan::General {
            return None;
        }
        Some((start_position(init, src.len()) - 1).min(src.len() + 1))
    }
}

/// One step of a `gmatch` over a literal or one-class pattern; upvalues: subject,
/// pattern, position, limits check. Such matches are never empty, so Lua 5.4's rule
/// against an empty match where the last one ended never applies.
unsafe extern "C-unwind" fn quick_gmatch_step(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let (Some(src), Some(pat)) = (
            stack_bytes(state, ffi::lua_upvalueindex(1)),
            stack_bytes(state, ffi::lua_upvalueindex(2)),
        ) else {
            return 0;
        };
        let mut from =
            usize::try_from(ffi::lua_tointeger(state, ffi::lua_upvalueindex(3))).unwrap_or(0);
        loop {
            match next_in_window(src, pat, from) {
                Window::Found(s, e) => {
                    ffi::lua_pushinteger(state, e as i64);
                    ffi::lua_replace(state, ffi::lua_upvalueindex(3));
                    ffi::lua_pushlstring(state, src.as_ptr().add(s).cast(), e - s);
                    return 1;
                }
                Window::Done => {
                    ffi::lua_pushinteger(state, src.len() as i64 + 1);
                    ffi::lua_replace(state, ffi::lua_upvalueindex(3));
                    return 0;
                }
                Window::Continue(next) => {
                    // A window scanned without a match: let the limits stop a long scan.
                    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(4));
                    ffi::lua_call(state, 0, 0);
                    from = next;
                }
            }
        }
    }
}

/// What one window of a quick `gmatch` scan found.
enum Window {
    Found(usize, usize),
    Continue(usize),
    Done,
}

/// The next literal or one-class match at or after `from`, looking at most
/// [`SCAN_WINDOW`] bytes ahead for its start.
fn next_in_window(src: &[u8], pat: &[u8], from: usize) -> Window {
    if from > src.len() {
        return Window::Done;
    }
    let stop = from.saturating_add(SCAN_WINDOW).min(src.len());
    let mut matcher = Matcher::new(src, pat, &no_check);
    let found = match Plan::of(pat, &matcher) {
        Plan::Literal => {
            let window = src.get(from..stop.saturating_add(pat.len()).min(src.len()));
            find_bytes(window.unwrap_or_default(), pat).map(|at| (from + at, from + at + pat.len()))
        }
        Plan::Class { end, repeat } => (from..stop)
            .find(|&s| matcher.single_match(s, 0, end))
            .and_then(|s| {
                matcher
                    .match_class_at(s, end, repeat)
                    .ok()
                    .flatten()
                    .map(|e| (s, e))
            }),
        Plan::General => return Window::Done,
    };
    match found {
        Some((s, e)) => Window::Found(s, e),
        None if stop >= src.len() => Window::Done,
        None => Window::Continue(stop),
    }
}

/// `memmem`, or `memchr` for one byte (no searcher to build).
fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    match needle {
        [byte] => memchr::memchr(*byte, haystack),
        _ => memchr::memmem::find(haystack, needle),
    }
}

/// One step of a `gmatch` iterator: the Rust step in upvalue 1, then [`finish`].
unsafe extern "C-unwind" fn gmatch_step(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        ffi::lua_settop(state, 0);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_call(state, 0, ffi::LUA_MULTRET);
        finish(state)
    }
}

/// A C closure of `function` over `upvalues` (the Rust function first).
fn c_closure(
    lua: &Lua,
    function: ffi::lua_CFunction,
    upvalues: Vec<Value>,
) -> mlua::Result<Function> {
    let count = c_int::try_from(upvalues.len()).unwrap_or(0);
    // SAFETY: `exec_raw` runs the closure protected with the upvalues on the stack.
    unsafe {
        lua.exec_raw(MultiValue::from_vec(upvalues), |state| {
            ffi::lua_pushcclosure(state, function, count);
        })
    }
}

/// Replaces `string.find`, `string.match`, `string.gmatch` and `string.gsub` (also
/// reached as string methods) with the interruptible port, checking `tripwire`.
pub(crate) fn install(lua: &Lua, tripwire: Rc<Tripwire>) -> mlua::Result<()> {
    let globals = lua.globals();
    let core_find = {
        let tripwire = Rc::clone(&tripwire);
        lua.create_function(move |lua, args: MultiValue| {
            report(lua, find_aux(lua, &tripwire, &args, true))
        })?
    };
    let core_match = {
        let tripwire = Rc::clone(&tripwire);
        lua.create_function(move |lua, args: MultiValue| {
            report(lua, find_aux(lua, &tripwire, &args, false))
        })?
    };
    let core_gmatch = {
        let tripwire = Rc::clone(&tripwire);
        lua.create_function(move |lua, args: MultiValue| {
            let iterator = gmatch(lua, &tripwire, &args).map(|f| one(Value::Function(f)));
            report(lua, iterator)
        })?
    };
    let core_gsub = {
        let tripwire = Rc::clone(&tripwire);
        let pcall: Function = globals.get("pcall")?;
        let index: Function = lua
            .load("return function(t, k) return t[k] end")
            .set_name("=patterns")
            .eval()?;
        lua.create_function(move |lua, args: MultiValue| {
            let helpers = Helpers {
                pcall: &pcall,
                index: &index,
            };
            report(lua, gsub(lua, &tripwire, &args, &helpers))
        })?
    };
    let check = {
        let tripwire = Rc::clone(&tripwire);
        lua.create_function(move |lua, ()| tripwire.check(lua.used_memory()))?
    };
    // The C functions reach the tripwire through a light userdata: the Rust functions
    // beside it in their upvalues own a reference, so it lives as long as they do.
    let tripwire_pointer =
        Value::LightUserData(LightUserData(Rc::as_ptr(&tripwire).cast_mut().cast()));
    let find = c_closure(
        lua,
        find_front,
        vec![Value::Function(core_find), tripwire_pointer.clone()],
    )?;
    let r#match = c_closure(
        lua,
        match_front,
        vec![Value::Function(core_match), tripwire_pointer],
    )?;
    let gmatch = c_closure(
        lua,
        gmatch_front,
        vec![Value::Function(core_gmatch), Value::Function(check)],
    )?;
    let gsub = c_closure(lua, front, vec![Value::Function(core_gsub)])?;
    let string: Table = globals.get("string")?;
    string.raw_set("find", find)?;
    string.raw_set("match", r#match)?;
    string.raw_set("gmatch", gmatch)?;
    string.raw_set("gsub", gsub)
}

/// Turns a result into what [`finish`] expects: the values, or `FAIL, value, level`.
fn report(lua: &Lua, result: Result<MultiValue, Failure>) -> mlua::Result<MultiValue> {
    let (value, level) = match result {
        Ok(values) => return Ok(values),
        Err(Failure::Host(error)) => return Err(error),
        Err(Failure::Raise(message)) => (Value::String(lua.create_string(message)?), 2),
        Err(Failure::Rethrow(value)) => (value, 0),
    };
    Ok(MultiValue::from_vec(vec![
        fail_marker(),
        value,
        Value::Integer(level),
    ]))
}

fn one(value: Value) -> MultiValue {
    MultiValue::from_vec(vec![value])
}

/// The limits check handed to a [`Matcher`].
fn limits_check<'a>(
    lua: &'a Lua,
    tripwire: &'a Tripwire,
) -> impl Fn(usize) -> mlua::Result<()> + 'a {
    move |held_bytes| tripwire.check(lua.used_memory().saturating_add(held_bytes))
}

/// The arguments of one call, with `luaL_check*`-style accessors and messages.
struct Args<'a> {
    lua: &'a Lua,
    values: &'a MultiValue,
    /// The function's name in the `string` table, for messages.
    function: &'static str,
}

impl Args<'_> {
    /// Argument `n` (1-based); `None` when absent.
    fn get(&self, n: usize) -> Option<&Value> {
        self.values.get(n.wrapping_sub(1))
    }

    /// `luaL_checklstring`: a string, or a number converted to one.
    fn string(&self, n: usize) -> Result<LuaString, Failure> {
        match self.get(n) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(number @ (Value::Integer(_) | Value::Number(_))) => {
                match self.lua.coerce_string(number.clone())? {
                    Some(s) => Ok(s),
                    None => Err(self.type_error(n, "string")),
                }
            }
            _ => Err(self.type_error(n, "string")),
        }
    }

    /// `luaL_optinteger`.
    fn opt_integer(&self, n: usize, default: i64) -> Result<i64, Failure> {
        let value = match self.get(n) {
            None | Some(Value::Nil) => return Ok(default),
            Some(Value::Integer(i)) => return Ok(*i),
            Some(value) => value.clone(),
        };
        if let Some(i) = self.lua.coerce_integer(value.clone())? {
            return Ok(i);
        }
        if self.lua.coerce_number(value)?.is_some() {
            return Err(self.arg_error(n, "number has no integer representation"));
        }
        Err(self.type_error(n, "number"))
    }

    /// `lua_toboolean`.
    fn truthy(&self, n: usize) -> bool {
        !matches!(self.get(n), None | Some(Value::Nil | Value::Boolean(false)))
    }

    /// `luaL_typeerror`.
    fn type_error(&self, n: usize, expected: &str) -> Failure {
        let got = match self.get(n) {
            None => "no value".to_string(),
            Some(value) => type_name_for_message(value),
        };
        self.arg_error(n, &format!("{expected} expected, got {got}"))
    }

    /// `luaL_argerror`. The name is the one the caller used for the C function in front (stack
    /// level 1, the Rust function being level 0), as C Lua names the C function.
    fn arg_error(&self, n: usize, extra: &str) -> Failure {
        let (name, what) = self
            .lua
            .inspect_stack(1, |frame| {
                let names = frame.names();
                (names.name.map(|name| name.into_owned()), names.name_what)
            })
            .unwrap_or((None, None));
        let mut n = n;
        if what == Some("method") {
            n -= 1; // `self` is not counted
            if n == 0 {
                let name = name.unwrap_or_else(|| "?".to_string());
                return raise(format!("calling '{name}' on bad self ({extra})"));
            }
        }
        let name = name.unwrap_or_else(|| format!("string.{}", self.function));
        raise(format!("bad argument #{n} to '{name}' ({extra})"))
    }
}

/// `luaL_typename`.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// The type name `luaL_typeerror` shows: a table's `__name` if it is a string.
fn type_name_for_message(value: &Value) -> String {
    if let Value::Table(table) = value {
        let name = table
            .metatable()
            .and_then(|meta| meta.raw_get::<Value>("__name").ok());
        if let Some(Value::String(name)) = name {
            return name.to_string_lossy();
        }
    }
    if let Value::LightUserData(_) = value {
        return "light userdata".to_string();
    }
    type_name(value).to_string()
}

/// A slice that is empty instead of panicking when out of range.
fn piece(bytes: &[u8], start: usize, end: usize) -> &[u8] {
    bytes.get(start..end).unwrap_or_default()
}

/// A capture as a Lua value: a string, or an integer for a position capture.
fn capture_value(lua: &Lua, src: &[u8], value: CaptureValue) -> mlua::Result<Value> {
    match value {
        CaptureValue::Text(start, end) => {
            Ok(Value::String(lua.create_string(piece(src, start, end))?))
        }
        CaptureValue::Position(position) => Ok(Value::Integer(position as i64)),
    }
}

/// `push_captures`: appends the captures of the match `s..e` to `out`.
fn push_captures(
    lua: &Lua,
    matcher: &Matcher,
    src: &[u8],
    (s, e): (usize, usize),
    whole_match: bool,
    out: &mut MultiValue,
) -> Result<(), Failure> {
    for i in 0..matcher.capture_count(whole_match) {
        let value = matcher.capture(i, s, e)?;
        out.push_back(capture_value(lua, src, value)?);
    }
    Ok(())
}

/// `str_find_aux`: `string.find` (`find`) or `string.match`.
fn find_aux(
    lua: &Lua,
    tripwire: &Tripwire,
    values: &MultiValue,
    find: bool,
) -> Result<MultiValue, Failure> {
    let args = Args {
        lua,
        values,
        function: if find { "find" } else { "match" },
    };
    let subject = args.string(1)?;
    let pattern = args.string(2)?;
    let (src, pat) = (subject.as_bytes(), pattern.as_bytes());
    let init = start_position(args.opt_integer(3, 1)?, src.len()) - 1;
    if init > src.len() {
        return Ok(one(Value::Nil)); // starts after the end: cannot find anything
    }
    let check = limits_check(lua, tripwire);
    // An explicit plain search, or a pattern without special characters: no matcher.
    if find && (args.truthy(4) || !pat.iter().any(|b| SPECIALS.contains(b))) {
        let mut matcher = Matcher::new(&src, &[], &check);
        return Ok(match matcher.find_plain(&pat, init)? {
            Some(start) => MultiValue::from_vec(vec![
                Value::Integer(start as i64 + 1),
                Value::Integer((start + pat.len()) as i64),
            ]),
            None => one(Value::Nil),
        });
    }
    let (anchored, pat) = anchor(&pat);
    let mut searcher = Searcher::new(&src, pat, &check);
    let Some((s, e)) = searcher.find(init, anchored)? else {
        return Ok(one(Value::Nil));
    };
    let mut out = MultiValue::new();
    if find {
        out.push_back(Value::Integer(s as i64 + 1));
        out.push_back(Value::Integer(e as i64));
    }
    push_captures(lua, searcher.matcher(), &src, (s, e), !find, &mut out)?;
    Ok(out)
}

/// `gmatch`: the iteration state lives in the Rust closure returned (wrapped in Lua).
fn gmatch(lua: &Lua, tripwire: &Rc<Tripwire>, values: &MultiValue) -> Result<Function, Failure> {
    let args = Args {
        lua,
        values,
        function: "gmatch",
    };
    let subject = args.string(1)?;
    let pattern = args.string(2)?;
    let len = subject.as_bytes().len();
    // Past the end, start at `len + 1` so that the loop below never runs.
    let init = (start_position(args.opt_integer(3, 1)?, len) - 1).min(len + 1);
    let position = Cell::new(init);
    // End of the last match: 5.4 does not accept an empty match right where one ended.
    let last_match: Cell<Option<usize>> = Cell::new(None);
    let tripwire = Rc::clone(tripwire);
    let step = lua.create_function(move |lua, _: MultiValue| {
        let (src, pat) = (subject.as_bytes(), pattern.as_bytes());
        let check = limits_check(lua, &tripwire);
        let mut searcher = Searcher::new(&src, &pat, &check);
        let result = (|| {
            if position.get() > src.len() {
                return Ok(MultiValue::new()); // no more matches
            }
            match searcher.next_match(position.get(), last_match.get())? {
                Some((s, e)) => {
                    position.set(e);
                    last_match.set(Some(e));
                    let mut out = MultiValue::new();
                    push_captures(lua, searcher.matcher(), &src, (s, e), true, &mut out)?;
                    Ok(out)
                }
                None => {
                    position.set(src.len() + 1);
                    Ok(MultiValue::new())
                }
            }
        })();
        report(lua, result)
    })?;
    Ok(step)
}

/// Lua functions `gsub` calls for function and table replacements.
struct Helpers<'a> {
    /// Calls a replacement function so that its error comes back as a value, re-thrown
    /// unchanged (mlua would turn a non-string error into text).
    pcall: &'a Function,
    /// `function(t, k) return t[k] end`: indexing with metamethods, under `pcall`.
    index: &'a Function,
}

/// What `gsub` replaces a match with.
enum Replacement {
    Text(LuaString),
    Call(Function),
    Index(Table),
}

/// `str_gsub`.
fn gsub(
    lua: &Lua,
    tripwire: &Tripwire,
    values: &MultiValue,
    helpers: &Helpers,
) -> Result<MultiValue, Failure> {
    let args = Args {
        lua,
        values,
        function: "gsub",
    };
    let subject = args.string(1)?;
    let pattern = args.string(2)?;
    let src = subject.as_bytes();
    // Lua checks the count (argument 4) before the replacement's type (argument 3).
    let max_replacements = args.opt_integer(4, src.len() as i64 + 1)?;
    let replacement = match args.get(3) {
        Some(Value::String(text)) => Replacement::Text(text.clone()),
        Some(number @ (Value::Integer(_) | Value::Number(_))) => {
            match lua.coerce_string(number.clone())? {
                Some(text) => Replacement::Text(text),
                None => return Err(args.type_error(3, "string/function/table")),
            }
        }
        Some(Value::Function(function)) => Replacement::Call(function.clone()),
        Some(Value::Table(table)) => Replacement::Index(table.clone()),
        _ => return Err(args.type_error(3, "string/function/table")),
    };
    let pat = pattern.as_bytes();
    let (anchored, pat) = anchor(&pat);
    let check = limits_check(lua, tripwire);
    let mut searcher = Searcher::new(&src, pat, &check);
    let mut out = Vec::new();
    let mut s = 0;
    let mut last_match = None;
    let mut count: i64 = 0;
    let mut changed = false;
    while count < max_replacements {
        let found = if anchored {
            searcher.match_at(s)?.map(|e| (s, e))
        } else {
            searcher.next_match(s, last_match)?
        };
        let Some((start, e)) = found else { break };
        let skipped = piece(&src, s, start);
        out.extend_from_slice(skipped);
        count += 1;
        let before = out.len();
        let matcher = searcher.matcher();
        changed |= add_value(
            lua,
            matcher,
            &src,
            (start, e),
            &replacement,
            helpers,
            &mut out,
        )?;
        // The result grows outside Lua's allocator: count it against the limits.
        matcher.hold(out.len());
        matcher.spend(out.len() - before + skipped.len())?;
        s = e;
        last_match = Some(e);
        if anchored {
            break;
        }
    }
    let matcher = searcher.matcher();
    let result = if changed {
        let rest = src.get(s..).unwrap_or_default();
        out.extend_from_slice(rest);
        matcher.hold(out.len());
        matcher.spend(rest.len())?;
        lua.create_string(&out)?
    } else {
        subject.clone()
    };
    Ok(MultiValue::from_vec(vec![
        Value::String(result),
        Value::Integer(count),
    ]))
}

/// `add_value`: appends the replacement of the match `s..e` to `out`; returns whether
/// the subject changed (a function or table giving `nil` or `false` keeps the match).
fn add_value(
    lua: &Lua,
    matcher: &mut Matcher,
    src: &[u8],
    (s, e): (usize, usize),
    replacement: &Replacement,
    helpers: &Helpers,
    out: &mut Vec<u8>,
) -> Result<bool, Failure> {
    let call_args = match replacement {
        Replacement::Text(text) => {
            add_text(matcher, src, (s, e), &text.as_bytes(), out)?;
            return Ok(true);
        }
        Replacement::Call(function) => {
            let mut call_args = MultiValue::new();
            call_args.push_back(Value::Function(function.clone()));
            push_captures(lua, matcher, src, (s, e), true, &mut call_args)?;
            call_args
        }
        Replacement::Index(table) => {
            let key = capture_value(lua, src, matcher.capture(0, s, e)?)?;
            MultiValue::from_vec(vec![
                Value::Function(helpers.index.clone()),
                Value::Table(table.clone()),
                key,
            ])
        }
    };
    let mut results = helpers.pcall.call::<MultiValue>(call_args)?.into_iter();
    let ok = matches!(results.next(), Some(Value::Boolean(true)));
    let value = results.next().unwrap_or(Value::Nil);
    if !ok {
        return Err(Failure::Rethrow(value));
    }
    match value {
        Value::Nil | Value::Boolean(false) => {
            out.extend_from_slice(piece(src, s, e)); // keep the original text
            Ok(false)
        }
        Value::String(_) | Value::Integer(_) | Value::Number(_) => {
            if let Some(text) = lua.coerce_string(value)? {
                out.extend_from_slice(&text.as_bytes());
            }
            Ok(true)
        }
        other => Err(raise(format!(
            "invalid replacement value (a {})",
            type_name(&other)
        ))),
    }
}

/// `add_s`: appends a replacement string, expanding `%0`-`%9` and `%%`.
fn add_text(
    matcher: &Matcher,
    src: &[u8],
    (s, e): (usize, usize),
    text: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), Failure> {
    let mut rest = text;
    while let Some(at) = rest.iter().position(|&b| b == ESCAPE) {
        out.extend_from_slice(piece(rest, 0, at));
        // A `%` at the very end reads C's terminating `'\0'`: an invalid use.
        let code = rest.get(at + 1).copied().unwrap_or(0);
        match code {
            ESCAPE => out.push(ESCAPE),
            b'0' => out.extend_from_slice(piece(src, s, e)),
            b'1'..=b'9' => match matcher.capture(usize::from(code - b'1'), s, e)? {
                CaptureValue::Text(start, end) => out.extend_from_slice(piece(src, start, end)),
                CaptureValue::Position(position) => {
                    out.extend_from_slice(position.to_string().as_bytes());
                }
            },
            _ => return Err(raise("invalid use of '%' in replacement string")),
        }
        rest = rest.get(at + 2..).unwrap_or_default();
    }
    out.extend_from_slice(rest);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_limit(_: usize) -> mlua::Result<()> {
        Ok(())
    }

    /// Where `pat` first matches `src` (unanchored), with the captures as text.
    fn find(src: &str, pat: &str) -> Option<(usize, usize, Vec<String>)> {
        let check = no_limit;
        let mut matcher = Matcher::new(src.as_bytes(), pat.as_bytes(), &check);
        for s in 0..=src.len() {
            if let Some(e) = matcher.match_at(s).ok()? {
                let captures = (0..matcher.capture_count(false))
                    .map(|i| match matcher.capture(i, s, e).ok()? {
                        CaptureValue::Text(a, b) => Some(src[a..b].to_string()),
                        CaptureValue::Position(p) => Some(p.to_string()),
                    })
                    .collect::<Option<Vec<_>>>()?;
                return Some((s, e, captures));
            }
        }
        None
    }

    fn error(src: &str, pat: &str) -> String {
        let check = no_limit;
        let mut matcher = Matcher::new(src.as_bytes(), pat.as_bytes(), &check);
        match matcher.match_at(0) {
            Err(Failure::Raise(message)) => message,
            _ => panic!("`{pat}` should be an error"),
        }
    }

    #[test]
    fn classes_quantifiers_and_captures() {
        assert_eq!(find("hello world", "o w"), Some((4, 7, vec![])));
        assert_eq!(
            find("key = value", "(%w+)%s*=%s*(%w+)"),
            Some((0, 11, vec!["key".into(), "value".into()]))
        );
        assert_eq!(find("aaab", "a-b"), Some((0, 4, vec![])));
        assert_eq!(find("x(a(b)c)y", "%b()"), Some((1, 8, vec![])));
        assert_eq!(find("THE (quick) fox", "%f[%a]%a+"), Some((0, 3, vec![])));
        assert_eq!(
            find("abcabc", "()(abc)%2()"),
            Some((0, 6, vec!["1".into(), "abc".into(), "7".into()]))
        );
        assert_eq!(find("a\u{b}b", "%s"), Some((1, 2, vec![])));
        assert_eq!(find("]", "[]]"), Some((0, 1, vec![])));
        assert_eq!(find("a-", "[a-]+$"), Some((0, 2, vec![])));
    }

    #[test]
    fn malformed_patterns_are_errors() {
        assert_eq!(error("a", "%"), "malformed pattern (ends with '%')");
        assert_eq!(error("a", "[a"), "malformed pattern (missing ']')");
        assert_eq!(
            error("a", "%b("),
            "malformed pattern (missing arguments to '%b')"
        );
        assert_eq!(error("a", "%fa"), "missing '[' after '%f' in pattern");
        assert_eq!(error("a", "%1"), "invalid capture index %1");
        assert_eq!(error("a", "a)"), "invalid pattern capture");
        assert_eq!(error("a", &"(".repeat(33)), "too many captures");
        assert_eq!(
            error(&"a".repeat(300), &"a?".repeat(300)),
            "pattern too complex"
        );
    }

    #[test]
    fn the_check_runs_and_stops_a_runaway_search() {
        let calls = Cell::new(0);
        let check = |_: usize| {
            calls.set(calls.get() + 1);
            if calls.get() > 3 {
                Err(mlua::Error::RuntimeError("stop".into()))
            } else {
                Ok(())
            }
        };
        let src = "a".repeat(100_000);
        let mut matcher = Matcher::new(src.as_bytes(), b".-.-.-.-.-.-b", &check);
        assert!(matches!(matcher.match_at(0), Err(Failure::Host(_))));
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn a_long_plain_search_checks_the_limits_every_window() {
        let calls = Cell::new(0);
        let check = |_: usize| {
            calls.set(calls.get() + 1);
            Err(mlua::Error::RuntimeError("stop".into()))
        };
        let src = vec![b'a'; 3 * SCAN_WINDOW];
        let mut matcher = Matcher::new(&src, &[], &check);
        assert!(matches!(
            matcher.find_plain(b"ab", 0),
            Err(Failure::Host(_))
        ));
        assert_eq!(calls.get(), 1);
        // A search that ends within a window checks less often than every window.
        let short = vec![b'a'; 1000];
        let mut matcher = Matcher::new(&short, &[], &check);
        assert!(matches!(matcher.find_plain(b"ab", 0), Ok(None)));
    }

    #[test]
    fn plans_skip_the_matcher_only_where_it_cannot_backtrack() {
        let plan = |pat: &str| {
            Plan::of(
                pat.as_bytes(),
                &Matcher::new(b"", pat.as_bytes(), &no_limit),
            )
        };
        assert_eq!(plan("abc"), Plan::Literal);
        assert_eq!(
            plan("[^\n]+"),
            Plan::Class {
                end: 4,
                repeat: true
            }
        );
        assert_eq!(
            plan("%d"),
            Plan::Class {
                end: 2,
                repeat: false
            }
        );
        let first = |pat: &str| {
            first_class(
                pat.as_bytes(),
                &Matcher::new(b"", pat.as_bytes(), &no_limit),
            )
        };
        assert_eq!(first("user=%d+"), Some((0, 1)));
        assert_eq!(first("(%d+) ms"), Some((1, 3)));
        assert_eq!(first("()[ab]c"), Some((2, 6)));
        for none in ["a*b", "%bxy", "%f[%a]x", "$", ")", "[a", "%1"] {
            assert_eq!(first(none), None, "{none:?}");
        }
        assert_eq!(first(&"(".repeat(40)), None);
        for general in [
            "", ")", "a)", "%b()", "%f[%a]", "%1", "$", "a*", "[a", "(a)", "a+b",
        ] {
            assert_eq!(plan(general), Plan::General, "{general:?}");
        }
    }

    #[test]
    fn start_positions_follow_posrelat() {
        assert_eq!(start_position(1, 5), 1);
        assert_eq!(start_position(0, 5), 1);
        assert_eq!(start_position(-1, 5), 5);
        assert_eq!(start_position(-5, 5), 1);
        assert_eq!(start_position(-6, 5), 1);
        assert_eq!(start_position(i64::MIN, 5), 1);
        assert_eq!(start_position(9, 5), 9);
    }
}
