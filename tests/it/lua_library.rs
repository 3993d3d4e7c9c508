//! Runs the Lua library's own tests (`tests/lua/*_test.lua`) against the baked registry.
//!
//! Every test gets a fresh `mlua::Lua` state into which every chunk of
//! `Registry::baked()` is loaded in order, exactly as the environment will do; then a
//! small prelude defines the assertion helpers (`check`, `check_error`, `show`) and the
//! Lua test file is evaluated. Each test file returns a table of name → function; each
//! entry is one Rust `#[test]` below, so a failure is named after the behaviour it
//! checks. `every_lua_test_has_a_rust_test` keeps both lists in sync.

#![cfg(all(feature = "text", feature = "chunking"))]

use std::collections::BTreeSet;
use std::path::PathBuf;

use mlua::{Function, Lua, Table, Value};
use rlm_registry::Registry;

/// Assertion helpers shared by the Lua test files, defined as globals: the same
/// prelude `rlm test` gives examples and test files.
const PRELUDE: &str = include_str!("../../src/testing/prelude.lua");

/// A fresh Lua state with every chunk of the baked registry loaded, in order.
fn lua_with_library() -> Lua {
    let lua = Lua::new();
    for chunk in Registry::baked().chunks() {
        lua.load(chunk.source())
            .set_name(chunk.file())
            .exec()
            .unwrap_or_else(|e| panic!("loading {} failed:\n{e}", chunk.file()));
    }
    lua
}

fn lua_test_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/lua")
        .join(file)
}

/// Loads the library, the prelude and `tests/lua/<file>`; returns the state and the
/// file's table of tests.
fn load_tests(file: &str) -> (Lua, Table) {
    let lua = lua_with_library();
    lua.load(PRELUDE)
        .set_name("=prelude")
        .exec()
        .unwrap_or_else(|e| panic!("the test prelude failed:\n{e}"));
    let path = lua_test_path(file);
    let source = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let tests = lua
        .load(source)
        .set_name(format!("@tests/lua/{file}"))
        .eval::<Table>()
        .unwrap_or_else(|e| panic!("tests/lua/{file} did not return a table of tests:\n{e}"));
    (lua, tests)
}

/// Runs the Lua test `name` of `tests/lua/<file>` in a fresh state.
fn run(file: &str, name: &str) {
    let (_lua, tests) = load_tests(file);
    let test = match tests.get::<Value>(name) {
        Ok(Value::Function(test)) => test,
        other => panic!("tests/lua/{file} has no test function named {name:?} (got {other:?})"),
    };
    if let Err(e) = test.call::<()>(()) {
        panic!("Lua test {name} (tests/lua/{file}) failed:\n{e}");
    }
}

/// Runs the Lua test `name` of `tests/lua/<file>` in the sandbox, where the library
/// calls the Rust text primitives instead of its pure-Lua code: both must pass the same
/// tests.
#[cfg(feature = "runtime")]
fn run_in_sandbox(file: &str, name: &str) {
    use rlm_registry::environment::{Environment, Limits};
    let env = Environment::new(Registry::baked().clone(), Limits::default())
        .unwrap_or_else(|e| panic!("no environment: {e}"));
    env.execute(PRELUDE)
        .unwrap_or_else(|e| panic!("the test prelude failed in the sandbox:\n{e}"));
    let path = lua_test_path(file);
    let source = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    // A long bracket whose level does not occur in the source quotes it verbatim.
    let level = (0..)
        .map(|n| "=".repeat(n))
        .find(|eq| !source.contains(&format!("]{eq}]")))
        .unwrap_or_default();
    let load =
        format!("lua_tests = assert(load([{level}[\n{source}]{level}], '@tests/lua/{file}'))()");
    env.execute(&load)
        .unwrap_or_else(|e| panic!("tests/lua/{file} did not load in the sandbox:\n{e}"));
    if let Err(e) = env.execute(&format!("lua_tests.{name}()")) {
        panic!("Lua test {name} (tests/lua/{file}) failed in the sandbox:\n{e}");
    }
}

#[cfg(not(feature = "runtime"))]
fn run_in_sandbox(_file: &str, _name: &str) {}

/// Asserts that the Lua file's tests are exactly the ones with a Rust `#[test]`.
fn check_names(file: &str, rust_names: &[&str]) {
    let (_lua, tests) = load_tests(file);
    let mut lua_names = BTreeSet::new();
    for pair in tests.pairs::<String, Function>() {
        let (name, _) = pair.unwrap_or_else(|e| panic!("tests/lua/{file}: bad entry: {e}"));
        lua_names.insert(name);
    }
    let rust_names: BTreeSet<String> = rust_names.iter().map(|s| s.to_string()).collect();
    let missing: Vec<_> = lua_names.difference(&rust_names).collect();
    let stale: Vec<_> = rust_names.difference(&lua_names).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "tests/lua/{file} and tests/it/lua_library.rs disagree:\n  Lua tests without a Rust #[test]: {missing:?}\n  Rust #[test]s without a Lua test: {stale:?}"
    );
}

/// One `#[test]` per Lua test function, in a module named after the Lua file; with
/// `sandbox: true` each also runs in the sandbox (the Rust primitives' path).
macro_rules! lua_tests {
    ($module:ident, $file:literal, sandbox: $sandbox:literal, [$($name:ident),* $(,)?]) => {
        mod $module {
            const FILE: &str = $file;

            $(
                #[test]
                fn $name() {
                    super::run(FILE, stringify!($name));
                    if $sandbox {
                        super::run_in_sandbox(FILE, stringify!($name));
                    }
                }
            )*

            #[test]
            fn every_lua_test_has_a_rust_test() {
                super::check_names(FILE, &[$(stringify!($name)),*]);
            }
        }
    };
}

lua_tests!(
    text,
    "text_test.lua",
    sandbox: true,
    [
        lines_of_empty_text_is_empty,
        lines_splits_on_newline,
        lines_ignores_a_single_trailing_newline,
        lines_keeps_blank_lines,
        lines_of_a_lone_newline_is_one_empty_line,
        lines_strips_crlf_terminators,
        lines_keeps_a_carriage_return_inside_a_line,
        line_count_of_empty_text_is_zero,
        line_count_ignores_a_trailing_newline,
        line_count_counts_crlf_lines_once,
        line_count_agrees_with_lines,
        line_range_selects_an_inclusive_range,
        line_range_defaults_last_to_the_last_line,
        line_range_counts_negative_bounds_from_the_end,
        line_range_clamps_out_of_range_bounds,
        line_range_is_empty_when_first_is_after_last,
        line_range_of_empty_text_is_empty,
        line_range_joins_crlf_lines_with_lf,
        head_defaults_to_ten_lines,
        head_returns_the_first_n_lines,
        head_with_n_beyond_the_text_returns_every_line,
        head_with_zero_or_negative_n_is_empty,
        head_of_empty_text_is_empty,
        head_joins_crlf_lines_with_lf,
        tail_defaults_to_ten_lines,
        tail_returns_the_last_n_lines,
        tail_ignores_a_trailing_newline,
        tail_with_n_beyond_the_text_returns_every_line,
        tail_with_zero_or_negative_n_is_empty,
        tail_of_empty_text_is_empty,
        grep_returns_line_numbers_and_text_of_matches,
        grep_without_matches_returns_an_empty_table,
        grep_of_empty_text_is_empty,
        grep_uses_lua_patterns_by_default,
        grep_plain_matches_magic_characters_literally,
        grep_reports_malformed_patterns,
        grep_anchors_apply_to_each_line,
        grep_context_gives_lines_before_and_after,
        grep_context_is_clamped_at_the_text_boundaries,
        grep_gives_each_match_its_own_full_context,
        grep_matches_crlf_lines_without_the_carriage_return,
        grep_text_formats_matches_and_context_lines,
        grep_text_without_matches_is_empty,
        grep_text_separates_non_adjacent_groups_with_dashes,
        grep_text_separates_non_adjacent_matches_without_context,
        grep_text_joins_adjacent_matches_without_separator,
        grep_text_merges_touching_groups_without_separator,
        grep_text_merges_overlapping_context_without_repeating_lines,
        grep_text_marks_a_match_inside_earlier_context_as_a_match,
        grep_text_clamps_context_at_the_text_boundaries,
        grep_text_plain_matches_magic_characters_literally,
        find_all_returns_byte_positions_of_every_occurrence,
        find_all_reports_overlapping_occurrences,
        find_all_treats_the_needle_as_plain_text,
        find_all_without_occurrences_is_empty,
        find_all_reports_byte_offsets_in_utf8_text,
        find_all_rejects_an_empty_needle,
        word_count_of_empty_or_blank_text_is_zero,
        word_count_splits_on_any_whitespace,
        word_count_counts_punctuation_runs_as_words,
        word_count_counts_utf8_words,
        char_count_of_empty_text_is_zero,
        char_count_counts_ascii_characters,
        char_count_counts_utf8_characters_not_bytes,
        char_count_counts_invalid_utf8_byte_by_byte,
        doc_list_reads_every_kind_of_context,
        counts_of_a_corpus_are_totals,
        grep_of_a_corpus_says_where_each_match_is,
        one_text_functions_refuse_a_corpus,
    ]
);

lua_tests!(
    chunking,
    "chunking_test.lua",
    sandbox: true,
    [
        chunk_by_lines_of_empty_text_is_empty,
        chunk_by_lines_groups_n_lines_per_chunk,
        chunk_by_lines_exact_multiple_has_no_empty_last_chunk,
        chunk_by_lines_with_n_beyond_the_text_gives_one_chunk,
        chunk_by_lines_ignores_trailing_newline_and_crlf,
        chunk_by_lines_keeps_blank_lines,
        chunk_by_lines_without_overlap_covers_every_line_once,
        chunk_by_lines_overlap_repeats_the_last_lines_of_the_previous_chunk,
        chunk_by_lines_overlap_stops_at_the_last_line,
        chunk_by_lines_rejects_n_below_one,
        chunk_by_lines_rejects_overlap_outside_zero_to_n,
        chunk_by_separator_splits_on_the_separator,
        chunk_by_separator_drops_empty_pieces,
        chunk_by_separator_of_empty_text_is_empty,
        chunk_by_separator_without_separator_in_text_returns_the_whole_text,
        chunk_by_separator_treats_the_separator_as_plain_text,
        chunk_by_separator_splits_on_a_multi_character_separator,
        chunk_by_separator_merges_pieces_up_to_max_size,
        chunk_by_separator_merge_counts_separator_bytes,
        chunk_by_separator_keeps_an_oversized_piece_whole,
        chunk_by_separator_merge_skips_dropped_empty_pieces,
        chunk_by_separator_rejects_an_empty_separator,
        chunk_by_size_of_empty_text_is_empty,
        chunk_by_size_cuts_ascii_into_fixed_size_pieces,
        chunk_by_size_text_shorter_than_size_is_one_chunk,
        chunk_by_size_exact_multiple_has_no_empty_last_chunk,
        chunk_by_size_counts_bytes_not_characters,
        chunk_by_size_keeps_crlf_bytes_verbatim,
        chunk_by_size_never_cuts_a_multibyte_character,
        chunk_by_size_overlap_repeats_bytes_of_the_previous_chunk,
        chunk_by_size_overlap_never_starts_inside_a_character,
        chunk_by_size_overlap_always_makes_progress,
        chunk_by_size_keeps_every_byte_of_invalid_utf8,
        chunk_by_size_rejects_size_below_four,
        chunk_by_size_rejects_overlap_outside_zero_to_half_size,
        argument_errors_blame_the_caller,
        chunks_of_a_corpus_stay_within_their_document,
    ]
);

/// Names the library exposes; all must be global functions once the chunks are loaded.
const PUBLIC: &[&str] = &[
    "lines",
    "doc_list",
    "line_count",
    "line_range",
    "head",
    "tail",
    "grep",
    "grep_text",
    "find_all",
    "word_count",
    "char_count",
    "chunk_by_lines",
    "chunk_by_separator",
    "chunk_by_size",
    "map_chunks",
    "map_reduce",
    "find_in_chunks",
];

#[test]
fn private_helpers_stay_private() {
    let lua = lua_with_library();
    let globals = lua.globals();
    for helper in [
        "each_line",
        "collect_matches",
        "utf8_safe_end",
        "chunk_prompt",
        "combine_prompt",
        "key_function",
        "compare",
        "numbers_of",
        "check_string",
        "parse_iso",
        "civil_from_days",
    ] {
        let value: Value = globals.get(helper).unwrap();
        assert!(
            value.is_nil(),
            "private helper {helper} leaked into the globals as a {}",
            value.type_name()
        );
    }
    let registry_names = Registry::baked().iter_functions().map(|(name, _)| name);
    for name in PUBLIC.iter().copied().chain(registry_names) {
        let value: Value = globals.get(name).unwrap();
        assert!(
            value.is_function(),
            "registry function {name} is a {} global, not a function",
            value.type_name()
        );
    }
}

lua_tests!(
    recursive,
    "recursive_test.lua",
    // These replace llm_query_batched, which the sandbox does not allow.
    sandbox: false,
    [
        map_chunks_asks_every_chunk_in_one_batch,
        map_chunks_of_nothing_makes_no_call,
        map_reduce_combines_partial_answers_with_one_more_call,
        map_reduce_of_one_chunk_needs_no_combining,
        find_in_chunks_keeps_chunks_answered_yes,
    ]
);

#[cfg(feature = "collections")]
lua_tests!(
    collections,
    "collections_test.lua",
    sandbox: true,
    [
        count_counts_equal_items,
        count_by_counts_keys_of_a_function_or_a_field,
        count_by_counts_utf8_keys,
        count_and_count_by_reject_bad_arguments,
        most_common_orders_by_count_then_item,
        most_common_rejects_bad_arguments,
        group_by_keeps_items_in_order_per_key,
        group_by_rejects_bad_arguments,
        sort_by_sorts_by_a_key_function_or_field,
        sort_by_is_stable_in_both_directions,
        sort_by_keeps_equal_integer_or_string_keys_in_order_both_ways,
        sort_by_reverses_for_any_true_value_as_lua_tests_it,
        sort_by_orders_numbers_then_strings_then_lists,
        sort_by_with_a_tuple_key_sorts_on_several_fields,
        sort_by_does_not_change_its_input,
        sort_by_rejects_bad_keys_naming_the_item,
        unique_keeps_first_occurrences_in_order,
        map_applies_a_function_or_picks_a_field_in_either_order,
        filter_keeps_items_for_which_fn_is_truthy,
        reduce_folds_with_or_without_an_initial_value,
        map_filter_reduce_reject_bad_arguments,
        keys_and_values_follow_the_sorted_keys,
        zip_stops_at_the_shortest_list,
        flatten_concatenates_one_level_or_more,
        slice_follows_python_with_lua_positions,
        slice_rejects_bad_arguments,
        set_operations_keep_distinct_items_in_order,
        set_operations_reject_bad_arguments,
        key_function_errors_pass_through_unchanged,
        sort_by_compares_list_keys_as_they_are_once_every_key_is_computed,
        sort_by_compares_integers_and_floats_exactly,
        field_keys_and_lists_honour_index_and_len_metamethods,
        argument_errors_blame_the_caller,
    ]
);

#[cfg(feature = "statistics")]
lua_tests!(
    statistics,
    "statistics_test.lua",
    sandbox: true,
    [
        sum_adds_numbers_keeping_integers,
        mean_is_the_arithmetic_mean,
        median_averages_the_middle_two_of_an_even_count,
        median_does_not_reorder_its_input,
        percentile_interpolates_linearly_like_numpy,
        stdev_is_the_sample_deviation_unless_population,
        histogram_counts_equal_width_bins_like_numpy,
        histogram_with_edges_leaves_out_values_outside,
        integer_results_too_large_for_lua_become_floats_instead_of_wrapping_around,
        percentile_and_histogram_round_as_numpy_does,
        histogram_without_edges_rejects_nan_and_infinities_like_numpy,
        empty_or_short_lists_are_errors_where_python_raises,
        bad_arguments_name_the_function_and_the_item,
        argument_errors_blame_the_caller,
    ]
);

#[cfg(feature = "strings")]
lua_tests!(
    strings,
    "strings_test.lua",
    sandbox: true,
    [
        split_without_separator_splits_on_runs_of_whitespace,
        split_with_a_separator_keeps_empty_pieces,
        split_treats_the_separator_as_plain_text,
        split_honours_maxsplit,
        split_handles_utf8,
        split_and_strip_know_pythons_unicode_whitespace,
        split_rejects_bad_arguments,
        strip_removes_surrounding_whitespace,
        strip_removes_any_of_the_given_characters,
        strip_removes_utf8_characters_whole,
        strip_rejects_bad_arguments,
        startswith_and_endswith_test_prefixes_and_suffixes,
        startswith_and_endswith_accept_a_list_like_a_python_tuple,
        startswith_and_endswith_reject_bad_arguments,
        join_takes_the_separator_first_or_second,
        join_converts_items_with_tostring,
        join_rejects_bad_arguments,
        replace_replaces_plain_text,
        replace_honours_count,
        replace_with_an_empty_old_inserts_between_characters,
        replace_handles_utf8,
        strip_and_replace_read_bytes_that_are_not_utf8_one_at_a_time,
        replace_rejects_bad_arguments,
        argument_errors_blame_the_caller,
    ]
);

#[cfg(feature = "time")]
lua_tests!(
    time,
    "time_test.lua",
    sandbox: true,
    [
        parse_time_reads_iso_8601_dates_and_times,
        parse_time_reads_fractions_with_a_dot_or_a_comma,
        parse_time_applies_utc_offsets,
        parse_time_reads_apache_and_rfc_2822_times,
        parse_time_reads_syslog_times_in_the_given_year,
        parse_time_handles_dates_outside_the_usual_range,
        parse_time_returns_nil_and_a_message_for_unrecognised_text,
        parse_time_takes_linear_time_on_long_runs_of_spaces,
        parse_time_rejects_bad_arguments,
        format_time_defaults_to_iso_8601_utc,
        format_time_follows_strftime_directives,
        format_time_and_parse_time_round_trip,
        format_time_rejects_bad_arguments,
        argument_errors_blame_the_caller,
    ]
);

/// Whether `source` calls `name(` (not merely a longer name ending in `name`).
fn calls(source: &str, name: &str) -> bool {
    let call = format!("{name}(");
    source.match_indices(&call).any(|(at, _)| {
        !source[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
    })
}

#[test]
fn every_registry_function_is_exercised_by_a_lua_test() {
    let sources: String = [
        "text_test.lua",
        "chunking_test.lua",
        "recursive_test.lua",
        "collections_test.lua",
        "statistics_test.lua",
        "strings_test.lua",
        "time_test.lua",
    ]
    .iter()
    .map(|file| std::fs::read_to_string(lua_test_path(file)).unwrap())
    .collect();
    let untested: Vec<&str> = Registry::baked()
        .iter_functions()
        .map(|(name, _)| name)
        .filter(|name| !calls(&sources, name))
        .collect();
    assert!(
        untested.is_empty(),
        "registry functions never called from tests/lua: {untested:?}"
    );
    for name in PUBLIC {
        assert!(
            Registry::baked().get(name).is_some(),
            "{name} is missing from the baked registry"
        );
    }
}
