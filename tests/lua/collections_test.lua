-- Tests for lua/collections. Run by tests/it/lua_library.rs in a bare VM (pure Lua) and in
-- the sandbox (where sort_by sorts in Rust). Returns a table of test name -> function.

local T = {}

local ROWS = {
  { name = "ann", dept = "ops", age = 30 },
  { name = "bob", dept = "dev", age = 25 },
  { name = "cid", dept = "ops", age = 25 },
  { name = "dee", dept = "dev", age = 41 },
}

local function names(rows)
  local out = {}
  for i, row in ipairs(rows) do out[i] = row.name end
  return out
end

-- count, count_by, most_common ------------------------------------------------------

function T.count_counts_equal_items()
  check(count({ "a", "b", "a", 1, 1, 1 }), { a = 2, b = 1, [1] = 3 })
  check(count({}), {}, "empty list")
  check(count({ 0 / 0, 1.0, 1 }), { [1] = 2 }, "NaN is skipped; 1.0 and 1 are one key")
end

function T.count_by_counts_keys_of_a_function_or_a_field()
  check(count_by({ "apple", "avocado", "kiwi" }, function(s) return s:sub(1, 1) end), { a = 2, k = 1 })
  check(count_by(ROWS, "dept"), { ops = 2, dev = 2 })
  check(count_by({}, "dept"), {})
  check(count_by({ 1, 2, 3 }, function(x) if x > 1 then return "big" end end), { big = 2 }, "nil keys are skipped")
end

function T.count_by_counts_utf8_keys()
  check(count_by({ "été", "éclair", "ami" }, function(s) return s:sub(1, 2) end), { ["é"] = 2, am = 1 })
end

function T.count_and_count_by_reject_bad_arguments()
  check_error(function() count(nil) end, "count: argument 1 (list) must be a table, got nil")
  check_error(function() count_by("abc", "x") end, "count_by: argument 1 (list) must be a table, got string")
  check_error(function() count_by({ 1 }) end, "count_by: argument 2 (key) is missing")
  check_error(function() count_by({ 1 }, 42) end, "count_by: item 1 is a number, so it has no field \"42\"")
  check_error(function() count_by({ { x = 1 }, "s" }, "x") end, "count_by: item 2 is a string, so it has no field \"x\"")
  check_error(function() count_by({ 1 }, true) end, "count_by: argument 2 (key) must be a function, got boolean")
end

function T.most_common_orders_by_count_then_item()
  local counts = { a = 1, b = 3, c = 2, d = 3 }
  check(most_common(counts), { { "b", 3 }, { "d", 3 }, { "c", 2 }, { "a", 1 } })
  check(most_common(counts, 2), { { "b", 3 }, { "d", 3 } })
  check(most_common(counts, 0), {})
  check(most_common(counts, 10), most_common(counts), "n beyond the size gives all")
  check(most_common({}), {})
  check(most_common(count({ 2, 1, 2, true })), { { 2, 2 }, { 1, 1 }, { true, 1 } }, "mixed item types")
end

function T.most_common_rejects_bad_arguments()
  check_error(function() most_common(nil) end, "most_common: argument 1 (counts) must be a table, got nil")
  check_error(function() most_common({ a = "x" }) end, "most_common: the count of a is a string, not a number")
  check_error(function() most_common({ a = 1 }, 1.5) end, "most_common: argument 2 (n) must be an integer or nil, got 1.5")
end

-- group_by -----------------------------------------------------------------------------

function T.group_by_keeps_items_in_order_per_key()
  local groups = group_by(ROWS, "dept")
  check(names(groups.ops), { "ann", "cid" })
  check(names(groups.dev), { "bob", "dee" })
  check(group_by({ 1, 2, 3, 4 }, function(x) return x % 2 end), { [1] = { 1, 3 }, [0] = { 2, 4 } })
  check(group_by({}, "dept"), {})
end

function T.group_by_rejects_bad_arguments()
  check_error(function() group_by(ROWS) end, "group_by: argument 2 (key) is missing")
  check_error(function() group_by(7, "x") end, "group_by: argument 1 (list) must be a table, got number")
  check_error(function() group_by({ "s" }, "dept") end, "group_by: item 1 is a string, so it has no field \"dept\"")
end

-- sort_by ------------------------------------------------------------------------------

function T.sort_by_sorts_by_a_key_function_or_field()
  check(sort_by({ "bb", "a", "ccc" }, function(s) return #s end), { "a", "bb", "ccc" })
  check(names(sort_by(ROWS, "age")), { "bob", "cid", "ann", "dee" })
  check(sort_by({ 3, 1, 2 }), { 1, 2, 3 }, "no key: the items themselves")
  check(sort_by({ "b", "B", "a" }), { "B", "a", "b" }, "strings in byte order")
  check(sort_by({}), {})
end

function T.sort_by_is_stable_in_both_directions()
  check(names(sort_by(ROWS, "dept")), { "bob", "dee", "ann", "cid" })
  check(names(sort_by(ROWS, "dept", true)), { "ann", "cid", "bob", "dee" }, "reverse keeps equal keys in order")
  check(names(sort_by(ROWS, "age", true)), { "dee", "ann", "bob", "cid" })
  -- Many equal keys: a stable sort keeps the original order of each group.
  local items = {}
  for i = 1, 500 do items[i] = { group = i % 3, index = i } end
  local sorted = sort_by(items, "group")
  for i = 2, #sorted do
    local a, b = sorted[i - 1], sorted[i]
    assert(a.group < b.group or (a.group == b.group and a.index < b.index), "unstable at " .. i)
  end
end

function T.sort_by_keeps_equal_integer_or_string_keys_in_order_both_ways()
  local items = {}
  for i = 1, 500 do items[i] = { group = i % 3, label = "g" .. (i % 3), index = i } end
  for _, field in ipairs({ "group", "label" }) do
    for _, descending in ipairs({ false, true }) do
      local sorted = sort_by(items, field, descending)
      for i = 2, #sorted do
        local a, b = sorted[i - 1], sorted[i]
        local ahead = descending and a[field] > b[field] or not descending and a[field] < b[field]
        assert(ahead or (a[field] == b[field] and a.index < b.index),
          field .. (descending and " descending" or "") .. ": out of order at " .. i)
      end
    end
  end
end

function T.sort_by_reverses_for_any_true_value_as_lua_tests_it()
  check(sort_by({ 1, 3, 2 }, nil, 1), { 3, 2, 1 })
  check(sort_by({ 1, 3, 2 }, nil, "yes"), { 3, 2, 1 })
  check(sort_by({ 1, 3, 2 }, nil, false), { 1, 2, 3 })
end

function T.sort_by_orders_numbers_then_strings_then_lists()
  check(sort_by({ "b", 2, 1.5, "a", 10 }), { 1.5, 2, 10, "a", "b" })
  local nan = 0 / 0
  local sorted = sort_by({ 3, nan, 1 })
  check({ sorted[1], sorted[2] }, { 1, 3 })
  assert(sorted[3] ~= sorted[3], "NaN sorts last")
  check(sort_by({ { 2, "a" }, { 1, "b" }, { 1, "a" }, { 1 } }), { { 1 }, { 1, "a" }, { 1, "b" }, { 2, "a" } },
    "lists compare item by item, a prefix first")
end

function T.sort_by_with_a_tuple_key_sorts_on_several_fields()
  local sorted = sort_by(ROWS, function(r) return { r.dept, -r.age } end)
  check(names(sorted), { "dee", "bob", "ann", "cid" })
end

function T.sort_by_does_not_change_its_input()
  local list = { 3, 1, 2 }
  sort_by(list)
  check(list, { 3, 1, 2 })
end

function T.sort_by_rejects_bad_keys_naming_the_item()
  check_error(function() sort_by({ 1, true }) end,
    "sort_by: the key of item 2 is a boolean (keys must be numbers, strings or lists of them)")
  check_error(function() sort_by(ROWS, "missing") end, "sort_by: the key of item 1 is nil")
  check_error(function() sort_by({ { 1, {} }, { 2, print } }) end, "sort_by: the key of item 2 is a function")
  local loop = {}
  loop[1] = loop
  check_error(function() sort_by({ loop }) end, "sort_by: the key of item 1 is a list nested too deeply")
  check_error(function() sort_by({ { ms = 1 }, 2 }, "ms") end, "sort_by: item 2 is a number, so it has no field \"ms\"")
  check_error(function() sort_by({ { 1 }, 2 }, 1) end, "sort_by: item 2 is a number, so it has no field \"1\"")
  check_error(function() sort_by(nil) end, "sort_by: argument 1 (list) must be a table, got nil")
  check_error(function() sort_by({ 1 }, true) end, "sort_by: argument 2 (key) must be a function, a field name or nil, got boolean")
end

-- unique, map, filter, reduce --------------------------------------------------------

function T.unique_keeps_first_occurrences_in_order()
  check(unique({ 3, 1, 3, 2, 1 }), { 3, 1, 2 })
  check(names(unique(ROWS, "dept")), { "ann", "bob" })
  check(unique({ "é", "e", "é" }), { "é", "e" })
  check(unique({}), {})
end

function T.map_applies_a_function_or_picks_a_field_in_either_order()
  check(map({ 1, 2, 3 }, function(x) return x * 10 end), { 10, 20, 30 })
  check(map(function(x) return x + 1 end, { 1, 2 }), { 2, 3 }, "Python's order")
  check(map(ROWS, "name"), { "ann", "bob", "cid", "dee" })
  check(map({}, tostring), {})
end

function T.filter_keeps_items_for_which_fn_is_truthy()
  check(filter({ 1, 2, 3, 4 }, function(x) return x % 2 == 0 end), { 2, 4 })
  check(filter(function(x) return x > 2 end, { 1, 2, 3, 4 }), { 3, 4 }, "Python's order")
  check(filter({ 1, false, 2, 3 }), { 1, 2, 3 }, "no fn: truthy items")
  check(#filter(ROWS, "missing"), 0)
end

function T.reduce_folds_with_or_without_an_initial_value()
  local add = function(a, b) return a + b end
  check(reduce({ 1, 2, 3 }, add, 0), 6)
  check(reduce({ 1, 2, 3 }, add), 6)
  check(reduce(add, { 1, 2, 3 }, 10), 16, "Python's order")
  check(reduce({}, add, 0), 0)
  check(reduce({ "a", "b" }, function(acc, x) return acc .. x end, ">"), ">ab")
end

function T.map_filter_reduce_reject_bad_arguments()
  check_error(function() map(nil, tostring) end, "map: argument 1 (list) must be a table, got nil")
  check_error(function() map({ 1 }) end, "map: argument 2 (fn) is missing")
  check_error(function() filter("x", tostring) end, "filter: argument 1 (list) must be a table, got string")
  check_error(function() reduce({ 1 }, nil, 0) end, "reduce: argument 2 (fn) must be a function, got nil")
  check_error(function() reduce({}, function() end) end, "reduce: empty list and no initial value")
end

-- keys, values, zip, flatten, slice ---------------------------------------------------

function T.keys_and_values_follow_the_sorted_keys()
  local t = { b = 2, a = 1, [10] = "ten", [2] = "two" }
  check(keys(t), { 2, 10, "a", "b" })
  check(values(t), { "two", "ten", 1, 2 })
  check(keys({}), {})
  check(values({}), {})
  check_error(function() keys(nil) end, "keys: argument 1 (table) must be a table, got nil")
  check_error(function() values("x") end, "values: argument 1 (table) must be a table, got string")
end

function T.zip_stops_at_the_shortest_list()
  check(zip({ 1, 2, 3 }, { "a", "b" }), { { 1, "a" }, { 2, "b" } })
  check(zip({ 1 }, { 2 }, { 3 }), { { 1, 2, 3 } })
  check(zip({}, { 1 }), {})
  check(zip(), {})
  check_error(function() zip({ 1 }, nil) end, "zip: argument 2 (list) must be a table, got nil")
end

function T.flatten_concatenates_one_level_or_more()
  check(flatten({ { 1, 2 }, { 3 }, 4 }), { 1, 2, 3, 4 })
  check(flatten({ { 1, { 2, { 3 } } } }), { 1, { 2, { 3 } } })
  check(flatten({ { 1, { 2, { 3 } } } }, math.huge), { 1, 2, 3 })
  check(flatten({}), {})
  check(flatten({ {}, {} }), {})
  check_error(function() flatten({}, "all") end, "flatten: argument 2 (depth) must be a number, got string")
end

function T.slice_follows_python_with_lua_positions()
  local xs = { 1, 2, 3, 4, 5 }
  check(slice(xs, 2, 4), { 2, 3, 4 })
  check(slice(xs, 2, -2), { 2, 3, 4 }, "negative j counts from the end")
  check(slice(xs, -2), { 4, 5 }, "xs[-2:]")
  check(slice(xs, nil, 3), { 1, 2, 3 }, "xs[:3]")
  check(slice(xs, nil, nil, 2), { 1, 3, 5 }, "xs[::2]")
  check(slice(xs, nil, nil, -1), { 5, 4, 3, 2, 1 }, "xs[::-1]")
  check(slice(xs, 4, 2, -1), { 4, 3, 2 })
  check(slice(xs, -10, 10), xs, "out-of-range bounds are clamped")
  check(slice(xs, 4, 2), {}, "i after j")
  check(slice({}, 1, 3), {})
end

function T.slice_rejects_bad_arguments()
  check_error(function() slice({ 1 }, 1, 1, 0) end, "slice: argument 4 (step) must be a non-zero integer, got 0")
  check_error(function() slice({ 1 }, 1.5) end, "slice: argument 2 must be an integer or nil, got 1.5")
  check_error(function() slice("abc", 1) end, "slice: argument 1 (list) must be a table, got string")
end

-- set operations ------------------------------------------------------------------------

function T.set_operations_keep_distinct_items_in_order()
  check(set_union({ 1, 2, 2 }, { 3, 2, 1, 4 }), { 1, 2, 3, 4 })
  check(set_intersection({ 1, 2, 3, 2 }, { 3, 2, 5 }), { 2, 3 })
  check(set_difference({ 1, 2, 3, 2 }, { 2 }), { 1, 3 })
  check(set_union({}, {}), {})
  check(set_intersection({ "a" }, {}), {})
  check(set_difference({}, { 1 }), {})
  check(set_union({ "é" }, { "é", "e" }), { "é", "e" })
end

function T.set_operations_reject_bad_arguments()
  check_error(function() set_union({}, nil) end, "set_union: argument 2 (list) must be a table, got nil")
  check_error(function() set_intersection(nil, {}) end, "set_intersection: argument 1 (list) must be a table, got nil")
  check_error(function() set_difference({}, 3) end, "set_difference: argument 2 (list) must be a table, got number")
end

function T.key_function_errors_pass_through_unchanged()
  local value = { code = 7 }
  for _, call in ipairs({ sort_by, count_by, group_by }) do
    local ok, err = pcall(call, { 3, 1, 2 }, function() error(value) end)
    assert(not ok and err == value, "a table raised by the key function is the error: " .. tostring(err))
    ok, err = pcall(call, { 3, 1, 2 }, function() error(nil) end)
    assert(not ok and err == nil, "nil raised by the key function is the error: " .. tostring(err))
    ok, err = pcall(call, { 3, 1, 2 }, function() error("bad key", 0) end)
    assert(not ok and err == "bad key", "a message keeps no position it was raised without: " .. tostring(err))
  end
end

function T.sort_by_compares_list_keys_as_they_are_once_every_key_is_computed()
  -- Every key is the same list (as Python compares it at sort time): all keys are equal.
  local shared = {}
  local items = {}
  for i = 1, 300 do items[i] = i end
  local sorted = sort_by(items, function(i)
    shared[1] = string.format("key %03d", (i * 7) % 300)
    return shared
  end)
  check(sorted, items, "equal keys keep their order")
end

function T.sort_by_compares_integers_and_floats_exactly()
  local big = math.tointeger(2 ^ 53) + 1
  local sorted = sort_by({ big, 2.0 ^ 53 })
  check({ math.type(sorted[1]), math.type(sorted[2]) }, { "float", "integer" }, "2^53 < 2^53 + 1")
  sorted = sort_by({ 2.0 ^ 63, math.maxinteger, -2.0 ^ 63, math.mininteger, 0.5, 0 })
  check(sorted, { -2.0 ^ 63, math.mininteger, 0, 0.5, math.maxinteger, 2.0 ^ 63 })
  check(math.type(sorted[1]), "float", "-2^63 as a float ties with mininteger and keeps its place")
end

function T.field_keys_and_lists_honour_index_and_len_metamethods()
  -- A field an item has through its class (__index), as map reads it.
  local Base = { kind = "base" }
  Base.__index = Base
  local a = setmetatable({ n = 2 }, Base)
  local b = setmetatable({ n = 1, kind = "own" }, Base)
  check(map({ a, b }, "kind"), { "base", "own" })
  check(sort_by({ b, a }, "kind"), { a, b })
  check(count_by({ a, b, a }, "kind"), { base = 2, own = 1 })
  check(group_by({ a, b }, "kind"), { base = { a }, own = { b } })
  -- A list read through __index and __len, as # and [] read it.
  local data = { 3, 1, 2 }
  local proxy = setmetatable({}, { __index = data, __len = function() return #data end })
  check(sort_by(proxy), { 1, 2, 3 })
  check(sort_by(proxy, function(x) return -x end), { 3, 2, 1 })
  check(count(proxy), { [1] = 1, [2] = 1, [3] = 1 })
  check(count_by(proxy, function(x) return x % 2 end), { [0] = 1, [1] = 2 })
  check(group_by(proxy, function(x) return x % 2 end), { [0] = { 2 }, [1] = { 3, 1 } })
end

function T.argument_errors_blame_the_caller()
  local err = check_error(function() count(nil) end, "count:")
  assert(err:find("collections_test.lua", 1, true), "error position should be the caller's: " .. err)
  err = check_error(function() sort_by({ 1, true }) end, "sort_by:")
  assert(err:find("collections_test.lua", 1, true), "error position should be the caller's: " .. err)
end

return T
