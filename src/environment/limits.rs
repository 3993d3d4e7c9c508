//! Per-execution limits, enforced so that `pcall`, `xpcall` and `coroutine.resume` cannot
//! swallow them.
//!
//! A limit that trips is recorded in [`Tripwire`]. From then on, the instruction hook
//! raises the limit's error every few hundred instructions and the protected-call
//! wrappers (see `sandbox`) re-raise it as soon as a protected call returns, so the
//! execution unwinds to the top whatever the code does; the environment then resets the
//! tripwire and keeps its variables.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Limits applied to each [`Environment::execute`](super::Environment::execute).
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
    /// Nested Lua calls (default 1,000). Checked with the other limits every few hundred
    /// instructions, so recursion may pass it by a few hundred frames before it stops.
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
                "memory limit exceeded: the environment may use at most {} MiB",
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
/// [`Environment::set_interrupt`](super::Environment::set_interrupt), then call
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
}

/// The state shared by the hook, the built-ins and the environment for one execution.
#[derive(Debug)]
pub(crate) struct Tripwire {
    pub limits: Limits,
    deadline: Cell<Option<Instant>>,
    tripped: Cell<Option<LimitKind>>,
    llm_calls: Cell<usize>,
    /// The bytes `print` wrote in this execution.
    pub output: RefCell<Vec<u8>>,
    /// The bytes of the last execution's output, once taken.
    pub last_output: RefCell<Vec<u8>>,
    pub interrupt: RefCell<Interrupt>,
    /// Sees each piece of output as it is printed (a server streams it to its client).
    pub observer: ObserverSlot,
}

/// Called with each piece of output as it is printed, on the executing thread.
pub type OutputObserver = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// Where the [`OutputObserver`] is kept (its `Debug` says only whether one is set).
#[derive(Default)]
pub(crate) struct ObserverSlot(pub RefCell<Option<OutputObserver>>);

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = self.0.borrow().is_some();
        f.write_str(if set { "Some(<observer>)" } else { "None" })
    }
}

impl Tripwire {
    pub fn new(limits: Limits) -> Rc<Self> {
        Rc::new(Tripwire {
            limits,
            deadline: Cell::new(None),
            tripped: Cell::new(None),
            llm_calls: Cell::new(0),
            output: RefCell::new(Vec::new()),
            last_output: RefCell::new(Vec::new()),
            interrupt: RefCell::new(Interrupt::new()),
            observer: ObserverSlot::default(),
        })
    }

    /// Arms the limits for a new execution.
    pub fn start(&self) {
        self.deadline.set(Some(Instant::now() + self.limits.time));
        self.tripped.set(None);
        self.llm_calls.set(0);
        self.output.borrow_mut().clear();
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

    /// Called by the instruction hook: the other limits, then the call depth
    /// (`frame_exists(n)` tells whether the stack is deeper than `n` frames).
    pub fn check_with_depth(
        &self,
        used_memory: usize,
        frame_exists: impl Fn(usize) -> bool,
    ) -> mlua::Result<()> {
        self.check(used_memory)?;
        if frame_exists(self.limits.recursion_depth) {
            return Err(self.trip(LimitKind::Recursion));
        }
        Ok(())
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
        if used_memory > self.limits.memory_bytes {
            return Err(self.trip(LimitKind::Memory));
        }
        Ok(())
    }

    /// Counts `n` sub-model calls about to be made, tripping the limit if there are too many.
    pub fn count_llm_calls(&self, n: usize) -> mlua::Result<()> {
        let total = self.llm_calls.get().saturating_add(n);
        if total > self.limits.llm_calls {
            return Err(self.trip(LimitKind::LlmCalls));
        }
        self.llm_calls.set(total);
        Ok(())
    }

    /// How many more bytes of output fit under the output limit.
    pub(crate) fn output_room(&self) -> usize {
        self.limits
            .output_bytes
            .saturating_sub(self.output.borrow().len())
    }

    /// Appends captured output, tripping the output limit if it grows too large.
    pub fn append_output(&self, bytes: &[u8]) -> mlua::Result<()> {
        let mut output = self.output.borrow_mut();
        if output.len() + bytes.len() > self.limits.output_bytes {
            let room = self.limits.output_bytes.saturating_sub(output.len());
            // Cut on a character boundary when the text up to the cut is UTF-8 (`print`
            // hands over a line cut short just past the room, maybe inside a character).
            let text = match std::str::from_utf8(bytes) {
                Ok(text) => Some(text),
                Err(e) if e.valid_up_to() >= room => {
                    std::str::from_utf8(&bytes[..e.valid_up_to()]).ok()
                }
                Err(_) => None,
            };
            let cut = match text {
                Some(text) => {
                    crate::conventions::diagnostic::floor_char_boundary(text, room.min(text.len()))
                }
                None => room.min(bytes.len()),
            };
            output.extend_from_slice(&bytes[..cut]);
            drop(output);
            self.observe(&bytes[..cut]);
            return Err(self.trip(LimitKind::Output));
        }
        output.extend_from_slice(bytes);
        drop(output);
        self.observe(bytes);
        Ok(())
    }

    /// Shows `bytes` to the observer, as text ([`escape_output`]).
    ///
    /// [`escape_output`]: super::escape_output
    fn observe(&self, bytes: &[u8]) {
        let observer = self.observer.0.borrow().clone();
        if let Some(observer) = observer
            && !bytes.is_empty()
        {
            observer(&super::output::escape_output(bytes));
        }
    }

    /// Takes the output printed so far, as text ([`escape_output`]), keeping its bytes
    /// as the last output.
    ///
    /// [`escape_output`]: super::escape_output
    pub fn take_output(&self) -> String {
        let bytes = std::mem::take(&mut *self.output.borrow_mut());
        let text = super::output::escape_output(&bytes).into_owned();
        *self.last_output.borrow_mut() = bytes;
        text
    }
}
