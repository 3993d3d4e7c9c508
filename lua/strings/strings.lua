-- Strings: Python's str methods as functions (split, strip, startswith, endswith, join,
-- replace), with plain-text separators rather than Lua patterns.

-- `level` is where the error is raised: 3 (the default) blames the public function's caller.
local function check_string(name, value, position, what, level)
  if type(value) ~= "string" then
    error(string.format("%s: argument %d (%s) must be a string, got %s", name, position, what, type(value)), level or 3)
  end
end

-- Python's maxsplit / count: nil or negative means no limit.
local function limit(name, value, position, what)
  if value == nil then return math.huge end
  if math.type(value) ~= "integer" then
    error(string.format("%s: argument %d (%s) must be an integer or nil, got %s", name, position, what, type(value)), 3)
  end
  return value < 0 and math.huge or value
end

-- Bytes `%s` matches (C's isspace): space, \t, \n, \v, \f, \r.
local function is_space(byte)
  return byte == 32 or (byte ~= nil and byte >= 9 and byte <= 13)
end

-- Python's whitespace (str.isspace) that `%s` does not know: \28 to \31 and, in UTF-8,
-- NEL, no-break space, U+1680, U+2000 to U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
local UNICODE_SPACES = {
  ["\u{85}"] = true, ["\u{A0}"] = true, ["\u{1680}"] = true,
  ["\u{2000}"] = true, ["\u{2001}"] = true, ["\u{2002}"] = true, ["\u{2003}"] = true,
  ["\u{2004}"] = true, ["\u{2005}"] = true, ["\u{2006}"] = true, ["\u{2007}"] = true,
  ["\u{2008}"] = true, ["\u{2009}"] = true, ["\u{200A}"] = true,
  ["\u{2028}"] = true, ["\u{2029}"] = true, ["\u{202F}"] = true, ["\u{205F}"] = true,
  ["\u{3000}"] = true,
}
-- The same characters as patterns, with as many blanks as they have bytes.
local SPACE_PATTERNS = {
  { "[\28-\31]", " " }, { "\194[\133\160]", "  " }, { "\225\154\128", "   " },
  { "\226\128[\128-\138\168\169\175]", "   " }, { "\226\129\159", "   " }, { "\227\128\128", "   " },
}

-- `text` with the whitespace `%s` does not know made blanks: the same length, so a
-- position in it is one in `text`.
local function blank_spaces(text)
  if not string.find(text, "[\28-\31\194\225-\227]") then return text end
  for _, space in ipairs(SPACE_PATTERNS) do
    text = string.gsub(text, space[1], space[2])
  end
  return text
end

-- The end of the whitespace character that starts at `position`, or nil.
local function space_end(text, position)
  local byte = string.byte(text, position)
  if byte == nil then return nil end
  if is_space(byte) or (byte >= 28 and byte <= 31) then return position end
  local stop = position + (byte == 194 and 1 or 2)
  if byte >= 194 and UNICODE_SPACES[string.sub(text, position, stop)] then return stop end
  return nil
end

-- The start of the whitespace character that ends at `stop`, or nil.
local function space_start(text, stop)
  for start = stop, math.max(stop - 2, 1), -1 do
    if space_end(text, start) == stop then return start end
  end
  return nil
end

-- The pieces of `text` between runs of whitespace, at most `max` splits; the rest of the
-- text (without its leading whitespace) is the last piece, as in Python.
local function split_whitespace(text, max)
  local blanked = blank_spaces(text)
  local pieces = {}
  local position = 1
  while true do
    local start, stop = string.find(blanked, "%S+", position)
    if not start then break end
    if #pieces >= max then
      pieces[#pieces + 1] = string.sub(text, start)
      break
    end
    pieces[#pieces + 1] = string.sub(text, start, stop)
    position = stop + 1
  end
  return pieces
end

--- Splits like str.split: on whitespace runs if sep is nil, else on sep as plain text.
---
--- ```lua
--- split(" a  b c ") --> {"a", "b", "c"}
--- split("a,b,,c", ",", 2) --> {"a", "b", ",c"}
--- ```
---@param text string The text
---@param sep? string The separator (default: whitespace)
---@param maxsplit? integer The most splits
---@return string[] pieces The pieces
function split(text, sep, maxsplit)
  check_string("split", text, 1, "text")
  local max = limit("split", maxsplit, 3, "maxsplit")
  if sep == nil then return split_whitespace(text, max) end
  check_string("split", sep, 2, "sep")
  if sep == "" then error("split: argument 2 (sep) must not be empty", 2) end
  local pieces = {}
  local position = 1
  while #pieces < max do
    local start, stop = string.find(text, sep, position, true)
    if not start then break end
    pieces[#pieces + 1] = string.sub(text, position, start - 1)
    position = stop + 1
  end
  pieces[#pieces + 1] = string.sub(text, position)
  return pieces
end

-- The set of characters of `chars` (UTF-8 characters when valid UTF-8, else bytes) and
-- a function giving the character at a position: (start, stop) of it.
local function character_set(chars)
  local set = {}
  if utf8.len(chars) then
    for _, code in utf8.codes(chars) do set[utf8.char(code)] = true end
  else
    for i = 1, #chars do set[string.sub(chars, i, i)] = true end
  end
  return set
end

-- The end of the character that starts at `start`: a UTF-8 character, or a single byte
-- where the text is not valid UTF-8 (a lead byte without its continuation bytes).
local function char_end(text, start)
  local byte = string.byte(text, start)
  local length = byte >= 0xF0 and 4 or byte >= 0xE0 and 3 or byte >= 0xC0 and 2 or 1
  local stop = start + length - 1
  if length > 1 and (stop > #text or not utf8.len(text, start, stop)) then return start end
  return stop
end

-- The start of the character (as char_end reads them) that ends at `stop`.
local function char_start(text, stop)
  local start = stop
  while start > 1 and stop - start < 3 do
    local byte = string.byte(text, start)
    if byte < 0x80 or byte >= 0xC0 then break end
    start = start - 1
  end
  if char_end(text, start) ~= stop then return stop end
  return start
end

--- Removes leading and trailing whitespace, or any of the characters in chars, like str.strip.
---
--- ```lua
--- strip("  hi\n") --> "hi"
--- strip("xxhixy", "xy") --> "hi"
--- ```
---@param text string The text
---@param chars? string The characters to remove (default: whitespace)
---@return string stripped The text without them
function strip(text, chars)
  check_string("strip", text, 1, "text")
  local first, last = 1, #text
  if chars == nil then
    local stop = space_end(text, first)
    while stop do
      first = stop + 1
      stop = space_end(text, first)
    end
    local start = space_start(text, last)
    while start and start >= first do
      last = start - 1
      start = space_start(text, last)
    end
    return string.sub(text, first, last)
  end
  check_string("strip", chars, 2, "chars")
  local set = character_set(chars)
  while first <= last do
    local stop = char_end(text, first)
    if not set[string.sub(text, first, stop)] then break end
    first = stop + 1
  end
  while last >= first do
    local start = char_start(text, last)
    if not set[string.sub(text, start, last)] then break end
    last = start - 1
  end
  return string.sub(text, first, last)
end

-- Whether `test(text, affix)` holds for `affix`, or for any string of a list of them.
local function any_affix(name, text, affix, test)
  check_string(name, text, 1, "text", 4)
  if type(affix) == "table" then
    for i = 1, #affix do
      if type(affix[i]) ~= "string" then
        error(string.format("%s: argument 2 item %d must be a string, got %s", name, i, type(affix[i])), 4)
      end
      if test(text, affix[i]) then return true end
    end
    return false
  end
  check_string(name, affix, 2, name == "endswith" and "suffix or list of them" or "prefix or list of them", 4)
  return test(text, affix)
end

--- Whether a text starts with prefix (or any of a list of them), like str.startswith.
---
--- ```lua
--- startswith("GET /index", {"GET", "POST"}) --> true
--- ```
---@param text string The text
---@param prefix string|string[] The prefix, or a list of them
---@return boolean starts True if the text starts with it
function startswith(text, prefix)
  -- Not a tail call: any_affix's errors blame this function's caller.
  local starts = any_affix("startswith", text, prefix, function(t, p)
    return string.sub(t, 1, #p) == p
  end)
  return starts
end

--- Whether a text ends with suffix (or any of a list of them), like str.endswith.
---
--- ```lua
--- endswith("report.csv", ".csv") --> true
--- ```
---@param text string The text
---@param suffix string|string[] The suffix, or a list of them
---@return boolean ends True if the text ends with it
function endswith(text, suffix)
  local ends = any_affix("endswith", text, suffix, function(t, s)
    return s == "" or string.sub(t, -#s) == s
  end)
  return ends
end

--- Joins items (with tostring) by sep, like Python's sep.join(list); join(list, sep) works too.
---
--- ```lua
--- join(", ", {"a", 1, true}) --> "a, 1, true"
--- ```
---@param sep string|any[] The separator
---@param list? any[]|string The items
---@return string joined The joined text
function join(sep, list)
  if type(sep) == "table" then sep, list = list, sep end
  if type(list) ~= "table" then
    error(string.format("join: needs a list (a table), got %s", type(list)), 2)
  end
  sep = sep or ""
  if type(sep) ~= "string" then
    error(string.format("join: the separator must be a string, got %s", type(sep)), 2)
  end
  local parts = {}
  for i = 1, #list do parts[i] = tostring(list[i]) end
  return table.concat(parts, sep)
end

-- Python's "abc".replace("", "-", count): `new` before each character and at the end.
local function replace_empty(text, new, max)
  local parts = {}
  local count = 0
  local position = 1
  while position <= #text and count < max do
    local stop = char_end(text, position)
    parts[#parts + 1] = new .. string.sub(text, position, stop)
    count = count + 1
    position = stop + 1
  end
  local rest = string.sub(text, position)
  if count < max and position > #text then rest = rest .. new end
  return table.concat(parts) .. rest
end

--- Replaces occurrences of old (plain text, not a pattern) with new, like str.replace.
---
--- ```lua
--- replace("a.b.c", ".", "-", 1) --> "a-b.c"
--- ```
---@param text string The text
---@param old string The text to replace
---@param new string The replacement
---@param count? integer The most replacements
---@return string result The new text
function replace(text, old, new, count)
  check_string("replace", text, 1, "text")
  check_string("replace", old, 2, "old")
  if type(new) == "number" then new = tostring(new) end
  check_string("replace", new, 3, "new")
  local max = limit("replace", count, 4, "count")
  if old == "" then return replace_empty(text, new, max) end
  local parts = {}
  local done = 0
  local position = 1
  while done < max do
    local start, stop = string.find(text, old, position, true)
    if not start then break end
    parts[#parts + 1] = string.sub(text, position, start - 1)
    parts[#parts + 1] = new
    done = done + 1
    position = stop + 1
  end
  parts[#parts + 1] = string.sub(text, position)
  return table.concat(parts)
end
