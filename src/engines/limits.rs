//! The limits of one execution, and the [`Guard`] an engine checks them with as it works.
//!
//! Running Lua code meets the limits through the environment's hook
//! (`environment::hook`): while an execution runs, a timer ticks every millisecond and
//! each tick has the VM check the limits at its next jump or call; coroutines check them
//! every 1,000 instructions. An engine running outside the VM checks its guard itself, as
//! its [`WorkMeter`](super::meter::WorkMeter) paces it.
//!
//! A limit that trips is recorded in the guard. From then on, the hook stays installed
//! and raises the limit's error every 1,000 instructions, and the environment's
//! protected-call wrappers re-raise it as soon as a protected call returns, so the
//! execution unwinds to the top whatever the code does; the environment then resets the
//! guard and keeps its variables.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Limits applied to each [`Environment::execute`](crate::environment::Environment::execute).
///
/// ```
/// use std::time::Duration;
/// use rlm_registry::environment::Limits;
///
/// let limits = Limits { time: Duration::from_secs(5), ..Limits::default() };
/// assert_eq!(limits.memory_bytes, 512 * 1024 * 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time one execution may run (default 30 s).
    pub time: Duration,
    /// Memory the whole Lua state may use, variables and `context` included (default 512 MiB).
    pub memory_bytes: usize,
    /// Bytes of captured `print` output per execution (default 1 MiB).
    pub output_bytes: usize,
    /// Sub-model calls (`llm_query`, each prompt of a batch) per execution (default 256).
    pub llm_calls: usize,
    /// Nested Lua calls (default 1,000). Checked with the other limits, every millisecond
    /// of an execution (every 1,000 instructions in a coroutine), so a recursion may pass
    /// it by the frames it adds in that time before it stops.
    pub recursion_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            time: Duration::from_secs(30),
            memory_bytes: 512 * 1024 * 1024,
            output_bytes: 1024 * 1024,
            llm_calls: 256,
            recursion_depth: 1_000,
        }
    }
}

/// Which limit an execution hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitKind {
    /// [`Limits::time`].
    Time,
    /// [`Limits::memory_bytes`].
    Memory,
    /// [`Limits::output_bytes`].
    Output,
    /// [`Limits::llm_calls`].
    LlmCalls,
    /// The session's token budget (`EnvironmentBuilder::token_budget`).
    TokenBudget,
    /// [`Limits::recursion_depth`].
    Recursion,
    /// Stopped from outside through an [`Interrupt`] (e.g. the caller cancelled).
    Interrupted,
}

impl LimitKind {
    pub(crate) fn message(self, limits: &Limits) -> String {
        match self {
            LimitKind::Time => format!(
                "time limit exceeded: the execution ran longer than {:.1} s",
                limits.time.as_secs_f64()
            ),
            LimitKind::Memory => format!(
                "memory limit exceeded: the code may use at most {} MiB besides the context (`--memory-limit` or `memory_limit_mb` raises it)",
                limits.memory_bytes / (1024 * 1024)
            ),
            LimitKind::Output => format!(
                "output limit exceeded: print may produce at most {} bytes per execution",
                limits.output_bytes
            ),
            LimitKind::LlmCalls => format!(
                "llm_calls limit exceeded: at most {} sub-model calls per execution",
                limits.llm_calls
            ),
            LimitKind::Recursion => format!(
                "recursion limit exceeded: calls may nest at most {} deep",
                limits.recursion_depth
            ),
            LimitKind::TokenBudget => {
                "token_budget limit exceeded: the session's sub-model token budget is spent"
                    .to_string()
            }
            LimitKind::Interrupted => "interrupted: the execution was cancelled".to_string(),
        }
    }
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LimitKind::Time => "time",
            LimitKind::Memory => "memory",
            LimitKind::Output => "output",
            LimitKind::LlmCalls => "llm_calls",
            LimitKind::TokenBudget => "token_budget",
            LimitKind::Recursion => "recursion",
            LimitKind::Interrupted => "interrupted",
        })
    }
}

/// Stops an environment's running execution from another thread: install it with
/// [`Environment::set_interrupt`](crate::environment::Environment::set_interrupt), then call
/// [`Interrupt::interrupt`] from anywhere. The execution ends at the hook's next check
/// with a [`LimitKind::Interrupted`] error, as if a limit had been hit.
///
/// ```
/// use rlm_registry::{Registry, environment::{Environment, Interrupt, LimitKind, Limits, ExecError}};
///
/// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
/// let interrupt = Interrupt::new();
/// env.set_interrupt(interrupt.clone());
/// let stopper = std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_millis(20));
///     interrupt.interrupt();
/// });
/// let error = env.execute("while true do end").unwrap_err();
/// assert!(matches!(error, ExecError::Limit { kind: LimitKind::Interrupted, .. }));
/// stopper.join().unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// A handle not yet interrupted.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Stops the execution running under this handle (and any later one).
    pub fn interrupt(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Interrupt::interrupt`] was called.
    pub fn is_interrupted(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Makes the handle usable again after an interruption, for the next run of a
    /// session that one cancellation stopped (every clone sees it).
    ///
    /// ```
    /// use rlm_registry::environment::Interrupt;
    ///
    /// let interrupt = Interrupt::new();
    /// interrupt.interrupt();
    /// interrupt.reset();
    /// assert!(!interrupt.is_interrupted());
    /// ```
    pub fn reset(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// What an execution may still do: its limits, its deadline, the limit already tripped
/// and the interrupt from outside. Every engine checks it as it works, the environment's
/// hook between instructions.
#[derive(Debug)]
pub(crate) struct Guard {
    pub limits: Limits,
    /// The memory the context took when it was loaded: the user's data, not the code's
    /// allocations, so it does not count against [`Limits::memory_bytes`].
    context_bytes: Cell<usize>,
    deadline: Cell<Option<Instant>>,
    tripped: Cell<Option<LimitKind>>,
    pub interrupt: RefCell<Interrupt>,
}

impl Guard {
    pub fn new(limits: Limits) -> Self {
        Guard {
            limits,
            context_bytes: Cell::new(0),
            deadline: Cell::new(None),
            tripped: Cell::new(None),
            interrupt: RefCell::new(Interrupt::new()),
        }
    }

    /// The memory the environment may hold: the limit, and the context beside it.
    pub fn memory_ceiling(&self) -> usize {
        self.limits
            .memory_bytes
            .saturating_add(self.context_bytes.get())
    }

    /// The memory the context took when it was loaded.
    pub fn context_bytes(&self) -> usize {
        self.context_bytes.get()
    }

    /// Records the memory the context now takes.
    pub fn set_context_bytes(&self, bytes: usize) {
        self.context_bytes.set(bytes);
    }

    /// Arms the limits for a new execution.
    pub fn start(&self) {
        self.deadline.set(Some(Instant::now() + self.limits.time));
        self.tripped.set(None);
    }

    /// Disarms them between executions (finalizers running later must not time out).
    pub fn stop(&self) {
        self.deadline.set(None);
    }

    /// Stops any Lua code still running or about to run (finalizers at drop): the
    /// hook raises on its next check.
    pub fn halt(&self) {
        self.tripped.set(Some(LimitKind::Time));
    }

    /// What is left of the running execution's time (the whole limit between executions).
    pub fn time_left(&self) -> std::time::Duration {
        self.deadline.get().map_or(self.limits.time, |d| {
            d.saturating_duration_since(Instant::now())
        })
    }

    pub fn tripped(&self) -> Option<LimitKind> {
        self.tripped.get()
    }

    /// Records `kind` (the first limit hit wins) and returns the error to raise.
    pub fn trip(&self, kind: LimitKind) -> mlua::Error {
        if self.tripped.get().is_none() {
            self.tripped.set(Some(kind));
        }
        self.error()
    }

    /// The error of the tripped limit.
    pub fn error(&self) -> mlua::Error {
        let kind = self.tripped.get().unwrap_or(LimitKind::Time);
        mlua::Error::RuntimeError(kind.message(&self.limits))
    }

    /// Checks time, memory and any limit already tripped.
    pub fn check(&self, used_memory: usize) -> mlua::Result<()> {
        if self.tripped.get().is_some() {
            return Err(self.error());
        }
        if self.deadline.get().is_some_and(|d| Instant::now() >= d) {
            return Err(self.trip(LimitKind::Time));
        }
        if self.interrupt.borrow().is_interrupted() {
            return Err(self.trip(LimitKind::Interrupted));
        }
        if used_memory > self.memory_ceiling() {
            return Err(self.trip(LimitKind::Memory));
        }
        Ok(())
    }
}
