//! What the benchmarks share: settings from the environment, a deterministic generator
//! for their inputs, and running the Python reference beside them.

#![allow(dead_code)]

use std::process::Command;

use rlm_registry::allocator;

/// The `rlm` binary's allocator, so that the figures are the binary's.
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

/// The number in the environment variable `name`, or `default`.
pub fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A xorshift generator with a fixed seed: `next(n)` is in `0..n`, the same sequence on
/// every run, so every run measures the same input.
pub fn generator() -> impl FnMut(u64) -> u64 {
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    }
}

/// What `python3 -c script args…` prints, or `None` (said on stderr) when it fails or
/// there is no `python3`.
pub fn python(script: &str, args: &[&std::ffi::OsStr]) -> Option<String> {
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .ok()?;
    if !output.status.success() {
        eprintln!(
            "python3 failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A sandbox with the baked registry and `context` set to `text`, under limits no
/// benchmark reaches (10 minutes, 16 GiB): the operations are timed, not stopped.
pub fn sandbox(text: &str) -> rlm_registry::environment::Environment {
    use rlm_registry::environment::{Environment, Limits};
    allocator::configure();
    let limits = Limits {
        time: std::time::Duration::from_secs(600),
        memory_bytes: 16 << 30,
        ..Limits::default()
    };
    let env =
        Environment::new(rlm_registry::Registry::baked().clone(), limits).expect("environment");
    env.set_context(text).expect("context");
    env
}
