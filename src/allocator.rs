//! The allocator for programs that run environments: Lua allocates every value through
//! Rust's global allocator, and a large context makes millions of small ones (`lines` on
//! 100 MB makes 1.5 million strings; a dense `grep` a table, a string and two tables per
//! matching line). glibc's malloc spends a fifth of such a call merging free chunks, and
//! hands freed pages back to the kernel only to fault them in again for the next result.
//! mimalloc keeps freed memory for reuse a while instead. The `rlm` binary and the
//! benchmarks install it:
//!
//! ```
//! use rlm_registry::allocator;
//!
//! #[global_allocator]
//! static ALLOCATOR: allocator::Allocator = allocator::Allocator;
//!
//! fn main() {
//!     allocator::configure();
//!     // …
//! }
//! ```
//!
//! A program that keeps its own allocator loses nothing but speed: nothing here depends
//! on which allocator is installed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use mimalloc::MiMalloc;

/// The global allocator to install: mimalloc, or the system's from the moment
/// [`use_system_allocator`] is called. [`configure`] it first thing.
///
/// Every block is freed by the allocator that made it (mimalloc knows its own, through
/// its page map), so the choice may change while blocks are live.
pub struct Allocator;

/// Whether new blocks come from the system's allocator.
static SYSTEM: AtomicBool = AtomicBool::new(false);

/// Makes every later allocation the system's: for a long-running server, where glibc
/// hands freed memory back to the OS when asked ([`release_freed_memory`]) and mimalloc,
/// which keeps it per thread and in 2 MiB pages, stayed 27 MiB above its baseline after a
/// burst of sessions (glibc: within 7 MiB).
///
/// ```
/// use rlm_registry::allocator;
///
/// #[global_allocator]
/// static ALLOCATOR: allocator::Allocator = allocator::Allocator;
///
/// fn main() {
///     let mut before = vec![1u8; 1000]; // mimalloc's
///     allocator::use_system_allocator();
///     let after = vec![2u8; 1000]; // the system's
///     before.resize(100_000, 3); // moved to the system's allocator, its bytes kept
///     assert_eq!(&before[..1000], &[1u8; 1000][..]);
///     assert_eq!((before[99_999], after[999]), (3, 2));
/// }
/// ```
pub fn use_system_allocator() {
    SYSTEM.store(true, Ordering::Release);
}

/// Whether mimalloc made the block at `pointer`. Until [`use_system_allocator`], every
/// block is mimalloc's, and the page map is not even looked at.
fn from_mimalloc(pointer: *mut u8) -> bool {
    !SYSTEM.load(Ordering::Acquire)
        // SAFETY: a lookup in mimalloc's page map; any address may be asked about.
        || unsafe { libmimalloc_sys::mi_is_in_heap_region(pointer.cast()) }
}

// SAFETY: each call goes to mimalloc or to the system's allocator, both `GlobalAlloc`s;
// a block is always freed or resized by the one that made it, and a block moved between
// them is copied and freed by its maker.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promises.
        unsafe {
            if SYSTEM.load(Ordering::Acquire) {
                System.alloc(layout)
            } else {
                MiMalloc.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promises.
        unsafe {
            if SYSTEM.load(Ordering::Acquire) {
                System.alloc_zeroed(layout)
            } else {
                MiMalloc.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: as the caller promises; the block's maker frees it.
        unsafe {
            if from_mimalloc(pointer) {
                MiMalloc.dealloc(pointer, layout)
            } else {
                System.dealloc(pointer, layout)
            }
        }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let mimalloc_made = from_mimalloc(pointer);
        // SAFETY: as the caller promises; a block stays with its maker while that is
        // still the allocator in use, else it moves: the new block holds the old bytes
        // (as many as both have) before the old one is freed.
        unsafe {
            match (mimalloc_made, SYSTEM.load(Ordering::Acquire)) {
                (true, false) => MiMalloc.realloc(pointer, layout, new_size),
                (false, true) => System.realloc(pointer, layout, new_size),
                _ => {
                    let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                    let moved = self.alloc(new_layout);
                    if !moved.is_null() {
                        std::ptr::copy_nonoverlapping(pointer, moved, layout.size().min(new_size));
                        self.dealloc(pointer, layout);
                    }
                    moved
                }
            }
        }
    }
}

/// `mi_option_purge_decommits` (mimalloc.h), which the `-sys` crate does not name. Its
/// place in `mi_option_e` is fixed: mimalloc keeps retired options in place, renamed
/// `deprecated_…`, so that the numbers stay.
const PURGE_DECOMMITS: c_int = 5;

/// Sets mimalloc's options for environments; call it first thing in `main`. It changes
/// nothing when mimalloc is not the global allocator.
///
/// Memory freed and unused for a second (mimalloc's default delay) is purged. A purge that
/// decommits (`MADV_DONTNEED`, the default) makes the next large result fault every page
/// in again: after a dozen 100 MB results, `table.concat` of 10 MB took 70 ms instead of
/// 30 ms. So purges only reset (`MADV_FREE`): the kernel takes the pages back when it
/// needs them, and until then they are reused for nothing. [`release_freed_memory`] still
/// decommits.
///
/// ```
/// rlm_registry::allocator::configure();
/// ```
pub fn configure() {
    // SAFETY: options may be set at any time, from any thread; 0 is a valid value.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DECOMMITS, 0) }
}

/// Hands memory freed and unused back to the operating system now (mimalloc's and
/// glibc's, whichever holds it): for a server whose last session has just ended.
///
/// ```
/// rlm_registry::allocator::release_freed_memory();
/// ```
pub fn release_freed_memory() {
    // SAFETY: options may be set at any time; a forced collection only frees what the
    // heaps hold free and purges free pages (decommitting them, this once); it takes no
    // pointer.
    unsafe {
        let decommits = libmimalloc_sys::mi_option_get(PURGE_DECOMMITS);
        libmimalloc_sys::mi_option_set(PURGE_DECOMMITS, 1);
        libmimalloc_sys::mi_collect(true);
        libmimalloc_sys::mi_option_set(PURGE_DECOMMITS, decommits);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free; it takes no
    // pointer and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purges_decommit() -> std::ffi::c_long {
        // SAFETY: reading an option is safe at any time.
        unsafe { libmimalloc_sys::mi_option_get(PURGE_DECOMMITS) }
    }

    #[test]
    fn configure_turns_decommitting_purges_off_and_release_leaves_them_off() {
        assert_eq!(purges_decommit(), 1, "mimalloc's documented default");
        configure();
        assert_eq!(purges_decommit(), 0);
        release_freed_memory();
        assert_eq!(purges_decommit(), 0);
    }
}
