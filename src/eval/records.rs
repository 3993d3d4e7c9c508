//! The records of `aggregate` and `pairs` tasks: `date || user id || text`, one a line,
//! each text a question of one latent class (see [`classes`]).
//!
//! Each user has a profile of two to four classes with their own weights, so classes
//! are unevenly spread over users (which makes per-user and pair questions meaningful).

use super::classes::{self, CLASSES};
use super::rng::Rng;
use super::size::fit_lines;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// One record.
pub(super) struct Record {
    pub user: u32,
    pub class: usize,
    pub line: String,
}

/// A user and the classes they write.
struct User {
    id: u32,
    weights: [f64; 6],
}

fn users(rng: &mut Rng, count: usize) -> Vec<User> {
    let mut ids = std::collections::BTreeSet::new();
    while ids.len() < count {
        ids.insert(rng.range(10_000, 99_999) as u32);
    }
    let mut ids: Vec<u32> = ids.into_iter().collect();
    rng.shuffle(&mut ids);
    ids.into_iter()
        .map(|id| {
            let mut classes: Vec<usize> = (0..CLASSES.len()).collect();
            rng.shuffle(&mut classes);
            let mut weights = [0.0; 6];
            for &class in &classes[..rng.range(2, 4)] {
                weights[class] = 0.2 + rng.unit();
            }
            User { id, weights }
        })
        .collect()
}

/// Records of about `target` tokens from `user_count` users (`None`: one user per
/// twenty records or so, at least 8).
pub(super) fn generate(rng: &mut Rng, target: usize, user_count: Option<usize>) -> Vec<Record> {
    // About 25 tokens a record.
    let expected_records = target / 25;
    let count = user_count.unwrap_or((expected_records / 20).clamp(8, 5_000));
    let users = users(rng, count);
    // Users write unequally often too.
    let activity: Vec<f64> = users.iter().map(|_| 0.3 + rng.unit()).collect();
    fit_lines(
        target,
        || {
            let user = &users[rng.weighted(&activity)];
            let class = rng.weighted(&user.weights);
            let date = format!(
                "{} {:02}, {}",
                MONTHS[rng.below(12)],
                rng.range(1, 28),
                rng.range(2021, 2025)
            );
            let text = classes::question(rng, class);
            Record {
                user: user.id,
                class,
                line: format!("{date} || {} || {text}\n", user.id),
            }
        },
        |record| record.line.as_str(),
    )
}

/// Counts per class.
pub(super) fn class_counts(records: &[Record]) -> [usize; 6] {
    let mut counts = [0; 6];
    for record in records {
        counts[record.class] += 1;
    }
    counts
}

/// The preamble every question over records starts with.
pub(super) fn preamble() -> String {
    format!(
        "The context has one record per line: `date || user id || text`. Each text is a question that belongs to exactly one of six classes: {}. The class is not written in the record: read the text to know it.",
        classes::CLASS_GUIDE
    )
}

/// The context of `records`.
pub(super) fn context(records: &[Record]) -> String {
    records.iter().map(|r| r.line.as_str()).collect()
}
