//! `grep` behind the `lua/text` library: the lines of a text that match a plain string, a
//! Lua pattern or a regular expression, each with its number, its text and the context
//! lines around it.
//!
//! A line is what `lines` gives: text up to a `"\n"`, without a `"\r"` before it. The text
//! is never split into a table of lines. A plain string, or the longest run of literal
//! characters every match of a Lua pattern holds, is searched for in the whole text at
//! once (`memmem`) and the line around each hit found by scanning for its newlines, as
//! ripgrep does; only that line is then matched. Other patterns and regular expressions are
//! matched line by line as the lines are found. A Lua pattern that is regular (no `%b`,
//! `%f` or back-reference) is matched by an equivalent regular expression
//! (`patterns/regular.rs`): `grep` only asks whether a line matches. The translated
//! expressions are kept in the environment's cache of compiled regular expressions
//! (`re.rs`), beside the `re` built-in's. The result is built in one protected call with
//! the Lua C API (no per-value crossing of the Rust/Lua boundary), the collector paused
//! meanwhile as every value is kept; `before` and `after` are built only when `context`
//! asks for lines (empty tables otherwise).

use memchr::memmem;
use mlua::{Lua, Table, Value, ffi};
use regex::bytes::Regex;

use super::meter::{CHECK_BYTES, VALUE_COST, WorkMeter, table_in_one_call};
use super::patterns;
use super::re::RegexCache;

/// How `grep` matches a line.
pub(crate) enum LineMatcher<'a> {
    /// A plain substring.
    Plain(memmem::Finder<'a>),
    /// A Lua pattern the matcher runs, with literal text every match contains, if any.
    Pattern {
        pattern: &'a [u8],
        prefix: Option<memmem::Finder<'static>>,
    },
    /// A regular expression.
    Regex(Regex),
    /// A Lua pattern translated to a regular expression matching the same lines, with
    /// literal text every match contains, if any.
    Translated {
        regex: Regex,
        prefix: Option<memmem::Finder<'static>>,
    },
}

impl<'a> LineMatcher<'a> {
    /// A Lua pattern, prefiltered by the literal every match contains: translated to a
    /// regular expression when it is regular and cannot raise an error, run by the
    /// matcher otherwise.
    pub(crate) fn pattern(pattern: &'a [u8], cache: &RegexCache) -> Self {
        let prefix = patterns::required_literal(pattern);
        let prefix = (!prefix.is_empty()).then(|| memmem::Finder::new(&prefix).into_owned());
        match cache.lua_pattern(pattern) {
            Some(regex) => LineMatcher::Translated { regex, prefix },
            None => LineMatcher::Pattern { pattern, prefix },
        }
    }

    /// Whether `line` matches.
    fn matches(&self, line: &[u8], meter: &WorkMeter) -> mlua::Result<bool> {
        match self {
            LineMatcher::Plain(finder) => Ok(finder.find(line).is_some()),
            LineMatcher::Pattern { pattern, .. } => {
                let check = |held: usize| meter.check_holding(held);
                patterns::find_in(line, pattern, &check)
                    .map(|found| found.is_some())
                    .map_err(patterns::Failure::into_lua_error)
            }
            LineMatcher::Regex(regex) | LineMatcher::Translated { regex, .. } => {
                Ok(regex.is_match(line))
            }
        }
    }

    /// The literal every matching line contains, to search the whole text for.
    fn prefilter(&self) -> Option<&memmem::Finder<'_>> {
        match self {
            LineMatcher::Plain(finder) if !finder.needle().is_empty() => Some(finder),
            LineMatcher::Pattern {
                prefix: Some(prefix),
                ..
            }
            | LineMatcher::Translated {
                prefix: Some(prefix),
                ..
            } => Some(prefix),
            _ => None,
        }
    }
}

/// A matching line: its 1-based number, where its text is, and where it stops (the
/// index of its `"\n"`, or the text's length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MatchedLine {
    pub number: usize,
    pub start: usize,
    pub end: usize,
    pub stop: usize,
}

/// Where the line starting at `start` ends: its text's end (without a `"\r"` before the
/// newline) and its stop.
fn line_end(text: &[u8], start: usize) -> (usize, usize) {
    let rest = text.get(start..).unwrap_or_default();
    let stop = memchr::memchr(b'\n', rest).map_or(text.len(), |i| start + i);
    let end = if stop > start && text.get(stop - 1) == Some(&b'\r') {
        stop - 1
    } else {
        stop
    };
    (end, stop)
}

/// The matching lines, in order.
pub(crate) fn matching_lines(
    text: &[u8],
    matcher: &LineMatcher,
    meter: &mut WorkMeter,
) -> mlua::Result<Vec<MatchedLine>> {
    let mut hits = Vec::new();
    match matcher.prefilter() {
        Some(finder) => search_whole_text(text, matcher, finder, &mut hits, meter)?,
        None => search_line_by_line(text, matcher, &mut hits, meter)?,
    }
    Ok(hits)
}

fn search_line_by_line(
    text: &[u8],
    matcher: &LineMatcher,
    hits: &mut Vec<MatchedLine>,
    meter: &mut WorkMeter,
) -> mlua::Result<()> {
    let mut start = 0;
    let mut number = 1;
    while start < text.len() {
        let (end, stop) = line_end(text, start);
        meter.spend(stop - start + 1)?;
        if matcher.matches(&text[start..end], meter)? {
            push_hit(hits, meter, number, start, end, stop);
        }
        start = stop + 1;
        number += 1;
    }
    Ok(())
}

/// Finds `finder`'s needle in the whole text; the line of each hit is then matched (a
/// plain needle matches when it lies within the line's text).
fn search_whole_text(
    text: &[u8],
    matcher: &LineMatcher,
    finder: &memmem::Finder,
    hits: &mut Vec<MatchedLine>,
    meter: &mut WorkMeter,
) -> mlua::Result<()> {
    let needle = finder.needle().len();
    let plain = matches!(matcher, LineMatcher::Plain(_));
    // The line that starts at `line_start` is line `number`.
    let (mut line_start, mut number) = (0, 1);
    let mut from = 0;
    while let Some(hit) = next_hit(text, finder, from, meter)? {
        let skipped = text.get(line_start..hit).unwrap_or_default();
        if let Some(last) = memchr::memrchr(b'\n', skipped) {
            number += memchr::memchr_iter(b'\n', skipped).count();
            line_start += last + 1;
        }
        let (end, stop) = line_end(text, line_start);
        meter.spend(stop.saturating_sub(hit) + 1)?;
        if hit + needle > end {
            from = hit + 1; // across the line's end: not in this line's text
            continue;
        }
        if plain || matcher.matches(&text[line_start..end], meter)? {
            push_hit(hits, meter, number, line_start, end, stop);
        }
        // The line is decided: go on with the next one.
        line_start = stop + 1;
        number += 1;
        from = line_start;
        if from >= text.len() {
            break;
        }
    }
    Ok(())
}

/// The next occurrence of `finder`'s needle at or after `from`, searched a window of
/// [`CHECK_BYTES`] at a time so that the limits are checked during a long search.
fn next_hit(
    text: &[u8],
    finder: &memmem::Finder,
    from: usize,
    meter: &mut WorkMeter,
) -> mlua::Result<Option<usize>> {
    let needle = finder.needle().len();
    let mut from = from;
    while from < text.len() {
        let stop = from.saturating_add(CHECK_BYTES + needle).min(text.len());
        if let Some(at) = finder.find(&text[from..stop]) {
            meter.spend(at)?;
            return Ok(Some(from + at));
        }
        meter.spend(CHECK_BYTES)?;
        from += CHECK_BYTES;
    }
    Ok(None)
}

fn push_hit(
    hits: &mut Vec<MatchedLine>,
    meter: &mut WorkMeter,
    number: usize,
    start: usize,
    end: usize,
    stop: usize,
) {
    hits.push(MatchedLine {
        number,
        start,
        end,
        stop,
    });
    meter.hold(hits.capacity() * std::mem::size_of::<MatchedLine>());
}

/// The lines before the line starting at `start`, nearest first.
fn lines_before(text: &[u8], start: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut start = start;
    std::iter::from_fn(move || {
        let stop = start.checked_sub(1)?; // its newline
        let first = memchr::memrchr(b'\n', &text[..stop]).map_or(0, |i| i + 1);
        let (end, _) = line_end(text, first);
        start = first;
        Some((first, end.min(stop)))
    })
}

/// The lines after the line that stops at `stop`.
fn lines_after(text: &[u8], stop: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut start = stop + 1;
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        let (end, next_stop) = line_end(text, start);
        let line = (start, end);
        start = next_stop + 1;
        Some(line)
    })
}

/// Which document of a corpus a text is: its index and its name, which every match of
/// the text carries as `doc` and `name`.
pub(crate) struct Origin<'a> {
    pub doc: usize,
    pub name: &'a Value,
}

/// A text searched, its matching lines and, in a corpus, which document it is.
pub(crate) struct Searched<'a> {
    pub text: &'a [u8],
    pub hits: Vec<MatchedLine>,
    pub origin: Option<Origin<'a>>,
}

/// `{ line, text, before, after }` per hit of every text searched, in order (and `doc`,
/// `name` for a corpus's document), built in one protected call.
pub(crate) fn result_table(
    lua: &Lua,
    searched: &[Searched],
    context: usize,
    meter: &mut WorkMeter,
) -> mlua::Result<Table> {
    let total: usize = searched.iter().map(|s| s.hits.len()).sum();
    let size = std::ffi::c_int::try_from(total).unwrap_or(0);
    // SAFETY: `fill` pushes one table and only tables, strings and numbers into it.
    unsafe {
        table_in_one_call(lua, |state| {
            ffi::lua_createtable(state, size, 0);
            let mut n: ffi::lua_Integer = 0;
            for Searched { text, hits, origin } in searched {
                for hit in hits {
                    push_match(state, text, hit, context, origin.as_ref(), meter)?;
                    n += 1;
                    ffi::lua_rawseti(state, -2, n);
                }
            }
            Ok(())
        })
    }
}

/// Pushes one match's table.
///
/// # Safety
/// As [`push_bytes`], with room for three values.
unsafe fn push_match(
    state: *mut ffi::lua_State,
    text: &[u8],
    hit: &MatchedLine,
    context: usize,
    origin: Option<&Origin>,
    meter: &mut WorkMeter,
) -> mlua::Result<()> {
    unsafe {
        ffi::lua_createtable(state, 0, 6);
        if let Some(origin) = origin {
            push_origin(state, origin);
        }
        ffi::lua_pushinteger(state, hit.number as ffi::lua_Integer);
        ffi::lua_setfield(state, -2, c"line".as_ptr());
        push_bytes(state, &text[hit.start..hit.end]);
        ffi::lua_setfield(state, -2, c"text".as_ptr());
        let before = lines_before(text, hit.start).take(context).count();
        push_lines(state, text, lines_before(text, hit.start), before, true);
        ffi::lua_setfield(state, -2, c"before".as_ptr());
        let after = lines_after(text, hit.stop).take(context).count();
        push_lines(state, text, lines_after(text, hit.stop), after, false);
        ffi::lua_setfield(state, -2, c"after".as_ptr());
        meter.spend(VALUE_COST * (before + after + 4))
    }
}

/// Sets `doc` and `name` in the table on top of the stack. A name that is neither a
/// string nor a number is left out, as `nil` would be.
///
/// # Safety
/// As [`push_bytes`], the table on top.
unsafe fn push_origin(state: *mut ffi::lua_State, origin: &Origin) {
    unsafe {
        ffi::lua_pushinteger(state, origin.doc as ffi::lua_Integer);
        ffi::lua_setfield(state, -2, c"doc".as_ptr());
        let pushed = match origin.name {
            Value::String(name) => {
                push_bytes(state, &name.as_bytes());
                true
            }
            Value::Integer(n) => {
                ffi::lua_pushinteger(state, *n as ffi::lua_Integer);
                true
            }
            Value::Number(n) => {
                ffi::lua_pushnumber(state, *n);
                true
            }
            _ => false,
        };
        if pushed {
            ffi::lua_setfield(state, -2, c"name".as_ptr());
        }
    }
}

/// # Safety
/// `state` is a valid Lua state in a protected call, with room for one value.
unsafe fn push_bytes(state: *mut ffi::lua_State, bytes: &[u8]) {
    unsafe {
        ffi::lua_pushlstring(state, bytes.as_ptr().cast(), bytes.len());
    }
}

/// Pushes a sequence of the first `count` lines of `spans`, in text order: reversed
/// when `spans` runs backwards.
///
/// # Safety
/// As [`push_bytes`], with room for two values.
unsafe fn push_lines(
    state: *mut ffi::lua_State,
    text: &[u8],
    spans: impl Iterator<Item = (usize, usize)>,
    count: usize,
    backwards: bool,
) {
    unsafe {
        ffi::lua_createtable(state, std::ffi::c_int::try_from(count).unwrap_or(0), 0);
        for (i, (start, end)) in spans.take(count).enumerate() {
            push_bytes(state, &text[start..end]);
            let index = if backwards { count - i } else { i + 1 };
            ffi::lua_rawseti(state, -2, index as ffi::lua_Integer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_lines_follow_the_line_rules() {
        let text = b"a\r\nb\n\nc";
        let before: Vec<_> = lines_before(text, 5).collect();
        assert_eq!(before, vec![(3, 4), (0, 1)]);
        let after: Vec<_> = lines_after(text, 2).collect();
        assert_eq!(after, vec![(3, 4), (5, 5), (6, 7)]);
        assert_eq!(lines_before(text, 0).count(), 0);
        assert_eq!(lines_after(b"a\n", 1).count(), 0);
    }
}
