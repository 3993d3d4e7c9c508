//! The record as a model: [`Tapes`] holds, per agent, the replies its turns got and the
//! answers its code's calls got, and gives each agent of a replayed run a model that
//! plays them back in order. A request the record does not have (more calls than were
//! made, a call with another prompt) is answered with an error, which the replay's own
//! record then shows where it happened. Each block that ran is handed its recorded
//! journal (the clock, the random seed, the user's answers, host functions' results).
//!
//! A resumed run's tapes ([`Tapes::resumed`]) fall through to the live model instead: a
//! turn past the end of an agent's tape, and a call whose prompt is not on it, are asked
//! live; a call on it is matched by its prompt, not its place (the answers of a batch may
//! have been written in any order).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::llm::{Completion, ImageRecord, Llm, LlmError, Message, ModelInfo, Request};

use super::super::trajectory::{BlockStatus, Record, SubCall, Turn};
use crate::environment::JournalEntry;

/// What a resumed run plays back of one agent before it goes on live.
pub(crate) struct PlayedBack {
    /// Its turns' replies (and compactions' summaries) in the order it asked for them.
    pub replies: Vec<Completion>,
    /// The answered calls of those turns' code.
    pub calls: Vec<SubCall>,
    /// The journals of those turns' blocks that ran, in order.
    pub journals: Vec<Vec<JournalEntry>>,
    /// The server's refusals of a turn's request as too long, each with the window it
    /// stated, played before the reply at its index in `replies` (the compaction's
    /// summary it led to).
    pub refusals: Vec<(usize, u64)>,
}

/// Every agent's tapes, from a run's records.
pub(crate) struct Tapes {
    /// Behind a lock: a session's playback loads each question's tapes in turn.
    agents: Mutex<HashMap<String, AgentTape>>,
    model: Option<ModelInfo>,
    /// In a resumed run, the model asked for what the tapes do not hold.
    live: Option<Arc<dyn Llm>>,
}

/// One agent's tapes: its turns' replies, its code's calls, and the journal of each
/// block that ran, in order.
#[derive(Default)]
struct AgentTape {
    turns: Arc<Tape>,
    calls: Arc<Tape>,
    journals: Mutex<VecDeque<Vec<JournalEntry>>>,
}

/// What was answered, in order.
#[derive(Default)]
struct Tape {
    entries: Mutex<VecDeque<Entry>>,
}

/// One recorded answer, and for a call the messages it was asked with and the images
/// sent with them.
struct Entry {
    asked: Option<Vec<Message>>,
    images: Vec<ImageRecord>,
    answer: Result<Completion, String>,
    /// The server refused the request as too long, stating this window.
    refused: Option<u64>,
}

impl Entry {
    /// A server's refusal of a turn's request as too long, stating `window`.
    fn refusal(window: u64) -> Entry {
        Entry {
            asked: None,
            images: Vec::new(),
            answer: Err(String::new()),
            refused: Some(window),
        }
    }

    /// The answer as the model gave it.
    fn into_answer(self) -> Result<Completion, LlmError> {
        match self.refused {
            Some(window) => Err(LlmError::ContextLength {
                prompt_tokens: None,
                window: Some(window),
                body: format!("the recorded refusal: the window is {window} tokens"),
                attempts: 1,
            }),
            None => self.answer.map_err(LlmError::Callback),
        }
    }
}

impl Tapes {
    /// The tapes of the run `records` describe.
    pub fn of(records: &[Record]) -> Tapes {
        let mut agents: HashMap<String, AgentTape> = HashMap::new();
        let mut model = None;
        for record in records {
            match record {
                Record::Start(start) => {
                    if start.agent == "0" {
                        let setup = &start.setup;
                        model = setup.model.clone().map(|name| ModelInfo {
                            model: name,
                            base_url: setup.base_url.clone().unwrap_or_default(),
                            max_reply_tokens: setup.max_reply_tokens,
                            reasoning_effort: setup.reasoning_effort,
                        });
                    }
                    agents.entry(start.agent.clone()).or_default();
                }
                Record::Turn(turn) => {
                    let tape = agents.entry(turn.agent.clone()).or_default();
                    tape.turns.push(reply_entry(turn));
                    turn.outputs
                        .iter()
                        .flat_map(|block| &block.sub_calls)
                        .for_each(|call| tape.calls.push(call_entry(call)));
                    tape.push_journals(turn);
                }
                // The summary was asked for between two turns: its place on the tape
                // is where the run asked.
                // A refusal that led to it came first.
                Record::Compaction(compaction) => {
                    let tape = agents.entry(compaction.agent.clone()).or_default();
                    if let Some(window) = compaction.refused {
                        tape.turns.push(Entry::refusal(window));
                    }
                    tape.turns.push(Entry {
                        asked: None,
                        images: Vec::new(),
                        answer: compaction.completion(),
                        refused: None,
                    });
                }
                // A replay plays whole turns; the lines written while one went on repeat
                // what its `turn` line holds.
                _ => {}
            }
        }
        Tapes {
            agents: Mutex::new(agents),
            model,
            live: None,
        }
    }

    /// Tapes of what a resumed run plays back before it goes on with `live`: per agent,
    /// its turns' replies in order, its code's answered calls and its blocks' journals.
    pub fn resumed(agents: HashMap<String, PlayedBack>, live: Arc<dyn Llm>) -> Tapes {
        let tapes = Tapes::live(live);
        tapes.load(agents);
        tapes
    }

    /// Empty tapes that fall through to `live`, to [`load`](Tapes::load) later: a
    /// session's, which plays each earlier question back from its own record. The root
    /// agent is on them from the start, as its environment's model holds its tape.
    pub fn live(live: Arc<dyn Llm>) -> Tapes {
        let mut agents = HashMap::new();
        agents.insert("0".to_string(), AgentTape::default());
        Tapes {
            agents: Mutex::new(agents),
            model: live.model_info(),
            live: Some(live),
        }
    }

    /// Whether a request off the tapes goes to the live model (a resumed run, a
    /// session), rather than being refused (a replay).
    pub fn falls_through(&self) -> bool {
        self.live.is_some()
    }

    /// Replaces what the tapes hold by `agents`' played-back record: every tape is
    /// emptied in place (the models already handed out keep reading their agent's), then
    /// filled.
    pub fn load(&self, agents: HashMap<String, PlayedBack>) {
        let mut tapes = lock(&self.agents);
        for tape in tapes.values() {
            tape.turns.lock().clear();
            tape.calls.lock().clear();
            lock(&tape.journals).clear();
        }
        for (agent, played) in agents {
            let tape = tapes.entry(agent).or_default();
            let mut refusals = played.refusals.iter().peekable();
            for (at, reply) in played.replies.into_iter().enumerate() {
                while let Some((_, window)) = refusals.next_if(|(before, _)| *before == at) {
                    tape.turns.push(Entry::refusal(*window));
                }
                tape.turns.push(Entry {
                    asked: None,
                    images: Vec::new(),
                    answer: Ok(reply),
                    refused: None,
                });
            }
            played
                .calls
                .iter()
                .for_each(|call| tape.calls.push(call_entry(call)));
            lock(&tape.journals).extend(played.journals);
        }
    }

    /// The journal the next block `agent` runs is given back: the recorded block's, in
    /// order (empty past the record's end, or for an agent it lacks).
    pub fn next_journal(&self, agent: &str) -> Vec<JournalEntry> {
        lock(&self.agents)
            .get(agent)
            .and_then(|tape| lock(&tape.journals).pop_front())
            .unwrap_or_default()
    }

    /// The model that plays back `agent`'s turns (none for an agent the record lacks).
    pub fn turns(&self, agent: &str) -> Arc<dyn Llm> {
        self.player(agent, |tape| &tape.turns, false)
    }

    /// The model that plays back the calls of `agent`'s code, checking each prompt.
    pub fn sub_calls(&self, agent: &str) -> Arc<dyn Llm> {
        self.player(agent, |tape| &tape.calls, true)
    }

    fn player(
        &self,
        agent: &str,
        which: fn(&AgentTape) -> &Arc<Tape>,
        check_prompts: bool,
    ) -> Arc<dyn Llm> {
        let tape = lock(&self.agents)
            .get(agent)
            .map_or_else(Arc::default, |tapes| Arc::clone(which(tapes)));
        Arc::new(Player {
            tape,
            check_prompts,
            live: self.live.clone(),
        })
    }
}

/// The model of the run as a whole is never asked in a replay (each agent gets its own
/// player); it names the recorded model, so the replay's `start` lines say the same.
impl Llm for Tapes {
    fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
        Err(off_the_record("this request"))
    }

    fn model_info(&self) -> Option<ModelInfo> {
        self.model.clone()
    }
}

impl AgentTape {
    /// The journals of `turn`'s blocks that ran (one that did not run asked nothing).
    fn push_journals(&self, turn: &Turn) {
        let ran = turn
            .outputs
            .iter()
            .filter(|b| b.status != BlockStatus::NotRun);
        lock(&self.journals).extend(ran.map(|block| block.journal.clone()));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Tape {
    fn push(&self, entry: Entry) {
        self.lock().push_back(entry);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn reply_entry(turn: &Turn) -> Entry {
    let answer = turn.completion().ok_or_else(|| {
        turn.error
            .clone()
            .unwrap_or_else(|| "the recorded call failed".to_string())
    });
    Entry {
        asked: None,
        images: Vec::new(),
        answer,
        refused: None,
    }
}

fn call_entry(call: &SubCall) -> Entry {
    let answer = match &call.answer {
        Some(answer) => {
            let mut completion = Completion::new(answer.clone())
                .with_tokens(call.prompt_tokens, call.completion_tokens);
            completion.reasoning.clone_from(&call.reasoning);
            completion.cost = call.cost;
            // Paid for by an earlier run: played back, it spends no budget again.
            completion.cached = call.cached;
            Ok(completion)
        }
        None => Err(call.error.clone().unwrap_or_default()),
    };
    Entry {
        asked: Some(call.messages.clone()),
        images: call.images.clone(),
        answer,
        refused: None,
    }
}

/// One agent's tape as a model.
struct Player {
    tape: Arc<Tape>,
    check_prompts: bool,
    /// In a resumed run, the model asked past the tape.
    live: Option<Arc<dyn Llm>>,
}

impl Llm for Player {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        match &self.live {
            Some(live) => match self.take_resumed(&request) {
                Some(entry) => entry.into_answer(),
                None => live.complete(request),
            },
            None => self.replayed(request),
        }
    }

    /// In order, one after the other: the tape's order is the batch's. A resumed run
    /// sends what the tape lacks together, live.
    fn complete_batch(&self, requests: Vec<Request>) -> Vec<Result<Completion, LlmError>> {
        self.complete_batch_at(requests, usize::MAX)
    }

    /// A round of `parallel`'s calls: in order too, whatever the concurrency asked for.
    fn complete_batch_at(
        &self,
        requests: Vec<Request>,
        max_concurrency: usize,
    ) -> Vec<Result<Completion, LlmError>> {
        let Some(live) = &self.live else {
            return requests.into_iter().map(|r| self.replayed(r)).collect();
        };
        let mut answers: Vec<Option<Result<Completion, LlmError>>> = Vec::new();
        let mut missing = Vec::new();
        for request in requests {
            let entry = self.take_resumed(&request);
            answers.push(entry.map(|entry| entry.into_answer()));
            if answers.last().is_some_and(Option::is_none) {
                missing.push(request);
            }
        }
        let mut live_answers = match max_concurrency {
            usize::MAX => live.complete_batch(missing),
            n => live.complete_batch_at(missing, n),
        }
        .into_iter();
        answers
            .into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| {
                    live_answers.next().unwrap_or_else(|| {
                        Err(LlmError::Config(
                            "the model returned fewer answers than prompts".to_string(),
                        ))
                    })
                })
            })
            .collect()
    }

    fn model_info(&self) -> Option<ModelInfo> {
        self.live.as_ref().and_then(|live| live.model_info())
    }

    fn max_concurrency(&self) -> usize {
        self.live
            .as_ref()
            .map_or(crate::llm::DEFAULT_MAX_CONCURRENCY, |live| {
                live.max_concurrency()
            })
    }
}

impl Player {
    /// A resumed run's entry for `request`: the next turn's reply, or the call on the
    /// tape with the same prompt and images, wherever it is.
    fn take_resumed(&self, request: &Request) -> Option<Entry> {
        let mut entries = self.tape.lock();
        if !self.check_prompts {
            return entries.pop_front();
        }
        let images = request.image_records();
        let at = entries.iter().position(|entry| {
            entry.asked.as_ref() == Some(&request.messages) && entry.images == images
        })?;
        entries.remove(at)
    }

    /// A replay's answer to `request`: the tape's next, checked.
    fn replayed(&self, request: Request) -> Result<Completion, LlmError> {
        let Some(entry) = self.tape.lock().pop_front() else {
            return Err(off_the_record("a call past the end of the record"));
        };
        if self.check_prompts && entry.asked.as_ref() != Some(&request.messages) {
            return Err(off_the_record(
                "a call whose prompt differs from the record's",
            ));
        }
        if self.check_prompts && entry.images != request.image_records() {
            return Err(off_the_record(
                "a call whose images differ from the record's",
            ));
        }
        entry.into_answer()
    }
}

fn off_the_record(what: &str) -> LlmError {
    LlmError::Callback(format!("replay: {what} is not on the record"))
}
