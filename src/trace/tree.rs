//! The run as a tree in the terminal ([`show`]), one agent ([`show_agent`]), one turn in
//! full ([`show_turn`]), and the same views as JSON.

use serde_json::{Value, json};

use super::model::{Agent, Block, Compaction, Outcome, Summary, Trace, Turn};
use super::text::{cut, duration, first_line, first_lines, images_sent_lines, plural, thousands};

/// Lines of code, output and errors shown per block in the tree.
const CODE_LINES: usize = 3;
const OUTPUT_LINES: usize = 3;
const ERROR_LINES: usize = 2;
/// Characters per line in the tree.
const WIDTH: usize = 120;

/// The header and every agent, children indented under the turn that started them.
pub fn show(trace: &Trace) -> String {
    let mut out = header(trace);
    if let Some(root) = trace.root() {
        out.push('\n');
        agent_tree(trace, root, 0, &mut out);
    }
    // Agents whose parent is not in the trace (a trace cut at the front).
    for orphan in trace.agents.iter().filter(|a| {
        a.parent
            .as_deref()
            .is_some_and(|p| trace.agent(p).is_none())
    }) {
        agent_tree(trace, orphan, 0, &mut out);
    }
    out
}

/// One agent and its children, or `None` if there is no such agent.
pub fn show_agent(trace: &Trace, id: &str) -> Option<String> {
    let agent = trace.agent(id)?;
    let mut out = String::new();
    if !agent.question.is_empty() {
        out.push_str(&format!("Question: {}\n", agent.question));
    }
    agent_tree(trace, agent, 0, &mut out);
    Some(out)
}

/// The images a block's sub-calls sent, one line each ([`images_sent_lines`]).
fn images_sent(block: &Block, out: &mut String) {
    for line in images_sent_lines(block) {
        out.push_str(&line);
        out.push('\n');
    }
}

/// One turn in full: the messages the model saw (rebuilt from the trace), the reply, and
/// each block's code, full output and error; `None` if there is no such turn.
pub fn show_turn(trace: &Trace, id: &str, n: u32) -> Option<String> {
    let agent = trace.agent(id)?;
    let turn = agent.turn(n)?;
    let mut out = format!(
        "agent {id} · turn {n} · {} · {} tokens ({} prompt, {} completion) · {} (model {})\n",
        plural(turn.messages_sent, "message"),
        thousands(turn.tokens()),
        thousands(turn.prompt_tokens),
        thousands(turn.completion_tokens),
        duration(turn.elapsed_ms),
        duration(turn.llm_ms),
    );
    for (i, message) in agent.messages_at(n).iter().enumerate() {
        section(&mut out, &format!("message {} · {}", i + 1, message.role));
        out.push_str(message.text());
        newline(&mut out);
    }
    if let Some(thinking) = turn.thinking() {
        let tokens = match turn.reasoning_tokens {
            0 => String::new(),
            n => format!(" · {} tokens", thousands(n)),
        };
        section(&mut out, &format!("thinking (never run){tokens}"));
        out.push_str(&thinking);
        newline(&mut out);
    }
    section(&mut out, "reply");
    out.push_str(turn.reply.as_deref().unwrap_or("(no reply)"));
    newline(&mut out);
    if let Some(sent_back) = &turn.sent_back {
        section(
            &mut out,
            "reply sent back to the model (without its thinking)",
        );
        out.push_str(sent_back);
        newline(&mut out);
    }
    for (i, code) in turn.code_blocks.iter().enumerate() {
        let block = turn.outputs.get(i);
        let status = block.map_or("not run", |b| b.status.as_str());
        let ms = block.map_or(0, |b| b.elapsed_ms);
        section(
            &mut out,
            &format!("block {} · {status} · {}", i + 1, duration(ms)),
        );
        out.push_str(code);
        newline(&mut out);
        if let Some(block) = block {
            section(&mut out, &format!("output of block {}", i + 1));
            out.push_str(if block.output.is_empty() {
                "(no output)"
            } else {
                &block.output
            });
            newline(&mut out);
            images_sent(block, &mut out);
            if let Some(error) = &block.error {
                section(&mut out, &format!("error in block {}", i + 1));
                out.push_str(error);
                newline(&mut out);
            }
        }
    }
    for child in trace.children_of_turn(agent, n) {
        section(&mut out, &format!("started agent {}", child.id));
        out.push_str(&format!(
            "{} · {} · {}\n",
            cut(&child.question, WIDTH),
            plural(child.turns.len(), "turn"),
            outcome_text(&child.outcome()),
        ));
    }
    if let Some(feedback) = &turn.feedback {
        section(&mut out, "feedback (sent to the model)");
        out.push_str(feedback);
        newline(&mut out);
    }
    if let Some(answer) = &turn.final_answer {
        section(&mut out, "final answer");
        out.push_str(answer);
        newline(&mut out);
    }
    if let Some(error) = &turn.error {
        section(&mut out, "the agent stopped");
        out.push_str(error);
        newline(&mut out);
    }
    Some(out)
}

/// [`show`] as JSON: the summary, the problems and every agent with its turns.
pub fn show_json(trace: &Trace) -> Value {
    json!({
        "summary": trace.summary(),
        "problems": trace.problems,
        "agents": trace.agents,
    })
}

/// [`show_agent`] as JSON: the agent with its turns, and its descendants.
pub fn agent_json(trace: &Trace, id: &str) -> Option<Value> {
    let agent = trace.agent(id)?;
    let prefix = format!("{id}.");
    let descendants: Vec<&Agent> = trace
        .agents
        .iter()
        .filter(|a| a.id.starts_with(&prefix))
        .collect();
    Some(json!({"agent": agent, "outcome": agent.outcome(), "descendants": descendants}))
}

/// [`show_turn`] as JSON: the turn's line, with the rebuilt `messages` it was sent.
pub fn turn_json(trace: &Trace, id: &str, n: u32) -> Option<Value> {
    let agent = trace.agent(id)?;
    let turn = agent.turn(n)?;
    let children: Vec<&str> = trace
        .children_of_turn(agent, n)
        .map(|c| c.id.as_str())
        .collect();
    let mut value = serde_json::to_value(turn).ok()?;
    value["messages"] = serde_json::to_value(agent.messages_at(n)).ok()?;
    value["children"] = json!(children);
    Some(value)
}

/// Question, outcome, turns, tokens per depth, model calls, wall time, and any line that
/// could not be read.
fn header(trace: &Trace) -> String {
    let Summary {
        question,
        outcome,
        root_turns,
        agents,
        turns,
        tokens_by_depth,
        run_tokens,
        sub_call_tokens,
        model_calls,
        wall_ms,
        compactions,
        compaction_tokens,
    } = trace.summary();
    if trace.agents.is_empty() {
        let mut out = "empty trace: the run has not started an agent yet\n".to_string();
        problems(trace, &mut out);
        return out;
    }
    let mut out = format!("Question: {}\n", cut(question.trim(), 500));
    out.push_str(&format!("Outcome:  {}\n", outcome_text(&outcome)));
    out.push_str(&format!(
        "Turns:    {root_turns} of the root · {} · {}\n",
        plural(turns, "turn"),
        plural(agents, "agent"),
    ));
    let mut tokens = format!("Tokens:   {} in all", thousands(run_tokens));
    for (depth, n) in tokens_by_depth.iter().enumerate() {
        tokens.push_str(&format!(" · depth {depth}: {}", thousands(*n)));
    }
    if sub_call_tokens > 0 {
        tokens.push_str(&format!(" · sub-calls: {}", thousands(sub_call_tokens)));
    }
    out.push_str(&tokens);
    out.push('\n');
    out.push_str(&format!(
        "Calls:    {} · wall time {}\n",
        plural(model_calls, "model call"),
        duration(wall_ms)
    ));
    if compactions > 0 {
        out.push_str(&format!(
            "Compactions: {compactions} ({} tokens)\n",
            thousands(compaction_tokens)
        ));
    }
    problems(trace, &mut out);
    out
}

fn problems(trace: &Trace, out: &mut String) {
    for problem in &trace.problems {
        out.push_str(&format!("warning: {problem}\n"));
    }
}

/// `answered: 42`, `failed: iteration limit reached…`, `unfinished`.
fn outcome_text(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Answered(answer) => format!("answered: {}", cut(answer.trim(), 200)),
        Outcome::Failed(error) => format!("failed: {}", cut(error.trim(), 300)),
        Outcome::Unfinished => "unfinished (still running, or cut short)".to_string(),
    }
}

/// `agent` and its turns at `level`, each turn followed by the children it started.
fn agent_tree(trace: &Trace, agent: &Agent, level: usize, out: &mut String) {
    let pad = "  ".repeat(level);
    let question = if agent.depth > 0 {
        format!(" · {}", cut(first_line(&agent.question), 80))
    } else {
        String::new()
    };
    out.push_str(&format!(
        "{pad}agent {}{question} · {} · {}\n",
        agent.id,
        plural(agent.turns.len(), "turn"),
        outcome_text(&agent.outcome()),
    ));
    for turn in &agent.turns {
        turn_lines(turn, level + 1, out);
        for compaction in agent.compactions.iter().filter(|c| c.turn == turn.turn) {
            compaction_lines(compaction, level + 1, out);
        }
        for child in trace.children_of_turn(agent, turn.turn) {
            agent_tree(trace, child, level + 2, out);
        }
    }
    // Children of a turn whose line is not written yet.
    let next = agent.turns.last().map_or(1, |t| t.turn.saturating_add(1));
    let running: Vec<&Agent> = trace.children_of_turn(agent, next).collect();
    if !running.is_empty() {
        out.push_str(&format!("{pad}  turn {next} · in progress\n"));
        for child in running {
            agent_tree(trace, child, level + 2, out);
        }
    }
}

/// One turn: a head line, then per block its first lines of code, output and error.
/// `compacted after turn 3 · 7,100 → 3,480 tokens · 650 tokens`, and the summary's
/// first lines (or why it failed).
fn compaction_lines(compaction: &Compaction, level: usize, out: &mut String) {
    let pad = "  ".repeat(level);
    out.push_str(&format!(
        "{pad}compacted after turn {} · {} → {} tokens · {} tokens · {}\n",
        compaction.turn,
        thousands(compaction.tokens_before),
        thousands(compaction.tokens_after),
        thousands(compaction.tokens()),
        duration(compaction.llm_ms),
    ));
    if let Some(summary) = &compaction.reply {
        excerpt(summary, OUTPUT_LINES, &format!("{pad}  ≡ "), out);
    }
    if let Some(error) = &compaction.error {
        excerpt(error, ERROR_LINES, &format!("{pad}  ✗ "), out);
    }
}

fn turn_lines(turn: &Turn, level: usize, out: &mut String) {
    let pad = "  ".repeat(level);
    let mut head = format!(
        "{pad}turn {} · {} · {} tokens · {}",
        turn.turn,
        plural(turn.code_blocks.len(), "block"),
        thousands(turn.tokens()),
        duration(turn.elapsed_ms),
    );
    if let Some(failed) = turn.failed_block() {
        head.push_str(&format!(" · {} in block {}", failed.status, failed.block));
    }
    out.push_str(&head);
    out.push('\n');
    for (i, code) in turn.code_blocks.iter().enumerate() {
        if turn.code_blocks.len() > 1 {
            out.push_str(&format!("{pad}  block {}\n", i + 1));
        }
        excerpt(code, CODE_LINES, &format!("{pad}  │ "), out);
        if let Some(block) = turn.outputs.get(i) {
            excerpt(&block.output, OUTPUT_LINES, &format!("{pad}  → "), out);
            if let Some(error) = &block.error {
                excerpt(error, ERROR_LINES, &format!("{pad}  ✗ "), out);
            }
        }
    }
    if turn.code_blocks.is_empty()
        && let Some(reply) = &turn.reply
    {
        excerpt(reply, 2, &format!("{pad}  » "), out);
    }
    if let Some(answer) = &turn.final_answer {
        excerpt(answer, OUTPUT_LINES, &format!("{pad}  FINAL: "), out);
    }
    if let Some(error) = &turn.error {
        excerpt(error, ERROR_LINES, &format!("{pad}  stopped: "), out);
    }
}

/// The first `count` lines of `text`, each after `prefix`, and how many more there are.
fn excerpt(text: &str, count: usize, prefix: &str, out: &mut String) {
    let (lines, more) = first_lines(text, count, WIDTH);
    for line in lines {
        out.push_str(prefix);
        out.push_str(&line);
        out.push('\n');
    }
    if more > 0 {
        let lines = if more == 1 { "line" } else { "lines" };
        out.push_str(&format!("{prefix}… {more} more {lines}\n"));
    }
}

fn section(out: &mut String, title: &str) {
    out.push_str(&format!("\n── {title} ──\n"));
}

fn newline(out: &mut String) {
    if !out.ends_with('\n') {
        out.push('\n');
    }
}
