//! The thread an `Environment` lives on.
//!
//! The crate's `Environment` is not `Send`: its Lua state belongs to the thread that made
//! it, and so does the timer that enforces its limits (it signals that thread). Here each
//! environment gets a thread of its own, and every call from Python is a job handed to
//! it: any Python thread may use the environment, one at a time (a second one gets
//! `BusyError` at once, never a deadlock), and the caller waits with the GIL released,
//! so environments run Lua in parallel.
//!
//! While it waits, the caller checks for signals now and then: Ctrl-C interrupts the
//! execution (as a limit would stop it), and `KeyboardInterrupt` is raised once it has
//! ended. A panic in a job is caught on the environment's thread: the call raises
//! `InternalError`, and the environment is closed for good.
//!
//! A round trip is two hand-overs between threads. Each side first waits briefly by
//! yielding its core ([`BRIEF_WAIT`]), then blocks until the other answers: a thread
//! woken from blocking costs a wake-up each way, which the yielding side skips when the
//! answer comes soon (a short execution, or the next call of a caller in a loop), and
//! yielding, unlike spinning, leaves the core to the other side on a busy machine.
//! Spinning saved as much on a quiet machine but cost over 100 µs on a busy one, where
//! the spinning thread holds the core the other needs. A thread whose environment has
//! ended waits to serve the next one, so creating an environment seldom starts a
//! thread.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use rlm_registry::environment::{Environment, Interrupt};

use crate::errors::{BusyError, Failure, internal_error, panic_message};

/// Work for the environment's thread.
type Job = Box<dyn FnOnce(&Environment) + Send>;

/// How often a waiting caller looks for a signal (Ctrl-C).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);
/// How long either side of a hand-over polls, yielding its core, before it blocks.
const BRIEF_WAIT: Duration = Duration::from_micros(20);
/// Threads kept waiting for the next environment.
const MAX_IDLE_THREADS: usize = 16;

/// The environment's thread, and whether a Python thread is using it.
pub(crate) struct EnvThread {
    state: Mutex<State>,
    /// Set while a call runs: the second caller's check, with no waiting.
    busy: AtomicBool,
    /// The interrupt the environment's executions run under; replaced once used.
    interrupt: Mutex<Interrupt>,
}

struct State {
    jobs: Option<mpsc::Sender<Job>>,
    /// The process whose thread serves the environment: a child made by `fork` has no
    /// such thread, and must not wait for one.
    process: u32,
    /// Says when the environment has been dropped (the sender is dropped then).
    dropped: Option<mpsc::Receiver<()>>,
    /// Why the environment can no longer be used: closed, or a panic in it.
    ended: Option<Ended>,
}

#[derive(Clone)]
enum Ended {
    Closed,
    Panicked(String),
}

impl EnvThread {
    /// Starts the thread and builds the environment there with `build`; waits for it
    /// with the GIL released.
    pub(crate) fn start(
        py: Python<'_>,
        build: impl FnOnce() -> Result<Environment, Failure> + Send + 'static,
    ) -> PyResult<EnvThread> {
        let interrupt = Interrupt::new();
        let installed = interrupt.clone();
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, built) = mpsc::sync_channel::<Result<(), Failure>>(1);
        let (dropping, dropped) = mpsc::channel::<()>();
        let life: Life = Box::new(move || {
            let environment = match catch_unwind(AssertUnwindSafe(build)) {
                Ok(Ok(environment)) => environment,
                Ok(Err(failure)) => {
                    let _ = ready.send(Err(failure));
                    return;
                }
                Err(payload) => {
                    let _ = ready.send(Err(Failure::Panic(panic_message(payload.as_ref()))));
                    return;
                }
            };
            environment.set_interrupt(installed);
            let _ = ready.send(Ok(()));
            serve(environment, &queue);
            drop(dropping);
        });
        run_on_a_thread(life).map_err(|error| {
            crate::errors::RlmRegistryError::new_err(format!(
                "cannot start the environment's thread: {error}"
            ))
        })?;
        let started = py.detach(move || built.recv());
        match started {
            Ok(Ok(())) => Ok(EnvThread {
                state: Mutex::new(State {
                    jobs: Some(jobs),
                    process: std::process::id(),
                    dropped: Some(dropped),
                    ended: None,
                }),
                busy: AtomicBool::new(false),
                interrupt: Mutex::new(interrupt),
            }),
            Ok(Err(failure)) => Err(failure.into_pyerr(py)),
            Err(_) => Err(internal_error(
                "the environment's thread ended while starting",
            )),
        }
    }

    /// Runs `work` on the environment's thread and waits for it with the GIL released.
    pub(crate) fn call<R: Send + 'static>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&Environment) -> R + Send + 'static,
    ) -> PyResult<R> {
        let _claim = self.claim()?;
        let jobs = self.jobs()?;
        let fresh = self.fresh_interrupt();
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |environment| {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                if let Some(interrupt) = fresh {
                    environment.set_interrupt(interrupt);
                }
                work(environment)
            }));
            let _ = reply.send(outcome.map_err(|payload| panic_message(payload.as_ref())));
        });
        if jobs.send(job).is_err() {
            return Err(self.ended_error());
        }
        let mut signal = None;
        let mut answer = answer;
        let outcome = loop {
            // A receiver cannot be shared with the detached closure, only moved through.
            let (back, received) = py.detach(move || {
                let received = match briefly(|| answer.try_recv()) {
                    Some(Ok(outcome)) => Ok(outcome),
                    Some(Err(_)) => Err(RecvTimeoutError::Disconnected),
                    None => answer.recv_timeout(SIGNAL_CHECK),
                };
                (answer, received)
            });
            answer = back;
            match received {
                Ok(outcome) => break Some(outcome),
                Err(RecvTimeoutError::Timeout) => {
                    // Ctrl-C: stop the execution, then wait for it to end.
                    if signal.is_none()
                        && let Err(error) = py.check_signals()
                    {
                        self.interrupt();
                        signal = Some(error);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break None,
            }
        };
        match (outcome, signal) {
            (Some(Ok(_)), Some(signal)) => Err(signal),
            (Some(Ok(result)), None) => Ok(result),
            (Some(Err(message)), _) => {
                self.end(Ended::Panicked(message.clone()));
                Err(internal_error(&message))
            }
            (None, _) => Err(self.ended_error()),
        }
    }

    /// Stops the execution running now, if any, as a limit would (`limit` is
    /// `"interrupted"`); the next one runs normally.
    pub(crate) fn interrupt(&self) {
        lock(&self.interrupt).interrupt();
    }

    /// Ends the environment: its thread drops it, and this waits for that, with the GIL
    /// released. Closing twice is nothing.
    pub(crate) fn close(&self, py: Python<'_>) -> PyResult<()> {
        let _claim = self.claim()?;
        let dropped = {
            let mut state = lock(&self.state);
            state.jobs = None;
            state.ended.get_or_insert(Ended::Closed);
            state.dropped.take()
        };
        if let Some(dropped) = dropped {
            // Ends (disconnected) once the environment's thread has dropped it.
            let _ = py.detach(move || dropped.recv());
        }
        Ok(())
    }

    /// Whether the environment can no longer be used.
    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.state).ended.is_some()
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

    fn jobs(&self) -> PyResult<mpsc::Sender<Job>> {
        let state = lock(&self.state);
        if state.process != std::process::id() {
            return Err(crate::errors::RlmRegistryError::new_err(
                "this Environment belongs to the parent process: after fork, create a new one",
            ));
        }
        match (&state.jobs, &state.ended) {
            (Some(jobs), None) => Ok(jobs.clone()),
            (_, ended) => Err(ended_error(ended.clone().unwrap_or(Ended::Closed))),
        }
    }

    /// A new interrupt for the next execution when the one in place has been used.
    fn fresh_interrupt(&self) -> Option<Interrupt> {
        let mut interrupt = lock(&self.interrupt);
        interrupt.is_interrupted().then(|| {
            *interrupt = Interrupt::new();
            interrupt.clone()
        })
    }

    /// Ends the environment for `why`: no more jobs; its thread drops it.
    fn end(&self, why: Ended) {
        let mut state = lock(&self.state);
        state.jobs = None;
        state.ended = Some(why);
        state.dropped = None;
    }

    fn ended_error(&self) -> PyErr {
        let ended = lock(&self.state).ended.clone();
        ended_error(ended.unwrap_or(Ended::Panicked(
            "the environment's thread has ended".to_string(),
        )))
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

/// The environment's thread: runs the jobs in order until the sender is dropped (also
/// after a job panicked: no more are sent then), then drops the environment.
fn serve(environment: Environment, queue: &mpsc::Receiver<Job>) {
    loop {
        let job = match briefly(|| queue.try_recv()) {
            Some(Ok(job)) => job,
            Some(Err(_)) => break,
            None => match queue.recv() {
                Ok(job) => job,
                Err(_) => break,
            },
        };
        job(&environment);
    }
    // A drop that panics (after an earlier panic) must not end the thread.
    let _ = catch_unwind(AssertUnwindSafe(|| drop(environment)));
}

/// Polls `poll` for [`BRIEF_WAIT`], yielding the core between two polls: what it gave
/// (a value, or the other side gone), or `None` when nothing came in that time.
fn briefly<T>(
    poll: impl Fn() -> Result<T, mpsc::TryRecvError>,
) -> Option<Result<T, mpsc::TryRecvError>> {
    let started = Instant::now();
    loop {
        match poll() {
            Err(mpsc::TryRecvError::Empty) if started.elapsed() < BRIEF_WAIT => {
                std::thread::yield_now();
            }
            Err(mpsc::TryRecvError::Empty) => return None,
            other => return Some(other),
        }
    }
}

/// The whole life of one environment on its thread: built, serving, dropped.
type Life = Box<dyn FnOnce() + Send>;

/// Threads whose environment has ended, each waiting for the next one's life, and the
/// process they run in (after `fork`, the child has none of them).
static IDLE_THREADS: Mutex<(u32, Vec<mpsc::Sender<Life>>)> = Mutex::new((0, Vec::new()));

/// Runs `life` on an idle thread, or on a new one.
fn run_on_a_thread(life: Life) -> std::io::Result<()> {
    let idle = {
        let mut idle = lock(&IDLE_THREADS);
        if idle.0 != std::process::id() {
            // Forgotten, not dropped: a sender's drop may touch what a parent's thread
            // was doing when the process forked.
            std::mem::forget(std::mem::take(&mut idle.1));
            idle.0 = std::process::id();
        }
        idle.1.pop()
    };
    let life = match idle {
        Some(thread) => match thread.send(life) {
            Ok(()) => return Ok(()),
            Err(mpsc::SendError(life)) => life,
        },
        None => life,
    };
    std::thread::Builder::new()
        .name("rlm-environment".to_string())
        .spawn(move || {
            let (next, lives) = mpsc::channel::<Life>();
            let mut life = Some(life);
            while let Some(current) = life.take() {
                current();
                {
                    let mut idle = lock(&IDLE_THREADS);
                    if idle.0 != std::process::id() || idle.1.len() >= MAX_IDLE_THREADS {
                        return;
                    }
                    idle.1.push(next.clone());
                }
                life = lives.recv().ok();
            }
        })
        .map(drop)
}

/// A thread's turn at the environment; ends when dropped.
struct Claim<'a>(&'a AtomicBool);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
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

// SAFETY: the bytes are only read, by one job at a time, while the caller that borrowed
// them waits (`EnvThread::call` and `EnvThread::start` return only once the job has run
// or been dropped).
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
    /// The slice it was made from must still be alive: read it only inside a job of the
    /// call that made it.
    pub(crate) unsafe fn get(&self) -> &[u8] {
        // SAFETY: as the caller promises; pointer and length come from one slice.
        unsafe { std::slice::from_raw_parts(self.pointer, self.length) }
    }
}
