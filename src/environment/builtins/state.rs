//! What the built-ins of one environment share.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use super::{SubAgent, User};
use crate::conventions::builtins::BuiltinId;
use crate::environment::limits::{LimitKind, Tripwire};
use crate::llm::{Completion, Llm, LlmError};

/// The state the built-ins share with their environment: its limits, the host's LLM,
/// user channel and sub-agent, the final answer and the tokens spent.
pub(crate) struct BuiltinState {
    pub(super) tripwire: Rc<Tripwire>,
    pub(super) llm: Option<Arc<dyn Llm>>,
    pub(super) user: Option<Arc<dyn User>>,
    pub(super) sub_agent: Option<Arc<dyn SubAgent>>,
    pub(super) final_answer: RefCell<Option<String>>,
    /// Tokens (prompt and completion) the session may spend on sub-calls, if limited.
    pub(super) token_budget: Option<u64>,
    pub(super) tokens_spent: Cell<u64>,
}

impl BuiltinState {
    /// The state of a new environment.
    pub fn new(
        tripwire: Rc<Tripwire>,
        llm: Option<Arc<dyn Llm>>,
        user: Option<Arc<dyn User>>,
        sub_agent: Option<Arc<dyn SubAgent>>,
        token_budget: Option<u64>,
    ) -> Self {
        BuiltinState {
            tripwire,
            llm,
            user,
            sub_agent,
            final_answer: RefCell::new(None),
            token_budget,
            tokens_spent: Cell::new(0),
        }
    }

    pub(super) fn remaining_tokens(&self) -> Option<u64> {
        self.token_budget
            .map(|budget| budget.saturating_sub(self.tokens_spent.get()))
    }

    /// Checks the limits before `calls` sub-model calls.
    pub(super) fn before_calls(&self, calls: usize) -> mlua::Result<()> {
        if self.remaining_tokens() == Some(0) {
            return Err(self.tripwire.trip(LimitKind::TokenBudget));
        }
        self.tripwire.count_llm_calls(calls)
    }

    /// Records what a call spent.
    pub(super) fn spent(&self, result: &Result<Completion, LlmError>) {
        if let Ok(completion) = result {
            let tokens = completion.prompt_tokens + completion.completion_tokens;
            self.tokens_spent
                .set(self.tokens_spent.get().saturating_add(tokens));
        }
    }

    /// The answer given with `FINAL` or `FINAL_VAR`, if any yet.
    pub fn final_answer(&self) -> Option<String> {
        self.final_answer.borrow().clone()
    }

    /// Takes the answer, leaving none.
    pub fn take_final_answer(&self) -> Option<String> {
        self.final_answer.borrow_mut().take()
    }

    /// The LLM `builtin` calls, or the error saying there is none.
    pub(super) fn llm(&self, builtin: BuiltinId) -> mlua::Result<&Arc<dyn Llm>> {
        self.llm.as_ref().ok_or_else(|| {
            mlua::Error::RuntimeError(format!(
                "{} is not available: no LLM is configured for this environment",
                builtin.name()
            ))
        })
    }

    /// The user channel `builtin` talks to, or the error saying there is none.
    pub(super) fn user(&self, builtin: BuiltinId) -> mlua::Result<&Arc<dyn User>> {
        self.user.as_ref().ok_or_else(|| {
            mlua::Error::RuntimeError(format!(
                "{} is not available here: only the top-level agent can reach the user, and this environment has no user channel",
                builtin.name()
            ))
        })
    }

    /// Records `value` as the run's final answer.
    pub(super) fn set_final_answer(&self, answer: String) {
        *self.final_answer.borrow_mut() = Some(answer);
    }
}
