//! Where Lua runs: mlua's `Lua` is not `Send`, so every execution happens on a thread
//! that owns its state, never on the async runtime's workers. Stateless function calls
//! go to a pool of threads, each with its own [`ToolCaller`]; each session has a
//! dedicated thread owning its [`Environment`]. A semaphore caps the executions running
//! at once, and each one gets its own [`Interrupt`], fired when the request is cancelled.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{Semaphore, oneshot};
use tokio_util::sync::CancellationToken;

use super::state_dir::SessionJournal;
use crate::environment::{Environment, ExecError, Interrupt, Limits, OutputObserver, SetupError};
use crate::llm::Llm;
use crate::providers::StoreProvider;
use crate::rlm::Context;
use crate::tools::{CallError, ToolCaller};

/// Work for a thread that owns a Lua state.
type Job<T> = Box<dyn FnOnce(&T) + Send>;

/// Why an execution did not produce a result.
#[derive(Debug)]
pub enum RunError<E> {
    /// The execution failed (bad arguments, a Lua error, a limit).
    Failed(E),
    /// The thread that owns the Lua state is gone (the server is shutting down, or the
    /// state could not be created).
    Unavailable(String),
}

/// How a session's environment is built: its limits, its own `store` (at most this many
/// bytes; none without), the model behind `llm_query` (none: it fails saying so), and
/// the `context` it starts with.
///
/// ```
/// use rlm_registry::serve::SessionSetup;
/// let setup = SessionSetup { store_bytes: Some(1024), ..SessionSetup::default() };
/// assert!(setup.llm.is_none());
/// ```
#[derive(Clone, Default)]
pub struct SessionSetup {
    /// The limits of every execution.
    pub limits: Limits,
    /// A `store` provider of its own, holding at most this many bytes.
    pub store_bytes: Option<usize>,
    /// The model behind `llm_query`.
    pub llm: Option<Arc<dyn Llm>>,
    /// The model's context window, in tokens: a `llm_query` prompt that would not fit is
    /// not sent.
    pub context_window: Option<u64>,
    /// The global `context` every session starts with (`rlm serve --context`): gathered
    /// once, shared by the sessions, loaded into each without reading a file again.
    pub context: Option<Arc<Context>>,
}

/// Builds the sandboxed environment of a session (`run_lua`, `/v1/sessions`): the one
/// place a session's globals are decided.
///
/// ```
/// use std::sync::Arc;
/// use rlm_registry::{Registry, serve::{SessionSetup, session_environment}};
/// use rlm_registry::catalog::Catalog;
/// use rlm_registry::providers::{AgentScope, Providers};
///
/// let functions = Catalog::new(Registry::baked().clone(), Arc::new(Providers::builtin()), AgentScope::TOP);
/// let setup = SessionSetup { store_bytes: Some(1024), ..SessionSetup::default() };
/// let env = session_environment(&functions, &setup)?;
/// assert_eq!(env.execute("store_set('k', 2) print(1 + store_get('k'))")?.output, "3\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn session_environment(
    functions: &crate::catalog::Catalog,
    setup: &SessionSetup,
) -> Result<Environment, SetupError> {
    let mut providers = Arc::clone(functions.providers());
    if let Some(max_bytes) = setup.store_bytes {
        let mut own = (*providers).clone();
        if let Err(error) = own.register(StoreProvider::new(max_bytes)) {
            tracing::error!("the session store cannot be registered: {error}");
        }
        providers = Arc::new(own);
    }
    let mut builder = Environment::builder(Arc::clone(functions.registry()))
        .providers(providers)
        .scope(functions.scope())
        .limits(setup.limits);
    if let Some(llm) = &setup.llm {
        builder = builder.llm(Arc::clone(llm));
    }
    if let Some(window) = setup.context_window {
        builder = builder.context_window(window);
    }
    let environment = builder.build()?;
    if let Some(context) = &setup.context {
        context.load_into(&environment).map_err(|error| {
            SetupError::from(mlua::Error::runtime(format!(
                "cannot load the context: {error}"
            )))
        })?;
    }
    Ok(environment)
}

/// The threads stateless calls run on and the cap on concurrent executions.
pub struct Executor {
    permits: Arc<Semaphore>,
    threads: usize,
    pool: mpsc::Sender<Job<ToolCaller>>,
}

impl Executor {
    /// `threads` pool threads (and at most that many executions at once, sessions
    /// included), each calling `functions` in an environment built with `setup`.
    pub fn new(
        functions: &crate::catalog::Catalog,
        setup: SessionSetup,
        threads: usize,
    ) -> Executor {
        let threads = threads.max(1);
        let (sender, receiver) = mpsc::channel::<Job<ToolCaller>>();
        let receiver = Arc::new(Mutex::new(receiver));
        for index in 0..threads {
            let receiver = Arc::clone(&receiver);
            let functions = functions.clone();
            let setup = setup.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("rlm-call-{index}"))
                .spawn(move || {
                    serve_jobs(&receiver, || {
                        session_environment(&functions, &setup)
                            .map(|environment| ToolCaller::over(environment, false))
                    })
                });
            if let Err(error) = spawned {
                tracing::error!("cannot start a call thread: {error}");
            }
        }
        Executor {
            permits: Arc::new(Semaphore::new(threads)),
            threads,
            pool: sender,
        }
    }

    /// Executions running now (each holds one of the permits).
    pub fn running(&self) -> usize {
        self.threads - self.permits.available_permits()
    }

    /// Calls the registry function `name` with JSON `arguments` (checked against its
    /// schema by [`ToolCaller::call`]); cancelling `cancel` interrupts it.
    pub async fn call(
        &self,
        name: String,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, RunError<CallError>> {
        let sender = self.pool.clone();
        self.run(cancel, move |interrupt, reply| {
            let job: Job<ToolCaller> = Box::new(move |caller: &ToolCaller| {
                caller.environment().set_interrupt(interrupt);
                let _ = reply.send(caller.call(&name, &arguments));
            });
            sender.send(job).map_err(|_| ())
        })
        .await
    }

    /// Runs `code` in a session's environment (after setting `context` if given);
    /// `observer` sees its output as it is printed.
    pub async fn execute(
        &self,
        session: &SessionThread,
        code: String,
        context: Option<String>,
        observer: Option<OutputObserver>,
        cancel: &CancellationToken,
    ) -> Result<String, RunError<ExecError>> {
        // One execution per session at a time, in arrival order (the lock is fair): a
        // session never holds more than one of the shared permits.
        let _turn = tokio::select! {
            turn = session.turn.lock() => turn,
            () = cancel.cancelled() => {
                return Err(RunError::Unavailable("cancelled before it started".to_string()));
            }
        };
        let sender = session.sender.clone();
        self.run(cancel, move |interrupt, reply| {
            let job: Job<Environment> = Box::new(move |environment: &Environment| {
                environment.set_interrupt(interrupt);
                environment.set_output_observer(observer);
                let result = run_code(environment, &code, context.as_deref());
                // Dropping the observer here ends its stream before the answer goes out.
                environment.set_output_observer(None);
                let _ = reply.send(result);
            });
            sender.send(job).map_err(|_| ())
        })
        .await
    }

    /// Takes a permit, hands the job to its thread with a fresh [`Interrupt`], and waits
    /// for the answer; a cancellation fires the interrupt and still waits, so the
    /// thread is free again when this returns.
    async fn run<T, E>(
        &self,
        cancel: &CancellationToken,
        submit: impl FnOnce(Interrupt, oneshot::Sender<Result<T, E>>) -> Result<(), ()>,
    ) -> Result<T, RunError<E>> {
        let gone = || RunError::Unavailable("the execution thread is gone".to_string());
        let _permit = tokio::select! {
            permit = self.permits.acquire() => permit.map_err(|_| gone())?,
            () = cancel.cancelled() => {
                return Err(RunError::Unavailable("cancelled before it started".to_string()));
            }
        };
        let interrupt = Interrupt::new();
        let (reply, answer) = oneshot::channel();
        submit(interrupt.clone(), reply).map_err(|()| gone())?;
        // A request dropped mid-way (the client went away) stops its execution too.
        let on_drop = InterruptOnDrop(Some(interrupt.clone()));
        let answer = interruptible(answer, cancel, &interrupt).await;
        on_drop.disarm();
        answer.map_err(|_| gone())?.map_err(RunError::Failed)
    }
}

/// Interrupts the execution if dropped before [`InterruptOnDrop::disarm`].
struct InterruptOnDrop(Option<Interrupt>);

impl InterruptOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if let Some(interrupt) = &self.0 {
            interrupt.interrupt();
        }
    }
}

/// Awaits `answer`, interrupting the execution if `cancel` fires first.
async fn interruptible<F: Future + Unpin>(
    mut answer: F,
    cancel: &CancellationToken,
    interrupt: &Interrupt,
) -> F::Output {
    tokio::select! {
        biased;
        result = &mut answer => result,
        () = cancel.cancelled() => {
            interrupt.interrupt();
            answer.await
        }
    }
}

/// One pool thread: creates its state, then runs jobs until the sender is dropped.
fn serve_jobs<T, E: std::fmt::Display>(
    receiver: &Mutex<mpsc::Receiver<Job<T>>>,
    create: impl FnOnce() -> Result<T, E>,
) {
    let state = match create() {
        Ok(state) => state,
        Err(error) => {
            tracing::error!("cannot create a Lua state for a call thread: {error}");
            return;
        }
    };
    loop {
        // The lock is held only while waiting; a job runs without it.
        let job = match receiver.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => job(&state),
            Err(mpsc::RecvError) => return,
        }
    }
}

fn run_code(
    environment: &Environment,
    code: &str,
    context: Option<&str>,
) -> Result<String, ExecError> {
    if let Some(context) = context {
        // Logged, so that a session journal restores the code's context too.
        environment.set_context_logged(context)?;
    }
    environment.execute(code).map(|run| run.output)
}

/// The thread that owns one session's environment; dropping this ends the thread (and
/// the environment) once its queued jobs are done.
pub struct SessionThread {
    sender: mpsc::Sender<Job<Environment>>,
    turn: tokio::sync::Mutex<()>,
}

impl SessionThread {
    /// Starts the thread and creates the environment there.
    pub fn start(
        functions: &crate::catalog::Catalog,
        setup: SessionSetup,
        journal: Option<PathBuf>,
    ) -> Result<SessionThread, String> {
        let (sender, receiver) = mpsc::channel::<Job<Environment>>();
        let (ready, created) = mpsc::channel::<Result<(), String>>();
        let functions = functions.clone();
        std::thread::Builder::new()
            .name("rlm-session".to_string())
            .spawn(move || {
                let environment = match session_environment(&functions, &setup) {
                    Ok(environment) => environment,
                    Err(error) => {
                        let _ = ready.send(Err(error.to_string()));
                        return;
                    }
                };
                let mut journal = match journal.map(|p| SessionJournal::open(p, &environment)) {
                    Some(Err(error)) => {
                        let _ = ready.send(Err(error));
                        return;
                    }
                    Some(Ok(journal)) => Some(journal),
                    None => None,
                };
                let _ = ready.send(Ok(()));
                let _live = LiveSession::enter();
                // Jobs run in order: a session's results come back in the order sent.
                while let Ok(job) = receiver.recv() {
                    job(&environment);
                    if let Some(journal) = &mut journal {
                        journal.sync(&environment);
                    }
                }
                drop(environment);
            })
            .map_err(|error| format!("cannot start a session thread: {error}"))?;
        created
            .recv()
            .map_err(|_| "the session thread stopped while starting".to_string())??;
        Ok(SessionThread {
            sender,
            turn: tokio::sync::Mutex::new(()),
        })
    }
}

/// Session threads whose environment is alive.
static LIVE_SESSIONS: AtomicUsize = AtomicUsize::new(0);

/// Counts one live session thread; when the last one ends, the memory its environments
/// freed is handed back to the operating system, so a server idle after a burst of
/// sessions returns to its baseline (glibc otherwise keeps freed pages in each thread's
/// arena).
struct LiveSession;

impl LiveSession {
    fn enter() -> LiveSession {
        LIVE_SESSIONS.fetch_add(1, Ordering::AcqRel);
        LiveSession
    }
}

impl Drop for LiveSession {
    fn drop(&mut self) {
        if LIVE_SESSIONS.fetch_sub(1, Ordering::AcqRel) == 1 {
            crate::allocator::release_freed_memory();
        }
    }
}
