//! `ask` and `Answer`: the whole RLM loop, as `rlm ask` runs it, and `system_prompt`,
//! the prompt it starts from.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use rlm_registry::conventions::AnswerProtocol;
use rlm_registry::llm::{Completion, Llm, LlmClient, LlmConfig, LlmError, Request};
use rlm_registry::rlm::{
    Budgets, Context, DEFAULT_BLOCK_TIME_LIMIT, DEFAULT_OUTPUT_BYTES, PromptMode, Rlm, TraceFormat,
};

use crate::environment::{Text, limits};
use crate::errors::{
    LlmError as PyLlmError, catching, internal_error, panic_message, run_error, with,
};
use crate::registry::{Registry, chosen_registry, load_providers};

/// What the model studies: one text, or several (chunks), each `str` or `bytes`.
#[derive(FromPyObject)]
pub(crate) enum ContextArg<'py> {
    One(Text<'py>),
    Chunks(Vec<Text<'py>>),
}

impl ContextArg<'_> {
    fn context(&self) -> PyResult<Context> {
        Ok(match self {
            ContextArg::One(text) => Context::Text(text.bytes()?.to_vec()),
            ContextArg::Chunks(chunks) => Context::Chunks(
                chunks
                    .iter()
                    .map(|chunk| chunk.bytes().map(<[u8]>::to_vec))
                    .collect::<PyResult<_>>()?,
            ),
        })
    }
}

// The defaults the text signatures above show.
const _: () = assert!(DEFAULT_BLOCK_TIME_LIMIT.as_secs() == 300 && DEFAULT_OUTPUT_BYTES == 10_000);

/// The settings of a run that `ask` and `system_prompt` share.
struct Settings {
    max_iterations: u32,
    max_depth: usize,
    time_limit: f64,
    memory_limit_mb: usize,
    output_bytes: usize,
    prompt_mode: String,
    answer_protocol: String,
}

impl Settings {
    /// An RLM over `llm` with these settings and the registry and providers asked for.
    fn rlm(&self, py: Python<'_>, llm: Arc<dyn Llm>, source: Source<'_>) -> PyResult<Rlm> {
        let prompt_mode = match self.prompt_mode.as_str() {
            "full" => PromptMode::Full,
            "compact" => PromptMode::Compact,
            "auto" => PromptMode::auto(),
            other => {
                return Err(PyValueError::new_err(format!(
                    "prompt_mode must be \"full\", \"compact\" or \"auto\", not {other:?}"
                )));
            }
        };
        let answer_protocol: AnswerProtocol = self.answer_protocol.parse().map_err(|_| {
            PyValueError::new_err(format!(
                "answer_protocol must be \"final\" or \"answer\", not {:?}",
                self.answer_protocol
            ))
        })?;
        let limits = limits(self.time_limit, self.memory_limit_mb, None)?;
        let mut rlm = Rlm::new(llm, source.registry(py)?, self.max_iterations)
            .max_depth(self.max_depth)
            .limits(limits)
            .output_bytes(self.output_bytes)
            .prompt_mode(prompt_mode)
            .answer_protocol(answer_protocol);
        if let Some(config) = source.config {
            rlm = rlm.providers(load_providers(py, &config)?);
        }
        Ok(rlm)
    }
}

/// Where the functions come from: a `Registry`, or paths on the baked registry, and an
/// `rlm.toml`.
struct Source<'py> {
    paths: Vec<PathBuf>,
    baked: bool,
    registry: Option<PyRef<'py, Registry>>,
    config: Option<PathBuf>,
}

impl Source<'_> {
    fn registry(&self, py: Python<'_>) -> PyResult<Arc<rlm_registry::Registry>> {
        chosen_registry(py, self.registry.as_deref(), self.paths.clone(), self.baked)
    }
}

/// Answers `question` about `context` with the RLM loop, as `rlm ask` does.
#[pyfunction]
#[pyo3(signature = (
    question, context = None, *, model = None, base_url = None, api_key = None,
    max_iterations = 10, max_depth = 1, trace = None, trace_format = "events",
    paths = Vec::new(), baked = true, registry = None, config = None,
    time_limit = DEFAULT_BLOCK_TIME_LIMIT.as_secs_f64(), memory_limit_mb = 512,
    output_bytes = DEFAULT_OUTPUT_BYTES, max_tokens = None, max_llm_calls = None,
    max_time = None, prompt_mode = "full".to_string(),
    answer_protocol = "final".to_string(), verbose = false
), text_signature = "(question, context=None, *, model=None, base_url=None, api_key=None, \
    max_iterations=10, max_depth=1, trace=None, trace_format='events', paths=(), baked=True, \
    registry=None, config=None, time_limit=300.0, memory_limit_mb=512, output_bytes=10000, \
    max_tokens=None, max_llm_calls=None, max_time=None, prompt_mode='full', \
    answer_protocol='final', verbose=False)")]
#[allow(clippy::too_many_arguments)]
pub fn ask<'py>(
    py: Python<'py>,
    question: &str,
    context: Option<ContextArg<'py>>,
    model: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
    max_iterations: u32,
    max_depth: usize,
    trace: Option<PathBuf>,
    trace_format: &str,
    paths: Vec<PathBuf>,
    baked: bool,
    registry: Option<PyRef<'py, Registry>>,
    config: Option<PathBuf>,
    time_limit: f64,
    memory_limit_mb: usize,
    output_bytes: usize,
    max_tokens: Option<u64>,
    max_llm_calls: Option<u64>,
    max_time: Option<f64>,
    prompt_mode: String,
    answer_protocol: String,
    verbose: bool,
) -> PyResult<Answer> {
    catching(|| {
        let client = client(model, base_url, api_key)?;
        let settings = Settings {
            max_iterations,
            max_depth,
            time_limit,
            memory_limit_mb,
            output_bytes,
            prompt_mode,
            answer_protocol,
        };
        let source = Source {
            paths,
            baked,
            registry,
            config,
        };
        let mut rlm = settings.rlm(py, Arc::new(client), source)?.budgets(budgets(
            max_tokens,
            max_llm_calls,
            max_time,
        )?);
        // Every argument is checked before the trace file is created.
        let trace_format = trace_format_of(trace_format)?;
        let context = context.as_ref().map(ContextArg::context).transpose()?;
        if let Some(path) = &trace {
            rlm = rlm
                .trace_file(path)
                .map_err(|error| {
                    PyOSError::new_err(format!(
                        "cannot write the trace {}: {error}",
                        path.display()
                    ))
                })?
                .trace_format(trace_format);
        }
        if verbose {
            rlm = rlm.live_view(std::io::stderr());
        }
        let question = question.to_string();
        let report = py
            .detach(move || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    rlm.run_report(&question, context, None)
                }))
            })
            .map_err(|payload| internal_error(&panic_message(payload.as_ref())))?;
        let usage = report.usage.total();
        let answer = Answer {
            answer: String::new(),
            turns: report.turns,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            llm_calls: usage.calls,
            seconds: report.usage.elapsed.as_secs_f64(),
            trace: trace.map(|path| path.display().to_string()),
        };
        match report.result {
            Ok(text) => Ok(Answer {
                answer: text,
                ..answer
            }),
            Err(error) => {
                let error = run_error(py, error);
                let error = with(py, error, "turns", answer.turns);
                let error = with(py, error, "prompt_tokens", answer.prompt_tokens);
                let error = with(py, error, "completion_tokens", answer.completion_tokens);
                Err(with(py, error, "trace", answer.trace))
            }
        }
    })
}

/// The system prompt `ask` starts from, for `context`.
#[pyfunction]
#[pyo3(signature = (
    context = None, *, max_iterations = 10, max_depth = 1, paths = Vec::new(),
    baked = true, registry = None, config = None,
    time_limit = DEFAULT_BLOCK_TIME_LIMIT.as_secs_f64(), memory_limit_mb = 512,
    output_bytes = DEFAULT_OUTPUT_BYTES, prompt_mode = "full".to_string(),
    answer_protocol = "final".to_string()
), text_signature = "(context=None, *, max_iterations=10, max_depth=1, paths=(), baked=True, \
    registry=None, config=None, time_limit=300.0, memory_limit_mb=512, output_bytes=10000, \
    prompt_mode='full', answer_protocol='final')")]
#[allow(clippy::too_many_arguments)]
pub fn system_prompt<'py>(
    py: Python<'py>,
    context: Option<ContextArg<'py>>,
    max_iterations: u32,
    max_depth: usize,
    paths: Vec<PathBuf>,
    baked: bool,
    registry: Option<PyRef<'py, Registry>>,
    config: Option<PathBuf>,
    time_limit: f64,
    memory_limit_mb: usize,
    output_bytes: usize,
    prompt_mode: String,
    answer_protocol: String,
) -> PyResult<String> {
    catching(|| {
        let settings = Settings {
            max_iterations,
            max_depth,
            time_limit,
            memory_limit_mb,
            output_bytes,
            prompt_mode,
            answer_protocol,
        };
        let source = Source {
            paths,
            baked,
            registry,
            config,
        };
        let rlm = settings.rlm(py, Arc::new(NoModel), source)?;
        let context = context.as_ref().map(ContextArg::context).transpose()?;
        Ok(rlm.system_prompt(context.as_ref()))
    })
}

/// The model of a prompt that is only read, never sent.
struct NoModel;

impl Llm for NoModel {
    fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
        Err(LlmError::Config(
            "no model: the prompt is only shown".to_string(),
        ))
    }
}

/// The client from the environment variables `rlm ask` reads, with the arguments over
/// them.
fn client(
    model: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
) -> PyResult<LlmClient> {
    let failed = |error: LlmError| PyLlmError::new_err(error.to_string());
    let mut config = LlmConfig::from_env().map_err(failed)?;
    if let Some(model) = model {
        config.model = model;
    }
    if let Some(base_url) = base_url {
        config.base_url = base_url;
    }
    if let Some(api_key) = api_key {
        config.api_key = Some(api_key);
    }
    LlmClient::new(config).map_err(failed)
}

fn budgets(
    max_tokens: Option<u64>,
    max_llm_calls: Option<u64>,
    max_time: Option<f64>,
) -> PyResult<Budgets> {
    let wall_time = match max_time {
        None => None,
        Some(seconds) if seconds.is_finite() && seconds > 0.0 && seconds <= 1e9 => {
            Some(Duration::from_secs_f64(seconds))
        }
        Some(_) => {
            return Err(PyValueError::new_err(
                "max_time must be a positive number of seconds",
            ));
        }
    };
    Ok(Budgets {
        total_tokens: max_tokens,
        llm_calls: max_llm_calls,
        wall_time,
    })
}

fn trace_format_of(name: &str) -> PyResult<TraceFormat> {
    match name {
        "events" => Ok(TraceFormat::Events),
        "rlm" => Ok(TraceFormat::Rlm),
        other => Err(PyValueError::new_err(format!(
            "trace_format must be \"events\" or \"rlm\", not {other:?}"
        ))),
    }
}

/// A run's answer and what it took.
#[pyclass(module = "rlm_registry", frozen, get_all)]
pub struct Answer {
    /// What `FINAL` or `FINAL_VAR` gave.
    answer: String,
    /// The root agent's turns, the last included.
    turns: u32,
    /// Prompt tokens over every model call of the run, as the server reported them.
    prompt_tokens: u64,
    /// Completion tokens, likewise.
    completion_tokens: u64,
    /// Model calls: the agents' turns and every sub-call.
    llm_calls: u64,
    /// Wall time of the run.
    seconds: f64,
    /// The trace file written, if one was asked for.
    trace: Option<String>,
}

#[pymethods]
impl Answer {
    fn __str__(&self) -> String {
        self.answer.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "Answer(answer={:?}, turns={}, prompt_tokens={}, completion_tokens={}, trace={:?})",
            self.answer, self.turns, self.prompt_tokens, self.completion_tokens, self.trace
        )
    }
}
