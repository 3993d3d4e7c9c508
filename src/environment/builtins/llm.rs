//! The `llm` provider: `llm_query` and `llm_query_batched`, the session's sub-model calls,
//! counted against its limits and token budget.

use std::rc::Rc;

use mlua::{Function, Lua};

use super::state::BuiltinState;
use crate::conventions::builtins::BuiltinId;
use crate::environment::hook::hold_ticks;
use crate::llm::Request;

/// `llm_query(prompt)` → the model's answer.
pub(super) fn llm_query(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(move |_, prompt: mlua::LuaString| {
        let llm = state.llm(BuiltinId::LlmQuery)?;
        state.before_calls(1)?;
        let request = Request::from(prompt.to_string_lossy());
        let result = hold_ticks(|| llm.complete(request));
        state.spent(&result);
        result
            .map(|completion| completion.content)
            .map_err(|error| {
                mlua::Error::RuntimeError(format!("{} failed: {error}", BuiltinId::LlmQuery.name()))
            })
    })
}

/// `llm_query_batched(prompts)` → answers in order; a failed call gives `"error: …"` so
/// one failure does not lose the other answers.
pub(super) fn llm_query_batched(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(move |lua, prompts: Vec<mlua::LuaString>| {
        let llm = state.llm(BuiltinId::LlmQueryBatched)?;
        state.before_calls(prompts.len())?;
        let requests = prompts
            .iter()
            .map(|p| Request::from(p.to_string_lossy()))
            .collect();
        let answers: Vec<String> = hold_ticks(|| llm.complete_batch(requests))
            .into_iter()
            .inspect(|result| state.spent(result))
            .map(|result| match result {
                Ok(completion) => completion.content,
                Err(error) => format!("error: {error}"),
            })
            .collect();
        lua.create_sequence_from(answers)
    })
}
