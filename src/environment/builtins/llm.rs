//! The `llm` provider: `llm_query` and `llm_query_batched`, the session's sub-model calls,
//! counted against its limits and token budget; and `parallel` and `parallel_map`
//! (`parallel.rs`), which send the calls of several functions together. An options table
//! as the last argument of a call may hold `cache = false`: a fresh sample, never an
//! answer from the call cache.

use std::rc::Rc;

use mlua::{Lua, LuaString, Value};

use super::options::{bool_option, check_known, options_table};
use super::state::BuiltinState;
use super::sub_calls::{Call, SubCall, sub_call};
use crate::conventions::builtins::BuiltinId;
use crate::llm::Request;

/// The options a call may give.
const OPTIONS: &[&str] = &["cache"];

/// Whether the options (argument `position`) ask for a fresh sample (`cache = false`).
fn wants_fresh(builtin: BuiltinId, position: usize, options: Value) -> mlua::Result<bool> {
    let Some(options) = options_table(builtin, position, options)? else {
        return Ok(false);
    };
    check_known(builtin, &options, OPTIONS)?;
    Ok(bool_option(builtin, &options, "cache")? == Some(false))
}

/// The request for `prompt`, fresh when asked.
fn request(prompt: String, fresh: bool) -> Request {
    let request = Request::from(prompt);
    if fresh {
        request.fresh_sample()
    } else {
        request
    }
}

/// `llm_query(prompt [, opts])` → the model's answer.
pub(super) fn llm_query(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<SubCall> {
    sub_call(
        lua,
        state,
        |_, state, (prompt, options): (LuaString, Value)| {
            let builtin = BuiltinId::LlmQuery;
            let fresh = wants_fresh(builtin, 2, options)?;
            state.llm(builtin)?;
            let request = request(prompt.to_string_lossy(), fresh);
            state
                .check_window(builtin, &request)
                .map_err(mlua::Error::RuntimeError)?;
            state.before_calls(1)?;
            Ok(Call::Llm {
                builtin,
                batched: false,
                requests: vec![Ok(request)],
            })
        },
    )
}

/// `llm_query_batched(prompts [, opts])` → answers in order; a failed call, or a prompt
/// too long for the model's window (not sent), gives `"error: …"` so one failure does not
/// lose the other answers.
pub(super) fn llm_query_batched(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<SubCall> {
    sub_call(
        lua,
        state,
        |_, state, (prompts, options): (Vec<LuaString>, Value)| {
            let builtin = BuiltinId::LlmQueryBatched;
            let fresh = wants_fresh(builtin, 2, options)?;
            let texts = prompts.iter().map(|prompt| prompt.to_string_lossy());
            batched_call(state, builtin, texts, fresh)
        },
    )
}

/// A batch of sub-model requests (fresh samples when `fresh`), each checked against the
/// window (one that does not fit is that entry's error), the ones to send counted against
/// the limits.
pub(super) fn batched_call(
    state: &BuiltinState,
    builtin: BuiltinId,
    prompts: impl Iterator<Item = String>,
    fresh: bool,
) -> mlua::Result<Call> {
    state.llm(builtin)?;
    let requests: Vec<Result<Request, String>> = prompts
        .map(|prompt| {
            let request = request(prompt, fresh);
            state.check_window(builtin, &request).map(|()| request)
        })
        .collect();
    state.before_calls(requests.iter().filter(|r| r.is_ok()).count())?;
    Ok(Call::Llm {
        builtin,
        batched: true,
        requests,
    })
}
