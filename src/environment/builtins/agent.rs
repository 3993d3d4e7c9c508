//! The `agent` provider: `rlm_query` and `rlm_query_batched`, child agents through the
//! host's [`SubAgent`] (a plain sub-model call where there is none).
//!
//! A table as the last argument holds the call's options: `schema`, the JSON Schema the
//! child's answer must match (a Lua table converted by the one Lua ↔ JSON mapping, or
//! JSON text), and `images`, read as `llm_query` reads them (`images.rs`), which the
//! child's model sees with its task. A typed child's answer comes back through the same
//! mapping, as the Lua value it describes.
//!
//! [`SubAgent`]: super::SubAgent

use std::rc::Rc;

use mlua::{Lua, LuaString, Table, Value};
use serde_json::Value as Json;

use super::SubTask;
use super::images::images_option;
use super::llm::{CallOptions, batched_call};
use super::options::{bad_options, check_known, lua_type};
use super::state::BuiltinState;
use super::sub_calls::{Call, SubCall, sub_call};
use crate::conventions::ANSWER_GLOBAL;
use crate::conventions::builtins::BuiltinId;
use crate::engines::meter::WorkMeter;
use crate::environment::answer_schema::AnswerSchema;
use crate::environment::lua_json;
use crate::llm::ImagePart;

/// The options a call may give.
const OPTIONS: &[&str] = &["schema", "images"];

/// `rlm_query(prompt [, context] [, opts])`: a child agent, or `llm_query` when the host
/// runs none (an environment built without a [`SubAgent`](super::SubAgent), as `rlm
/// exec`'s). An agent at the depth limit never gets here: its scope refuses the call.
pub(super) fn rlm_query(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<SubCall> {
    sub_call(
        lua,
        state,
        |lua, state, (prompt, second, third): (String, Value, Value)| {
            let builtin = BuiltinId::RlmQuery;
            let (context, options) = match (second, third) {
                (Value::Table(options), Value::Nil) => (None, Some(options)),
                (context, Value::Nil) => (context_text(builtin, 2, context)?, None),
                (context, Value::Table(options)) => {
                    (context_text(builtin, 2, context)?, Some(options))
                }
                (_, other) => return Err(bad_options(builtin, 3, &other)),
            };
            let ChildOptions { schema, images } = child_options(lua, state, builtin, options)?;
            if state.host.sub_agent.is_none() {
                if schema.is_some() {
                    return Err(no_children_for_a_schema(builtin));
                }
                return fallback_llm_query(state, &prompt, context.as_deref(), images);
            }
            state.before_calls(1)?;
            Ok(Call::Rlm {
                builtin,
                batched: false,
                typed: schema.is_some(),
                tasks: vec![SubTask {
                    prompt,
                    context,
                    schema,
                    images,
                }],
            })
        },
    )
}

/// `rlm_query_batched(prompts [, contexts] [, opts])`: children on threads (the host's
/// [`SubAgent::run_batch`](super::SubAgent::run_batch)), answers in order. The options
/// may come second when there are no contexts: a table with a `schema` field.
pub(super) fn rlm_query_batched(lua: &Lua, state: Rc<BuiltinState>) -> mlua::Result<SubCall> {
    sub_call(
        lua,
        state,
        |lua, state, (prompts, second, third): (Vec<LuaString>, Value, Value)| {
            let builtin = BuiltinId::RlmQueryBatched;
            let (contexts, options) = match (second, third) {
                (Value::Table(table), Value::Nil)
                    if table.contains_key("schema")? || table.contains_key("images")? =>
                {
                    (Value::Nil, Some(table))
                }
                (contexts, Value::Nil) => (contexts, None),
                (contexts, Value::Table(options)) => (contexts, Some(options)),
                (_, other) => return Err(bad_options(builtin, 3, &other)),
            };
            let contexts: Option<Vec<LuaString>> = lua.unpack(contexts)?;
            let ChildOptions { schema, images } = child_options(lua, state, builtin, options)?;
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
            if state.host.sub_agent.is_none() {
                if schema.is_some() {
                    return Err(no_children_for_a_schema(builtin));
                }
                let texts = prompts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| with_context(p, contexts.get(i).map(String::as_str)));
                return batched_call(state, builtin, texts, &CallOptions::with_images(images));
            }
            state.before_calls(prompts.len())?;
            let typed = schema.is_some();
            let mut contexts = contexts.into_iter();
            let tasks: Vec<SubTask> = prompts
                .into_iter()
                .map(|prompt| SubTask {
                    prompt,
                    context: contexts.next(),
                    schema: schema.clone(),
                    images: images.clone(),
                })
                .collect();
            Ok(Call::Rlm {
                builtin,
                batched: true,
                typed,
                tasks,
            })
        },
    )
}

/// A context argument: a string (a number is made one, as Lua does), or none.
fn context_text(builtin: BuiltinId, position: usize, value: Value) -> mlua::Result<Option<String>> {
    match value {
        Value::Nil => Ok(None),
        Value::String(text) => Ok(Some(text.to_string_lossy())),
        Value::Integer(n) => Ok(Some(n.to_string())),
        Value::Number(n) => Ok(Some(n.to_string())),
        other => Err(mlua::Error::RuntimeError(format!(
            "{}: bad argument #{position} (a context string or an options table expected, got {})",
            builtin.name(),
            lua_type(&other)
        ))),
    }
}

fn no_children_for_a_schema(builtin: BuiltinId) -> mlua::Error {
    mlua::Error::RuntimeError(format!(
        "{}: opts.schema needs a child agent, and this environment runs none (here {} is a plain llm_query)",
        builtin.name(),
        builtin.name()
    ))
}

/// What a child's options ask for.
#[derive(Default)]
struct ChildOptions {
    schema: Option<AnswerSchema>,
    images: Vec<ImagePart>,
}

/// The options of a child's call: its schema and its images. An unknown option is an
/// error naming it.
fn child_options(
    lua: &Lua,
    state: &BuiltinState,
    builtin: BuiltinId,
    options: Option<Table>,
) -> mlua::Result<ChildOptions> {
    let Some(options) = options else {
        return Ok(ChildOptions::default());
    };
    check_known(builtin, &options, OPTIONS)?;
    Ok(ChildOptions {
        schema: schema_option(lua, state, builtin, &options)?,
        images: images_option(lua, state, builtin, &options)?,
    })
}

/// `opts.schema`, compiled: a Lua table (converted by the one mapping) or JSON text; a
/// schema that is not one is an error naming it.
fn schema_option(
    lua: &Lua,
    state: &BuiltinState,
    builtin: BuiltinId,
    options: &Table,
) -> mlua::Result<Option<AnswerSchema>> {
    let schema = match options.get::<Value>("schema")? {
        Value::Nil => return Ok(None),
        Value::String(text) => {
            serde_json::from_str::<Json>(&text.to_string_lossy()).map_err(|e| {
                mlua::Error::RuntimeError(format!(
                    "{}: opts.schema is a string but not JSON: {e}",
                    builtin.name()
                ))
            })?
        }
        value => lua_json::to_json(lua, &state.tripwire.guard, &value, "opts.schema")
            .map_err(|error| error.into_lua(&format!("{}: ", builtin.name())))?,
    };
    AnswerSchema::new(schema)
        .map(Some)
        .map_err(|e| mlua::Error::RuntimeError(format!("{}: opts.schema is {e}", builtin.name())))
}

/// A child's answer for the caller's code: its text, or for a typed child the value its
/// JSON text describes, made by the one mapping.
pub(super) fn answer_value(
    lua: &Lua,
    state: &BuiltinState,
    builtin: BuiltinId,
    typed: bool,
    answer: String,
) -> mlua::Result<Value> {
    if !typed {
        return Ok(Value::String(lua.create_string(answer)?));
    }
    let json: Json = serde_json::from_str(&answer).map_err(|e| {
        mlua::Error::RuntimeError(format!(
            "{}: the child's answer is not JSON ({e}): {answer}",
            builtin.name()
        ))
    })?;
    lua_json::to_lua(lua, &state.tripwire.guard, &json, ANSWER_GLOBAL)
        .map_err(|error| error.into_lua(&format!("{}: ", builtin.name())))
}

/// Without a host's sub-agent, a child is a plain sub-model call, the context prepended.
fn fallback_llm_query(
    state: &BuiltinState,
    prompt: &str,
    context: Option<&str>,
    images: Vec<ImagePart>,
) -> mlua::Result<Call> {
    let builtin = BuiltinId::RlmQuery;
    state.llm(builtin)?;
    let request = CallOptions::with_images(images).request(with_context(prompt, context));
    state
        .check_window(builtin, &request)
        .map_err(mlua::Error::RuntimeError)?;
    state.before_calls(1)?;
    Ok(Call::Llm {
        builtin,
        batched: false,
        requests: vec![Ok(request)],
    })
}

/// A child's prompt for a plain sub-model call: the context, if any, after it.
fn with_context(prompt: &str, context: Option<&str>) -> String {
    match context {
        Some(context) => format!("{prompt}\n\n<context>\n{context}\n</context>"),
        None => prompt.to_string(),
    }
}
