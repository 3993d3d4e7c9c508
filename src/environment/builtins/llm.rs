//! The `llm` provider: `llm_query` and `llm_query_batched`, the session's sub-model calls,
//! counted against its limits and token budget; and `parallel` and `parallel_map`
//! (`parallel.rs`), which send the calls of several functions together.

use std::rc::Rc;

use mlua::{Lua, LuaString};

use super::state::BuiltinState;
use super::sub_calls::{Call, SubCall, sub_call};
use crate::conventions::builtins::BuiltinId;
use crate::llm::Request;

/// `llm_query(prompt)` → the model's answer.
pub(super) fn llm_query(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<SubCall> {
    sub_call(lua, state, |_, state, prompt: LuaString| {
        let builtin = BuiltinId::LlmQuery;
        state.llm(builtin)?;
        let request = Request::from(prompt.to_string_lossy());
        state
            .check_window(builtin, &request)
            .map_err(mlua::Error::RuntimeError)?;
        state.before_calls(1)?;
        Ok(Call::Llm {
            builtin,
            batched: false,
            requests: vec![Ok(request)],
        })
    })
}

/// `llm_query_batched(prompts)` → answers in order; a failed call, or a prompt too long
/// for the model's window (not sent), gives `"error: …"` so one failure does not lose the
/// other answers.
pub(super) fn llm_query_batched(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<SubCall> {
    sub_call(lua, state, |_, state, prompts: Vec<LuaString>| {
        let texts = prompts.iter().map(|prompt| prompt.to_string_lossy());
        batched_call(state, BuiltinId::LlmQueryBatched, texts)
    })
}

/// A batch of sub-model requests, each checked against the window (one that does not
/// fit is that entry's error), the ones to send counted against the limits.
pub(super) fn batched_call(
    state: &BuiltinState,
    builtin: BuiltinId,
    prompts: impl Iterator<Item = String>,
) -> mlua::Result<Call> {
    state.llm(builtin)?;
    let requests: Vec<Result<Request, String>> = prompts
        .map(|prompt| {
            let request = Request::from(prompt);
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
