//! The `llm` provider: `llm_query` and `llm_query_batched`, the session's sub-model calls,
//! counted against its limits and token budget. An options table as the last argument may
//! hold `cache = false`: a fresh sample, never an answer from the call cache.

use std::rc::Rc;

use mlua::{Function, Lua, Value};

use super::options::{bool_option, check_known, options_table};
use super::state::BuiltinState;
use crate::conventions::builtins::BuiltinId;
use crate::environment::hook::hold_ticks;
use crate::llm::{LlmError, Request};

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
fn request(prompt: &mlua::LuaString, fresh: bool) -> Request {
    let request = Request::from(prompt.to_string_lossy());
    if fresh {
        request.fresh_sample()
    } else {
        request
    }
}

/// `llm_query(prompt [, opts])` → the model's answer.
pub(super) fn llm_query(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(move |_, (prompt, options): (mlua::LuaString, Value)| {
        let fresh = wants_fresh(BuiltinId::LlmQuery, 2, options)?;
        let llm = state.llm(BuiltinId::LlmQuery)?;
        let request = request(&prompt, fresh);
        state
            .check_window(BuiltinId::LlmQuery, &request)
            .map_err(mlua::Error::RuntimeError)?;
        state.before_calls(1)?;
        let result = hold_ticks(|| llm.complete(request));
        state.spent(&result);
        result
            .map(|completion| completion.content)
            .map_err(|error| {
                mlua::Error::RuntimeError(format!("{} failed: {error}", BuiltinId::LlmQuery.name()))
            })
    })
}

/// `llm_query_batched(prompts [, opts])` → answers in order; a failed call, or a prompt too long
/// for the model's window (not sent), gives `"error: …"` so one failure does not lose the
/// other answers.
pub(super) fn llm_query_batched(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(
        move |lua, (prompts, options): (Vec<mlua::LuaString>, Value)| {
            let fresh = wants_fresh(BuiltinId::LlmQueryBatched, 2, options)?;
            let llm = state.llm(BuiltinId::LlmQueryBatched)?;
            let checked: Vec<Result<Request, String>> = prompts
                .iter()
                .map(|prompt| {
                    let request = request(prompt, fresh);
                    state
                        .check_window(BuiltinId::LlmQueryBatched, &request)
                        .map(|()| request)
                })
                .collect();
            let sent: Vec<Request> = checked
                .iter()
                .filter_map(|c| c.as_ref().ok().cloned())
                .collect();
            state.before_calls(sent.len())?;
            let mut results = hold_ticks(|| llm.complete_batch(sent)).into_iter();
            let answers: Vec<String> = checked
                .into_iter()
                .map(|checked| {
                    let result = checked.and_then(|_| {
                        let result = results.next().unwrap_or_else(|| {
                            Err(LlmError::Config("no answer for this prompt".into()))
                        });
                        state.spent(&result);
                        result
                            .map(|completion| completion.content)
                            .map_err(|e| e.to_string())
                    });
                    result.unwrap_or_else(|error| format!("error: {error}"))
                })
                .collect();
            lua.create_sequence_from(answers)
        },
    )
}
