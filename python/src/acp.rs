//! `serve_acp`: the package as an Agent Client Protocol agent on its standard input and
//! output (`python -m rlm_registry acp`), the crate's `AcpAgent` over an `Rlm` built as
//! `ask` builds it, so that `pip install` alone gives editors and verifiers an agent.

use std::io::BufReader;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use rlm_registry::acp::AcpAgent;
use rlm_registry::setup::RunSettings;

use crate::ask::{Settings, Source, cache_of, named, reply_limit, window_of};
use crate::errors::{catching, internal_error, panic_message};

/// Serves ACP on standard input and output until standard input ends.
#[pyfunction]
#[pyo3(signature = (
    *, model = None, base_url = None, api_key = None, max_iterations = None,
    max_depth = None, context = Vec::new(), config = None, time_limit = None,
    max_tokens = None, max_llm_calls = None, max_time = None, max_cost = None,
    context_window = None, llm_concurrency = None, max_reply_tokens = None,
    reasoning_effort = None, cache = None, state_dir = None
), text_signature = "(*, model=None, base_url=None, api_key=None, max_iterations=None, \
    max_depth=None, context=(), config=None, time_limit=None, max_tokens=None, \
    max_llm_calls=None, max_time=None, max_cost=None, context_window=None, \
    llm_concurrency=None, max_reply_tokens=None, reasoning_effort=None, cache=None, \
    state_dir=None)")]
#[allow(clippy::too_many_arguments)]
pub fn serve_acp(
    py: Python<'_>,
    model: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
    max_iterations: Option<u32>,
    max_depth: Option<usize>,
    context: Vec<PathBuf>,
    config: Option<PathBuf>,
    time_limit: Option<f64>,
    max_tokens: Option<u64>,
    max_llm_calls: Option<u64>,
    max_time: Option<f64>,
    max_cost: Option<f64>,
    context_window: Option<Bound<'_, PyAny>>,
    llm_concurrency: Option<usize>,
    max_reply_tokens: Option<Bound<'_, PyAny>>,
    reasoning_effort: Option<String>,
    cache: Option<Bound<'_, PyAny>>,
    state_dir: Option<PathBuf>,
) -> PyResult<()> {
    catching(|| {
        if llm_concurrency == Some(0) {
            return Err(PyValueError::new_err("llm_concurrency must be at least 1"));
        }
        let settings = Settings::given(
            max_iterations,
            max_depth,
            time_limit,
            None,
            None,
            RunSettings {
                model,
                base_url,
                api_key,
                llm_concurrency,
                max_reply_tokens: reply_limit(max_reply_tokens.as_ref())?,
                reasoning_effort: named("reasoning_effort", reasoning_effort)?,
                context_window: window_of(context_window.as_ref())?,
                max_tokens,
                max_llm_calls,
                max_time,
                max_cost,
                cache: cache_of(cache.as_ref())?,
                ..RunSettings::default()
            },
            None,
        );
        let source = Source {
            paths: Vec::new(),
            baked: true,
            registry: None,
            config,
        };
        // Every setting (the model's included) is checked before the first message is
        // read, so that a bad one is an error at start, not a failed prompt.
        let rlm = settings.rlm(py, None, source)?;
        let mut agent = AcpAgent::new(rlm).context_paths(context);
        if let Some(dir) = state_dir {
            std::fs::create_dir_all(&dir).map_err(|error| {
                PyOSError::new_err(format!("state_dir {}: {error}", dir.display()))
            })?;
            agent = agent.state_dir(dir);
        }
        serve_interruptibly(py, agent)
    })
}

/// Serves on its own thread, the GIL released, while this thread looks for Python's
/// signals: Ctrl-C raises `KeyboardInterrupt` within a poll, and the process's exit ends
/// the serving thread, blocked on standard input.
fn serve_interruptibly(py: Python<'_>, agent: AcpAgent) -> PyResult<()> {
    let (done, mut report) = mpsc::channel();
    std::thread::spawn(move || {
        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            agent.serve(BufReader::new(std::io::stdin()), std::io::stdout())
        }));
        let _ = done.send(served);
    });
    loop {
        let waited;
        (waited, report) = py.detach(move || (report.recv_timeout(SIGNAL_POLL), report));
        match waited {
            Ok(Ok(served)) => {
                return served.map_err(|error| PyOSError::new_err(format!("serving ACP: {error}")));
            }
            Ok(Err(payload)) => return Err(internal_error(&panic_message(payload.as_ref()))),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(internal_error("the agent's thread ended without a report"));
            }
        }
        py.check_signals()?;
    }
}

/// How often the waiting thread looks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(100);
