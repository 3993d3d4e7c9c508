//! The run loop: an agent's turns, from the first message to `FINAL` or a failure.
//!
//! Each turn asks the model, runs the code blocks of its reply in order, takes a final
//! answer if one was given, and otherwise sends back the feedback (see [`super::prompt`]
//! for every word of it). Each turn is written to the trace and the live view.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value as Json;

use crate::conventions::is_lua_name;
use crate::environment::{Environment, ExecError, User};
use crate::llm::{Completion, ImagePart, LlmError, Message, Request};

use super::agent::Agent;
use super::compaction::Conversation;
use super::context::Context;
use super::parse::{self, PlainFinal, Reply};
use super::prompt;
use super::report::{RlmError, WindowExceeded};
use super::trajectory::{Block, BlockStatus, Record, ReplyRecord, Start, Turn, millis};

/// From this iteration on, each turn logs a `tracing` warning.
pub const WARN_FROM_ITERATION: u32 = 5;

/// How one turn ends.
enum Outcome {
    /// No answer yet: the feedback for the next turn.
    Continue(String),
    /// The final answer.
    Final(FinalAnswer),
    /// The run ends without an answer.
    Fail(RlmError),
    /// The server refused the request as too long, stating its `window`: the turn is
    /// asked again after a compaction against it (the turn was not written); `error`
    /// ends the run if it cannot be.
    Refused { window: u64, error: RlmError },
}

/// An agent's final answer: its text, and with a schema its JSON value.
pub(super) struct FinalAnswer {
    pub(super) text: String,
    pub(super) value: Option<Json>,
    /// The reply that gave it, as the conversation holds it: what a session's next
    /// question follows.
    pub(super) reply: String,
}

impl FinalAnswer {
    /// The answer `env` was given, if any.
    fn of(env: &Environment) -> Option<FinalAnswer> {
        env.final_answer().map(|text| FinalAnswer {
            text,
            value: env.final_value(),
            reply: String::new(),
        })
    }
}

impl Agent {
    /// Runs the loop: the answer or the error, and the turns taken.
    pub(super) fn run(
        &self,
        question: &str,
        context: Option<&Context>,
        user: Option<Arc<dyn User>>,
    ) -> (Result<FinalAnswer, RlmError>, u32) {
        let env = match self.open(context, user) {
            Ok(env) => env,
            Err(error) => return (Err(error), 0),
        };
        match self.begin(&env, question, context) {
            Ok(mut conversation) => self.turns(&env, &mut conversation),
            Err(error) => (Err(error), 0),
        }
    }

    /// The agent's environment, with the run's cancellation and `context` loaded.
    pub(super) fn open(
        &self,
        context: Option<&Context>,
        user: Option<Arc<dyn User>>,
    ) -> Result<Environment, RlmError> {
        let env = self
            .environment(user)
            .map_err(|error| RlmError::Setup(error.to_string()))?;
        if let Some(cancel) = &self.config.cancel {
            env.set_interrupt(cancel.clone());
        }
        if let Some(context) = context {
            context.load_into(&env).map_err(RlmError::Context)?;
        }
        Ok(env)
    }

    /// The conversation that asks `question`: the system prompt and the question, its
    /// `start` written to the trace.
    pub(super) fn begin(
        &self,
        env: &Environment,
        question: &str,
        context: Option<&Context>,
    ) -> Result<Conversation, RlmError> {
        let system = self.system_prompt(env, context);
        self.begin_with(env, system, question, context)
    }

    /// The system prompt of this agent over `context`.
    pub(super) fn system_prompt(&self, env: &Environment, context: Option<&Context>) -> String {
        let config = &self.config;
        prompt::system_prompt(
            env.catalog(),
            context,
            &config.settings(self.depth, self.limits().time, self.schema.clone()),
        )
    }

    /// [`Agent::begin`] with the `system` prompt already made.
    pub(super) fn begin_with(
        &self,
        env: &Environment,
        system: String,
        question: &str,
        context: Option<&Context>,
    ) -> Result<Conversation, RlmError> {
        let config = &self.config;
        let messages = vec![
            Message::system(system),
            Message::user(prompt::question(
                question,
                context.is_some(),
                config.answer_protocol,
            )),
        ];
        self.record_start(question, context, &messages)
            .map_err(RlmError::Trace)?;
        let conversation = Conversation::new(messages, config.compact_at.is_some());
        conversation.share(env);
        Ok(conversation)
    }

    /// The turns of the loop on `conversation`, up to the iteration cap: the answer or
    /// the error, and the turns taken.
    pub(super) fn turns(
        &self,
        env: &Environment,
        conversation: &mut Conversation,
    ) -> (Result<FinalAnswer, RlmError>, u32) {
        let config = &self.config;
        let mut state = LoopState::default();
        for turn in 1..=config.max_iterations {
            if self.cancelled() {
                return (Err(RlmError::Interrupted), turn - 1);
            }
            self.ledger.start_turn(&self.id, turn);
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
            // At most twice: again after the server refused the request as too long,
            // stating its window, and the conversation was compacted against it.
            let mut refused = None;
            let outcome = loop {
                let window = self.window(&state);
                let messages = match self.prepare(turn, env, conversation, window, refused) {
                    Ok((messages, elided)) => {
                        state.elided = elided;
                        messages
                    }
                    Err(error) => return (Err(error), turn.saturating_sub(1)),
                };
                state.may_learn =
                    refused.is_none() && config.compact_at.is_some() && conversation.has_turns();
                match self.turn(turn, env, &messages, &mut state) {
                    Ok(Outcome::Refused { window, .. }) if refused.is_none() => {
                        state.learnt = Some(window);
                        refused = Some(window);
                    }
                    Ok(outcome) => break outcome,
                    Err(error) => return (Err(RlmError::Trace(error)), turn),
                }
            };
            match outcome {
                Outcome::Continue(feedback) => {
                    conversation.push_turn(turn, std::mem::take(&mut state.reply), feedback);
                    conversation.share(env);
                }
                Outcome::Final(answer) => return (Ok(answer), turn),
                // The cut turn was not written: the whole ones were those before it.
                Outcome::Fail(RlmError::Interrupted) => {
                    return (Err(RlmError::Interrupted), turn - 1);
                }
                Outcome::Fail(error) => return (Err(error), turn),
                // Refused again after the compaction: the refusal is the run's end.
                Outcome::Refused { error, .. } => return (Err(error), turn),
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
            elided: std::mem::take(&mut state.elided),
            ..Turn::default()
        };
        let window = self.window(state);
        let outcome = match self.ask(turn, messages, &mut record, started, window) {
            Ok(completion) => self.respond(turn, env, completion, state, &mut record),
            Err(error) => match self.stated_window(&error, state) {
                // Not written: the turn is asked again, and its line is that one's.
                Some(window) if !self.cancelled() => {
                    return Ok(Outcome::Refused { window, error });
                }
                _ => Outcome::Fail(error),
            },
        };
        // A turn a cancellation cut short is not written: its trace ends with the last
        // whole turn, and a resumed run asks this one again.
        if self.cancelled() {
            return Ok(Outcome::Fail(RlmError::Interrupted));
        }
        match &outcome {
            Outcome::Continue(feedback) => record.feedback = Some(feedback.clone()),
            Outcome::Final(answer) => record.final_answer = Some(answer.text.clone()),
            Outcome::Fail(error) | Outcome::Refused { error, .. } => {
                record.error = Some(error.to_string());
            }
        }
        self.write(record, started)?;
        Ok(outcome)
    }

    /// Asks the model, within the run's budgets; the time and tokens go to `record`. Each
    /// request is checked against the context window before it is sent, and a server's
    /// refusal of one as too long is reported the same way.
    fn ask(
        &self,
        turn: u32,
        messages: &[Message],
        record: &mut Turn,
        started: Instant,
        window: Option<u64>,
    ) -> Result<Completion, RlmError> {
        let request = self.request(messages);
        self.check_window(turn, &request, window)?;
        let result = self
            .ledger
            .complete(self.depth, &self.turn_model(), request)
            .map_err(RlmError::Budget)?;
        record.llm_ms = millis(started.elapsed());
        let completion = result.map_err(|error| match error.is_context_length() {
            // Built again only then: cloning every request to describe it would cost.
            true => self.too_long(turn, &self.request(messages), error, window),
            false => RlmError::Llm(error),
        })?;
        record.prompt_tokens = completion.prompt_tokens;
        record.completion_tokens = completion.completion_tokens;
        record.reasoning_tokens = completion.reasoning_tokens;
        record.finish_reason.clone_from(&completion.finish_reason);
        record.cached = completion.cached;
        record.waited_ms = completion.waited_ms();
        record.cost = completion.cost;
        self.record_reply(turn, &completion)
            .map_err(RlmError::Trace)?;
        Ok(completion)
    }

    /// Writes the turn's `reply` line as soon as the reply is in, before its code runs:
    /// a run killed mid-turn keeps it.
    fn record_reply(&self, turn: u32, completion: &Completion) -> io::Result<()> {
        match &self.config.recorder {
            Some(recorder) => {
                recorder.record(Record::Reply(ReplyRecord::of(&self.id, turn, completion)))
            }
            None => Ok(()),
        }
    }

    /// Whether the run was cancelled.
    fn cancelled(&self) -> bool {
        self.config
            .cancel
            .as_ref()
            .is_some_and(|cancel| cancel.is_interrupted())
    }

    /// The request of a turn whose conversation is `messages`, as the client sends it:
    /// its reply limit is what the window and the budget keep room for.
    pub(super) fn request(&self, messages: &[Message]) -> Request {
        let mut request = Request::new(messages.to_vec()).with_images(self.images.clone());
        request.max_tokens = request.max_tokens.or(self.reply_limit());
        request
    }

    /// The agent's context window: the one a server's refusal stated, else the
    /// configured one.
    fn window(&self, state: &LoopState) -> Option<u64> {
        state.learnt.or(self.config.context_window)
    }

    /// The window the server stated in refusing a request as too long, when the turn
    /// can be asked again after a compaction against it: compaction is on, there is a
    /// turn to summarise, the turn was not asked again already, and the stated window is
    /// no larger than the agent's.
    fn stated_window(&self, error: &RlmError, state: &LoopState) -> Option<u64> {
        let RlmError::ContextWindow(exceeded) = error else {
            return None;
        };
        let Some(LlmError::ContextLength {
            window: Some(stated),
            ..
        }) = &exceeded.server
        else {
            return None;
        };
        let smaller = self.window(state).is_none_or(|window| *stated <= window);
        (state.may_learn && smaller).then_some(*stated)
    }

    /// Refuses the `request` of `turn` when its tokens and the reply's reserve do not fit
    /// the agent's context `window`.
    fn check_window(
        &self,
        turn: u32,
        request: &Request,
        window: Option<u64>,
    ) -> Result<(), RlmError> {
        let Some(window) = window else {
            return Ok(());
        };
        let prompt_mode = self.config.prompt_mode;
        WindowExceeded::check(&self.id, request, window, self.reply_limit(), prompt_mode)
            .map_err(|exceeded| RlmError::ContextWindow(self.at_turn(exceeded, turn)))
    }

    /// The reply limit the model's client sends with requests that set none.
    pub(super) fn reply_limit(&self) -> Option<u32> {
        self.turn_model()
            .model_info()
            .and_then(|info| info.max_reply_tokens)
    }

    /// The error for the `request` of `turn` the `server` refused as too long.
    fn too_long(
        &self,
        turn: u32,
        request: &Request,
        server: LlmError,
        window: Option<u64>,
    ) -> RlmError {
        let exceeded = WindowExceeded::of(
            &self.id,
            request,
            window,
            self.reply_limit(),
            self.config.prompt_mode,
            Some(server),
        );
        RlmError::ContextWindow(self.at_turn(exceeded, turn))
    }

    /// `exceeded`, said of `turn`, with whether compaction was on.
    fn at_turn(&self, mut exceeded: Box<WindowExceeded>, turn: u32) -> Box<WindowExceeded> {
        exceeded.turn = turn;
        exceeded.compact_at = self.config.compact_at;
        exceeded
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
        let cut = completion.finish_reason.as_deref() == Some("length");
        let mut parsed = parse::parse(&completion.content, cut);
        let sent_back = std::mem::take(&mut parsed.sent_back);
        record.code_blocks = parsed.blocks.clone();
        record.sent_back = (sent_back != completion.content).then(|| sent_back.clone());
        record.reasoning = completion.reasoning;
        let reply = completion.content;
        record.reply = Some(reply.clone());

        // Run the blocks in order, up to a failure or a final answer.
        let (mut parts, mut failure) = self.run_blocks(env, &parsed.blocks, record);
        if let Some(mut answer) = final_answer(env, &parsed, &mut parts, &mut failure) {
            answer.reply = sent_back;
            return Outcome::Final(answer);
        }
        // An answer the schema refused is the turn's failure, but not an error of the code.
        let refused = env.take_rejected_answer();

        // Neither code nor an answer: one reminder, then the run ends.
        if parsed.blocks.is_empty() && failure.is_none() {
            if state.reminded {
                return Outcome::Fail(RlmError::NoCode { reply });
            }
            state.reminded = true;
            parts.push(match parsed.thinking_only {
                true => prompt::thinking_only(cut, self.config.answer_protocol),
                false => prompt::reminder(self.config.answer_protocol),
            });
        } else {
            state.reminded = false;
        }
        let left = self.config.max_iterations.saturating_sub(turn);
        let protocol = self.config.answer_protocol;
        parts.extend(notes(&parsed, cut, left, protocol));
        state.reply = sent_back;
        self.decide(parts.join("\n\n"), failure, refused, left, state)
    }

    /// Goes on with `feedback`, unless the run ends: after too many turns in a row with an
    /// error, or with no turn `left`. A turn whose failure is a `refused` answer does not
    /// count as an error of the code; the run that ends at the cap after one reports it.
    fn decide(
        &self,
        feedback: String,
        failure: Option<String>,
        refused: Option<String>,
        left: u32,
        state: &mut LoopState,
    ) -> Outcome {
        let config = &self.config;
        match (failure, refused) {
            (Some(_), Some(refusal)) => {
                state.errors = 0;
                state.last_refusal = Some(refusal);
            }
            (Some(last_error), None) => {
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
            (None, _) => state.errors = 0,
        }
        if left == 0 {
            let max_iterations = config.max_iterations;
            return Outcome::Fail(match state.last_refusal.take() {
                Some(last_refusal) => RlmError::AnswerRejected {
                    max_iterations,
                    last_refusal,
                },
                None => RlmError::IterationLimit { max_iterations },
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
                    sub_calls: Vec::new(),
                    journal: Vec::new(),
                });
                if failure.is_some() {
                    parts.push(prompt::not_run(block));
                }
                continue;
            }
            self.calls.at(record.turn, block);
            if let Some(tapes) = &self.config.replay {
                env.give_back_journal(tapes.next_journal(&self.id));
            }
            let (mut ran, feedback) = run_block(env, block, code, room);
            ran.sub_calls = self.calls.take();
            ran.journal = env.last_journal();
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
        let Some(recorder) = self.config.recorder.as_ref().filter(|r| r.writes_trace()) else {
            return Ok(());
        };
        recorder.record(Record::Start(Start {
            agent: self.id.clone(),
            depth: self.depth,
            question: question.to_string(),
            messages: messages.to_vec(),
            images: self.images.iter().map(ImagePart::record).collect(),
            setup: self.setup(context),
            at_ms: None,
        }))
    }

    /// Writes the turn to the trace and the live view.
    fn write(&self, mut record: Turn, started: Instant) -> io::Result<()> {
        record.run_tokens = self.ledger.tokens_used();
        record.run_cost = self.ledger.run_cost();
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
    /// Why the last answer the schema refused was refused.
    last_refusal: Option<String>,
    /// The earlier turns whose output the next request leaves out.
    elided: Vec<u32>,
    /// The window a server's refusal stated, the agent's from then on.
    learnt: Option<u64>,
    /// Whether a refusal of this turn's request may be answered by a compaction and the
    /// turn asked again.
    may_learn: bool,
}

/// The `o200k_base` tokens of `request`'s messages, with the chat format's overhead.
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
                sub_calls: Vec::new(),
                journal: Vec::new(),
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
                sub_calls: Vec::new(),
                journal: Vec::new(),
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
) -> Option<FinalAnswer> {
    if let Some(answer) = FinalAnswer::of(env) {
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

/// The notes after the blocks' feedback: fenced blocks that were not run, a reply `cut`
/// at the token limit (inside a block or not), the last turns. A reply cut while
/// thinking has its own reminder.
fn notes(
    parsed: &Reply,
    cut: bool,
    left: u32,
    protocol: crate::conventions::AnswerProtocol,
) -> Vec<String> {
    let mut notes: Vec<String> = parsed
        .ignored
        .iter()
        .map(|note| prompt::note(note))
        .collect();
    if parsed.cut_block {
        notes.push(prompt::CUT_IN_BLOCK.to_string());
    } else if cut && !parsed.thinking_only {
        notes.push(prompt::CUT_OFF.to_string());
    }
    if (1..=2).contains(&left) {
        notes.push(prompt::turns_left(left, protocol));
    }
    notes
}

/// The answer of a `FINAL(...)`/`FINAL_VAR(...)` written outside code, or the message
/// for the model if it cannot be used. `FINAL(name)` with the name of a global
/// variable (not a function) answers with the variable's value. With an answer schema,
/// the text is the answer's JSON (or a string, if it is not JSON), checked as `FINAL`
/// checks a value.
fn plain_final(env: &Environment, plain: &PlainFinal) -> Result<FinalAnswer, String> {
    match plain {
        PlainFinal::Value(value) => {
            if is_lua_name(value) {
                let code = format!(
                    "local v = rawget(_G, \"{value}\") if v ~= nil and type(v) ~= 'function' then FINAL(v) end"
                );
                match env.execute(&code) {
                    Ok(_) => {
                        if let Some(answer) = FinalAnswer::of(env) {
                            return Ok(answer);
                        }
                    }
                    Err(error) if env.answer_schema().is_some() => {
                        return Err(prompt::plain_final_refused(error.message()));
                    }
                    Err(_) => {}
                }
            }
            if env.answer_schema().is_none() {
                return Ok(FinalAnswer {
                    text: value.clone(),
                    value: None,
                    reply: String::new(),
                });
            }
            let json = serde_json::from_str(value).unwrap_or_else(|_| Json::String(value.clone()));
            env.final_from_json(&json)
                .map_err(|error| prompt::plain_final_refused(error.message()))?;
            FinalAnswer::of(env).ok_or_else(|| prompt::plain_final_refused("no answer was set"))
        }
        PlainFinal::Var(name) => {
            if !is_lua_name(name) {
                return Err(prompt::final_var_not_a_name(name));
            }
            match env.execute(&format!("FINAL_VAR(\"{name}\")")) {
                Ok(_) => FinalAnswer::of(env).ok_or_else(|| prompt::final_var_no_answer(name)),
                Err(error) => Err(prompt::final_var_failed(name, error.message())),
            }
        }
    }
}
