//! [`Usage`]: calls and tokens summed across every call of a session, from any thread.

use std::ops::{Add, Sub};
use std::sync::atomic::{AtomicU64, Ordering};

use super::Cost;

/// Running totals of LLM use, safe to update from many threads at once. A client adds
/// to its `Usage` on every call; share one `Arc<Usage>` between clients (see
/// [`LlmClient::with_usage`](super::LlmClient::with_usage)) so that the sub-calls of a
/// session sum into one total. [`Usage::snapshot`] reads it as plain numbers.
///
/// ```
/// use std::sync::Arc;
/// use rlm_registry::llm::Usage;
///
/// let usage = Arc::new(Usage::new());
/// usage.record_success(120, 30);
/// usage.record_failure();
/// let totals = usage.snapshot();
/// assert_eq!((totals.calls, totals.failed_calls), (2, 1));
/// assert_eq!(totals.total_tokens(), 150);
/// ```
#[derive(Debug, Default)]
pub struct Usage {
    calls: AtomicU64,
    failed_calls: AtomicU64,
    attempts: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    reasoning_tokens: AtomicU64,
    cached_calls: AtomicU64,
    cached_tokens: AtomicU64,
    waited_calls: AtomicU64,
    cost_nanos: AtomicU64,
}

/// A point-in-time copy of a [`Usage`]. Snapshots subtract, to measure one stretch:
///
/// ```
/// use rlm_registry::llm::Usage;
///
/// let usage = Usage::new();
/// usage.record_success(10, 5);
/// let before = usage.snapshot();
/// usage.record_success(7, 3);
/// let turn = usage.snapshot() - before;
/// assert_eq!((turn.calls, turn.prompt_tokens, turn.completion_tokens), (1, 7, 3));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UsageSnapshot {
    /// Calls made (successful and failed; retries of one call count once).
    pub calls: u64,
    /// Calls that ended in an error, after any retries.
    pub failed_calls: u64,
    /// HTTP requests sent, retries included.
    pub attempts: u64,
    /// Prompt tokens reported by the server, over successful calls.
    pub prompt_tokens: u64,
    /// Completion tokens reported by the server, over successful calls.
    pub completion_tokens: u64,
    /// Of `completion_tokens`, those a reasoning model spent thinking, where the server
    /// reports them (`completion_tokens_details.reasoning_tokens`). Already counted in
    /// `completion_tokens`: a budget counts them once.
    pub reasoning_tokens: u64,
    /// Calls a call cache answered: not sent, and in none of the counts above.
    pub cached_calls: u64,
    /// The tokens those cached answers cost when they were first asked: what the cache
    /// saved.
    pub cached_tokens: u64,
    /// Of `cached_calls`, those answered by another worker's identical call that this
    /// one waited for (single-flight) rather than found already stored.
    pub waited_calls: u64,
    /// What the calls cost, where it is known: the server's reported cost, or the price
    /// table's (see [`Completion::cost`](super::Completion::cost)).
    pub cost: Cost,
}

impl UsageSnapshot {
    /// `prompt_tokens + completion_tokens`.
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// Calls that succeeded.
    pub fn successful_calls(&self) -> u64 {
        self.calls.saturating_sub(self.failed_calls)
    }
}

impl Add for UsageSnapshot {
    type Output = UsageSnapshot;

    fn add(self, other: UsageSnapshot) -> UsageSnapshot {
        UsageSnapshot {
            calls: self.calls.saturating_add(other.calls),
            failed_calls: self.failed_calls.saturating_add(other.failed_calls),
            attempts: self.attempts.saturating_add(other.attempts),
            prompt_tokens: self.prompt_tokens.saturating_add(other.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_add(other.completion_tokens),
            reasoning_tokens: self.reasoning_tokens.saturating_add(other.reasoning_tokens),
            cached_calls: self.cached_calls.saturating_add(other.cached_calls),
            cached_tokens: self.cached_tokens.saturating_add(other.cached_tokens),
            waited_calls: self.waited_calls.saturating_add(other.waited_calls),
            cost: self.cost + other.cost,
        }
    }
}

impl Sub for UsageSnapshot {
    type Output = UsageSnapshot;

    fn sub(self, earlier: UsageSnapshot) -> UsageSnapshot {
        UsageSnapshot {
            calls: self.calls.saturating_sub(earlier.calls),
            failed_calls: self.failed_calls.saturating_sub(earlier.failed_calls),
            attempts: self.attempts.saturating_sub(earlier.attempts),
            prompt_tokens: self.prompt_tokens.saturating_sub(earlier.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_sub(earlier.completion_tokens),
            reasoning_tokens: self
                .reasoning_tokens
                .saturating_sub(earlier.reasoning_tokens),
            cached_calls: self.cached_calls.saturating_sub(earlier.cached_calls),
            cached_tokens: self.cached_tokens.saturating_sub(earlier.cached_tokens),
            waited_calls: self.waited_calls.saturating_sub(earlier.waited_calls),
            cost: self.cost.saturating_sub(earlier.cost),
        }
    }
}

impl Usage {
    /// All zero.
    pub fn new() -> Usage {
        Usage::default()
    }

    /// Counts one successful call and its tokens.
    pub fn record_success(&self, prompt_tokens: u64, completion_tokens: u64) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.prompt_tokens
            .fetch_add(prompt_tokens, Ordering::Relaxed);
        self.completion_tokens
            .fetch_add(completion_tokens, Ordering::Relaxed);
    }

    /// Counts the thinking tokens of a call already counted by
    /// [`Usage::record_success`]: a part of its completion tokens, not more of them.
    ///
    /// ```
    /// use rlm_registry::llm::Usage;
    ///
    /// let usage = Usage::new();
    /// usage.record_success(100, 50);
    /// usage.record_reasoning(30);
    /// let totals = usage.snapshot();
    /// assert_eq!((totals.total_tokens(), totals.reasoning_tokens), (150, 30));
    /// ```
    pub fn record_reasoning(&self, reasoning_tokens: u64) {
        self.reasoning_tokens
            .fetch_add(reasoning_tokens, Ordering::Relaxed);
    }

    /// Counts one failed call.
    pub fn record_failure(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.failed_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one call answered by a call cache, and the tokens it saved.
    ///
    /// ```
    /// use rlm_registry::llm::Usage;
    ///
    /// let usage = Usage::new();
    /// usage.record_cached(100, 20);
    /// let totals = usage.snapshot();
    /// assert_eq!((totals.calls, totals.cached_calls, totals.cached_tokens), (0, 1, 120));
    /// ```
    pub fn record_cached(&self, prompt_tokens: u64, completion_tokens: u64) {
        self.cached_calls.fetch_add(1, Ordering::Relaxed);
        self.cached_tokens.fetch_add(
            prompt_tokens.saturating_add(completion_tokens),
            Ordering::Relaxed,
        );
    }

    /// Counts, of the cached calls, one that waited for another worker's identical call
    /// (recorded with [`Usage::record_cached`] as well).
    ///
    /// ```
    /// use rlm_registry::llm::Usage;
    ///
    /// let usage = Usage::new();
    /// usage.record_cached(100, 20);
    /// usage.record_waited();
    /// let totals = usage.snapshot();
    /// assert_eq!((totals.cached_calls, totals.waited_calls), (1, 1));
    /// ```
    pub fn record_waited(&self) {
        self.waited_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds what a call already counted cost.
    ///
    /// ```
    /// use rlm_registry::llm::{Cost, Usage};
    ///
    /// let usage = Usage::new();
    /// usage.record_cost(Cost::from_usd(0.002)?);
    /// usage.record_cost(Cost::from_usd(0.001)?);
    /// assert_eq!(usage.snapshot().cost.to_string(), "$0.0030");
    /// # Ok::<(), String>(())
    /// ```
    pub fn record_cost(&self, cost: Cost) {
        self.cost_nanos.fetch_add(cost.nanos(), Ordering::Relaxed);
    }

    /// Counts one HTTP request sent (the first attempt or a retry).
    pub fn record_attempt(&self) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
    }

    /// The totals so far. Each field is read atomically; a snapshot taken while calls
    /// finish on other threads may mix a call's count with the previous token total.
    pub fn snapshot(&self) -> UsageSnapshot {
        UsageSnapshot {
            calls: self.calls.load(Ordering::Relaxed),
            failed_calls: self.failed_calls.load(Ordering::Relaxed),
            attempts: self.attempts.load(Ordering::Relaxed),
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: self.completion_tokens.load(Ordering::Relaxed),
            reasoning_tokens: self.reasoning_tokens.load(Ordering::Relaxed),
            cached_calls: self.cached_calls.load(Ordering::Relaxed),
            cached_tokens: self.cached_tokens.load(Ordering::Relaxed),
            waited_calls: self.waited_calls.load(Ordering::Relaxed),
            cost: Cost::from_nanos(self.cost_nanos.load(Ordering::Relaxed)),
        }
    }
}
