//! A bound for work that either finishes quickly or hangs: long enough that no slow or
//! loaded machine reaches it, so a test using it fails on a hang and never on speed.
//! Speed is for the benchmarks.

use std::sync::mpsc;
use std::time::Duration;

/// How long work that takes well under a second when it works may take.
pub const HANG_BOUND: Duration = Duration::from_secs(60);

/// Runs `work` on a thread of its own and returns what it returns (or panics as it
/// panicked); fails the test, naming `what`, if it is not done within [`HANG_BOUND`].
pub fn finishes<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = done.send(work());
    });
    match result.recv_timeout(HANG_BOUND) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: still running after {HANG_BOUND:?}, so it hangs")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends its result before it ends"),
        },
    }
}
