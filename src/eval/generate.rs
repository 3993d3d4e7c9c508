//! [`Family`] and [`generate`]: the generated task suites, deterministic from a seed.

use std::fmt;

use super::rng::Rng;
use super::size::Size;
use super::task::Task;
use super::{aggregate, logs, niah, pairs};

/// A family of generated tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// One needle in a haystack of prose (S-NIAH).
    Niah,
    /// Counts and comparisons over classified records (OOLONG).
    Aggregate,
    /// Pairs of users meeting a condition (OOLONG-Pairs).
    Pairs,
    /// Questions over a service log.
    Logs,
}

impl Family {
    /// Every family, in order.
    pub const ALL: [Family; 4] = [Family::Niah, Family::Aggregate, Family::Pairs, Family::Logs];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Family::Niah => "niah",
            Family::Aggregate => "aggregate",
            Family::Pairs => "pairs",
            Family::Logs => "logs",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Family {
    type Err = String;

    fn from_str(name: &str) -> Result<Family, String> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == name.trim())
            .ok_or_else(|| {
                format!("unknown task family `{name}`: expected niah, aggregate, pairs or logs")
            })
    }
}

/// Task `index` of `family` at `size`, from `seed`: the same arguments give the same
/// bytes, on every platform.
///
/// ```
/// use rlm_registry::eval::{Family, Size, generate_task};
///
/// let task = generate_task(Family::Niah, Size::new(2_000), 1, 0);
/// assert_eq!(task.id, "niah-2k-s1-000");
/// assert!(task.context.as_deref().unwrap().contains(&task.answer));
/// assert_eq!(task, generate_task(Family::Niah, Size::new(2_000), 1, 0));
/// ```
pub fn generate_task(family: Family, size: Size, seed: u64, index: usize) -> Task {
    let label = format!("{family}-{size}");
    let mut rng = Rng::for_task(seed, &label, index);
    let target = size.tokens() as usize;
    let (question, context, answer, scorer) = match family {
        Family::Niah => niah::generate(&mut rng, target),
        Family::Aggregate => aggregate::generate(&mut rng, target),
        Family::Pairs => pairs::generate(&mut rng, target),
        Family::Logs => logs::generate(&mut rng, target),
    };
    Task {
        id: format!("{label}-s{seed}-{index:03}"),
        question,
        context: Some(context),
        context_file: None,
        answer,
        scorer,
        family: Some(family.name().to_string()),
        size: Some(size.tokens()),
    }
}

/// `n` tasks of each family at each size, families first, then sizes, then index.
pub fn generate(families: &[Family], sizes: &[Size], n: usize, seed: u64) -> Vec<Task> {
    let mut tasks = Vec::with_capacity(families.len() * sizes.len() * n);
    for &family in families {
        for &size in sizes {
            for index in 0..n {
                tasks.push(generate_task(family, size, seed, index));
            }
        }
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens;

    #[test]
    fn every_family_is_deterministic_and_within_two_percent_of_the_size() {
        for family in Family::ALL {
            for (tokens_asked, index) in [(4_000u64, 0), (16_000, 1)] {
                let size = Size::new(tokens_asked);
                let task = generate_task(family, size, 1, index);
                let again = generate_task(family, size, 1, index);
                assert_eq!(
                    serde_json::to_string(&task).unwrap(),
                    serde_json::to_string(&again).unwrap()
                );
                let count = tokens::count(task.context.as_deref().unwrap()) as f64;
                let error = (count - tokens_asked as f64).abs() / tokens_asked as f64;
                assert!(error <= 0.02, "{family} {size}: {count} tokens");
                assert!(!task.answer.is_empty(), "{family}");
            }
        }
    }

    #[test]
    fn tiny_sizes_give_tasks_without_panicking() {
        for family in Family::ALL {
            let task = generate_task(family, Size::new(0), 1, 0);
            assert!(!task.answer.is_empty());
        }
    }

    #[test]
    fn different_seeds_and_indices_give_different_tasks() {
        let a = generate_task(Family::Aggregate, Size::new(2_000), 1, 0);
        let b = generate_task(Family::Aggregate, Size::new(2_000), 2, 0);
        let c = generate_task(Family::Aggregate, Size::new(2_000), 1, 1);
        assert_ne!(a.context, b.context);
        assert_ne!(a.context, c.context);
    }

    #[test]
    fn family_names_parse_and_unknown_ones_are_named_in_the_error() {
        assert_eq!("pairs".parse::<Family>(), Ok(Family::Pairs));
        assert!("oolong".parse::<Family>().unwrap_err().contains("`oolong`"));
    }
}
