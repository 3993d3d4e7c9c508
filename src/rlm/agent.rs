//! The agents of a run: [`Agent`], the root or a child, with the environment it works
//! in; and [`Child`], what `rlm_query` runs: a new agent one level deeper, sharing the
//! run's budgets, whose `FINAL` answer is the call's result.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::environment::{Environment, Limits, SetupError, SubAgent, User};

use super::budget::{Ledger, Metered};
use super::builder::Config;
use super::context::Context;
use super::prompt;

/// One agent of a run: the root, or a child at `depth`.
pub(super) struct Agent {
    pub(super) config: Arc<Config>,
    pub(super) ledger: Arc<Ledger>,
    pub(super) depth: usize,
    pub(super) id: String,
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
        result.map_err(|error| prompt::child_failed(&agent.id, &error))
    }
}

impl Agent {
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

    /// The limits of each code block: the configured ones, the time limit lowered to the
    /// wall-time budget left.
    pub(super) fn limits(&self) -> Limits {
        let mut limits = self.config.limits;
        if let Some(left) = self.ledger.remaining_time() {
            limits.time = limits.time.min(left.max(Duration::from_millis(1)));
        }
        limits
    }
}
