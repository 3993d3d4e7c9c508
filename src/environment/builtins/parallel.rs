//! `parallel(f1, f2, …)` and `parallel_map(list, fn [, {concurrency = n}])`: plain Lua
//! functions run as coroutines, whose sub-calls go out together.
//!
//! A scheduler (Lua, below) runs each function as a coroutine of its own. When one calls
//! `llm_query`, `llm_query_batched`, `rlm_query` or `rlm_query_batched`, the built-in
//! sees it runs in a scheduler's coroutine: it prepares its call (arguments checked,
//! limits counted, as always), yields it, and once resumed takes its answer. When every
//! running function waits on a call or is done, the scheduler sends all the calls in one
//! round ([`sub_calls::send`](super::sub_calls::send): the sub-model requests together at
//! the concurrency, the children on threads meanwhile) and resumes each function with
//! its answer. A nested scheduler yields its round to the one around it instead of
//! sending it, so the outermost sends everything at once.
//!
//! The yield is made in Lua, not in Rust: Lua 5.4 lets a C function yield only by
//! giving a continuation, and an mlua function has none, so `llm_query` is a small Lua
//! function around two Rust ones (the call made at once, or prepared for a round). A
//! built-in called where no yield is possible (a `string.gsub` callback, a coroutine of
//! the code's own) makes its call at once, as outside `parallel`.
//!
//! The coroutines come from `coroutine.create`, so they carry the limits hook like any
//! other, and are resumed with the sandbox's `coroutine.resume`, which cannot swallow a
//! limit: a limit hit in one function ends the whole execution. Any other error is that
//! function's entry in the errors table; the others go on.

use std::rc::Rc;

use mlua::{AnyUserData, Function, Lua, Table, UserData};

use super::options;
use super::state::BuiltinState;
use super::sub_calls::{self, Answers, Call, SubCall};
use crate::conventions::builtins::BuiltinId;
use crate::environment::chunks::InternalChunk;

/// A call a built-in made inside a scheduler's coroutine: prepared, then answered by
/// the round that sent it, then taken by the built-in when its coroutine resumes.
pub(super) struct PendingCall {
    call: Option<Call>,
    answers: Option<Answers>,
}

impl PendingCall {
    pub(super) fn new(call: Call) -> PendingCall {
        PendingCall {
            call: Some(call),
            answers: None,
        }
    }
}

impl UserData for PendingCall {}

/// The scheduler's functions of one environment.
pub(super) struct Parallel {
    /// `yielding(direct, prepare)`: a sub-call built-in as the code calls it.
    yielding: Function,
    pub parallel: Function,
    pub parallel_map: Function,
}

impl Parallel {
    /// Makes the scheduler for `state`'s sub-calls.
    pub(super) fn new(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Parallel> {
        let default_concurrency = {
            let state = Rc::clone(&state);
            lua.create_function(move |_, ()| Ok(state.default_concurrency()))?
        };
        let unknown_option = lua.create_function(|_, opts: Table| {
            options::unknown_option(BuiltinId::ParallelMap, &opts, &["concurrency"])
        })?;
        let send_round = {
            let state = Rc::clone(&state);
            lua.create_function(move |_, (calls, concurrency): (Table, Option<usize>)| {
                send_round(&state, &calls, concurrency)
            })?
        };
        let take = lua.create_function(move |lua, call: AnyUserData| {
            let mut pending = call.borrow_mut::<PendingCall>()?;
            match (pending.call.take(), pending.answers.take()) {
                (Some(call), Some(answers)) => sub_calls::finish(lua, &state, call, answers),
                _ => Err(mlua::Error::RuntimeError(
                    "a sub-call was resumed before its round was sent".to_string(),
                )),
            }
        })?;
        let (yielding, parallel, parallel_map) = SCHEDULER.function(lua)?.call((
            send_round,
            take,
            default_concurrency,
            unknown_option,
            BuiltinId::Parallel.name(),
            BuiltinId::ParallelMap.name(),
        ))?;
        Ok(Parallel {
            yielding,
            parallel,
            parallel_map,
        })
    }

    /// The built-in the code calls for `sub_call`: it yields its call in a scheduler's
    /// coroutine, and makes it at once anywhere else.
    pub(super) fn yielding(&self, sub_call: SubCall) -> mlua::Result<Function> {
        self.yielding.call((sub_call.direct, sub_call.prepare))
    }
}

/// Sends the pending calls of a round and leaves each its answers.
fn send_round(state: &BuiltinState, calls: &Table, concurrency: Option<usize>) -> mlua::Result<()> {
    let handles: Vec<AnyUserData> = calls.sequence_values().collect::<mlua::Result<_>>()?;
    let mut prepared = Vec::with_capacity(handles.len());
    for handle in &handles {
        let call = handle.borrow_mut::<PendingCall>()?.call.take();
        prepared.push(
            call.ok_or_else(|| mlua::Error::RuntimeError("a sub-call was sent twice".to_string()))?,
        );
    }
    let answers = sub_calls::send(state, &prepared, concurrency.map(|n| n.max(1)));
    for ((handle, call), answers) in handles.iter().zip(prepared).zip(answers) {
        let mut pending = handle.borrow_mut::<PendingCall>()?;
        pending.call = Some(call);
        pending.answers = Some(answers);
    }
    Ok(())
}

/// `scheduler` is the chunk's name in Lua's messages.
static SCHEDULER: InternalChunk = InternalChunk::new("=scheduler", SCHEDULER_LUA);

const SCHEDULER_LUA: &str = r#"
local send_round, take, default_concurrency, unknown_option, parallel_name, map_name = ...
-- The coroutine library is read when used: `coroutine.create` gets its limits hook
-- after the built-ins are made.
local coroutine, error, type, next, ipairs, tostring = coroutine, error, type, next, ipairs, tostring
local pack, format, math_type, setmetatable = table.pack, string.format, math.type, setmetatable

-- The first value of every yield of the scheduler's, telling it from the code's own.
local MARK = {}
-- The coroutines the schedulers run; a sub-call made in one is yielded, not made.
local scheduled = setmetatable({}, {__mode = "k"})

local function in_scheduler()
  return scheduled[coroutine.running()] == true and coroutine.isyieldable()
end

local function yielding(direct, prepare)
  return function(...)
    if not in_scheduler() then return direct(...) end
    local call = prepare(...)
    coroutine.yield(MARK, {call})
    return take(call)
  end
end

-- A round's calls go to the scheduler around this one, if any, so that the outermost
-- sends the calls of every level at once.
local function dispatch(calls, concurrency)
  if in_scheduler() then
    coroutine.yield(MARK, calls)
  else
    send_round(calls, concurrency)
  end
end

-- Resumes an entry until it waits on calls (true) or is done (false, its result or
-- error recorded).
local function step(name, entry, results, errors)
  local outcome = pack(coroutine.resume(entry.co))
  if not outcome[1] then
    errors[entry.index] = outcome[2]
    return false
  end
  if coroutine.status(entry.co) == "dead" then
    results[entry.index] = outcome[2]
    return false
  end
  if outcome[2] ~= MARK then
    coroutine.close(entry.co)
    errors[entry.index] = format(
      "%s: function %d yielded outside a sub-call; a function run by %s may yield only in coroutines of its own",
      name, entry.index, name)
    return false
  end
  entry.calls = outcome[3]
  return true
end

-- Runs entries 1..count (`make(i)` gives entry i's function), at most `slots` at once,
-- their calls sent in rounds of at most `concurrency` requests at a time (nil: the
-- client's own).
local function run(name, count, make, slots, concurrency)
  local results, errors = {}, {}
  local waiting, started = {}, 0
  while true do
    while #waiting < slots and started < count do
      started = started + 1
      local co = coroutine.create(make(started))
      scheduled[co] = true
      local entry = {co = co, index = started}
      if step(name, entry, results, errors) then waiting[#waiting + 1] = entry end
    end
    if #waiting == 0 then return results, errors end
    local calls = {}
    for _, entry in ipairs(waiting) do
      for _, call in ipairs(entry.calls) do calls[#calls + 1] = call end
      entry.calls = nil
    end
    dispatch(calls, concurrency)
    local still = {}
    for _, entry in ipairs(waiting) do
      if step(name, entry, results, errors) then still[#still + 1] = entry end
    end
    waiting = still
  end
end

local function parallel(...)
  local functions = pack(...)
  for i = 1, functions.n do
    if type(functions[i]) ~= "function" then
      error(format("%s: bad argument #%d (a function expected, got %s)",
        parallel_name, i, type(functions[i])), 2)
    end
  end
  local function make(i) return functions[i] end
  return run(parallel_name, functions.n, make, functions.n, nil)
end

-- The `concurrency` option, or nil when the code gave none.
local function concurrency_option(opts)
  if opts == nil then return nil end
  if type(opts) ~= "table" then
    error(format("%s: bad argument #3 (an options table expected, got %s)", map_name, type(opts)), 3)
  end
  local unknown = unknown_option(opts)
  if unknown then error(unknown, 3) end
  local n = opts.concurrency
  if n == nil then return nil end
  if math_type(n) ~= "integer" or n < 1 then
    error(format("%s: opts.concurrency must be a whole number of at least 1, got %s", map_name,
      tostring(n)), 3)
  end
  return n
end

local function parallel_map(list, fn, opts)
  if type(list) ~= "table" then
    error(format("%s: bad argument #1 (a table expected, got %s)", map_name, type(list)), 2)
  end
  if type(fn) ~= "function" then
    error(format("%s: bad argument #2 (a function expected, got %s)", map_name, type(fn)), 2)
  end
  local concurrency = concurrency_option(opts)
  local function make(i)
    local item = list[i]
    return function() return fn(item, i) end
  end
  return run(map_name, #list, make, concurrency or default_concurrency(), concurrency)
end

return yielding, parallel, parallel_map
"#;
