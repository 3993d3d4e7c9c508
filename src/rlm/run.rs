//! The run loop: an agent's turns, from the first message to `FINAL` or a failure.
//!
//! Each turn asks the model, runs the code blocks of its reply in order, takes a final
//! answer if one was given, and otherwise sends back the feedback (see [`super::prompt`]
//! for every word of it). Each turn is written to the trace and the live view.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use crate::conventions::is_lua_name;
use crate::environment::{Environment, ExecError, User};
use crate::llm::{Completion, Message, Request};

use super::agent::Agent;
use super::context::Context;
use super::parse::{self, PlainFinal, Reply};
use super::prompt;
use super::report::RlmError;
use super::trajectory::{Block, BlockStatus, Record, Start, Turn, millis};

/// From this iteration on, each turn logs a `tracing` warning.
pub const WARN_FROM_ITERATION: u32 = 5;

/// How one turn ends.
enum Outcome {
    /// No answer yet: the feedback for the next turn.
    Continue(String),
    /// The final answer.
    Final(String),
    /// The run ends without an answer.
    Fail(RlmError),
}

impl Agent {
    /// Runs the loop: the answer or the error, and the turns taken.
    pub(super) fn run(
        &self,
        question: &str,
        context: Option<&Context>,
        user: Option<Arc<dyn User>>,
    ) -> (Result<String, RlmError>, u32) {
        let env = match self.environment(user) {
            Ok(env) => env,
            Err(error) => return (Err(RlmError::Setup(error.to_string())), 0),
        };
        if let Some(context) = context
            && let Err(error) = context.load_into(&env)
        {
            return (Err(RlmError::Context(error)), 0);
        }
        let config = &self.config;
        let system = prompt::system_prompt(
            env.catalog(),
            context,
            &config.settings(self.depth, self.limits().time),
        );
        let mut messages = vec![
            Message::system(system),
            Message::user(prompt::question(question, context.is_some())),
        ];
        if let Err(error) = self.record_start(question, context, &messages) {
            return (Err(RlmError::Trace(error)), 0);
        }
        let mut state = LoopState::default();
        for turn in 1..=config.max_iterations {
            if turn >= WARN_FROM_ITERATION {
                tracing::warn!(
                    agent = %self.id,
                    depth = self.depth,
                    turn,
                    max_iterations = config.max_iterations,
                    "RLM turn {turn} of {}: no final answer yet",
                    config.max_iterations
                );
            }
            let outcome = match self.turn(turn, &env, &messages, &mut state) {
                Ok(outcome) => outcome,
                Err(error) => return (Err(RlmError::Trace(error)), turn),
            };
            match outcome {
                Outcome::Continue(feedback) => {
                    messages.push(Message::assistant(std::mem::take(&mut state.reply)));
                    messages.push(Message::user(feedback));
                }
                Outcome::Final(answer) => return (Ok(answer), turn),
                Outcome::Fail(error) => return (Err(error), turn),
            }
        }
        (
            Err(RlmError::IterationLimit {
                max_iterations: config.max_iterations,
            }),
            config.max_iterations,
        )
    }

    /// One turn: ask, run the code, decide; the trace and live view are written here.
    fn turn(
        &self,
        turn: u32,
        env: &Environment,
        messages: &[Message],
        state: &mut LoopState,
    ) -> io::Result<Outcome> {
        let started = Instant::now();
        let mut record = Turn {
            agent: self.id.clone(),
            depth: self.depth,
            turn,
            messages_sent: messages.len(),
            ..Turn::default()
        };
        let outcome = match self.ask(messages, &mut record, started) {
            Ok(completion) => self.respond(turn, env, completion, state, &mut record),
            Err(error) => Outcome::Fail(error),
        };
        match &outcome {
            Outcome::Continue(feedback) => record.feedback = Some(feedback.clone()),
            Outcome::Final(answer) => record.final_answer = Some(answer.clone()),
            Outcome::Fail(error) => record.error = Some(error.to_string()),
        }
        self.write(record, started)?;
        Ok(outcome)
    }

    /// Asks the model, within the run's budgets; the time and tokens go to `record`.
    fn ask(
        &self,
        messages: &[Message],
        record: &mut Turn,
        started: Instant,
    ) -> Result<Completion, RlmError> {
        self.ledger.reserve().map_err(RlmError::Budget)?;
        let result = self.config.llm.complete(Request::new(messages.to_vec()));
        self.ledger.record(self.depth, &result);
        record.llm_ms = millis(started.elapsed());
        let completion = result.map_err(RlmError::Llm)?;
        record.prompt_tokens = completion.prompt_tokens;
        record.completion_tokens = completion.completion_tokens;
        Ok(completion)
    }

    /// Runs the reply's code, then takes its final answer, ends the run, or gives the
    /// feedback for the next turn.
    fn respond(
        &self,
        turn: u32,
        env: &Environment,
        completion: Completion,
        state: &mut LoopState,
        record: &mut Turn,
    ) -> Outcome {
        let reply = completion.content;
        let parsed = parse::parse(&reply);
        record.code_blocks = parsed.blocks.clone();
        record.reply = Some(reply.clone());

        // Run the blocks in order, up to a failure or a final answer.
        let (mut parts, mut failure) = self.run_blocks(env, &parsed.blocks, record);
        if let Some(answer) = final_answer(env, &parsed, &mut parts, &mut failure) {
            return Outcome::Final(answer);
        }

        // Neither code nor an answer: one reminder, then the run ends.
        if parsed.blocks.is_empty() && failure.is_none() {
            if state.reminded {
                return Outcome::Fail(RlmError::NoCode { reply });
            }
            state.reminded = true;
            parts.push(prompt::REMINDER.to_string());
        } else {
            state.reminded = false;
        }
        let left = self.config.max_iterations.saturating_sub(turn);
        parts.extend(notes(&parsed, completion.finish_reason.as_deref(), left));
        state.reply = reply;
        self.decide(parts.join("\n\n"), failure, left, state)
    }

    /// Goes on with `feedback`, unless the run ends: after too many turns in a row with an
    /// error, or with no turn `left`.
    fn decide(
        &self,
        feedback: String,
        failure: Option<String>,
        left: u32,
        state: &mut LoopState,
    ) -> Outcome {
        let config = &self.config;
        match failure {
            Some(last_error) => {
                state.errors += 1;
                if config.max_consecutive_errors > 0
                    && state.errors >= config.max_consecutive_errors
                {
                    return Outcome::Fail(RlmError::ConsecutiveErrors {
                        count: state.errors,
                        last_error,
                    });
                }
            }
            None => state.errors = 0,
        }
        if left == 0 {
            return Outcome::Fail(RlmError::IterationLimit {
                max_iterations: config.max_iterations,
            });
        }
        Outcome::Continue(feedback)
    }

    /// Runs `blocks` in order, up to a failure or a final answer: the feedback for each
    /// block, and the failure's text if one failed.
    fn run_blocks(
        &self,
        env: &Environment,
        blocks: &[String],
        record: &mut Turn,
    ) -> (Vec<String>, Option<String>) {
        let mut failure: Option<String> = None;
        let mut parts = Vec::new();
        let mut room = self.config.output_bytes;
        for (i, code) in blocks.iter().enumerate() {
            let block = i + 1;
            if failure.is_some() || env.final_answer().is_some() {
                record.outputs.push(Block {
                    block,
                    status: BlockStatus::NotRun,
                    output: String::new(),
                    error: None,
                    elapsed_ms: 0,
                });
                if failure.is_some() {
                    parts.push(prompt::not_run(block));
                }
                continue;
            }
            let (ran, feedback) = run_block(env, block, code, room);
            room = room.saturating_sub(ran.output.len());
            record.outputs.push(ran);
            match feedback {
                Ok(text) => parts.push(text),
                Err(text) => {
                    parts.push(text.clone());
                    failure = Some(text);
                }
            }
        }
        (parts, failure)
    }

    /// Writes the agent's `start` record to the trace, if there is one: its first
    /// `messages`, and what the run was (the context is hashed only for a trace).
    fn record_start(
        &self,
        question: &str,
        context: Option<&Context>,
        messages: &[Message],
    ) -> io::Result<()> {
        let Some(recorder) = &self.config.recorder else {
            return Ok(());
        };
        recorder.record(Record::Start(Start {
            agent: self.id.clone(),
            depth: self.depth,
            question: question.to_string(),
            messages: messages.to_vec(),
            setup: self.setup(context),
            at_ms: None,
        }))
    }

    /// Writes the turn to the trace and the live view.
    fn write(&self, mut record: Turn, started: Instant) -> io::Result<()> {
        record.run_tokens = self.ledger.tokens_used();
        record.elapsed_ms = millis(started.elapsed());
        if let Some(live) = &self.config.live {
            // The live view is best effort: a closed stderr must not stop the run.
            let _ = live.write(&self.live_lines(&record));
        }
        match &self.config.recorder {
            Some(recorder) => recorder.record(Record::Turn(record)),
            None => Ok(()),
        }
    }
}

/// Per-agent state carried from turn to turn.
#[derive(Default)]
struct LoopState {
    /// The reminder has been sent since the last reply with code.
    reminded: bool,
    /// Turns in a row with an error.
    errors: u32,
    /// The last reply, to append to the conversation.
    reply: String,
}

/// Runs block number `block`: what it did, for the trace, and its feedback with at most
/// `room` bytes of output (`Err` when it failed).
fn run_block(
    env: &Environment,
    block: usize,
    code: &str,
    room: usize,
) -> (Block, Result<String, String>) {
    let started = Instant::now();
    let result = env.execute(code);
    let elapsed_ms = millis(started.elapsed());
    match result {
        Ok(run) => {
            let feedback = prompt::block_output(block, &run.output, room);
            let ran = Block {
                block,
                status: BlockStatus::Ok,
                output: run.output,
                error: None,
                elapsed_ms,
            };
            (ran, Ok(feedback))
        }
        Err(error) => {
            let failure = prompt::describe_error(block, code, &error, room);
            let ran = Block {
                block,
                status: match error {
                    ExecError::Lua { .. } => BlockStatus::Error,
                    ExecError::Limit { .. } => BlockStatus::Limit,
                },
                output: error.output().to_string(),
                error: Some(error.message_without_hint().to_string()),
                elapsed_ms,
            };
            (ran, Err(failure))
        }
    }
}

/// The final answer: one given in code, else one written in plain text. A plain one is
/// refused when a block failed (it may rest on code that did not run), and one that
/// cannot be used becomes the turn's failure.
fn final_answer(
    env: &Environment,
    parsed: &Reply,
    parts: &mut Vec<String>,
    failure: &mut Option<String>,
) -> Option<String> {
    if let Some(answer) = env.final_answer() {
        return Some(answer);
    }
    let plain = parsed.final_text.as_ref()?;
    if failure.is_some() {
        parts.push(prompt::FINAL_AFTER_FAILURE.to_string());
        return None;
    }
    match plain_final(env, plain) {
        Ok(answer) => Some(answer),
        Err(text) => {
            parts.push(text.clone());
            *failure = Some(text);
            None
        }
    }
}

/// The notes after the blocks' feedback: fenced blocks that were not run, a reply cut at
/// the token limit, the last turns.
fn notes(parsed: &Reply, finish_reason: Option<&str>, left: u32) -> Vec<String> {
    let mut notes: Vec<String> = parsed
        .ignored
        .iter()
        .map(|note| prompt::note(note))
        .collect();
    if finish_reason == Some("length") {
        notes.push(prompt::CUT_OFF.to_string());
    }
    if (1..=2).contains(&left) {
        notes.push(prompt::turns_left(left));
    }
    notes
}

/// The answer of a `FINAL(...)`/`FINAL_VAR(...)` written outside code, or the message
/// for the model if it cannot be used. `FINAL(name)` with the name of a global
/// variable (not a function) answers with the variable's value.
fn plain_final(env: &Environment, plain: &PlainFinal) -> Result<String, String> {
    match plain {
        PlainFinal::Value(value) => {
            if is_lua_name(value) {
                let code = format!(
                    "local v = rawget(_G, \"{value}\") if v ~= nil and type(v) ~= 'function' then FINAL(v) end"
                );
                if env.execute(&code).is_ok()
                    && let Some(answer) = env.final_answer()
                {
                    return Ok(answer);
                }
            }
            Ok(value.clone())
        }
        PlainFinal::Var(name) => {
            if !is_lua_name(name) {
                return Err(prompt::final_var_not_a_name(name));
            }
            match env.execute(&format!("FINAL_VAR(\"{name}\")")) {
                Ok(_) => env
                    .final_answer()
                    .ok_or_else(|| prompt::final_var_no_answer(name)),
                Err(error) => Err(prompt::final_var_failed(name, error.message())),
            }
        }
    }
}
