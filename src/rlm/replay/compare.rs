//! The recorded run against the replayed one: the first place where they differ, in the
//! order of the recorded trace's lines.

use std::collections::{BTreeMap, HashMap};

use super::super::trajectory::{Block, BlockStatus, Record, Start, SubCall, Turn};
use super::Divergence;

/// One agent of the replayed run: its start and its turns by number.
#[derive(Default)]
struct Replayed<'a> {
    start: Option<&'a Start>,
    turns: BTreeMap<u32, &'a Turn>,
}

/// The first difference between `recorded` and `replayed`, if any.
pub(super) fn first_divergence(recorded: &[Record], replayed: &[Record]) -> Option<Divergence> {
    let by_agent = index(replayed);
    recorded
        .iter()
        .find_map(|record| match record {
            Record::Start(start) => compare_start(start, by_agent.get(start.agent.as_str())),
            Record::Turn(turn) => compare_turn(turn, by_agent.get(turn.agent.as_str())),
            // A compaction that did not happen again shows in the turns after it.
            _ => None,
        })
        .or_else(|| beyond_the_record(recorded, replayed))
}

fn index(records: &[Record]) -> HashMap<&str, Replayed<'_>> {
    let mut agents: HashMap<&str, Replayed<'_>> = HashMap::new();
    for record in records {
        match record {
            Record::Start(start) => agents.entry(&start.agent).or_default().start = Some(start),
            Record::Turn(turn) => {
                agents
                    .entry(&turn.agent)
                    .or_default()
                    .turns
                    .insert(turn.turn, turn);
            }
            _ => {}
        }
    }
    agents
}

fn compare_start(start: &Start, replayed: Option<&Replayed<'_>>) -> Option<Divergence> {
    let at = |what: &str, replayed: &str| Divergence {
        agent: start.agent.clone(),
        turn: None,
        block: None,
        what: what.to_string(),
        recorded: start.question.clone(),
        replayed: replayed.to_string(),
    };
    match replayed.and_then(|agent| agent.start) {
        None => Some(at("the replayed run did not start this agent", "")),
        Some(again) if again.question != start.question => {
            Some(at("the agent was asked another question", &again.question))
        }
        Some(_) => None,
    }
}

fn compare_turn(turn: &Turn, replayed: Option<&Replayed<'_>>) -> Option<Divergence> {
    let at = |block: Option<usize>, what: String, recorded: String, replayed: String| Divergence {
        agent: turn.agent.clone(),
        turn: Some(turn.turn),
        block,
        what,
        recorded,
        replayed,
    };
    let Some(again) = replayed.and_then(|agent| agent.turns.get(&turn.turn)) else {
        let ended = replayed
            .and_then(|agent| agent.turns.values().next_back())
            .map(|last| ending(last))
            .unwrap_or_default();
        return Some(at(
            None,
            "the replayed agent ended before this turn".to_string(),
            turn.reply.clone().unwrap_or_default(),
            ended,
        ));
    };
    let blocks = turn.outputs.len().max(again.outputs.len());
    for i in 0..blocks {
        let (before, after) = (turn.outputs.get(i), again.outputs.get(i));
        if let Some((what, recorded, replayed)) = compare_block(before, after) {
            return Some(at(Some(i + 1), what, recorded, replayed));
        }
    }
    (turn.final_answer != again.final_answer).then(|| {
        at(
            None,
            "the final answer differs".to_string(),
            ending(turn),
            ending(again),
        )
    })
}

/// How two runs of one block differ: what, and each side's text.
fn compare_block(
    recorded: Option<&Block>,
    replayed: Option<&Block>,
) -> Option<(String, String, String)> {
    let (Some(before), Some(after)) = (recorded, replayed) else {
        let text = |block: Option<&Block>| block.map(block_text).unwrap_or_default();
        let what = match recorded {
            Some(_) => "the replayed turn did not run this block",
            None => "the replayed turn ran a block the recorded one did not",
        };
        return Some((what.to_string(), text(recorded), text(replayed)));
    };
    // A call is made before the block's output is whole, and a call off the record
    // fails the block: a prompt that differs is the cause to show.
    if let Some(calls) = compare_calls(&before.sub_calls, &after.sub_calls) {
        return Some(calls);
    }
    if before.status != after.status {
        let what = format!(
            "the block ended otherwise: {} in the record, {} in the replay",
            before.status, after.status
        );
        return Some((what, block_text(before), block_text(after)));
    }
    if before.output != after.output || before.error != after.error {
        let what = "the block's output differs".to_string();
        return Some((what, block_text(before), block_text(after)));
    }
    None
}

/// The first sub-call whose prompt (or images) differs, or one made on one side only.
fn compare_calls(recorded: &[SubCall], replayed: &[SubCall]) -> Option<(String, String, String)> {
    let calls = recorded.len().max(replayed.len());
    (0..calls).find_map(|i| {
        let prompt = |calls: &[SubCall]| calls.get(i).map(SubCall::prompt).unwrap_or_default();
        let what = match (recorded.get(i), replayed.get(i)) {
            (Some(before), Some(after)) if before.messages != after.messages => {
                format!("sub-call {} was sent another prompt", i + 1)
            }
            (Some(before), Some(after)) if before.images != after.images => {
                format!("sub-call {} was sent other images", i + 1)
            }
            (Some(_), Some(_)) => return None,
            (Some(_), None) => format!("the replayed block did not make sub-call {}", i + 1),
            _ => format!(
                "the replayed block made a sub-call the record does not have (call {})",
                i + 1
            ),
        };
        Some((what, prompt(recorded), prompt(replayed)))
    })
}

/// Agents and turns of the replay that the record does not have.
fn beyond_the_record(recorded: &[Record], replayed: &[Record]) -> Option<Divergence> {
    let known = index(recorded);
    replayed.iter().find_map(|record| match record {
        Record::Start(start) if !known.contains_key(start.agent.as_str()) => Some(Divergence {
            agent: start.agent.clone(),
            turn: None,
            block: None,
            what: "the replayed run started an agent the record does not have".to_string(),
            recorded: String::new(),
            replayed: start.question.clone(),
        }),
        Record::Turn(turn)
            if known
                .get(turn.agent.as_str())
                .is_some_and(|agent| !agent.turns.contains_key(&turn.turn)) =>
        {
            Some(Divergence {
                agent: turn.agent.clone(),
                turn: Some(turn.turn),
                block: None,
                what: "the replayed agent went on past the recorded run".to_string(),
                recorded: String::new(),
                replayed: ending(turn),
            })
        }
        _ => None,
    })
}

/// A block as the comparison shows it: its output, then how it failed.
fn block_text(block: &Block) -> String {
    match (&block.error, block.status) {
        (Some(error), status) => format!("{}[{status}] {error}", block.output),
        (None, BlockStatus::NotRun) => "[not run]".to_string(),
        (None, _) => block.output.clone(),
    }
}

/// How a turn ended: its final answer, its error, or that the agent went on.
fn ending(turn: &Turn) -> String {
    match (&turn.final_answer, &turn.error) {
        (Some(answer), _) => format!("FINAL: {answer}"),
        (None, Some(error)) => format!("error: {error}"),
        (None, None) => format!("turn {} ended without an answer", turn.turn),
    }
}
