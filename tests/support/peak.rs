//! A child process's peak memory, as the kernel counts it: for checks that a built-in
//! keeps to the memory limit in what it holds outside Lua, which the limit's own error
//! cannot show (it comes either way, before or after the memory is taken).

use std::process::{Command, Stdio};

/// Runs `command` to its end with its output discarded; its exit code (`None` when a
/// signal ended it) and its peak resident set in KiB (`ru_maxrss`).
// The child is reaped by `wait4`, which std's `wait` would not let read its usage.
#[allow(clippy::zombie_processes)]
pub fn exit_and_peak_kib(mut command: Command) -> (Option<i32>, u64) {
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the command starts");
    let pid = libc::pid_t::try_from(child.id()).expect("a pid");
    let mut status = 0;
    // SAFETY: `rusage` is plain data, zeroes a valid value of it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is this process's own child, not yet reaped (std reaps a child only
    // when asked to wait for it); the pointers are to live locals.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4 reaps the child");
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, u64::try_from(usage.ru_maxrss).unwrap_or(0))
}
