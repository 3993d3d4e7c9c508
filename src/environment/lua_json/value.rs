//! The walk's JSON as a `serde_json::Value`: what calls, host functions and
//! `get_global` hand to Rust.

use serde_json::{Map, Number, Value as Json};

use super::walk::Sink;
use crate::engines::meter::{CHECK_BYTES, VALUE_COST, WorkMeter};

/// A `serde_json::Value` being built: the arrays and objects open around the next value,
/// and each whole value made, until it is taken.
#[derive(Default)]
pub(super) struct ValueSink {
    open: Vec<Open>,
    made: Option<Json>,
    /// What the values made so far hold, as the memory limit counts it: a value's own
    /// size is about [`VALUE_COST`], plus its string's bytes.
    held: usize,
}

/// An array or object being filled.
enum Open {
    Array(Vec<Json>),
    /// The object, and the key of the value to come.
    Object(Map<String, Json>, String),
}

impl ValueSink {
    /// The last whole value made (`null` if none was).
    pub(super) fn take(&mut self) -> Json {
        self.made.take().unwrap_or(Json::Null)
    }

    /// Puts `value` where the next value goes: in the innermost open array or object, or
    /// as a whole value.
    fn put(&mut self, value: Json) {
        self.held = self.held.saturating_add(VALUE_COST);
        match self.open.last_mut() {
            Some(Open::Array(items)) => items.push(value),
            Some(Open::Object(object, key)) => {
                object.insert(std::mem::take(key), value);
            }
            None => self.made = Some(value),
        }
    }

    fn close(&mut self) {
        let value = match self.open.pop() {
            Some(Open::Array(items)) => Json::Array(items),
            Some(Open::Object(object, _)) => Json::Object(object),
            None => return,
        };
        self.put(value);
    }
}

impl Sink for ValueSink {
    fn null(&mut self) {
        self.put(Json::Null);
    }

    fn boolean(&mut self, b: bool) {
        self.put(Json::Bool(b));
    }

    fn integer(&mut self, i: i64) {
        self.put(Json::from(i));
    }

    fn float(&mut self, f: f64) {
        // The walk hands over finite floats only, which are all JSON numbers.
        self.put(Number::from_f64(f).map_or(Json::Null, Json::Number));
    }

    fn string(&mut self, s: &str) {
        self.held = self.held.saturating_add(s.len());
        self.put(Json::String(s.to_string()));
    }

    fn begin_array(&mut self, len: usize) {
        self.open.push(Open::Array(Vec::with_capacity(len)));
    }

    fn array_item(&mut self, _first: bool) {}

    fn end_array(&mut self) {
        self.close();
    }

    fn begin_object(&mut self) {
        self.open.push(Open::Object(Map::new(), String::new()));
    }

    fn object_key(&mut self, key: &str, _first: bool) {
        self.held = self.held.saturating_add(key.len());
        if let Some(Open::Object(_, next)) = self.open.last_mut() {
            *next = key.to_string();
        }
    }

    fn end_object(&mut self) {
        self.close();
    }

    fn held(&self) -> usize {
        self.held
    }

    fn before_string(&self, meter: &WorkMeter, len: usize) -> mlua::Result<()> {
        if len < CHECK_BYTES {
            return Ok(());
        }
        meter.check_holding(self.held.saturating_add(len))
    }
}
