//! `niah` (S-NIAH): one needle, `The special magic number for <word> is <7 digits>.`,
//! at a random depth in generated prose, with distractor needles for other words.
//! Scored by exact match on the number.

use super::{Generated, TaskFamily};
use crate::eval::prose::paragraph;
use crate::eval::rng::Rng;
use crate::eval::score::Scorer;
use crate::eval::size::fit_lines;
use crate::tokens;

const KEYS: &[&str] = &[
    "amber", "falcon", "harbor", "juniper", "lantern", "meadow", "nickel", "orchid", "pepper",
    "quartz", "raven", "saffron", "thistle", "umber", "velvet", "willow", "zephyr", "basalt",
    "cobalt", "dahlia", "ember", "fennel", "granite", "hazel", "indigo", "jasmine", "kestrel",
    "linen", "marble", "nutmeg", "obsidian", "pebble", "quill", "russet", "sable", "tundra",
];

/// The `niah` family.
pub(super) struct Niah;

impl TaskFamily for Niah {
    fn name(&self) -> &'static str {
        "niah"
    }

    fn description(&self) -> &'static str {
        "finding one fact (S-NIAH): a word's 7-digit magic number at a random depth in prose, among distractor needles; exact match"
    }

    fn generate(&self, rng: &mut Rng, target: usize) -> Generated {
        let mut keys: Vec<&str> = KEYS.to_vec();
        rng.shuffle(&mut keys);
        let distractors = rng.range(3, 5);
        let needles: Vec<(String, String)> = keys[..=distractors]
            .iter()
            .map(|key| {
                let number = rng.range(1_000_000, 9_999_999).to_string();
                (
                    format!("The special magic number for {key} is {number}. "),
                    number,
                )
            })
            .collect();
        let needle_tokens: usize = needles.iter().map(|(s, _)| tokens::count(s)).sum();
        let mut lines = fit_lines(
            target.saturating_sub(needle_tokens),
            || paragraph(rng),
            |s| s,
        );
        for (needle, _) in &needles {
            // A needle opens a paragraph at a random depth.
            let at = rng.below(lines.len());
            lines[at].insert_str(0, needle);
        }
        let question = format!(
            "What is the special magic number for {} mentioned in the context? Answer with the 7-digit number only.",
            keys[0]
        );
        Generated {
            question,
            context: lines.concat(),
            answer: needles[0].1.clone(),
            scorer: Scorer::Exact,
        }
    }
}
