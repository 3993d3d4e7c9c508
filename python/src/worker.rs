//! Where an `Environment` lives, and how a call from Python reaches it.
//!
//! A call runs on the caller's own thread with the GIL released: no hand-over to another
//! thread, so a round trip costs the execution and little else, and a thousand
//! environments hold no thread at all. The crate's `Environment` is not `Send` (its
//! parts share counts that are not atomic), but nothing in it is tied to a thread: the
//! limits' timer is the executing thread's own. So it is moved whole, behind a lock, and
//! used by one thread at a time: any Python thread may use it, a second one gets
//! `BusyError` at once (never a deadlock), and environments run Lua in parallel. The
//! asyncio API (`aio`) claims it alike when a call is made ([`EnvCell::reserve`]) and
//! runs the call on a pool thread ([`Reserved::run`]).
//!
//! Ctrl-C reaches a running execution through its interrupt: on Python's main thread,
//! the limits' checks look for a signal every [`SIGNAL_CHECK`] (taking the GIL for it),
//! stop the execution as a limit would, and `KeyboardInterrupt` is raised once it has
//! ended. A panic in a call is caught: the call raises `InternalError`, and the
//! environment is closed for good.
//!
//! An environment is dropped on a thread shared by all of them ([`drop_later`]): a Lua
//! state's drop costs tens of microseconds, which the Python code dropping it (often
//! about to make the next one) does not wait for.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use rlm_registry::environment::{Environment, Interrupt};

use crate::errors::{BusyError, Failure, internal_error, panic_message};

/// How often an execution on Python's main thread looks for a signal (Ctrl-C).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// An environment, and whether a Python thread is using it.
pub(crate) struct EnvCell {
    /// Locked only by the thread holding the claim (`busy`), and by the drop.
    environment: Mutex<Option<Movable>>,
    /// Why the environment can no longer be used: closed, or a panic in it. Apart from
    /// the environment, so that asking does not wait for a running execution.
    ended: Mutex<Option<Ended>>,
    /// Set while a call runs: the second caller's check, with no waiting.
    busy: AtomicBool,
    /// The interrupt the environment's executions run under; replaced once used.
    interrupt: Mutex<Interrupt>,
    /// The process that made it: a child made by `fork` has a copy of the Lua state
    /// that another thread of the parent may have been changing, and must not use it.
    process: u32,
}

/// An environment on its way between threads.
struct Movable(Environment);

// SAFETY: the environment is used by one thread at a time (the claim, then the lock, or
// the thread that drops it), and none of its parts is tied to a thread or shared outside
// it: the crate documents it movable so. The lock's release and acquire order one
// thread's uses before the next's.
unsafe impl Send for Movable {}

#[derive(Clone)]
enum Ended {
    Closed,
    Panicked(String),
}

impl EnvCell {
    /// Builds the environment with `build`, with the GIL released.
    pub(crate) fn start(
        py: Python<'_>,
        build: impl FnOnce() -> Result<Environment, Failure> + Send + 'static,
    ) -> PyResult<EnvCell> {
        let interrupt = new_interrupt();
        let installed = interrupt.clone();
        let built = py.detach(move || {
            catch_unwind(AssertUnwindSafe(|| {
                build().map(|environment| {
                    environment.set_interrupt(installed);
                    Movable(environment)
                })
            }))
            .map_err(|payload| panic_message(payload.as_ref()))
        });
        match built {
            Ok(Ok(environment)) => Ok(EnvCell {
                environment: Mutex::new(Some(environment)),
                ended: Mutex::new(None),
                busy: AtomicBool::new(false),
                interrupt: Mutex::new(interrupt),
                process: std::process::id(),
            }),
            Ok(Err(failure)) => Err(failure.into_pyerr(py)),
            Err(message) => Err(Failure::Panic(message).into_pyerr(py)),
        }
    }

    /// Runs `work` on the environment, on this thread with the GIL released.
    pub(crate) fn call<R: Send + 'static>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&Environment) -> R + Send + 'static,
    ) -> PyResult<R> {
        let _claim = self.claim()?;
        let fresh = self.prepare()?;
        let watching = on_main_thread(py);
        let outcome = py.detach(move || self.run(fresh, watching, work));
        match (outcome, CAUGHT.take()) {
            (Ok(_), Some(signal)) => Err(signal),
            (outcome, _) => outcome,
        }
    }

    /// Claims the environment now for a call that runs later on another thread
    /// ([`Reserved::run`]): a second caller meanwhile gets `BusyError`, as with `call`.
    pub(crate) fn reserve(self: &Arc<Self>) -> PyResult<Reserved> {
        let claim = self.claim()?;
        let fresh = self.prepare()?;
        // The claim passes to the reservation, which ends it when dropped.
        std::mem::forget(claim);
        Ok(Reserved {
            cell: Arc::clone(self),
            fresh,
        })
    }

    /// Checks, with the claim held, that the environment can be used, and installs the
    /// interrupt of the coming call: the one `interrupt()` reaches from now on.
    fn prepare(&self) -> PyResult<Option<Interrupt>> {
        self.usable()?;
        Ok(self.fresh_interrupt())
    }

    /// Runs `work` on this thread, with the claim held and without the GIL; a panic in it
    /// closes the environment for good.
    fn run<R>(
        &self,
        fresh: Option<Interrupt>,
        watching: bool,
        work: impl FnOnce(&Environment) -> R,
    ) -> PyResult<R> {
        let mut slot = lock(&self.environment);
        let Some(environment) = slot.as_ref() else {
            return Err(self.ended_error());
        };
        let _watch = SignalWatch::start(watching);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if let Some(interrupt) = fresh {
                environment.0.set_interrupt(interrupt);
            }
            work(&environment.0)
        }));
        outcome.map_err(|payload| {
            let message = panic_message(payload.as_ref());
            self.end(Ended::Panicked(message.clone()));
            if let Some(environment) = slot.take() {
                // A drop that panics (after the panic in it) must not reach Python.
                let _ = catch_unwind(AssertUnwindSafe(|| drop(environment)));
            }
            internal_error(&message)
        })
    }

    /// Stops the execution running now, if any, as a limit would (`limit` is
    /// `"interrupted"`); the next one runs normally.
    pub(crate) fn interrupt(&self) {
        lock(&self.interrupt).interrupt();
    }

    /// Ends the environment and drops it, with the GIL released. Closing twice is
    /// nothing.
    pub(crate) fn close(&self, py: Python<'_>) -> PyResult<()> {
        let _claim = self.claim()?;
        lock(&self.ended).get_or_insert(Ended::Closed);
        let environment = lock(&self.environment).take();
        if let Some(environment) = environment {
            if self.process == std::process::id() {
                py.detach(move || {
                    let _ = catch_unwind(AssertUnwindSafe(|| drop(environment)));
                });
            } else {
                std::mem::forget(environment);
            }
        }
        Ok(())
    }

    /// Whether the environment can no longer be used.
    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.ended).is_some()
    }

    /// This thread's turn, or `BusyError` when another thread has it.
    fn claim(&self) -> PyResult<Claim<'_>> {
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .map(|_| Claim(&self.busy))
            .map_err(|_| {
                BusyError::new_err(
                    "this Environment is in use by another thread (one thread at a time may use it)",
                )
            })
    }

    /// An error when the environment cannot be used: made before a fork, or ended.
    fn usable(&self) -> PyResult<()> {
        if self.process != std::process::id() {
            return Err(crate::errors::RlmRegistryError::new_err(
                "this Environment belongs to the parent process: after fork, create a new one",
            ));
        }
        match lock(&self.ended).clone() {
            None => Ok(()),
            Some(ended) => Err(ended_error(ended)),
        }
    }

    /// A new interrupt for the next execution when the one in place has been used.
    fn fresh_interrupt(&self) -> Option<Interrupt> {
        let mut interrupt = lock(&self.interrupt);
        interrupt.is_interrupted().then(|| {
            *interrupt = new_interrupt();
            interrupt.clone()
        })
    }

    /// Ends the environment for `why`.
    fn end(&self, why: Ended) {
        *lock(&self.ended) = Some(why);
    }

    fn ended_error(&self) -> PyErr {
        let ended = lock(&self.ended).clone();
        ended_error(ended.unwrap_or(Ended::Closed))
    }
}

impl Drop for EnvCell {
    fn drop(&mut self) {
        let environment = self
            .environment
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(environment) = environment {
            if self.process == std::process::id() {
                drop_later(environment);
            } else {
                // A copy of what a thread of the parent may have been changing.
                std::mem::forget(environment);
            }
        }
    }
}

fn ended_error(ended: Ended) -> PyErr {
    match ended {
        Ended::Closed => PyValueError::new_err("the Environment is closed"),
        Ended::Panicked(message) => internal_error(&format!(
            "the Environment was closed after this error: {message}"
        )),
    }
}

/// The interrupt of an environment's executions: `interrupt()` from any thread, and
/// Ctrl-C on Python's main thread.
fn new_interrupt() -> Interrupt {
    Interrupt::polling(ctrl_c_pending)
}

thread_local! {
    /// On Python's main thread, while a call runs: when signals were last looked for.
    static WATCH: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The exception a signal handler raised during the call (`KeyboardInterrupt`).
    static CAUGHT: RefCell<Option<PyErr>> = const { RefCell::new(None) };
    /// Whether this thread is Python's main thread, once asked.
    static MAIN_THREAD: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Whether this thread is Python's main thread, the one signal handlers run on.
fn on_main_thread(py: Python<'_>) -> bool {
    if let Some(known) = MAIN_THREAD.get() {
        return known;
    }
    let asked = (|| -> PyResult<bool> {
        let threading = py.import("threading")?;
        let main = threading.call_method0("main_thread")?;
        Ok(main.is(&threading.call_method0("current_thread")?))
    })()
    .unwrap_or(false);
    MAIN_THREAD.set(Some(asked));
    asked
}

/// The signals watched on this thread while a call runs (none off the main thread);
/// what was watched before is back when it ends (a call nested in a Python callback).
struct SignalWatch(Option<Instant>);

impl SignalWatch {
    fn start(watching: bool) -> SignalWatch {
        SignalWatch(WATCH.replace(watching.then(Instant::now)))
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        WATCH.set(self.0);
    }
}

/// The interrupt's poll, run by the limits' checks on the executing thread: whether a
/// signal handler raised (Ctrl-C), asked at most every [`SIGNAL_CHECK`].
fn ctrl_c_pending() -> bool {
    let Some(last) = WATCH.get() else {
        return false;
    };
    if last.elapsed() < SIGNAL_CHECK {
        return false;
    }
    WATCH.set(Some(Instant::now()));
    match Python::attach(|py| py.check_signals()) {
        Ok(()) => false,
        Err(error) => {
            // Asked no more in this call: the execution is stopping.
            WATCH.set(None);
            CAUGHT.set(Some(error));
            true
        }
    }
}

/// Drops `environment` on the thread that drops them all, started on first use (and
/// again in a child made by `fork`, which has no such thread), or here when it cannot be.
fn drop_later(environment: Movable) {
    static DROPPER: Mutex<Option<(u32, mpsc::Sender<Movable>)>> = Mutex::new(None);
    let mut dropper = lock(&DROPPER);
    let process = std::process::id();
    if dropper
        .as_ref()
        .is_none_or(|(made_in, _)| *made_in != process)
    {
        if let Some(inherited) = dropper.take() {
            // Forgotten, not dropped: the parent's thread is not in this process.
            std::mem::forget(inherited);
        }
        let (sender, receiver) = mpsc::channel::<Movable>();
        let started = std::thread::Builder::new()
            .name("rlm-environment-drop".to_string())
            .spawn(move || {
                for environment in receiver {
                    let _ = catch_unwind(AssertUnwindSafe(|| drop(environment)));
                }
            });
        if started.is_ok() {
            *dropper = Some((process, sender));
        }
    }
    let environment = match dropper.as_ref() {
        Some((_, sender)) => match sender.send(environment) {
            Ok(()) => return,
            Err(mpsc::SendError(environment)) => environment,
        },
        None => environment,
    };
    drop(dropper);
    let _ = catch_unwind(AssertUnwindSafe(|| drop(environment)));
}

/// A thread's turn at the environment; ends when dropped.
struct Claim<'a>(&'a AtomicBool);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// An environment claimed for a call that runs on another thread (`execute_async`); the
/// claim ends when it is dropped, run or not.
pub(crate) struct Reserved {
    cell: Arc<EnvCell>,
    fresh: Option<Interrupt>,
}

impl Reserved {
    /// Runs `work` on the environment on this thread, which holds no GIL and is not
    /// Python's main thread (no Ctrl-C watch: the caller's cancellation interrupts).
    pub(crate) fn run<R>(mut self, work: impl FnOnce(&Environment) -> R) -> PyResult<R> {
        let fresh = self.fresh.take();
        self.cell.run(fresh, false, work)
    }

    /// The environment's cell, to interrupt the call.
    pub(crate) fn cell(&self) -> &Arc<EnvCell> {
        &self.cell
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.cell.busy.store(false, Ordering::Release);
    }
}

/// The lock, also after a panic elsewhere while it was held: the data is plain.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Bytes of a Python `str` or `bytes` (immutable) read by a job, without a copy: the
/// caller borrows them from its argument and waits for the job.
pub(crate) struct Shared {
    pointer: *const u8,
    length: usize,
}

// SAFETY: the bytes are only read, by one call at a time, while the caller that borrowed
// them waits (`EnvCell::call` and `EnvCell::start` return only once the work has run).
unsafe impl Send for Shared {}

impl Shared {
    pub(crate) fn new(bytes: &[u8]) -> Shared {
        Shared {
            pointer: bytes.as_ptr(),
            length: bytes.len(),
        }
    }

    /// The bytes.
    ///
    /// # Safety
    /// The slice it was made from must still be alive: read it only inside the work of
    /// the call that made it.
    pub(crate) unsafe fn get(&self) -> &[u8] {
        // SAFETY: as the caller promises; pointer and length come from one slice.
        unsafe { std::slice::from_raw_parts(self.pointer, self.length) }
    }
}
