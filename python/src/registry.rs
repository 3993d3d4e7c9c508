//! `Registry`, `Diagnostic` and `check`: the functions the model can call, and the
//! conventions their files must follow.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use rlm_registry::conventions::render;
use rlm_registry::providers::{Config, Providers};
use rlm_registry::search::{FunctionSearch, SearchOptions};

use crate::convert::json_to_python;
use crate::errors::{Failure, catching, load_error};

/// The registry for `paths` layered on the baked one (or on none): a later path's
/// definition of a name wins. Files are read with the GIL released.
pub(crate) fn load_registry(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    baked: bool,
) -> PyResult<Arc<rlm_registry::Registry>> {
    let base = baked.then(rlm_registry::Registry::baked);
    if paths.is_empty() {
        return Ok(Arc::new(
            base.cloned().unwrap_or_else(rlm_registry::Registry::empty),
        ));
    }
    let loaded = py.detach(|| match base {
        Some(base) => base.with_paths(&paths),
        None => rlm_registry::Registry::from_paths(&paths),
    });
    loaded.map(Arc::new).map_err(|error| load_error(py, &error))
}

/// The registry an `Environment` or a run uses: a `Registry` given as it is, or
/// `paths` on the baked registry (or on none), never both.
pub(crate) fn chosen_registry(
    py: Python<'_>,
    registry: Option<&Registry>,
    paths: Vec<PathBuf>,
    baked: bool,
) -> PyResult<Arc<rlm_registry::Registry>> {
    match registry {
        None => load_registry(py, paths, baked),
        Some(registry) if paths.is_empty() && baked => Ok(Arc::clone(&registry.inner)),
        Some(_) => Err(PyValueError::new_err(
            "give either `registry` or `paths`/`baked`, not both",
        )),
    }
}

/// The built-in providers and those the `rlm.toml` at `path` enables.
pub(crate) fn load_providers(py: Python<'_>, path: &Path) -> PyResult<Arc<Providers>> {
    let config =
        Config::load(path).map_err(|error| Failure::Config(error.render(false)).into_pyerr(py))?;
    config
        .providers()
        .map(Arc::new)
        .map_err(|error| Failure::Config(format!("error: {error}")).into_pyerr(py))
}

/// Documented Lua functions, from the registry baked into the package and/or
/// directories of `.lua` files.
#[pyclass(module = "rlm_registry", frozen)]
pub struct Registry {
    pub(crate) inner: Arc<rlm_registry::Registry>,
}

#[pymethods]
impl Registry {
    #[new]
    #[pyo3(signature = (paths = Vec::new(), baked = true), text_signature = "(paths=(), baked=True)")]
    fn new(py: Python<'_>, paths: Vec<PathBuf>, baked: bool) -> PyResult<Registry> {
        catching(|| {
            Ok(Registry {
                inner: load_registry(py, paths, baked)?,
            })
        })
    }

    /// Every function as a dict, sorted by name: `name`, `signature`, `summary`,
    /// `description`, `params`, `returns`, `source` (the definition's Lua text),
    /// `file`, `line`, `dir`, and its tool form (`tool`, `input_schema`, …).
    fn functions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        catching(|| {
            let list = PyList::empty(py);
            for spec in self.inner.specs() {
                let mut json = spec.json();
                // Every function of a registry comes from the registry: `source` can
                // hold its code instead.
                json["source"] = spec.function.source().into();
                list.append(json_to_python(py, &json)?)?;
            }
            Ok(list)
        })
    }

    /// The registry's part of the system prompt: every function with its documentation,
    /// or with `compact=True` one line each and a pointer to `fn_search` and `help`.
    #[pyo3(signature = (compact = false))]
    fn prompt(&self, compact: bool) -> PyResult<String> {
        catching(|| {
            Ok(if compact {
                self.inner.compact_prompt()
            } else {
                self.inner.system_prompt().to_string()
            })
        })
    }

    /// The `k` functions that best match `query` (BM25), best first, each a dict:
    /// `name`, `signature`, `summary`, `score`, `confidence`, `match_reason`, …
    #[pyo3(signature = (query, k = 5))]
    fn search<'py>(&self, py: Python<'py>, query: &str, k: usize) -> PyResult<Bound<'py, PyAny>> {
        catching(|| {
            let options = SearchOptions {
                max_results: k,
                ..SearchOptions::default()
            };
            let results = self.inner.search(query, &options);
            let json = serde_json::to_value(results)
                .map_err(|error| crate::errors::internal_error(&error.to_string()))?;
            json_to_python(py, &json)
        })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, name: &Bound<'_, PyAny>) -> bool {
        name.extract::<&str>()
            .is_ok_and(|name| self.inner.get(name).is_some())
    }

    fn __repr__(&self) -> String {
        format!("<rlm_registry.Registry of {} functions>", self.inner.len())
    }
}

/// One finding of the conventions' checker, with its rustc-style rendering.
#[pyclass(module = "rlm_registry", frozen, get_all)]
pub struct Diagnostic {
    /// `E001`…, or `N001` for a note.
    code: String,
    /// `error`, `warning` or `note`.
    severity: String,
    message: String,
    /// How to fix it, when the checker knows.
    help: Option<String>,
    file: String,
    line: usize,
    column: usize,
    /// The rustc-style report: header, `--> file:line:col`, the source line, a caret.
    rendered: String,
}

#[pymethods]
impl Diagnostic {
    fn __str__(&self) -> String {
        format!(
            "{}:{}:{}: {}[{}]: {}",
            self.file, self.line, self.column, self.severity, self.code, self.message
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "Diagnostic(code={:?}, file={:?}, line={}, column={}, message={:?})",
            self.code, self.file, self.line, self.column, self.message
        )
    }
}

/// `diagnostics` as Python objects, each rendered with the source `source_of` gives.
pub(crate) fn diagnostics<'a>(
    diagnostics: &[rlm_registry::Diagnostic],
    source_of: impl Fn(&str) -> Option<&'a str>,
) -> Vec<Diagnostic> {
    diagnostics
        .iter()
        .map(|d| Diagnostic {
            code: d.code.as_str().to_string(),
            severity: d.severity.as_str().to_string(),
            message: d.message.clone(),
            help: d.help.clone(),
            file: d.file.clone(),
            line: d.line,
            column: d.column,
            rendered: render(std::slice::from_ref(d), &source_of, false)
                .trim_end()
                .to_string(),
        })
        .collect()
}

/// Checks the `.lua` files under `paths` (directories or files) against the
/// conventions: every diagnostic, errors and notes; an empty list when all is well.
#[pyfunction]
pub fn check(py: Python<'_>, paths: Vec<PathBuf>) -> PyResult<Vec<Diagnostic>> {
    catching(|| {
        let loaded = py.detach(|| rlm_registry::Registry::from_paths(&paths));
        Ok(match loaded {
            Ok(registry) => diagnostics(&registry.notes(), |file| registry.source_of(file)),
            Err(error) => diagnostics(error.diagnostics(), |file| error.source_of(file)),
        })
    })
}
