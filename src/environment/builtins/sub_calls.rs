//! A sub-call of `llm_query`, `llm_query_batched`, `rlm_query` or `rlm_query_batched` in
//! three steps: prepared from its arguments ([`Call`], checked and counted against the
//! limits), sent ([`send`], with any other calls of the same round), and its answers
//! made into the Lua value the built-in returns ([`finish`]). A call outside `parallel`
//! takes the three at once; inside, its coroutine yields between the first and the
//! second, so the calls of every coroutine go out together (`parallel.rs`).

use std::rc::Rc;

use mlua::{FromLuaMulti, Function, Lua, Value};

use super::SubTask;
use super::state::BuiltinState;
use crate::conventions::builtins::BuiltinId;
use crate::environment::hook::hold_ticks;
use crate::llm::{Completion, LlmError, Request, split_thinking};

/// One built-in's call, ready to be sent.
pub(super) enum Call {
    /// Sub-model requests; one refused before sending (too long for the window) holds
    /// the reason instead.
    Llm {
        builtin: BuiltinId,
        batched: bool,
        requests: Vec<Result<Request, String>>,
    },
    /// Child agents.
    Rlm {
        builtin: BuiltinId,
        batched: bool,
        /// With a schema: each answer is JSON made into a Lua value.
        typed: bool,
        tasks: Vec<SubTask>,
    },
}

/// What came back for each request or task of a [`Call`], in order: the answer or the
/// error's message.
pub(super) type Answers = Vec<Result<String, String>>;

/// A built-in that makes sub-calls, in its two forms: `direct` makes the call and
/// returns its value; `prepare` gives the call as a [`PendingCall`](super::parallel::PendingCall)
/// for a scheduler's round.
pub(super) struct SubCall {
    pub direct: Function,
    pub prepare: Function,
}

/// Makes both forms of a built-in from the one function that reads its arguments into a
/// [`Call`] (checking and counting them).
pub(super) fn sub_call<A, P>(
    lua: &Lua,
    state: Rc<BuiltinState>,
    prepare: P,
) -> mlua::Result<SubCall>
where
    A: FromLuaMulti + 'static,
    P: Fn(&Lua, &BuiltinState, A) -> mlua::Result<Call> + Clone + 'static,
{
    let direct = {
        let (state, prepare) = (Rc::clone(&state), prepare.clone());
        lua.create_function(move |lua, args: A| {
            let call = prepare(lua, &state, args)?;
            let answers = send(&state, std::slice::from_ref(&call), None)
                .pop()
                .unwrap_or_default();
            finish(lua, &state, call, answers)
        })?
    };
    let prepare = lua.create_function(move |lua, args: A| {
        let call = prepare(lua, &state, args)?;
        lua.create_userdata(super::parallel::PendingCall::new(call))
    })?;
    Ok(SubCall { direct, prepare })
}

/// Sends every call of a round at once: the sub-model requests together, at most
/// `concurrency` at a time (the client's own when `None`), and the child agents on
/// threads of their own meanwhile.
/// The ticks are held while it waits, as for any blocking call out of Lua. Gives each
/// call's answers, in the order of `calls`.
pub(super) fn send(
    state: &BuiltinState,
    calls: &[Call],
    concurrency: Option<usize>,
) -> Vec<Answers> {
    // Re-executing a checkpoint's code: the answers its round got, nothing sent.
    if let Some(answers) = state.journal.replay_answers(calls.len()) {
        return answers;
    }
    let answers = send_live(state, calls, concurrency);
    state.journal.record_answers(&answers);
    answers
}

/// [`send`] to the model and the children.
fn send_live(state: &BuiltinState, calls: &[Call], concurrency: Option<usize>) -> Vec<Answers> {
    // Every request holds its worst case against the session's token budget until its
    // answer is counted; one that does not fit is not sent.
    let reservations: Vec<Vec<Result<u64, String>>> = calls
        .iter()
        .map(|call| match call {
            Call::Llm {
                builtin, requests, ..
            } => requests
                .iter()
                .map(|request| state.reserve_tokens(*builtin, request.as_ref()?))
                .collect(),
            Call::Rlm { .. } => Vec::new(),
        })
        .collect();
    let requests: Vec<Request> = calls
        .iter()
        .zip(&reservations)
        .flat_map(|(call, reserved)| match call {
            Call::Llm { requests, .. } => requests
                .iter()
                .zip(reserved)
                .filter_map(|(request, reserved)| {
                    reserved.as_ref().ok().and(request.as_ref().ok()).cloned()
                })
                .collect(),
            Call::Rlm { .. } => Vec::new(),
        })
        .collect();
    let tasks: Vec<SubTask> = calls
        .iter()
        .flat_map(|call| match call {
            Call::Rlm { tasks, .. } => tasks.clone(),
            Call::Llm { .. } => Vec::new(),
        })
        .collect();
    // A lone `rlm_query` is a child of its own, not a batch of one (the trace tells them
    // apart).
    let lone_child = matches!(calls, [Call::Rlm { batched: false, .. }]);
    let agent = state.host.sub_agent.clone();
    let run_children = || match (&agent, lone_child) {
        (Some(agent), true) => tasks.iter().map(|task| agent.run(task)).collect(),
        (Some(agent), false) => agent.run_batch(&tasks),
        (None, _) => vec![Err(no_children()); tasks.len()],
    };
    let (completions, children): (_, Answers) = hold_ticks(|| {
        if tasks.is_empty() {
            return (complete(state, requests, concurrency), Vec::new());
        }
        if requests.is_empty() {
            return (Vec::new(), run_children());
        }
        // Both kinds in one round: the children on a thread while the requests go out.
        std::thread::scope(|scope| {
            let children = scope.spawn(run_children);
            let completions = complete(state, requests, concurrency);
            let children = children
                .join()
                .unwrap_or_else(|_| vec![Err("the child agent crashed".to_string()); tasks.len()]);
            (completions, children)
        })
    });
    let mut completions = completions.into_iter();
    let mut children = children.into_iter();
    calls
        .iter()
        .zip(reservations)
        .map(|(call, reservations)| match call {
            Call::Llm {
                builtin, batched, ..
            } => reservations
                .into_iter()
                .map(|reserved| {
                    let reserved = reserved?;
                    let result = completions.next().unwrap_or_else(|| {
                        Err(LlmError::Config("no answer for this prompt".into()))
                    });
                    state.settle_tokens(reserved, &result);
                    result
                        .map_err(|error| error.to_string())
                        .and_then(|completion| answer_of(&completion))
                        .map_err(|error| match batched {
                            true => error,
                            false => format!("{} failed: {error}", builtin.name()),
                        })
                })
                .collect(),
            Call::Rlm { tasks, .. } => tasks
                .iter()
                .map(|_| {
                    children
                        .next()
                        .unwrap_or_else(|| Err("no answer for this sub-task".to_string()))
                })
                .collect(),
        })
        .collect()
}

/// What a sub-call returns to the code: the answer after the model's thinking, never the
/// thinking; a reply that was all thinking has no answer to give.
fn answer_of(completion: &Completion) -> Result<String, String> {
    let split = split_thinking(&completion.content);
    if split.unfinished {
        let why = match completion.finish_reason.as_deref() {
            Some("length") => "it was cut at the token limit while thinking",
            _ => "its thinking never closed",
        };
        return Err(format!(
            "the model's reply was all thinking, with no answer: {why}"
        ));
    }
    Ok(split.answer.to_string())
}

/// The sub-model requests of a round: one alone as a plain call, more through the
/// client's batch, at `concurrency` when the code chose one.
fn complete(
    state: &BuiltinState,
    mut requests: Vec<Request>,
    concurrency: Option<usize>,
) -> Vec<Result<Completion, LlmError>> {
    let Some(llm) = &state.host.llm else {
        return requests
            .iter()
            .map(|_| Err(LlmError::Config(no_model())))
            .collect();
    };
    match requests.len() {
        0 => Vec::new(),
        1 => requests
            .pop()
            .map(|r| llm.complete(r))
            .into_iter()
            .collect(),
        _ => match concurrency {
            Some(concurrency) => llm.complete_batch_at(requests, concurrency),
            None => llm.complete_batch(requests),
        },
    }
}

fn no_model() -> String {
    "no LLM is configured for this environment".to_string()
}

fn no_children() -> String {
    "this environment runs no child agents".to_string()
}

/// The value a call returns: a single call's answer (its error raised), or a batched
/// call's answers in order with `"error: …"` in place of a failed one.
pub(super) fn finish(
    lua: &Lua,
    state: &BuiltinState,
    call: Call,
    answers: Answers,
) -> mlua::Result<Value> {
    // A child's error is worded here; a sub-model call's was worded when it came back.
    let (builtin, batched, typed, child) = match call {
        Call::Llm {
            builtin, batched, ..
        } => (builtin, batched, false, false),
        Call::Rlm {
            builtin,
            batched,
            typed,
            ..
        } => (builtin, batched, typed, true),
    };
    if !batched {
        let answer = answers
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(format!("{} failed: no answer", builtin.name())));
        return match answer {
            Ok(answer) => super::agent::answer_value(lua, state, builtin, typed, answer),
            Err(error) if child => Err(mlua::Error::RuntimeError(format!(
                "{} failed: {error}",
                builtin.name()
            ))),
            Err(error) => Err(mlua::Error::RuntimeError(error)),
        };
    }
    let values = lua.create_table()?;
    for (i, answer) in answers.into_iter().enumerate() {
        let value = match answer {
            Ok(answer) => super::agent::answer_value(lua, state, builtin, typed, answer)?,
            Err(error) => Value::String(lua.create_string(format!("error: {error}"))?),
        };
        values.raw_set(i + 1, value)?;
    }
    Ok(Value::Table(values))
}
