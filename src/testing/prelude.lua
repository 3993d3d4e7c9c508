-- The assertion helpers of Lua tests and examples: `show`, `check`, `check_error`, and
-- the function an example's `EXPR --> EXPECTED` line calls. A failed check sets
-- `__rlm_check_failed`, so a runner tells a failed check from any other error.

local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local named = { ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t", ['"'] = '\\"', ["\\"] = "\\\\" }
    return named[c] or string.format("\\%03d", c:byte())
  end) .. '"'
end

--- Renders a value readably: strings quoted with escapes, tables recursively.
function show(value)
  if type(value) == "string" then
    return quote(value)
  elseif type(value) ~= "table" then
    return tostring(value)
  end
  local parts = {}
  for i = 1, #value do
    parts[#parts + 1] = show(value[i])
  end
  local keys = {}
  for key in pairs(value) do
    if not (math.type(key) == "integer" and key >= 1 and key <= #value) then
      keys[#keys + 1] = key
    end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, key in ipairs(keys) do
    local name = type(key) == "string" and key:match("^[%a_][%w_]*$") and key or ("[" .. show(key) .. "]")
    parts[#parts + 1] = name .. " = " .. show(value[key])
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function deep_equal(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then
    return a == b and math.type(a) == math.type(b)
  end
  for key, value in pairs(a) do
    if not deep_equal(value, b[key]) then return false end
  end
  for key in pairs(b) do
    if a[key] == nil then return false end
  end
  return true
end

--- Fails (blaming the caller) unless `actual` deep-equals `expected`.
function check(actual, expected, message)
  if not deep_equal(actual, expected) then
    __rlm_check_failed = true
    error(string.format("%s\n  expected: %s\n  actual:   %s",
      message or "values differ", show(expected), show(actual)), 2)
  end
end

--- Fails unless `fn` raises an error whose message contains `needle` (plain text).
--- Returns the error message.
function check_error(fn, needle, message)
  local ok, err = pcall(fn)
  if ok then
    __rlm_check_failed = true
    error(string.format("%s\n  expected an error containing %s, but none was raised",
      message or "no error", show(needle)), 2)
  end
  err = tostring(err)
  if not string.find(err, needle, 1, true) then
    __rlm_check_failed = true
    error(string.format("%s\n  expected an error containing %s\n  actual error: %s",
      message or "wrong error", show(needle), show(err)), 2)
  end
  return err
end

local function show_values(values)
  local shown = {}
  for i = 1, values.n do
    shown[i] = show(values[i])
  end
  return table.concat(shown, ", ")
end

--- An example's `EXPR --> EXPECTED`: both sides packed by `table.pack`, and EXPR's source.
function __rlm_expect(actual, expected, source)
  local same = actual.n == expected.n
  for i = 1, math.max(actual.n, expected.n) do
    same = same and deep_equal(actual[i], expected[i])
  end
  if not same then
    __rlm_check_failed = true
    error(string.format("%s: expected %s, got %s", source, show_values(expected), show_values(actual)), 2)
  end
end
