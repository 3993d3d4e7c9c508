//! `Environment` and `ExecResult`: one sandboxed Lua state, used from Python on the
//! caller's thread (`worker`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use rlm_registry::environment::{
    Checkpoint, CheckpointError, ExecError, Execution, GlobalValue, Limits, SubAgent,
};
use rlm_registry::llm::Llm;

use crate::context::ContextArg;
use crate::convert::{global_from_python, global_to_python, json_from_python, json_to_python};
use crate::errors::{Failure, catching, checkpoint_error, exec_error};
use crate::llm::PythonLlm;
use crate::registry::{Registry, chosen_registry, load_providers};
use crate::sub_agent::PythonSubAgent;
use crate::tools::with_tools;
use crate::worker::EnvCell;

/// Text given from Python: a `str` (its UTF-8) or `bytes`, read where it is.
#[derive(FromPyObject)]
pub(crate) enum Text<'py> {
    Str(Bound<'py, PyString>),
    Bytes(Bound<'py, PyBytes>),
}

impl Text<'_> {
    /// The bytes, borrowed from the Python object: no copy.
    pub(crate) fn bytes(&self) -> PyResult<&[u8]> {
        match self {
            Text::Str(text) => text.to_str().map(str::as_bytes).map_err(|_| {
                PyValueError::new_err("the str has a lone surrogate, which UTF-8 cannot hold")
            }),
            Text::Bytes(bytes) => Ok(bytes.as_bytes()),
        }
    }
}

/// A sandboxed Lua 5.4 environment with the registry's functions, holding its globals
/// from one `execute` to the next (a REPL). See the package's documentation.
#[pyclass(module = "rlm_registry", frozen)]
pub struct Environment {
    thread: Arc<EnvCell>,
    limits: Limits,
    /// How it was built, to build a fork alike.
    recipe: Recipe,
}

/// What an environment is built from, kept for `fork`.
#[derive(Clone)]
struct Recipe {
    registry: Arc<rlm_registry::Registry>,
    limits: Limits,
    providers: Option<Arc<rlm_registry::providers::Providers>>,
    llm: Option<Arc<dyn Llm>>,
    sub_agent: Option<Arc<dyn SubAgent>>,
}

impl Recipe {
    /// A new environment built from it (with the GIL released).
    fn build(self) -> Result<rlm_registry::environment::Environment, Failure> {
        let mut builder =
            rlm_registry::environment::Environment::builder(self.registry).limits(self.limits);
        if let Some(providers) = self.providers {
            builder = builder.providers(providers);
        }
        if let Some(llm) = self.llm {
            builder = builder.llm(llm);
        }
        if let Some(sub_agent) = self.sub_agent {
            builder = builder.sub_agent(sub_agent);
        }
        builder
            .build()
            .map_err(|error| Failure::Setup(error.to_string()))
    }
}

#[pymethods]
impl Environment {
    #[new]
    #[pyo3(signature = (
        context = None, *, paths = Vec::new(), baked = true, config = None, registry = None,
        time_limit = 30.0, memory_limit_mb = 512, output_limit = None, llm = None, tools = None,
        sub_agent = None
    ), text_signature = "(context=None, *, paths=(), baked=True, config=None, registry=None, \
        time_limit=30.0, memory_limit_mb=512, output_limit=None, llm=None, tools=None, \
        sub_agent=None)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        context: Option<Bound<'_, PyAny>>,
        paths: Vec<PathBuf>,
        baked: bool,
        config: Option<PathBuf>,
        registry: Option<PyRef<'_, Registry>>,
        time_limit: f64,
        memory_limit_mb: usize,
        output_limit: Option<usize>,
        llm: Option<Bound<'_, PyAny>>,
        tools: Option<Bound<'_, PyDict>>,
        sub_agent: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Environment> {
        catching(|| {
            let limits = limits(time_limit, memory_limit_mb, output_limit)?;
            let llm = python_llm(llm)?;
            let sub_agent = python_sub_agent(sub_agent)?;
            let registry = chosen_registry(py, registry.as_deref(), paths, baked)?;
            let mut providers = config.map(|path| load_providers(py, &path)).transpose()?;
            if let Some(tools) = tools {
                providers = Some(with_tools(py, providers, &tools)?);
            }
            // Kept alive until the thread has loaded it: a text is borrowed from it.
            let given = context.as_ref().map(ContextArg::from_python).transpose()?;
            let context = given.map(ContextArg::handover).transpose()?;
            let recipe = Recipe {
                registry,
                limits,
                providers,
                llm,
                sub_agent,
            };
            let built = recipe.clone();
            let thread = EnvCell::start(py, move || {
                let environment = built.build()?;
                if let Some(context) = context {
                    // SAFETY: `start` waits for this closure before it returns, and the
                    // caller's `context` outlives that wait.
                    unsafe { context.load_into(&environment) }?;
                }
                Ok(environment)
            })?;
            Ok(Environment {
                thread: Arc::new(thread),
                limits,
                recipe,
            })
        })
    }

    /// A checkpoint of the session: the journal of what ran (each execution's code,
    /// what it read from outside the sandbox, its sub-calls' answers), the context's and
    /// the registry's SHA-256. Small, and portable between processes and machines.
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        catching(|| {
            let bytes = self
                .thread
                .call(py, |environment| {
                    environment.checkpoint().map(|c| c.to_bytes())
                })?
                .map_err(checkpoint_error)?;
            Ok(PyBytes::new(py, &bytes))
        })
    }

    /// Rebuilds the session a checkpoint was taken of in this fresh environment (same
    /// registry and context): its code runs again with the recorded values and answers,
    /// sending nothing and touching nothing outside. Returns where a step asked for
    /// something else than recorded (it then got a live value), usually empty.
    fn restore(&self, py: Python<'_>, data: &[u8]) -> PyResult<Vec<String>> {
        catching(|| {
            let checkpoint = Checkpoint::from_bytes(data).map_err(checkpoint_error)?;
            self.thread
                .call(py, move |environment| environment.restore(&checkpoint))?
                .map_err(checkpoint_error)
        })
    }

    /// An independent copy of the session with the same globals, built as this one was
    /// and restored from its checkpoint: for branching rollouts.
    fn fork(&self, py: Python<'_>) -> PyResult<Environment> {
        catching(|| {
            let (checkpoint, context) = self
                .thread
                .call(py, |environment| {
                    Ok::<_, CheckpointError>((
                        environment.checkpoint()?,
                        environment.context_copy()?,
                    ))
                })?
                .map_err(checkpoint_error)?;
            let recipe = self.recipe.clone();
            let built = recipe.clone();
            let thread = EnvCell::start(py, move || {
                let environment = built.build()?;
                let restored = context
                    .map_or(Ok(()), |copy| environment.load_context_copy(&copy))
                    .and_then(|()| environment.restore(&checkpoint).map(|_| ()));
                restored.map_err(|error| Failure::Setup(error.to_string()))?;
                Ok(environment)
            })?;
            Ok(Environment {
                thread: Arc::new(thread),
                limits: self.limits,
                recipe,
            })
        })
    }

    /// Runs Lua `code` (a `str`, or `bytes` for source that is not UTF-8); globals
    /// persist. Lua errors and limits are in the result, not raised.
    fn execute(&self, py: Python<'_>, code: Text<'_>) -> PyResult<ExecResult> {
        catching(|| {
            let code = crate::worker::Shared::new(code.bytes()?);
            let (result, elapsed, final_answer) = self.thread.call(py, move |environment| {
                // SAFETY: `call` waits for this job before it returns, and `code` is
                // borrowed from the caller's argument, alive until then.
                let code = unsafe { code.get() };
                let started = Instant::now();
                let result = environment.execute_bytes(code);
                (result, started.elapsed(), environment.take_final_answer())
            })?;
            Ok(ExecResult::new(result, elapsed, final_answer))
        })
    }

    /// `execute` as an awaitable, run on the package's thread pool: the same result and
    /// exceptions; cancelling the awaiting task interrupts the execution.
    fn execute_async<'py>(&self, py: Python<'py>, code: Text<'_>) -> PyResult<Bound<'py, PyAny>> {
        catching(|| {
            // A copy: the call outlives the argument's borrow.
            let code = code.bytes()?.to_vec();
            crate::aio::call(py, &self.thread, move |environment| {
                let started = Instant::now();
                let result = environment.execute_bytes(&code);
                ExecResult::new(result, started.elapsed(), environment.take_final_answer())
            })
        })
    }

    /// `execute(code)`, then the global function `name` called with no arguments, in one
    /// call: what a REPL turn that reports on the state
    /// after the code (the reference RLM's `locals`) needs, at the cost of one call.
    /// The call's result, or `None` when it failed (the code may have replaced it).
    fn _execute_then_call(
        &self,
        py: Python<'_>,
        code: Text<'_>,
        name: String,
    ) -> PyResult<(ExecResult, Py<PyAny>)> {
        catching(|| {
            let code = crate::worker::Shared::new(code.bytes()?);
            let (result, elapsed, final_answer, called) =
                self.thread.call(py, move |environment| {
                    // SAFETY: as in `execute`.
                    let code = unsafe { code.get() };
                    let started = Instant::now();
                    let result = environment.execute_bytes(code);
                    let elapsed = started.elapsed();
                    let final_answer = environment.take_final_answer();
                    let called = environment.call_function(&name, Vec::new()).ok();
                    (result, elapsed, final_answer, called)
                })?;
            let called = match called {
                Some(value) => json_to_python(py, &value)?.unbind(),
                None => py.None(),
            };
            Ok((ExecResult::new(result, elapsed, final_answer), called))
        })
    }

    /// The Lua global `name` as a Python value (`None` when unset).
    fn __getitem__(&self, py: Python<'_>, name: String) -> PyResult<Py<PyAny>> {
        catching(|| {
            let value = self
                .thread
                .call(py, move |environment| environment.get_global_value(&name))?
                .map_err(|error| Failure::from(error).into_pyerr(py))?;
            global_to_python(py, value)
        })
    }

    /// Sets the Lua global `name`; `None` removes it.
    fn __setitem__(&self, py: Python<'_>, name: String, value: &Bound<'_, PyAny>) -> PyResult<()> {
        catching(|| {
            let value = global_from_python(value, &name)?;
            self.set(py, name, value)
        })
    }

    /// Removes the Lua global `name`.
    fn __delitem__(&self, py: Python<'_>, name: String) -> PyResult<()> {
        catching(|| self.set(py, name, GlobalValue::Json(serde_json::Value::Null)))
    }

    /// Sets the global `context` as the constructor's `context` does (a `str` or `bytes`
    /// handed over once, without a Python copy), or removes it with `None`.
    fn set_context(&self, py: Python<'_>, context: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        catching(|| {
            let Some(context) = context else {
                return self.set(
                    py,
                    "context".to_string(),
                    GlobalValue::Json(serde_json::Value::Null),
                );
            };
            let context = ContextArg::from_python(&context)?.handover()?;
            self.thread
                .call(py, move |environment| {
                    // SAFETY: as in `execute`.
                    unsafe { context.load_into(environment) }
                })?
                .map_err(|error| exec_error(py, error))
        })
    }

    /// Calls the global function `name` (a registry function, a built-in, or one the
    /// code defined) with `args` as JSON, under the limits; returns its result.
    #[pyo3(signature = (name, *args))]
    fn call(&self, py: Python<'_>, name: String, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        catching(|| {
            let args = args
                .iter()
                .enumerate()
                .map(|(i, arg)| json_from_python(&arg, &format!("argument {}", i + 1)))
                .collect::<PyResult<Vec<_>>>()?;
            let result = self
                .thread
                .call(py, move |environment| {
                    environment.call_function(&name, args)
                })?
                .map_err(|error| exec_error(py, error))?;
            json_to_python(py, &result).map(Bound::unbind)
        })
    }

    /// Stops the execution running now, from any thread: it ends with `limit` set to
    /// `"interrupted"`. The environment stays usable.
    fn interrupt(&self) {
        self.thread.interrupt();
    }

    /// Ends the environment and frees its memory; using it afterwards raises
    /// `ValueError`. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        catching(|| self.thread.close(py))
    }

    /// Whether `close` was called (or an internal error closed it).
    #[getter]
    fn closed(&self) -> bool {
        self.thread.is_closed()
    }

    /// Seconds one execution may run.
    #[getter]
    fn time_limit(&self) -> f64 {
        self.limits.time.as_secs_f64()
    }

    /// MiB the Lua state may use, its globals and `context` included.
    #[getter]
    fn memory_limit_mb(&self) -> usize {
        self.limits.memory_bytes / (1024 * 1024)
    }

    /// Bytes `print` may write per execution.
    #[getter]
    fn output_limit(&self) -> usize {
        self.limits.output_bytes
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: Option<Bound<'_, PyAny>>,
        _value: Option<Bound<'_, PyAny>>,
        _traceback: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.close(py)
    }

    fn __repr__(&self) -> String {
        if self.thread.is_closed() {
            return "<rlm_registry.Environment (closed)>".to_string();
        }
        format!(
            "<rlm_registry.Environment time_limit={} memory_limit_mb={} output_limit={}>",
            self.time_limit(),
            self.memory_limit_mb(),
            self.output_limit()
        )
    }

    /// For the package's tests: a Rust panic inside a call.
    fn _panic_for_tests(&self, py: Python<'_>) -> PyResult<()> {
        self.thread
            .call(py, |_| panic!("a panic asked for by the tests"))
    }
}

impl Environment {
    fn set(&self, py: Python<'_>, name: String, value: GlobalValue) -> PyResult<()> {
        self.thread
            .call(py, move |environment| {
                environment.set_global_value(&name, &value)
            })?
            .map_err(|error| Failure::from(error).into_pyerr(py))
    }
}

/// The limits of one execution from `Environment`'s or `ask`'s arguments.
pub(crate) fn limits(
    time_limit: f64,
    memory_limit_mb: usize,
    output_limit: Option<usize>,
) -> PyResult<Limits> {
    if !(time_limit.is_finite() && time_limit > 0.0 && time_limit <= 1e9) {
        return Err(PyValueError::new_err(
            "time_limit must be a positive number of seconds",
        ));
    }
    if memory_limit_mb == 0 {
        return Err(PyValueError::new_err("memory_limit_mb must be at least 1"));
    }
    if output_limit == Some(0) {
        return Err(PyValueError::new_err(
            "output_limit must be at least 1 byte",
        ));
    }
    let defaults = Limits::default();
    Ok(Limits {
        time: Duration::from_secs_f64(time_limit),
        memory_bytes: memory_limit_mb.saturating_mul(1024 * 1024),
        output_bytes: output_limit.unwrap_or(defaults.output_bytes),
        ..defaults
    })
}

/// The `llm` argument as the crate's model, refusing what cannot be called.
fn python_llm(llm: Option<Bound<'_, PyAny>>) -> PyResult<Option<Arc<dyn Llm>>> {
    match llm {
        None => Ok(None),
        Some(callable) if callable.is_callable() => {
            Ok(Some(Arc::new(PythonLlm::new(callable.unbind()))))
        }
        Some(other) => Err(PyTypeError::new_err(format!(
            "llm must be a callable (prompt: str) -> str, not a {}",
            other.get_type().name()?
        ))),
    }
}

/// The `sub_agent` argument: a callable `(prompt, context) -> str` that runs a child
/// agent for `rlm_query`.
fn python_sub_agent(sub_agent: Option<Bound<'_, PyAny>>) -> PyResult<Option<Arc<dyn SubAgent>>> {
    match sub_agent {
        None => Ok(None),
        Some(callable) if callable.is_callable() => {
            Ok(Some(Arc::new(PythonSubAgent::new(callable.unbind()))))
        }
        Some(other) => Err(PyTypeError::new_err(format!(
            "sub_agent must be a callable (prompt: str, context: str | None) -> str, not a {}",
            other.get_type().name()?
        ))),
    }
}

/// What one `execute` did: the output, the error as the model reads it, the answer
/// `FINAL` gave, the limit hit, the time it took.
#[pyclass(module = "rlm_registry", frozen, get_all)]
pub struct ExecResult {
    /// What `print` wrote (bytes that are not UTF-8 as `\xNN`), also before an error.
    stdout: String,
    /// The Lua error, or the limit's message, as the model reads it (hint included).
    error: Option<String>,
    /// The hint alone: the Lua way for Python written as Lua, or "did you mean".
    hint: Option<String>,
    /// What `FINAL(value)` or `FINAL_VAR(name)` gave in this execution.
    #[pyo3(name = "final")]
    final_answer: Option<String>,
    /// `"time"`, `"memory"`, `"output"`, `"recursion"`, `"llm_calls"`,
    /// `"token_budget"` or `"interrupted"` when a limit ended the execution.
    limit: Option<String>,
    /// Wall time of the execution, in seconds.
    seconds: f64,
}

impl ExecResult {
    fn new(
        result: Result<Execution, ExecError>,
        elapsed: Duration,
        final_answer: Option<String>,
    ) -> ExecResult {
        let (stdout, error, hint, limit) = match result {
            Ok(execution) => (execution.output, None, None, None),
            Err(ExecError::Lua {
                message,
                hint,
                output,
            }) => (output, Some(message), hint, None),
            Err(ExecError::Limit {
                kind,
                message,
                output,
            }) => (output, Some(message), None, Some(kind.to_string())),
        };
        ExecResult {
            stdout,
            error,
            hint,
            final_answer,
            limit,
            seconds: elapsed.as_secs_f64(),
        }
    }
}

#[pymethods]
impl ExecResult {
    /// True when the execution ended without an error or a limit.
    #[getter]
    fn ok(&self) -> bool {
        self.error.is_none()
    }

    fn __repr__(&self) -> String {
        let shown = |value: &Option<String>| match value {
            Some(text) => format!("{text:?}"),
            None => "None".to_string(),
        };
        format!(
            "ExecResult(stdout={:?}, error={}, final={}, limit={}, seconds={:.6})",
            self.stdout,
            shown(&self.error),
            shown(&self.final_answer),
            shown(&self.limit),
            self.seconds
        )
    }
}
