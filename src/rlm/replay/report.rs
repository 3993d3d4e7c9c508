//! What a replay found: [`ReplayReport`], identical or the first [`Divergence`], shown
//! with the two sides in columns.

use std::fmt;

use super::super::trajectory::Record;
use super::compare;

/// What a replay found: whether the run came out the same, and how much was compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayReport {
    /// The first difference, `None` when the replay is identical.
    pub divergence: Option<Divergence>,
    /// Agents in the record.
    pub agents: usize,
    /// Turns in the record, every agent's.
    pub turns: usize,
    /// Code blocks in the record.
    pub blocks: usize,
    /// Sub-calls in the record.
    pub sub_calls: usize,
}

impl ReplayReport {
    pub(super) fn of(recorded: &[Record], replayed: &[Record]) -> ReplayReport {
        let turns: Vec<_> = recorded
            .iter()
            .filter_map(|record| match record {
                Record::Turn(turn) => Some(turn),
                _ => None,
            })
            .collect();
        let blocks = turns.iter().flat_map(|turn| &turn.outputs);
        ReplayReport {
            divergence: compare::first_divergence(recorded, replayed),
            agents: recorded
                .iter()
                .filter(|record| matches!(record, Record::Start(_)))
                .count(),
            turns: turns.len(),
            blocks: blocks.clone().count(),
            sub_calls: blocks.map(|block| block.sub_calls.len()).sum(),
        }
    }

    /// Whether the replay came out as the record.
    pub fn is_identical(&self) -> bool {
        self.divergence.is_none()
    }
}

/// `identical (…)`, or the divergence.
impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.divergence {
            Some(divergence) => divergence.fmt(f),
            None => writeln!(
                f,
                "identical ({} agent{}, {} turn{}, {} block{}, {} sub-call{})",
                self.agents,
                plural(self.agents),
                self.turns,
                plural(self.turns),
                self.blocks,
                plural(self.blocks),
                self.sub_calls,
                plural(self.sub_calls)
            ),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Where a replay first came out otherwise than the record, and the two sides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The agent's id (`0` the root).
    pub agent: String,
    /// The turn (1-based), `None` for the agent's start.
    pub turn: Option<u32>,
    /// The block (1-based), `None` for what is not a block's (the final answer, say).
    pub block: Option<usize>,
    /// What differs, in words.
    pub what: String,
    /// The record's side: the block's output, a sub-call's prompt, a question.
    pub recorded: String,
    /// The replay's side.
    pub replayed: String,
}

/// The place and what differs, then the two sides in columns, as `sdiff` shows them: a
/// `|` between lines that differ, `<` or `>` beside a line only one side has.
impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "diverged at agent {}", self.agent)?;
        if let Some(turn) = self.turn {
            write!(f, ", turn {turn}")?;
        }
        if let Some(block) = self.block {
            write!(f, ", block {block}")?;
        }
        writeln!(f, ": {}", self.what)?;
        f.write_str(&side_by_side(&self.recorded, &self.replayed))
    }
}

/// The widest a column gets; longer lines are cut with `…`.
const COLUMN: usize = 60;

fn side_by_side(left: &str, right: &str) -> String {
    let left: Vec<&str> = left.lines().collect();
    let right: Vec<&str> = right.lines().collect();
    let width = left
        .iter()
        .map(|line| line.chars().count())
        .max()
        .unwrap_or(0)
        .clamp("recorded".len(), COLUMN);
    let mut text = format!("{:<width$}   replayed\n", "recorded");
    for i in 0..left.len().max(right.len()) {
        let (l, r) = (left.get(i), right.get(i));
        let mark = match (l, r) {
            (Some(a), Some(b)) if a == b => ' ',
            (Some(_), Some(_)) => '|',
            (Some(_), None) => '<',
            _ => '>',
        };
        let l = cut(l.copied().unwrap_or(""), width);
        let r = r.copied().unwrap_or("");
        text.push_str(format!("{l:<width$} {mark} {r}").trim_end());
        text.push('\n');
    }
    text
}

fn cut(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_sides_are_shown_in_columns_marked_as_sdiff_marks_them() {
        let shown = side_by_side("same\nold\nonly left\n", "same\nnew\n");
        assert_eq!(
            shown,
            "recorded    replayed\nsame        same\nold       | new\nonly left <\n"
        );
        let long = "x".repeat(COLUMN + 10);
        let shown = side_by_side(&long, "y");
        let first = shown.lines().nth(1).unwrap();
        assert!(
            first.starts_with(&format!("{}… | y", "x".repeat(COLUMN - 1))),
            "{first}"
        );
        assert_eq!(
            side_by_side("", "extra"),
            "recorded   replayed\n         > extra\n"
        );
    }
}
