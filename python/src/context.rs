//! The `context` argument of `ask`, `system_prompt` and `Environment`: what the model
//! studies, as Python gives it.
//!
//! - `str` or `bytes`: one text (read where it is, without a Python copy);
//! - a `list` or `tuple` of `str`/`bytes`: chunks, an array of strings in Lua;
//! - a `dict` of name → `str`/`bytes`: a corpus of text documents, in dict order;
//! - a `pathlib.Path` (any `os.PathLike`): gathered as `--context PATH` gathers it, by
//!   `rlm_registry::corpus::gather` — a file is its text, a folder a corpus.

use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use rlm_registry::corpus::{Corpus, Document, gather_with};
use rlm_registry::environment::{Environment, ExecError};
use rlm_registry::rlm::Context;

use crate::environment::Text;
use crate::errors::ContextError;
use crate::worker::Shared;

/// What `context` accepts, for the refusal of anything else.
const ACCEPTED: &str = "a str, bytes, a list of str or bytes (chunks), a dict of name -> str or bytes (documents) or a pathlib.Path (a file or a folder)";

/// A context given from Python.
pub(crate) enum ContextArg<'py> {
    /// One text, borrowed from the Python object until it is handed over.
    Text(Text<'py>),
    /// Chunks, documents or what a path gathered: already the crate's.
    Built(Context),
}

impl<'py> ContextArg<'py> {
    /// Reads `value` as a context (gathering a path with the GIL released); a type it
    /// does not take is a `TypeError` naming those it takes, a path that cannot be read
    /// a `ContextError` naming it.
    pub(crate) fn from_python(value: &Bound<'py, PyAny>) -> PyResult<ContextArg<'py>> {
        if let Some(text) = text_of(value) {
            return Ok(ContextArg::Text(text));
        }
        if let Ok(documents) = value.cast::<PyDict>() {
            return corpus_of(documents).map(|corpus| ContextArg::Built(Context::Corpus(corpus)));
        }
        if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
            return chunks_of(value).map(|chunks| ContextArg::Built(Context::Chunks(chunks)));
        }
        if let Some(path) = path_of(value) {
            return gathered(value.py(), vec![path]).map(ContextArg::Built);
        }
        Err(PyTypeError::new_err(format!(
            "context must be {ACCEPTED}, not {}",
            value.get_type().name()?
        )))
    }

    /// The context as the crate takes it (a text is copied here).
    pub(crate) fn into_context(self) -> PyResult<Context> {
        match self {
            ContextArg::Text(text) => Ok(Context::Text(text.bytes()?.to_vec())),
            ContextArg::Built(context) => Ok(context),
        }
    }
}

/// `value` as a text, when it is a `str` or `bytes`.
fn text_of<'py>(value: &Bound<'py, PyAny>) -> Option<Text<'py>> {
    if let Ok(text) = value.cast::<PyString>() {
        return Some(Text::Str(text.clone()));
    }
    value
        .cast::<PyBytes>()
        .ok()
        .map(|bytes| Text::Bytes(bytes.clone()))
}

/// The bytes of `value`, a `str` or `bytes` at `at` (for the refusal of anything else).
fn bytes_of(value: &Bound<'_, PyAny>, at: impl FnOnce() -> String) -> PyResult<Vec<u8>> {
    match text_of(value) {
        Some(text) => Ok(text.bytes()?.to_vec()),
        None => Err(PyTypeError::new_err(format!(
            "{} must be str or bytes, not {}",
            at(),
            value.get_type().name()?
        ))),
    }
}

fn chunks_of(sequence: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    sequence
        .try_iter()?
        .enumerate()
        .map(|(index, item)| bytes_of(&item?, || format!("context[{index}]")))
        .collect()
}

fn corpus_of(documents: &Bound<'_, PyDict>) -> PyResult<Corpus> {
    let mut corpus = Corpus::default();
    for (name, text) in documents.iter() {
        let Ok(name) = name.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "a document's name must be a str, not {}",
                name.repr()?
            )));
        };
        let shown = name.repr()?.to_string();
        let name = name.to_str()?.to_string();
        let text = bytes_of(&text, || format!("context[{shown}]"))?;
        corpus.documents.push(Document::text(name, text));
    }
    Ok(corpus)
}

/// The path a context argument names, when it is a `pathlib.Path` (any `os.PathLike`).
pub(crate) fn path_of(value: &Bound<'_, PyAny>) -> Option<PathBuf> {
    match value.hasattr("__fspath__") {
        Ok(true) => value.extract().ok(),
        _ => None,
    }
}

/// What `paths` gather, as `--context` given each would; standard input (`-`) is not
/// read from Python.
pub(crate) fn gathered(py: Python<'_>, paths: Vec<PathBuf>) -> PyResult<Context> {
    let gathered = py.detach(|| {
        gather_with(&paths, || {
            Err(std::io::Error::other(
                "standard input is not read from Python: pass its text",
            ))
        })
    });
    gathered.map(Context::from).map_err(|error| {
        let path = error.path.clone();
        crate::errors::with(py, ContextError::new_err(error.to_string()), "path", path)
    })
}

/// A context on its way into an environment, the GIL released: a text still borrowed
/// (no copy), or the crate's.
pub(crate) enum Handover {
    Text(Shared),
    Built(Context),
}

impl ContextArg<'_> {
    /// What goes into the environment; a text keeps borrowing `self`'s.
    pub(crate) fn handover(self) -> PyResult<Handover> {
        match self {
            ContextArg::Text(text) => Ok(Handover::Text(Shared::new(text.bytes()?))),
            ContextArg::Built(context) => Ok(Handover::Built(context)),
        }
    }
}

impl Handover {
    /// Sets `environment`'s global `context`.
    ///
    /// # Safety
    /// As [`Shared::get`]: the Python object a text came from is alive, the caller
    /// waiting for the job this runs in.
    pub(crate) unsafe fn load_into(self, environment: &Environment) -> Result<(), ExecError> {
        match self {
            // SAFETY: as the caller promises.
            Handover::Text(text) => environment.set_context(unsafe { text.get() }),
            Handover::Built(context) => context.load_into(environment),
        }
    }
}
