//! How the limits reach Lua code while it runs: the limits hook, and when it runs.
//!
//! Lua checks nothing by itself while it runs a loop; a count hook does, every n
//! instructions. But while a count hook is installed, Lua's VM calls into its hook
//! machinery before *every* instruction (`luaG_traceexec`), which makes plain Lua code
//! half again as slow: a loop of `string.find` calls ran at 0.6× unsandboxed C Lua with
//! one, nearly all of the difference.
//!
//! So on Linux the environment's main state runs with no hook. While an execution runs,
//! a POSIX timer sends the executing thread a signal every millisecond; its handler
//! installs a one-shot count hook on the state ([`lua_sethook`] is what Lua's own `lua.c`
//! calls from its `SIGINT` handler, and what it is made safe to call for), and the hook
//! checks the limits and removes itself. The VM notices a hook set this way at its next
//! jump or call, so a loop without either still cannot escape it.
//!
//! The timer is armed lazily: an execution starts with a one-shot count hook
//! ([`FIRST_CHECK`] instructions), and only when that fires (the code is more than a few
//! microseconds of Lua) does the hook arm the timer and let the tick's signal through.
//! Arming and disarming a timer are system calls that cost more than a short execution
//! itself (a REPL turn that sets a variable); the count hook's cost is bounded by those
//! first instructions. The engines outside the VM check the deadline themselves, so a
//! long call into one (a huge `string.rep`, a pattern) needs no tick to be stopped.
//!
//! Coroutines keep a count hook for their whole life, set when `coroutine.create` or
//! `coroutine.wrap` makes them: a coroutine runs while its creator waits, and only the
//! main state is armed by the timer. No Lua state of the environment runs unchecked: the
//! coroutines of `parallel` and `parallel_map` are made by the same `coroutine.create`.
//!
//! Elsewhere (no such timers), or where the signal cannot be had (the host has its own
//! handler for it), the main state keeps a count hook too, as coroutines do.
//!
//! A blocking call out of Lua (a model, a child agent, a host function, the user) holds
//! the signal back ([`hold_ticks`]), so that none of its system calls is interrupted; a
//! tick that came meanwhile is delivered when the call returns.
//!
//! The timer belongs to the executing thread, not to the environment (one per thread,
//! made on the thread's first execution, deleted when the thread ends): an environment
//! may run on one thread and then another, as the Python package runs each call on its
//! caller's thread. An execution nested in another's host call on the same thread (a
//! child agent's) finds the timer already ticking and leaves it so.
//!
//! [`lua_sethook`]: mlua::ffi::lua_sethook

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::ptr;

use mlua::{Function, Lua, ffi};

use super::limits::Tripwire;

/// Instructions between two checks where a count hook stays installed: small enough to
/// stop within a fraction of a millisecond, large enough to cost little beside the
/// per-instruction cost of having a hook at all.
const HOOK_INTERVAL: c_int = 1_000;

/// Instructions an execution runs before its first check, which arms the timer: about
/// the cost of arming it, a few microseconds of Lua run with the count hook's overhead.
const FIRST_CHECK: c_int = 1_000;

/// Where the registry keeps the tripwire the hook checks (the address is the key).
static TRIPWIRE_KEY: u8 = 0;

thread_local! {
    /// The main state of the execution running on this thread, which the tick arms.
    /// A plain `Cell` of a pointer: the signal handler reads it.
    static RUNNING: Cell<*mut ffi::lua_State> = const { Cell::new(ptr::null_mut()) };
}

/// Prepares a new state: the tripwire where the hook finds it, coroutines created with
/// their hook, and a count hook on the main state where no timer will arm it.
///
/// `tripwire` must outlive the state (the environment holds both, the state dropped
/// first).
pub(crate) fn install(lua: &Lua, tripwire: &Tripwire) -> mlua::Result<()> {
    let pointer = ptr::from_ref(tripwire).cast_mut().cast::<c_void>();
    // SAFETY: `exec_raw` runs the closure on a valid state, protected.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            ffi::lua_pushlightuserdata(state, pointer);
            ffi::lua_rawsetp(state, ffi::LUA_REGISTRYINDEX, tripwire_key());
        })?;
    }
    let coroutine: mlua::Table = lua.globals().get("coroutine")?;
    for name in ["create", "wrap"] {
        let original: Function = coroutine.get(name)?;
        // SAFETY: as above; the closure takes the original function as its upvalue.
        let hooked: Function = unsafe {
            lua.exec_raw(original, |state| {
                ffi::lua_pushcclosure(state, create_hooked, 1);
            })?
        };
        coroutine.raw_set(name, hooked)?;
    }
    if !timer::available() {
        // SAFETY: the main state, on its own thread, outside any execution.
        unsafe { lua.exec_raw::<()>((), |state| keep_hook(main_state(state)))? };
    }
    Ok(())
}

fn tripwire_key() -> *const c_void {
    ptr::addr_of!(TRIPWIRE_KEY).cast()
}

/// The main thread of `state`'s Lua universe.
///
/// # Safety
/// `state` must be a valid Lua state with a free stack slot.
unsafe fn main_state(state: *mut ffi::lua_State) -> *mut ffi::lua_State {
    unsafe {
        ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, ffi::LUA_RIDX_MAINTHREAD);
        let main = ffi::lua_tothread(state, -1);
        ffi::lua_pop(state, 1);
        main
    }
}

/// Installs the count hook for good on `state` (until an execution resets it).
///
/// # Safety
/// `state` must be a valid Lua state.
unsafe fn keep_hook(state: *mut ffi::lua_State) {
    unsafe { ffi::lua_sethook(state, Some(limits_hook), ffi::LUA_MASKCOUNT, HOOK_INTERVAL) };
}

/// The hook: checks the limits, then removes itself if the timer put it there (the main
/// state of the running execution); once a limit has tripped it stays, raising the
/// limit's error every [`HOOK_INTERVAL`] instructions until the execution has unwound.
unsafe extern "C-unwind" fn limits_hook(state: *mut ffi::lua_State, _: *mut ffi::lua_Debug) {
    unsafe {
        ffi::lua_rawgetp(state, ffi::LUA_REGISTRYINDEX, tripwire_key());
        let tripwire = ffi::lua_touserdata(state, -1)
            .cast::<Tripwire>()
            .cast_const();
        ffi::lua_pop(state, 1);
        let Some(tripwire) = tripwire.as_ref() else {
            return;
        };
        let depth_reached = |depth: usize| {
            let mut frame: ffi::lua_Debug = std::mem::zeroed();
            let level = c_int::try_from(depth).unwrap_or(c_int::MAX);
            ffi::lua_getstack(state, level, &mut frame) != 0
        };
        if tripwire
            .check_with_depth(lua_memory(state), depth_reached)
            .is_ok()
        {
            // The running execution's main state: its ticks arm the next check (started
            // now, at its first check); where they cannot be had, the hook stays.
            if RUNNING.get() == state && timer::ticking() {
                ffi::lua_sethook(state, None, 0, 0);
            }
            return;
        }
        keep_hook(state);
        let kind = tripwire.tripped().unwrap_or(super::LimitKind::Time);
        let message = kind.message(&tripwire.limits);
        ffi::lua_pushlstring(state, message.as_ptr().cast(), message.len());
        // `lua_error` does not return: nothing of this frame may need dropping.
        drop(message);
        ffi::lua_error(state);
    }
}

/// The bytes Lua has allocated, as its collector counts them.
///
/// # Safety
/// `state` must be a valid Lua state.
unsafe fn lua_memory(state: *mut ffi::lua_State) -> usize {
    unsafe {
        let kilobytes = ffi::lua_gc(state, ffi::LUA_GCCOUNT, 0);
        let bytes = ffi::lua_gc(state, ffi::LUA_GCCOUNTB, 0);
        usize::try_from(kilobytes).unwrap_or(0) * 1024 + usize::try_from(bytes).unwrap_or(0)
    }
}

/// `coroutine.create` / `coroutine.wrap` (the original in upvalue 1), giving the new
/// coroutine its count hook: a coroutine created by the code runs under it for life.
unsafe extern "C-unwind" fn create_hooked(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        // Checked here, so the message names the function the code called, as Lua's.
        ffi::luaL_checktype(state, 1, ffi::LUA_TFUNCTION);
        ffi::lua_settop(state, 1);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_rotate(state, 1, 1);
        ffi::lua_call(state, 1, 1);
        // `create` gives the coroutine; `wrap` a function holding it as upvalue 1.
        let coroutine = if ffi::lua_type(state, 1) == ffi::LUA_TTHREAD {
            ffi::lua_tothread(state, 1)
        } else if !ffi::lua_getupvalue(state, 1, 1).is_null() {
            let thread = ffi::lua_tothread(state, -1);
            ffi::lua_pop(state, 1);
            thread
        } else {
            ptr::null_mut()
        };
        if !coroutine.is_null() {
            keep_hook(coroutine);
        }
        1
    }
}

/// An execution running on this thread: the state to arm recorded, its first check
/// due, the timer armed then. Dropped when the execution ends, it restores what was
/// there (an execution may run inside another's host call: a child agent's).
pub(crate) struct Running {
    previous: *mut ffi::lua_State,
    ticks: timer::Ticks,
}

impl Running {
    /// Starts checking the limits of an execution on `lua`'s main state: its first check
    /// after [`FIRST_CHECK`] instructions, which starts this thread's ticks when there
    /// are any.
    pub(crate) fn start(lua: &Lua) -> Running {
        let mut main = ptr::null_mut();
        // SAFETY: the main state is read on its own thread; outside any execution of it.
        let _ = unsafe { lua.exec_raw::<()>((), |state| main = main_state(state)) };
        let ticks = timer::Ticks::due();
        // SAFETY: `main` is the environment's live main state, on its own thread.
        unsafe { ffi::lua_sethook(main, Some(limits_hook), ffi::LUA_MASKCOUNT, FIRST_CHECK) };
        let previous = RUNNING.replace(main);
        Running { previous, ticks }
    }

    /// Stops the ticks before the execution ends, the count hook installed instead (a
    /// limit has tripped: the code still to run must get its few instructions).
    pub(crate) fn stop_ticks(&mut self, lua: &Lua) {
        self.ticks.stop();
        stop_everything(lua);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.ticks.stop();
        self.ticks.restore();
        RUNNING.set(self.previous);
    }
}

/// Makes Lua code on this state stop at its next instruction: the hook, installed for
/// good, raises the tripwire's error (which must be tripped, as by `halt`).
pub(crate) fn stop_everything(lua: &Lua) {
    // SAFETY: the main state, on its own thread.
    let _ = unsafe { lua.exec_raw::<()>((), |state| keep_hook(main_state(state))) };
}

/// Holds the tick signal back while `work` runs: a blocking call out of Lua (the network,
/// a child process, the terminal) is not interrupted by it. A tick that comes meanwhile
/// waits, and arms the hook when Lua runs again.
pub(crate) fn hold_ticks<R>(work: impl FnOnce() -> R) -> R {
    let _held = timer::Held::new();
    work()
}

#[cfg(target_os = "linux")]
mod timer {
    //! The tick: a POSIX timer per thread, sending the thread a real-time signal every
    //! millisecond of an execution on it.

    use std::cell::Cell;
    use std::ffi::c_int;
    use std::mem::MaybeUninit;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::RUNNING;

    /// Between two ticks: the limits' resolution, short beside any time limit, long
    /// beside the few microseconds a tick costs.
    const TICK_NANOS: i64 = 1_000_000;

    /// The signal of the tick: a real-time signal well inside the range, away from both
    /// ends where other libraries tend to take theirs.
    fn signal() -> c_int {
        libc::SIGRTMIN() + 7
    }

    /// Whether the handler is installed (once per process; not where the host has a
    /// handler of its own for the signal).
    pub(super) fn available() -> bool {
        static INSTALLED: OnceLock<bool> = OnceLock::new();
        *INSTALLED.get_or_init(install_handler) && handler_is_ours()
    }

    fn install_handler() -> bool {
        // SAFETY: sigaction with zeroed, then filled, plain-data structures.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal(), std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                return false;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_tick as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
            libc::sigaction(signal(), &action, std::ptr::null_mut()) == 0
        }
    }

    /// Whether the signal still reaches [`on_tick`] (a host may install its own later).
    fn handler_is_ours() -> bool {
        // SAFETY: sigaction reading into a zeroed structure.
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal(), std::ptr::null(), &mut current) == 0
                && current.sa_sigaction == on_tick as *const () as libc::sighandler_t
        }
    }

    /// The signal handler: installs the one-shot count hook on the running main state.
    /// Async-signal-safe: it reads a thread-local pointer and calls `lua_sethook`.
    extern "C" fn on_tick(_: c_int) {
        let state = RUNNING.get();
        if !state.is_null() {
            // SAFETY: `RUNNING` holds the executing environment's live main state, on
            // this thread; `lua_sethook` is made to be called from a signal handler.
            unsafe {
                mlua::ffi::lua_sethook(state, Some(super::limits_hook), mlua::ffi::LUA_MASKCOUNT, 1)
            };
        }
    }

    thread_local! {
        /// This thread's timer, made on its first execution (`None`: it could not be).
        static TIMER: Cell<Option<Timer>> = const { Cell::new(None) };
        /// Whether the timer is ticking (for the outer execution, when they nest).
        static TICKING: Cell<bool> = const { Cell::new(false) };
        /// Where the running execution on this thread is with its ticks.
        static PHASE: Cell<Phase> = const { Cell::new(Phase::Idle) };
    }

    /// Where one execution is with its ticks.
    #[derive(Clone, Copy)]
    enum Phase {
        /// No execution on this thread.
        Idle,
        /// Started; its first check (the count hook) not yet come.
        Due,
        /// Ticking from its first check on: the timer it armed (none when an outer
        /// execution's ticks), and the signal mask to put back (the tick was held back,
        /// by the host call this execution runs in).
        Ticking {
            armed: Option<libc::timer_t>,
            mask: Option<libc::sigset_t>,
        },
        /// Without ticks: ended, stopped, or none to be had (the count hook stays).
        Unticked,
    }

    /// Whether the running execution on this thread has its ticks, starting them if its
    /// first check is now: the hook removes itself when so.
    pub(super) fn ticking() -> bool {
        match PHASE.get() {
            Phase::Ticking { .. } => true,
            Phase::Idle | Phase::Unticked => false,
            Phase::Due => {
                let phase = start_ticking();
                PHASE.set(phase);
                matches!(phase, Phase::Ticking { .. })
            }
        }
    }

    /// Arms this thread's timer unless it ticks already, and lets the tick through.
    fn start_ticking() -> Phase {
        let Some(timer) = available().then(this_threads_timer).flatten() else {
            return Phase::Unticked;
        };
        let armed = (!TICKING.replace(true)).then_some(timer);
        if armed.is_some() {
            set_timer(timer, TICK_NANOS);
        }
        let before = change_mask(libc::SIG_UNBLOCK);
        // SAFETY: `before` is a set filled by `pthread_sigmask`.
        let held = unsafe { libc::sigismember(&before, signal()) } == 1;
        Phase::Ticking {
            armed,
            mask: held.then_some(before),
        }
    }

    /// One execution's ticks: due at its first check, stopped when it ends.
    pub(crate) struct Ticks {
        /// The phase of the execution this one runs inside, if any.
        outer: Phase,
    }

    impl Ticks {
        /// A new execution on this thread, its first check due.
        pub(super) fn due() -> Ticks {
            Ticks {
                outer: PHASE.replace(Phase::Due),
            }
        }

        /// Stops the ticks this execution started (none if its first check has not come).
        pub(super) fn stop(&mut self) {
            if let Phase::Ticking { armed, mask } = PHASE.replace(Phase::Unticked) {
                if let Some(timer) = armed {
                    set_timer(timer, 0);
                    TICKING.set(false);
                }
                if let Some(mask) = mask {
                    // SAFETY: restores the mask read when the ticks started.
                    unsafe {
                        libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut())
                    };
                }
            }
        }

        /// Gives the outer execution (if any) its phase back.
        pub(super) fn restore(&mut self) {
            PHASE.set(self.outer);
        }
    }

    /// Forks of this process so far, as the child counts them: a child inherits no
    /// timer, so a thread's timer made before is not the child's.
    static FORKS: AtomicU64 = AtomicU64::new(0);

    extern "C" fn after_fork_in_child() {
        FORKS.fetch_add(1, Ordering::Relaxed);
    }

    /// This thread's timer, made now if the thread has none in this process.
    fn this_threads_timer() -> Option<libc::timer_t> {
        let forks = FORKS.load(Ordering::Relaxed);
        let kept = TIMER.take();
        let timer = match kept {
            Some(timer) if timer.forks == forks => Some(timer),
            Some(inherited) => {
                // The parent's: not deleted here, where its id may be another timer's.
                std::mem::forget(inherited);
                Timer::new(forks)
            }
            None => Timer::new(forks),
        };
        let id = timer.as_ref().map(|timer| timer.id);
        TIMER.set(timer);
        id
    }

    /// A POSIX timer signalling one thread.
    struct Timer {
        id: libc::timer_t,
        /// [`FORKS`] when it was made.
        forks: u64,
    }

    impl Timer {
        /// A timer signalling this thread.
        fn new(forks: u64) -> Option<Timer> {
            // SAFETY: plain-data structures; the thread id is this thread's.
            unsafe {
                let mut event: libc::sigevent = std::mem::zeroed();
                event.sigev_notify = libc::SIGEV_THREAD_ID;
                event.sigev_signo = signal();
                event.sigev_notify_thread_id = libc::gettid();
                let mut id = MaybeUninit::<libc::timer_t>::uninit();
                (libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, id.as_mut_ptr()) == 0).then(
                    || Timer {
                        id: id.assume_init(),
                        forks,
                    },
                )
            }
        }
    }

    impl Drop for Timer {
        fn drop(&mut self) {
            // SAFETY: the id came from `timer_create` and is deleted once.
            unsafe { libc::timer_delete(self.id) };
        }
    }

    fn set_timer(id: libc::timer_t, nanos: i64) {
        let every = libc::timespec {
            tv_sec: 0,
            tv_nsec: nanos,
        };
        let spec = libc::itimerspec {
            it_interval: every,
            it_value: every,
        };
        // SAFETY: a live timer id and a plain-data spec.
        unsafe { libc::timer_settime(id, 0, &spec, std::ptr::null_mut()) };
    }

    /// The signal set of the tick alone.
    fn tick_set() -> libc::sigset_t {
        // SAFETY: a zeroed set, then filled by the libc calls meant for it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal());
            set
        }
    }

    fn change_mask(how: c_int) -> libc::sigset_t {
        let set = tick_set();
        // SAFETY: plain-data sets; this thread's mask.
        unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(how, &set, &mut old);
            old
        }
    }

    /// The tick held back on this thread until dropped.
    pub(super) struct Held(Option<libc::sigset_t>);

    impl Held {
        pub(super) fn new() -> Held {
            Held(available().then(|| change_mask(libc::SIG_BLOCK)))
        }
    }

    impl Drop for Held {
        fn drop(&mut self) {
            if let Some(mask) = &self.0 {
                // SAFETY: restores the mask read when the hold began.
                unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut()) };
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod timer {
    //! No tick here: every state keeps its count hook.

    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn ticking() -> bool {
        false
    }

    pub(crate) struct Ticks;

    impl Ticks {
        pub(super) fn due() -> Ticks {
            Ticks
        }

        pub(super) fn stop(&mut self) {}

        pub(super) fn restore(&mut self) {}
    }

    pub(super) struct Held;

    impl Held {
        pub(super) fn new() -> Held {
            Held
        }
    }
}
