//! The live view: a few lines per turn of every agent, as the run goes (the CLI shows it
//! on stderr). Written for the person watching, never sent to the model.

use super::agent::Agent;
use super::trajectory::Turn;
use crate::text_format::{cut_chars, first_line, thousands};

impl Agent {
    /// `turn 2/10 · 1 block · 340 chars out · 1,234 tokens`, the first line of code and
    /// of output, indented by depth.
    pub(super) fn live_lines(&self, data: &Turn) -> String {
        let indent = "    ".repeat(self.depth);
        let agent = if self.depth > 0 {
            format!("[agent {}] ", self.id)
        } else {
            String::new()
        };
        let blocks = data.code_blocks.len();
        let chars: usize = data.outputs.iter().map(|o| o.output.chars().count()).sum();
        let mut head = format!(
            "{indent}{agent}turn {}/{} · {blocks} block{} · {} chars out",
            data.turn,
            self.config.max_iterations,
            if blocks == 1 { "" } else { "s" },
            thousands(chars as u64),
        );
        if let Some(failed) = data.failed_block() {
            head.push_str(&format!(" · {} in block {}", failed.status, failed.block));
        }
        if data.final_answer.is_some() {
            head.push_str(" · FINAL");
        }
        match (data.cached, data.waited_ms) {
            (true, Some(ms)) => head.push_str(&format!(" · cached (waited {ms} ms)")),
            (true, None) => head.push_str(" · cached"),
            (false, _) => {}
        }
        head.push_str(&format!(" · {} tokens", thousands(data.run_tokens)));
        if let Some(cost) = data.run_cost {
            head.push_str(&format!(" · {cost}"));
        }
        head.push('\n');
        if let Some(code) = data.code_blocks.first() {
            head.push_str(&format!("{indent}  │ {}\n", summary_line(code)));
        }
        if let Some(output) = data.outputs.iter().find(|o| !o.output.is_empty()) {
            head.push_str(&format!("{indent}  → {}\n", summary_line(&output.output)));
        }
        if let Some(error) = data.outputs.iter().find_map(|o| o.error.as_ref()) {
            head.push_str(&format!(
                "{indent}  ✗ {}\n",
                cut_chars(first_line(error), 160)
            ));
        }
        if let Some(error) = &data.error {
            head.push_str(&format!(
                "{indent}  ✗ {}\n",
                cut_chars(first_line(error), 160)
            ));
        }
        if let Some(answer) = &data.final_answer {
            head.push_str(&format!("{indent}  = {}\n", summary_line(answer)));
        }
        head
    }
}

/// The first line (at most 100 characters) and how many more lines there are.
fn summary_line(text: &str) -> String {
    let mut line = cut_chars(first_line(text), 100);
    let more = text.lines().filter(|l| !l.trim().is_empty()).count();
    if more > 1 {
        let plural = if more == 2 { "" } else { "s" };
        line.push_str(&format!("  (+{} line{plural})", more - 1));
    }
    line
}
