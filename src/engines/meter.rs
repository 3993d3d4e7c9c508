//! Counting the work a text function does against the execution's limits ([`WorkMeter`]), and
//! building the sequences of strings those functions return in one protected call. Shared
//! by the text primitives (`text.rs`) and the `re` built-in (`re.rs`), below both.
//!
//! Every raw pass that builds a large result pauses the collector through one function,
//! [`with_collector_paused`]: it restarts the collector with the result's size as credit
//! (a cycle begun at once would mark the result while it is still held, and it would
//! outlive that cycle as garbage), and charges the paused allocations when a later pass
//! starts, once they are at least half the rest of the heap, as Lua paces its own cycles
//! (restarting the collector would otherwise forget them, and garbage would pile up).

use std::ffi::c_int;

use mlua::{Lua, Table, ffi};

use super::limits::Guard;

/// Bytes scanned between two checks of the limits: a check costs tens of nanoseconds,
/// scanning a MiB a few dozen microseconds, so a runaway scan stops within a millisecond.
pub(crate) const CHECK_BYTES: usize = 1 << 20;
/// What one value put in a result table counts for against [`CHECK_BYTES`].
pub(crate) const VALUE_COST: usize = 64;

/// Counts the work done and checks the limits every [`CHECK_BYTES`] of it.
pub(crate) struct WorkMeter<'a> {
    lua: &'a Lua,
    guard: &'a Guard,
    done: usize,
    /// Bytes the caller holds outside Lua's allocator, counted with Lua's memory.
    held: usize,
}

impl<'a> WorkMeter<'a> {
    pub(crate) fn new(lua: &'a Lua, guard: &'a Guard) -> Self {
        WorkMeter {
            lua,
            guard,
            done: 0,
            held: 0,
        }
    }

    /// Records `work` bytes' worth of work, checking the limits when enough has been done.
    #[inline]
    pub(crate) fn spend(&mut self, work: usize) -> mlua::Result<()> {
        self.done += work;
        if self.done >= CHECK_BYTES {
            self.done = 0;
            return self.check();
        }
        Ok(())
    }

    /// Records that the caller now holds `bytes` outside Lua.
    pub(crate) fn hold(&mut self, bytes: usize) {
        self.held = bytes;
    }

    /// Checks the limits now.
    pub(crate) fn check(&self) -> mlua::Result<()> {
        self.check_holding(self.held)
    }

    /// Checks the limits now, before a buffer outside Lua (`length` bytes used of
    /// `capacity`) takes `more` bytes, when `more` is large enough to matter before the
    /// next periodic check: a writer about to copy one long string checks first, rather
    /// than after taking several times the limit. A `Vec` written piece by piece grows by
    /// doubling, so the capacity it may reach is the power of two above what it needs.
    pub(crate) fn check_growth(
        &self,
        length: usize,
        capacity: usize,
        more: usize,
    ) -> mlua::Result<()> {
        if more < CHECK_BYTES {
            return Ok(());
        }
        let needed = length.saturating_add(more);
        if needed <= capacity {
            return Ok(());
        }
        let grown = needed
            .checked_next_power_of_two()
            .unwrap_or(usize::MAX)
            .max(capacity.saturating_mul(2));
        self.check_holding(grown)
    }

    /// Checks the limits now, with `held` bytes held outside Lua (a matcher's own count).
    pub(crate) fn check_holding(&self, held: usize) -> mlua::Result<()> {
        self.guard
            .check(self.lua.used_memory().saturating_add(held))
    }
}

/// A sequence of strings built in one protected call: mlua's per-value calls cost more
/// than copying a short line, and `lines(context)` makes a million of them. The limits
/// are checked as it goes; an allocation past the memory limit fails as any other.
/// `expected` pieces are made room for up front. The collector pauses meanwhile: every
/// piece is kept, so a collection would only walk the growing table again and again
/// (allocations are still counted against the memory limit).
pub(crate) fn string_sequence<'t>(
    lua: &Lua,
    pieces: impl Iterator<Item = &'t [u8]>,
    expected: usize,
    meter: &mut WorkMeter,
) -> mlua::Result<Table> {
    optional_string_sequence(lua, pieces.map(Some), expected, meter)
}

/// [`string_sequence`] where a missing piece is `false`.
pub(crate) fn optional_string_sequence<'t>(
    lua: &Lua,
    pieces: impl Iterator<Item = Option<&'t [u8]>>,
    expected: usize,
    meter: &mut WorkMeter,
) -> mlua::Result<Table> {
    let expected = std::ffi::c_int::try_from(expected).unwrap_or(0);
    // SAFETY: `fill` pushes one table and only strings and booleans into it.
    unsafe {
        table_in_one_call(lua, |state| {
            ffi::lua_createtable(state, expected, 0);
            for (n, piece) in pieces.enumerate() {
                match piece {
                    Some(piece) => {
                        ffi::lua_pushlstring(state, piece.as_ptr().cast(), piece.len());
                    }
                    None => ffi::lua_pushboolean(state, 0),
                }
                ffi::lua_rawseti(state, -2, n as ffi::lua_Integer + 1);
                meter.spend(piece.map_or(0, <[u8]>::len) + VALUE_COST)?;
            }
            Ok(())
        })
    }
}

/// Runs `work` with the collector paused, when `pause` and it is running: what a raw pass
/// builds is all kept, so a collection meanwhile would only walk the growing result again
/// and again (allocations still count against the memory limit).
///
/// Restarting the collector clears its debt, so it would fall behind by every paused
/// allocation: the garbage of earlier calls would pile up, and each new result would take
/// fresh pages from the kernel (the same `grep` on 100 MB three times over: 223, 747, 752
/// ms, the heap growing by 500 MB a call). So what paused calls allocated is charged to
/// the collector, in one step, when a later one starts: the step sweeps the garbage
/// before the new result is built (which then reuses its memory). As Lua paces itself (a
/// cycle once the heap has doubled), the charge waits until that allocation is at least
/// half the rest of the heap: a small result beside a large live heap (`most_common` of
/// a count, with a million rows held) would otherwise pay a whole cycle each time.
///
/// Restarting with no debt would also start a cycle at the next allocation, while the new
/// result is still held: the cycle would mark every value of it, and it would outlive
/// that cycle as garbage (a quarter of a dense `grep`'s time). So the collector restarts
/// with the result's size as credit, as if a cycle had just ended with it live, and the
/// charge covers that credit too.
pub(crate) fn with_collector_paused<R>(lua: &Lua, pause: bool, work: impl FnOnce() -> R) -> R {
    if !pause || !lua.gc_is_running() {
        return work();
    }
    if let Some(due) = due_charge(lua) {
        move_collector_debt(lua, kib(due));
    }
    let before = lua.used_memory();
    lua.gc_stop();
    let result = work();
    lua.gc_restart();
    let grown = lua.used_memory().saturating_sub(before);
    move_collector_debt(lua, -kib(grown));
    match lua.app_data_mut::<PausedAllocation>() {
        Some(mut paused) => {
            paused.owed = paused.owed.saturating_add(grown);
            paused.credit = grown;
        }
        None => {
            lua.set_app_data(PausedAllocation {
                owed: grown,
                credit: grown,
            });
        }
    }
    result
}

/// What paused calls allocated and the collector has not been charged for.
#[derive(Default)]
struct PausedAllocation {
    /// Bytes allocated while paused since the last charge.
    owed: usize,
    /// The credit the last restart gave, which a charge takes back.
    credit: usize,
}

/// The debt to charge now, if the paused allocation owed is at least half the rest of
/// the heap (see [`with_collector_paused`]); it is then no longer owed.
fn due_charge(lua: &Lua) -> Option<usize> {
    let used = lua.used_memory();
    let mut paused = lua.app_data_mut::<PausedAllocation>()?;
    let rest = used.saturating_sub(paused.owed);
    if paused.owed == 0 || paused.owed < rest / 2 {
        return None;
    }
    let charged = std::mem::take(&mut *paused);
    Some(charged.owed.saturating_add(charged.credit))
}

/// `bytes` in KiB, as `lua_gc` counts a step, at most `c_int::MAX`.
fn kib(bytes: usize) -> c_int {
    c_int::try_from(bytes / 1024).unwrap_or(c_int::MAX)
}

/// Moves the collector's debt by `kib` KiB. A positive move lets it work the debt off at
/// once (a full cycle, for a debt as large as a result); a negative one is credit: Lua
/// steps only when its debt is positive, so none runs until as much has been allocated.
fn move_collector_debt(lua: &Lua, kib: c_int) {
    if kib != 0 {
        // SAFETY: the step runs inside this protected call; what it could raise (nothing
        // but a finalizer's error, which Lua 5.4 turns into a warning) is ignored: the
        // collection is bookkeeping, not part of the caller's result.
        let _ = unsafe {
            lua.exec_raw::<()>((), |state| {
                ffi::lua_gc(state, ffi::LUA_GCSTEP, kib);
            })
        };
    }
}

/// The table `fill` pushes, built in one protected call with the collector paused (see
/// [`with_collector_paused`]). An `Err` from `fill` (a limit the meter tripped) stops it
/// and is returned once the collector runs again.
///
/// # Safety
/// `fill` must push exactly one table, and only values that own nothing on the Rust side
/// (strings, numbers, booleans, tables of them): if an allocation fails, Lua unwinds past
/// it.
pub(crate) unsafe fn table_in_one_call(
    lua: &Lua,
    fill: impl FnOnce(*mut ffi::lua_State) -> mlua::Result<()>,
) -> mlua::Result<Table> {
    let mut filled = Ok(());
    // SAFETY: as the caller promises of `fill`.
    let table = with_collector_paused(lua, true, || unsafe {
        lua.exec_raw::<Table>((), |state| filled = fill(state))
    });
    let table = table?;
    filled.map(|()| table)
}
