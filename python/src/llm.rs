//! A Python callable `(prompt: str) -> str` as the crate's [`Llm`]: what `llm_query` and
//! `llm_query_batched` call in an `Environment` given `llm=`; and `split_thinking`, the
//! crate's one reading of a reasoning model's thinking, for Python code that handles
//! replies the sandbox never sees.

use pyo3::prelude::*;
use pyo3::types::PyString;

use rlm_registry::llm::{Completion, Llm, LlmError, Request};

use crate::errors::catching;

/// A reply split at the end of its thinking: `(thinking, answer)`, the thinking `None`
/// when the reply has none; a reply that is all thinking has the answer `""`.
#[pyfunction]
#[pyo3(text_signature = "(reply)")]
pub fn split_thinking(reply: &str) -> PyResult<(Option<&str>, &str)> {
    catching(|| {
        let split = rlm_registry::llm::split_thinking(reply);
        Ok((split.thinking, split.answer))
    })
}

/// The callable, called with the GIL taken again (from the executing thread, or
/// from the threads of a batch, one at a time but for what it does without the GIL).
pub(crate) struct PythonLlm {
    callable: Py<PyAny>,
}

impl PythonLlm {
    pub(crate) fn new(callable: Py<PyAny>) -> PythonLlm {
        PythonLlm { callable }
    }
}

impl Llm for PythonLlm {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        let prompt = prompt_of(&request);
        Python::try_attach(|py| {
            let answer = self
                .callable
                .bind(py)
                .call1((prompt.as_str(),))
                .map_err(|error| raised(py, &error))?;
            let answer = answer.cast::<PyString>().map_err(|_| {
                let type_name = answer
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".to_string(), |name| name.to_string());
                LlmError::Callback(format!(
                    "the llm callable returned a {type_name}, not a str"
                ))
            })?;
            Ok(Completion::new(answer.to_string_lossy()))
        })
        .unwrap_or_else(|| {
            Err(LlmError::Callback(
                "the llm callable cannot be called: the Python interpreter is shutting down"
                    .to_string(),
            ))
        })
    }
}

/// The request as one prompt: `llm_query` sends one user message; an LLM search mode
/// sends its instructions first, then the query, and the callable gets both.
fn prompt_of(request: &Request) -> String {
    let texts: Vec<&str> = request.messages.iter().map(|m| m.text()).collect();
    texts.join("\n\n")
}

/// An exception of the callable, as the model reads it (`llm_query failed: …`).
fn raised(py: Python<'_>, error: &PyErr) -> LlmError {
    let type_name = error
        .get_type(py)
        .name()
        .map_or_else(|_| "an exception".to_string(), |name| name.to_string());
    LlmError::Callback(format!(
        "the llm callable raised {type_name}: {}",
        error.value(py)
    ))
}
