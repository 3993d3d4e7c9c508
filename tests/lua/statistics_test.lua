-- Tests for lua/statistics. Run by tests/it/lua_library.rs in a bare VM and in the sandbox.
-- Expected values are Python's (statistics, numpy) for the same inputs.

local T = {}

local function close(actual, expected, message)
  if math.abs(actual - expected) > 1e-9 then
    error(string.format("%s: expected %.17g, got %.17g", message or "not close", expected, actual), 2)
  end
end

function T.sum_adds_numbers_keeping_integers()
  check(sum({ 1, 2, 3 }), 6)
  check(math.type(sum({ 1, 2, 3 })), "integer")
  check(sum({ 1, 2, 3.5 }), 6.5)
  check(sum({}), 0, "sum([]) is 0")
  check(sum({ "1", "2.5" }), 3.5, "numeric strings are converted")
end

function T.mean_is_the_arithmetic_mean()
  check(mean({ 1, 2, 3, 4 }), 2.5)
  check(mean({ 5 }), 5.0)
  close(mean({ 0.1, 0.2, 0.3 }), 0.2)
end

function T.median_averages_the_middle_two_of_an_even_count()
  check(median({ 5, 1, 3 }), 3)
  check(median({ 5, 1, 4, 2 }), 3.0)
  check(median({ 7 }), 7)
  check(median({ 2, 1 }), 1.5)
end

function T.median_does_not_reorder_its_input()
  local list = { 3, 1, 2 }
  median(list)
  check(list, { 3, 1, 2 })
end

function T.percentile_interpolates_linearly_like_numpy()
  -- numpy.percentile([1, 2, 3, 4], p) for p = 0, 25, 50, 75, 90, 100.
  local list = { 4, 1, 3, 2 }
  check(percentile(list, 0), 1.0)
  check(percentile(list, 25), 1.75)
  check(percentile(list, 50), 2.5)
  check(percentile(list, 75), 3.25)
  close(percentile(list, 90), 3.7)
  check(percentile(list, 100), 4.0)
  check(percentile({ 10 }, 37), 10.0)
  check(percentile({ 1, 2, 3 }, 50), median({ 1, 2, 3 }) + 0.0, "p = 50 is the median")
end

function T.stdev_is_the_sample_deviation_unless_population()
  -- statistics.stdev / statistics.pstdev of the same data.
  local data = { 2, 4, 4, 4, 5, 5, 7, 9 }
  check(stdev(data, true), 2.0)
  close(stdev(data), 2.138089935299395)
  check(stdev({ 1, 1 }), 0.0)
  check(stdev({ 3 }, true), 0.0)
end

function T.histogram_counts_equal_width_bins_like_numpy()
  -- numpy.histogram([1, 2, 2, 3, 4], 3) -> ([1, 2, 2], [1, 2, 3, 4])
  local counts, edges = histogram({ 1, 2, 2, 3, 4 }, 3)
  check(counts, { 1, 2, 2 })
  check(edges, { 1.0, 2.0, 3.0, 4.0 })
  counts, edges = histogram({ 5, 5 }, 2)
  check(counts, { 0, 2 }, "one value: the range is value +- 0.5")
  check(edges, { 4.5, 5.0, 5.5 })
  counts = histogram({ 1, 2, 3 })
  check(#counts, 10, "ten bins by default")
  check(sum(counts), 3)
  counts, edges = histogram({}, 2)
  check(counts, { 0, 0 })
  check(edges, { 0.0, 0.5, 1.0 }, "no values: numpy's range (0, 1)")
end

function T.histogram_with_edges_leaves_out_values_outside()
  local counts, edges = histogram({ 0, 1, 5, 10, 11 }, { 1, 5, 10 })
  check(counts, { 1, 2 }, "5 opens the second bin; 10 closes the last")
  check(edges, { 1, 5, 10 })
end

function T.integer_results_too_large_for_lua_become_floats_instead_of_wrapping_around()
  -- Python's integers never wrap: sum([2**63 - 1, 1]) is 2**63.
  local max, min = math.maxinteger, math.mininteger
  check(sum({ max, 1 }), 2.0 ^ 63)
  check(sum({ min, -1 }), -2.0 ^ 63)
  check(sum({ max, 1, -1 }), 2.0 ^ 63, "a float once it overflowed")
  check(mean({ max, max }), 2.0 ^ 63)
  check(median({ max, max - 1 }), 2.0 ^ 63)
  check(median({ min, min }), -2.0 ^ 63)
  check(stdev({ max, max }), 0.0)
  check(percentile({ min, max }, 50), 0.0, "numpy computes in floats")
  local counts, edges = histogram({ min, max }, 2)
  check(counts, { 1, 1 })
  check(edges, { -2.0 ^ 63, 0.0, 2.0 ^ 63 })
end

function T.percentile_and_histogram_round_as_numpy_does()
  -- numpy.percentile([0, 1, 2, 3], 10): position 3 * 0.1, not 3 * 10 / 100.
  check(percentile({ 0, 1, 2, 3 }, 10), 3 * 0.1)
  -- numpy.histogram([0, 0.3, 1], 10): the fourth edge is 3 * 0.1 = 0.30000000000000004,
  -- so 0.3 falls in the third bin.
  local counts, edges = histogram({ 0, 0.3, 1 }, 10)
  check(edges[4], 3 * 0.1)
  check(counts, { 1, 0, 1, 0, 0, 0, 0, 0, 0, 1 })
end

function T.histogram_without_edges_rejects_nan_and_infinities_like_numpy()
  -- numpy: "autodetected range of [1.0, inf] is not finite".
  check_error(function() histogram({ 1, 2, math.huge }, 2) end,
    "histogram: item 3 is inf, so the bins have no finite range (give bins as a list of edges)")
  check_error(function() histogram({ 0 / 0, 1 }) end, "histogram: item 1 is")
  check(histogram({ 1, math.huge }, { 0, 10 }), { 1 }, "given edges need no range")
end

function T.empty_or_short_lists_are_errors_where_python_raises()
  check_error(function() mean({}) end, "mean: the list is empty")
  check_error(function() median({}) end, "median: the list is empty")
  check_error(function() percentile({}, 50) end, "percentile: the list is empty")
  check_error(function() stdev({ 1 }) end, "stdev: needs at least 2 numbers, got 1")
  check_error(function() stdev({}, true) end, "stdev: needs at least 1 numbers, got 0")
end

function T.bad_arguments_name_the_function_and_the_item()
  check_error(function() sum(nil) end, "sum: argument 1 (list) must be a table, got nil")
  check_error(function() mean({ 1, "x" }) end, 'mean: item 2 is "x", not a number')
  check_error(function() median({ 1, {} }) end, "median: item 2 is a table, not a number")
  check_error(function() stdev({ true, 1 }) end, "stdev: item 1 is a boolean, not a number")
  check_error(function() percentile({ 1 }, 101) end, "percentile: argument 2 (p) must be a number from 0 to 100, got 101")
  check_error(function() percentile({ 1 }, 0 / 0) end, "percentile: argument 2 (p) must be a number from 0 to 100")
  check_error(function() histogram({ 1 }, 0) end, "histogram: argument 2 (bins) must be a positive integer or a list of edges, got 0")
  check_error(function() histogram({ 1 }, { 3, 1 }) end, "histogram: argument 2 (bins) edges must be ascending")
  check_error(function() histogram({ 1 }, { 3 }) end, "histogram: argument 2 (bins) needs at least 2 edges")
end

function T.argument_errors_blame_the_caller()
  local err = check_error(function() mean({}) end, "mean:")
  assert(err:find("statistics_test.lua", 1, true), "error position should be the caller's: " .. err)
  err = check_error(function() sum({ "x" }) end, "sum:")
  assert(err:find("statistics_test.lua", 1, true), "error position should be the caller's: " .. err)
end

return T
