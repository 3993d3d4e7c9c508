//! `pairs` (OOLONG-Pairs-style): "list every pair of user ids where both users have a
//! record of class X (and one of class Y)", scored by F1 over the set of pairs.

use std::collections::{BTreeMap, BTreeSet};

use super::{Generated, TaskFamily};
use crate::eval::classes::CLASSES;
use crate::eval::records;
use crate::eval::rng::Rng;
use crate::eval::score::Scorer;

/// Users in a `pairs` task, whatever its size: enough for a real set of pairs, few
/// enough that the answer stays a list one can write.
const USERS: usize = 30;

/// The `pairs` family.
pub(super) struct Pairs;

impl TaskFamily for Pairs {
    fn name(&self) -> &'static str {
        "pairs"
    }

    fn description(&self) -> &'static str {
        "combining across records (OOLONG-Pairs): every pair of users who both have records of one or two classes; F1 over the set of pairs"
    }

    fn generate(&self, rng: &mut Rng, target: usize) -> Generated {
        let records = records::generate(rng, target, Some(USERS));
        let mut classes_of: BTreeMap<u32, BTreeSet<usize>> = BTreeMap::new();
        for record in &records {
            classes_of
                .entry(record.user)
                .or_default()
                .insert(record.class);
        }
        let x = rng.below(CLASSES.len());
        let y = if rng.chance(0.5) {
            Some((x + 1 + rng.below(CLASSES.len() - 1)) % CLASSES.len())
        } else {
            None
        };
        let chosen: Vec<u32> = classes_of
            .iter()
            .filter(|(_, classes)| classes.contains(&x) && y.is_none_or(|y| classes.contains(&y)))
            .map(|(user, _)| *user)
            .collect();
        let mut pairs = Vec::new();
        for (i, a) in chosen.iter().enumerate() {
            for b in &chosen[i + 1..] {
                pairs.push(format!("({a}, {b})"));
            }
        }
        let condition = match y {
            Some(y) => format!(
                "at least one record of class {} and at least one record of class {}",
                CLASSES[x], CLASSES[y]
            ),
            None => format!("at least one record of class {}", CLASSES[x]),
        };
        let question = format!(
            "{} List every pair of user ids where both users have {condition}. Write each pair as (smaller id, larger id), one pair per line, and nothing else; answer none if there is no such pair.",
            records::preamble()
        );
        let answer = if pairs.is_empty() {
            "none".to_string()
        } else {
            pairs.join("\n")
        };
        Generated {
            question,
            context: records::context(&records),
            answer,
            scorer: Scorer::F1Set,
        }
    }
}
