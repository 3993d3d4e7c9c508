//! `score`: an answer against the expected one, by the crate's eval scorers, so that a
//! Python harness (the Ray example, a user's own loop) scores as `rlm eval` does.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use rlm_registry::eval::Scorer;

/// The score in `[0, 1]` of `answer` against `expected` by `scorer` (`exact`,
/// `contains`, `numeric`, `f1_set`), as `rlm eval` gives it. `judge` needs a model and
/// is refused here, as is a name that is no scorer and a `numeric` expected answer that
/// is no number.
#[pyfunction]
#[pyo3(signature = (answer, expected, scorer = "exact"))]
pub(crate) fn score(answer: &str, expected: &str, scorer: &str) -> PyResult<f64> {
    let chosen = scorer_named(scorer)?;
    if chosen == Scorer::Judge {
        return Err(PyValueError::new_err(
            "the `judge` scorer asks a model: score those tasks with `rlm eval`",
        ));
    }
    chosen
        .score("", answer, expected, None)
        .map_err(|error| PyValueError::new_err(error.to_string()))
}

/// The scorer a task file names (`"exact"`), or a `ValueError` listing them.
fn scorer_named(name: &str) -> PyResult<Scorer> {
    serde_json::from_value(serde_json::Value::String(name.to_string())).map_err(|_| {
        PyValueError::new_err(format!(
            "no scorer `{name}`: exact, contains, numeric, f1_set or judge"
        ))
    })
}
