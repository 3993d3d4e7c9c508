//! What a budget's refusal says, wherever it happens: the loop's own turns, a child's, a
//! `llm_query`, a `parallel_map` round or a session's sub-calls all name the budget,
//! what is left, and the setting that raises it, in the same words.

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

    /// The budget is spent: `detail` says how.
    pub fn spent(self, detail: &str) -> String {
        format!(
            "{} is spent: {detail} (it is set by {})",
            self.name(),
            self.setting()
        )
    }
}
