//! A string → `u32` hash table in three flat arrays, so the code generator can bake it
//! and a lookup borrows the key instead of allocating one.

use std::borrow::Cow;

/// Open addressing with linear probing over FNV-1a hashes; at most half full.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrTable {
    /// A power of two long; 0 is an empty slot, `i + 1` is entry `i`.
    slots: Cow<'static, [u32]>,
    /// Every key, concatenated: key `i` ends at `ends[i]` and starts where `i - 1` ends.
    keys: Cow<'static, str>,
    ends: Cow<'static, [u32]>,
    values: Cow<'static, [u32]>,
}

fn fnv1a(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl StrTable {
    /// A table with no keys.
    pub const fn empty() -> StrTable {
        StrTable::__from_static(&[], "", &[], &[])
    }

    /// Used by generated code; not part of the stable API.
    #[doc(hidden)]
    pub const fn __from_static(
        slots: &'static [u32],
        keys: &'static str,
        ends: &'static [u32],
        values: &'static [u32],
    ) -> StrTable {
        StrTable {
            slots: Cow::Borrowed(slots),
            keys: Cow::Borrowed(keys),
            ends: Cow::Borrowed(ends),
            values: Cow::Borrowed(values),
        }
    }

    /// A table of `entries`, in their order; of equal keys the first wins.
    pub fn build(entries: impl IntoIterator<Item = (String, u32)>) -> StrTable {
        let entries: Vec<(String, u32)> = entries.into_iter().collect();
        let mut keys = String::new();
        let (mut ends, mut values) = (Vec::new(), Vec::new());
        let mut slots = vec![0u32; (entries.len() * 2).next_power_of_two().max(2)];
        let mask = slots.len() - 1;
        for (key, value) in entries {
            let mut at = fnv1a(&key) as usize & mask;
            // Probe to the key's slot, or to the first empty one.
            while slots[at] != 0 && table_key(&keys, &ends, slots[at] as usize - 1) != key {
                at = (at + 1) & mask;
            }
            if slots[at] != 0 {
                continue;
            }
            keys.push_str(&key);
            ends.push(keys.len() as u32);
            values.push(value);
            slots[at] = values.len() as u32;
        }
        StrTable {
            slots: slots.into(),
            keys: keys.into(),
            ends: ends.into(),
            values: values.into(),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut at = fnv1a(key) as usize & mask;
        loop {
            let entry = *self.slots.get(at)?;
            if entry == 0 {
                return None;
            }
            let i = entry as usize - 1;
            if table_key(&self.keys, &self.ends, i) == key {
                return self.values.get(i).copied();
            }
            at = (at + 1) & mask;
        }
    }

    /// The `i`th key, in insertion order.
    pub fn key(&self, i: usize) -> &str {
        table_key(&self.keys, &self.ends, i)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The flat parts, for the code generator: slots, keys, key ends, values.
    #[cfg_attr(not(feature = "build"), allow(dead_code))]
    pub(crate) fn parts(&self) -> (&[u32], &str, &[u32], &[u32]) {
        (&self.slots, &self.keys, &self.ends, &self.values)
    }
}

fn table_key<'k>(keys: &'k str, ends: &[u32], i: usize) -> &'k str {
    let start = if i == 0 {
        0
    } else {
        ends.get(i - 1).map_or(0, |&e| e as usize)
    };
    let end = ends.get(i).map_or(start, |&e| e as usize);
    keys.get(start..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_key_and_nothing_else() {
        let words = ["word", "count", "", "wörd", "a", "b", "counts"];
        let table = StrTable::build(
            words
                .iter()
                .enumerate()
                .map(|(i, w)| (w.to_string(), i as u32)),
        );
        for (i, w) in words.iter().enumerate() {
            assert_eq!(table.get(w), Some(i as u32), "{w}");
            assert_eq!(table.key(i), *w);
        }
        assert_eq!(table.get("wor"), None);
        assert_eq!(table.get("countss"), None);
        assert_eq!(StrTable::empty().get("x"), None);
    }

    #[test]
    fn the_first_of_equal_keys_wins() {
        let table = StrTable::build([("x".to_string(), 1), ("x".to_string(), 2)]);
        assert_eq!(table.get("x"), Some(1));
        assert_eq!(table.len(), 1);
    }
}
