//! What a trace already holds, read back for a resumed run: the tapes it plays back
//! ([`played_back`]) and the lines it must not write again ([`OnFile`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use crate::environment::JournalEntry;
use crate::llm::Completion;

use super::super::replay::PlayedBack;
use super::super::trajectory::{BlockStatus, Record, SubCall, Turn};

/// The records on file, by agent and turn: what each turn's reply was, which calls its
/// code had answered, and whether the turn ended on file.
#[derive(Default)]
struct AgentOnFile {
    /// By turn, then 0 for the turn's reply and 1 for a compaction's summary asked after
    /// it, which a resumed run also asks its turns' model for.
    replies: BTreeMap<(u32, u8), Completion>,
    /// The calls a turn's `turn` line lists (the whole turn's, in order).
    turn_calls: BTreeMap<u32, Vec<SubCall>>,
    /// The calls its `call` lines give, for a turn cut short.
    progress_calls: BTreeMap<u32, Vec<SubCall>>,
    /// The journals of a whole turn's blocks that ran, in order (a turn cut short has
    /// none: its blocks run again live).
    turn_journals: BTreeMap<u32, Vec<Vec<JournalEntry>>>,
    /// By turn, the window a server's refusal of the next turn's request stated, which
    /// the compaction after the turn was made for.
    refusals: BTreeMap<u32, u64>,
}

impl AgentOnFile {
    /// The replies from turn 1 on, up to the first turn with none; and the answered calls
    /// and blocks' journals of those turns.
    fn tapes(self) -> PlayedBack {
        let mut replies = Vec::new();
        let mut calls = Vec::new();
        let mut journals = Vec::new();
        let mut refused = Vec::new();
        let AgentOnFile {
            replies: by_turn,
            mut turn_calls,
            mut progress_calls,
            mut turn_journals,
            refusals,
        } = self;
        let mut played = 0;
        for ((turn, kind), reply) in by_turn {
            let in_place = match kind {
                0 => turn == played + 1,
                _ => turn == played,
            };
            if !in_place {
                break;
            }
            if kind != 0
                && let Some(window) = refusals.get(&turn)
            {
                refused.push((replies.len(), *window));
            }
            replies.push(reply);
            if kind != 0 {
                continue;
            }
            played = turn;
            let answered = turn_calls
                .remove(&turn)
                .or_else(|| progress_calls.remove(&turn))
                .unwrap_or_default();
            calls.extend(answered);
            journals.extend(turn_journals.remove(&turn).unwrap_or_default());
        }
        PlayedBack {
            replies,
            calls,
            journals,
            refusals: refused,
        }
    }
}

/// The calls that got an answer: a failed one is asked again.
fn answered(calls: impl IntoIterator<Item = SubCall>) -> Vec<SubCall> {
    calls.into_iter().filter(|c| c.answer.is_some()).collect()
}

/// A turn's reply as a resumed run plays it back: a reply the cache gave is played back
/// as cached, so that it spends no budget again.
fn reply_of(turn: &Turn) -> Option<Completion> {
    let mut completion = turn.completion()?;
    completion.cached = turn.cached;
    Some(completion)
}

/// Per agent, the replies a resumed run plays back and the answered calls of their turns.
/// A turn with no reply on file (its call failed, a budget refused it) is asked again.
pub(super) fn played_back(records: &[Record]) -> HashMap<String, PlayedBack> {
    let mut agents: HashMap<String, AgentOnFile> = HashMap::new();
    for record in records {
        match record {
            Record::Start(start) => {
                agents.entry(start.agent.clone()).or_default();
            }
            Record::Turn(turn) => {
                let Some(reply) = reply_of(turn) else {
                    continue;
                };
                let agent = agents.entry(turn.agent.clone()).or_default();
                agent.replies.insert((turn.turn, 0), reply);
                let calls = turn.outputs.iter().flat_map(|b| b.sub_calls.clone());
                agent.turn_calls.insert(turn.turn, answered(calls));
                let ran = turn
                    .outputs
                    .iter()
                    .filter(|b| b.status != BlockStatus::NotRun);
                let journals = ran.map(|block| block.journal.clone()).collect();
                agent.turn_journals.insert(turn.turn, journals);
            }
            Record::Reply(reply) => {
                let agent = agents.entry(reply.agent.clone()).or_default();
                agent
                    .replies
                    .entry((reply.turn, 0))
                    .or_insert_with(|| reply.completion());
            }
            Record::Call(call) => {
                let agent = agents.entry(call.agent.clone()).or_default();
                let calls = agent.progress_calls.entry(call.turn).or_default();
                calls.extend(answered([call.call.clone()]));
            }
            // A summary that failed is asked again, as a failed call is.
            Record::Compaction(compaction) => {
                if let Ok(summary) = compaction.completion() {
                    let agent = agents.entry(compaction.agent.clone()).or_default();
                    agent.replies.insert((compaction.turn, 1), summary);
                    if let Some(window) = compaction.refused {
                        agent.refusals.insert(compaction.turn, window);
                    }
                }
            }
            _ => {}
        }
    }
    agents
        .into_iter()
        .map(|(agent, on_file)| (agent, on_file.tapes()))
        .collect()
}

/// The lines a trace holds, which its resumed run does not write again: while an agent
/// plays back what is on file, the lines it writes are already there. A line is held when
/// it is the `start` of an agent on file, the `reply` or the `turn` of a turn on file (a
/// turn that ended its agent with an error is written again: the resumed run goes on from
/// it), a `call` answered on file (counted: the same prompt twice is two calls), or any
/// other line of a turn that ended on file.
pub(crate) struct OnFile {
    starts: HashSet<String>,
    replies: HashSet<(String, u32)>,
    turns: HashSet<(String, u32)>,
    calls: Mutex<HashMap<(String, u32, String), usize>>,
}

impl OnFile {
    /// What `records` hold.
    pub(super) fn of(records: &[Record]) -> OnFile {
        let mut on_file = OnFile {
            starts: HashSet::new(),
            replies: HashSet::new(),
            turns: HashSet::new(),
            calls: Mutex::new(HashMap::new()),
        };
        let mut turn_calls: HashMap<(String, u32), Vec<SubCall>> = HashMap::new();
        let mut progress_calls: HashMap<(String, u32), Vec<SubCall>> = HashMap::new();
        for record in records {
            match record {
                Record::Start(start) => {
                    on_file.starts.insert(start.agent.clone());
                }
                Record::Turn(turn) if turn.reply.is_some() => {
                    let key = (turn.agent.clone(), turn.turn);
                    on_file.replies.insert(key.clone());
                    if turn.error.is_none() {
                        on_file.turns.insert(key.clone());
                    }
                    let calls = turn.outputs.iter().flat_map(|b| b.sub_calls.clone());
                    turn_calls.insert(key, answered(calls));
                }
                Record::Reply(reply) => {
                    on_file.replies.insert((reply.agent.clone(), reply.turn));
                }
                Record::Call(call) => {
                    let key = (call.agent.clone(), call.turn);
                    let calls = progress_calls.entry(key).or_default();
                    calls.extend(answered([call.call.clone()]));
                }
                _ => {}
            }
        }
        progress_calls.extend(turn_calls);
        let mut counts = HashMap::new();
        for ((agent, turn), calls) in progress_calls {
            for call in calls {
                *counts
                    .entry((agent.clone(), turn, call_key(&call)))
                    .or_default() += 1;
            }
        }
        on_file.calls = Mutex::new(counts);
        on_file
    }

    /// Whether `record` is on file already (a `call` on file is so used up).
    pub(crate) fn holds(&self, record: &Record) -> bool {
        match record {
            Record::Start(start) => self.starts.contains(&start.agent),
            Record::Reply(reply) => self.replies.contains(&(reply.agent.clone(), reply.turn)),
            Record::Turn(turn) => self.turns.contains(&(turn.agent.clone(), turn.turn)),
            Record::Call(call) => self.take_call(&call.agent, call.turn, &call.call),
            Record::Resume(_) => false,
            other => self.of_a_turn_on_file(other),
        }
    }

    fn take_call(&self, agent: &str, turn: u32, call: &SubCall) -> bool {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let key = (agent.to_string(), turn, call_key(call));
        match calls.get_mut(&key) {
            Some(left) if *left > 0 => {
                *left -= 1;
                true
            }
            _ => false,
        }
    }

    /// A line of a kind this module does not name (a later feature's): held when its
    /// `agent` and `turn` fields name a turn that ended on file.
    fn of_a_turn_on_file(&self, record: &Record) -> bool {
        let Ok(value) = serde_json::to_value(record) else {
            return false;
        };
        let agent = value.get("agent").and_then(|a| a.as_str());
        let turn = value.get("turn").and_then(|t| t.as_u64());
        match (agent, turn.and_then(|t| u32::try_from(t).ok())) {
            (Some(agent), Some(turn)) => self.turns.contains(&(agent.to_string(), turn)),
            _ => false,
        }
    }
}

/// What tells two calls apart: their messages and images, as JSON.
fn call_key(call: &SubCall) -> String {
    serde_json::to_string(&(&call.messages, &call.images)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;
    use crate::rlm::trajectory::{CallRecord, ReplyRecord};

    fn call(prompt: &str, answer: Option<&str>) -> SubCall {
        SubCall {
            messages: vec![Message::user(prompt)],
            answer: answer.map(str::to_string),
            error: answer.is_none().then(|| "down".to_string()),
            ..SubCall::default()
        }
    }

    fn call_line(turn: u32, prompt: &str, answer: Option<&str>) -> Record {
        Record::Call(CallRecord {
            agent: "0".into(),
            turn,
            block: 1,
            call: call(prompt, answer),
            at_ms: None,
        })
    }

    fn reply_line(turn: u32, reply: &str) -> Record {
        Record::Reply(ReplyRecord {
            agent: "0".into(),
            turn,
            reply: reply.into(),
            ..ReplyRecord::default()
        })
    }

    #[test]
    fn a_turn_cut_short_plays_back_its_reply_and_the_calls_answered_not_the_failed_ones() {
        let records = vec![
            reply_line(1, "one"),
            Record::Turn(Turn {
                agent: "0".into(),
                turn: 1,
                reply: Some("one".into()),
                ..Turn::default()
            }),
            reply_line(2, "two"),
            call_line(2, "b", Some("B")),
            call_line(2, "c", None),
        ];
        let tapes = played_back(&records);
        let PlayedBack { replies, calls, .. } = &tapes["0"];
        let texts: Vec<&str> = replies.iter().map(|r| r.content.as_str()).collect();
        assert_eq!(texts, ["one", "two"]);
        assert_eq!(calls.len(), 1, "the failed call is asked again");
        assert_eq!(calls[0].answer.as_deref(), Some("B"));

        let on_file = OnFile::of(&records);
        assert!(on_file.holds(&reply_line(2, "two")));
        assert!(!on_file.holds(&reply_line(3, "three")));
        assert!(on_file.holds(&call_line(2, "b", Some("B"))));
        assert!(
            !on_file.holds(&call_line(2, "b", Some("B"))),
            "a call on file is held once"
        );
        assert!(!on_file.holds(&call_line(2, "c", Some("C"))));
        let turn = |n| {
            Record::Turn(Turn {
                agent: "0".into(),
                turn: n,
                ..Turn::default()
            })
        };
        assert!(on_file.holds(&turn(1)));
        assert!(!on_file.holds(&turn(2)), "the turn cut short ends now");
    }

    #[test]
    fn a_turn_that_failed_with_no_reply_is_asked_again_and_one_that_ended_in_error_written_again() {
        let failed = Turn {
            agent: "0".into(),
            turn: 1,
            error: Some("the server went away".into()),
            ..Turn::default()
        };
        let capped = Turn {
            agent: "0.1".into(),
            turn: 1,
            reply: Some("print(1)".into()),
            error: Some("iteration limit".into()),
            ..Turn::default()
        };
        let records = vec![Record::Turn(failed.clone()), Record::Turn(capped.clone())];
        let tapes = played_back(&records);
        assert!(
            tapes
                .get("0")
                .is_none_or(|played| played.replies.is_empty())
        );
        assert_eq!(tapes["0.1"].replies.len(), 1);
        let on_file = OnFile::of(&records);
        assert!(!on_file.holds(&Record::Turn(failed)));
        assert!(!on_file.holds(&Record::Turn(capped)));
    }
}
