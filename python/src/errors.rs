//! The package's exceptions, and every failure of the crate turned into one: a Lua error
//! or a limit met outside `execute`, a registry that does not load, a run that ends
//! without an answer, and a Rust panic, which becomes an `InternalError` instead of
//! PyO3's `PanicException` (a `BaseException` that `except Exception` would let through).

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt, PyOSError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyList;

use rlm_registry::LoadError;
use rlm_registry::environment::{ExecError, GlobalError};
use rlm_registry::rlm::{BudgetExceeded, RlmError};

create_exception!(
    rlm_registry,
    RlmRegistryError,
    PyException,
    "The base class of every error rlm_registry raises."
);
create_exception!(
    rlm_registry,
    RegistryError,
    RlmRegistryError,
    "A registry (or an rlm.toml) that does not load; `diagnostics` holds every Diagnostic."
);
create_exception!(
    rlm_registry,
    LuaError,
    RlmRegistryError,
    "Lua failed outside `execute` (reading or setting a global, `call`), or a run gave up after the model's code failed turn after turn; `hint` holds the Lua way when the code was Python."
);
create_exception!(
    rlm_registry,
    LimitError,
    RlmRegistryError,
    "A limit was hit outside `execute`, or a run hit its iteration cap or a budget; `kind` says which (\"time\", \"memory\", \"output\", …, \"iterations\", \"tokens\", \"llm_calls\", \"wall_time\")."
);
create_exception!(
    rlm_registry,
    LlmError,
    RlmRegistryError,
    "The model could not be reached, or answered with nothing the loop can use."
);
create_exception!(
    rlm_registry,
    ContextError,
    RlmRegistryError,
    "A context path that cannot be read (missing, unreadable, a glob matching nothing); `path` names it."
);
create_exception!(
    rlm_registry,
    BusyError,
    RlmRegistryError,
    "The Environment is in use by another thread: one thread at a time may use it."
);
create_exception!(
    rlm_registry,
    InternalError,
    RlmRegistryError,
    "A bug in rlm_registry (a Rust panic), caught before it could harm the interpreter; an Environment it happened in is closed."
);

create_exception!(
    rlm_registry,
    CheckpointError,
    RlmRegistryError,
    "A checkpoint that cannot be read (not one, or another format version) or restored (another context or registry, an environment that has run code)."
);

/// A checkpoint's failure as `CheckpointError`.
pub(crate) fn checkpoint_error(error: rlm_registry::environment::CheckpointError) -> PyErr {
    CheckpointError::new_err(error.to_string())
}

/// A failure of the crate, made into the package's exception once the GIL is held.
#[derive(Debug)]
pub(crate) enum Failure {
    Exec(ExecError),
    Global(GlobalError),
    /// An `rlm.toml` or a provider that does not load: the rendered error.
    Config(String),
    /// A Lua state that could not be set up (out of memory).
    Setup(String),
    Panic(String),
}

impl Failure {
    pub(crate) fn into_pyerr(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Exec(error) => exec_error(py, error),
            Failure::Global(GlobalError::Refused(message)) => PyTypeError::new_err(message),
            Failure::Global(GlobalError::Failed(error)) => exec_error(py, error),
            Failure::Config(message) => with(
                py,
                RegistryError::new_err(message),
                "diagnostics",
                PyList::empty(py),
            ),
            Failure::Setup(message) => RlmRegistryError::new_err(message),
            Failure::Panic(message) => internal_error(&message),
        }
    }
}

impl From<ExecError> for Failure {
    fn from(error: ExecError) -> Self {
        Failure::Exec(error)
    }
}

impl From<GlobalError> for Failure {
    fn from(error: GlobalError) -> Self {
        Failure::Global(error)
    }
}

/// `error` with the attribute `name` set (an attribute that cannot be set is left out:
/// the exception itself matters more).
pub(crate) fn with<'py>(
    py: Python<'py>,
    error: PyErr,
    name: &str,
    value: impl IntoPyObject<'py>,
) -> PyErr {
    let _ = error.value(py).setattr(name, value);
    error
}

/// A Lua error as `LuaError` (its hint as `hint`), a limit as `LimitError` (`kind`).
pub(crate) fn exec_error(py: Python<'_>, error: ExecError) -> PyErr {
    match &error {
        ExecError::Lua { message, hint, .. } => {
            with(py, LuaError::new_err(message.clone()), "hint", hint.clone())
        }
        ExecError::Limit { kind, message, .. } => with(
            py,
            LimitError::new_err(message.clone()),
            "kind",
            kind.to_string(),
        ),
    }
}

/// A registry that does not load: the rustc-style report as the message, every
/// diagnostic as `diagnostics`.
pub(crate) fn load_error(py: Python<'_>, error: &LoadError) -> PyErr {
    let diagnostics =
        crate::registry::diagnostics(error.diagnostics(), |file| error.source_of(file));
    with(
        py,
        RegistryError::new_err(error.render(false)),
        "diagnostics",
        diagnostics,
    )
}

/// Why a run ended without an answer, as the exception that says so.
pub(crate) fn run_error(py: Python<'_>, error: RlmError) -> PyErr {
    let limit = |kind: &str, message: String| {
        with(py, LimitError::new_err(message), "kind", kind.to_string())
    };
    let message = error.to_string();
    match error {
        RlmError::IterationLimit { .. } | RlmError::AnswerRejected { .. } => {
            limit("iterations", message)
        }
        RlmError::Budget(
            BudgetExceeded::Tokens { .. } | BudgetExceeded::TokensWouldExceed { .. },
        ) => limit("tokens", message),
        RlmError::Budget(BudgetExceeded::LlmCalls { .. }) => limit("llm_calls", message),
        RlmError::Budget(BudgetExceeded::WallTime { .. }) => limit("wall_time", message),
        RlmError::Budget(
            BudgetExceeded::Cost { .. }
            | BudgetExceeded::CostWouldExceed { .. }
            | BudgetExceeded::CostUnknown { .. },
        ) => limit("cost", message),
        RlmError::Interrupted => PyKeyboardInterrupt::new_err(message),
        RlmError::Llm(_) | RlmError::NoCode { .. } | RlmError::ContextWindow(_) => {
            LlmError::new_err(message)
        }
        RlmError::ConsecutiveErrors { .. } => {
            with(py, LuaError::new_err(message), "hint", None::<String>)
        }
        RlmError::Context(error) => exec_error(py, error),
        RlmError::Trace(_) => PyOSError::new_err(message),
        _ => RlmRegistryError::new_err(message),
    }
}

/// The exception a caught panic becomes.
pub(crate) fn internal_error(message: &str) -> PyErr {
    InternalError::new_err(format!(
        "internal error in rlm_registry (a bug; please report it): {message}"
    ))
}

/// What a panic said, from its payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// Runs `work`, a panic in it becoming an `InternalError`: every entry point that calls
/// into the crate on the caller's thread goes through here.
pub(crate) fn catching<T>(work: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(work))
        .unwrap_or_else(|payload| Err(internal_error(&panic_message(payload.as_ref()))))
}
