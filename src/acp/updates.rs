//! What the client is shown while a prompt runs: the loop's trace records, as they are
//! made, turned into `session/update`s. The root agent's turns only: a child agent's
//! work shows as the output of the block that called it.
//!
//! A `reply` record (the model's reply, before its code runs) gives the thinking as
//! `agent_thought_chunk`, the prose around the code as `agent_message_chunk`, and each
//! code block as a `tool_call` of kind `execute`, `in_progress`; the `turn` record, when
//! the blocks have run, a `tool_call_update` per block, `completed` or `failed`, its
//! output as the content.

use serde_json::json;

use crate::llm::split_thinking;
use crate::rlm::parse_reply;
use crate::rlm::trajectory::{BlockStatus, Record, ReplyRecord, Turn};
use crate::text_format::{cut_chars, first_line};

use super::schema::{
    ContentBlock, SessionUpdate, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate,
};

/// The root agent's id in the records.
const ROOT: &str = "0";

/// One session's view of its prompts: which prompt it is (tool call ids are unique in
/// the session) and the tool calls still running.
#[derive(Debug, Default)]
pub(crate) struct Updates {
    prompt: u32,
    open: Vec<String>,
}

impl Updates {
    /// A new prompt begins.
    pub fn start_prompt(&mut self) {
        self.prompt += 1;
        self.open.clear();
    }

    /// The updates `record` makes.
    pub fn of(&mut self, record: &Record) -> Vec<SessionUpdate> {
        match record {
            Record::Reply(reply) if reply.agent == ROOT => self.reply(reply),
            Record::Turn(turn) if turn.agent == ROOT => self.turn(turn),
            _ => Vec::new(),
        }
    }

    /// The tool calls a prompt left running (a cancellation cut their turn short), ended
    /// as failed with `why`.
    pub fn close(&mut self, why: &str) -> Vec<SessionUpdate> {
        self.open
            .drain(..)
            .map(|id| {
                SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: id,
                    status: ToolCallStatus::Failed,
                    content: vec![text_content(why.to_string())],
                })
            })
            .collect()
    }

    fn id(&self, turn: u32, block: usize) -> String {
        format!("{}.{turn}.{block}", self.prompt)
    }

    /// The id of a turn's message (`what`: its prose, its thinking).
    fn message_id(&self, turn: u32, what: &str) -> String {
        format!("{}.{turn}.{what}", self.prompt)
    }

    /// A block of prompt `n` (counted from 1 in the session), streamed again as the
    /// user's message while the session loads.
    pub fn user(n: usize, block: ContentBlock) -> SessionUpdate {
        SessionUpdate::UserMessageChunk {
            content: block,
            message_id: format!("{n}.user"),
        }
    }

    /// The prompt's answer, as the agent's last message: an id of its own, so that it
    /// is not read as the end of the last turn's prose.
    pub fn answer(&self, text: String) -> SessionUpdate {
        SessionUpdate::AgentMessageChunk {
            content: ContentBlock::text(text),
            message_id: format!("{}.answer", self.prompt),
        }
    }

    fn reply(&mut self, reply: &ReplyRecord) -> Vec<SessionUpdate> {
        let mut updates = Vec::new();
        let inline = split_thinking(&reply.reply).thinking;
        for thought in [reply.reasoning.as_deref(), inline].into_iter().flatten() {
            if !thought.trim().is_empty() {
                updates.push(SessionUpdate::AgentThoughtChunk {
                    content: ContentBlock::text(thought.trim()),
                    message_id: self.message_id(reply.turn, "thought"),
                });
            }
        }
        let cut = reply.finish_reason.as_deref() == Some("length");
        let parsed = parse_reply(&reply.reply, cut);
        // A `FINAL(…)` written as text is the answer, which comes as its own message.
        let prose: Vec<&str> = parsed
            .prose
            .lines()
            .filter(|line| !line.trim_start().starts_with("FINAL"))
            .collect();
        let prose = prose.join("\n");
        let prose = prose.trim();
        if !prose.is_empty() {
            updates.push(SessionUpdate::AgentMessageChunk {
                content: ContentBlock::text(format!("{prose}\n\n")),
                message_id: self.message_id(reply.turn, "prose"),
            });
        }
        for (i, code) in parsed.blocks.iter().enumerate() {
            let id = self.id(reply.turn, i + 1);
            self.open.push(id.clone());
            updates.push(SessionUpdate::ToolCall(ToolCall {
                tool_call_id: id,
                title: title(code),
                kind: "execute",
                status: ToolCallStatus::InProgress,
                raw_input: json!({ "code": code }),
            }));
        }
        updates
    }

    fn turn(&mut self, turn: &Turn) -> Vec<SessionUpdate> {
        turn.outputs
            .iter()
            .map(|block| {
                let id = self.id(turn.turn, block.block);
                self.open.retain(|open| *open != id);
                let status = match block.status {
                    BlockStatus::Ok => ToolCallStatus::Completed,
                    _ => ToolCallStatus::Failed,
                };
                let mut text = block.output.clone();
                if let Some(error) = &block.error {
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(error);
                }
                if block.status == BlockStatus::NotRun {
                    text = "not run: an earlier block failed or gave the answer".to_string();
                }
                SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: id,
                    status,
                    content: vec![text_content(text)],
                })
            })
            .collect()
    }
}

fn text_content(text: String) -> ToolCallContent {
    ToolCallContent::Content {
        content: ContentBlock::text(text),
    }
}

/// A block's title: `Lua: ` and its first line that is not blank.
fn title(code: &str) -> String {
    let line = code
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("");
    format!("Lua: {}", cut_chars(first_line(line.trim()), 80))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Completion;
    use crate::rlm::trajectory::Block;

    fn reply(text: &str) -> Record {
        Record::Reply(ReplyRecord::of(ROOT, 1, &Completion::new(text)))
    }

    #[test]
    fn a_reply_is_its_thinking_its_prose_and_a_running_tool_call_per_block() {
        let mut updates = Updates::default();
        updates.start_prompt();
        let shown = updates.of(&reply(
            "<think>look first</think>Counting lines.\n```lua\n\nprint(#context)\n```\n",
        ));
        assert_eq!(shown.len(), 3, "{shown:?}");
        assert_eq!(
            shown[0],
            SessionUpdate::AgentThoughtChunk {
                content: ContentBlock::text("look first"),
                message_id: "1.1.thought".into(),
            }
        );
        assert_eq!(
            shown[1],
            SessionUpdate::AgentMessageChunk {
                content: ContentBlock::text("Counting lines.\n\n"),
                message_id: "1.1.prose".into(),
            }
        );
        let SessionUpdate::ToolCall(call) = &shown[2] else {
            panic!("a tool call: {shown:?}")
        };
        assert_eq!(call.tool_call_id, "1.1.1");
        assert_eq!(call.title, "Lua: print(#context)");
        assert_eq!(
            (call.kind, call.status),
            ("execute", ToolCallStatus::InProgress)
        );
    }

    #[test]
    fn a_final_answer_written_as_text_is_left_out_of_the_prose() {
        let mut updates = Updates::default();
        updates.start_prompt();
        let shown = updates.of(&reply("It is 42.\nFINAL(42)"));
        assert_eq!(
            shown,
            [SessionUpdate::AgentMessageChunk {
                content: ContentBlock::text("It is 42.\n\n"),
                message_id: "1.1.prose".into(),
            }]
        );
    }

    #[test]
    fn the_answer_is_a_message_of_its_own_after_the_turns_prose() {
        let mut updates = Updates::default();
        updates.start_prompt();
        let prose = updates.of(&reply("Looking.\n```lua\nprint(1)\n```"));
        let SessionUpdate::AgentMessageChunk { message_id, .. } = &prose[0] else {
            panic!("the prose first: {prose:?}")
        };
        let SessionUpdate::AgentMessageChunk {
            message_id: answer,
            content,
        } = updates.answer("42".into())
        else {
            panic!("the answer is a message chunk")
        };
        assert_ne!(
            message_id, &answer,
            "a client keeping the last message keeps the answer"
        );
        assert_eq!(content, ContentBlock::text("42"));
        updates.start_prompt();
        let SessionUpdate::AgentMessageChunk {
            message_id: next, ..
        } = updates.answer("43".into())
        else {
            panic!("the answer is a message chunk")
        };
        assert_ne!(answer, next, "each prompt's answer is a new message");
    }

    #[test]
    fn a_turn_ends_each_tool_call_completed_or_failed_with_its_output() {
        let mut updates = Updates::default();
        updates.start_prompt();
        updates.of(&reply("```lua\nprint(1)\n```\n```lua\nerror('x')\n```"));
        let block = |block, status, output: &str, error: Option<&str>| Block {
            block,
            status,
            output: output.to_string(),
            error: error.map(str::to_string),
            elapsed_ms: 0,
            sub_calls: Vec::new(),
            journal: Vec::new(),
        };
        let turn = Turn {
            agent: ROOT.to_string(),
            turn: 1,
            outputs: vec![
                block(1, BlockStatus::Ok, "1\n", None),
                block(2, BlockStatus::Error, "", Some("boom")),
            ],
            ..Turn::default()
        };
        let shown = updates.of(&Record::Turn(turn));
        let statuses: Vec<_> = shown
            .iter()
            .map(|update| match update {
                SessionUpdate::ToolCallUpdate(u) => (u.tool_call_id.as_str(), u.status),
                other => panic!("an update of a tool call: {other:?}"),
            })
            .collect();
        assert_eq!(
            statuses,
            [
                ("1.1.1", ToolCallStatus::Completed),
                ("1.1.2", ToolCallStatus::Failed)
            ]
        );
        let SessionUpdate::ToolCallUpdate(failed) = &shown[1] else {
            unreachable!()
        };
        assert_eq!(failed.content, [text_content("boom".to_string())]);
        assert!(updates.close("cancelled").is_empty(), "none left running");
    }

    #[test]
    fn tool_calls_a_cancellation_cut_short_are_closed_as_failed_and_children_are_not_shown() {
        let mut updates = Updates::default();
        updates.start_prompt();
        updates.of(&reply("```lua\nwhile true do end\n```"));
        let child = Record::Reply(ReplyRecord::of(
            "0.1",
            1,
            &Completion::new("```lua\nx=1\n```"),
        ));
        assert!(updates.of(&child).is_empty());
        let closed = updates.close("cancelled");
        assert_eq!(closed.len(), 1);
        assert!(
            matches!(&closed[0], SessionUpdate::ToolCallUpdate(u) if u.status == ToolCallStatus::Failed)
        );
    }
}
