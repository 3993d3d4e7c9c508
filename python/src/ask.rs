//! `ask` and `Answer`: the whole RLM loop, as `rlm ask` runs it, and `system_prompt`,
//! the prompt it starts from.

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use rlm_registry::environment::{AnswerSchema, Interrupt, Limits};
use rlm_registry::llm::{Completion, Cost, Llm, LlmError, Request};
use rlm_registry::providers::Providers;
use rlm_registry::rlm::{
    CompactAt, Context, DEFAULT_BLOCK_TIME_LIMIT, DEFAULT_OUTPUT_BYTES, Report, Resume, Rlm,
    TraceFormat,
};
use rlm_registry::setup::{
    CacheChoice, CacheLocation, RunSettings, RunSetup, reply_tokens, window_tokens,
};

use crate::context::ContextArg;
use crate::convert::{json_from_python, json_to_python};
use crate::environment::limits;
use crate::errors::{
    LlmError as PyLlmError, catching, internal_error, panic_message, run_error, with,
};
use crate::registry::{Registry, chosen_registry, load_providers};

// The defaults the text signatures above show.
const _: () = assert!(DEFAULT_BLOCK_TIME_LIMIT.as_secs() == 300 && DEFAULT_OUTPUT_BYTES == 10_000);

/// The settings of a run that `ask`, `system_prompt` and `serve_acp` share.
pub(crate) struct Settings {
    max_iterations: u32,
    max_depth: usize,
    time_limit: f64,
    memory_limit_mb: usize,
    output_bytes: usize,
    /// What the arguments say of the model (its window, reply limit and reasoning
    /// effort), the prompt and the budgets; the environment variables and `config`'s
    /// `[model]`, `[cache]` and `[budgets]` fill the rest, as for `rlm ask`
    /// (`rlm_registry::setup`).
    run: RunSettings,
    schema: Option<serde_json::Value>,
}

impl Settings {
    /// `ask`'s settings: those given, `ask`'s defaults for the rest.
    pub(crate) fn given(
        max_iterations: Option<u32>,
        max_depth: Option<usize>,
        time_limit: Option<f64>,
        memory_limit_mb: Option<usize>,
        output_bytes: Option<usize>,
        run: RunSettings,
        schema: Option<serde_json::Value>,
    ) -> Settings {
        Settings {
            max_iterations: max_iterations.unwrap_or(10),
            max_depth: max_depth.unwrap_or(1),
            time_limit: time_limit.unwrap_or(DEFAULT_BLOCK_TIME_LIMIT.as_secs_f64()),
            memory_limit_mb: memory_limit_mb.unwrap_or(512),
            output_bytes: output_bytes.unwrap_or(DEFAULT_OUTPUT_BYTES),
            run,
            schema,
        }
    }

    /// The run's setup: the arguments over the environment variables over `config`.
    fn setup(&self, py: Python<'_>, config: Option<&Path>) -> PyResult<RunSetup> {
        crate::setup::run_setup(py, &self.run, config)
    }

    /// An RLM over `llm` (the setup's own model when `None`) with these settings and the
    /// registry and providers asked for.
    pub(crate) fn rlm(
        &self,
        py: Python<'_>,
        llm: Option<Arc<dyn Llm>>,
        source: Source<'_>,
    ) -> PyResult<Rlm> {
        let pending = self.pending(py, llm, source)?;
        py.detach(move || pending.build())
    }

    /// What [`Settings::rlm`] gathers with the GIL, to build without it.
    pub(crate) fn pending(
        &self,
        py: Python<'_>,
        llm: Option<Arc<dyn Llm>>,
        source: Source<'_>,
    ) -> PyResult<PendingRlm> {
        let schema = self
            .schema
            .as_ref()
            .map(|schema| {
                AnswerSchema::new(schema.clone())
                    .map_err(|error| PyValueError::new_err(format!("schema: {error}")))
            })
            .transpose()?;
        Ok(PendingRlm {
            setup: self.setup(py, source.config.as_deref())?,
            limits: limits(self.time_limit, self.memory_limit_mb, None)?,
            llm,
            registry: source.registry(py)?,
            providers: source
                .config
                .as_deref()
                .map(|config| load_providers(py, config))
                .transpose()?,
            max_iterations: self.max_iterations,
            max_depth: self.max_depth,
            output_bytes: self.output_bytes,
            schema,
        })
    }
}

/// An RLM's parts, gathered with the GIL; [`PendingRlm::build`] needs none, as it may
/// ask the server its window: a request an awaitable must not make on the event loop's
/// thread.
pub(crate) struct PendingRlm {
    setup: RunSetup,
    limits: Limits,
    llm: Option<Arc<dyn Llm>>,
    registry: Arc<rlm_registry::Registry>,
    providers: Option<Arc<Providers>>,
    max_iterations: u32,
    max_depth: usize,
    output_bytes: usize,
    schema: Option<AnswerSchema>,
}

impl PendingRlm {
    /// The RLM, over the setup's own model when none was given (its window asked of the
    /// server when the settings leave it to the server).
    pub(crate) fn build(self) -> PyResult<Rlm> {
        let mut setup = self.setup;
        let llm = match self.llm {
            Some(llm) => llm,
            None => {
                // Only the setup's own server is asked: a Python callable has none.
                setup.ask_server_window();
                setup
                    .model()
                    .map_err(|error| PyLlmError::new_err(error.to_string()))?
            }
        };
        let mut rlm = setup
            .rlm(llm, self.registry, self.max_iterations)
            .max_depth(self.max_depth)
            .limits(self.limits)
            .output_bytes(self.output_bytes);
        if let Some(schema) = self.schema {
            rlm = rlm.answer_schema(schema);
        }
        if let Some(providers) = self.providers {
            rlm = rlm.providers(providers);
        }
        Ok(rlm)
    }
}

/// A name `T`'s `FromStr` takes, given as the argument `argument`.
pub(crate) fn named<T: std::str::FromStr<Err = String>>(
    argument: &str,
    value: Option<String>,
) -> PyResult<Option<T>> {
    value
        .map(|name| {
            name.parse()
                .map_err(|error| PyValueError::new_err(format!("{argument}: {error}")))
        })
        .transpose()
}

/// `compact_at`: a share of the window (`0.85`), or `"off"` (or 0) for never, as
/// `--compact-at` takes it.
fn compact_at_of(value: &Bound<'_, PyAny>) -> PyResult<Option<CompactAt>> {
    let text = match value.extract::<f64>() {
        Ok(share) => share.to_string(),
        Err(_) => value.extract::<String>()?,
    };
    CompactAt::parse(&text).map_err(|error| PyValueError::new_err(format!("compact_at: {error}")))
}

/// A number of tokens as Python gives it: an int, or the text the command line takes
/// (`8k`, `128k`, `32768`), read by `parse` with `name` in its error.
fn tokens_of<T>(
    name: &str,
    value: Option<&Bound<'_, PyAny>>,
    parse: fn(&str) -> Result<T, String>,
) -> PyResult<Option<T>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let text = match value.extract::<u64>() {
        Ok(count) => count.to_string(),
        Err(_) => value.extract::<String>().map_err(|_| {
            PyValueError::new_err(format!(
                "{name}: a number of tokens (an int, or text such as '8k'), not {value}"
            ))
        })?,
    };
    parse(&text)
        .map(Some)
        .map_err(|error| PyValueError::new_err(format!("{name}: {error}")))
}

/// `max_reply_tokens`, held to the rule `--max-reply-tokens` and `RLM_MAX_REPLY_TOKENS`
/// are read by, so that the three refuse the same values with the same words.
pub(crate) fn reply_limit(tokens: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u32>> {
    tokens_of("max_reply_tokens", tokens, reply_tokens)
}

/// `context_window`, read as `--context-window` and `RLM_CONTEXT_WINDOW` are.
pub(crate) fn window_of(tokens: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    tokens_of("context_window", tokens, window_tokens)
}

/// Where the functions come from: a `Registry`, or paths on the baked registry, and an
/// `rlm.toml`.
pub(crate) struct Source<'py> {
    pub(crate) paths: Vec<PathBuf>,
    pub(crate) baked: bool,
    pub(crate) registry: Option<PyRef<'py, Registry>>,
    pub(crate) config: Option<PathBuf>,
}

impl Source<'_> {
    fn registry(&self, py: Python<'_>) -> PyResult<Arc<rlm_registry::Registry>> {
        chosen_registry(py, self.registry.as_deref(), self.paths.clone(), self.baked)
    }
}

/// Answers `question` about `context` with the RLM loop, as `rlm ask` does.
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
pub fn ask<'py>(
    py: Python<'py>,
    question: Option<String>,
    context: Option<Bound<'py, PyAny>>,
    model: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
    max_iterations: Option<u32>,
    max_depth: Option<usize>,
    trace: Option<PathBuf>,
    trace_format: &str,
    paths: Vec<PathBuf>,
    baked: bool,
    registry: Option<PyRef<'py, Registry>>,
    config: Option<PathBuf>,
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
    resume: Option<PathBuf>,
    force: bool,
    cache: Option<Bound<'py, PyAny>>,
) -> PyResult<Answer> {
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
        match prepare(py, args)? {
            Prepared::Finished(answer) => Ok(answer),
            Prepared::Run(run) => {
                let Run { rlm, job, trace } = *run;
                let rlm = py.detach(rlm)?;
                let report = run_interruptibly(py, rlm, job)??;
                finish(py, report, trace)
            }
        }
    })
}

/// `ask`'s arguments, as `ask` and `ask_async` take them.
pub(crate) struct AskArgs<'py> {
    pub(crate) question: Option<String>,
    pub(crate) context: Option<Bound<'py, PyAny>>,
    pub(crate) model: Option<String>,
    pub(crate) base_url: Option<String>,
    pub(crate) api_key: Option<String>,
    pub(crate) max_iterations: Option<u32>,
    pub(crate) max_depth: Option<usize>,
    pub(crate) trace: Option<PathBuf>,
    pub(crate) trace_format: String,
    pub(crate) paths: Vec<PathBuf>,
    pub(crate) baked: bool,
    pub(crate) registry: Option<PyRef<'py, Registry>>,
    pub(crate) config: Option<PathBuf>,
    pub(crate) time_limit: Option<f64>,
    pub(crate) memory_limit_mb: Option<usize>,
    pub(crate) output_bytes: Option<usize>,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) max_llm_calls: Option<u64>,
    pub(crate) max_time: Option<f64>,
    pub(crate) max_cost: Option<f64>,
    pub(crate) prompt_mode: Option<String>,
    pub(crate) context_window: Option<Bound<'py, PyAny>>,
    pub(crate) compact_at: Option<Bound<'py, PyAny>>,
    pub(crate) answer_protocol: Option<String>,
    pub(crate) llm_concurrency: Option<usize>,
    pub(crate) max_reply_tokens: Option<Bound<'py, PyAny>>,
    pub(crate) reasoning_effort: Option<String>,
    pub(crate) schema: Option<Bound<'py, PyAny>>,
    pub(crate) verbose: bool,
    pub(crate) resume: Option<PathBuf>,
    pub(crate) force: bool,
    pub(crate) cache: Option<Bound<'py, PyAny>>,
}

/// What `ask` does before the run: the arguments checked, the RLM built.
pub(crate) enum Prepared {
    /// A resumed run its trace records as finished: nothing to run.
    Finished(Answer),
    /// The run to make, then [`finish`].
    Run(Box<Run>),
}

/// A run ready to go: the RLM to build (without the GIL: it may ask the server its
/// window, and creates the trace file), what to run on it, and the trace it writes.
pub(crate) struct Run {
    pub(crate) rlm: Box<dyn FnOnce() -> PyResult<Rlm> + Send>,
    pub(crate) job: Box<dyn FnOnce(Rlm) -> PyResult<Report> + Send>,
    pub(crate) trace: Option<PathBuf>,
}

/// Checks `ask`'s arguments and builds its run, with the GIL.
pub(crate) fn prepare(py: Python<'_>, args: AskArgs<'_>) -> PyResult<Prepared> {
    let AskArgs {
        question,
        context,
        model,
        base_url,
        api_key,
        max_iterations,
        max_depth,
        trace,
        trace_format,
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
    } = args;
    if llm_concurrency == Some(0) {
        return Err(PyValueError::new_err("llm_concurrency must be at least 1"));
    }
    let resumed = resume.as_deref().map(resumed_trace).transpose()?;
    let question = match (&resumed, question) {
        (None, Some(question)) => question,
        (None, None) => {
            return Err(PyValueError::new_err(
                "ask: give a question, or resume=TRACE",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err(
                "ask: a resumed run's question is in its trace: give resume= without a question",
            ));
        }
        (Some(resume), None) => resume.question().to_string(),
    };
    if resumed.is_some() && trace.is_some() {
        return Err(PyValueError::new_err(
            "ask: a resumed run appends to the trace it resumes: give resume= without trace=",
        ));
    }
    if let (Some(resume), Some(path)) = (&resumed, &resume)
        && let Some(answer) = resume.finished()
    {
        return Ok(Prepared::Finished(Answer::finished(answer, path)));
    }
    let recorded = resumed.as_ref().and_then(|r| r.setup().limits);
    let settings = Settings::given(
        max_iterations.or(recorded.map(|l| l.max_iterations)),
        max_depth.or(recorded.map(|l| l.max_depth)),
        time_limit.or(recorded.map(|l| l.block.time_ms as f64 / 1000.0)),
        memory_limit_mb.or(recorded.map(|l| l.block.memory_bytes / (1024 * 1024))),
        output_bytes.or(recorded.map(|l| l.output_bytes)),
        RunSettings {
            model,
            base_url,
            api_key,
            llm_concurrency,
            max_reply_tokens: reply_limit(max_reply_tokens.as_ref())?,
            reasoning_effort: named("reasoning_effort", reasoning_effort)?,
            context_window: window_of(context_window.as_ref())?,
            compact_at: compact_at.as_ref().map(compact_at_of).transpose()?,
            prompt_mode: named("prompt_mode", prompt_mode)?,
            answer_protocol: named("answer_protocol", answer_protocol)?,
            max_tokens,
            max_llm_calls,
            max_time,
            max_cost,
            cache: cache_of(cache.as_ref())?,
            ..RunSettings::default()
        },
        schema.as_ref().map(schema_of).transpose()?,
    );
    let settings = match &resumed {
        Some(resume) => Settings {
            run: settings.run.or_recorded(resume.setup()),
            ..settings
        },
        None => settings,
    };
    let source = Source {
        paths,
        baked,
        registry,
        config,
    };
    let pending = settings.pending(py, None, source)?;
    // Every argument is checked before the trace file is created.
    let trace_format = trace_format_of(&trace_format)?;
    // A path given is recorded, so that a resume can gather it again.
    let context_path = context.as_ref().and_then(crate::context::path_of);
    let context = match (&resumed, context) {
        (Some(resume), None) => recorded_context(py, resume)?,
        (_, context) => context_of(context.as_ref())?,
    };
    let trace_file = trace.clone();
    let rlm = Box::new(move || {
        let mut rlm = pending.build()?;
        if let Some(path) = context_path {
            rlm = rlm.context_paths([path]);
        }
        if let Some(path) = &trace_file {
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
        Ok(rlm)
    });
    let job: Box<dyn FnOnce(Rlm) -> PyResult<Report> + Send> = match resumed {
        Some(resume) => {
            let resume = resume.force(force);
            Box::new(move |rlm| {
                resume
                    .run(rlm, context, None)
                    .map_err(|message| PyValueError::new_err(format!("resume: {message}")))
            })
        }
        None => Box::new(move |rlm| Ok(rlm.run_report(&question, context, None))),
    };
    Ok(Prepared::Run(Box::new(Run {
        rlm,
        job,
        trace: trace.or(resume),
    })))
}

/// The answer of a run's report, or its error with what the run took.
pub(crate) fn finish(py: Python<'_>, report: Report, trace: Option<PathBuf>) -> PyResult<Answer> {
    let usage = report.usage.total();
    let value = report
        .value
        .as_ref()
        .map(|value| json_to_python(py, value).map(Bound::unbind))
        .transpose()?;
    let answer = Answer {
        answer: String::new(),
        value,
        turns: report.turns,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        reasoning_tokens: usage.reasoning_tokens,
        llm_calls: usage.calls,
        seconds: report.usage.elapsed.as_secs_f64(),
        cost: (usage.cost > Cost::ZERO).then(|| usage.cost.usd()),
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
            let error = with(py, error, "reasoning_tokens", answer.reasoning_tokens);
            Err(with(py, error, "trace", answer.trace))
        }
    }
}

/// Runs `rlm` on its own thread, the GIL released, while this thread looks for Python's
/// signals: Ctrl-C cancels the run (which stops at its next safe point, its trace whole)
/// and raises `KeyboardInterrupt` within a second.
fn run_interruptibly<T: Send + 'static>(
    py: Python<'_>,
    rlm: Rlm,
    run: impl FnOnce(Rlm) -> T + Send + 'static,
) -> PyResult<T> {
    let cancel = Interrupt::new();
    let rlm = rlm.cancel_on(cancel.clone());
    let (done, mut report) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(rlm)));
        let _ = done.send(outcome);
    });
    loop {
        // The receiver goes to the thread that waits without the GIL, and comes back.
        let waited;
        (waited, report) = py.detach(move || (report.recv_timeout(SIGNAL_POLL), report));
        match waited {
            Ok(outcome) => {
                return outcome.map_err(|payload| internal_error(&panic_message(payload.as_ref())));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(internal_error("the run's thread ended without a report"));
            }
        }
        if let Err(signal) = py.check_signals() {
            cancel.interrupt();
            // The run stops at its next safe point: waited for briefly, so that its
            // trace ends with the last whole turn before the exception is raised.
            py.detach(move || {
                let _ = report.recv_timeout(CANCEL_GRACE);
            });
            return Err(signal);
        }
    }
}

/// The run the trace at `path` records, to resume.
fn resumed_trace(path: &Path) -> PyResult<Resume> {
    Resume::from_file(path)
        .map_err(|error| PyValueError::new_err(format!("resume {}: {error}", path.display())))
}

/// The context of a resumed run given none: gathered again from the paths its trace
/// records (checked against the recorded hash when the run goes on).
fn recorded_context(py: Python<'_>, resume: &Resume) -> PyResult<Option<Context>> {
    let setup = resume.setup();
    let paths: Vec<PathBuf> = setup
        .context_paths
        .iter()
        .flatten()
        .map(PathBuf::from)
        .collect();
    if paths.is_empty() {
        if setup.context.is_some() {
            return Err(PyValueError::new_err(
                "resume: the run had a context whose paths the trace does not record: give it with context=",
            ));
        }
        return Ok(None);
    }
    crate::context::gathered(py, paths).map(Some)
}

/// How often the waiting thread looks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(50);
/// How long a cancelled run is given to stop before `KeyboardInterrupt` is raised.
const CANCEL_GRACE: Duration = Duration::from_millis(500);

/// The system prompt `ask` starts from, for `context`.
#[pyfunction]
#[pyo3(signature = (
    context = None, *, max_iterations = 10, max_depth = 1, paths = Vec::new(),
    baked = true, registry = None, config = None,
    time_limit = DEFAULT_BLOCK_TIME_LIMIT.as_secs_f64(), memory_limit_mb = 512,
    output_bytes = DEFAULT_OUTPUT_BYTES, prompt_mode = None,
    context_window = None, answer_protocol = None, schema = None
), text_signature = "(context=None, *, max_iterations=10, max_depth=1, paths=(), baked=True, \
    registry=None, config=None, time_limit=300.0, memory_limit_mb=512, output_bytes=10000, \
    prompt_mode=None, context_window=None, answer_protocol=None, schema=None)")]
#[allow(clippy::too_many_arguments)]
pub fn system_prompt<'py>(
    py: Python<'py>,
    context: Option<Bound<'py, PyAny>>,
    max_iterations: u32,
    max_depth: usize,
    paths: Vec<PathBuf>,
    baked: bool,
    registry: Option<PyRef<'py, Registry>>,
    config: Option<PathBuf>,
    time_limit: f64,
    memory_limit_mb: usize,
    output_bytes: usize,
    prompt_mode: Option<String>,
    context_window: Option<Bound<'py, PyAny>>,
    answer_protocol: Option<String>,
    schema: Option<Bound<'py, PyAny>>,
) -> PyResult<String> {
    catching(|| {
        let settings = Settings {
            max_iterations,
            max_depth,
            time_limit,
            memory_limit_mb,
            output_bytes,
            run: RunSettings {
                context_window: window_of(context_window.as_ref())?,
                prompt_mode: named("prompt_mode", prompt_mode)?,
                answer_protocol: named("answer_protocol", answer_protocol)?,
                ..RunSettings::default()
            },
            schema: schema.as_ref().map(schema_of).transpose()?,
        };
        let source = Source {
            paths,
            baked,
            registry,
            config,
        };
        let rlm = settings.rlm(py, Some(Arc::new(NoModel)), source)?;
        let context = context_of(context.as_ref())?;
        Ok(rlm.system_prompt(context.as_ref()))
    })
}

/// The `context` argument as the crate takes it (see `crate::context`).
fn context_of(context: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Context>> {
    context
        .map(|value| ContextArg::from_python(value)?.into_context())
        .transpose()
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

/// A JSON Schema given as a `dict` (or any JSON value) or as JSON text.
fn schema_of(schema: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    match schema.extract::<String>() {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|error| PyValueError::new_err(format!("schema is not JSON: {error}"))),
        Err(_) => json_from_python(schema, "schema"),
    }
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
    /// What `FINAL` or `FINAL_VAR` gave; with a `schema`, the answer's JSON text.
    answer: String,
    /// With a `schema`, the answer as Python values (it matched the schema); else `None`.
    value: Option<Py<PyAny>>,
    /// The root agent's turns, the last included.
    turns: u32,
    /// Prompt tokens over every model call of the run, as the server reported them.
    prompt_tokens: u64,
    /// Completion tokens, likewise; a reasoning model's thinking included.
    completion_tokens: u64,
    /// Of the completion tokens, those a reasoning model spent thinking, where the
    /// server reported them (`completion_tokens_details.reasoning_tokens`).
    reasoning_tokens: u64,
    /// Model calls: the agents' turns and every sub-call.
    llm_calls: u64,
    /// Wall time of the run.
    seconds: f64,
    /// What the run cost in US dollars, where known (the server's `usage.cost`, else the
    /// model's price in `config`'s `[prices]`); else `None`.
    cost: Option<f64>,
    /// The trace file written, if one was asked for.
    trace: Option<String>,
}

impl Answer {
    /// The answer of a run the trace at `path` records as finished: a resume sends
    /// nothing and spends nothing.
    fn finished(answer: &str, path: &Path) -> Answer {
        Answer {
            answer: answer.to_string(),
            value: None,
            turns: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
            llm_calls: 0,
            seconds: 0.0,
            cost: None,
            trace: Some(path.display().to_string()),
        }
    }
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

/// `cache`: `None` to resolve it as `rlm ask` does (`RLM_CACHE`, `[cache] path`), `False`
/// for none whatever they say (`--no-cache`), or where it lives (`--cache`).
pub(crate) fn cache_of(cache: Option<&Bound<'_, PyAny>>) -> PyResult<CacheChoice> {
    let Some(cache) = cache else {
        return Ok(CacheChoice::Unset);
    };
    if let Ok(on) = cache.extract::<bool>() {
        return if on {
            Err(PyValueError::new_err(
                "cache: give where the cache lives, or False for none",
            ))
        } else {
            Ok(CacheChoice::Off)
        };
    }
    let place: PathBuf = cache.extract()?;
    Ok(CacheChoice::At(CacheLocation::parse(
        &place.to_string_lossy(),
    )))
}
