//! The asyncio API: `Environment.execute_async` and `ask_async`, awaitables made by
//! PyO3's bridge (`pyo3-async-runtimes`) over a small Tokio runtime of the package's own.
//!
//! The work is the sync API's, run on the runtime's blocking pool: a bounded number of
//! threads ([`pool_size`]), however many environments and calls are awaited, so one event
//! loop drives a thousand environments without a thread each. The event loop's thread
//! only makes the awaitable (and, for `ask_async`, checks the arguments as `ask` does:
//! what may wait on the network, the server asked its window, is built in the pool). A call is claimed when it is made, so a second call
//! on a busy environment raises `BusyError`, as from a second thread.
//!
//! Cancelling the awaiting task interrupts the work: an execution stops as a limit would
//! (the environment stays usable once it has), a run stops at its next safe point.

use std::sync::{Arc, OnceLock};

use pyo3::prelude::*;

use rlm_registry::environment::{Environment, Interrupt};
use rlm_registry::rlm::{Report, Rlm};

use crate::ask::{AskArgs, Prepared, Run, finish};
use crate::errors::{RlmRegistryError, catching, internal_error, panic_message};
use crate::registry::Registry;
use crate::worker::EnvCell;

/// The most threads the pool runs at once, unless `RLM_ASYNC_THREADS` says otherwise:
/// enough for runs waiting on a model server side by side, few enough to stay cheap
/// (idle ones end after ten seconds).
const DEFAULT_POOL: usize = 64;

/// The pool's size: `RLM_ASYNC_THREADS` when it is a whole number from 1, else
/// [`DEFAULT_POOL`].
fn pool_size() -> usize {
    std::env::var("RLM_ASYNC_THREADS")
        .ok()
        .and_then(|value| value.trim().parse::<usize>().ok())
        .filter(|&threads| threads > 0)
        .unwrap_or(DEFAULT_POOL)
}

/// Starts the runtime on first use and hands it to the bridge: one thread for the
/// futures (they only wait), the bounded pool for the work. A child made by `fork` has
/// none of its threads, so it refuses there.
fn runtime() -> PyResult<()> {
    static STARTED: OnceLock<Result<u32, String>> = OnceLock::new();
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let started = STARTED.get_or_init(|| {
        let built = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(pool_size())
            .thread_name("rlm-async")
            .build()
            .map_err(|error| format!("cannot start the asyncio pool: {error}"))?;
        let runtime = RUNTIME.get_or_init(|| built);
        // Refused only when the bridge already has a runtime: the package's.
        let _ = pyo3_async_runtimes::tokio::init_with_runtime(runtime);
        Ok(std::process::id())
    });
    match started {
        Ok(process) if *process == std::process::id() => Ok(()),
        Ok(_) => Err(RlmRegistryError::new_err(
            "the asyncio API was used before fork, and its threads are not in this process: use the sync API here",
        )),
        Err(message) => Err(RlmRegistryError::new_err(message.clone())),
    }
}

/// Runs `action` when dropped, unless disarmed: a future dropped before its end (its
/// task cancelled) stops the work it waits for.
struct OnCancel<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnCancel<F> {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for OnCancel<F> {
    fn drop(&mut self) {
        if let Some(action) = self.0.take() {
            action();
        }
    }
}

/// An awaitable of `work` run on the environment in the pool, with `execute`'s claim and
/// errors; cancelling it interrupts the execution.
pub(crate) fn call<'py, R>(
    py: Python<'py>,
    cell: &Arc<EnvCell>,
    work: impl FnOnce(&Environment) -> R + Send + 'static,
) -> PyResult<Bound<'py, PyAny>>
where
    R: for<'a> IntoPyObject<'a> + Send + 'static,
{
    runtime()?;
    let reserved = match cell.reserve() {
        Ok(reserved) => reserved,
        // Raised where it is awaited, as a coroutine's error is.
        Err(error) => {
            return pyo3_async_runtimes::tokio::future_into_py(
                py,
                async move { Err::<R, _>(error) },
            );
        }
    };
    let interrupted = Arc::clone(reserved.cell());
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        let on_cancel = OnCancel(Some(move || interrupted.interrupt()));
        let joined = tokio::task::spawn_blocking(move || reserved.run(work)).await;
        on_cancel.disarm();
        joined.map_err(|error| internal_error(&format!("the pool's task failed: {error}")))?
    })
}

/// An awaitable of a prepared run: the run in the pool, its answer made with the GIL
/// there; cancelling it cancels the run.
fn run<'py>(py: Python<'py>, prepared: Prepared) -> PyResult<Bound<'py, PyAny>> {
    runtime()?;
    let run = match prepared {
        Prepared::Finished(answer) => {
            return pyo3_async_runtimes::tokio::future_into_py(py, async move { Ok(answer) });
        }
        Prepared::Run(run) => run,
    };
    let Run { rlm, job, trace } = *run;
    let cancel = Interrupt::new();
    let cancelled = cancel.clone();
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        let on_cancel = OnCancel(Some(move || cancel.interrupt()));
        let joined = tokio::task::spawn_blocking(move || ran(rlm, cancelled, job)).await;
        on_cancel.disarm();
        let report = joined
            .map_err(|error| internal_error(&format!("the pool's task failed: {error}")))??;
        Python::attach(|py| catching(|| finish(py, report, trace)))
    })
}

/// The RLM built (the server asked its window, if it is to be) and `job` run on it,
/// cancelled by `cancel`; a panic in either made into `InternalError`.
fn ran(
    rlm: Box<dyn FnOnce() -> PyResult<Rlm> + Send>,
    cancel: Interrupt,
    job: Box<dyn FnOnce(Rlm) -> PyResult<Report> + Send>,
) -> PyResult<Report> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        job(rlm()?.cancel_on(cancel))
    }))
    .unwrap_or_else(|payload| Err(internal_error(&panic_message(payload.as_ref()))))
}

/// `ask` as an awaitable: the same arguments, answer and exceptions, the run on the
/// package's pool; cancelling the awaiting task cancels the run.
#[pyfunction]
#[pyo3(signature = (
    question = None, context = None, *, model = None, base_url = None, api_key = None,
    max_iterations = None, max_depth = None, trace = None, trace_format = "events",
    paths = Vec::new(), baked = true, registry = None, config = None,
    time_limit = None, memory_limit_mb = None,
    output_bytes = None, max_tokens = None, max_llm_calls = None,
    max_time = None, max_cost = None, prompt_mode = None, context_window = None,
    compact_at = None,
    answer_protocol = None, llm_concurrency = None, max_reply_tokens = None,
    reasoning_effort = None, schema = None, verbose = false, resume = None, force = false,
    cache = None
), text_signature = "(question=None, context=None, *, model=None, base_url=None, api_key=None, \
    max_iterations=None, max_depth=None, trace=None, trace_format='events', paths=(), baked=True, \
    registry=None, config=None, time_limit=None, memory_limit_mb=None, output_bytes=None, \
    max_tokens=None, max_llm_calls=None, max_time=None, max_cost=None, prompt_mode=None, \
    context_window=None, compact_at=None, answer_protocol=None, llm_concurrency=None, \
    max_reply_tokens=None, reasoning_effort=None, schema=None, verbose=False, resume=None, \
    force=False, cache=None)")]
#[allow(clippy::too_many_arguments)]
pub fn ask_async<'py>(
    py: Python<'py>,
    question: Option<String>,
    context: Option<Bound<'py, PyAny>>,
    model: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
    max_iterations: Option<u32>,
    max_depth: Option<usize>,
    trace: Option<std::path::PathBuf>,
    trace_format: &str,
    paths: Vec<std::path::PathBuf>,
    baked: bool,
    registry: Option<PyRef<'py, Registry>>,
    config: Option<std::path::PathBuf>,
    time_limit: Option<f64>,
    memory_limit_mb: Option<usize>,
    output_bytes: Option<usize>,
    max_tokens: Option<u64>,
    max_llm_calls: Option<u64>,
    max_time: Option<f64>,
    max_cost: Option<f64>,
    prompt_mode: Option<String>,
    context_window: Option<Bound<'py, PyAny>>,
    compact_at: Option<Bound<'py, PyAny>>,
    answer_protocol: Option<String>,
    llm_concurrency: Option<usize>,
    max_reply_tokens: Option<Bound<'py, PyAny>>,
    reasoning_effort: Option<String>,
    schema: Option<Bound<'py, PyAny>>,
    verbose: bool,
    resume: Option<std::path::PathBuf>,
    force: bool,
    cache: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    catching(|| {
        let args = AskArgs {
            question,
            context,
            model,
            base_url,
            api_key,
            max_iterations,
            max_depth,
            trace,
            trace_format: trace_format.to_string(),
            paths,
            baked,
            registry,
            config,
            time_limit,
            memory_limit_mb,
            output_bytes,
            max_tokens,
            max_llm_calls,
            max_time,
            max_cost,
            prompt_mode,
            context_window,
            compact_at,
            answer_protocol,
            llm_concurrency,
            max_reply_tokens,
            reasoning_effort,
            schema,
            verbose,
            resume,
            force,
            cache,
        };
        let prepared = crate::ask::prepare(py, args)?;
        run(py, prepared)
    })
}
