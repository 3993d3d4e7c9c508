-- Collections: Python's Counter, sorted(key=...), itertools and set operations over Lua
-- lists (sequences 1..#list) and tables.

-- The sandbox's Rust primitives (the same results, much faster); nil in a bare Lua VM,
-- where the pure-Lua code below runs instead.
local native = _text_primitives

-- Raises "name: message" at the caller of the public function that called this helper.
local function fail(name, message)
  error(name .. ": " .. message, 3)
end

-- A primitive's result: its value; its failure raised at the caller of the public
-- function that called this helper; the error a key function raised, raised again as it
-- is (as the pure-Lua code lets it pass); or nil when the pure-Lua code must do the work
-- (a list or an item with __index or __len, which the primitives read raw).
local function native_result(value, failure, raised)
  if raised then error(failure, 0) end
  if value == nil and failure ~= nil then error(failure, 3) end
  return value
end

-- What an argument was, for a message: a number itself, else its type.
local function described(value)
  return type(value) == "number" and tostring(value) or type(value)
end

local function check_table(name, value, position, what)
  if type(value) ~= "table" then
    error(string.format("%s: argument %d (%s) must be a table, got %s", name, position, what, type(value)), 3)
  end
end

local function check_function(name, value, position, what)
  if type(value) ~= "function" then
    error(string.format("%s: argument %d (%s) must be a function, got %s", name, position, what, type(value)), 3)
  end
end

-- `key` as a function of an item: nil when it is the item itself; a string or number
-- picks that field of a table item.
local function key_function(name, key)
  local kind = type(key)
  if key == nil or kind == "function" then
    return key
  elseif kind == "string" or kind == "number" then
    return function(item)
      if type(item) ~= "table" then
        error(string.format("%s: an item is a %s, so it has no field %q", name, type(item), tostring(key)), 0)
      end
      return item[key]
    end
  end
  error(string.format("%s: argument 2 (key) must be a function, a field name or nil, got %s", name, kind), 3)
end

-- The keys of every item of `list`, computed once (see key_function).
local function keys_of(name, list, key)
  local keys = {}
  local kind = type(key)
  if key == nil then
    for i = 1, #list do keys[i] = list[i] end
  elseif kind == "string" or kind == "number" then
    for i = 1, #list do
      local item = list[i]
      if type(item) ~= "table" then
        error(string.format("%s: item %d is a %s, so it has no field %q", name, i, type(item), tostring(key)), 3)
      end
      keys[i] = item[key]
    end
  else
    local get = key_function(name, key)
    for i = 1, #list do keys[i] = get(list[i]) end
  end
  return keys
end

-- Python's argument order (function first) or Lua's (list first): returns list, fn.
local function list_and_function(name, a, b)
  if type(a) == "function" and type(b) == "table" then
    return b, a
  end
  check_table(name, a, 1, "list")
  return a, b
end

-- Sort keys: numbers (NaN last), then strings, then lists compared item by item.
local KIND_RANK = { number = 1, string = 2, table = 3 }

-- How deep list keys may nest (a key table that contains itself would never end).
local MAX_KEY_DEPTH = 16

local function check_sort_key(key, index, depth)
  local rank = KIND_RANK[type(key)]
  local what = key == nil and "nil" or ("a " .. type(key))
  if rank == 3 and depth >= MAX_KEY_DEPTH then
    rank, what = nil, "a list nested too deeply"
  end
  if not rank then
    error(string.format("sort_by: the key of item %d is %s (keys must be numbers, strings or lists of them)",
      index, what), 3 + depth)
  end
  if rank == 3 then
    for i = 1, #key do check_sort_key(key[i], index, depth + 1) end
  end
end

-- -1, 0 or 1 as `a` sorts before, with or after `b` (a total order, see KIND_RANK).
-- Other values (booleans, functions) sort last, by their tostring.
local function compare(a, b)
  local ra, rb = KIND_RANK[type(a)] or 4, KIND_RANK[type(b)] or 4
  if ra ~= rb then
    return ra < rb and -1 or 1
  end
  if ra == 4 then
    a, b = tostring(a), tostring(b)
  end
  if ra == 3 then
    for i = 1, math.min(#a, #b) do
      local c = compare(a[i], b[i])
      if c ~= 0 then return c end
    end
    return #a < #b and -1 or (#a > #b and 1 or 0)
  end
  if a < b then return -1 end
  if b < a then return 1 end
  if a == b then return 0 end
  -- NaN is unordered: it sorts after every number and ties with itself.
  local a_nan, b_nan = a ~= a, b ~= b
  return (a_nan and not b_nan) and 1 or ((b_nan and not a_nan) and -1 or 0)
end

--- Counts equal items, like Python's collections.Counter(list).
---
--- ```lua
--- count({"a", "b", "a"}) --> {a = 2, b = 1}
--- ```
---@param list any[] The items
---@return table<any, integer> counts Item -> count
function count(list)
  check_table("count", list, 1, "list")
  local counted = native and native_result(native.count(list))
  if counted then return counted end
  local counts = {}
  for i = 1, #list do
    local item = list[i]
    if item ~= nil and item == item then
      counts[item] = (counts[item] or 0) + 1
    end
  end
  return counts
end

--- Counts items by key, like Counter(key(x) for x in list).
---
--- ```lua
--- count_by({"ab", "ac", "b"}, function(s) return s:sub(1, 1) end) --> {a = 2, b = 1}
--- ```
---@param list any[] The items
---@param key function|string Function of an item, or a field name
---@return table<any, integer> counts Key -> count
function count_by(list, key)
  check_table("count_by", list, 1, "list")
  if key == nil then fail("count_by", "argument 2 (key) is missing; use count(list) to count the items themselves") end
  if native and (type(key) == "string" or type(key) == "function") then
    local counts = native_result(native.count(list, key))
    if counts then return counts end
  end
  local counts = {}
  if type(key) == "string" or type(key) == "number" then
    for i = 1, #list do
      local item = list[i]
      if type(item) ~= "table" then
        fail("count_by", string.format("item %d is a %s, so it has no field %q", i, type(item), tostring(key)))
      end
      local k = item[key]
      if k ~= nil and k == k then counts[k] = (counts[k] or 0) + 1 end
    end
    return counts
  end
  check_function("count_by", key, 2, "key")
  for i = 1, #list do
    local k = key(list[i])
    if k ~= nil and k == k then counts[k] = (counts[k] or 0) + 1 end
  end
  return counts
end

--- The n largest counts as {item, count} pairs, like Counter.most_common(n); ties by item.
---
--- ```lua
--- most_common({a = 1, b = 3, c = 2}, 2) --> {{"b", 3}, {"c", 2}}
--- ```
---@param counts table<string, number> Item -> count
---@param n? integer How many (default: all)
---@return table[] pairs Largest first
function most_common(counts, n)
  check_table("most_common", counts, 1, "counts")
  if n ~= nil and math.type(n) ~= "integer" then fail("most_common", "argument 2 (n) must be an integer or nil, got " .. described(n)) end
  if native then
    local top = native.most_common(counts, n)
    if top then return top end
  end
  local pairs_list = {}
  for item, value in pairs(counts) do
    if type(value) ~= "number" then
      fail("most_common", string.format("the count of %s is a %s, not a number (pass counts, e.g. count(list))",
        tostring(item), type(value)))
    end
    pairs_list[#pairs_list + 1] = { item, value }
  end
  table.sort(pairs_list, function(a, b)
    if a[2] ~= b[2] then return a[2] > b[2] end
    return compare(a[1], b[1]) < 0
  end)
  if n and n < #pairs_list then
    return table.move(pairs_list, 1, math.max(n, 0), 1, {})
  end
  return pairs_list
end

--- Groups items by key into lists, in order, like a defaultdict(list) filled in a loop.
---
--- ```lua
--- group_by({"ab", "ac", "b"}, function(s) return s:sub(1, 1) end) --> {a = {"ab", "ac"}, b = {"b"}}
--- ```
---@param list any[] The items
---@param key function|string Function of an item, or a field name
---@return table<any, any[]> groups Key -> items
function group_by(list, key)
  check_table("group_by", list, 1, "list")
  if key == nil then fail("group_by", "argument 2 (key) is missing") end
  key_function("group_by", key) -- checks the key's kind
  if native and (type(key) == "string" or type(key) == "function") then
    local groups = native_result(native.group_by(list, key))
    if groups then return groups end
  end
  local groups = {}
  local keys = keys_of("group_by", list, key)
  for i = 1, #list do
    local item = list[i]
    local k = keys[i]
    if k ~= nil and k == k then
      local group = groups[k]
      if group then
        group[#group + 1] = item
      else
        groups[k] = { item }
      end
    end
  end
  return groups
end

--- A sorted copy, like sorted(list, key=key, reverse=reverse); stable; keys are numbers, strings or lists of them.
---
--- ```lua
--- sort_by({"bb", "a", "ccc"}, function(s) return #s end, true) --> {"ccc", "bb", "a"}
--- ```
---@param list any[] The items
---@param key? function|string Function of an item, or a field name
---@param reverse? boolean Largest first
---@return any[] sorted A new list
function sort_by(list, key, reverse)
  check_table("sort_by", list, 1, "list")
  if native then
    key_function("sort_by", key) -- checks the key's kind
    local sorted = native_result(native.sort_by(list, key, reverse and true or false))
    if sorted then return sorted end
  end
  local keys = keys_of("sort_by", list, key)
  local n = #list
  local order = {}
  for i = 1, n do
    check_sort_key(keys[i], i, 0)
    order[i] = i
  end
  table.sort(order, function(a, b)
    local c = compare(keys[a], keys[b])
    if c ~= 0 then
      if reverse then return c > 0 end
      return c < 0
    end
    return a < b
  end)
  local sorted = {}
  for i = 1, n do sorted[i] = list[order[i]] end
  return sorted
end

--- The items without repeats, first occurrences in order, like list(dict.fromkeys(list)).
---
--- ```lua
--- unique({3, 1, 3, 2, 1}) --> {3, 1, 2}
--- ```
---@param list any[] The items
---@param key? function|string Compare by this key
---@return any[] items A new list
function unique(list, key)
  check_table("unique", list, 1, "list")
  local get = key_function("unique", key)
  local seen, out = {}, {}
  for i = 1, #list do
    local item = list[i]
    local k = item
    if get then k = get(item) end
    if k == nil or k ~= k then k = seen end -- nil and NaN keys: one slot
    if not seen[k] then
      seen[k] = true
      out[#out + 1] = item
    end
  end
  return out
end

--- Applies fn to every item, like Python's map(fn, list) (either argument order).
---
--- ```lua
--- map({1, 2, 3}, function(x) return x * 10 end) --> {10, 20, 30}
--- ```
---@param list any[] The items
---@param fn function|string Function of an item, or a field name
---@return any[] results A new list
function map(list, fn)
  list, fn = list_and_function("map", list, fn)
  if fn == nil then fail("map", "argument 2 (fn) is missing") end
  local get = key_function("map", fn)
  local out = {}
  for i = 1, #list do out[i] = get(list[i]) end
  return out
end

--- The items for which fn is truthy, like Python's filter(fn, list) (either argument order).
---
--- ```lua
--- filter({1, 2, 3, 4}, function(x) return x % 2 == 0 end) --> {2, 4}
--- ```
---@param list any[] The items
---@param fn? function|string Predicate, or a field name
---@return any[] kept A new list
function filter(list, fn)
  list, fn = list_and_function("filter", list, fn)
  local get = key_function("filter", fn)
  local out = {}
  for i = 1, #list do
    local item = list[i]
    local keep = item
    if get then keep = get(item) end
    if keep then out[#out + 1] = item end
  end
  return out
end

--- Folds the items into one value, like functools.reduce(fn, list, initial) (either order).
---
--- ```lua
--- reduce({1, 2, 3}, function(acc, x) return acc + x end, 0) --> 6
--- ```
---@param list any[] The items
---@param fn function Called as fn(accumulated, item)
---@param initial? any The start value (default: the first item)
---@return any result The accumulated value
function reduce(list, fn, initial)
  list, fn = list_and_function("reduce", list, fn)
  check_function("reduce", fn, 2, "fn")
  local first, acc = 1, initial
  if initial == nil then
    if #list == 0 then fail("reduce", "empty list and no initial value") end
    first, acc = 2, list[1]
  end
  for i = first, #list do acc = fn(acc, list[i]) end
  return acc
end

-- The keys of `t` in sort order (see compare), as keys() and values() return them.
local function sorted_keys(name, t)
  check_table(name, t, 1, "table")
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out, function(a, b) return compare(a, b) < 0 end)
  return out
end

--- The keys of a table, sorted (numbers, then strings), like sorted(d.keys()).
---
--- ```lua
--- keys({b = 2, a = 1}) --> {"a", "b"}
--- ```
---@param t table The table
---@return any[] keys A new list
function keys(t)
  return sorted_keys("keys", t)
end

--- The values of a table in the order of its sorted keys, like list(d.values()).
---
--- ```lua
--- values({b = 2, a = 1}) --> {1, 2}
--- ```
---@param t table The table
---@return any[] values A new list
function values(t)
  local out = {}
  for i, k in ipairs(sorted_keys("values", t)) do out[i] = t[k] end
  return out
end

--- Pairs up items of several lists, like Python's zip: as long as the shortest list.
---
--- ```lua
--- zip({1, 2, 3}, {"a", "b"}) --> {{1, "a"}, {2, "b"}}
--- ```
---@param ... any[] The lists
---@return table[] tuples {a[i], b[i], ...} for each i
function zip(...)
  local lists = table.pack(...)
  local shortest = lists.n > 0 and math.huge or 0
  for i = 1, lists.n do
    check_table("zip", lists[i], i, "list")
    shortest = math.min(shortest, #lists[i])
  end
  local out = {}
  for i = 1, shortest do
    local tuple = {}
    for j = 1, lists.n do tuple[j] = lists[j][i] end
    out[i] = tuple
  end
  return out
end

local function flatten_into(out, list, depth)
  for i = 1, #list do
    local item = list[i]
    if type(item) == "table" and depth > 0 then
      flatten_into(out, item, depth - 1)
    else
      out[#out + 1] = item
    end
  end
end

--- Concatenates nested lists, like itertools.chain.from_iterable; depth levels (default 1).
---
--- ```lua
--- flatten({{1, 2}, {3}, 4}) --> {1, 2, 3, 4}
--- ```
---@param list any[] The list of lists
---@param depth? integer Levels (default 1; math.huge: all)
---@return any[] flat A new list
function flatten(list, depth)
  check_table("flatten", list, 1, "list")
  depth = depth or 1
  if type(depth) ~= "number" then fail("flatten", "argument 2 (depth) must be a number, got " .. described(depth)) end
  local out = {}
  flatten_into(out, list, depth)
  return out
end

--- Part of a list, like list[i:j:step] but 1-based with j inclusive; negatives count from the end.
---
--- ```lua
--- slice({1, 2, 3, 4, 5}, 2, -2) --> {2, 3, 4}
--- slice({1, 2, 3}, nil, nil, -1) --> {3, 2, 1}
--- ```
---@param list any[] The items
---@param i? integer First position
---@param j? integer Last position (inclusive)
---@param step? integer Step (default 1)
---@return any[] part A new list
function slice(list, i, j, step)
  check_table("slice", list, 1, "list")
  step = step or 1
  if math.type(step) ~= "integer" or step == 0 then fail("slice", "argument 4 (step) must be a non-zero integer, got " .. described(step)) end
  for position, bound in pairs({ [2] = i, [3] = j }) do
    if bound ~= nil and math.type(bound) ~= "integer" then
      fail("slice", string.format("argument %d must be an integer or nil, got %s", position, described(bound)))
    end
  end
  local n = #list
  local function resolve(bound) return bound < 0 and n + bound + 1 or bound end
  local out = {}
  if step > 0 then
    local first = math.max(resolve(i or 1), 1)
    local last = math.min(resolve(j or n), n)
    for k = first, last, step do out[#out + 1] = list[k] end
  else
    local first = math.min(resolve(i or n), n)
    local last = math.max(resolve(j or 1), 1)
    for k = first, last, step do out[#out + 1] = list[k] end
  end
  return out
end

-- The items of `list` as a lookup table.
local function member_set(name, list, position)
  check_table(name, list, position, "list")
  local set = {}
  for i = 1, #list do
    local item = list[i]
    if item ~= nil then set[item] = true end
  end
  return set
end

-- The distinct items of `list` (in order) for which keep(item) holds, appended to `out`.
local function add_distinct(out, seen, list, keep)
  for i = 1, #list do
    local item = list[i]
    if item ~= nil and not seen[item] and keep(item) then
      seen[item] = true
      out[#out + 1] = item
    end
  end
  return out
end

local function always() return true end

--- Distinct items of either list, in order of appearance, like set(a) | set(b).
---
--- ```lua
--- set_union({1, 2}, {2, 3}) --> {1, 2, 3}
--- ```
---@param a any[] A list
---@param b any[] Another list
---@return any[] items A new list
function set_union(a, b)
  check_table("set_union", a, 1, "list")
  check_table("set_union", b, 2, "list")
  local seen = {}
  return add_distinct(add_distinct({}, seen, a, always), seen, b, always)
end

--- Distinct items of a that are also in b, in a's order, like set(a) & set(b).
---
--- ```lua
--- set_intersection({1, 2, 3}, {3, 2, 5}) --> {2, 3}
--- ```
---@param a any[] A list
---@param b any[] Another list
---@return any[] items A new list
function set_intersection(a, b)
  check_table("set_intersection", a, 1, "list")
  local in_b = member_set("set_intersection", b, 2)
  return add_distinct({}, {}, a, function(item) return in_b[item] end)
end

--- Distinct items of a that are not in b, in a's order, like set(a) - set(b).
---
--- ```lua
--- set_difference({1, 2, 3, 2}, {2}) --> {1, 3}
--- ```
---@param a any[] A list
---@param b any[] The items to leave out
---@return any[] items A new list
function set_difference(a, b)
  check_table("set_difference", a, 1, "list")
  local in_b = member_set("set_difference", b, 2)
  return add_distinct({}, {}, a, function(item) return not in_b[item] end)
end
