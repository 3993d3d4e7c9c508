//! What a built-in holds outside Lua counts against the memory limit before it is taken:
//! the peak memory of an `rlm exec` that hits the limit, read from the kernel as the
//! process is reaped. A test binary of its own: a child's peak counts its parent's
//! memory at the time it was started, which the other tests' large inputs would fill.

mod support;

use support::cli::rlm_command;
use support::peak::exit_and_peak_kib;

/// Escaped, a control byte takes six: `json.encode` checks the memory limit before it
/// escapes a long string, rather than holding several times the limit outside Lua first.
#[test]
fn encoding_a_long_string_checks_the_memory_limit_before_escaping_it() {
    let mut command = rlm_command();
    command.args([
        "exec",
        "--memory-limit",
        "64",
        "local s = string.rep('\\1', 25 * 2^20) print(pcall(json.encode, s))",
    ]);
    let (code, peak_kib) = exit_and_peak_kib(command);
    assert_eq!(code, Some(1), "the memory limit stops the execution");
    // 25 MiB of text, escaped to 150 MiB, would have been held before the check.
    assert!(peak_kib < 120 * 1024, "peak {peak_kib} KiB");
}

/// Quoted, a field of quotes doubles: `csv.encode` checks the memory limit before it
/// writes a long field, rather than holding several times the limit outside Lua first.
#[test]
fn encoding_a_long_field_checks_the_memory_limit_before_writing_it() {
    let mut command = rlm_command();
    command.args([
        "exec",
        "--memory-limit",
        "64",
        "local s = string.rep('\"', 20 * 2^20) print(pcall(csv.encode, {{s, s, s, s}}))",
    ]);
    let (code, peak_kib) = exit_and_peak_kib(command);
    assert_eq!(code, Some(1), "the memory limit stops the execution");
    // Four fields of 20 MiB, each quoted to 40 MiB, would have been held by the writer.
    assert!(peak_kib < 120 * 1024, "peak {peak_kib} KiB");
}
