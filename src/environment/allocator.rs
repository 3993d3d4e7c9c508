//! The allocator for programs that run environments: Lua allocates every value through
//! Rust's global allocator, and a large context makes millions of small ones (`lines` on
//! 100 MB makes 1.5 million strings; a dense `grep` a table, a string and two tables per
//! matching line). glibc's malloc spends a fifth of such a call merging free chunks, and
//! hands freed pages back to the kernel only to fault them in again for the next result.
//! mimalloc keeps freed memory for reuse a while instead. The `rlm` binary and the
//! benchmarks install it:
//!
//! ```
//! use rlm_registry::environment::allocator;
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

use std::ffi::c_int;

/// mimalloc, to install as the `#[global_allocator]`; [`configure`] it first thing.
pub use mimalloc::MiMalloc as Allocator;

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
/// rlm_registry::environment::allocator::configure();
/// ```
pub fn configure() {
    // SAFETY: options may be set at any time, from any thread; 0 is a valid value.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DECOMMITS, 0) }
}

/// Hands memory freed and unused back to the operating system now (mimalloc's and
/// glibc's, whichever holds it): for a server whose last session has just ended.
///
/// ```
/// rlm_registry::environment::allocator::release_freed_memory();
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
