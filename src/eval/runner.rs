//! [`Runner`]: every (task, method) of a run, `jobs` at a time, each result appended to
//! `results.jsonl` as it ends; a re-run skips what the file already holds.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::conventions::AnswerProtocol;
use crate::environment::{AnswerSchema, Limits};
use crate::llm::{Cost, Llm, Price, call_cost};
use crate::providers::Providers;
use crate::registry::Registry;
use crate::rlm::{Budgets, Context, PromptMode, Resume, Rlm};

use super::direct::{direct_answer, direct_context, direct_request, direct_trace};
use super::method::EvalMethod;
use super::results::{DepthTokens, ResultWriter, TaskResult, read_results};
use super::task::Task;

/// The results file's name in the output directory.
pub const RESULTS_FILE: &str = "results.jsonl";
/// The traces' directory in the output directory.
pub const TRACES_DIR: &str = "traces";

/// How a run answers its tasks.
#[derive(Clone)]
pub struct EvalOptions {
    /// The methods, each run on every task.
    pub methods: Vec<EvalMethod>,
    /// Tasks run at once.
    pub jobs: usize,
    /// Turns of each agent (the loop's methods).
    pub max_iterations: u32,
    /// How deep `rlm_query` children may go.
    pub max_depth: usize,
    /// How the functions are listed in the system prompt.
    pub prompt_mode: PromptMode,
    /// How the system prompt teaches the model to end the run (the loop's methods).
    pub answer_protocol: AnswerProtocol,
    /// The model's context window, in tokens: the `direct` method cuts the context to
    /// it, and the loop's methods refuse a first request that would not fit.
    pub context_window: u64,
    /// Budgets of each (task, method) run.
    pub budgets: Budgets,
    /// The model's price: the loop's cost where the server reports none, and what a cost
    /// budget reserves.
    pub price: Option<Price>,
    /// The registry of the `rlm` method (`rlm-bare` gets an empty one).
    pub registry: Arc<Registry>,
    /// The providers of the loop's methods (the built-ins when `None`).
    pub providers: Option<Arc<Providers>>,
    /// Sandbox limits of the loop's methods (the defaults when `None`).
    pub limits: Option<Limits>,
}

impl Default for EvalOptions {
    fn default() -> EvalOptions {
        EvalOptions {
            methods: vec![EvalMethod::Rlm, EvalMethod::Direct],
            jobs: 1,
            max_iterations: crate::rlm::DEFAULT_MAX_ITERATIONS,
            max_depth: 1,
            prompt_mode: PromptMode::default(),
            answer_protocol: AnswerProtocol::default(),
            context_window: 128_000,
            budgets: Budgets::default(),
            price: None,
            registry: Arc::new(Registry::baked().clone()),
            providers: None,
            limits: None,
        }
    }
}

/// Where a run stands, after each result.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// (task, method) runs finished, those from an earlier run included.
    pub done: usize,
    /// All of them.
    pub total: usize,
    /// Sum of the scores of the finished ones.
    pub score_sum: f64,
    /// Tokens used by the finished ones.
    pub tokens: u64,
    /// Wall time of this run so far.
    pub elapsed: Duration,
}

impl Progress {
    /// The mean score so far (0 before any result).
    pub fn mean_score(&self) -> f64 {
        if self.done == 0 {
            0.0
        } else {
            self.score_sum / self.done as f64
        }
    }
}

/// Runs tasks with a model.
///
/// ```no_run
/// use std::sync::Arc;
/// use rlm_registry::eval::{EvalOptions, Family, Runner, Size, generate};
/// use rlm_registry::llm::LlmClient;
///
/// let llm = Arc::new(LlmClient::from_env()?);
/// let tasks = generate(&["niah".parse::<Family>()?], &[Size::new(8_000)], 5, 1);
/// let runner = Runner::new(llm, EvalOptions::default(), "eval-out");
/// let results = runner.run(&tasks, |_, progress| eprintln!("{}/{}", progress.done, progress.total))?;
/// println!("{} results", results.len());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Runner {
    llm: Arc<dyn Llm>,
    options: EvalOptions,
    out: PathBuf,
    task_base: PathBuf,
}

impl Runner {
    /// A runner writing into the directory `out`.
    pub fn new(llm: Arc<dyn Llm>, options: EvalOptions, out: impl Into<PathBuf>) -> Runner {
        Runner {
            llm,
            options,
            out: out.into(),
            task_base: PathBuf::from("."),
        }
    }

    /// The directory tasks' `context_file` paths are relative to (default `.`).
    pub fn task_base(mut self, base: impl Into<PathBuf>) -> Runner {
        self.task_base = base.into();
        self
    }

    /// Runs every (task, method) not already in the results file, calling `on_result`
    /// after each; returns the results of every (task, method) of `tasks`, in task
    /// then method order, earlier runs' included.
    pub fn run(
        &self,
        tasks: &[Task],
        on_result: impl Fn(&TaskResult, &Progress) + Sync,
    ) -> std::io::Result<Vec<TaskResult>> {
        std::fs::create_dir_all(self.out.join(TRACES_DIR))?;
        let path = self.out.join(RESULTS_FILE);
        let wanted: HashSet<(String, String)> = tasks
            .iter()
            .flat_map(|t| {
                self.options
                    .methods
                    .iter()
                    .map(|m| (t.id.clone(), m.to_string()))
            })
            .collect();
        let mut earlier: Vec<TaskResult> = read_results(&path)?
            .into_iter()
            .filter(|r| wanted.contains(&r.key()))
            .collect();
        let mut seen = HashSet::new();
        earlier.retain(|r| seen.insert(r.key()));
        let work: Vec<(&Task, EvalMethod)> = tasks
            .iter()
            .flat_map(|t| self.options.methods.iter().map(move |&m| (t, m)))
            .filter(|(t, m)| !seen.contains(&(t.id.clone(), m.to_string())))
            .collect();
        let started = Instant::now();
        let progress = Mutex::new(Progress {
            done: earlier.len(),
            total: wanted.len(),
            score_sum: earlier.iter().map(|r| r.score).sum(),
            tokens: earlier
                .iter()
                .map(|r| r.prompt_tokens() + r.completion_tokens())
                .sum(),
            elapsed: Duration::ZERO,
        });
        let writer = Mutex::new(ResultWriter::append(&path)?);
        let fresh = Mutex::new(Vec::new());
        let next = AtomicUsize::new(0);
        let failure: Mutex<Option<std::io::Error>> = Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..self.options.jobs.clamp(1, work.len().max(1)) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(&(task, method)) = work.get(i) else {
                            break;
                        };
                        if lock(&failure).is_some() {
                            break;
                        }
                        let result = self.run_one(task, method);
                        if let Err(error) = lock(&writer).write(&result) {
                            *lock(&failure) = Some(error);
                            break;
                        }
                        let snapshot = {
                            let mut p = lock(&progress);
                            p.done += 1;
                            p.score_sum += result.score;
                            p.tokens += result.prompt_tokens() + result.completion_tokens();
                            p.elapsed = started.elapsed();
                            *p
                        };
                        on_result(&result, &snapshot);
                        lock(&fresh).push(result);
                    }
                });
            }
        });
        if let Some(error) = lock(&failure).take() {
            return Err(error);
        }
        let mut all = earlier;
        all.extend(std::mem::take(&mut *lock(&fresh)));
        let order = |r: &TaskResult| {
            let task = tasks.iter().position(|t| t.id == r.id);
            let method = self
                .options
                .methods
                .iter()
                .position(|m| m.name() == r.method);
            (task, method)
        };
        all.sort_by_key(order);
        Ok(all)
    }

    /// Runs one task with one method; every failure is a result with its error.
    pub fn run_one(&self, task: &Task, method: EvalMethod) -> TaskResult {
        let started = Instant::now();
        let trace = format!("{TRACES_DIR}/{}.{method}.jsonl", file_safe(&task.id));
        let mut result = TaskResult {
            id: task.id.clone(),
            family: task.family().to_string(),
            size: task.size,
            method: method.to_string(),
            score: 0.0,
            answer: None,
            expected: task.answer.clone(),
            turns: 0,
            tokens: Vec::new(),
            model_calls: 0,
            cached_calls: 0,
            cached_tokens: 0,
            waited_calls: 0,
            cost: None,
            seconds: 0.0,
            error: None,
            trace: None,
        };
        match task.context(&self.task_base) {
            Err(error) => result.error = Some(error.to_string()),
            Ok(context) => match method {
                EvalMethod::Direct => {
                    let text = direct_context(&context);
                    self.direct(task, &text, &self.out.join(&trace), &mut result);
                    result.trace = Some(trace);
                }
                EvalMethod::Rlm | EvalMethod::RlmBare => {
                    self.rlm(task, method, context, &self.out.join(&trace), &mut result);
                    result.trace = Some(trace);
                }
            },
        }
        if let Some(trace) = &result.trace {
            write_trace_page(&self.out.join(trace), &task.id, &mut result);
        }
        if let Some(answer) = &result.answer {
            match task.scorer.score(
                &task.question,
                answer,
                &task.answer,
                Some(self.llm.as_ref()),
            ) {
                Ok(score) => result.score = score,
                Err(error) => result.error = Some(error.to_string()),
            }
        }
        result.seconds = started.elapsed().as_secs_f64();
        result
    }

    fn direct(&self, task: &Task, context: &str, trace: &Path, result: &mut TaskResult) {
        result.turns = 1;
        result.model_calls = 1;
        let request = direct_request(context, &task.question, self.options.context_window);
        let started = Instant::now();
        let outcome = self.llm.complete(request.clone());
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let lines = direct_trace(&task.question, &request, &outcome, elapsed_ms);
        if let Err(error) = std::fs::write(trace, lines) {
            result.error = Some(format!("cannot write {}: {error}", trace.display()));
            return;
        }
        match outcome {
            Ok(completion) if completion.cached => {
                result.model_calls = 0;
                result.cached_calls = 1;
                result.cached_tokens = completion.total_tokens();
                result.waited_calls = u64::from(completion.waited.is_some());
                result.answer = Some(direct_answer(&completion));
            }
            Ok(completion) => {
                result.tokens = vec![DepthTokens {
                    prompt: completion.prompt_tokens,
                    completion: completion.completion_tokens,
                }];
                result.cost = call_cost(&completion, self.options.price).map(Cost::usd);
                result.answer = Some(direct_answer(&completion));
            }
            Err(error) => result.error = Some(error.to_string()),
        }
    }

    fn rlm(
        &self,
        task: &Task,
        method: EvalMethod,
        context: Context,
        trace: &Path,
        result: &mut TaskResult,
    ) {
        let options = &self.options;
        let registry = match method {
            EvalMethod::RlmBare => Arc::new(Registry::empty()),
            _ => Arc::clone(&options.registry),
        };
        let mut rlm = Rlm::new(Arc::clone(&self.llm), registry, options.max_iterations)
            .max_depth(options.max_depth)
            .prompt_mode(options.prompt_mode)
            .answer_protocol(options.answer_protocol)
            .context_window(options.context_window)
            .budgets(options.budgets);
        if let Some(price) = options.price {
            rlm = rlm.price(price);
        }
        if let Some(schema) = &task.schema {
            match AnswerSchema::new(schema.clone()) {
                Ok(schema) => rlm = rlm.answer_schema(schema),
                Err(error) => {
                    result.error = Some(format!("task `{}`: its schema is {error}", task.id));
                    return;
                }
            }
        }
        if let Some(providers) = &options.providers {
            rlm = rlm.providers(Arc::clone(providers));
        }
        if let Some(limits) = &options.limits {
            rlm = rlm.limits(*limits);
        }
        let report = match resumable(trace, &rlm, &context) {
            // A task whose run was cut short (the eval killed mid-task) goes on from its
            // trace: what it was told is not asked again.
            Some(resume) => match resume.run(rlm, Some(context), None) {
                Ok(report) => report,
                Err(error) => {
                    result.error = Some(format!("cannot resume {}: {error}", trace.display()));
                    return;
                }
            },
            None => match rlm.trace_file(trace) {
                Ok(rlm) => rlm.run_report(&task.question, Some(context), None),
                Err(error) => {
                    result.error = Some(format!("cannot create {}: {error}", trace.display()));
                    return;
                }
            },
        };
        result.turns = report.turns;
        result.tokens = report
            .usage
            .by_depth
            .iter()
            .map(|d| DepthTokens {
                prompt: d.prompt_tokens,
                completion: d.completion_tokens,
            })
            .collect();
        let total = report.usage.total();
        result.model_calls = total.calls;
        result.cached_calls = total.cached_calls;
        result.cached_tokens = total.cached_tokens;
        result.waited_calls = total.waited_calls;
        result.cost = (total.cost > Cost::ZERO).then(|| total.cost.usd());
        match report.result {
            Ok(answer) => result.answer = Some(answer),
            Err(error) => result.error = Some(error.to_string()),
        }
    }
}

/// The run `trace` records, when it can go on with `rlm` and `context`: a trace left by
/// an earlier eval that stopped mid-task (a task with a result is not run at all). A trace
/// that cannot be resumed (another context, another registry, not a trace) is written
/// again from the start.
fn resumable(trace: &Path, rlm: &Rlm, context: &Context) -> Option<Resume> {
    let resume = Resume::from_file(trace).ok()?;
    resume.check(rlm, Some(context)).ok()?;
    Some(resume)
}

/// Locks, ignoring poisoning: a panicking job must not hide the other results.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// `id` with every character outside `[A-Za-z0-9._-]` replaced by `_`.
fn file_safe(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The trace's page (`rlm trace html`) beside it, `.html` for `.jsonl`, so the report can
/// link each task to a view of its run; a trace that cannot be read or written is the
/// result's error only if it has none yet.
fn write_trace_page(trace: &Path, task: &str, result: &mut TaskResult) {
    let page = trace.with_extension("html");
    let written = crate::trace::Trace::read(trace)
        .map_err(|error| error.to_string())
        .and_then(|run| {
            let html = crate::trace::html(&run, &format!("eval task {task}"));
            std::fs::write(&page, html).map_err(|error| error.to_string())
        });
    if let Err(error) = written
        && result.error.is_none()
    {
        result.error = Some(format!(
            "cannot write the trace page {}: {error}",
            page.display()
        ));
    }
}
