//! The check of a first request against a model's context window, for the reference
//! RLM's `LuaRLM`: the crate's own check, with the message `rlm ask` gives.

use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use rlm_registry::llm::{Message, Request};
use rlm_registry::rlm::WindowExceeded;

use crate::convert::json_from_python;
use crate::errors::{LlmError, catching};
use crate::setup::setup_for_prompt;

/// Raises `LlmError` (with the message `rlm ask` gives) when `messages`, a chat of
/// `{"role", "content"}` dicts, and 1,024 tokens kept for the reply (or the reply limit)
/// do not fit `context_window` tokens. `agent` names whose first request it is (`"0"`
/// for the root); the prompt mode (which chooses the fix the message offers) and the
/// reply limit are resolved as `rlm ask` resolves them, from `prompt_mode`, the
/// environment and `config`.
#[pyfunction]
#[pyo3(signature = (messages, context_window, *, prompt_mode = None, config = None, agent = "0"))]
pub(crate) fn _check_first_request(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    context_window: u64,
    prompt_mode: Option<&str>,
    config: Option<PathBuf>,
    agent: &str,
) -> PyResult<()> {
    catching(|| {
        let setup = setup_for_prompt(py, prompt_mode, config.as_deref())?;
        let json = json_from_python(messages, "messages")?;
        let messages: Vec<Message> = serde_json::from_value(json).map_err(|error| {
            PyTypeError::new_err(format!(
                "messages must be a list of {{\"role\", \"content\"}} dicts with text content: {error}"
            ))
        })?;
        let request = Request::new(messages);
        let reply_limit = setup.llm.max_reply_tokens;
        WindowExceeded::check(
            agent,
            &request,
            context_window,
            reply_limit,
            setup.prompt_mode,
        )
        .map_err(|refused| LlmError::new_err(refused.to_string()))
    })
}
