//! A Python callable `(prompt: str, context: str | None) -> str` as the crate's
//! [`SubAgent`]: what `rlm_query` and `rlm_query_batched` run in an `Environment` given
//! `sub_agent=` (the reference RLM's child RLMs, handed over by `LuaREPL`).

use pyo3::prelude::*;
use pyo3::types::PyString;

use rlm_registry::environment::{SubAgent, SubTask};

/// The callable, called with the GIL taken again, from the executing thread or from
/// the threads of a batch (which run together for what the callable does without the
/// GIL: waiting on a model).
pub(crate) struct PythonSubAgent {
    callable: Py<PyAny>,
}

impl PythonSubAgent {
    pub(crate) fn new(callable: Py<PyAny>) -> PythonSubAgent {
        PythonSubAgent { callable }
    }
}

impl SubAgent for PythonSubAgent {
    fn run(&self, task: &SubTask) -> Result<String, String> {
        if task.schema.is_some() {
            // The callable answers text; a typed answer needs the crate's own children.
            return Err(
                "the `schema` option needs the crate's own child agents; this environment's children are a Python callable's"
                    .to_string(),
            );
        }
        Python::try_attach(|py| {
            let answer = self
                .callable
                .bind(py)
                .call1((task.prompt.as_str(), task.context.as_deref()))
                .map_err(|error| raised(py, &error))?;
            match answer.cast::<PyString>() {
                Ok(text) => Ok(text.to_string_lossy().into_owned()),
                Err(_) => Err(format!(
                    "the sub_agent callable returned a {}, not a str",
                    answer
                        .get_type()
                        .name()
                        .map_or_else(|_| "?".to_string(), |name| name.to_string())
                )),
            }
        })
        .unwrap_or_else(|| {
            Err(
                "the sub_agent callable cannot be called: the Python interpreter is shutting down"
                    .to_string(),
            )
        })
    }
}

/// An exception of the callable, as the model reads it (`rlm_query failed: …`).
fn raised(py: Python<'_>, error: &PyErr) -> String {
    let type_name = error
        .get_type(py)
        .name()
        .map_or_else(|_| "an exception".to_string(), |name| name.to_string());
    format!(
        "the sub_agent callable raised {type_name}: {}",
        error.value(py)
    )
}
