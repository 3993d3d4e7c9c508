//! `string.gsub` (`str_gsub`, `add_value`, `add_s`): the replacement is a string with
//! `%0`-`%9`, or a function or table called under `pcall` so that its errors come back
//! as values and are re-thrown unchanged.

use mlua::{Function, Lua, LuaString, MultiValue, Table, Value};

use super::functions::{Args, capture_value, limits_check, piece, push_captures, type_name};
use super::limits::Tripwire;
use super::matcher::{CaptureValue, Matcher};
use super::plan::{Searcher, anchor};
use super::{ESCAPE, Failure, raise};

/// Lua functions `gsub` calls for function and table replacements.
pub(super) struct Helpers<'a> {
    /// Calls a replacement function so that its error comes back as a value, re-thrown
    /// unchanged (mlua would turn a non-string error into text).
    pub(super) pcall: &'a Function,
    /// `function(t, k) return t[k] end`: indexing with metamethods, under `pcall`.
    pub(super) index: &'a Function,
}

/// What `gsub` replaces a match with.
enum Replacement {
    Text(LuaString),
    Call(Function),
    Index(Table),
}

/// `str_gsub`.
pub(super) fn gsub(
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
