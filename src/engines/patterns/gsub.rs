//! `string.gsub` (`str_gsub`, `add_value`, `add_s`).
//!
//! A string replacement (`%0`-`%9`) is done in one call. A function or table replacement
//! must be called from the C function in front ([`super::front::gsub_front`]), as C Lua's
//! `gsub` calls it from its own frame: then an error raised with a level (`error(msg,
//! 3)`) or an `__index` error reports the same position as in C Lua, and any error
//! passes through unchanged. So [`Gsub`] is a state machine: it runs until it needs a
//! replacement value, hands back the call to make ([`CALL_MARKER`], function,
//! captures) or the index to read ([`INDEX_MARKER`], table, key), and goes on when
//! given the value.

use std::cell::RefCell;
use std::ffi::c_void;
use std::rc::Rc;

use mlua::{Function, LightUserData, Lua, LuaString, MultiValue, Table, Value};

use super::super::lauxlib::type_name;
use super::super::meter::CHECK_BYTES;
use super::functions::{Args, capture_value, limits_check, one, piece, push_captures, report};
use super::limits::Guard;
use super::matcher::{CaptureValue, Matcher};
use super::plan::{Searcher, anchor};
use super::{ESCAPE, Failure, raise};

/// Distinct addresses for the markers of [`Gsub`]'s replies (one static each could be
/// merged; elements of one array cannot).
pub(super) static MARKERS: [u8; 3] = [0; 3];
/// Starts the first reply: the step function follows, then a call or index request.
pub(super) const STEP_MARKER: usize = 0;
/// A request to call a function with arguments; its first result comes back.
pub(super) const CALL_MARKER: usize = 1;
/// A request to index a table (with metamethods); the value comes back.
pub(super) const INDEX_MARKER: usize = 2;

/// The marker `which` as a Lua value. Lua code cannot make a light userdata.
pub(super) fn marker(which: usize) -> Value {
    Value::LightUserData(LightUserData(
        std::ptr::addr_of!(MARKERS[which]) as *mut c_void
    ))
}

/// What `gsub` replaces a match with.
enum Replacement {
    /// A template, and how many `%` it has (counted once, to bound each expansion).
    Text(LuaString, usize),
    Call(Function),
    Index(Table),
}

impl Replacement {
    fn text(text: LuaString) -> Self {
        let escapes = text.as_bytes().iter().filter(|&&b| b == ESCAPE).count();
        Replacement::Text(text, escapes)
    }
}

/// What one run of [`Gsub`] ends with.
enum Step {
    /// The result and the number of matches.
    Done(MultiValue),
    /// A marker and what to call or index; [`Gsub::run`] wants the value next.
    Request(MultiValue),
}

/// One `string.gsub` call in progress.
struct Gsub {
    subject: LuaString,
    pattern: LuaString,
    replacement: Replacement,
    max_replacements: i64,
    /// Where the search goes on.
    s: usize,
    last_match: Option<usize>,
    count: i64,
    changed: bool,
    out: Vec<u8>,
    /// The match whose replacement value was requested.
    pending: Option<(usize, usize)>,
}

/// `str_gsub`'s entry: the result, or the first request, after [`STEP_MARKER`] and the
/// step function that takes the requested values.
pub(super) fn gsub(
    lua: &Lua,
    guard: &Rc<Guard>,
    values: &MultiValue,
) -> Result<MultiValue, Failure> {
    let mut state = Gsub::new(lua, values)?;
    let request = match state.run(lua, guard, Value::Nil)? {
        Step::Done(values) => return Ok(values),
        Step::Request(request) => request,
    };
    let state = RefCell::new(state);
    let guard = Rc::clone(guard);
    let step = lua.create_function(move |lua, value: Value| {
        let result = state.borrow_mut().run(lua, &guard, value);
        report(
            lua,
            result.map(|step| match step {
                Step::Done(values) | Step::Request(values) => values,
            }),
        )
    })?;
    let mut reply = MultiValue::from_vec(vec![marker(STEP_MARKER), Value::Function(step)]);
    reply.extend(request);
    Ok(reply)
}

impl Gsub {
    /// Checks the arguments as `str_gsub` does, in its order.
    fn new(lua: &Lua, values: &MultiValue) -> Result<Gsub, Failure> {
        let args = Args {
            lua,
            values,
            function: "gsub",
        };
        let subject = args.string(1)?;
        let pattern = args.string(2)?;
        let len = subject.as_bytes().len();
        // Lua checks the count (argument 4) before the replacement's type (argument 3).
        let max_replacements = args.opt_integer(4, len as i64 + 1)?;
        let replacement = match args.get(3) {
            Some(Value::String(text)) => Replacement::text(text.clone()),
            Some(number @ (Value::Integer(_) | Value::Number(_))) => {
                match lua.coerce_string(number.clone())? {
                    Some(text) => Replacement::text(text),
                    None => return Err(args.type_error(3, "string/function/table")),
                }
            }
            Some(Value::Function(function)) => Replacement::Call(function.clone()),
            Some(Value::Table(table)) => Replacement::Index(table.clone()),
            _ => return Err(args.type_error(3, "string/function/table")),
        };
        Ok(Gsub {
            subject,
            pattern,
            replacement,
            max_replacements,
            s: 0,
            last_match: None,
            count: 0,
            changed: false,
            out: Vec::new(),
            pending: None,
        })
    }

    /// Goes on with `value`, the replacement value requested last (if any), until the
    /// next request or the end.
    fn run(&mut self, lua: &Lua, guard: &Guard, value: Value) -> Result<Step, Failure> {
        let subject = self.subject.clone();
        let pattern = self.pattern.clone();
        let (src, pat) = (subject.as_bytes(), pattern.as_bytes());
        let (anchored, pat) = anchor(&pat);
        let check = limits_check(lua, guard);
        let mut searcher = Searcher::new(&src, pat, &check);
        if let Some((start, e)) = self.pending.take() {
            let before = self.out.len();
            self.changed |= add_result(lua, &src, (start, e), value, &mut self.out)?;
            self.matched(searcher.matcher(), e, self.out.len() - before)?;
            if anchored {
                return self.finish(lua, searcher.matcher(), &src);
            }
        }
        while self.count < self.max_replacements {
            let found = if anchored {
                searcher.match_at(self.s)?.map(|e| (self.s, e))
            } else {
                searcher.next_match(self.s, self.last_match)?
            };
            let Some((start, e)) = found else { break };
            let skipped = piece(&src, self.s, start);
            self.out.extend_from_slice(skipped);
            self.count += 1;
            let matcher = searcher.matcher();
            match &self.replacement {
                Replacement::Text(text, escapes) => {
                    let before = self.out.len();
                    let template = (&*text.as_bytes(), *escapes);
                    add_text(matcher, &src, (start, e), template, &mut self.out)?;
                    self.changed = true;
                    self.matched(matcher, e, self.out.len() - before + skipped.len())?;
                }
                Replacement::Call(function) => {
                    let mut request = one(marker(CALL_MARKER));
                    request.push_back(Value::Function(function.clone()));
                    push_captures(lua, matcher, &src, (start, e), true, &mut request)?;
                    self.pending = Some((start, e));
                    return Ok(Step::Request(request));
                }
                Replacement::Index(table) => {
                    let key = capture_value(lua, &src, matcher.capture(0, start, e)?)?;
                    self.pending = Some((start, e));
                    return Ok(Step::Request(MultiValue::from_vec(vec![
                        marker(INDEX_MARKER),
                        Value::Table(table.clone()),
                        key,
                    ])));
                }
            }
            if anchored {
                break;
            }
        }
        self.finish(lua, searcher.matcher(), &src)
    }

    /// After a match ending at `e` was replaced: counts the work and moves on.
    fn matched(&mut self, matcher: &mut Matcher, e: usize, work: usize) -> Result<(), Failure> {
        // The result grows outside Lua's allocator: count it against the limits.
        matcher.hold(self.out.len());
        matcher.spend(work)?;
        self.s = e;
        self.last_match = Some(e);
        Ok(())
    }

    /// The result: the subject itself when nothing changed.
    fn finish(&mut self, lua: &Lua, matcher: &mut Matcher, src: &[u8]) -> Result<Step, Failure> {
        let result = if self.changed {
            let rest = src.get(self.s..).unwrap_or_default();
            self.out.extend_from_slice(rest);
            matcher.hold(self.out.len());
            matcher.spend(rest.len())?;
            lua.create_string(&self.out)?
        } else {
            self.subject.clone()
        };
        self.out = Vec::new();
        Ok(Step::Done(MultiValue::from_vec(vec![
            Value::String(result),
            Value::Integer(self.count),
        ])))
    }
}

/// The end of `add_value`: appends what a function or table gave for the match `s..e`;
/// returns whether the subject changed (`nil` or `false` keeps the match).
fn add_result(
    lua: &Lua,
    src: &[u8],
    (s, e): (usize, usize),
    value: Value,
    out: &mut Vec<u8>,
) -> Result<bool, Failure> {
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
    (text, escapes): (&[u8], usize),
    out: &mut Vec<u8>,
) -> Result<(), Failure> {
    // Every capture lies in the match (a position capture is a short number): a template
    // repeating `%0` could otherwise expand far past the memory limit in one go.
    let most = text
        .len()
        .saturating_add(escapes.saturating_mul((e - s).max(20)));
    if most >= CHECK_BYTES {
        matcher.check_before(most)?;
    }
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
