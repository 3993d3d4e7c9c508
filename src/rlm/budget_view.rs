//! What `budget()` tells an agent's code: [`AgentBudget`], the run's budgets left as the
//! shared [`Ledger`] counts them, with the agent's own turns and depth.

use std::sync::Arc;

use crate::environment::{BudgetLeft, BudgetView};

use super::budget::Ledger;

/// The budgets left, as agent `id` at `depth` sees them.
pub(super) struct AgentBudget {
    pub ledger: Arc<Ledger>,
    pub id: String,
    pub depth: usize,
    pub max_depth: usize,
    pub max_iterations: u32,
}

impl BudgetView for AgentBudget {
    fn left(&self) -> BudgetLeft {
        let ledger = &self.ledger;
        BudgetLeft {
            tokens: ledger.remaining_tokens(),
            calls: ledger.remaining_calls(),
            seconds: ledger.remaining_time().map(|left| left.as_secs_f64()),
            cost: ledger.remaining_cost().map(|left| left.usd()),
            // The turn running is spent: what is left comes after it.
            iterations: Some(self.max_iterations.saturating_sub(ledger.turn_of(&self.id))),
            depth: self.depth,
            max_depth: Some(self.max_depth),
        }
    }
}
