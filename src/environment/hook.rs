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
            if RUNNING.get() == state && timer::available() {
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

/// An execution running on this thread: the timer armed, the state to arm recorded, the
/// tick signal let through. Dropped when the execution ends, it restores what was there
/// (an execution may run inside another's host call: a child agent's).
pub(crate) struct Running {
    previous: *mut ffi::lua_State,
    ticks: Option<timer::Ticks>,
}

impl Running {
    /// Starts checking the limits of an execution on `lua`'s main state, with `timer`
    /// (made on first use, per environment) when there is one.
    pub(crate) fn start(lua: &Lua, timer: &timer::Slot) -> Running {
        let mut main = ptr::null_mut();
        // SAFETY: the main state is read on its own thread; outside any execution of it.
        let _ = unsafe { lua.exec_raw::<()>((), |state| main = main_state(state)) };
        let ticks = timer.ticks();
        // SAFETY: `main` is the environment's live main state, on its own thread.
        unsafe {
            match ticks {
                Some(_) => ffi::lua_sethook(main, None, 0, 0),
                None => keep_hook(main),
            }
        }
        let previous = RUNNING.replace(main);
        Running { previous, ticks }
    }
}

impl Running {
    /// Stops the ticks before the execution ends, the count hook installed instead (a
    /// limit has tripped: the code still to run must get its few instructions).
    pub(crate) fn stop_ticks(&mut self, lua: &Lua) {
        drop(self.ticks.take());
        stop_everything(lua);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.ticks.take());
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
    //! The tick: a POSIX timer per environment, sending the thread running it a real-time
    //! signal every millisecond of an execution.

    use std::cell::OnceCell;
    use std::ffi::c_int;
    use std::mem::MaybeUninit;
    use std::sync::OnceLock;

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

    /// An environment's timer, made on its first execution (on the thread that owns it).
    #[derive(Default)]
    pub(crate) struct Slot(OnceCell<Option<Timer>>);

    impl Slot {
        /// The timer armed for one execution, or `None` where there are no ticks.
        pub(super) fn ticks(&self) -> Option<Ticks> {
            if !available() {
                return None;
            }
            let timer = self.0.get_or_init(Timer::new).as_ref()?;
            timer.set(TICK_NANOS);
            Some(Ticks {
                timer: timer.id,
                mask: unblocked(),
            })
        }
    }

    /// A POSIX timer signalling one thread.
    struct Timer {
        id: libc::timer_t,
    }

    impl Timer {
        fn new() -> Option<Timer> {
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
                    },
                )
            }
        }

        fn set(&self, nanos: i64) {
            set_timer(self.id, nanos);
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

    /// The timer running for one execution, and the signal mask before it began.
    pub(crate) struct Ticks {
        timer: libc::timer_t,
        mask: libc::sigset_t,
    }

    impl Drop for Ticks {
        fn drop(&mut self) {
            set_timer(self.timer, 0);
            // SAFETY: restores the mask read by `unblocked`.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.mask, std::ptr::null_mut()) };
        }
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

    /// Lets the tick through on this thread (an execution inside a host call, where it is
    /// held back, must still be checked); the mask before.
    fn unblocked() -> libc::sigset_t {
        change_mask(libc::SIG_UNBLOCK)
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

    #[derive(Default)]
    pub(crate) struct Slot;

    impl Slot {
        pub(super) fn ticks(&self) -> Option<Ticks> {
            None
        }
    }

    pub(crate) struct Ticks;

    pub(super) struct Held;

    impl Held {
        pub(super) fn new() -> Held {
            Held
        }
    }
}

pub(crate) use timer::Slot as TimerSlot;
