//! What a budget's refusal says, wherever it happens: the loop's own turns, a child's, a
//! `llm_query`, a `parallel_map` round or a session's sub-calls all name the budget,
//! what is left, and the setting that raises it, in the same words.

use crate::llm::Cost;
use crate::text_format::thousands;

/// A budget that can refuse a model call.
///
/// ```
/// use rlm_registry::environment::Budget;
///
/// let message = Budget::RunTokens.refuses_call(1_500, 200, 62_000);
/// assert!(message.starts_with("not sent: the run's token budget has 200 of its 62,000 tokens left"));
/// assert!(message.contains("--max-tokens"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Budget {
    /// The tokens of a whole run, all its agents and sub-calls (`--max-tokens`).
    RunTokens,
    /// The model calls of a whole run (`--max-llm-calls`).
    RunCalls,
    /// The wall time of a whole run (`--max-time`).
    RunTime,
    /// The dollars a whole run may spend (`--max-cost`).
    RunCost,
    /// The tokens one environment's sub-calls may spend, given to the environment
    /// itself (`token_budget` when it is built).
    #[default]
    SessionTokens,
}

impl Budget {
    /// The budget, as a sentence names it.
    pub fn name(self) -> &'static str {
        match self {
            Budget::RunTokens => "the run's token budget",
            Budget::RunCalls => "the run's model-call budget",
            Budget::RunTime => "the run's time budget",
            Budget::RunCost => "the run's cost budget",
            Budget::SessionTokens => "the session's token budget",
        }
    }

    /// Where it is set: what the user changes to raise it.
    pub fn setting(self) -> &'static str {
        match self {
            Budget::RunTokens => "--max-tokens, `max_tokens` in [budgets] of rlm.toml or Python",
            Budget::RunCalls => {
                "--max-llm-calls, `max_llm_calls` in [budgets] of rlm.toml or Python"
            }
            Budget::RunTime => "--max-time, `max_time` in [budgets] of rlm.toml or Python",
            Budget::RunCost => "--max-cost, `max_cost` in [budgets] of rlm.toml or Python",
            Budget::SessionTokens => "the environment's `token_budget`",
        }
    }

    /// A call refused because its worst case, `needed` tokens, does not fit the `left` of
    /// `limit` (the calls in flight hold theirs).
    pub fn refuses_call(self, needed: u64, left: u64, limit: u64) -> String {
        format!(
            "not sent: {} has {} of its {} tokens left (calls in flight hold theirs) and this call may take up to {} (its prompt and the longest reply allowed); send less at a time or finish with what you have (the budget is set by {})",
            self.name(),
            thousands(left),
            thousands(limit),
            thousands(needed),
            self.setting()
        )
    }

    /// A call refused because its worst-case cost, `needed`, does not fit the `left` of
    /// `limit` (the calls in flight hold theirs).
    ///
    /// ```
    /// use rlm_registry::environment::Budget;
    /// use rlm_registry::llm::Cost;
    ///
    /// let usd = |x| Cost::from_usd(x).unwrap();
    /// let message = Budget::RunCost.refuses_cost(usd(0.02), usd(0.01), usd(0.5));
    /// assert!(message.starts_with("not sent: the run's cost budget has $0.0100 of its $0.5000 left"));
    /// assert!(message.contains("--max-cost"));
    /// ```
    pub fn refuses_cost(self, needed: Cost, left: Cost, limit: Cost) -> String {
        format!(
            "not sent: {} has {left} of its {limit} left (calls in flight hold theirs) and this call may cost up to {needed} (its prompt and the longest reply allowed, at the model's price); send less at a time or finish with what you have (the budget is set by {})",
            self.name(),
            self.setting()
        )
    }

    /// The budget is spent: `detail` says how.
    pub fn spent(self, detail: &str) -> String {
        format!(
            "{} is spent: {detail} (it is set by {})",
            self.name(),
            self.setting()
        )
    }
}

/// What is left of every budget an agent runs under, as `budget()` gives it to the
/// code: `None` where there is no such budget (unlimited).
///
/// ```
/// use rlm_registry::environment::BudgetLeft;
///
/// let left = BudgetLeft { tokens: Some(900), depth: 1, max_depth: Some(2), ..BudgetLeft::default() };
/// assert!(left.any_budget());
/// assert!(!BudgetLeft::default().any_budget());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BudgetLeft {
    /// Tokens left (`--max-tokens`, or an environment's `token_budget`).
    pub tokens: Option<u64>,
    /// Model calls left (`--max-llm-calls`).
    pub calls: Option<u64>,
    /// Seconds left (`--max-time`).
    pub seconds: Option<f64>,
    /// US dollars left (`--max-cost`).
    pub cost: Option<f64>,
    /// The calling agent's turns left after the one running.
    pub iterations: Option<u32>,
    /// The calling agent's depth: 0 for the root.
    pub depth: usize,
    /// The deepest level of children, if known.
    pub max_depth: Option<usize>,
}

impl BudgetLeft {
    /// Whether a budget of the run is set: the prompt mentions `budget()` only then.
    pub fn any_budget(&self) -> bool {
        self.tokens.is_some()
            || self.calls.is_some()
            || self.seconds.is_some()
            || self.cost.is_some()
    }
}

/// What an environment asks when its code calls `budget()`: the host that runs it (a
/// run's agent) knows what is left, as of now.
///
/// ```
/// use std::sync::Arc;
/// use rlm_registry::{Registry, environment::{BudgetLeft, BudgetView, Environment}};
///
/// struct Fixed;
/// impl BudgetView for Fixed {
///     fn left(&self) -> BudgetLeft {
///         BudgetLeft { calls: Some(3), ..BudgetLeft::default() }
///     }
/// }
/// let env = Environment::builder(Registry::empty()).budget_view(Arc::new(Fixed)).build()?;
/// assert_eq!(env.execute("print(budget().calls, budget().tokens)")?.output, "3\tnil\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait BudgetView: Send + Sync {
    /// What is left now.
    fn left(&self) -> BudgetLeft;
}

impl super::EnvironmentBuilder {
    /// What `budget()` reports: `view`'s figures, asked at each call. Without one,
    /// `budget()` reports the environment's own `token_budget` and nothing else.
    pub fn budget_view(mut self, view: std::sync::Arc<dyn BudgetView>) -> Self {
        self.host.budget_view = Some(view);
        self
    }
}

impl super::Environment {
    /// Starts the environment's own token budget (`token_budget`) again, for the next
    /// question of a session whose budgets apply per question.
    pub(crate) fn renew_token_budget(&self) {
        self.state.renew_tokens();
    }
}
