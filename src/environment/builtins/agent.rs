//! The `agent` provider: `rlm_query` and `rlm_query_batched`, child agents through the
//! host's [`SubAgent`] (a plain sub-model call where there is none).
//!
//! [`SubAgent`]: super::SubAgent

use std::rc::Rc;

use mlua::{Function, Lua, LuaString};

use super::SubTask;
use super::state::BuiltinState;
use crate::conventions::builtins::BuiltinId;
use crate::engines::meter::WorkMeter;
use crate::environment::hook::hold_ticks;
use crate::llm::Request;

/// `rlm_query(prompt [, context])`: a child agent, or `llm_query` when the host runs
/// none (an environment built without a [`SubAgent`](super::SubAgent), as `rlm exec`'s).
/// An agent at the depth limit never gets here: its scope refuses the call.
pub(super) fn rlm_query(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(move |_, (prompt, context): (String, Option<String>)| {
        let Some(agent) = state.sub_agent.clone() else {
            return fallback_llm_query(&state, &prompt, context.as_deref());
        };
        state.before_calls(1)?;
        hold_ticks(|| agent.run(&prompt, context.as_deref())).map_err(|e| {
            mlua::Error::RuntimeError(format!("{} failed: {e}", BuiltinId::RlmQuery.name()))
        })
    })
}

/// `rlm_query_batched(prompts [, contexts])`: children on threads (the host's
/// [`SubAgent::run_batch`](super::SubAgent::run_batch)), answers in order.
pub(super) fn rlm_query_batched(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<Function> {
    lua.create_function(
        move |lua, (prompts, contexts): (Vec<LuaString>, Option<Vec<LuaString>>)| {
            // The children run on threads, so their texts are copied out of Lua: the
            // copies count against the memory limit before they are made.
            let contexts = contexts.unwrap_or_default();
            let copied = prompts
                .iter()
                .chain(&contexts)
                .map(|text| text.as_bytes().len());
            WorkMeter::new(lua, &state.tripwire).check_holding(copied.sum())?;
            let text = |text: &LuaString| text.to_string_lossy();
            let prompts: Vec<String> = prompts.iter().map(text).collect();
            let contexts: Vec<String> = contexts.iter().map(text).collect();
            let Some(agent) = state.sub_agent.clone() else {
                let answers = prompts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        fallback_llm_query(&state, p, contexts.get(i).map(String::as_str))
                            .unwrap_or_else(|e| format!("error: {e}"))
                    })
                    .collect::<Vec<_>>();
                return lua.create_sequence_from(answers);
            };
            state.before_calls(prompts.len())?;
            let mut contexts = contexts.into_iter();
            let tasks: Vec<SubTask> = prompts
                .into_iter()
                .map(|prompt| SubTask {
                    prompt,
                    context: contexts.next(),
                })
                .collect();
            let answers: Vec<String> = hold_ticks(|| agent.run_batch(&tasks))
                .into_iter()
                .map(|answer| answer.unwrap_or_else(|error| format!("error: {error}")))
                .collect();
            lua.create_sequence_from(answers)
        },
    )
}

/// Without a host's sub-agent, a child is a plain sub-model call, the context prepended.
fn fallback_llm_query(
    state: &BuiltinState,
    prompt: &str,
    context: Option<&str>,
) -> mlua::Result<String> {
    let llm = state.llm(BuiltinId::RlmQuery)?;
    state.before_calls(1)?;
    let text = match context {
        Some(context) => format!("{prompt}\n\n<context>\n{context}\n</context>"),
        None => prompt.to_string(),
    };
    let result = hold_ticks(|| llm.complete(Request::from(text)));
    state.spent(&result);
    result.map(|c| c.content).map_err(|e| {
        mlua::Error::RuntimeError(format!("{} failed: {e}", BuiltinId::RlmQuery.name()))
    })
}
