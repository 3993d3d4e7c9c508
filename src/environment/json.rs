//! JSON ↔ Lua values, for [`Environment::call_function`](super::Environment::call_function).

use mlua::{Lua, MultiValue, Value};
use serde_json::{Map, Number, Value as Json};

use super::errors::shown;
use crate::engines::meter::{VALUE_COST, WorkMeter};

/// What a conversion to JSON has made so far, outside Lua: it counts against the memory
/// limit as it grows, since JSON has no references and a table that a value reaches many
/// times (`x = {x, x}` twelve times over) is written out each time.
pub(super) struct Made<'m, 'l> {
    meter: &'m mut WorkMeter<'l>,
    bytes: usize,
}

impl<'m, 'l> Made<'m, 'l> {
    pub(super) fn new(meter: &'m mut WorkMeter<'l>) -> Self {
        Made { meter, bytes: 0 }
    }

    fn add(&mut self, bytes: usize) -> mlua::Result<()> {
        self.bytes = self.bytes.saturating_add(bytes);
        self.meter.hold(self.bytes);
        self.meter.spend(bytes)
    }
}

/// Deeper nesting is an error (in both directions), which also stops cycles.
const MAX_DEPTH: usize = 64;

fn error(message: String) -> mlua::Error {
    mlua::Error::RuntimeError(message)
}

/// A JSON value as a Lua value.
pub(super) fn to_lua(lua: &Lua, value: &Json, depth: usize) -> mlua::Result<Value> {
    if depth > MAX_DEPTH {
        return Err(error(format!(
            "argument nested deeper than {MAX_DEPTH} levels"
        )));
    }
    Ok(match value {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(number) => match number.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Number(number.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::String(lua.create_string(s)?),
        Json::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, to_lua(lua, item, depth + 1)?)?;
            }
            Value::Table(table)
        }
        Json::Object(object) => {
            let table = lua.create_table_with_capacity(0, object.len())?;
            for (key, item) in object {
                table.raw_set(key.as_str(), to_lua(lua, item, depth + 1)?)?;
            }
            Value::Table(table)
        }
    })
}

/// A function's results as one JSON value: none → null, one → it, more → an array.
pub(super) fn results_to_json(results: MultiValue, made: &mut Made) -> mlua::Result<Json> {
    let mut values: Vec<Json> = Vec::with_capacity(results.len());
    for (i, value) in results.into_iter().enumerate() {
        let path = if i == 0 {
            "result".to_string()
        } else {
            format!("result {}", i + 1)
        };
        values.push(to_json(&value, &path, 0, made)?);
    }
    Ok(match values.len() {
        0 => Json::Null,
        1 => values.pop().unwrap_or(Json::Null),
        _ => Json::Array(values),
    })
}

pub(super) fn to_json(
    value: &Value,
    path: &str,
    depth: usize,
    made: &mut Made,
) -> mlua::Result<Json> {
    if depth > MAX_DEPTH {
        return Err(error(format!(
            "{path}: nested deeper than {MAX_DEPTH} levels (a cycle?)"
        )));
    }
    let size = match value {
        Value::String(s) => s.as_bytes().len(),
        _ => 0,
    };
    made.add(size + VALUE_COST)?;
    Ok(match value {
        Value::Nil => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(i) => Json::from(*i),
        Value::Number(n) => Json::Number(
            Number::from_f64(*n)
                .ok_or_else(|| error(format!("{path}: {n} cannot be written as JSON")))?,
        ),
        Value::String(s) => Json::String(s.to_string_lossy()),
        Value::Table(table) => {
            let mut pairs: Vec<(Value, Value)> = Vec::new();
            for pair in table.pairs::<Value, Value>() {
                pairs.push(pair?);
            }
            let n = pairs.len();
            let is_sequence = pairs.iter().all(|(key, _)| match key {
                Value::Integer(i) => *i >= 1 && (*i as u64) <= n as u64,
                _ => false,
            });
            if is_sequence {
                // Keys are distinct and all in 1..=n, so they are exactly 1..=n.
                let mut items = vec![Json::Null; n];
                for (key, item) in &pairs {
                    if let Value::Integer(i) = key {
                        let index = (*i - 1) as usize;
                        items[index] = to_json(item, &format!("{path}[{i}]"), depth + 1, made)?;
                    }
                }
                Json::Array(items)
            } else {
                let mut object = Map::new();
                for (key, item) in &pairs {
                    let key = match key {
                        Value::String(s) => s.to_string_lossy(),
                        Value::Integer(i) => i.to_string(),
                        Value::Number(n) => n.to_string(),
                        Value::Boolean(b) => b.to_string(),
                        other => {
                            return Err(error(format!(
                                "{path}: a table key of type {} cannot be a JSON key",
                                other.type_name()
                            )));
                        }
                    };
                    made.add(key.len())?;
                    let item = to_json(
                        item,
                        &format!("{path}.{}", shown(key.as_bytes())),
                        depth + 1,
                        made,
                    )?;
                    object.insert(key, item);
                }
                Json::Object(object)
            }
        }
        other => {
            return Err(error(format!(
                "{path}: a {} cannot be written as JSON",
                other.type_name()
            )));
        }
    })
}
