//! The run as one self-contained HTML page: the template (`page.html`, inline CSS and
//! JS, no external asset) with the trace embedded as JSON; the page builds its DOM from
//! the data as it is opened, so a 10,000-turn trace loads in a few seconds.
//!
//! Everything the model wrote reaches the page as JSON inside a
//! `<script type="application/json">` element, with `<`, `>` and `&` escaped as `\u003c`
//! … so no text can close the element, and the script only ever puts it in the DOM as
//! text (`textContent`), never as markup. A Content-Security-Policy forbids any network
//! access.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::model::{Agent, Trace, Turn};
use super::text::images_sent_lines;
use crate::text_format::escape_html;

/// The page's template; `/*DATA*/` and `TITLE` are filled in.
const TEMPLATE: &str = include_str!("page.html");

/// The page for `trace`, titled `title` (the trace's file name, say).
///
/// ```
/// use rlm_registry::trace::{Trace, html};
///
/// let text = r#"{"event":"start","agent":"0","depth":0,"question":"</script><b>Q</b>","messages":[]}"#;
/// let page = html(&Trace::parse(text)?, "run.jsonl");
/// assert!(page.starts_with("<!DOCTYPE html>"));
/// assert!(!page.contains("</script><b>"));
/// # Ok::<(), rlm_registry::trace::TraceError>(())
/// ```
pub fn html(trace: &Trace, title: &str) -> String {
    let data = embed(&page_data(trace, title));
    let (head, rest) = TEMPLATE.split_once("/*DATA*/").unwrap_or((TEMPLATE, ""));
    let mut page = String::with_capacity(TEMPLATE.len() + data.len());
    page.push_str(&head.replace("TITLE", &escape_html(title)));
    page.push_str(&data);
    page.push_str(rest);
    page
}

/// The data the page renders: the summary, and each agent with its turns. The `start`
/// messages go to a table of distinct texts, as every child at a depth shares one system
/// prompt.
fn page_data(trace: &Trace, title: &str) -> Value {
    let mut texts = Texts::default();
    let agents: Vec<Value> = trace
        .agents
        .iter()
        .map(|agent| agent_data(agent, &mut texts))
        .collect();
    json!({
        "title": title,
        "summary": trace.summary(),
        "problems": trace.problems.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "texts": texts.list,
        "agents": agents,
    })
}

fn agent_data(agent: &Agent, texts: &mut Texts) -> Value {
    let messages: Vec<Value> = agent
        .messages
        .iter()
        .map(|m| json!([m.role, texts.index(m.text())]))
        .collect();
    json!({
        "id": agent.id,
        "depth": agent.depth,
        "question": agent.question,
        "parent": agent.parent,
        "spawned": agent.spawned_in_turn,
        "children": agent.children,
        "outcome": agent.outcome(),
        "messages": messages,
        "turns": agent.turns.iter().map(turn_data).collect::<Vec<_>>(),
        // The conversation restarts after each: `[turn, summary, note]`.
        "compacted": agent
            .compactions
            .iter()
            .filter_map(|c| Some(json!([c.turn, c.reply.as_deref()?, c.note])))
            .collect::<Vec<_>>(),
    })
}

/// A turn with short keys: a 10,000-turn page repeats them 10,000 times.
fn turn_data(turn: &Turn) -> Value {
    let blocks: Vec<Value> = turn
        .code_blocks
        .iter()
        .enumerate()
        .map(|(i, code)| {
            let out = turn.outputs.get(i);
            let mut block = json!({
                "code": code,
                "status": out.map_or("not run", |o| o.status.as_str()),
                "out": out.map_or("", |o| o.output.as_str()),
                "err": out.and_then(|o| o.error.as_deref()),
                "ms": out.map_or(0, |o| o.elapsed_ms),
            });
            // Only where there are some: most blocks send none.
            let images = out.map(images_sent_lines).unwrap_or_default();
            if !images.is_empty() {
                block["img"] = json!(images);
            }
            block
        })
        .collect();
    json!({
        "n": turn.turn,
        "reply": turn.reply,
        "thinking": turn.thinking(),
        "back": turn.sent_back,
        "rt": turn.reasoning_tokens,
        "blocks": blocks,
        "feedback": turn.feedback,
        "final": turn.final_answer,
        "error": turn.error,
        "ms": turn.elapsed_ms,
        "llm": turn.llm_ms,
        "pt": turn.prompt_tokens,
        "ct": turn.completion_tokens,
        "run": turn.run_tokens,
        "sent": turn.messages_sent,
    })
}

/// Distinct texts, each stored once.
#[derive(Default)]
struct Texts {
    list: Vec<String>,
    seen: HashMap<String, usize>,
}

impl Texts {
    fn index(&mut self, text: &str) -> usize {
        if let Some(&i) = self.seen.get(text) {
            return i;
        }
        self.list.push(text.to_string());
        self.seen.insert(text.to_string(), self.list.len() - 1);
        self.list.len() - 1
    }
}

/// JSON safe inside a `<script>` element: no `<`, `>` or `&` (so no `</script>` or
/// `<!--`), and no U+2028/U+2029, which old parsers take for line ends.
fn embed(data: &Value) -> String {
    let text = data.to_string();
    let mut out = String::with_capacity(text.len() + text.len() / 50);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_json_cannot_close_its_script_element() {
        let data = json!({"out": "</script><img src=x onerror=alert(1)> <!-- & \u{2028}"});
        let text = embed(&data);
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'));
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn the_title_is_escaped() {
        assert_eq!(
            escape_html("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
