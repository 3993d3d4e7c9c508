//! Per-execution limits, enforced so that `pcall`, `xpcall` and `coroutine.resume` cannot
//! swallow them: the engines' [`Guard`] (time, memory, interrupt) and what only the
//! environment counts (output, sub-model calls, call depth).

use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::rc::Rc;

pub(crate) use crate::engines::limits::Guard;
pub use crate::engines::limits::{Interrupt, LimitKind, Limits};

/// The state shared by the hook, the built-ins and the environment for one execution.
#[derive(Debug)]
pub(crate) struct Tripwire {
    /// What the engines check; shared with the functions that run them.
    pub guard: Rc<Guard>,
    llm_calls: Cell<usize>,
    /// The bytes `print` wrote in this execution.
    pub output: RefCell<Vec<u8>>,
    /// The bytes of the last execution's output, once taken.
    pub last_output: RefCell<Vec<u8>>,
    /// Sees each piece of output as it is printed (a server streams it to its client).
    pub observer: ObserverSlot,
}

impl Deref for Tripwire {
    type Target = Guard;

    fn deref(&self) -> &Guard {
        &self.guard
    }
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
            guard: Rc::new(Guard::new(limits)),
            llm_calls: Cell::new(0),
            output: RefCell::new(Vec::new()),
            last_output: RefCell::new(Vec::new()),
            observer: ObserverSlot::default(),
        })
    }

    /// Arms the limits for a new execution.
    pub fn start(&self) {
        self.guard.start();
        self.llm_calls.set(0);
        self.output.borrow_mut().clear();
    }

    /// Called by the limits hook (`hook.rs`): the other limits, then the call depth
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
