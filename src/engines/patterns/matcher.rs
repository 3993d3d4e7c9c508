//! [`Matcher`]: `lstrlib.c`'s matcher (`match`, `max_expand`, `matchbalance`, ...) over
//! offsets instead of pointers, counting its steps so that the limits can stop it.

use super::{Check, ESCAPE, Failure, MAX_CALLS, MAX_CAPTURES, SCAN_WINDOW, STEP_INTERVAL, raise};

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
    pub(super) src: &'a [u8],
    pub(super) pat: &'a [u8],
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

    /// Checks the limits now, before `more` bytes are added to what is held outside Lua
    /// (a replacement about to be expanded).
    pub(crate) fn check_before(&self, more: usize) -> Result<(), Failure> {
        (self.check)(self.held_bytes.saturating_add(more)).map_err(Failure::Host)
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
    pub(super) fn class_end(&self, p: usize) -> Result<usize, Failure> {
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
    pub(super) fn single_match(&self, s: usize, p: usize, ep: usize) -> bool {
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
    pub(super) fn match_class_at(
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
    pub(super) fn find_class(
        &mut self,
        from: usize,
        class_end: usize,
    ) -> Result<Option<usize>, Failure> {
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
pub(super) fn start_position(pos: i64, len: usize) -> usize {
    if pos > 0 {
        usize::try_from(pos).unwrap_or(usize::MAX)
    } else if pos == 0 || pos.unsigned_abs() > len as u64 {
        1
    } else {
        // -len <= pos < 0
        len - (pos.unsigned_abs() as usize) + 1
    }
}

/// `memmem`, or `memchr` for one byte (no searcher to build).
/// A short haystack (a line) is searched with `memchr` on the needle's first byte: cheaper
/// there than building a `memmem` searcher.
pub(super) fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    const SHORT: usize = 256;
    match needle {
        [] => Some(0),
        [byte] => memchr::memchr(*byte, haystack),
        [first, rest @ ..] if haystack.len() < SHORT => {
            let mut from = 0;
            while let Some(at) = memchr::memchr(*first, haystack.get(from..)?) {
                let start = from + at;
                if haystack.get(start + 1..start + needle.len())? == rest {
                    return Some(start);
                }
                from = start + 1;
            }
            None
        }
        _ => memchr::memmem::find(haystack, needle),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

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
