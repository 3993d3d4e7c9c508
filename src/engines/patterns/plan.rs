//! The fast paths: a [`Plan`] per pattern (a `memchr`/`memmem` search, a one-class scan,
//! or the general matcher after skipping to the pattern's first class) and the
//! [`Searcher`] that follows it, with the same results and errors as the matcher alone.

use super::matcher::Matcher;
use super::{Check, ESCAPE, Failure, MAX_CAPTURES, SPECIALS};

/// How a pattern is matched: patterns that cannot backtrack skip the general matcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plan {
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
    pub(super) fn of(pat: &[u8], matcher: &Matcher) -> Plan {
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
pub(super) fn anchor(pat: &[u8]) -> (bool, &[u8]) {
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

fn no_check(_: usize) -> mlua::Result<()> {
    Ok(())
}

/// The longest run of literal characters that every match of `pat` contains: in a Lua
/// pattern a quantifier applies to one item and there is no alternation, so an item that
/// is one literal character (or escaped punctuation), not followed by `*`, `?` or `-`,
/// is in every match, next to its mandatory neighbours (captures match no text). Items
/// that could raise an error when reached (a malformed set, `%b`, `%f`, a back-reference,
/// an unbalanced `)`) end the scan: only literals before them are used, so that a line
/// skipped for lacking the literal could not have raised that error. No newline is in
/// the result (no line holds one). `grep` searches the whole text for it.
pub(crate) fn required_literal(pat: &[u8]) -> Vec<u8> {
    let (_, pat) = anchor(pat);
    let check = no_check;
    let matcher = Matcher::new(b"", pat, &check);
    let (mut best, mut run): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
    let mut finish = |run: &mut Vec<u8>| {
        if run.len() > best.len() {
            best = std::mem::take(run);
        }
        run.clear();
    };
    let (mut p, mut open, mut captures) = (0, 0usize, 0);
    while p < pat.len() {
        match pat[p] {
            b'(' => {
                captures += 1;
                if captures >= MAX_CAPTURES {
                    break;
                }
                if pat.get(p + 1) == Some(&b')') {
                    p += 2;
                } else {
                    open += 1;
                    p += 1;
                }
                continue;
            }
            b')' if open == 0 => break,
            b')' => {
                open -= 1;
                p += 1;
                continue;
            }
            b'$' if p + 1 == pat.len() => break,
            ESCAPE if !matches!(pat.get(p + 1), Some(c) if !matches!(c, b'b' | b'f' | b'0'..=b'9')) =>
            {
                break;
            }
            _ => {}
        }
        let Ok(ep) = matcher.class_end(p) else { break };
        let literal = match (pat[p], ep - p) {
            (b'.' | b'[', _) => None,
            (ESCAPE, 2) if !pat[p + 1].is_ascii_alphanumeric() => Some(pat[p + 1]),
            (ESCAPE, _) => None,
            (c, 1) => Some(c),
            _ => None,
        }
        .filter(|&c| c != b'\n');
        match (pat.get(ep), literal) {
            (Some(b'*' | b'?' | b'-'), _) => {
                finish(&mut run);
                p = ep + 1;
            }
            (Some(b'+'), Some(c)) => {
                // `c+`: a run ends with one `c`, and the next starts with another.
                run.push(c);
                finish(&mut run);
                run.push(c);
                p = ep + 1;
            }
            (Some(b'+'), None) => {
                finish(&mut run);
                p = ep + 1;
            }
            (_, Some(c)) => {
                run.push(c);
                p = ep;
            }
            (_, None) => {
                finish(&mut run);
                p = ep;
            }
        }
    }
    finish(&mut run);
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_limit(_: usize) -> mlua::Result<()> {
        Ok(())
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
    fn required_literals_are_in_every_match() {
        let literal = |p: &str| String::from_utf8(required_literal(p.as_bytes())).unwrap();
        assert_eq!(literal("timeout after %d+ ms"), "timeout after ");
        assert_eq!(literal("%d+ ms user=[a-c]"), " ms user=");
        assert_eq!(literal("^ERROR,service%-1%d,"), "ERROR,service-1");
        assert_eq!(literal("(%w+)=x"), "=x");
        assert_eq!(literal("()ab(c)"), "abc");
        assert_eq!(literal("abc*"), "ab");
        assert_eq!(literal("xa+b"), "xa");
        assert_eq!(literal("ab%.c?"), "ab.");
        assert_eq!(literal("a.b"), "a");
        assert_eq!(literal("[ab]c"), "c");
        assert_eq!(literal("%d+"), "");
        assert_eq!(literal("ab\ncd"), "ab");
        assert_eq!(literal("x[a%d+ ms"), "x");
        assert_eq!(literal("ab)cdef"), "ab");
        assert_eq!(literal("ab%1cdef"), "ab");
        assert_eq!(literal("a%bxycdef"), "a");
        assert_eq!(literal("abc$"), "abc");
        assert_eq!(literal(&"(".repeat(40)), "");
    }
}
