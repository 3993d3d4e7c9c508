//! `aggregate` (OOLONG-style): questions whose answer needs every record classified —
//! how many records of class X, which class is most common, is X more common than Y,
//! how many of user U's records are X. Labels are scored exactly, counts with OOLONG's
//! `0.75^|error|`.

use super::{Generated, TaskFamily};
use crate::eval::classes::CLASSES;
use crate::eval::records::{self, Record};
use crate::eval::rng::Rng;
use crate::eval::score::Scorer;

/// The `aggregate` family.
pub(super) struct Aggregate;

impl TaskFamily for Aggregate {
    fn name(&self) -> &'static str {
        "aggregate"
    }

    fn description(&self) -> &'static str {
        "reading every record (OOLONG): counts and comparisons over six latent classes that only reading a record reveals; labels exact, counts 0.75^|error|"
    }

    fn generate(&self, rng: &mut Rng, target: usize) -> Generated {
        let records = records::generate(rng, target, None);
        let counts = records::class_counts(&records);
        let (question, answer, scorer) = match rng.below(4) {
            0 => most_common(&counts).unwrap_or_else(|| class_count(rng, &counts)),
            1 => compare(rng, &counts),
            2 => user_count(rng, &records),
            _ => class_count(rng, &counts),
        };
        Generated {
            question: format!("{} {question}", records::preamble()),
            context: records::context(&records),
            answer,
            scorer,
        }
    }
}

type Asked = (String, String, Scorer);

fn class_count(rng: &mut Rng, counts: &[usize; 6]) -> Asked {
    let class = rng.below(CLASSES.len());
    (
        format!(
            "How many records are of class {}? Answer with the number only.",
            CLASSES[class]
        ),
        counts[class].to_string(),
        Scorer::Numeric,
    )
}

/// `None` on a tie for first place.
fn most_common(counts: &[usize; 6]) -> Option<Asked> {
    let max = *counts.iter().max()?;
    if counts.iter().filter(|&&c| c == max).count() > 1 {
        return None;
    }
    let class = counts.iter().position(|&c| c == max)?;
    Some((
        format!(
            "Which class is the most common among the records? Answer with the class name only, one of: {}.",
            CLASSES.join(", ")
        ),
        CLASSES[class].to_string(),
        Scorer::Exact,
    ))
}

fn compare(rng: &mut Rng, counts: &[usize; 6]) -> Asked {
    let x = rng.below(CLASSES.len());
    let y = (x + 1 + rng.below(CLASSES.len() - 1)) % CLASSES.len();
    let answer = match counts[x].cmp(&counts[y]) {
        std::cmp::Ordering::Greater => "more common",
        std::cmp::Ordering::Less => "less common",
        std::cmp::Ordering::Equal => "same frequency",
    };
    (
        format!(
            "Is class {} more common, less common or as common as class {} among the records? Answer with exactly one of: more common, less common, same frequency.",
            CLASSES[x], CLASSES[y]
        ),
        answer.to_string(),
        Scorer::Exact,
    )
}

fn user_count(rng: &mut Rng, records: &[Record]) -> Asked {
    let user = records[rng.below(records.len())].user;
    let mine: Vec<&Record> = records.iter().filter(|r| r.user == user).collect();
    let class = mine[rng.below(mine.len())].class;
    let count = mine.iter().filter(|r| r.class == class).count();
    (
        format!(
            "How many of the records of user {user} are of class {}? Answer with the number only.",
            CLASSES[class]
        ),
        count.to_string(),
        Scorer::Numeric,
    )
}
