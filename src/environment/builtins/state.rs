//! What the built-ins of one environment share.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value as Json;

use super::images::ContextImages;
use super::{SubAgent, User};
use crate::conventions::builtins::BuiltinId;
use crate::environment::answer_schema::AnswerSchema;
use crate::environment::budget::{Budget, BudgetLeft, BudgetView};
use crate::environment::journal::Journal;
use crate::environment::limits::{LimitKind, Tripwire};
use crate::environment::window::{ContextWindow, reply_reserve, request_tokens};
use crate::llm::{Completion, Llm, LlmError, Request};
use crate::text_format::thousands;

/// What the host gives an environment's built-ins besides its limits.
#[derive(Clone, Default)]
pub(crate) struct Host {
    pub llm: Option<Arc<dyn Llm>>,
    pub user: Option<Arc<dyn User>>,
    pub sub_agent: Option<Arc<dyn SubAgent>>,
    /// Tokens (prompt and completion) the session may spend on sub-calls, if limited.
    pub token_budget: Option<u64>,
    /// Which budget `token_budget` is, for its refusals: the session's own, or what is
    /// left of the run's.
    pub token_budget_kind: Budget,
    /// The schema the final answer must match, if any.
    pub answer_schema: Option<AnswerSchema>,
    /// The model's context window in tokens, if known: a sub-call that would not fit is
    /// not sent.
    pub context_window: Option<u64>,
    /// What `budget()` reports, when a run gives it.
    pub budget_view: Option<Arc<dyn BudgetView>>,
}

/// The state the built-ins share with their environment: its limits, what the host
/// gives, the final answer and the tokens spent.
pub(crate) struct BuiltinState {
    pub(super) tripwire: Rc<Tripwire>,
    /// What the host gave, kept as given.
    pub(super) host: Host,
    final_answer: RefCell<Option<String>>,
    /// With a schema: the final answer as JSON.
    final_value: RefCell<Option<Json>>,
    /// Why the last answer given was refused (it did not match the schema), until the
    /// host takes it.
    rejected_answer: RefCell<Option<String>>,
    tokens_spent: Cell<u64>,
    /// The worst cases of the sub-calls being sent, held against the token budget.
    tokens_reserved: Cell<u64>,
    /// The context's images, which `opts.images` names.
    pub(crate) images: ContextImages,
    /// What the executions read from outside the sandbox.
    pub(crate) journal: Rc<Journal>,
}

impl BuiltinState {
    /// The state of a new environment.
    pub fn new(tripwire: Rc<Tripwire>, host: Host) -> Self {
        BuiltinState {
            tripwire,
            host,
            final_answer: RefCell::new(None),
            final_value: RefCell::new(None),
            rejected_answer: RefCell::new(None),
            tokens_spent: Cell::new(0),
            tokens_reserved: Cell::new(0),
            images: ContextImages::default(),
            journal: Rc::default(),
        }
    }

    /// What the host gave, for another environment alike (a fork).
    pub(crate) fn host(&self) -> Host {
        self.host.clone()
    }

    /// Nothing spent against the token budget any more: a session's next question has
    /// the budget to itself.
    pub(crate) fn renew_tokens(&self) {
        self.tokens_spent.set(0);
    }

    pub(super) fn remaining_tokens(&self) -> Option<u64> {
        self.host
            .token_budget
            .map(|budget| budget.saturating_sub(self.tokens_spent.get()))
    }

    /// What `budget()` reports for code at `depth`: the host's view, else the session's
    /// own token budget.
    pub(super) fn budget_left(&self, depth: usize) -> BudgetLeft {
        match &self.host.budget_view {
            Some(view) => view.left(),
            None => BudgetLeft {
                tokens: self.remaining_tokens(),
                depth,
                ..BudgetLeft::default()
            },
        }
    }

    /// Checks the limits before `calls` sub-model calls.
    pub(super) fn before_calls(&self, calls: usize) -> mlua::Result<()> {
        if self.remaining_tokens() == Some(0) {
            return Err(self.tripwire.trip(LimitKind::TokenBudget));
        }
        self.tripwire.count_llm_calls(calls)
    }

    /// How many sub-model requests go out at once when the code does not say: the
    /// client's own concurrency.
    pub(super) fn default_concurrency(&self) -> usize {
        self.host
            .llm
            .as_ref()
            .map_or(crate::llm::DEFAULT_MAX_CONCURRENCY, |llm| {
                llm.max_concurrency()
            })
    }

    /// The reply limit the model's client sends with requests that set none
    /// (`--max-reply-tokens`).
    fn reply_limit(&self) -> Option<u32> {
        self.host
            .llm
            .as_ref()
            .and_then(|llm| llm.model_info())
            .and_then(|info| info.max_reply_tokens)
    }

    /// Holds `request`'s worst case (its prompt's tokens and the longest reply it allows,
    /// [`reply_reserve`]) against the token budget until
    /// [`BuiltinState::settle_tokens`]; the message the code reads when it does not fit
    /// what neither spent tokens nor calls being sent hold. Without a budget, nothing.
    pub(super) fn reserve_tokens(
        &self,
        builtin: BuiltinId,
        request: &Request,
    ) -> Result<u64, String> {
        let Some(budget) = self.host.token_budget else {
            return Ok(0);
        };
        let prompt = request_tokens(request);
        let worst = prompt.saturating_add(reply_reserve(request, self.reply_limit()));
        let committed = self
            .tokens_spent
            .get()
            .saturating_add(self.tokens_reserved.get());
        let left = budget.saturating_sub(committed);
        // A call the cache answers spends nothing: it goes through whatever is left.
        let cached = || {
            self.host
                .llm
                .as_ref()
                .is_some_and(|llm| llm.cached_answer(request).is_some())
        };
        if worst > left {
            if cached() {
                return Ok(0);
            }
            return Err(format!(
                "{}: {}",
                builtin.name(),
                self.host
                    .token_budget_kind
                    .refuses_call(worst, left, budget)
            ));
        }
        self.tokens_reserved
            .set(self.tokens_reserved.get().saturating_add(worst));
        Ok(worst)
    }

    /// Gives back a call's reservation and counts what it really spent.
    pub(super) fn settle_tokens(&self, reserved: u64, result: &Result<Completion, LlmError>) {
        self.tokens_reserved
            .set(self.tokens_reserved.get().saturating_sub(reserved));
        self.spent(result);
    }

    /// Records what a call spent (an answer from the call cache spends nothing).
    pub(super) fn spent(&self, result: &Result<Completion, LlmError>) {
        if let Ok(completion) = result
            && !completion.cached
        {
            let tokens = completion.prompt_tokens + completion.completion_tokens;
            self.tokens_spent
                .set(self.tokens_spent.get().saturating_add(tokens));
        }
    }

    /// The answer given with `FINAL` or `FINAL_VAR`, if any yet.
    pub fn final_answer(&self) -> Option<String> {
        self.final_answer.borrow().clone()
    }

    /// With a schema, the final answer as JSON, if any yet.
    pub fn final_value(&self) -> Option<Json> {
        self.final_value.borrow().clone()
    }

    /// The schema the final answer must match, if any.
    pub fn answer_schema(&self) -> Option<&AnswerSchema> {
        self.host.answer_schema.as_ref()
    }

    /// Why the last answer given was refused, once: the next call gives `None` until
    /// another answer is refused.
    pub fn take_rejected_answer(&self) -> Option<String> {
        self.rejected_answer.borrow_mut().take()
    }

    /// Records that an answer was refused, and why.
    pub(super) fn reject_answer(&self, reason: String) {
        *self.rejected_answer.borrow_mut() = Some(reason);
    }

    /// Refuses `request` before it is sent when its prompt and the room kept for the
    /// reply ([`Request::reply_reserve`]) would not fit the model's context window.
    pub(super) fn check_window(&self, builtin: BuiltinId, request: &Request) -> Result<(), String> {
        let Some(window) = self.host.context_window else {
            return Ok(());
        };
        ContextWindow(window).check(request, self.reply_limit()).map_err(|overflow| {
            format!(
                "{}: not sent: the prompt is {} tokens (o200k_base) and, with {} kept for the answer, does not fit the model's context window of {} tokens; give it less text at a time (token_split, chunk_by_size)",
                builtin.name(),
                thousands(overflow.request_tokens),
                thousands(overflow.reply_reserve),
                thousands(overflow.window)
            )
        })
    }

    /// Takes the answer (and its JSON value, with a schema), leaving none.
    pub fn take_final_answer(&self) -> Option<String> {
        self.final_value.borrow_mut().take();
        self.final_answer.borrow_mut().take()
    }

    /// Whether `builtin` can be answered: by the model, or from the recorded answers
    /// code run again is given (a restored checkpoint needs no model).
    pub(super) fn model_or_record(&self, builtin: BuiltinId) -> mlua::Result<()> {
        if self.journal.answers_pending() {
            return Ok(());
        }
        self.llm(builtin).map(|_| ())
    }

    /// The LLM `builtin` calls, or the error saying there is none.
    pub(super) fn llm(&self, builtin: BuiltinId) -> mlua::Result<&Arc<dyn Llm>> {
        self.host.llm.as_ref().ok_or_else(|| {
            mlua::Error::RuntimeError(format!(
                "{} is not available: no LLM is configured for this environment",
                builtin.name()
            ))
        })
    }

    /// The user channel `builtin` talks to, or the error saying there is none.
    pub(super) fn user(&self, builtin: BuiltinId) -> mlua::Result<&Arc<dyn User>> {
        self.host.user.as_ref().ok_or_else(|| {
            mlua::Error::RuntimeError(format!(
                "{} is not available here: only the top-level agent can reach the user, and this environment has no user channel",
                builtin.name()
            ))
        })
    }

    /// Records the run's final answer: its text, and with a schema its JSON value.
    pub(super) fn set_final_answer(&self, answer: String, value: Option<Json>) {
        *self.final_answer.borrow_mut() = Some(answer);
        *self.final_value.borrow_mut() = value;
    }
}
