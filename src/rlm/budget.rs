//! Budgets shared by every agent of a run (the root and all its `rlm_query` children),
//! and the usage of the run per depth.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::environment::{Budget, Interrupt};

use super::builder::Config;
use crate::llm::{
    BatchResults, Completion, Cost, Llm, LlmError, LlmLayer, Price, Request, Usage, UsageSnapshot,
    call_cost,
};
use crate::text_format::thousands;

/// What a whole run may spend, summed over the root agent, its children at every depth,
/// and every `llm_query` they make. `None` is unlimited (the default).
///
/// Each budget is checked before every model call; a call that is refused ends the
/// agent that wanted it with [`RlmError::Budget`](super::RlmError::Budget) (inside Lua
/// code, `llm_query` raises an error instead, which the model sees).
///
/// Under a token budget every call first reserves its worst case: its prompt's tokens
/// (counted with `o200k_base`) plus the most its reply may take, the request's
/// `max_tokens` or, when it sets none, [`DEFAULT_REPLY_RESERVE`](crate::llm::DEFAULT_REPLY_RESERVE)
/// (1,024) as the estimate. A call whose reservation does not fit what is left, the
/// reservations of the calls in flight counted as spent, is refused
/// ([`BudgetExceeded::TokensWouldExceed`]); once answered, its reservation becomes the
/// tokens the server reports. So however many calls run at once (`parallel_map`,
/// `llm_query_batched`, children), the run stays within its budget as long as replies
/// stay within their estimate.
///
/// A cost budget ([`Budgets::max_cost`]) is held the same way when the model's price is
/// known ([`Rlm::price`](super::Rlm::price)): the worst case's prompt tokens at the input
/// price and its longest reply at the output price; once answered, the reservation
/// becomes the call's cost, the server's `usage.cost` when it reports one, else the
/// price's. Without a price the cost of a call is not known before it is answered, so the
/// budget is checked against what was spent before each call (calls in flight may go past
/// it by their own cost); and a call whose cost cannot be known at all (no price, no
/// `usage.cost`) stops the run's next call, since the budget could no longer be kept.
///
/// A call a budget refuses is still answered when the call cache holds its answer
/// ([`Llm::cached_answer`]): a cached answer spends nothing.
///
/// ```
/// use std::time::Duration;
/// use rlm_registry::llm::Cost;
/// use rlm_registry::rlm::Budgets;
///
/// let budgets = Budgets::default()
///     .with_total_tokens(200_000)
///     .with_llm_calls(100)
///     .with_wall_time(Duration::from_secs(600))
///     .with_max_cost(Cost::from_usd(0.50)?);
/// assert_eq!(budgets.llm_calls, Some(100));
/// assert_eq!(budgets.max_cost.map(Cost::usd), Some(0.5));
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budgets {
    /// Prompt and completion tokens, as the server reports them.
    pub total_tokens: Option<u64>,
    /// Model calls: the loop's own turns and every sub-call.
    pub llm_calls: Option<u64>,
    /// Wall time from the start of the run.
    pub wall_time: Option<Duration>,
    /// US dollars, as the server reports them or the price table counts them.
    pub max_cost: Option<Cost>,
}

impl Budgets {
    /// Sets the token budget.
    pub fn with_total_tokens(mut self, tokens: u64) -> Budgets {
        self.total_tokens = Some(tokens);
        self
    }

    /// Sets the model-call budget.
    pub fn with_llm_calls(mut self, calls: u64) -> Budgets {
        self.llm_calls = Some(calls);
        self
    }

    /// Sets the wall-time budget.
    pub fn with_wall_time(mut self, time: Duration) -> Budgets {
        self.wall_time = Some(time);
        self
    }

    /// Sets the cost budget.
    pub fn with_max_cost(mut self, cost: Cost) -> Budgets {
        self.max_cost = Some(cost);
        self
    }
}

/// Which budget is spent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BudgetExceeded {
    /// [`Budgets::total_tokens`]: `used` tokens of `limit`.
    Tokens {
        /// The budget.
        limit: u64,
        /// What the run had spent when it was stopped.
        used: u64,
    },
    /// [`Budgets::total_tokens`]: the call's worst case, `needed` tokens, does not fit the
    /// `left` of `limit` that neither spent tokens nor calls in flight hold.
    TokensWouldExceed {
        /// The budget.
        limit: u64,
        /// What was left for the call.
        left: u64,
        /// The call's worst case: its prompt and the most its reply may take.
        needed: u64,
    },
    /// [`Budgets::llm_calls`]: all `limit` calls made.
    LlmCalls {
        /// The budget.
        limit: u64,
    },
    /// [`Budgets::wall_time`].
    WallTime {
        /// The budget.
        limit: Duration,
    },
    /// [`Budgets::max_cost`]: `spent` of `limit`.
    Cost {
        /// The budget.
        limit: Cost,
        /// What the run had spent when it was stopped.
        spent: Cost,
    },
    /// [`Budgets::max_cost`]: the call's worst-case cost, `needed`, does not fit the
    /// `left` of `limit` that neither spent dollars nor calls in flight hold.
    CostWouldExceed {
        /// The budget.
        limit: Cost,
        /// What was left for the call.
        left: Cost,
        /// The call's worst case at the model's price.
        needed: Cost,
    },
    /// [`Budgets::max_cost`]: an earlier call's cost is not known (the server reported
    /// none and no price is set for `model`), so the budget cannot be kept.
    CostUnknown {
        /// The budget.
        limit: Cost,
        /// The model without a price, as the run names it.
        model: String,
    },
}

impl fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&match self {
            BudgetExceeded::Tokens { limit, used } => Budget::RunTokens.spent(&format!(
                "{} of {} tokens used",
                thousands(*used),
                thousands(*limit)
            )),
            BudgetExceeded::TokensWouldExceed {
                limit,
                left,
                needed,
            } => Budget::RunTokens.refuses_call(*needed, *left, *limit),
            BudgetExceeded::LlmCalls { limit } => {
                Budget::RunCalls.spent(&format!("all {} calls made", thousands(*limit)))
            }
            BudgetExceeded::WallTime { limit } => Budget::RunTime.spent(&format!(
                "the run has taken longer than {:.1} s",
                limit.as_secs_f64()
            )),
            BudgetExceeded::Cost { limit, spent } => {
                Budget::RunCost.spent(&format!("{spent} of {limit} spent"))
            }
            BudgetExceeded::CostWouldExceed {
                limit,
                left,
                needed,
            } => Budget::RunCost.refuses_cost(*needed, *left, *limit),
            BudgetExceeded::CostUnknown { limit, model } => format!(
                "not sent: {} of {limit} cannot be kept: the server reported no cost for a call and no price is set for the model `{model}`; add `[prices.\"{model}\"] input = …, output = …` (dollars per million tokens) to rlm.toml (the budget is set by {})",
                Budget::RunCost.name(),
                Budget::RunCost.setting()
            ),
        })
    }
}

impl std::error::Error for BudgetExceeded {}

/// The model use of a run, per depth (0 is the root agent) and in total.
///
/// ```
/// use std::time::Duration;
/// use rlm_registry::llm::UsageSnapshot;
/// use rlm_registry::rlm::UsageReport;
///
/// let root = UsageSnapshot { calls: 3, prompt_tokens: 900, completion_tokens: 90, ..Default::default() };
/// let child = UsageSnapshot { calls: 2, prompt_tokens: 400, completion_tokens: 40, ..Default::default() };
/// let report = UsageReport { by_depth: vec![root, child], elapsed: Duration::from_millis(1500), ..Default::default() };
/// assert_eq!(report.total().calls, 5);
/// assert_eq!(report.total().total_tokens(), 1430);
/// assert!(report.to_string().contains("total    5 calls"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageReport {
    /// Usage at each depth, the root's first. Each depth counts its agents' own turns and
    /// the `llm_query` calls (and depth-limit `rlm_query` fallbacks) their code made.
    pub by_depth: Vec<UsageSnapshot>,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Conversations compacted to fit the window, every agent's.
    pub compactions: u64,
    /// Of the tokens above, those of the calls for the compactions' summaries.
    pub compaction_tokens: u64,
}

impl UsageReport {
    /// The sum over every depth.
    pub fn total(&self) -> UsageSnapshot {
        self.by_depth
            .iter()
            .fold(UsageSnapshot::default(), |sum, depth| sum + *depth)
    }
}

fn usage_line(f: &mut fmt::Formatter<'_>, label: &str, usage: &UsageSnapshot) -> fmt::Result {
    let plural = if usage.calls == 1 { "" } else { "s" };
    write!(
        f,
        "{label:<8} {} call{plural}, {} prompt + {} completion = {} tokens",
        thousands(usage.calls),
        thousands(usage.prompt_tokens),
        thousands(usage.completion_tokens),
        thousands(usage.total_tokens()),
    )?;
    if usage.reasoning_tokens > 0 {
        // Part of the completion tokens, not more of them.
        write!(
            f,
            " ({} of them reasoning)",
            thousands(usage.reasoning_tokens)
        )?;
    }
    if usage.cost > Cost::ZERO {
        write!(f, ", {}", usage.cost)?;
    }
    if usage.failed_calls > 0 {
        write!(f, ", {} failed", thousands(usage.failed_calls))?;
    }
    if usage.cached_calls > 0 {
        write!(
            f,
            ", {} cached ({} tokens saved",
            thousands(usage.cached_calls),
            thousands(usage.cached_tokens)
        )?;
        if usage.waited_calls > 0 {
            write!(
                f,
                "; {} waited for another worker's identical call",
                thousands(usage.waited_calls)
            )?;
        }
        f.write_str(")")?;
    }
    Ok(())
}

/// One line per depth that made calls, then the total with the wall time:
///
/// ```text
/// depth 0  3 calls, 900 prompt + 90 completion = 990 tokens
/// depth 1  2 calls, 400 prompt + 40 completion = 440 tokens
/// total    5 calls, 1,300 prompt + 130 completion = 1,430 tokens in 1.5 s
/// ```
impl fmt::Display for UsageReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (depth, usage) in self.by_depth.iter().enumerate() {
            if depth == 0 || usage.calls > 0 || usage.cached_calls > 0 {
                usage_line(f, &format!("depth {depth}"), usage)?;
                f.write_str("\n")?;
            }
        }
        if self.compactions > 0 {
            writeln!(
                f,
                "compactions: {} ({} tokens)",
                thousands(self.compactions),
                thousands(self.compaction_tokens)
            )?;
        }
        usage_line(f, "total", &self.total())?;
        write!(f, " in {:.1} s", self.elapsed.as_secs_f64())
    }
}

/// How often a call in flight looks whether its run was cancelled.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// The run's shared account: what the budgets allow, what has been spent, by depth.
pub(crate) struct Ledger {
    budgets: Budgets,
    /// The model's price, when known: a call's cost when the server reports none, and
    /// the worst case a cost budget reserves.
    price: Option<Price>,
    /// The model as the run names it, for the message when a cost cannot be known.
    model: String,
    /// When given, a call in flight is given up once it is interrupted.
    cancel: Option<Interrupt>,
    /// When the run (or, in a session, the prompt) began: the wall-time budget's clock.
    started: Mutex<Instant>,
    /// Calls reserved so far (a refused reservation is given back).
    calls: AtomicU64,
    /// Tokens the server reported for the calls answered.
    tokens: AtomicU64,
    /// `tokens` plus the reservations of the calls in flight: what a new reservation
    /// must fit beside.
    committed: AtomicU64,
    /// Nanodollars the calls answered cost, where known.
    cost: AtomicU64,
    /// `cost` plus the reservations of the calls in flight.
    committed_cost: AtomicU64,
    /// A call answered under a cost budget whose cost is not known.
    cost_unknown: AtomicBool,
    /// The turn each agent is at, by id: what `budget()` counts its iterations from.
    turns: Mutex<HashMap<String, u32>>,
    depths: Vec<Usage>,
    /// Compactions, and the tokens of their summaries.
    compactions: AtomicU64,
    compaction_tokens: AtomicU64,
}

impl Ledger {
    /// A fresh account for a run of `config`: its budgets, for agents down to its
    /// `max_depth`, counting the cost of its model's calls at its price where the server
    /// reports none, and giving up on calls in flight when it is cancelled.
    pub fn for_run(config: &Config) -> Arc<Ledger> {
        let model = config.llm.model_info().map(|m| m.model).unwrap_or_default();
        Arc::new(Ledger {
            budgets: config.budgets,
            price: config.price,
            model,
            cancel: config.cancel.clone(),
            started: Mutex::new(Instant::now()),
            calls: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
            committed: AtomicU64::new(0),
            cost: AtomicU64::new(0),
            committed_cost: AtomicU64::new(0),
            cost_unknown: AtomicBool::new(false),
            turns: Mutex::default(),
            depths: (0..=config.max_depth).map(|_| Usage::new()).collect(),
            compactions: AtomicU64::new(0),
            compaction_tokens: AtomicU64::new(0),
        })
    }

    /// An account for a resumed run that had already run for `elapsed`: its wall-time
    /// budget counts from the run's first start (its tokens and calls are counted again
    /// as the record is played back).
    pub fn resumed(config: &Config, elapsed: Duration) -> Arc<Ledger> {
        let mut ledger = Ledger::for_run(config);
        if let Some(ledger) = Arc::get_mut(&mut ledger) {
            let started = ledger.started.get_mut().unwrap_or_else(|p| p.into_inner());
            if let Some(earlier) = started.checked_sub(elapsed) {
                *started = earlier;
            }
        }
        ledger
    }

    /// Starts the budgets again for the next prompt of a session: nothing spent, the
    /// clock at zero. The usage by depth goes on counting (a session reports each
    /// prompt's share as a difference). Called between prompts, with no call in flight.
    pub fn renew(&self) {
        *self.started.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        for counter in [
            &self.calls,
            &self.tokens,
            &self.committed,
            &self.cost,
            &self.committed_cost,
        ] {
            counter.store(0, Ordering::SeqCst);
        }
        self.cost_unknown.store(false, Ordering::SeqCst);
        self.turns_lock().clear();
    }

    /// How long ago the run (or the session's prompt) began.
    fn elapsed(&self) -> Duration {
        self.started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    /// Checks the time, token and cost budgets.
    pub fn check(&self) -> Result<(), BudgetExceeded> {
        if let Some(limit) = self.budgets.wall_time
            && self.elapsed() >= limit
        {
            return Err(BudgetExceeded::WallTime { limit });
        }
        if let Some(limit) = self.budgets.total_tokens {
            let used = self.tokens_used();
            if used >= limit {
                return Err(BudgetExceeded::Tokens { limit, used });
            }
        }
        if let Some(limit) = self.budgets.max_cost {
            let spent = self.cost_spent();
            if spent >= limit {
                return Err(BudgetExceeded::Cost { limit, spent });
            }
            if self.cost_unknown.load(Ordering::SeqCst) {
                let model = self.model.clone();
                return Err(BudgetExceeded::CostUnknown { limit, model });
            }
        }
        Ok(())
    }

    /// Answers `request` through `llm` within the budgets: reserved, sent, and counted at
    /// `depth`, its cost filled in. A call no budget lets through is still answered when
    /// the call cache holds its answer, which spends nothing; otherwise the refusal.
    pub fn complete(
        &self,
        depth: usize,
        llm: &Arc<dyn Llm>,
        request: Request,
    ) -> Result<Result<Completion, LlmError>, BudgetExceeded> {
        let reservation = self.reserve_or_cached(llm.as_ref(), &request)?;
        let mut result = self.send(llm, request);
        self.record_costed(depth, reservation, &mut result);
        Ok(result)
    }

    /// Sends `request`; in a run that can be cancelled, from a thread of its own, so
    /// that a cancellation gives up on it at once ([`LlmError::Interrupted`]) while the
    /// server answers to nobody.
    fn send(&self, llm: &Arc<dyn Llm>, request: Request) -> Result<Completion, LlmError> {
        let Some(cancel) = &self.cancel else {
            return llm.complete(request);
        };
        if cancel.is_interrupted() {
            return Err(LlmError::Interrupted);
        }
        let (answer, answered) = mpsc::channel();
        let llm = Arc::clone(llm);
        thread::spawn(move || {
            let result = llm.complete(request);
            // Let go of the model before answering: the run may end at once, and the last
            // owner of a layer (the cache's counters are written when it is dropped) must
            // not be a thread the process does not wait for.
            drop(llm);
            // Nobody listens once the run gave up on the call: the answer is dropped.
            let _ = answer.send(result);
        });
        loop {
            match answered.recv_timeout(CANCEL_POLL) {
                Ok(result) => return result,
                Err(RecvTimeoutError::Timeout) if !cancel.is_interrupted() => {}
                Err(RecvTimeoutError::Timeout) => return Err(LlmError::Interrupted),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(LlmError::Config(
                        "the model call ended without an answer".to_string(),
                    ));
                }
            }
        }
    }

    /// Checks every budget and holds `request`'s worst case and one call against them
    /// until [`Ledger::record`] counts what it really spent.
    pub fn reserve(&self, request: &Request) -> Result<Reservation, BudgetExceeded> {
        self.check()?;
        let reservation = self.worst_case(request);
        if let Some(limit) = self.budgets.total_tokens {
            let needed = reservation.tokens;
            hold(&self.committed, needed, limit).map_err(|committed| {
                BudgetExceeded::TokensWouldExceed {
                    limit,
                    left: limit.saturating_sub(committed),
                    needed,
                }
            })?;
        }
        if let Some(limit) = self.budgets.max_cost {
            let needed = reservation.cost;
            let held = hold(&self.committed_cost, needed.nanos(), limit.nanos());
            if let Err(committed) = held {
                self.committed
                    .fetch_sub(reservation.tokens, Ordering::SeqCst);
                return Err(BudgetExceeded::CostWouldExceed {
                    limit,
                    left: limit.saturating_sub(Cost::from_nanos(committed)),
                    needed,
                });
            }
        }
        if let Some(limit) = self.budgets.llm_calls {
            let reserved = self
                .calls
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |calls| {
                    (calls < limit).then_some(calls + 1)
                });
            if reserved.is_err() {
                self.give_back(&reservation);
                return Err(BudgetExceeded::LlmCalls { limit });
            }
        } else {
            self.calls.fetch_add(1, Ordering::SeqCst);
        }
        Ok(reservation)
    }

    /// [`Ledger::reserve`], or when a budget refuses `request` and the call cache holds
    /// its answer, a hold of nothing: the call then goes through to the cache, and is
    /// counted as the cached answer it is.
    pub fn reserve_or_cached(
        &self,
        llm: &dyn Llm,
        request: &Request,
    ) -> Result<Reservation, BudgetExceeded> {
        self.reserve(request).or_else(|refused| {
            llm.cached_answer(request).ok_or(refused)?;
            // The call `record` gives back for a cached answer.
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(Reservation::default())
        })
    }

    /// The most `request` may spend: its prompt and the longest reply it allows
    /// ([`Request::reply_reserve`]), in tokens and at the model's price. Counted only
    /// under a budget that needs it (the count reads the whole conversation).
    fn worst_case(&self, request: &Request) -> Reservation {
        let priced = self.budgets.max_cost.and(self.price);
        if self.budgets.total_tokens.is_none() && priced.is_none() {
            return Reservation::default();
        }
        let prompt = crate::environment::request_tokens(request);
        let reply = request.reply_reserve();
        Reservation {
            tokens: prompt.saturating_add(reply),
            cost: priced.map_or(Cost::ZERO, |price| price.cost(prompt, reply)),
        }
    }

    fn give_back(&self, reservation: &Reservation) {
        self.committed
            .fetch_sub(reservation.tokens, Ordering::SeqCst);
        self.committed_cost
            .fetch_sub(reservation.cost.nanos(), Ordering::SeqCst);
    }

    fn usage_at(&self, depth: usize) -> &Usage {
        &self.depths[depth.min(self.depths.len().saturating_sub(1))]
    }

    /// Records what a call made at `depth` spent, its reservation replaced by that: the
    /// cost the run counted for it, if known (none for a cached answer).
    pub fn record(
        &self,
        depth: usize,
        reservation: Reservation,
        result: &Result<Completion, LlmError>,
    ) -> Option<Cost> {
        let usage = self.usage_at(depth);
        let mut cost = None;
        match result {
            // A cached answer was paid for by an earlier run: it spends no budget.
            Ok(completion) if completion.cached => {
                usage.record_cached(completion.prompt_tokens, completion.completion_tokens);
                if completion.waited.is_some() {
                    usage.record_waited();
                }
                self.calls.fetch_sub(1, Ordering::SeqCst);
            }
            Ok(completion) => {
                for _ in 0..completion.attempts.max(1) {
                    usage.record_attempt();
                }
                usage.record_success(completion.prompt_tokens, completion.completion_tokens);
                usage.record_reasoning(completion.reasoning_tokens);
                let spent = completion.total_tokens();
                self.tokens.fetch_add(spent, Ordering::SeqCst);
                // Added before the reservation is given back, so that what is committed
                // never reads lower than what is spent and in flight.
                self.committed.fetch_add(spent, Ordering::SeqCst);
                cost = call_cost(completion, self.price);
                self.spend(usage, cost);
            }
            Err(error) => {
                for _ in 0..error.attempts() {
                    usage.record_attempt();
                }
                usage.record_failure();
            }
        }
        self.give_back(&reservation);
        cost
    }

    /// Records what a call spent ([`Ledger::record`]) and writes the cost the run
    /// counted for it into its completion, for the trace.
    fn record_costed(
        &self,
        depth: usize,
        reservation: Reservation,
        result: &mut Result<Completion, LlmError>,
    ) {
        let cost = self.record(depth, reservation, result);
        if let Ok(completion) = result {
            completion.cost = cost;
        }
    }

    /// Counts a call's cost; one not known breaks a cost budget's account.
    fn spend(&self, usage: &Usage, cost: Option<Cost>) {
        match cost {
            Some(cost) => {
                usage.record_cost(cost);
                self.cost.fetch_add(cost.nanos(), Ordering::SeqCst);
                self.committed_cost
                    .fetch_add(cost.nanos(), Ordering::SeqCst);
            }
            None if self.budgets.max_cost.is_some() => {
                self.cost_unknown.store(true, Ordering::SeqCst);
            }
            None => {}
        }
    }

    pub fn tokens_used(&self) -> u64 {
        self.tokens.load(Ordering::SeqCst)
    }

    /// What the calls answered so far cost, where known.
    pub fn cost_spent(&self) -> Cost {
        Cost::from_nanos(self.cost.load(Ordering::SeqCst))
    }

    pub fn remaining_tokens(&self) -> Option<u64> {
        self.budgets
            .total_tokens
            .map(|limit| limit.saturating_sub(self.tokens_used()))
    }

    pub fn remaining_time(&self) -> Option<Duration> {
        self.budgets
            .wall_time
            .map(|limit| limit.saturating_sub(self.elapsed()))
    }

    /// Model calls left under the call budget.
    pub fn remaining_calls(&self) -> Option<u64> {
        let made = self.calls.load(Ordering::SeqCst);
        self.budgets
            .llm_calls
            .map(|limit| limit.saturating_sub(made))
    }

    /// What the run has cost so far, when it knows a cost at all (a price, a cost
    /// budget, or a server that reported one).
    pub fn run_cost(&self) -> Option<Cost> {
        let spent = self.cost_spent();
        let known = self.price.is_some() || self.budgets.max_cost.is_some();
        (known || spent > Cost::ZERO).then_some(spent)
    }

    /// Dollars left under the cost budget.
    pub fn remaining_cost(&self) -> Option<Cost> {
        self.budgets
            .max_cost
            .map(|limit| limit.saturating_sub(self.cost_spent()))
    }

    /// Notes that `agent` begins turn `turn`.
    pub fn start_turn(&self, agent: &str, turn: u32) {
        self.turns_lock().insert(agent.to_string(), turn);
    }

    /// The turn `agent` is at (0 before its first).
    pub fn turn_of(&self, agent: &str) -> u32 {
        self.turns_lock().get(agent).copied().unwrap_or(0)
    }

    fn turns_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.turns
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn report(&self) -> UsageReport {
        UsageReport {
            by_depth: self.depths.iter().map(Usage::snapshot).collect(),
            elapsed: self.elapsed(),
            compactions: self.compactions.load(Ordering::SeqCst),
            compaction_tokens: self.compaction_tokens.load(Ordering::SeqCst),
        }
    }

    /// Counts a compaction whose summary took `tokens` (already counted as a call).
    pub fn count_compaction(&self, tokens: u64) {
        self.compactions.fetch_add(1, Ordering::SeqCst);
        self.compaction_tokens.fetch_add(tokens, Ordering::SeqCst);
    }
}

/// Adds `needed` to `committed` when the sum stays within `limit`; else what was
/// committed. A call with nothing to hold (no price known) still finds a spent budget
/// spent.
fn hold(committed: &AtomicU64, needed: u64, limit: u64) -> Result<u64, u64> {
    committed.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |committed| {
        let total = committed.saturating_add(needed);
        (total <= limit && committed < limit.max(1)).then_some(total)
    })
}

/// One call's hold on the budgets, from [`Ledger::reserve`] to [`Ledger::record`]: the
/// tokens and the cost of its worst case.
#[must_use]
#[derive(Default)]
pub(crate) struct Reservation {
    tokens: u64,
    cost: Cost,
}

/// The model as an environment at `depth` sees it: every call reserves its worst case
/// against the shared budgets first and is counted at that depth.
pub(crate) struct Metered {
    pub inner: Arc<dyn Llm>,
    pub ledger: Arc<Ledger>,
    pub depth: usize,
}

impl LlmLayer for Metered {
    type Inner = dyn Llm;

    fn inner(&self) -> &Self::Inner {
        &*self.inner
    }

    fn call(&self, request: Request) -> Result<Completion, LlmError> {
        self.ledger
            .complete(self.depth, &self.inner, request)
            .map_err(|e| LlmError::BudgetExhausted(e.to_string()))?
    }

    fn batch(
        &self,
        requests: Vec<Request>,
        send: impl FnOnce(Vec<Request>) -> BatchResults,
    ) -> BatchResults {
        self.complete_reserved(requests, send)
    }
}

impl Metered {
    /// Reserves every request of a batch before any is sent, so that however many go out
    /// together, those that do fit the budgets (or that the call cache answers); a
    /// refused one fails in place with the budget's message; the rest go out together
    /// through `send` (the inner client keeps its own concurrency).
    fn complete_reserved(
        &self,
        requests: Vec<Request>,
        send: impl FnOnce(Vec<Request>) -> Vec<Result<Completion, LlmError>>,
    ) -> Vec<Result<Completion, LlmError>> {
        let mut slots: Vec<Result<Reservation, LlmError>> = Vec::with_capacity(requests.len());
        let mut allowed = Vec::new();
        for request in requests {
            match self.ledger.reserve_or_cached(self.inner.as_ref(), &request) {
                Ok(reservation) => {
                    slots.push(Ok(reservation));
                    allowed.push(request);
                }
                Err(e) => slots.push(Err(LlmError::BudgetExhausted(e.to_string()))),
            }
        }
        let mut answers = send(allowed).into_iter();
        slots
            .into_iter()
            .map(|slot| {
                let reservation = slot?;
                let mut result = answers.next().unwrap_or_else(|| {
                    Err(LlmError::Config(
                        "the model returned fewer answers than prompts".to_string(),
                    ))
                });
                self.ledger
                    .record_costed(self.depth, reservation, &mut result);
                result
            })
            .collect()
    }
}
