//! The RLM loop (SPEC §5): a model answers a question by writing Lua that studies the
//! context in a sandboxed [`Environment`], turn after turn, until it calls `FINAL`.
//!
//! Each turn sends the conversation to the model, runs every ```lua block of the reply
//! in order (an unlabeled fence too, when it holds Lua), and sends back what the code
//! printed, truncated, with a note of what was cut. A Lua error (with its line), an
//! unknown function (with a "did you mean") or a limit hit goes back to the model as
//! text, and the run goes on. The run ends with `FINAL(value)` / `FINAL_VAR(name)`
//! (also accepted as plain text outside code), or fails: at the iteration cap, after
//! too many consecutive turns with errors, when a budget is spent, or when the model
//! cannot be reached.
//!
//! `rlm_query` in the model's code starts a child agent one level deeper, with its own
//! environment and loop, whose `FINAL` answer is the call's result; at the depth limit
//! it is a plain sub-model call. Budgets (tokens, calls, wall time) are shared by the
//! whole tree; usage is reported per depth.
//!
//! The system prompt documents every registry function by default; for large
//! registries, [`PromptMode::Compact`] (or [`PromptMode::auto`]) lists only names and
//! one-line summaries and points the model to `fn_search` and `help`.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use rlm_registry::Registry;
//! use rlm_registry::llm::{Completion, Llm, LlmError, Request};
//! use rlm_registry::rlm::{Context, Rlm};
//!
//! /// A scripted model: looks, then answers.
//! struct Scripted(AtomicUsize);
//!
//! impl Llm for Scripted {
//!     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
//!         let reply = match self.0.fetch_add(1, Ordering::SeqCst) {
//!             0 => "```lua\nn = line_count(context)\nprint(n)\n```",
//!             _ => "```lua\nFINAL(n .. ' lines')\n```",
//!         };
//!         Ok(Completion::new(reply).with_tokens(100, 10))
//!     }
//! }
//!
//! let rlm = Rlm::new(Arc::new(Scripted(AtomicUsize::new(0))), Registry::baked().clone(), 5);
//! let answer = rlm.run("How many lines?", Some(Context::from("a\nb\nc\n")))?;
//! assert_eq!(answer.text, "3 lines");
//! assert_eq!(answer.turns, 2);
//! assert_eq!(answer.usage.total().total_tokens(), 220);
//! # Ok::<(), rlm_registry::rlm::RlmError>(())
//! ```
//!
//! Against a real server, with a budget, a trace file and the live view:
//!
//! ```no_run
//! use std::sync::Arc;
//! use rlm_registry::{Registry, llm::LlmClient, rlm::{Budgets, Context, Rlm}};
//!
//! let llm = Arc::new(LlmClient::from_env()?); // RLM_BASE_URL, RLM_MODEL, RLM_API_KEY
//! let rlm = Rlm::new(llm, Registry::baked().clone(), 10)
//!     .max_depth(1)
//!     .budgets(Budgets::default().with_total_tokens(200_000))
//!     .trace_file("run.jsonl")?
//!     .live_view(std::io::stderr());
//! let context = Context::from(std::fs::read("server.log")?);
//! let answer = rlm.run("Which service fails most often?", Some(context))?;
//! println!("{} ({} turns)\n{}", answer.text, answer.turns, answer.usage);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod budget;
mod context;
mod feedback;
mod parse;
mod prompt;
mod trace;

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::Registry;
use crate::catalog::Catalog;
use crate::environment::{Environment, ExecError, Limits, SetupError, SubAgent, User};
use crate::llm::{Llm, LlmError, Message, Request};
use crate::providers::{AgentScope, Providers};

pub use budget::{BudgetExceeded, Budgets, UsageReport};
use budget::{Ledger, Metered};
pub use context::Context;
use feedback::Names;
use parse::PlainFinal;
pub use prompt::{AUTO_COMPACT_ABOVE_TOKENS, PromptMode};
use trace::{BlockRecord, Event, Sink, StartRecord, TurnRecord};

/// The iteration cap of [`Rlm::with_default_iterations`].
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;
/// From this iteration on, each turn logs a `tracing` warning.
pub const WARN_FROM_ITERATION: u32 = 5;
/// The default depth limit: the root (depth 0) may start children (depth 1), and
/// those children's `rlm_query` is a plain sub-model call.
pub const DEFAULT_MAX_DEPTH: usize = 1;
/// The default cap on the output fed back to the model per turn, in bytes.
pub const DEFAULT_OUTPUT_BYTES: usize = 10_000;
/// The default number of consecutive turns with errors after which a run gives up.
pub const DEFAULT_MAX_CONSECUTIVE_ERRORS: u32 = 3;
/// The default time limit of one code block. Higher than [`Limits::default`]'s 30 s
/// because it includes the time spent waiting on `llm_query` and `rlm_query` children.
pub const DEFAULT_BLOCK_TIME_LIMIT: Duration = Duration::from_secs(300);

/// An RLM: a model, a registry, an iteration cap and options. Cheap to clone; every
/// [`run`](Rlm::run) is independent (its own environments, budgets and usage).
///
/// There is no default: the iteration cap is always explicit, through [`Rlm::new`], or
/// [`Rlm::with_default_iterations`] for [`DEFAULT_MAX_ITERATIONS`].
#[derive(Clone)]
pub struct Rlm {
    config: Config,
}

#[derive(Clone)]
struct Config {
    llm: Arc<dyn Llm>,
    registry: Arc<Registry>,
    providers: Arc<Providers>,
    max_iterations: u32,
    max_depth: usize,
    output_bytes: usize,
    max_consecutive_errors: u32,
    limits: Limits,
    budgets: Budgets,
    prompt_mode: PromptMode,
    trace: Option<Arc<Sink>>,
    live: Option<Arc<Sink>>,
}

impl fmt::Debug for Rlm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        f.debug_struct("Rlm")
            .field("functions", &c.registry.len())
            .field("max_iterations", &c.max_iterations)
            .field("max_depth", &c.max_depth)
            .field("output_bytes", &c.output_bytes)
            .field("max_consecutive_errors", &c.max_consecutive_errors)
            .field("limits", &c.limits)
            .field("budgets", &c.budgets)
            .field("prompt_mode", &c.prompt_mode)
            .field("trace", &c.trace.is_some())
            .field("live_view", &c.live.is_some())
            .finish()
    }
}

/// A successful run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The final answer, as `FINAL`/`FINAL_VAR` gave it.
    pub text: String,
    /// The root agent's turns (model calls), the last included.
    pub turns: u32,
    /// What the whole run used.
    pub usage: UsageReport,
}

/// How a run went, successful or not, with its usage either way.
#[derive(Debug)]
pub struct Report {
    /// The final answer, or why there is none.
    pub result: Result<String, RlmError>,
    /// The root agent's turns.
    pub turns: u32,
    /// What the whole run used.
    pub usage: UsageReport,
}

impl Report {
    /// The answer with its turns and usage, or the error.
    pub fn into_result(self) -> Result<Answer, RlmError> {
        let Report {
            result,
            turns,
            usage,
        } = self;
        result.map(|text| Answer { text, turns, usage })
    }
}

/// Why a run ended without an answer.
#[derive(Debug)]
#[non_exhaustive]
pub enum RlmError {
    /// The iteration cap was reached without a final answer.
    IterationLimit {
        /// The cap.
        max_iterations: u32,
    },
    /// A budget shared by the run is spent.
    Budget(BudgetExceeded),
    /// The model could not be reached or answered garbage (after the client's retries).
    Llm(LlmError),
    /// Too many turns in a row had an error.
    ConsecutiveErrors {
        /// Turns in a row with an error.
        count: u32,
        /// The last error, as the model read it.
        last_error: String,
    },
    /// The model replied without code or a final answer again after the reminder.
    NoCode {
        /// The start of its last reply.
        reply: String,
    },
    /// The Lua environment could not be created (the message of the
    /// [`SetupError`], which is not `Send`).
    Setup(String),
    /// The context could not be loaded into the environment (too large for the memory
    /// limit, say).
    Context(ExecError),
    /// The trace could not be written.
    Trace(io::Error),
}

impl fmt::Display for RlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RlmError::IterationLimit { max_iterations } => write!(
                f,
                "iteration limit reached: no final answer after {max_iterations} turn{}",
                if *max_iterations == 1 { "" } else { "s" }
            ),
            RlmError::Budget(exceeded) => exceeded.fmt(f),
            RlmError::Llm(error) => error.fmt(f),
            RlmError::ConsecutiveErrors { count, last_error } => write!(
                f,
                "gave up after {count} turns in a row with errors; the last: {}",
                first_line(last_error, 300)
            ),
            RlmError::NoCode { reply } => write!(
                f,
                "the model replied without code or a final answer twice in a row, the second time after a reminder; its reply began: {}",
                first_line(reply, 200)
            ),
            RlmError::Setup(message) => f.write_str(message),
            RlmError::Context(error) => write!(f, "cannot load the context: {error}"),
            RlmError::Trace(error) => write!(f, "cannot write the trace: {error}"),
        }
    }
}

impl std::error::Error for RlmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RlmError::Budget(e) => Some(e),
            RlmError::Llm(e) => Some(e),
            RlmError::Context(e) => Some(e),
            RlmError::Trace(e) => Some(e),
            _ => None,
        }
    }
}

impl Rlm {
    /// An RLM that asks `llm`, offers `registry`'s functions, and gives up after
    /// `max_iterations` turns of the root agent (each child has the same cap). A cap of
    /// 0 allows no turn at all.
    pub fn new(llm: Arc<dyn Llm>, registry: impl Into<Arc<Registry>>, max_iterations: u32) -> Rlm {
        Rlm {
            config: Config {
                llm,
                registry: registry.into(),
                providers: Providers::builtin_shared(),
                max_iterations,
                max_depth: DEFAULT_MAX_DEPTH,
                output_bytes: DEFAULT_OUTPUT_BYTES,
                max_consecutive_errors: DEFAULT_MAX_CONSECUTIVE_ERRORS,
                limits: Limits {
                    time: DEFAULT_BLOCK_TIME_LIMIT,
                    ..Limits::default()
                },
                budgets: Budgets::default(),
                prompt_mode: PromptMode::Full,
                trace: None,
                live: None,
            },
        }
    }

    /// [`Rlm::new`] with [`DEFAULT_MAX_ITERATIONS`] (10).
    pub fn with_default_iterations(llm: Arc<dyn Llm>, registry: impl Into<Arc<Registry>>) -> Rlm {
        Rlm::new(llm, registry, DEFAULT_MAX_ITERATIONS)
    }

    /// The deepest level of children (default [`DEFAULT_MAX_DEPTH`]): agents above it
    /// get a real `rlm_query`, agents at it a plain sub-model call. 0 means no children.
    pub fn max_depth(mut self, depth: usize) -> Rlm {
        self.config.max_depth = depth;
        self
    }

    /// The providers whose functions every agent of a run may call, as its scope allows
    /// (default [`Providers::builtin`]): user functions at the top level only, agent
    /// functions above the depth limit. Give a run its own opt-in `store` provider so
    /// that its agents share one store.
    pub fn providers(mut self, providers: Arc<Providers>) -> Rlm {
        self.config.providers = providers;
        self
    }

    /// The most bytes of output fed back to the model per turn (default
    /// [`DEFAULT_OUTPUT_BYTES`]); beyond, it is cut with a note of how much.
    pub fn output_bytes(mut self, bytes: usize) -> Rlm {
        self.config.output_bytes = bytes;
        self
    }

    /// Gives up after this many turns in a row with an error (default
    /// [`DEFAULT_MAX_CONSECUTIVE_ERRORS`]); 0 disables the cap (the iteration cap
    /// still holds).
    pub fn max_consecutive_errors(mut self, count: u32) -> Rlm {
        self.config.max_consecutive_errors = count;
        self
    }

    /// Limits for each code block, in every agent's environment (default: [`Limits`]
    /// with a [`DEFAULT_BLOCK_TIME_LIMIT`] time limit). The time limit is lowered to the
    /// wall-time budget left when an environment is created.
    pub fn limits(mut self, limits: Limits) -> Rlm {
        self.config.limits = limits;
        self
    }

    /// Budgets shared by every agent of a run (default: unlimited).
    pub fn budgets(mut self, budgets: Budgets) -> Rlm {
        self.config.budgets = budgets;
        self
    }

    /// How the system prompt lists the registry's functions (default
    /// [`PromptMode::Full`]): in full, compactly (names, one-line summaries and a pointer
    /// to `fn_search`/`help`), or [`PromptMode::auto`], compactly for large registries.
    /// The built-ins are documented in full in every mode, and `rlm_query` children get
    /// the same listing as the root.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::Registry;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::{PromptMode, Rlm};
    ///
    /// struct Answers;
    /// impl Llm for Answers {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new("```lua\nFINAL('done')\n```"))
    ///     }
    /// }
    ///
    /// let registry = Registry::from_map([(
    ///     "shout",
    ///     "--- Upper-cases a text.\n---@param s string The text\n---@return string\nfunction shout(s) return s:upper() end",
    /// )])?;
    /// let rlm = Rlm::new(Arc::new(Answers), registry, 5).prompt_mode(PromptMode::Compact);
    /// let prompt = rlm.system_prompt(None);
    /// assert!(prompt.contains("- `shout(s)`: Upper-cases a text."));
    /// assert!(!prompt.contains("---@param s string The text"));
    /// assert!(prompt.contains("function fn_search(query, opts) end"));
    /// # Ok::<(), rlm_registry::LoadError>(())
    /// ```
    pub fn prompt_mode(mut self, mode: PromptMode) -> Rlm {
        self.config.prompt_mode = mode;
        self
    }

    /// Writes the trajectory to `writer` as JSON lines, flushed one by one: a `start`
    /// line per agent (its system prompt and question), then a line per turn with only
    /// what the turn added, so the trace grows linearly with the run (see the fields in
    /// the crate README).
    ///
    /// ```
    /// use std::io::Write;
    /// use std::sync::{Arc, Mutex};
    /// use rlm_registry::Registry;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::Rlm;
    ///
    /// struct Answers;
    /// impl Llm for Answers {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new("```lua\nFINAL('done')\n```"))
    ///     }
    /// }
    ///
    /// #[derive(Clone, Default)]
    /// struct Buffer(Arc<Mutex<Vec<u8>>>);
    /// impl Write for Buffer {
    ///     fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
    ///         self.0.lock().unwrap().write(bytes)
    ///     }
    ///     fn flush(&mut self) -> std::io::Result<()> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let trace = Buffer::default();
    /// let rlm = Rlm::new(Arc::new(Answers), Registry::baked().clone(), 5).trace(trace.clone());
    /// rlm.run("Q", None).unwrap();
    /// let text = String::from_utf8(trace.0.lock().unwrap().clone()).unwrap();
    /// let events: Vec<serde_json::Value> =
    ///     text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    /// assert_eq!(events[0]["event"], "start");
    /// assert_eq!(events[0]["messages"][0]["role"], "system");
    /// assert_eq!(events[1]["event"], "turn");
    /// assert_eq!(events[1]["final"], "done");
    /// ```
    pub fn trace(mut self, writer: impl Write + Send + 'static) -> Rlm {
        self.config.trace = Some(Arc::new(Sink::new(Box::new(writer))));
        self
    }

    /// Writes the trajectory to a new file at `path` (truncated if it exists).
    pub fn trace_file(self, path: impl AsRef<Path>) -> io::Result<Rlm> {
        let file = std::fs::File::create(path)?;
        Ok(self.trace(file))
    }

    /// Shows each turn as it happens on `writer` (the CLI uses stderr): turn, code,
    /// output summary, tokens so far. Silent by default.
    pub fn live_view(mut self, writer: impl Write + Send + 'static) -> Rlm {
        self.config.live = Some(Arc::new(Sink::new(Box::new(writer))));
        self
    }

    /// The iteration cap.
    pub fn max_iterations(&self) -> u32 {
        self.config.max_iterations
    }

    /// The system prompt the root agent gets for `context`.
    pub fn system_prompt(&self, context: Option<&Context>) -> String {
        prompt::system_prompt(
            &self.config.catalog(0),
            context,
            &self.config.settings(0, self.config.limits.time),
        )
    }

    /// Answers `question` about `context`.
    pub fn run(&self, question: &str, context: Option<Context>) -> Result<Answer, RlmError> {
        self.run_report(question, context, None).into_result()
    }

    /// Answers `question` about `context`, with `user` behind `ask_user` and
    /// `notify_user` in the root agent's environment (children never get it), and
    /// reports the usage whatever the outcome.
    pub fn run_report(
        &self,
        question: &str,
        context: Option<Context>,
        user: Option<Arc<dyn User>>,
    ) -> Report {
        let mut config = self.config.clone();
        // Decided once per run: `Auto` counts the listing's tokens, and every agent of
        // the tree, `rlm_query` children included, shares this config.
        config.prompt_mode = config.prompt_mode.resolve(&config.registry);
        let config = Arc::new(config);
        let ledger = Ledger::new(config.budgets, config.max_depth);
        let agent = Agent {
            config,
            ledger: Arc::clone(&ledger),
            depth: 0,
            id: "0".to_string(),
        };
        let (result, turns) = agent.run(question, context.as_ref(), user);
        Report {
            result,
            turns,
            usage: ledger.report(),
        }
    }
}

impl Config {
    /// An agent at `depth` may start children above the depth limit.
    fn scope(&self, depth: usize) -> AgentScope {
        AgentScope {
            depth,
            can_spawn: depth < self.max_depth,
        }
    }

    /// What an agent at `depth` may call.
    fn catalog(&self, depth: usize) -> Catalog {
        Catalog::new(
            Arc::clone(&self.registry),
            Arc::clone(&self.providers),
            self.scope(depth),
        )
    }

    fn settings(&self, depth: usize, time_limit: Duration) -> prompt::Settings {
        prompt::Settings {
            output_bytes: self.output_bytes,
            max_iterations: self.max_iterations,
            time_limit,
            depth,
            max_depth: self.max_depth,
            prompt_mode: self.prompt_mode,
        }
    }
}

/// One agent of a run: the root, or a child at `depth`.
struct Agent {
    config: Arc<Config>,
    ledger: Arc<Ledger>,
    depth: usize,
    id: String,
}

/// How one turn ends.
enum Outcome {
    Continue(String),
    Final(String),
    Fail(RlmError),
}

/// What `rlm_query` runs: a child agent one level deeper, sharing the run's budgets.
struct Child {
    config: Arc<Config>,
    ledger: Arc<Ledger>,
    depth: usize,
    parent: String,
    spawned: AtomicUsize,
}

impl SubAgent for Child {
    fn run(&self, prompt: &str, context: Option<&str>) -> Result<String, String> {
        let n = self.spawned.fetch_add(1, Ordering::SeqCst) + 1;
        let agent = Agent {
            config: Arc::clone(&self.config),
            ledger: Arc::clone(&self.ledger),
            depth: self.depth,
            id: format!("{}.{n}", self.parent),
        };
        let context = context.map(Context::from);
        let (result, _) = agent.run(prompt, context.as_ref(), None);
        result.map_err(|error| format!("child agent {} failed: {error}", agent.id))
    }
}

impl Agent {
    /// The environment: the metered model, the child agent unless at the depth limit,
    /// the user at the top only.
    fn environment(&self, user: Option<Arc<dyn User>>) -> Result<Environment, SetupError> {
        let config = &self.config;
        let mut builder = Environment::builder(Arc::clone(&config.registry))
            .providers(Arc::clone(&config.providers))
            .scope(config.scope(self.depth))
            .limits(self.limits())
            .llm(Arc::new(Metered {
                inner: Arc::clone(&config.llm),
                ledger: Arc::clone(&self.ledger),
                depth: self.depth,
            }));
        if let Some(tokens) = self.ledger.remaining_tokens() {
            builder = builder.token_budget(tokens);
        }
        if self.depth < config.max_depth {
            builder = builder.sub_agent(Arc::new(Child {
                config: Arc::clone(config),
                ledger: Arc::clone(&self.ledger),
                depth: self.depth + 1,
                parent: self.id.clone(),
                spawned: AtomicUsize::new(0),
            }));
        }
        if let Some(user) = user {
            builder = builder.user(user);
        }
        builder.build()
    }

    fn limits(&self) -> Limits {
        let mut limits = self.config.limits;
        if let Some(left) = self.ledger.remaining_time() {
            limits.time = limits.time.min(left.max(Duration::from_millis(1)));
        }
        limits
    }

    /// Runs the loop: the answer or the error, and the turns taken.
    fn run(
        &self,
        question: &str,
        context: Option<&Context>,
        user: Option<Arc<dyn User>>,
    ) -> (Result<String, RlmError>, u32) {
        let env = match self.environment(user) {
            Ok(env) => env,
            Err(error) => return (Err(RlmError::Setup(error.to_string())), 0),
        };
        if let Some(context) = context
            && let Err(error) = context.load_into(&env)
        {
            return (Err(RlmError::Context(error)), 0);
        }
        let config = &self.config;
        let system = prompt::system_prompt(
            env.catalog(),
            context,
            &config.settings(self.depth, self.limits().time),
        );
        let mut messages = vec![
            Message::system(system),
            Message::user(prompt::question(question, context.is_some())),
        ];
        let start = Event::Start(StartRecord {
            agent: &self.id,
            depth: self.depth,
            question,
            messages: &messages,
        });
        if let Err(error) = self.trace(&start) {
            return (Err(RlmError::Trace(error)), 0);
        }
        let names = Names::new(env.catalog());
        let mut state = LoopState::default();
        for turn in 1..=config.max_iterations {
            if turn >= WARN_FROM_ITERATION {
                tracing::warn!(
                    agent = %self.id,
                    depth = self.depth,
                    turn,
                    max_iterations = config.max_iterations,
                    "RLM turn {turn} of {}: no final answer yet",
                    config.max_iterations
                );
            }
            let outcome = match self.turn(turn, &env, &names, &messages, &mut state) {
                Ok(outcome) => outcome,
                Err(error) => return (Err(RlmError::Trace(error)), turn),
            };
            match outcome {
                Outcome::Continue(feedback) => {
                    messages.push(Message::assistant(std::mem::take(&mut state.reply)));
                    messages.push(Message::user(feedback));
                }
                Outcome::Final(answer) => return (Ok(answer), turn),
                Outcome::Fail(error) => return (Err(error), turn),
            }
        }
        (
            Err(RlmError::IterationLimit {
                max_iterations: config.max_iterations,
            }),
            config.max_iterations,
        )
    }

    /// One turn: ask, run the code, decide; the trace and live view are written here.
    fn turn(
        &self,
        turn: u32,
        env: &Environment,
        names: &Names,
        messages: &[Message],
        state: &mut LoopState,
    ) -> io::Result<Outcome> {
        let config = &self.config;
        let started = Instant::now();
        let mut record = TurnData::default();
        if let Err(exceeded) = self.ledger.reserve() {
            let error = RlmError::Budget(exceeded);
            record.error = Some(error.to_string());
            self.write(turn, messages, &record, started)?;
            return Ok(Outcome::Fail(error));
        }
        let result = config.llm.complete(Request::new(messages.to_vec()));
        self.ledger.record(self.depth, &result);
        record.llm_ms = started.elapsed().as_millis() as u64;
        let completion = match result {
            Ok(completion) => completion,
            Err(error) => {
                let error = RlmError::Llm(error);
                record.error = Some(error.to_string());
                self.write(turn, messages, &record, started)?;
                return Ok(Outcome::Fail(error));
            }
        };
        record.prompt_tokens = completion.prompt_tokens;
        record.completion_tokens = completion.completion_tokens;
        let reply = completion.content;
        let parsed = parse::parse(&reply);
        record.blocks = parsed.blocks.clone();

        // Run the blocks in order, up to a failure or a final answer.
        let (mut parts, mut failure) = self.run_blocks(env, names, &parsed.blocks, &mut record);

        // A final answer in code, else one in plain text (only if the code went well).
        let mut answer = env.final_answer();
        if answer.is_none()
            && let Some(plain) = &parsed.final_text
        {
            if failure.is_some() {
                parts.push("Your FINAL outside the code was not accepted because a block failed: fix the code, check its output, then answer again.".to_string());
            } else {
                match plain_final(env, plain) {
                    Ok(found) => answer = Some(found),
                    Err(text) => {
                        parts.push(text.clone());
                        failure = Some(text);
                    }
                }
            }
        }
        if let Some(answer) = answer {
            record.final_answer = Some(answer.clone());
            record.reply = Some(reply);
            self.write(turn, messages, &record, started)?;
            return Ok(Outcome::Final(answer));
        }

        // Neither code nor an answer: one reminder, then the run ends.
        let no_code = parsed.blocks.is_empty() && failure.is_none();
        if no_code {
            if state.reminded {
                let error = RlmError::NoCode {
                    reply: reply.clone(),
                };
                record.error = Some(error.to_string());
                record.reply = Some(reply);
                self.write(turn, messages, &record, started)?;
                return Ok(Outcome::Fail(error));
            }
            state.reminded = true;
            parts.push(prompt::REMINDER.to_string());
        } else {
            state.reminded = false;
        }
        parts.extend(parsed.ignored.iter().map(|note| format!("Note: {note}.")));
        if completion.finish_reason.as_deref() == Some("length") {
            parts.push(
                "Note: your reply was cut off at the token limit; keep replies shorter."
                    .to_string(),
            );
        }
        let left = config.max_iterations.saturating_sub(turn);
        if (1..=2).contains(&left) {
            parts.push(format!(
                "Note: {left} turn{} left; give your answer with FINAL soon.",
                if left == 1 { "" } else { "s" }
            ));
        }
        let feedback = parts.join("\n\n");

        let outcome = match failure {
            Some(last_error) => {
                state.errors += 1;
                if config.max_consecutive_errors > 0
                    && state.errors >= config.max_consecutive_errors
                {
                    Outcome::Fail(RlmError::ConsecutiveErrors {
                        count: state.errors,
                        last_error,
                    })
                } else {
                    Outcome::Continue(feedback)
                }
            }
            None => {
                state.errors = 0;
                Outcome::Continue(feedback)
            }
        };
        let outcome = match outcome {
            Outcome::Continue(_) if left == 0 => Outcome::Fail(RlmError::IterationLimit {
                max_iterations: config.max_iterations,
            }),
            other => other,
        };
        match &outcome {
            Outcome::Continue(feedback) => record.feedback = Some(feedback.clone()),
            Outcome::Fail(error) => record.error = Some(error.to_string()),
            Outcome::Final(_) => {}
        }
        record.reply = Some(reply.clone());
        self.write(turn, messages, &record, started)?;
        state.reply = reply;
        Ok(outcome)
    }

    /// Runs `blocks` in order, up to a failure or a final answer: the feedback for each
    /// block, and the failure's text if one failed.
    fn run_blocks(
        &self,
        env: &Environment,
        names: &Names,
        blocks: &[String],
        record: &mut TurnData,
    ) -> (Vec<String>, Option<String>) {
        let mut failure: Option<String> = None;
        let mut parts = Vec::new();
        let mut room = self.config.output_bytes;
        for (i, code) in blocks.iter().enumerate() {
            let block = i + 1;
            if failure.is_some() || env.final_answer().is_some() {
                record.outputs.push(BlockRecord {
                    block,
                    status: "not run",
                    output: String::new(),
                    error: None,
                    elapsed_ms: 0,
                });
                if failure.is_some() {
                    parts.push(format!(
                        "Block {block} was not run (an earlier block failed)."
                    ));
                }
                continue;
            }
            let block_started = Instant::now();
            let result = env.execute(code);
            let elapsed_ms = block_started.elapsed().as_millis() as u64;
            match result {
                Ok(run) => {
                    parts.push(if run.output.is_empty() {
                        format!("Block {block} ran and printed nothing (only what you print comes back).")
                    } else {
                        format!("Output of block {block}:\n{}", feedback::truncate(&run.output, room))
                    });
                    room = room.saturating_sub(run.output.len());
                    record.outputs.push(BlockRecord {
                        block,
                        status: "ok",
                        output: run.output,
                        error: None,
                        elapsed_ms,
                    });
                }
                Err(error) => {
                    let text = feedback::describe_error(block, code, &error, names, room);
                    room = room.saturating_sub(error.output().len());
                    record.outputs.push(BlockRecord {
                        block,
                        status: match error {
                            ExecError::Lua { .. } => "error",
                            ExecError::Limit { .. } => "limit",
                        },
                        output: error.output().to_string(),
                        error: Some(error.message().to_string()),
                        elapsed_ms,
                    });
                    parts.push(text.clone());
                    failure = Some(text);
                }
            }
        }
        (parts, failure)
    }

    /// Writes `event` to the trace, if there is one.
    fn trace(&self, event: &Event<'_>) -> io::Result<()> {
        match &self.config.trace {
            Some(trace) => trace.write_json(event),
            None => Ok(()),
        }
    }

    /// Writes the turn to the trace and the live view.
    fn write(
        &self,
        turn: u32,
        messages: &[Message],
        data: &TurnData,
        started: Instant,
    ) -> io::Result<()> {
        let run_tokens = self.ledger.tokens_used();
        if let Some(live) = &self.config.live {
            // The live view is best effort: a closed stderr must not stop the run.
            let _ = live.write(&self.live_lines(turn, data, run_tokens));
        }
        self.trace(&Event::Turn(TurnRecord {
            agent: &self.id,
            depth: self.depth,
            turn,
            messages_sent: messages.len(),
            reply: data.reply.as_deref(),
            code_blocks: &data.blocks,
            outputs: &data.outputs,
            feedback: data.feedback.as_deref(),
            final_answer: data.final_answer.as_deref(),
            error: data.error.as_deref(),
            elapsed_ms: started.elapsed().as_millis() as u64,
            llm_ms: data.llm_ms,
            prompt_tokens: data.prompt_tokens,
            completion_tokens: data.completion_tokens,
            run_tokens,
        }))
    }

    /// `turn 2/10 · 1 block · 340 chars out · 1,234 tokens`, the first line of code and
    /// of output, indented by depth.
    fn live_lines(&self, turn: u32, data: &TurnData, run_tokens: u64) -> String {
        let indent = "    ".repeat(self.depth);
        let agent = if self.depth > 0 {
            format!("[agent {}] ", self.id)
        } else {
            String::new()
        };
        let blocks = data.blocks.len();
        let chars: usize = data.outputs.iter().map(|o| o.output.chars().count()).sum();
        let mut head = format!(
            "{indent}{agent}turn {turn}/{} · {blocks} block{} · {} chars out",
            self.config.max_iterations,
            if blocks == 1 { "" } else { "s" },
            thousands(chars as u64),
        );
        if let Some(failed) = data.outputs.iter().find(|o| o.error.is_some()) {
            head.push_str(&format!(" · {} in block {}", failed.status, failed.block));
        }
        if data.final_answer.is_some() {
            head.push_str(" · FINAL");
        }
        head.push_str(&format!(" · {} tokens\n", thousands(run_tokens)));
        if let Some(code) = data.blocks.first() {
            head.push_str(&format!("{indent}  │ {}\n", summary_line(code)));
        }
        if let Some(output) = data.outputs.iter().find(|o| !o.output.is_empty()) {
            head.push_str(&format!("{indent}  → {}\n", summary_line(&output.output)));
        }
        if let Some(error) = data.outputs.iter().find_map(|o| o.error.as_ref()) {
            head.push_str(&format!("{indent}  ✗ {}\n", first_line(error, 160)));
        }
        if let Some(error) = &data.error {
            head.push_str(&format!("{indent}  ✗ {}\n", first_line(error, 160)));
        }
        if let Some(answer) = &data.final_answer {
            head.push_str(&format!("{indent}  = {}\n", summary_line(answer)));
        }
        head
    }
}

/// Per-agent state carried from turn to turn.
#[derive(Default)]
struct LoopState {
    /// The reminder has been sent since the last reply with code.
    reminded: bool,
    /// Turns in a row with an error.
    errors: u32,
    /// The last reply, to append to the conversation.
    reply: String,
}

/// What a turn did, for the trace and the live view.
#[derive(Default)]
struct TurnData {
    reply: Option<String>,
    blocks: Vec<String>,
    outputs: Vec<BlockRecord>,
    feedback: Option<String>,
    final_answer: Option<String>,
    error: Option<String>,
    llm_ms: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// The answer of a `FINAL(...)`/`FINAL_VAR(...)` written outside code, or the message
/// for the model if it cannot be used. `FINAL(name)` with the name of a global
/// variable (not a function) answers with the variable's value.
fn plain_final(env: &Environment, plain: &PlainFinal) -> Result<String, String> {
    match plain {
        PlainFinal::Value(value) => {
            if is_identifier(value) {
                let code = format!(
                    "local v = rawget(_G, \"{value}\") if v ~= nil and type(v) ~= 'function' then FINAL(v) end"
                );
                if env.execute(&code).is_ok()
                    && let Some(answer) = env.final_answer()
                {
                    return Ok(answer);
                }
            }
            Ok(value.clone())
        }
        PlainFinal::Var(name) => {
            if !is_identifier(name) {
                return Err(format!(
                    "Your FINAL_VAR({name}) outside the code could not be used: FINAL_VAR takes the name of a global variable, e.g. FINAL_VAR(\"answer\")."
                ));
            }
            match env.execute(&format!("FINAL_VAR(\"{name}\")")) {
                Ok(_) => env.final_answer().ok_or_else(|| {
                    format!("Your FINAL_VAR(\"{name}\") outside the code gave no answer.")
                }),
                Err(error) => Err(format!(
                    "Your FINAL_VAR(\"{name}\") outside the code could not be used: {}",
                    error.message()
                )),
            }
        }
    }
}

/// A Lua name: letters, digits and `_`, not starting with a digit.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The first non-blank line of `text`, at most `max` characters, with `…` when cut.
fn first_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max {
        out.push('…');
    }
    out
}

/// The first line (at most 100 characters) and how many more lines there are.
fn summary_line(text: &str) -> String {
    let mut line = first_line(text, 100);
    let more = text.lines().filter(|l| !l.trim().is_empty()).count();
    if more > 1 {
        let plural = if more == 2 { "" } else { "s" };
        line.push_str(&format!("  (+{} line{plural})", more - 1));
    }
    line
}

/// `1234567` → `"1,234,567"`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("answer_2"));
        assert!(!is_identifier("2x"));
        assert!(!is_identifier("a b"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("a\"); os.exit() --"));
    }
}
