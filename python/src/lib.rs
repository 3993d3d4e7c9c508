//! `rlm_registry._native`: the Python binding of the rlm-registry crate, a thin layer
//! over its public API. The Python package (`rlm_registry/`) re-exports it; its
//! documentation is `docs/python.md` and the `.pyi` stubs.
//!
//! - `environment`: `Environment` and `ExecResult`, over the crate's `Environment`, each
//!   call run on the caller's thread with the GIL released (`worker`);
//! - `registry`: `Registry`, `Diagnostic`, `check`;
//! - `ask`: `ask`, `Answer`, `system_prompt`, over the crate's `Rlm`;
//! - `aio`: the asyncio API (`Environment.execute_async`, `ask_async`) on a bounded pool;
//! - `acp`: `serve_acp`, the crate's ACP agent over an `Rlm` built as `ask` builds it;
//! - `context`: the `context` argument (a text, chunks, a `dict` of documents, a path
//!   gathered by the crate's `corpus::gather`);
//! - `convert`: Python values ↔ Lua globals through the crate's Lua ↔ JSON mapping;
//! - `llm`: a Python callable as the crate's `Llm`, and `split_thinking`;
//! - `tools`: Python callables as host functions the Lua code calls;
//! - `score`: `score`, an answer scored as `rlm eval` scores it;
//! - `errors`: the package's exceptions, and every failure (a panic too) made into one.

mod acp;
mod aio;
mod ask;
mod context;
mod convert;
mod environment;
mod errors;
mod llm;
mod registry;
mod score;
mod setup;
mod sub_agent;
mod tools;
mod window;
mod worker;

use pyo3::prelude::*;

// Lua allocates through Rust's global allocator, and the crate's (mimalloc) keeps its
// large contexts fast, as in the `rlm` binary.
#[global_allocator]
static ALLOCATOR: rlm_registry::allocator::Allocator = rlm_registry::allocator::Allocator;

/// For the package's tests: a Rust panic on the calling thread, which must come out as
/// `InternalError`.
#[pyfunction]
fn _panic_for_tests() -> PyResult<()> {
    errors::catching(|| panic!("a panic asked for by the tests"))
}

/// For the package's benchmarks: the mean seconds of creating `count` environments in
/// Rust, on this thread with the GIL released, as `benches/environment.rs` does: the
/// crate's own figure, measured in this process beside Python's.
#[pyfunction]
fn _environment_new_in_rust(py: Python<'_>, count: usize) -> PyResult<f64> {
    use rlm_registry::environment::{Environment, Limits};
    errors::catching(|| {
        let registry = std::sync::Arc::new(rlm_registry::Registry::baked().clone());
        let elapsed = py.detach(|| {
            let started = std::time::Instant::now();
            for _ in 0..count {
                let environment =
                    Environment::new(std::sync::Arc::clone(&registry), Limits::default());
                std::hint::black_box(environment.is_ok());
            }
            started.elapsed()
        });
        Ok(elapsed.as_secs_f64() / count.max(1) as f64)
    })
}

/// The sandboxed Lua environment, the function registry and the RLM loop of
/// rlm-registry, in process.
#[pymodule]
mod _native {
    #[pymodule_export]
    use super::acp::serve_acp;
    #[pymodule_export]
    use super::aio::ask_async;
    #[pymodule_export]
    use super::ask::{Answer, ask, system_prompt};
    #[pymodule_export]
    use super::environment::{Environment, ExecResult};
    #[pymodule_export]
    use super::errors::{
        BusyError, CheckpointError, ContextError, InternalError, LimitError, LlmError, LuaError,
        RegistryError, RlmRegistryError,
    };
    #[pymodule_export]
    use super::llm::split_thinking;
    #[pymodule_export]
    use super::registry::{Diagnostic, Registry, check};
    #[pymodule_export]
    use super::score::score;
    #[pymodule_export]
    use super::setup::_resolved_prompt_mode;
    #[pymodule_export]
    use super::window::_check_first_request;
    #[pymodule_export]
    use super::{_environment_new_in_rust, _panic_for_tests};

    use pyo3::prelude::*;

    #[pymodule_init]
    fn init(module: &Bound<'_, PyModule>) -> PyResult<()> {
        rlm_registry::allocator::configure();
        module.add("__version__", env!("CARGO_PKG_VERSION"))?;
        // `__all__` lists every name added above; `rlm_registry` re-exports it, so it
        // keeps the public ones (the tests' and benchmarks' functions stay out of it).
        let public = module
            .index()?
            .iter()
            .filter(|name| {
                name.extract::<String>()
                    .is_ok_and(|name| !name.starts_with('_') || name == "__version__")
            })
            .collect::<Vec<_>>();
        module.setattr("__all__", pyo3::types::PyList::new(module.py(), public)?)
    }
}
