//! Python values ↔ Lua globals, through the crate's one Lua ↔ JSON mapping.
//!
//! A `str` or `bytes` given as a whole value is a Lua string of its bytes (UTF-8 for a
//! `str`); any other value crosses as JSON: `dict` (keys `str`), `list` and `tuple`,
//! `str`, `int`, `float`, `bool`, `None`, and `bytes` inside them when they are UTF-8. An
//! `int` outside the 64-bit signed range becomes a float, as `json.decode` makes it. The
//! way back: a Lua string as a whole value is a `str`, or `bytes` when it is not UTF-8;
//! everything else as the mapping gives it. A value that cannot cross is a `TypeError`
//! naming where it is, in the mapping's words.

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple,
};
use serde_json::{Map, Number, Value};

use rlm_registry::environment::GlobalValue;
use rlm_registry::environment::lua_json::{MAX_DEPTH, push_key};

/// `value` as the global `name` is set to.
pub(crate) fn global_from_python(value: &Bound<'_, PyAny>, name: &str) -> PyResult<GlobalValue> {
    if let Some(bytes) = whole_bytes(value, name)? {
        return Ok(GlobalValue::String(bytes));
    }
    json_from_python(value, name).map(GlobalValue::Json)
}

/// The bytes of a `str` (as UTF-8), `bytes` or `bytearray`, or `None` for another type.
fn whole_bytes(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<Vec<u8>>> {
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(Some(utf8_of(text, name)?.as_bytes().to_vec()));
    }
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(Some(bytes.as_bytes().to_vec()));
    }
    if let Ok(bytes) = value.cast::<PyByteArray>() {
        return Ok(Some(bytes.to_vec()));
    }
    Ok(None)
}

/// A global's value as Python holds it.
pub(crate) fn global_to_python(py: Python<'_>, value: GlobalValue) -> PyResult<Py<PyAny>> {
    match value {
        GlobalValue::String(bytes) => Ok(match String::from_utf8(bytes) {
            Ok(text) => PyString::new(py, &text).into_any().unbind(),
            Err(error) => PyBytes::new(py, error.as_bytes()).into_any().unbind(),
        }),
        GlobalValue::Json(json) => json_to_python(py, &json).map(Bound::unbind),
    }
}

/// `value` as JSON; `root` names it in a refusal.
pub(crate) fn json_from_python(value: &Bound<'_, PyAny>, root: &str) -> PyResult<Value> {
    let mut walk = Walk {
        path: root.to_string(),
        open: Vec::new(),
    };
    walk.value(value)
}

/// Where the walk is: the path to the value (for refusals) and the containers around
/// it (for cycles and depth).
struct Walk {
    path: String,
    open: Vec<usize>,
}

impl Walk {
    fn value(&mut self, value: &Bound<'_, PyAny>) -> PyResult<Value> {
        if value.is_none() {
            return Ok(Value::Null);
        }
        // `bool` first: it is a subclass of `int`.
        if let Ok(flag) = value.cast::<PyBool>() {
            return Ok(Value::Bool(flag.is_true()));
        }
        if let Ok(integer) = value.cast::<PyInt>() {
            return self.integer(integer);
        }
        if let Ok(float) = value.cast::<PyFloat>() {
            return self.float(float.value());
        }
        if let Ok(text) = value.cast::<PyString>() {
            return Ok(Value::String(utf8_of(text, &self.path)?.to_string()));
        }
        if let Ok(bytes) = value.cast::<PyBytes>() {
            return self.bytes(bytes.as_bytes());
        }
        if let Ok(bytes) = value.cast::<PyByteArray>() {
            return self.bytes(&bytes.to_vec());
        }
        if let Ok(list) = value.cast::<PyList>() {
            return self.container(value, |walk| walk.items(list.iter()));
        }
        if let Ok(tuple) = value.cast::<PyTuple>() {
            return self.container(value, |walk| walk.items(tuple.iter()));
        }
        if let Ok(dict) = value.cast::<PyDict>() {
            return self.container(value, |walk| walk.dict(dict));
        }
        let type_name = value.get_type().name()?;
        Err(self.refused(format!("cannot encode a {type_name}")))
    }

    fn integer(&self, integer: &Bound<'_, PyInt>) -> PyResult<Value> {
        if let Ok(small) = integer.extract::<i64>() {
            return Ok(Value::from(small));
        }
        let float: f64 = integer.extract().map_err(|error: PyErr| {
            PyOverflowError::new_err(format!("{} (at {})", error.value(integer.py()), self.path))
        })?;
        self.float(float)
    }

    fn float(&self, float: f64) -> PyResult<Value> {
        Number::from_f64(float).map(Value::Number).ok_or_else(|| {
            let shown = if float.is_nan() {
                "nan".to_string()
            } else if float > 0.0 {
                "inf".to_string()
            } else {
                "-inf".to_string()
            };
            self.refused(format!("{shown} is not a JSON number"))
        })
    }

    fn bytes(&self, bytes: &[u8]) -> PyResult<Value> {
        std::str::from_utf8(bytes)
            .map(|text| Value::String(text.to_string()))
            .map_err(|error| {
                PyTypeError::new_err(format!(
                    "the string at {} is not valid UTF-8 (byte {})",
                    self.path,
                    error.valid_up_to() + 1
                ))
            })
    }

    /// Walks into a list, tuple or dict, refusing one already open (a cycle) or one too
    /// deep, as the mapping refuses a Lua table.
    fn container(
        &mut self,
        value: &Bound<'_, PyAny>,
        walk: impl FnOnce(&mut Self) -> PyResult<Value>,
    ) -> PyResult<Value> {
        let id = value.as_ptr() as usize;
        if self.open.contains(&id) {
            let type_name = value.get_type().name()?;
            return Err(PyTypeError::new_err(format!(
                "cycle: the {type_name} at {} contains itself",
                self.path
            )));
        }
        if self.open.len() >= MAX_DEPTH {
            return Err(self.refused(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.open.push(id);
        let converted = walk(self);
        self.open.pop();
        converted
    }

    fn items<'py>(&mut self, items: impl Iterator<Item = Bound<'py, PyAny>>) -> PyResult<Value> {
        let mut array = Vec::new();
        for (index, item) in items.enumerate() {
            let length = self.path.len();
            // Positions from 1, as the mapping (and Lua) counts them.
            self.path.push_str(&format!("[{}]", index + 1));
            array.push(self.value(&item)?);
            self.path.truncate(length);
        }
        Ok(Value::Array(array))
    }

    fn dict(&mut self, dict: &Bound<'_, PyDict>) -> PyResult<Value> {
        let mut object = Map::new();
        for (key, item) in dict.iter() {
            let Ok(key) = key.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "the dict at {} has key {}: JSON keys are strings",
                    self.path,
                    key.repr()?
                )));
            };
            let key = utf8_of(key, &self.path)?;
            let length = self.path.len();
            push_key(&mut self.path, key.as_bytes());
            let converted = self.value(&item)?;
            self.path.truncate(length);
            object.insert(key.to_string(), converted);
        }
        Ok(Value::Object(object))
    }

    fn refused(&self, what: String) -> PyErr {
        PyTypeError::new_err(format!("{what} (at {})", self.path))
    }
}

/// The UTF-8 of `text`, or a `TypeError` for a `str` with a lone surrogate, which has
/// none.
fn utf8_of<'a>(text: &'a Bound<'_, PyString>, at: &str) -> PyResult<&'a str> {
    text.to_str().map_err(|_| {
        PyTypeError::new_err(format!(
            "the string at {at} has a lone surrogate, which UTF-8 cannot hold"
        ))
    })
}

/// JSON as Python: objects as `dict`, arrays as `list`, integers as `int`, other
/// numbers as `float`.
pub(crate) fn json_to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
        Value::Number(number) => match (number.as_i64(), number.as_u64()) {
            (Some(integer), _) => integer.into_pyobject(py)?.into_any(),
            (None, Some(integer)) => integer.into_pyobject(py)?.into_any(),
            _ => number
                .as_f64()
                .unwrap_or(f64::NAN)
                .into_pyobject(py)?
                .into_any(),
        },
        Value::String(text) => PyString::new(py, text).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(entries) => {
            let dict = PyDict::new(py);
            for (key, item) in entries {
                dict.set_item(key, json_to_python(py, item)?)?;
            }
            dict.into_any()
        }
    })
}
