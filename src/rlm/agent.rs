//! The agents of a run: [`Agent`], the root or a child, with the environment it works
//! in; and [`Child`], what `rlm_query` runs: a new agent one level deeper, sharing the
//! run's budgets, whose final answer is the call's result (its JSON text when the call
//! gave a schema).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::environment::{
    AnswerSchema, Budget, Environment, Limits, SetupError, SubAgent, SubTask, User, run_on_threads,
};
use crate::llm::{ImagePart, Llm};

use super::budget::{Ledger, Metered};
use super::budget_view::AgentBudget;
use super::builder::Config;
use super::context::Context;
use super::prompt;
use super::sub_calls::{CallLog, Logged, Progress};
use super::trajectory::{BatchSlot, ContextDigest, RegistryDigest, Setup};

/// One agent of a run: the root, or a child at `depth`.
pub(super) struct Agent {
    pub(super) config: Arc<Config>,
    pub(super) ledger: Arc<Ledger>,
    pub(super) depth: usize,
    pub(super) id: String,
    /// A child of `rlm_query_batched`: its place in the batch.
    pub(super) batch: Option<BatchSlot>,
    /// The schema its answer must match: the run's for the root, the call's for a child.
    pub(super) schema: Option<AnswerSchema>,
    /// The model calls of its code since the last block ended (logged when traced).
    pub(super) calls: Arc<CallLog>,
    /// Images its model sees with its task, on every turn: a child's `opts.images`.
    pub(super) images: Vec<ImagePart>,
}

/// What `rlm_query` runs: a child agent one level deeper, sharing the run's budgets.
struct Child {
    config: Arc<Config>,
    ledger: Arc<Ledger>,
    depth: usize,
    parent: String,
    /// Children numbered so far: the next is `parent.(spawned + 1)`.
    spawned: AtomicUsize,
}

impl Child {
    /// Runs child number `n` of this parent.
    fn run_numbered(
        &self,
        n: usize,
        batch: Option<BatchSlot>,
        task: &SubTask,
    ) -> Result<String, String> {
        let agent = Agent {
            config: Arc::clone(&self.config),
            ledger: Arc::clone(&self.ledger),
            depth: self.depth,
            id: format!("{}.{n}", self.parent),
            batch,
            schema: task.schema.clone(),
            calls: Arc::default(),
            images: task.images.clone(),
        };
        let context = task.context.as_deref().map(Context::from);
        let (result, _) = agent.run(&task.prompt, context.as_ref(), None);
        result
            .map(|answer| answer.text)
            .map_err(|error| prompt::child_failed(&agent.id, &error))
    }
}

impl SubAgent for Child {
    fn run(&self, task: &SubTask) -> Result<String, String> {
        let n = self.spawned.fetch_add(1, Ordering::SeqCst) + 1;
        self.run_numbered(n, None, task)
    }

    /// Numbers the whole batch before any child starts, so the children's ids follow the
    /// batch's order, not the order their threads happen to start in.
    fn run_batch(&self, tasks: &[SubTask]) -> Vec<Result<String, String>> {
        let first = self.spawned.fetch_add(tasks.len(), Ordering::SeqCst) + 1;
        let size = tasks.len();
        run_on_threads(tasks, |index, task| {
            let slot = BatchSlot { index, size };
            self.run_numbered(first + index, Some(slot), task)
        })
    }
}

impl Agent {
    /// The root agent of a run.
    pub(super) fn root(config: Arc<Config>, ledger: Arc<Ledger>) -> Agent {
        let schema = config.answer_schema.clone();
        Agent {
            config,
            ledger,
            depth: 0,
            id: "0".to_string(),
            batch: None,
            schema,
            calls: Arc::default(),
            images: Vec::new(),
        }
    }

    /// The model that writes this agent's turns: the run's, or in a replay the record's
    /// replies to this agent.
    pub(super) fn turn_model(&self) -> Arc<dyn Llm> {
        match &self.config.replay {
            Some(tapes) => tapes.turns(&self.id),
            None => Arc::clone(&self.config.llm),
        }
    }

    /// The model this agent's code calls (`llm_query` and the like): the run's, or in a
    /// replay the record's answers to this agent's calls; logged when the run is traced,
    /// so that each block's record lists its calls.
    fn sub_call_model(&self) -> Arc<dyn Llm> {
        let model = match &self.config.replay {
            Some(tapes) => tapes.sub_calls(&self.id),
            None => Arc::clone(&self.config.llm),
        };
        if self.config.recorder.is_none() {
            return model;
        }
        Arc::new(Logged {
            inner: self.with_progress(model),
            log: Arc::clone(&self.calls),
            price: self.config.price,
        })
    }

    /// `model` writing each answer to the trace as it arrives. Not in a replay, whose
    /// tapes answer a batch in its order, one request after the other (a resumed run's
    /// and a session's tapes go on live: they do).
    fn with_progress(&self, model: Arc<dyn Llm>) -> Arc<dyn Llm> {
        let config = &self.config;
        match &config.recorder {
            Some(recorder) if config.replay.as_ref().is_none_or(|t| t.falls_through()) => {
                Arc::new(Progress {
                    inner: model,
                    log: Arc::clone(&self.calls),
                    recorder: Arc::clone(recorder),
                    agent: self.id.clone(),
                })
            }
            _ => model,
        }
    }

    /// The environment: the metered model, the child agent unless at the depth limit,
    /// the user at the top only.
    pub(super) fn environment(
        &self,
        user: Option<Arc<dyn User>>,
    ) -> Result<Environment, SetupError> {
        let config = &self.config;
        let mut builder = Environment::builder(Arc::clone(&config.registry))
            .providers(Arc::clone(&config.providers))
            .scope(config.scope(self.depth))
            .limits(self.limits())
            .llm(Arc::new(Metered {
                inner: self.sub_call_model(),
                ledger: Arc::clone(&self.ledger),
                depth: self.depth,
            }));
        builder = builder.budget_view(Arc::new(AgentBudget {
            ledger: Arc::clone(&self.ledger),
            id: self.id.clone(),
            depth: self.depth,
            max_depth: config.max_depth,
            max_iterations: config.max_iterations,
        }));
        if let Some(tokens) = self.ledger.remaining_tokens() {
            builder = builder.token_budget_of(Budget::RunTokens, tokens);
        }
        if let Some(schema) = &self.schema {
            builder = builder.answer_schema(schema.clone());
        }
        if let Some(window) = config.context_window {
            builder = builder.context_window(window);
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

    /// The limits of each code block: the configured ones, the time limit lowered to the
    /// wall-time budget left.
    pub(super) fn limits(&self) -> Limits {
        let mut limits = self.config.limits;
        if let Some(left) = self.ledger.remaining_time() {
            limits.time = limits.time.min(left.max(Duration::from_millis(1)));
        }
        limits
    }

    /// What this agent's `start` record says the run was (the recorder adds the clock).
    pub(super) fn setup(&self, context: Option<&Context>) -> Setup {
        let config = &self.config;
        let model = config.llm.model_info();
        Setup {
            version: Some(env!("CARGO_PKG_VERSION").to_string()),
            model: model.as_ref().map(|m| m.model.clone()),
            max_reply_tokens: model.as_ref().and_then(|m| m.max_reply_tokens),
            reasoning_effort: model.as_ref().and_then(|m| m.reasoning_effort),
            base_url: model.map(|m| m.base_url),
            started_unix_ms: None,
            prompt_mode: Some(config.prompt_mode.recorded_name().to_string()),
            answer_protocol: Some(config.answer_protocol.name().to_string()),
            answer_schema: self.schema.as_ref().map(|s| s.schema().clone()),
            limits: Some(config.run_limits(&self.limits())),
            context: context.map(ContextDigest::of),
            batch: self.batch,
            context_paths: config.context_paths.clone().filter(|_| self.depth == 0),
            registry: (self.depth == 0).then(|| RegistryDigest::of(&config.registry)),
        }
    }
}
