//! What a built-in holds outside Lua counts against the memory limit before it is taken:
//! the peak memory of an `rlm exec` that hits the limit, read from the kernel as the
//! process is reaped. A test binary of its own: a child's peak counts its parent's
//! memory at the time it was started, which the other tests' large inputs would fill.

mod support;

use support::cli::rlm_command;
use support::peak::exit_and_peak_kib;

/// Runs `code` under a 64 MiB memory limit: the limit must stop it, and the process's
/// peak stay under 120 MiB.
fn limit_stops_it_below_120_mib(code: &str) {
    let mut command = rlm_command();
    command.args(["exec", "--memory-limit", "64", code]);
    let (exit, peak_kib) = exit_and_peak_kib(command);
    assert_eq!(exit, Some(1), "the memory limit stops the execution");
    assert!(peak_kib < 120 * 1024, "peak {peak_kib} KiB");
}

/// Escaped, a control byte takes six: `json.encode` checks the memory limit before it
/// escapes a long string, rather than holding several times the limit outside Lua first
/// (25 MiB of text, escaped to 150 MiB, took a 220 MiB peak).
#[test]
fn encoding_a_long_string_checks_the_memory_limit_before_escaping_it() {
    limit_stops_it_below_120_mib(
        "local s = string.rep('\\1', 25 * 2^20) print(pcall(json.encode, s))",
    );
}

/// Quoted, a field of quotes doubles: `csv.encode` checks the memory limit before it
/// writes a long field, rather than holding several times the limit outside Lua first
/// (four fields of 20 MiB, each quoted to 40 MiB, took a 225 MiB peak).
#[test]
fn encoding_a_long_field_checks_the_memory_limit_before_writing_it() {
    limit_stops_it_below_120_mib(
        "local s = string.rep('\"', 20 * 2^20) print(pcall(csv.encode, {{s, s, s, s}}))",
    );
}
