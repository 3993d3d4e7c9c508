//! What a built-in holds outside Lua counts against the memory limit before it is taken:
//! the peak memory of an `rlm exec` that hits the limit, read from the kernel as the
//! process is reaped (through a small launcher: `support::peak`).

use crate::support;

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

/// Runs `code` under a 64 MiB memory limit: it must end with `exit` and the process's
/// peak stay under 120 MiB, though the code asks for far more than that outside Lua.
fn ends_below_120_mib(code: &str, exit: i32) {
    ends_below(code, exit, 120);
}

fn ends_below(code: &str, exit: i32, mib: u64) {
    let mut command = rlm_command();
    command.args(["exec", "--memory-limit", "64", "--time-limit", "120", code]);
    let (status, peak_kib) = exit_and_peak_kib(command);
    assert_eq!(status, Some(exit), "`{code}`");
    assert!(peak_kib < mib * 1024, "`{code}`: peak {peak_kib} KiB");
}

/// A line of forty 8 MiB strings would be 320 MiB: `print` builds no more of it than the
/// output limit lets through.
#[test]
fn printing_a_huge_line_stops_at_the_output_limit_without_building_it() {
    ends_below_120_mib(
        "local s = string.rep('x', 8 * 2^20) local t = {} for i = 1, 40 do t[i] = s end print(table.unpack(t))",
        1,
    );
}

/// Encoding all of a 16 MiB text of 16 million tokens would hold twelve bytes per token
/// (a 330 MiB peak): `token_truncate` encodes the prefix it keeps, and `token_split` one
/// piece at a time. The tokenizer's own tables take about 60 MiB, hence 200.
#[test]
fn token_truncate_and_token_split_encode_only_what_they_need() {
    ends_below(
        "local s = string.rep('1a', 2^23) print(#token_truncate(s, 1), #token_split(s, 2^30))",
        0,
        200,
    );
}

/// One replacement per match, of a megabyte each, or a template repeating the whole
/// match: both `gsub`s check the memory limit before the result outgrows it.
#[test]
fn gsub_results_check_the_memory_limit_as_replacements_grow_them() {
    for code in [
        "print(pcall(re.gsub, string.rep('a', 4000), 'a', string.rep('x', 2^20)))",
        "print(pcall(string.gsub, string.rep('a', 1e4), '^.+', string.rep('%0', 3e5)))",
        "print(pcall(re.gsub, string.rep('a', 1e4), '^.+', string.rep('$0', 3e5)))",
    ] {
        limit_stops_it_below_120_mib(code);
    }
}

/// Parsing a regular expression holds about 80 bytes per byte of it: a pattern over
/// 256 KiB is refused before it is parsed.
#[test]
fn a_huge_regular_expression_is_refused_before_it_is_parsed() {
    ends_below_120_mib(
        "local ok, e = pcall(re.find, 'a', string.rep('a', 3e7)) assert(not ok and e:find('256 KiB'), e)",
        0,
    );
}

/// A message names a value, it never copies it: a 24 MiB option name or type name shows
/// its first bytes only.
#[test]
fn messages_show_only_the_start_of_a_huge_string() {
    ends_below_120_mib(
        "local k = string.rep('\\1', 2.5e7) local ok, e = pcall(json.encode, 1, {[k] = 1}) assert(#e < 1000, #e)
         local t = setmetatable({}, {__name = k}) ok, e = pcall(string.find, t, 'a') assert(#e < 1000, #e)",
        0,
    );
}

/// A row's width is its largest position: `{[2^40] = 1}` is a trillion empty fields,
/// which count against the memory limit as they are written (checked every megabyte of
/// them, so the text may double once past the limit before the check: 200, not 120).
#[test]
fn a_sparse_row_counts_its_empty_fields_as_they_are_written() {
    ends_below("print(pcall(csv.encode, {{[2^40] = 1}}))", 1, 200);
}

/// The children of `rlm_query_batched` run on threads, so their prompts are copied out
/// of Lua: three hundred references to one 10 MB string are checked before they are.
#[test]
fn batched_prompts_are_checked_before_they_are_copied_out_of_lua() {
    limit_stops_it_below_120_mib(
        "local s = string.rep('x', 1e7) local t = {} for i = 1, 300 do t[i] = s end print(pcall(rlm_query_batched, t))",
    );
}
