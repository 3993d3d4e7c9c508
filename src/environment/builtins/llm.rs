//! The `llm` provider: `llm_query` and `llm_query_batched`, the session's sub-model calls,
//! counted against its limits and token budget; and `parallel` and `parallel_map`
//! (`parallel.rs`), which send the calls of several functions together. An options table
//! as the last argument of a call may hold `cache = false`: a fresh sample, never an
//! answer from the call cache; and `images`, images sent with the prompt to a vision
//! model (`images.rs`; with `llm_query_batched`, with every prompt).

use std::rc::Rc;

use mlua::{Lua, LuaString, Value};

use super::images::images_option;
use super::options::{bool_option, check_known, options_table};
use super::state::BuiltinState;
use super::sub_calls::{Call, SubCall, sub_call};
use crate::conventions::builtins::BuiltinId;
use crate::llm::{ImagePart, Request};

/// The options a call may give.
const OPTIONS: &[&str] = &["cache", "images"];

/// What a sub-model call's options ask for: a fresh sample (`cache = false`), images
/// (`images = {…}`, `images.rs`).
#[derive(Default)]
pub(super) struct CallOptions {
    fresh: bool,
    images: Vec<ImagePart>,
}

impl CallOptions {
    /// The options (argument `position`) of a call of `builtin`.
    fn read(
        lua: &Lua,
        state: &BuiltinState,
        builtin: BuiltinId,
        position: usize,
        options: Value,
    ) -> mlua::Result<CallOptions> {
        let Some(options) = options_table(builtin, position, options)? else {
            return Ok(CallOptions::default());
        };
        check_known(builtin, &options, OPTIONS)?;
        Ok(CallOptions {
            fresh: bool_option(builtin, &options, "cache")? == Some(false),
            images: images_option(lua, state, builtin, &options)?,
        })
    }

    /// Options that send `images` and nothing else.
    pub(super) fn with_images(images: Vec<ImagePart>) -> CallOptions {
        CallOptions {
            fresh: false,
            images,
        }
    }

    /// The request for `prompt`, as the options ask.
    pub(super) fn request(&self, prompt: String) -> Request {
        let request = Request::from(prompt).with_images(self.images.clone());
        if self.fresh {
            request.fresh_sample()
        } else {
            request
        }
    }
}

/// `llm_query(prompt [, opts])` → the model's answer.
pub(super) fn llm_query(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<SubCall> {
    sub_call(
        lua,
        state,
        |lua, state, (prompt, options): (LuaString, Value)| {
            let builtin = BuiltinId::LlmQuery;
            let options = CallOptions::read(lua, state, builtin, 2, options)?;
            state.model_or_record(builtin)?;
            let request = options.request(prompt.to_string_lossy());
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
        |lua, state, (prompts, options): (Vec<LuaString>, Value)| {
            let builtin = BuiltinId::LlmQueryBatched;
            let options = CallOptions::read(lua, state, builtin, 2, options)?;
            let texts = prompts.iter().map(|prompt| prompt.to_string_lossy());
            batched_call(state, builtin, texts, &options)
        },
    )
}

/// A batch of sub-model requests (made as `options` ask), each checked against the
/// window (one that does not fit is that entry's error), the ones to send counted against
/// the limits.
pub(super) fn batched_call(
    state: &BuiltinState,
    builtin: BuiltinId,
    prompts: impl Iterator<Item = String>,
    options: &CallOptions,
) -> mlua::Result<Call> {
    state.model_or_record(builtin)?;
    let requests: Vec<Result<Request, String>> = prompts
        .map(|prompt| {
            let request = options.request(prompt);
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
