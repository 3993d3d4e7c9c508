//! A run's setup from Python's arguments: the arguments over the environment variables
//! over `config`'s `rlm.toml`, resolved as `rlm ask` resolves its flags
//! (`rlm_registry::setup`).

use std::path::Path;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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
