//! The sort behind `lua/collections`' `sort_by`: the Lua side computes each item's key
//! once (the decorate step), this sorts the positions by key in Rust (stable, so equal
//! keys keep their order, also when reversed) and builds the sorted list.
//!
//! Keys are numbers, strings or lists of them, in one total order: numbers (NaN after
//! every other number), then strings (byte order, as Lua's `<` in the C locale), then
//! lists compared item by item, the shorter first when one is a prefix of the other. The
//! pure-Lua fallback of `sort_by` orders them the same way.
//!
//! ```
//! use rlm_registry::{Registry, environment::{Environment, Limits}};
//!
//! let env = Environment::new(Registry::baked().clone(), Limits::default())?;
//! let run = env.execute(r#"print(table.concat(sort_by({"bb", "a", "cc"}, function(s) return #s end), " "))"#)?;
//! assert_eq!(run.output, "a bb cc\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cmp::Ordering;
use std::rc::Rc;

use mlua::{Lua, Table, Value};

use super::limits::Tripwire;
use super::meter::{VALUE_COST, WorkMeter};

/// How deep list keys may nest (a key table that contains itself would never end).
const MAX_KEY_DEPTH: usize = 16;

/// One item's sort key, copied out of Lua.
#[derive(Debug, Clone, PartialEq)]
enum SortKey {
    Integer(i64),
    Float(f64),
    Text(Box<[u8]>),
    List(Vec<SortKey>),
}

impl SortKey {
    /// The rank of the key's kind in the order: numbers, strings, lists.
    fn rank(&self) -> u8 {
        match self {
            SortKey::Integer(_) | SortKey::Float(_) => 0,
            SortKey::Text(_) => 1,
            SortKey::List(_) => 2,
        }
    }

    /// The bytes this key holds outside Lua, beyond its own size.
    fn heap_bytes(&self) -> usize {
        match self {
            SortKey::Text(bytes) => bytes.len(),
            SortKey::List(items) => items
                .iter()
                .map(|item| std::mem::size_of::<SortKey>() + item.heap_bytes())
                .sum(),
            SortKey::Integer(_) | SortKey::Float(_) => 0,
        }
    }
}

/// Floats in a total order: NaN after every number and equal to itself.
fn compare_floats(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b)
        .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// The one order of sort keys (see the module documentation).
fn compare(a: &SortKey, b: &SortKey) -> Ordering {
    match (a, b) {
        (SortKey::Integer(x), SortKey::Integer(y)) => x.cmp(y),
        (SortKey::Float(x), SortKey::Float(y)) => compare_floats(*x, *y),
        (SortKey::Integer(x), SortKey::Float(y)) => compare_floats(*x as f64, *y),
        (SortKey::Float(x), SortKey::Integer(y)) => compare_floats(*x, *y as f64),
        (SortKey::Text(x), SortKey::Text(y)) => x.cmp(y),
        (SortKey::List(x), SortKey::List(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| compare(p, q))
            .find(|order| order.is_ne())
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        _ => a.rank().cmp(&b.rank()),
    }
}

/// Why a key cannot be sorted: the message `sort_by` raises at its caller.
type KeyError = String;

/// The sort key of item `item` (1-based, for the error) from its Lua value.
fn sort_key(value: &Value, item: usize, depth: usize) -> mlua::Result<Result<SortKey, KeyError>> {
    let bad = |what: &str| {
        Ok(Err(format!(
            "sort_by: the key of item {item} is {what} (keys must be numbers, strings or lists of them)"
        )))
    };
    Ok(Ok(match value {
        Value::Integer(n) => SortKey::Integer(*n),
        Value::Number(x) => SortKey::Float(*x),
        Value::String(text) => SortKey::Text(text.as_bytes().to_vec().into_boxed_slice()),
        Value::Table(list) if depth < MAX_KEY_DEPTH => {
            let length = list.raw_len();
            let mut items = Vec::with_capacity(length);
            for position in 1..=length {
                let value: Value = list.raw_get(position)?;
                match sort_key(&value, item, depth + 1)? {
                    Ok(key) => items.push(key),
                    Err(error) => return Ok(Err(error)),
                }
            }
            SortKey::List(items)
        }
        Value::Table(_) => return bad("a list nested too deeply"),
        Value::Nil => return bad("nil"),
        other => return bad(&format!("a {}", other.type_name())),
    }))
}

/// `sort_by(list, keys, reverse)`: the items of `list` ordered by `keys[i]`, stable; or
/// why a key cannot be sorted.
fn sort_by(
    lua: &Lua,
    list: &Table,
    keys: &Table,
    reverse: bool,
    meter: &mut WorkMeter,
) -> mlua::Result<Result<Table, KeyError>> {
    let length = list.raw_len();
    let mut decorated = Vec::with_capacity(length);
    let mut held = length * std::mem::size_of::<(SortKey, usize)>();
    for position in 1..=length {
        let key = match sort_key(&keys.raw_get::<Value>(position)?, position, 0)? {
            Ok(key) => key,
            Err(error) => return Ok(Err(error)),
        };
        held += key.heap_bytes();
        meter.hold(held);
        meter.spend(VALUE_COST)?;
        decorated.push((key, position));
    }
    meter.check()?;
    // `sort_by` is stable: equal keys keep their order whichever the direction.
    if reverse {
        decorated.sort_by(|(a, _), (b, _)| compare(b, a));
    } else {
        decorated.sort_by(|(a, _), (b, _)| compare(a, b));
    }
    meter.check()?;
    let sorted = lua.create_table_with_capacity(length, 0)?;
    for (index, (_, position)) in decorated.iter().enumerate() {
        sorted.raw_set(index + 1, list.raw_get::<Value>(*position)?)?;
        meter.spend(VALUE_COST)?;
    }
    Ok(Ok(sorted))
}

/// Adds the sort primitive to the hidden table of text primitives.
pub(crate) fn add_primitives(
    lua: &Lua,
    primitives: &Table,
    tripwire: &Rc<Tripwire>,
) -> mlua::Result<()> {
    let tripwire = Rc::clone(tripwire);
    let function = lua.create_function(
        move |lua, (list, keys, reverse): (Table, Table, bool)| {
            let mut meter = WorkMeter::new(lua, &tripwire);
            // A bad key is (nil, message), raised by the Lua side at its caller.
            Ok(match sort_by(lua, &list, &keys, reverse, &mut meter)? {
                Ok(sorted) => (Some(sorted), None),
                Err(message) => (None, Some(message)),
            })
        },
    )?;
    primitives.raw_set("sort_by", function)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> SortKey {
        SortKey::Text(s.as_bytes().into())
    }

    #[test]
    fn numbers_sort_before_strings_before_lists() {
        let mut keys = vec![
            SortKey::List(vec![SortKey::Integer(1)]),
            text("a"),
            SortKey::Float(2.5),
            SortKey::Integer(3),
        ];
        keys.sort_by(compare);
        assert_eq!(
            keys,
            vec![
                SortKey::Float(2.5),
                SortKey::Integer(3),
                text("a"),
                SortKey::List(vec![SortKey::Integer(1)]),
            ]
        );
    }

    #[test]
    fn nan_sorts_after_every_number_and_ties_with_itself() {
        assert_eq!(
            compare(&SortKey::Float(f64::NAN), &SortKey::Float(f64::INFINITY)),
            Ordering::Greater
        );
        assert_eq!(
            compare(&SortKey::Integer(i64::MAX), &SortKey::Float(f64::NAN)),
            Ordering::Less
        );
        assert_eq!(
            compare(&SortKey::Float(f64::NAN), &SortKey::Float(f64::NAN)),
            Ordering::Equal
        );
    }

    #[test]
    fn lists_compare_item_by_item_then_by_length() {
        let short = SortKey::List(vec![text("a")]);
        let long = SortKey::List(vec![text("a"), SortKey::Integer(0)]);
        let later = SortKey::List(vec![text("b")]);
        assert_eq!(compare(&short, &long), Ordering::Less);
        assert_eq!(compare(&long, &later), Ordering::Less);
    }
}
