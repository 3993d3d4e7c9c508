//! [`Shard`]: `--shard K/N`, the part of an eval's tasks one of N workers runs.
//!
//! The split is round-robin over the task ids in sorted order: the shards' sizes differ
//! by one at most (a hash of the id leaves some shards twice the size of others on a few
//! dozen tasks), the families and sizes of generated tasks are spread across the shards
//! (their ids sort by family, then size), and the order the tasks are listed in does not
//! matter. Every worker must be given the same tasks; `rlm eval merge` checks it.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::task::Task;

/// Shard `index` of `count`, both counted from 1: `2/4` is the second of four.
///
/// ```
/// use rlm_registry::eval::Shard;
///
/// let shard: Shard = "2/4".parse()?;
/// assert_eq!((shard.index(), shard.count()), (2, 4));
/// assert_eq!(shard.to_string(), "2/4");
/// assert!("0/4".parse::<Shard>().unwrap_err().contains("from 1 to 4"));
/// assert!(Shard::WHOLE.is_whole());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    /// Every task: `1/1`, what a run without `--shard` is.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Shard `index` of `count`; `None` unless `1 <= index <= count`.
    pub fn new(index: u32, count: u32) -> Option<Shard> {
        (1..=count)
            .contains(&index)
            .then_some(Shard { index, count })
    }

    /// Which shard, from 1.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// How many shards in all.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether this is every task (`1/1`).
    pub fn is_whole(&self) -> bool {
        self.count == 1
    }

    /// The tasks of this shard, in the order given.
    ///
    /// ```
    /// use rlm_registry::eval::{Family, Shard, Size, generate};
    ///
    /// let tasks = generate(&["niah".parse::<Family>()?], &[Size::new(1_000)], 5, 1);
    /// let sizes: Vec<usize> = (1..=2)
    ///     .map(|k| Shard::new(k, 2).unwrap().select(&tasks).len())
    ///     .collect();
    /// assert_eq!(sizes, [3, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn select(&self, tasks: &[Task]) -> Vec<Task> {
        let shards = shard_of_ids(tasks.iter().map(|t| t.id.as_str()), self.count);
        tasks
            .iter()
            .filter(|t| shards.get(t.id.as_str()) == Some(&self.index))
            .cloned()
            .collect()
    }

    /// The ids of this shard among `ids` (the ids of all the tasks), in the order given:
    /// those of the tasks [`Shard::select`] picks.
    pub fn select_ids<'a>(&self, ids: &'a [String]) -> Vec<&'a str> {
        let shards = shard_of_ids(ids.iter().map(String::as_str), self.count);
        ids.iter()
            .map(String::as_str)
            .filter(|id| shards.get(id) == Some(&self.index))
            .collect()
    }
}

/// The shard (from 1) of each distinct id among `ids`, split `count` ways.
fn shard_of_ids<'a>(ids: impl Iterator<Item = &'a str>, count: u32) -> HashMap<&'a str, u32> {
    let mut sorted: Vec<&str> = ids.collect();
    sorted.sort_unstable();
    sorted.dedup();
    sorted
        .into_iter()
        .zip((0..count.max(1)).cycle())
        .map(|(id, slot)| (id, slot + 1))
        .collect()
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let shape = || format!("`{text}` is not a shard: write K/N, such as 1/4");
        let (index, count) = text.trim().split_once('/').ok_or_else(shape)?;
        let index: u32 = index.trim().parse().map_err(|_| shape())?;
        let count: u32 = count.trim().parse().map_err(|_| shape())?;
        if count == 0 {
            return Err(format!("`{text}`: the number of shards must be at least 1"));
        }
        Shard::new(index, count).ok_or_else(|| {
            format!("`{text}`: the shard must be from 1 to {count} (K of K/N counts from 1)")
        })
    }
}

impl Serialize for Shard {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Shard {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Shard, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_shards_say_what_is_wrong() {
        for (text, message) in [
            ("0/4", "from 1 to 4"),
            ("5/4", "from 1 to 4"),
            ("1/0", "at least 1"),
            ("x/y", "write K/N"),
            ("3", "write K/N"),
            ("-1/4", "write K/N"),
            ("", "write K/N"),
        ] {
            let error = text.parse::<Shard>().unwrap_err();
            assert!(error.contains(message), "{text}: {error}");
        }
    }

    #[test]
    fn a_shard_reads_back_what_it_writes() {
        let shard: Shard = " 3 / 7 ".parse().unwrap();
        assert_eq!(shard, Shard::new(3, 7).unwrap());
        let json = serde_json::to_string(&shard).unwrap();
        assert_eq!(json, "\"3/7\"");
        assert_eq!(serde_json::from_str::<Shard>(&json).unwrap(), shard);
    }
}
