//! [`generate`] and [`generate_task`]: the generated task suites, deterministic from a
//! seed; the families themselves are in `families/`.

use super::families::Family;
use super::rng::Rng;
use super::size::Size;
use super::task::Task;

/// Task `index` of `family` at `size`, from `seed`: the same arguments give the same
/// bytes, on every platform.
///
/// ```
/// use rlm_registry::eval::{Family, Size, generate_task};
///
/// let niah = Family::named("niah").expect("a family of the table");
/// let task = generate_task(niah, Size::new(2_000), 1, 0);
/// assert_eq!(task.id, "niah-2k-s1-000");
/// assert!(task.context.as_deref().unwrap().contains(&task.answer));
/// assert_eq!(task, generate_task(niah, Size::new(2_000), 1, 0));
/// ```
pub fn generate_task(family: Family, size: Size, seed: u64, index: usize) -> Task {
    let label = format!("{family}-{size}");
    let mut rng = Rng::for_task(seed, &label, index);
    let generated = family.generate(&mut rng, size.tokens() as usize);
    Task {
        id: format!("{label}-s{seed}-{index:03}"),
        question: generated.question,
        context: Some(generated.context),
        context_file: None,
        answer: generated.answer,
        scorer: generated.scorer,
        family: Some(family.name().to_string()),
        size: Some(size.tokens()),
        schema: None,
        corpus: family.corpus(),
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
    use crate::eval::FAMILIES;

    #[test]
    fn tiny_sizes_give_tasks_without_panicking() {
        for &family in FAMILIES {
            let task = generate_task(family, Size::new(0), 1, 0);
            assert!(!task.answer.is_empty());
        }
    }

    #[test]
    fn different_indices_give_different_tasks() {
        for &family in FAMILIES {
            let a = generate_task(family, Size::new(2_000), 1, 0);
            let b = generate_task(family, Size::new(2_000), 1, 1);
            assert_ne!(a.context, b.context, "{family}");
        }
    }

    #[test]
    fn families_sizes_and_indices_come_in_that_order() {
        let families = [FAMILIES[1], FAMILIES[0]];
        let sizes = [Size::new(1_000), Size::new(2_000)];
        let ids: Vec<String> = generate(&families, &sizes, 2, 3)
            .into_iter()
            .map(|task| task.id)
            .collect();
        let first = families[0].name();
        assert_eq!(ids.len(), 8);
        assert_eq!(ids[0], format!("{first}-1k-s3-000"));
        assert_eq!(ids[1], format!("{first}-1k-s3-001"));
        assert_eq!(ids[2], format!("{first}-2k-s3-000"));
        assert!(ids[4].starts_with(families[1].name()));
    }
}
