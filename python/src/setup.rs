//! A run's setup from Python's arguments: the arguments over the environment variables
//! over `config`'s `rlm.toml`, resolved as `rlm ask` resolves its flags
//! (`rlm_registry::setup`).

use std::path::Path;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use rlm_registry::rlm::PromptMode;
use rlm_registry::setup::{Defaults, FileSettings, RunSettings, RunSetup};

use crate::errors::Failure;

/// The setup `run` (the arguments given) resolves to, with `config` read if given.
pub(crate) fn run_setup(
    py: Python<'_>,
    run: &RunSettings,
    config: Option<&Path>,
) -> PyResult<RunSetup> {
    let file = match config {
        Some(path) => FileSettings::load(path)
            .map_err(|error| Failure::Config(error.render(false)).into_pyerr(py))?,
        None => FileSettings::default(),
    };
    RunSetup::from_env(run, &file, &Defaults::default())
        .map_err(|error| PyValueError::new_err(error.to_string()))
}

/// The prompt mode a run would use: `prompt_mode` if given, else `RLM_PROMPT_MODE`, else
/// `[model] prompt_mode` of `config`, else compact — for the integrations that list the
/// functions themselves (DSPy's `LuaRLM`), so that one place decides the default.
#[pyfunction]
#[pyo3(signature = (prompt_mode = None, config = None))]
pub(crate) fn _resolved_prompt_mode(
    py: Python<'_>,
    prompt_mode: Option<&str>,
    config: Option<std::path::PathBuf>,
) -> PyResult<&'static str> {
    crate::errors::catching(|| {
        let setup = setup_for_prompt(py, prompt_mode, config.as_deref())?;
        Ok(match setup.prompt_mode {
            PromptMode::Full => "full",
            PromptMode::Compact => "compact",
            PromptMode::Auto { .. } => "auto",
        })
    })
}

/// The setup of a run given only `prompt_mode` (a name `PromptMode` parses, or `None`):
/// what an integration needs to prompt as `rlm ask` would.
pub(crate) fn setup_for_prompt(
    py: Python<'_>,
    prompt_mode: Option<&str>,
    config: Option<&Path>,
) -> PyResult<RunSetup> {
    let prompt_mode = prompt_mode
        .map(str::parse)
        .transpose()
        .map_err(|error: String| PyValueError::new_err(format!("prompt_mode: {error}")))?;
    let given = RunSettings {
        prompt_mode,
        ..RunSettings::default()
    };
    run_setup(py, &given, config)
}
