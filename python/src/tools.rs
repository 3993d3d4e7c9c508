//! Python callables as functions the Lua code can call (`Environment(tools=...)`): each
//! becomes a host function of the crate, documented from its signature and docstring
//! (so `help(name)` and `fn_search` know it), its arguments and result crossing by the
//! one Lua ↔ JSON mapping.

use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use serde_json::Value;

use rlm_registry::conventions::is_lua_name;
use rlm_registry::providers::{HostFunction, Providers};

use crate::convert::{json_from_python, json_to_python};
use crate::errors::Failure;

/// The provider the tools are registered under.
const PROVIDER: &str = "python";

/// Lua's reserved words: a Python parameter named so is documented as `argN`.
const LUA_KEYWORDS: [&str; 22] = [
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
    "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
];

/// `base` (the built-in providers when `None`) with each of `tools` registered.
pub(crate) fn with_tools(
    py: Python<'_>,
    base: Option<Arc<Providers>>,
    tools: &Bound<'_, PyDict>,
) -> PyResult<Arc<Providers>> {
    let mut providers = base.map_or_else(Providers::builtin, |base| (*base).clone());
    for (name, callable) in tools.iter() {
        let name: String = name
            .extract()
            .map_err(|_| PyTypeError::new_err("tools: every name must be a str"))?;
        if !callable.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "tools: `{name}` must be a callable, not a {}",
                callable.get_type().name()?
            )));
        }
        let shape = Shape::of(py, &callable)?;
        let doc = shape.doc(&callable)?;
        let callable = callable.unbind();
        let required = shape.required;
        let function = HostFunction::typed(name.clone(), doc, move |_, args: Vec<Value>| {
            call(&callable, args, required)
        });
        providers
            .register_function(PROVIDER, function)
            .map_err(|error| Failure::Config(format!("tools: {error}")).into_pyerr(py))?;
    }
    Ok(Arc::new(providers))
}

/// The parameters Lua can pass a callable: positional ones (some with a default), and
/// whether it takes `*args`.
struct Shape {
    params: Vec<(String, bool)>,
    varargs: bool,
    /// Positional parameters without a default.
    required: usize,
}

impl Shape {
    fn of(py: Python<'_>, callable: &Bound<'_, PyAny>) -> PyResult<Shape> {
        let inspect = py.import("inspect")?;
        let Ok(signature) = inspect.call_method1("signature", (callable,)) else {
            // A callable without a signature (some built-ins): any arguments.
            return Ok(Shape {
                params: Vec::new(),
                varargs: true,
                required: 0,
            });
        };
        let parameter = inspect.getattr("Parameter")?;
        let positional = [
            parameter.getattr("POSITIONAL_ONLY")?,
            parameter.getattr("POSITIONAL_OR_KEYWORD")?,
        ];
        let var_positional = parameter.getattr("VAR_POSITIONAL")?;
        let empty = parameter.getattr("empty")?;
        let mut shape = Shape {
            params: Vec::new(),
            varargs: false,
            required: 0,
        };
        for param in signature
            .getattr("parameters")?
            .call_method0("values")?
            .try_iter()?
        {
            let param = param?;
            let kind = param.getattr("kind")?;
            if kind.eq(&var_positional)? {
                shape.varargs = true;
            } else if positional.iter().any(|k| kind.eq(k).unwrap_or(false)) {
                let optional = !param.getattr("default")?.is(&empty);
                if !optional {
                    shape.required = shape.params.len() + 1;
                }
                let name: String = param.getattr("name")?.extract()?;
                shape.params.push((name, optional));
            }
        }
        Ok(shape)
    }

    /// The LuaLS doc comment: the docstring's first paragraph, each parameter (of any
    /// type), the result.
    fn doc(&self, callable: &Bound<'_, PyAny>) -> PyResult<String> {
        let docstring: Option<String> = callable
            .py()
            .import("inspect")?
            .call_method1("getdoc", (callable,))?
            .extract()?;
        let summary = docstring
            .as_deref()
            .and_then(|text| text.split("\n\n").next())
            .map(|paragraph| paragraph.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|line| !line.is_empty())
            .unwrap_or_else(|| "A function of the Python program.".to_string());
        let mut doc = format!("--- {summary}");
        if !summary.ends_with(['.', '!', '?']) {
            doc.push('.');
        }
        for (index, (name, optional)) in self.params.iter().enumerate() {
            let name = if is_lua_name(name) && !LUA_KEYWORDS.contains(&name.as_str()) {
                name.clone()
            } else {
                format!("arg{}", index + 1)
            };
            let mark = if *optional { "?" } else { "" };
            doc.push_str(&format!("\n---@param {name}{mark} any"));
        }
        if self.varargs {
            doc.push_str("\n---@param ... any");
        }
        doc.push_str("\n---@return any result");
        Ok(doc)
    }
}

/// Calls `callable` with the arguments Lua passed, as JSON; `nil`s past the required
/// parameters are left out, so that Python's defaults apply.
fn call(callable: &Py<PyAny>, mut args: Vec<Value>, required: usize) -> Result<Value, String> {
    while args.len() > required && args.last().is_some_and(Value::is_null) {
        args.pop();
    }
    Python::try_attach(|py| {
        let args = args
            .iter()
            .map(|arg| json_to_python(py, arg))
            .collect::<PyResult<Vec<_>>>()
            .map_err(|error| error.to_string())?;
        let result = callable
            .bind(py)
            .call1(PyTuple::new(py, args).map_err(|error| error.to_string())?)
            .map_err(|error| raised(py, &error))?;
        json_from_python(&result, "result").map_err(|error| raised(py, &error))
    })
    .unwrap_or_else(|| Err("the Python interpreter is shutting down".to_string()))
}

/// A Python exception as the Lua error's text: its type and message.
fn raised(py: Python<'_>, error: &PyErr) -> String {
    let type_name = error
        .get_type(py)
        .name()
        .map_or_else(|_| "Exception".to_string(), |name| name.to_string());
    format!("{type_name}: {}", error.value(py))
}
