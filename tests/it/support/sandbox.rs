//! A sandboxed environment holding the baked registry, and code run in it as a model's.

use rlm_registry::Registry;
use rlm_registry::environment::{Environment, ExecError, LimitKind, Limits};

/// `limits` with five minutes of time, for a test whose work (a million-row table, a
/// memory limit reached by doubling) takes more than the default 30 s in a debug build on
/// a loaded machine: what such a test checks is not the time.
pub fn patient(limits: Limits) -> Limits {
    Limits {
        time: std::time::Duration::from_secs(300),
        ..limits
    }
}

/// A fresh environment with the baked registry under `limits`.
pub fn env(limits: Limits) -> Environment {
    Environment::new(Registry::baked().clone(), limits).unwrap()
}

/// Whether `error` is the limit `kind` stopping the execution.
pub fn is_limit(error: &ExecError, kind: LimitKind) -> bool {
    matches!(error, ExecError::Limit { kind: hit, .. } if *hit == kind)
}

/// What `code` prints; a failure fails the test, naming the code.
pub fn output(env: &Environment, code: &str) -> String {
    env.execute(code)
        .unwrap_or_else(|e| panic!("`{code}`: {e}"))
        .output
}

/// The message of the error `code` raises, caught by `pcall`: it must be a string.
pub fn caught(env: &Environment, code: &str) -> String {
    let run = format!(
        "local ok, e = pcall(function() {code} end) assert(not ok, 'no error') assert(type(e) == 'string', type(e)) print(e)"
    );
    output(env, &run).trim_end().to_string()
}

/// [`caught`] without the caller's position (`input:1: `) the message starts with.
pub fn caught_here(env: &Environment, code: &str) -> String {
    let message = caught(env, code);
    let (position, rest) = message.split_once(": ").expect("a position");
    assert!(position.starts_with("input:"), "{message}");
    rest.to_string()
}
