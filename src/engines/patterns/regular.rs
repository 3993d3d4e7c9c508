//! A Lua pattern as a regular expression that matches the same subjects, for `grep`,
//! which only asks *whether* a line matches.
//!
//! Without `%b`, `%f` and back-references a Lua pattern describes a regular language, and
//! the matcher's backtracking tries every way a quantifier can expand, so a subject has
//! a match exactly when the regular expression finds one, whatever the quantifiers'
//! greed (`-` and `*` decide the same question). Each single-character class becomes
//! the explicit set of bytes it accepts, computed by the matcher's own `singlematch` on
//! every byte value, so `%a`, `[^%d_]` or `[]-a]` mean exactly what they mean to Lua.
//! Captures become groups without capturing; `()` matches the empty string.
//!
//! Patterns that could raise an error while matching (malformed, an unfinished or
//! unbalanced capture, deep enough to be "too complex") are not translated: the matcher
//! keeps them, so their errors stay Lua's.

use regex::bytes::{Regex, RegexBuilder};

use super::matcher::Matcher;
use super::plan::anchor;
use super::{ESCAPE, MAX_CAPTURES};

/// Longest pattern translated: the matcher recurses about once per item, and patterns
/// near its depth limit raise "pattern too complex" where a regex would not.
const MAX_PATTERN_BYTES: usize = 100;

/// The regular expression deciding whether a subject has a match of `pat`, or `None`
/// when `pat` is not regular or could raise an error.
pub(crate) fn as_regex(pat: &[u8]) -> Option<Regex> {
    let syntax = translate(pat)?;
    RegexBuilder::new(&syntax)
        .unicode(false)
        .dot_matches_new_line(true)
        .size_limit(1 << 20)
        .build()
        .ok()
}

/// The regex syntax for `pat`.
fn translate(pat: &[u8]) -> Option<String> {
    if pat.len() > MAX_PATTERN_BYTES {
        return None;
    }
    let (anchored, pat) = anchor(pat);
    let all_bytes: Vec<u8> = (0..=u8::MAX).collect();
    let no_check = |_: usize| Ok(());
    let matcher = Matcher::new(&all_bytes, pat, &no_check);
    let mut syntax = String::from(if anchored { "^" } else { "" });
    let (mut p, mut open, mut captures) = (0, 0usize, 0);
    while p < pat.len() {
        match pat[p] {
            b'(' if pat.get(p + 1) == Some(&b')') => {
                p += 2;
                captures += 1;
            }
            b'(' => {
                syntax.push_str("(?:");
                p += 1;
                open += 1;
                captures += 1;
            }
            b')' => {
                open = open.checked_sub(1)?;
                syntax.push(')');
                p += 1;
            }
            b'$' if p + 1 == pat.len() => {
                syntax.push('$');
                p += 1;
            }
            ESCAPE if matches!(pat.get(p + 1), Some(b'b' | b'f' | b'0'..=b'9')) => return None,
            _ => {
                let ep = matcher.class_end(p).ok()?;
                syntax.push_str(&byte_class(&matcher, p, ep)?);
                match pat.get(ep) {
                    Some(&quantifier @ (b'*' | b'+' | b'?')) => {
                        syntax.push(quantifier as char);
                        p = ep + 1;
                    }
                    Some(b'-') => {
                        syntax.push('*');
                        p = ep + 1;
                    }
                    _ => p = ep,
                }
            }
        }
        if captures >= MAX_CAPTURES {
            return None;
        }
    }
    (open == 0).then_some(syntax)
}

/// The class `p..ep` as a regex class of the bytes it accepts; `None` if it accepts none.
fn byte_class(matcher: &Matcher, p: usize, ep: usize) -> Option<String> {
    let accepted: Vec<u8> = (0..=u8::MAX)
        .filter(|&byte| matcher.single_match(usize::from(byte), p, ep))
        .collect();
    let mut class = String::from("[");
    let mut i = 0;
    while i < accepted.len() {
        let start = accepted[i];
        let mut end = start;
        while i + 1 < accepted.len() && accepted[i + 1] == end.wrapping_add(1) {
            i += 1;
            end = accepted[i];
        }
        class.push_str(&format!("\\x{start:02X}"));
        if end != start {
            class.push_str(&format!("-\\x{end:02X}"));
        }
        i += 1;
    }
    class.push(']');
    (!accepted.is_empty()).then_some(class)
}

#[cfg(test)]
mod tests {
    use super::super::plan::find_in;
    use super::*;

    fn lua_matches(subject: &[u8], pat: &[u8]) -> Option<bool> {
        let check = |_: usize| Ok(());
        find_in(subject, pat, &check)
            .ok()
            .map(|found| found.is_some())
    }

    #[test]
    fn classes_are_the_bytes_lua_accepts() {
        assert_eq!(translate(b"%d+").unwrap(), "[\\x30-\\x39]+");
        assert_eq!(translate(b"^a.$").unwrap(), "^[\\x61][\\x00-\\xFF]$");
        assert_eq!(translate(b"[]a]").unwrap(), "[\\x5D\\x61]");
        assert_eq!(translate(b"a$b").unwrap(), "[\\x61][\\x24][\\x62]");
        assert_eq!(translate(b"(a)()b-").unwrap(), "(?:[\\x61])[\\x62]*");
    }

    #[test]
    fn patterns_that_are_not_regular_or_could_raise_are_left_to_the_matcher() {
        for pat in [
            &b"%b()"[..],
            b"%f[%a]x",
            b"(a)%1",
            b"(a",
            b"a)",
            b"[a",
            b"a%",
            b"[^\x00-\xff]",
        ] {
            assert!(translate(pat).is_none(), "{}", String::from_utf8_lossy(pat));
        }
        assert!(translate(&[b'a'; 200]).is_none());
    }

    /// Random patterns over a small alphabet against random subjects: the regex finds a
    /// match exactly when the matcher does.
    #[test]
    fn the_regex_matches_the_same_subjects_as_the_matcher() {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = |n: usize| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) % n as u64) as usize
        };
        let items: &[&[u8]] = &[
            b"a", b"b", b".", b"%d", b"%a", b"%s", b"%W", b"[ab]", b"[^a]", b"[a-c%d]", b"%%",
            b"$", b"^", b"(", b")", b"()", b"*", b"+", b"-", b"?", b"[]]", b"%.", b"1",
        ];
        let quantifiers: &[&[u8]] = &[b"", b"", b"*", b"+", b"-", b"?"];
        let subject_bytes = b"ab1 .$%]c";
        let mut translated = 0;
        for _ in 0..8_000 {
            let mut pat = Vec::new();
            if next(4) == 0 {
                pat.push(b'^');
            }
            for _ in 0..1 + next(6) {
                pat.extend_from_slice(items[next(items.len())]);
                pat.extend_from_slice(quantifiers[next(quantifiers.len())]);
            }
            let Some(regex) = as_regex(&pat) else {
                continue;
            };
            translated += 1;
            for _ in 0..8 {
                let subject: Vec<u8> = (0..next(10))
                    .map(|_| subject_bytes[next(subject_bytes.len())])
                    .collect();
                let expected = lua_matches(&subject, &pat);
                assert_eq!(
                    Some(regex.is_match(&subject)),
                    expected,
                    "pattern {:?} subject {:?}",
                    String::from_utf8_lossy(&pat),
                    String::from_utf8_lossy(&subject)
                );
            }
        }
        assert!(translated > 2_000, "only {translated} patterns translated");
    }
}
