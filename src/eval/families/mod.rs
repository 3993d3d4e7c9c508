//! The families of generated tasks: one file per family, each a [`TaskFamily`], and
//! [`FAMILIES`], the one table that the generator, `rlm eval`'s default suite, its
//! `--suite` help and errors, and `rlm eval generate` read.
//!
//! Adding a family is a new file here, with a unit struct implementing [`TaskFamily`],
//! and one line in the list below (`module => Struct`).

use std::fmt;
use std::hash::{Hash, Hasher};

use super::rng::Rng;
use super::score::Scorer;

/// What a family of generated tasks is: a name, a line saying what it measures and how
/// it is scored, and a generator. Scoring travels with each task ([`Generated::scorer`]),
/// so a family may score its questions differently (counts numerically, labels exactly).
///
/// ```
/// use rlm_registry::eval::{Family, Generated, Rng, Scorer, Size, TaskFamily, generate_task};
///
/// struct Echo;
///
/// impl TaskFamily for Echo {
///     fn name(&self) -> &'static str {
///         "echo"
///     }
///     fn description(&self) -> &'static str {
///         "repeating a number; exact match"
///     }
///     fn generate(&self, rng: &mut Rng, _tokens: usize) -> Generated {
///         let number = rng.range(1, 9).to_string();
///         Generated {
///             question: "Which number is the context?".into(),
///             context: number.clone(),
///             answer: number,
///             scorer: Scorer::Exact,
///         }
///     }
/// }
///
/// static ECHO: Echo = Echo;
/// let task = generate_task(Family::new(&ECHO), Size::new(1_000), 1, 0);
/// assert_eq!(task.id, "echo-1k-s1-000");
/// assert_eq!(task.context.as_deref(), Some(task.answer.as_str()));
/// ```
pub trait TaskFamily: Sync {
    /// The name on the command line, in task ids and in results.
    fn name(&self) -> &'static str;

    /// One line: what the family measures and how its answers are scored.
    fn description(&self) -> &'static str;

    /// A task whose context is `tokens` tokens long (within
    /// [`SIZE_TOLERANCE`](super::SIZE_TOLERANCE), counted with the real tokenizer),
    /// drawn from `rng` alone, so that the same generator state gives the same bytes.
    fn generate(&self, rng: &mut Rng, tokens: usize) -> Generated;

    /// Whether [`Generated::context`] is a corpus: JSONL records, one document a line
    /// (`{"docid", "text"}`), loaded as a list of documents.
    fn corpus(&self) -> bool {
        false
    }
}

/// What a [`TaskFamily`] generates: one question over one context, its expected answer,
/// and how an answer is scored.
#[derive(Clone, Debug, PartialEq)]
pub struct Generated {
    /// The question.
    pub question: String,
    /// The context the question is about.
    pub context: String,
    /// The expected answer.
    pub answer: String,
    /// How an answer is compared with [`Generated::answer`].
    pub scorer: Scorer,
}

/// A family of generated tasks, as the generator and the command line name it: one of
/// [`FAMILIES`], or your own [`TaskFamily`] through [`Family::new`]. Two families are
/// the same when their names are.
///
/// ```
/// use rlm_registry::eval::{FAMILIES, Family};
///
/// let pairs: Family = "pairs".parse()?;
/// assert_eq!(pairs.name(), "pairs");
/// assert!(FAMILIES.contains(&pairs));
/// assert_eq!(
///     "oolong".parse::<Family>().unwrap_err(),
///     "unknown task family `oolong`: expected niah, aggregate, pairs, logs or corpus"
/// );
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Copy)]
pub struct Family(&'static dyn TaskFamily);

/// Declares each family's module and lists it in [`FAMILIES`], in one line per family.
macro_rules! families {
    ($($module:ident => $family:ident),+ $(,)?) => {
        $(mod $module;)+

        /// Every family, in the order of `rlm eval`'s default suite.
        pub static FAMILIES: &[Family] = &[$(Family(&$module::$family)),+];
    };
}

families! {
    niah => Niah,
    aggregate => Aggregate,
    pairs => Pairs,
    logs => Logs,
    corpus => CorpusQa,
}

impl Family {
    /// A family of your own, beside those of [`FAMILIES`].
    pub const fn new(family: &'static dyn TaskFamily) -> Family {
        Family(family)
    }

    /// The family of [`FAMILIES`] called `name`, if any.
    pub fn named(name: &str) -> Option<Family> {
        FAMILIES.iter().copied().find(|f| f.name() == name)
    }

    /// The name on the command line, in task ids and in results.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// One line: what the family measures and how its answers are scored.
    pub fn description(self) -> &'static str {
        self.0.description()
    }

    /// Whether its contexts are corpora: see [`TaskFamily::corpus`].
    pub fn corpus(self) -> bool {
        self.0.corpus()
    }

    /// The family's generator: see [`TaskFamily::generate`].
    pub fn generate(self, rng: &mut Rng, tokens: usize) -> Generated {
        self.0.generate(rng, tokens)
    }
}

impl PartialEq for Family {
    fn eq(&self, other: &Family) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Family {}

impl Hash for Family {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

impl fmt::Debug for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Family").field(&self.name()).finish()
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
        Family::named(name.trim()).ok_or_else(|| {
            let names: Vec<&str> = FAMILIES.iter().map(|f| f.name()).collect();
            format!(
                "unknown task family `{name}`: expected {}",
                super::one_of(&names)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{SIZE_TOLERANCE, Size, generate_task};
    use crate::tokens;

    #[test]
    fn every_family_of_the_table_fits_the_size_asked_and_repeats_from_its_seed() {
        for &family in FAMILIES {
            for (asked, index) in [(4_000u64, 0), (16_000, 1)] {
                let size = Size::new(asked);
                let task = generate_task(family, size, 1, index);
                assert_eq!(task, generate_task(family, size, 1, index), "{family}");
                assert_ne!(
                    task.context,
                    generate_task(family, size, 2, index).context,
                    "{family}: another seed, another task"
                );
                let count = tokens::count(task.context.as_deref().unwrap_or_default()) as f64;
                let error = (count - asked as f64).abs() / asked as f64;
                assert!(error <= SIZE_TOLERANCE, "{family} {size}: {count} tokens");
                assert!(!task.answer.is_empty(), "{family}");
                assert_eq!(task.family.as_deref(), Some(family.name()));
            }
        }
    }

    #[test]
    fn the_table_names_each_family_once_with_a_one_line_description() {
        for (i, family) in FAMILIES.iter().enumerate() {
            assert_eq!(Family::named(family.name()), Some(*family));
            assert!(!FAMILIES[..i].contains(family), "{family} twice");
            let description = family.description();
            assert!(!description.is_empty() && !description.contains('\n'));
        }
    }

    #[test]
    fn names_parse_trimmed_and_unknown_ones_are_named_in_the_error() {
        assert_eq!(" pairs ".parse::<Family>().ok(), Family::named("pairs"));
        let error = "oolong".parse::<Family>().unwrap_err();
        assert_eq!(
            error,
            "unknown task family `oolong`: expected niah, aggregate, pairs, logs or corpus"
        );
    }
}
