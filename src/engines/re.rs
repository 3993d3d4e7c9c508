//! The `re` built-in: regular expressions on the `regex` crate, in the syntax models write
//! most reliably (Python/PCRE-like, without backreferences or look-around), in linear
//! time by construction.
//!
//! Offsets are 1-based byte positions with an inclusive end, so they agree with
//! `string.sub` and `string.find`. Compiled patterns are kept in a small per-environment
//! cache; their compiled size is limited ([`SIZE_LIMIT`]). Functions that walk many
//! matches (`gmatch`, `find_all`, `count`, `split`, `gsub`) check the execution's limits
//! as they go, and the results they build live in Lua's memory, so both are counted.
//!
//! ```
//! use rlm_registry::{Registry, environment::{Environment, Limits}};
//!
//! let env = Environment::new(Registry::baked().clone(), Limits::default())?;
//! let run = env.execute(r#"
//!   print(re.find("id=42, id=7", [[id=(\d+)]]))
//!   print(re.gsub("a-b-c", "-", "+"))
//!   print(re.count("Error error ERROR", "error", "i"))
//! "#)?;
//! assert_eq!(run.output, "1\t5\t42\na+b+c\t2\n3\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use mlua::{Function, Lua, LuaString, MultiValue, Table, Value};
use regex::bytes::{CaptureLocations, Captures, Regex, RegexBuilder};

use super::limits::Guard;
use super::meter::{WorkMeter, optional_string_sequence, string_sequence};
use super::patterns;
use super::quoted;
use crate::conventions::builtins::BuiltinId;

/// The largest compiled program (and lazy DFA cache) one pattern may use, in bytes.
pub(crate) const SIZE_LIMIT: usize = 4 << 20;
/// Compiled patterns kept per environment; the cache starts over when full.
const CACHE_ENTRIES: usize = 64;
/// The longest pattern compiled. Parsing one holds about 80 bytes per byte of it outside
/// Lua before the compiled size is checked, so its length is what keeps that bounded.
const MAX_PATTERN_BYTES: usize = 256 << 10;
/// The longest pattern kept in the cache: it holds each key twice, outside Lua.
const MAX_CACHED_PATTERN_BYTES: usize = 4 << 10;
/// The flags a pattern may be given, as in Python and the `regex` crate's `(?flags)`.
const FLAGS: &str = "imsxU";

/// Compiled patterns by pattern and flags, for one environment.
#[derive(Default)]
pub(crate) struct RegexCache {
    compiled: RefCell<HashMap<(Vec<u8>, String), Regex>>,
}

impl RegexCache {
    /// The compiled `pattern` with `flags`; `function` names the caller in errors.
    pub(crate) fn get(&self, function: &str, pattern: &[u8], flags: &str) -> mlua::Result<Regex> {
        let key = (pattern.to_vec(), flags.to_string());
        if let Some(regex) = self.cached(&key) {
            return Ok(regex);
        }
        let regex = compile(function, pattern, flags)?;
        self.keep(key, &regex);
        Ok(regex)
    }

    /// The regular expression equivalent to the Lua pattern `pattern`, when it is regular
    /// (see [`patterns::as_regex`]): `grep` called in a loop translates and compiles it
    /// once. Kept under flags no regular expression can have.
    pub(crate) fn lua_pattern(&self, pattern: &[u8]) -> Option<Regex> {
        let key = (pattern.to_vec(), LUA_PATTERN_FLAGS.to_string());
        if let Some(regex) = self.cached(&key) {
            return Some(regex);
        }
        let regex = patterns::as_regex(pattern)?;
        self.keep(key, &regex);
        Some(regex)
    }

    fn cached(&self, key: &(Vec<u8>, String)) -> Option<Regex> {
        self.compiled.borrow().get(key).cloned()
    }

    fn keep(&self, key: (Vec<u8>, String), regex: &Regex) {
        if key.0.len() > MAX_CACHED_PATTERN_BYTES {
            return;
        }
        let mut compiled = self.compiled.borrow_mut();
        if compiled.len() >= CACHE_ENTRIES {
            compiled.clear();
        }
        compiled.insert(key, regex.clone());
    }
}

/// The cache's flags for a translated Lua pattern: `get` refuses them (`-` is no flag).
const LUA_PATTERN_FLAGS: &str = "-lua";

fn error(message: String) -> mlua::Error {
    mlua::Error::RuntimeError(message)
}

fn compile(function: &str, pattern: &[u8], flags: &str) -> mlua::Result<Regex> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(error(format!(
            "{function}: the pattern is {} bytes, more than the {} KiB a pattern may have; match its parts one at a time, or search for plain text with string.find(s, text, 1, true)",
            pattern.len(),
            MAX_PATTERN_BYTES >> 10
        )));
    }
    let text = std::str::from_utf8(pattern).map_err(|e| {
        error(format!(
            "{function}: the pattern is not valid UTF-8 (byte {})",
            e.valid_up_to() + 1
        ))
    })?;
    let mut builder = RegexBuilder::new(text);
    builder.size_limit(SIZE_LIMIT).dfa_size_limit(SIZE_LIMIT);
    for flag in flags.chars() {
        match flag {
            'i' => builder.case_insensitive(true),
            'm' => builder.multi_line(true),
            's' => builder.dot_matches_new_line(true),
            'x' => builder.ignore_whitespace(true),
            'U' => builder.swap_greed(true),
            other => {
                return Err(error(format!(
                    "{function}: unknown flag '{other}' (flags are any of \"{FLAGS}\": i ignore case, m multi-line ^ and $, s dot matches newline, x verbose, U lazy by default)"
                )));
            }
        };
    }
    builder
        .build()
        .map_err(|e| error(format!("{function}: {}", describe(text, &e))))
}

/// A one-line description of a bad pattern: the problem and where it is.
fn describe(pattern: &str, error: &regex::Error) -> String {
    match error {
        regex::Error::CompiledTooBig(limit) => format!(
            "pattern {} is too large once compiled (more than {limit} bytes); use a simpler pattern or smaller repetition counts",
            quoted(pattern.as_bytes())
        ),
        regex::Error::Syntax(text) => {
            // The crate's message shows the pattern with a caret line under the problem
            // and ends with "error: <what>".
            let problem = text
                .lines()
                .rev()
                .find_map(|line| line.strip_prefix("error: "))
                .unwrap_or(text.as_str());
            let column = text.lines().find_map(|line| {
                let trimmed = line.trim_start();
                (trimmed.starts_with('^') && trimmed.chars().all(|c| c == '^'))
                    .then(|| line.len() - trimmed.len())
            });
            match column {
                // The pattern is printed indented by four spaces.
                Some(column) => format!(
                    "bad pattern {}: {problem} at character {}",
                    quoted(pattern.as_bytes()),
                    column.saturating_sub(4) + 1
                ),
                None => format!("bad pattern {}: {problem}", quoted(pattern.as_bytes())),
            }
        }
        other => format!("bad pattern {}: {other}", quoted(pattern.as_bytes())),
    }
}

/// `posrelat` of `string.find`: a 1-based start, negative counting from the end; the
/// 0-based offset to search from, or `None` past the end.
fn start_offset(init: Option<i64>, len: usize) -> Option<usize> {
    let init = init.unwrap_or(1);
    let start = if init > 0 {
        usize::try_from(init - 1).unwrap_or(usize::MAX)
    } else if init == 0 || init.unsigned_abs() > len as u64 {
        0
    } else {
        len - init.unsigned_abs() as usize
    };
    (start <= len).then_some(start)
}

/// A group as a Lua value: its text, or `absent` when it did not take part.
fn group(lua: &Lua, captures: &Captures, i: usize, absent: Value) -> mlua::Result<Value> {
    match captures.get(i) {
        Some(m) => Ok(Value::String(lua.create_string(m.as_bytes())?)),
        None => Ok(absent),
    }
}

/// The groups of a match (nil for one that did not take part), or the whole match when
/// the pattern has none: what `string.match` gives.
fn groups_or_match(lua: &Lua, captures: &Captures) -> mlua::Result<MultiValue> {
    if captures.len() == 1 {
        return Ok(MultiValue::from_vec(vec![group(
            lua,
            captures,
            0,
            Value::Nil,
        )?]));
    }
    (1..captures.len())
        .map(|i| group(lua, captures, i, Value::Nil))
        .collect()
}

/// Common arguments: the subject and the compiled pattern.
struct Call<'a> {
    lua: &'a Lua,
    cache: &'a RegexCache,
    guard: &'a Guard,
}

impl Call<'_> {
    fn regex(
        &self,
        function: &str,
        pattern: &LuaString,
        flags: Option<&LuaString>,
    ) -> mlua::Result<Regex> {
        let flags = match flags {
            Some(flags) => flags.to_str()?.to_string(),
            None => String::new(),
        };
        self.cache.get(function, &pattern.as_bytes(), &flags)
    }

    fn meter(&self) -> WorkMeter<'_> {
        WorkMeter::new(self.lua, self.guard)
    }
}

/// `re.find(text, pattern [, init [, flags]])` → start, end, groups… or nil.
fn find(
    call: &Call,
    args: (LuaString, LuaString, Option<i64>, Option<LuaString>),
) -> mlua::Result<MultiValue> {
    let (text, pattern, init, flags) = args;
    let regex = call.regex(BuiltinId::ReFind.name(), &pattern, flags.as_ref())?;
    let bytes = text.as_bytes();
    let Some(start) = start_offset(init, bytes.len()) else {
        return Ok(MultiValue::from_vec(vec![Value::Nil]));
    };
    let Some(captures) = regex.captures_at(&bytes, start) else {
        return Ok(MultiValue::from_vec(vec![Value::Nil]));
    };
    let whole = captures.get(0).map_or((0, 0), |m| (m.start(), m.end()));
    let mut out = vec![
        Value::Integer(whole.0 as i64 + 1),
        Value::Integer(whole.1 as i64),
    ];
    for i in 1..captures.len() {
        out.push(group(call.lua, &captures, i, Value::Nil)?);
    }
    Ok(MultiValue::from_vec(out))
}

/// `re.match(text, pattern [, init [, flags]])` → groups or the whole match, or nil.
fn r#match(
    call: &Call,
    args: (LuaString, LuaString, Option<i64>, Option<LuaString>),
) -> mlua::Result<MultiValue> {
    let (text, pattern, init, flags) = args;
    let regex = call.regex(BuiltinId::ReMatch.name(), &pattern, flags.as_ref())?;
    let bytes = text.as_bytes();
    let found = start_offset(init, bytes.len()).and_then(|start| regex.captures_at(&bytes, start));
    match found {
        Some(captures) => groups_or_match(call.lua, &captures),
        None => Ok(MultiValue::from_vec(vec![Value::Nil])),
    }
}

/// The span of the next match at or after `position`, skipping an empty match where
/// the previous one ended (as Lua's `gmatch` does). The groups' spans are left in
/// `groups`, which is reused from call to call; a pattern without groups takes the
/// cheaper search that finds no spans.
fn next_match(
    regex: &Regex,
    haystack: &[u8],
    position: usize,
    last_end: Option<usize>,
    groups: &mut CaptureLocations,
) -> Option<(usize, usize)> {
    let mut from = position;
    loop {
        let whole = if regex.captures_len() == 1 {
            regex.find_at(haystack, from)?
        } else {
            regex.captures_read_at(groups, haystack, from)?
        };
        if whole.is_empty() && Some(whole.end()) == last_end {
            from = whole.end() + 1;
            if from > haystack.len() {
                return None;
            }
            continue;
        }
        return Some((whole.start(), whole.end()));
    }
}

/// `re.gmatch(text, pattern [, flags])` → an iterator over the matches' groups (or the
/// whole matches).
fn gmatch(
    lua: &Lua,
    cache: &RegexCache,
    guard: &Rc<Guard>,
    (text, pattern, flags): (LuaString, LuaString, Option<LuaString>),
) -> mlua::Result<Function> {
    let call = Call { lua, cache, guard };
    let regex = call.regex(BuiltinId::ReGmatch.name(), &pattern, flags.as_ref())?;
    let groups = RefCell::new(regex.capture_locations());
    let position = Cell::new(0);
    let last_end = Cell::new(None);
    let guard = Rc::clone(guard);
    lua.create_function(move |lua, ()| {
        WorkMeter::new(lua, &guard).check()?;
        let bytes = text.as_bytes();
        if position.get() > bytes.len() {
            return Ok(MultiValue::from_vec(vec![Value::Nil]));
        }
        let mut groups = groups.borrow_mut();
        let Some((start, end)) =
            next_match(&regex, &bytes, position.get(), last_end.get(), &mut groups)
        else {
            position.set(bytes.len() + 1);
            return Ok(MultiValue::from_vec(vec![Value::Nil]));
        };
        position.set(end);
        last_end.set(Some(end));
        let piece = |span: Option<(usize, usize)>| match span {
            Some((from, to)) => lua
                .create_string(bytes.get(from..to).unwrap_or_default())
                .map(Value::String),
            None => Ok(Value::Nil),
        };
        if groups.len() == 1 {
            return Ok(MultiValue::from_vec(vec![piece(Some((start, end)))?]));
        }
        (1..groups.len()).map(|i| piece(groups.get(i))).collect()
    })
}

/// `re.find_all(text, pattern [, flags])` → every match: the whole match when the
/// pattern has no groups, the group when it has one, a table of groups otherwise.
fn find_all(
    call: &Call,
    (text, pattern, flags): (LuaString, LuaString, Option<LuaString>),
) -> mlua::Result<Table> {
    let regex = call.regex(BuiltinId::ReFindAll.name(), &pattern, flags.as_ref())?;
    let lua = call.lua;
    let mut meter = call.meter();
    let bytes = text.as_bytes();
    match regex.captures_len() {
        // Whole matches, or one group's text: strings built in one call.
        1 => {
            let matches = regex.find_iter(&bytes).map(|m| m.as_bytes());
            return string_sequence(lua, matches, 0, &mut meter);
        }
        2 => {
            let groups = regex
                .captures_iter(&bytes)
                .map(|c| c.get(1).map(|m| m.as_bytes()));
            return optional_string_sequence(lua, groups, 0, &mut meter);
        }
        _ => {}
    }
    let found = lua.create_table()?;
    let mut previous = 0;
    for (n, captures) in regex.captures_iter(&bytes).enumerate() {
        let end = captures.get(0).map_or(previous, |m| m.end());
        meter.spend(end.saturating_sub(previous) + 64)?;
        previous = end;
        let entry = lua.create_table_with_capacity(captures.len() - 1, 0)?;
        for i in 1..captures.len() {
            entry.raw_set(i, group(lua, &captures, i, Value::Boolean(false))?)?;
        }
        found.raw_set(n + 1, entry)?;
    }
    Ok(found)
}

/// `re.count(text, pattern [, flags])` → the number of matches.
fn count(
    call: &Call,
    (text, pattern, flags): (LuaString, LuaString, Option<LuaString>),
) -> mlua::Result<usize> {
    let regex = call.regex(BuiltinId::ReCount.name(), &pattern, flags.as_ref())?;
    let mut meter = call.meter();
    let bytes = text.as_bytes();
    let mut previous = 0;
    let mut n = 0;
    for m in regex.find_iter(&bytes) {
        meter.spend(m.end().saturating_sub(previous) + 1)?;
        previous = m.end();
        n += 1;
    }
    Ok(n)
}

/// `re.split(text, pattern [, max [, flags]])` → the pieces between matches (at most
/// `max` splits).
fn split(
    call: &Call,
    (text, pattern, max, flags): (LuaString, LuaString, Option<i64>, Option<LuaString>),
) -> mlua::Result<Table> {
    let regex = call.regex(BuiltinId::ReSplit.name(), &pattern, flags.as_ref())?;
    let lua = call.lua;
    let mut meter = call.meter();
    let bytes = text.as_bytes();
    let limit = match max {
        Some(max) if max >= 0 => usize::try_from(max).unwrap_or(usize::MAX).saturating_add(1),
        _ => usize::MAX,
    };
    string_sequence(lua, regex.splitn(&bytes, limit), 0, &mut meter)
}

/// What `re.gsub` puts in place of a match.
enum Replacement {
    /// A template, and how many `$` it has (counted once, to bound each expansion).
    Template(Vec<u8>, usize),
    Call(Function),
    Index(Table),
}

impl Replacement {
    fn template(text: Vec<u8>) -> Self {
        let refs = text.iter().filter(|&&b| b == b'$').count();
        Replacement::Template(text, refs)
    }

    fn from_value(value: Value) -> mlua::Result<Self> {
        match value {
            Value::String(text) => Ok(Replacement::template(text.as_bytes().to_vec())),
            Value::Integer(i) => Ok(Replacement::template(i.to_string().into_bytes())),
            Value::Number(n) => Ok(Replacement::template(n.to_string().into_bytes())),
            Value::Function(function) => Ok(Replacement::Call(function)),
            Value::Table(table) => Ok(Replacement::Index(table)),
            other => Err(error(format!(
                "{}: the replacement must be a string, function or table, got {}",
                BuiltinId::ReGsub.name(),
                other.type_name()
            ))),
        }
    }

    /// Appends the replacement of one match; a function or table giving nil or false
    /// keeps the match.
    fn append(
        &self,
        lua: &Lua,
        captures: &Captures,
        out: &mut Vec<u8>,
        meter: &WorkMeter,
    ) -> mlua::Result<()> {
        let whole = captures.get(0).map_or(0, |m| m.len());
        let value = match self {
            Replacement::Template(template, refs) => {
                // Every group lies in the match: a template repeating `$0` could
                // otherwise expand far past the memory limit in one go.
                let most = template.len().saturating_add(refs.saturating_mul(whole));
                meter.check_growth(out.len(), out.capacity(), most)?;
                captures.expand(template, out);
                return Ok(());
            }
            Replacement::Call(function) => {
                function.call::<Value>(groups_or_match(lua, captures)?)?
            }
            Replacement::Index(table) => {
                let key = groups_or_match(lua, captures)?
                    .into_iter()
                    .next()
                    .unwrap_or(Value::Nil);
                table.get::<Value>(key)?
            }
        };
        match value {
            Value::Nil | Value::Boolean(false) => {
                out.extend_from_slice(captures.get(0).map_or(&[][..], |m| m.as_bytes()))
            }
            Value::String(text) => {
                let text = text.as_bytes();
                meter.check_growth(out.len(), out.capacity(), text.len())?;
                out.extend_from_slice(&text);
            }
            Value::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
            Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
            other => {
                return Err(error(format!(
                    "{}: invalid replacement value (a {})",
                    BuiltinId::ReGsub.name(),
                    other.type_name()
                )));
            }
        }
        Ok(())
    }
}

/// `re.gsub(text, pattern, replacement [, max [, flags]])` → the new text and the number
/// of replacements. A string replacement may use `$0`, `$1`, `${name}` and `$$`.
fn gsub(
    call: &Call,
    (text, pattern, replacement, max, flags): (
        LuaString,
        LuaString,
        Value,
        Option<i64>,
        Option<LuaString>,
    ),
) -> mlua::Result<(LuaString, usize)> {
    let regex = call.regex(BuiltinId::ReGsub.name(), &pattern, flags.as_ref())?;
    let replacement = Replacement::from_value(replacement)?;
    let lua = call.lua;
    let mut meter = call.meter();
    let bytes = text.as_bytes();
    let max = max.map_or(usize::MAX, |m| usize::try_from(m).unwrap_or(0));
    let mut out = Vec::new();
    let mut copied = 0;
    let mut n = 0;
    // Each match counts its input and what replaced it: the result grows outside Lua.
    let mut advance = |meter: &mut WorkMeter, out: &Vec<u8>, start: usize, end: usize| {
        let work = end - copied + 1;
        let skipped = bytes.get(copied..start).unwrap_or_default();
        copied = end;
        n += 1;
        meter.hold(out.capacity());
        meter.spend(work).map(|()| skipped)
    };
    match &replacement {
        // A template without `$` needs no groups: the faster search for matches only.
        Replacement::Template(text, 0) => {
            for found in regex.find_iter(&bytes).take(max) {
                let skipped = advance(&mut meter, &out, found.start(), found.end())?;
                meter.check_growth(out.len(), out.capacity(), skipped.len() + text.len())?;
                out.extend_from_slice(skipped);
                out.extend_from_slice(text);
                meter.spend(text.len())?;
            }
        }
        _ => {
            for captures in regex.captures_iter(&bytes).take(max) {
                let Some(whole) = captures.get(0) else {
                    continue;
                };
                let skipped = advance(&mut meter, &out, whole.start(), whole.end())?;
                out.extend_from_slice(skipped);
                let before = out.len();
                replacement.append(lua, &captures, &mut out, &meter)?;
                meter.spend(out.len() - before)?;
            }
        }
    }
    if n == 0 {
        return Ok((text.clone(), 0));
    }
    out.extend_from_slice(bytes.get(copied..).unwrap_or_default());
    meter.hold(out.capacity());
    meter.check()?;
    Ok((lua.create_string(&out)?, n))
}

/// Which `re` function to make.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Implementation {
    Find,
    Match,
    Gmatch,
    FindAll,
    Count,
    Split,
    Gsub,
}

/// The `re` function `implementation`, over the environment's limits and compiled
/// patterns.
pub(crate) fn function(
    lua: &Lua,
    guard: &Rc<Guard>,
    cache: &Rc<RegexCache>,
    implementation: Implementation,
) -> mlua::Result<Function> {
    macro_rules! over_call {
        ($implementation:expr) => {{
            let (guard, cache) = (Rc::clone(guard), Rc::clone(cache));
            lua.create_function(move |lua, args| {
                let call = Call {
                    lua,
                    cache: &cache,
                    guard: &guard,
                };
                $implementation(&call, args)
            })
        }};
    }
    match implementation {
        Implementation::Find => over_call!(find),
        Implementation::Match => over_call!(r#match),
        Implementation::FindAll => over_call!(find_all),
        Implementation::Count => over_call!(count),
        Implementation::Split => over_call!(split),
        Implementation::Gsub => over_call!(gsub),
        Implementation::Gmatch => {
            let (guard, cache) = (Rc::clone(guard), Rc::clone(cache));
            lua.create_function(move |lua, args| gmatch(lua, &cache, &guard, args))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_patterns_name_the_problem_and_position() {
        let message = compile("re.find", b"ab(c", "").unwrap_err().to_string();
        assert!(message.contains("unclosed group"), "{message}");
        assert!(message.contains("at character 3"), "{message}");
        let message = compile("re.find", b"a", "q").unwrap_err().to_string();
        assert!(message.contains("unknown flag 'q'"), "{message}");
    }

    #[test]
    fn start_offsets_follow_string_find() {
        assert_eq!(start_offset(None, 5), Some(0));
        assert_eq!(start_offset(Some(-2), 5), Some(3));
        assert_eq!(start_offset(Some(6), 5), Some(5));
        assert_eq!(start_offset(Some(7), 5), None);
        assert_eq!(start_offset(Some(-9), 5), Some(0));
    }
}
