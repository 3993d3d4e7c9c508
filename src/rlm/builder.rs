//! [`Rlm`], the builder: a model, a registry, an iteration cap and options, and the entry
//! points that start a run ([`Rlm::run`], [`Rlm::run_report`]).

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::Registry;
use crate::catalog::Catalog;
use crate::conventions::AnswerProtocol;
use crate::environment::{AnswerSchema, Interrupt, Limits, User};
use crate::llm::{CacheStore, Cached, Llm, Price};
use crate::providers::{AgentScope, Providers};

use super::agent::Agent;
use super::budget::{Budgets, Ledger};
use super::compaction::{CompactAt, DEFAULT_COMPACT_AT};
use super::context::Context;
use super::prompt::{self, PromptPart};
use super::prompt_mode::PromptMode;
use super::recorder::{Observer, Recorder, Sink};
use super::replay::Tapes;
use super::report::{Answer, Report, RlmError};
use super::resume::Resuming;
use super::rlm_log::TraceFormat;
use super::trajectory::{BlockLimits, RunBudgets, RunLimits};

/// The iteration cap of [`Rlm::with_default_iterations`].
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;
/// The default depth limit: the root (depth 0) may start children (depth 1), and
/// those children may not (their `rlm_query` is refused; `llm_query` remains).
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
    pub(super) config: Config,
}

/// What every agent of a run shares: the builder's settings.
#[derive(Clone)]
pub(super) struct Config {
    pub(super) llm: Arc<dyn Llm>,
    pub(super) registry: Arc<Registry>,
    pub(super) providers: Arc<Providers>,
    pub(super) max_iterations: u32,
    pub(super) max_depth: usize,
    pub(super) output_bytes: usize,
    pub(super) max_consecutive_errors: u32,
    pub(super) limits: Limits,
    pub(super) budgets: Budgets,
    /// The model's price: what a call costs when the server reports no cost.
    pub(super) price: Option<Price>,
    /// Stops the run at its next safe point when cancelled.
    pub(super) cancel: Option<Interrupt>,
    pub(super) prompt_mode: PromptMode,
    pub(super) answer_protocol: AnswerProtocol,
    /// The root agent's answer schema (a child's comes with its `rlm_query` call).
    pub(super) answer_schema: Option<AnswerSchema>,
    pub(super) context_window: Option<u64>,
    /// When a conversation is compacted; `None`: never.
    pub(super) compact_at: Option<CompactAt>,
    pub(super) trace: Option<Arc<Sink>>,
    pub(super) trace_format: TraceFormat,
    /// The trace of one run, on `trace`: set on the run's own copy of the settings.
    pub(super) recorder: Option<Arc<Recorder>>,
    pub(super) live: Option<Arc<Sink>>,
    /// Sees each record of a run as it is made (the trace's, written or not).
    pub(super) observer: Option<Observer>,
    /// In a replay, the record's answers, which stand for the model of every agent.
    pub(super) replay: Option<Arc<Tapes>>,
    /// The root's context as given: its paths, absolute, for the trace.
    pub(super) context_paths: Option<Vec<String>>,
    /// In a resumed run, the run so far (the tapes are in `replay`).
    pub(super) resuming: Option<Arc<Resuming>>,
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
            .field("answer_protocol", &c.answer_protocol)
            .field("answer_schema", &c.answer_schema)
            .field("context_window", &c.context_window)
            .field("compact_at", &c.compact_at)
            .field("trace", &c.trace.is_some())
            .field("trace_format", &c.trace_format)
            .field("live_view", &c.live.is_some())
            .field("observed", &c.observer.is_some())
            .field("replaying", &c.replay.is_some())
            .field("context_paths", &c.context_paths)
            .finish()
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
                price: None,
                cancel: None,
                prompt_mode: PromptMode::default(),
                answer_protocol: AnswerProtocol::default(),
                answer_schema: None,
                context_window: None,
                compact_at: Some(DEFAULT_COMPACT_AT),
                trace: None,
                trace_format: TraceFormat::Events,
                recorder: None,
                live: None,
                observer: None,
                replay: None,
                context_paths: None,
                resuming: None,
            },
        }
    }

    /// [`Rlm::new`] with [`DEFAULT_MAX_ITERATIONS`] (10).
    pub fn with_default_iterations(llm: Arc<dyn Llm>, registry: impl Into<Arc<Registry>>) -> Rlm {
        Rlm::new(llm, registry, DEFAULT_MAX_ITERATIONS)
    }

    /// The deepest level of children (default [`DEFAULT_MAX_DEPTH`]): agents above it
    /// may call `rlm_query`; agents at it may not (the call is refused with an error naming
    /// the `agent` scope, and `llm_query` remains). 0 means no children.
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

    /// Stops every run of this RLM at its next safe point once `cancel` is interrupted:
    /// before an agent's next turn, or inside a running block (which stops with an
    /// `interrupted` limit). The turn a cancellation cuts short is not written to the
    /// trace, so the trace ends with whole turns; the run ends with
    /// [`RlmError::Interrupted`]. `rlm ask` cancels on Ctrl-C (SIGINT) and SIGTERM.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::Registry;
    /// use rlm_registry::environment::Interrupt;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::{Rlm, RlmError};
    ///
    /// struct Looping;
    /// impl Llm for Looping {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new("```lua\nwhile true do end\n```"))
    ///     }
    /// }
    ///
    /// let cancel = Interrupt::new();
    /// let rlm = Rlm::new(Arc::new(Looping), Registry::empty(), 5).cancel_on(cancel.clone());
    /// let stopper = std::thread::spawn(move || {
    ///     std::thread::sleep(std::time::Duration::from_millis(100));
    ///     cancel.interrupt();
    /// });
    /// assert!(matches!(rlm.run("Q", None), Err(RlmError::Interrupted)));
    /// stopper.join().unwrap();
    /// ```
    pub fn cancel_on(mut self, cancel: Interrupt) -> Rlm {
        self.config.cancel = Some(cancel);
        self
    }

    /// The model's price per million tokens: what a call costs when the server reports
    /// no `usage.cost`, and what a cost budget ([`Budgets::max_cost`]) reserves for a
    /// call before it is sent. Shown in the usage summary and the trace (`cost`,
    /// `run_cost`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::Registry;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Price, Request};
    /// use rlm_registry::rlm::Rlm;
    ///
    /// struct Answers;
    /// impl Llm for Answers {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new("```lua\nFINAL('done')\n```").with_tokens(1_000_000, 0))
    ///     }
    /// }
    ///
    /// let rlm = Rlm::new(Arc::new(Answers), Registry::empty(), 5).price(Price::new(0.15, 0.6)?);
    /// assert_eq!(rlm.run_report("Q", None, None).usage.total().cost.usd(), 0.15);
    /// # Ok::<(), String>(())
    /// ```
    pub fn price(mut self, price: Price) -> Rlm {
        self.config.price = Some(price);
        self
    }

    /// Answers every model call of the run (each agent's turns, `llm_query`, the
    /// children) from `cache` when it holds the same request, and stores the new ones.
    /// A cached answer spends no budget, and its turn is marked `cached` in the trace and
    /// the live view. `llm_query(prompt, {cache = false})` still asks the model.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::Registry;
    /// use rlm_registry::llm::{CallCache, Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::Rlm;
    ///
    /// struct Answers;
    /// impl Llm for Answers {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new("```lua\nFINAL('done')\n```").with_tokens(100, 10))
    ///     }
    /// }
    ///
    /// let dir = tempfile::tempdir()?;
    /// let cache = Arc::new(CallCache::open(dir.path().join("cache.sqlite")));
    /// let rlm = Rlm::new(Arc::new(Answers), Registry::empty(), 5).cache(cache);
    /// assert_eq!(rlm.run_report("Q", None, None).usage.total().total_tokens(), 110);
    /// let again = rlm.run_report("Q", None, None);
    /// assert_eq!(again.result.as_deref().ok(), Some("done"));
    /// let usage = again.usage.total();
    /// assert_eq!((usage.calls, usage.cached_calls, usage.cached_tokens), (0, 1, 110));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cache(mut self, cache: Arc<dyn CacheStore>) -> Rlm {
        self.config.llm = Arc::new(Cached::new(Arc::clone(&self.config.llm), cache));
        self
    }

    /// How the system prompt lists the functions (default [`PromptMode::Compact`]):
    /// compactly (signatures, one-line summaries and a pointer to `help`/`fn_search`), in
    /// full, or [`PromptMode::auto`], compactly for large registries. `rlm_query`
    /// children get the same listing as the root.
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
    /// assert!(prompt.contains("\nshout(s)  -- Upper-cases a text.\n"));
    /// assert!(!prompt.contains("---@param s string The text"));
    /// assert!(prompt.contains("\nfn_search(query, opts?)  -- Searches the functions for a task"));
    /// # Ok::<(), rlm_registry::LoadError>(())
    /// ```
    pub fn prompt_mode(mut self, mode: PromptMode) -> Rlm {
        self.config.prompt_mode = mode;
        self
    }

    /// Which way of ending the run the system prompt teaches (default
    /// [`AnswerProtocol::Final`]): `FINAL(value)`, or the reference RLM's `answer` table
    /// (`answer["content"] = value`, then `answer["ready"] = true`), which models
    /// fine-tuned on its harness write. Both always work; the trace records the choice.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::Registry;
    /// use rlm_registry::conventions::AnswerProtocol;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::Rlm;
    ///
    /// struct Answers;
    /// impl Llm for Answers {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new("```lua\nanswer['content'] = 'done'\nanswer['ready'] = true\n```"))
    ///     }
    /// }
    ///
    /// let rlm = Rlm::new(Arc::new(Answers), Registry::baked().clone(), 5)
    ///     .answer_protocol(AnswerProtocol::Answer);
    /// assert!(rlm.system_prompt(None).contains("set `answer[\"ready\"] = true`"));
    /// assert_eq!(rlm.run("Q", None).unwrap().text, "done");
    /// ```
    pub fn answer_protocol(mut self, protocol: AnswerProtocol) -> Rlm {
        self.config.answer_protocol = protocol;
        self
    }

    /// The JSON Schema the root agent's answer must match (default none): the prompt
    /// shows it, and `FINAL(value)` (or a ready `answer` table) converts the value to JSON
    /// by the one Lua ↔ JSON mapping and checks it. A value that does not match does not
    /// end the run: the model reads each violation, with its path and what was expected,
    /// and answers again within the iteration cap; a run whose answers never match ends
    /// with [`RlmError::AnswerRejected`] and the last violations. The answer's text is
    /// then the JSON text, and [`Answer::value`] the value. A child gets a schema of its
    /// own through `rlm_query(prompt, {schema = {...}})`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use serde_json::json;
    /// use rlm_registry::Registry;
    /// use rlm_registry::environment::AnswerSchema;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::Rlm;
    ///
    /// /// First a count as text, then as the integer the schema asks for.
    /// struct Learns(AtomicUsize);
    /// impl Llm for Learns {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new(match self.0.fetch_add(1, Ordering::SeqCst) {
    ///             0 => "```lua\nFINAL({count = 'three'})\n```",
    ///             _ => "```lua\nFINAL({count = 3})\n```",
    ///         }))
    ///     }
    /// }
    ///
    /// let schema = AnswerSchema::new(json!({
    ///     "type": "object",
    ///     "properties": {"count": {"type": "integer"}},
    ///     "required": ["count"]
    /// }))?;
    /// let rlm = Rlm::new(Arc::new(Learns(AtomicUsize::new(0))), Registry::baked().clone(), 5)
    ///     .answer_schema(schema);
    /// let answer = rlm.run("How many?", None).unwrap();
    /// assert_eq!((answer.text.as_str(), answer.turns), (r#"{"count":3}"#, 2));
    /// assert_eq!(answer.value, Some(json!({"count": 3})));
    /// # Ok::<(), String>(())
    /// ```
    pub fn answer_schema(mut self, schema: AnswerSchema) -> Rlm {
        self.config.answer_schema = Some(schema);
        self
    }

    /// The model's context window, in tokens (default unknown). An agent's first request
    /// (the root's or a child's) that would not fit, its `o200k_base` tokens
    /// ([`tokens::count_chat`](crate::tokens::count_chat)) plus the room kept for the
    /// reply ([`DEFAULT_REPLY_RESERVE`](crate::llm::DEFAULT_REPLY_RESERVE)), is not sent:
    /// the agent fails with [`RlmError::ContextWindow`], which names the system prompt's
    /// tokens, the window and the fix. `llm_query` prompts are checked the same way. The
    /// count is `o200k_base`'s: a model whose tokenizer counts more (small vocabularies
    /// do) may still refuse a request that passed, which is then reported the same way.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::Registry;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::{Rlm, RlmError};
    ///
    /// struct NeverAsked;
    /// impl Llm for NeverAsked {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         panic!("a request that does not fit is not sent")
    ///     }
    /// }
    ///
    /// let rlm = Rlm::new(Arc::new(NeverAsked), Registry::baked().clone(), 5).context_window(2_048);
    /// let error = rlm.run("Q", None).unwrap_err();
    /// assert!(matches!(error, RlmError::ContextWindow(_)));
    /// assert!(error.to_string().contains("the window is 2,048 tokens"));
    /// ```
    pub fn context_window(mut self, tokens: u64) -> Rlm {
        self.config.context_window = Some(tokens);
        self
    }

    /// When an agent's conversation is compacted (default: at 85% of the window,
    /// [`DEFAULT_COMPACT_AT`](crate::rlm::DEFAULT_COMPACT_AT)); `None` never compacts.
    /// Before a request would pass that share of the [context window](Rlm::context_window),
    /// the model summarises its work and the conversation restarts from the summary,
    /// every message staying in the Lua table `history`. Without a known window, older
    /// outputs are sent as a marker instead (whole in `history`). Off, the whole
    /// conversation is sent each turn, and a request that does not fit the window is
    /// refused.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::{Registry, rlm::{CompactAt, Rlm}};
    /// # use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// # struct NeverAsked;
    /// # impl Llm for NeverAsked {
    /// #     fn complete(&self, _: Request) -> Result<Completion, LlmError> { unreachable!() }
    /// # }
    /// let at = CompactAt::parse("0.7")?;
    /// let rlm = Rlm::new(Arc::new(NeverAsked), Registry::baked().clone(), 5)
    ///     .context_window(8_192)
    ///     .compact_at(at);
    /// assert!(format!("{rlm:?}").contains("compact_at: Some(CompactAt(700000))"));
    /// # Ok::<(), String>(())
    /// ```
    pub fn compact_at(mut self, at: Option<CompactAt>) -> Rlm {
        self.config.compact_at = at;
        self
    }

    /// Writes the trajectory of each run to `writer` as JSON lines, flushed one by one: a
    /// `start` line per agent (its system prompt and question, and what the run was:
    /// model, server, limits, start time, version, context digest), then a line per turn
    /// with only what the turn added, so the trace grows linearly with the run; a `reply`
    /// line and a `call` line per sub-call are written as they arrive, before the turn
    /// ends. The format is [`trajectory`](super::trajectory)'s.
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
    /// assert_eq!(events[1]["event"], "reply", "written as the reply arrives");
    /// assert_eq!(events[2]["event"], "turn");
    /// assert_eq!(events[2]["final"], "done");
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

    /// The format of the trace (default [`TraceFormat::Events`], this crate's event log);
    /// [`TraceFormat::Rlm`] writes the reference RLM's `RLMLogger` JSONL instead, which
    /// its visualizer reads: the lines `rlm trace export --format rlm` writes from the
    /// event log of the same run, its `metadata` naming the model the [`Llm`] reports
    /// ([`Llm::model_info`]) and the run's limits.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::Registry;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, ModelInfo, Request};
    /// use rlm_registry::rlm::{Rlm, TraceFormat};
    ///
    /// struct Answers;
    /// impl Llm for Answers {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new("```lua\nFINAL('done')\n```"))
    ///     }
    ///     fn model_info(&self) -> Option<ModelInfo> {
    ///         Some(ModelInfo::new("my-model", "http://localhost:8080/v1"))
    ///     }
    /// }
    ///
    /// let path = std::env::temp_dir().join("rlm-trace-format-doctest.jsonl");
    /// Rlm::new(Arc::new(Answers), Registry::baked().clone(), 5)
    ///     .max_depth(2)
    ///     .trace_file(&path)?
    ///     .trace_format(TraceFormat::Rlm)
    ///     .run("Q", None)
    ///     .unwrap();
    /// let text = std::fs::read_to_string(&path)?;
    /// let lines: Vec<serde_json::Value> =
    ///     text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    /// assert_eq!(lines[0]["type"], "metadata");
    /// assert_eq!(lines[0]["root_model"], "my-model");
    /// assert_eq!(lines[0]["max_iterations"], 5);
    /// assert_eq!(lines[0]["max_depth"], 3, "the reference counts the root as depth 1");
    /// assert_eq!(lines[1]["type"], "iteration");
    /// assert_eq!(lines[1]["final_answer"], "done");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn trace_format(mut self, format: TraceFormat) -> Rlm {
        self.config.trace_format = format;
        self
    }

    /// Shows each turn as it happens on `writer` (the CLI uses stderr): turn, code,
    /// output summary, tokens so far. Silent by default.
    pub fn live_view(mut self, writer: impl Write + Send + 'static) -> Rlm {
        self.config.live = Some(Arc::new(Sink::new(Box::new(writer))));
        self
    }

    /// Answers every agent's turns and calls from `tapes` instead of the model.
    pub(super) fn replaying(mut self, tapes: Arc<Tapes>) -> Rlm {
        self.config.replay = Some(tapes);
        self
    }

    /// Plays `tapes` back, falling through to the model past them, and writes only what
    /// `resuming` says is not on file.
    pub(super) fn resuming(mut self, tapes: Arc<Tapes>, resuming: Arc<Resuming>) -> Rlm {
        self.config.replay = Some(tapes);
        self.config.resuming = Some(resuming);
        self.config.trace_format = TraceFormat::Events;
        self
    }

    /// The paths the root's context was gathered from (`--context`), recorded absolute
    /// on its `start` line so that [`Resume`](super::Resume) can gather it again.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::Registry;
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::Rlm;
    ///
    /// struct Unused;
    /// impl Llm for Unused {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new(""))
    ///     }
    /// }
    ///
    /// let rlm = Rlm::new(Arc::new(Unused), Registry::baked().clone(), 5).context_paths(["notes.md"]);
    /// assert!(format!("{rlm:?}").contains("notes.md"));
    /// ```
    pub fn context_paths<P: AsRef<Path>>(mut self, paths: impl IntoIterator<Item = P>) -> Rlm {
        let absolute = |path: &Path| {
            std::path::absolute(path)
                .unwrap_or_else(|_| path.to_path_buf())
                .display()
                .to_string()
        };
        let paths = paths.into_iter().map(|p| match p.as_ref().to_str() {
            Some("-") => "-".to_string(),
            _ => absolute(p.as_ref()),
        });
        self.config.context_paths = Some(paths.collect());
        self
    }

    /// The settings every agent of a run shares, for the tests of the modules beside.
    #[cfg(test)]
    pub(super) fn settings(&self) -> &Config {
        &self.config
    }

    /// The registry the code runs with.
    pub fn registry(&self) -> &Registry {
        &self.config.registry
    }

    /// The model the run asks.
    pub fn model(&self) -> Arc<dyn Llm> {
        Arc::clone(&self.config.llm)
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
            &self.config.settings(
                0,
                self.config.limits.time,
                self.config.answer_schema.clone(),
            ),
        )
    }

    /// The root agent's system prompt for `context`, part by part (rules, the answer's
    /// schema if any, context, role, built-in functions, registry functions): what `rlm
    /// prompt --tokens` measures. Joined by blank lines, they are
    /// [`system_prompt`](Self::system_prompt).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlm_registry::{Registry, tokens};
    /// use rlm_registry::llm::{Completion, Llm, LlmError, Request};
    /// use rlm_registry::rlm::Rlm;
    ///
    /// struct Unused;
    /// impl Llm for Unused {
    ///     fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
    ///         Ok(Completion::new(""))
    ///     }
    /// }
    ///
    /// let rlm = Rlm::new(Arc::new(Unused), Registry::baked().clone(), 10);
    /// let parts = rlm.prompt_parts(None);
    /// let names: Vec<&str> = parts.iter().map(|p| p.name).collect();
    /// assert_eq!(names, ["rules", "context", "role", "built-in functions", "registry functions"]);
    /// let joined: Vec<&str> = parts.iter().map(|p| p.text.as_str()).collect();
    /// assert_eq!(joined.join("\n\n") + "\n", rlm.system_prompt(None));
    /// ```
    pub fn prompt_parts(&self, context: Option<&Context>) -> Vec<PromptPart> {
        prompt::system_prompt_parts(
            &self.config.catalog(0),
            context,
            &self.config.settings(
                0,
                self.config.limits.time,
                self.config.answer_schema.clone(),
            ),
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
        let config = self.run_config();
        let ledger = match &config.resuming {
            Some(r) => Ledger::resumed(&config, r.elapsed),
            None => Ledger::for_run(&config),
        };
        let agent = Agent::root(config, Arc::clone(&ledger));
        let (result, turns) = agent.run(question, context.as_ref(), user);
        let (result, value) = match result {
            Ok(answer) => (Ok(answer.text), answer.value),
            Err(error) => (Err(error), None),
        };
        Report {
            result,
            value,
            turns,
            usage: ledger.report(),
        }
    }
}

impl Rlm {
    /// The settings of one run (or one session): the prompt mode resolved, and the
    /// run's own recorder.
    pub(super) fn run_config(&self) -> Arc<Config> {
        let mut config = self.config.clone();
        // Decided once per run: `Auto` counts the listing's tokens, and every agent of
        // the tree, `rlm_query` children included, shares this config.
        config.prompt_mode = config.prompt_mode.resolve(&config.registry);
        // Each run has its own clock, and the reference format's converter holds one
        // run's conversations.
        let resuming = config.resuming.clone();
        let recorder = Recorder::start(
            config.trace.clone(),
            &config.trace_format,
            config.observer.clone(),
        );
        config.recorder = recorder.map(|recorder| {
            Arc::new(match &resuming {
                Some(r) => recorder.resumed(r.elapsed, r.started_unix_ms, Arc::clone(&r.on_file)),
                None => recorder,
            })
        });
        Arc::new(config)
    }
}

impl Config {
    /// An agent at `depth` may start children above the depth limit.
    pub(super) fn scope(&self, depth: usize) -> AgentScope {
        AgentScope {
            depth,
            can_spawn: depth < self.max_depth,
        }
    }

    /// What an agent at `depth` may call.
    pub(super) fn catalog(&self, depth: usize) -> Catalog {
        Catalog::new(
            Arc::clone(&self.registry),
            Arc::clone(&self.providers),
            self.scope(depth),
        )
    }

    /// Every limit of the run, for a trace, with `block` the limits of an agent's code
    /// blocks.
    pub(super) fn run_limits(&self, block: &Limits) -> RunLimits {
        RunLimits {
            max_iterations: self.max_iterations,
            max_depth: self.max_depth,
            max_consecutive_errors: self.max_consecutive_errors,
            output_bytes: self.output_bytes,
            context_window: self.context_window,
            compact_at: self.compact_at,
            block: BlockLimits::from(block),
            budgets: RunBudgets::from(&self.budgets),
        }
    }

    /// What the prompt of an agent at `depth` says: the numbers it quotes, the listing,
    /// the answer protocol and the agent's answer `schema`.
    pub(super) fn settings(
        &self,
        depth: usize,
        time_limit: Duration,
        schema: Option<AnswerSchema>,
    ) -> prompt::Settings {
        prompt::Settings {
            output_bytes: self.output_bytes,
            max_iterations: self.max_iterations,
            time_limit,
            depth,
            max_depth: self.max_depth,
            prompt_mode: self.prompt_mode,
            answer_protocol: self.answer_protocol,
            schema,
            budgeted: self.budgets != Budgets::default(),
        }
    }
}
