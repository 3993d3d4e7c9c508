//! Budgets shared by every agent of a run (the root and all its `rlm_query` children),
//! and the usage of the run per depth.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::environment::Budget;
use crate::llm::{
    BatchResults, Completion, Llm, LlmError, LlmLayer, Request, Usage, UsageSnapshot,
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
/// ```
/// use std::time::Duration;
/// use rlm_registry::rlm::Budgets;
///
/// let budgets = Budgets::default()
///     .with_total_tokens(200_000)
///     .with_llm_calls(100)
///     .with_wall_time(Duration::from_secs(600));
/// assert_eq!(budgets.llm_calls, Some(100));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budgets {
    /// Prompt and completion tokens, as the server reports them.
    pub total_tokens: Option<u64>,
    /// Model calls: the loop's own turns and every sub-call.
    pub llm_calls: Option<u64>,
    /// Wall time from the start of the run.
    pub wall_time: Option<Duration>,
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
/// let report = UsageReport { by_depth: vec![root, child], elapsed: Duration::from_millis(1500) };
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
    if usage.failed_calls > 0 {
        write!(f, ", {} failed", thousands(usage.failed_calls))?;
    }
    if usage.cached_calls > 0 {
        write!(
            f,
            ", {} cached ({} tokens saved)",
            thousands(usage.cached_calls),
            thousands(usage.cached_tokens)
        )?;
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
        usage_line(f, "total", &self.total())?;
        write!(f, " in {:.1} s", self.elapsed.as_secs_f64())
    }
}

/// The run's shared account: what the budgets allow, what has been spent, by depth.
pub(crate) struct Ledger {
    budgets: Budgets,
    started: Instant,
    /// Calls reserved so far (a refused reservation is given back).
    calls: AtomicU64,
    /// Tokens the server reported for the calls answered.
    tokens: AtomicU64,
    /// `tokens` plus the reservations of the calls in flight: what a new reservation
    /// must fit beside.
    committed: AtomicU64,
    depths: Vec<Usage>,
}

impl Ledger {
    /// A fresh account for a run whose agents go down to `max_depth`.
    pub fn new(budgets: Budgets, max_depth: usize) -> Arc<Ledger> {
        Arc::new(Ledger {
            budgets,
            started: Instant::now(),
            calls: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
            committed: AtomicU64::new(0),
            depths: (0..=max_depth).map(|_| Usage::new()).collect(),
        })
    }

    /// An account for a resumed run that had already run for `elapsed`: its wall-time
    /// budget counts from the run's first start (its tokens and calls are counted again
    /// as the record is played back).
    pub fn resumed(budgets: Budgets, max_depth: usize, elapsed: Duration) -> Arc<Ledger> {
        let mut ledger = Ledger::new(budgets, max_depth);
        if let Some(ledger) = Arc::get_mut(&mut ledger)
            && let Some(started) = ledger.started.checked_sub(elapsed)
        {
            ledger.started = started;
        }
        ledger
    }

    /// Checks the time and token budgets.
    pub fn check(&self) -> Result<(), BudgetExceeded> {
        if let Some(limit) = self.budgets.wall_time
            && self.started.elapsed() >= limit
        {
            return Err(BudgetExceeded::WallTime { limit });
        }
        if let Some(limit) = self.budgets.total_tokens {
            let used = self.tokens_used();
            if used >= limit {
                return Err(BudgetExceeded::Tokens { limit, used });
            }
        }
        Ok(())
    }

    /// Checks every budget and holds `request`'s worst case and one call against them
    /// until [`Ledger::record`] counts what it really spent.
    pub fn reserve(&self, request: &Request) -> Result<Reservation, BudgetExceeded> {
        self.check()?;
        let reservation = Reservation {
            tokens: self.worst_case(request),
        };
        if let Some(limit) = self.budgets.total_tokens {
            let needed = reservation.tokens;
            self.committed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |committed| {
                    (committed.saturating_add(needed) <= limit).then_some(committed + needed)
                })
                .map_err(|committed| BudgetExceeded::TokensWouldExceed {
                    limit,
                    left: limit.saturating_sub(committed),
                    needed,
                })?;
        }
        if let Some(limit) = self.budgets.llm_calls {
            let reserved = self
                .calls
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |calls| {
                    (calls < limit).then_some(calls + 1)
                });
            if reserved.is_err() {
                self.committed
                    .fetch_sub(reservation.tokens, Ordering::SeqCst);
                return Err(BudgetExceeded::LlmCalls { limit });
            }
        } else {
            self.calls.fetch_add(1, Ordering::SeqCst);
        }
        Ok(reservation)
    }

    /// The most tokens `request` may spend: its prompt and the longest reply it allows
    /// ([`Request::reply_reserve`]). Counted only under a token budget (the count reads
    /// the whole conversation).
    fn worst_case(&self, request: &Request) -> u64 {
        if self.budgets.total_tokens.is_none() {
            return 0;
        }
        let prompt = crate::environment::request_tokens(request);
        prompt.saturating_add(request.reply_reserve())
    }

    /// Records what a call made at `depth` spent, its reservation replaced by that.
    pub fn record(
        &self,
        depth: usize,
        reservation: Reservation,
        result: &Result<Completion, LlmError>,
    ) {
        let usage = &self.depths[depth.min(self.depths.len() - 1)];
        match result {
            // A cached answer was paid for by an earlier run: it spends no budget.
            Ok(completion) if completion.cached => {
                usage.record_cached(completion.prompt_tokens, completion.completion_tokens);
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
            }
            Err(error) => {
                for _ in 0..error.attempts() {
                    usage.record_attempt();
                }
                usage.record_failure();
            }
        }
        self.committed
            .fetch_sub(reservation.tokens, Ordering::SeqCst);
    }

    pub fn tokens_used(&self) -> u64 {
        self.tokens.load(Ordering::SeqCst)
    }

    pub fn remaining_tokens(&self) -> Option<u64> {
        self.budgets
            .total_tokens
            .map(|limit| limit.saturating_sub(self.tokens_used()))
    }

    pub fn remaining_time(&self) -> Option<Duration> {
        self.budgets
            .wall_time
            .map(|limit| limit.saturating_sub(self.started.elapsed()))
    }

    pub fn report(&self) -> UsageReport {
        UsageReport {
            by_depth: self.depths.iter().map(Usage::snapshot).collect(),
            elapsed: self.started.elapsed(),
        }
    }
}

/// One call's hold on the budgets, from [`Ledger::reserve`] to [`Ledger::record`]: the
/// tokens of its worst case.
#[must_use]
pub(crate) struct Reservation {
    tokens: u64,
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
        let reservation = self
            .ledger
            .reserve(&request)
            .map_err(|e| LlmError::BudgetExhausted(e.to_string()))?;
        let result = self.inner.complete(request);
        self.ledger.record(self.depth, reservation, &result);
        result
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
    /// together, those that do fit the budgets; the refused ones fail in place with the
    /// budget's message, the rest go out together through `send` (the inner client keeps
    /// its own concurrency).
    fn complete_reserved(
        &self,
        requests: Vec<Request>,
        send: impl FnOnce(Vec<Request>) -> Vec<Result<Completion, LlmError>>,
    ) -> Vec<Result<Completion, LlmError>> {
        let mut slots: Vec<Result<Reservation, LlmError>> = Vec::with_capacity(requests.len());
        let mut allowed = Vec::new();
        for request in requests {
            match self.ledger.reserve(&request) {
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
                let result = answers.next().unwrap_or_else(|| {
                    Err(LlmError::Config(
                        "the model returned fewer answers than prompts".to_string(),
                    ))
                });
                self.ledger.record(self.depth, reservation, &result);
                result
            })
            .collect()
    }
}
