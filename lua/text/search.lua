-- Searching text: grep with context lines and every position of a substring.

-- The sandbox's Rust primitives (the same results, much faster); nil in a bare Lua VM,
-- where the pure-Lua code below runs instead.
local native = _text_primitives

-- Finds matches of `pattern` line by line; each match carries `context` lines around it.
-- `plain` is true, false or "regex".
local function collect_matches(text, pattern, context, plain)
  if native then
    local mode = plain == "regex" and "regex" or (plain and "plain" or "pattern")
    return native.grep(text, pattern, context, mode)
  end
  if plain == "regex" then
    error("grep: regular expressions need the sandbox's `re` built-in", 3)
  end
  local all = lines(text)
  local matches = {}
  for index, line in ipairs(all) do
    if string.find(line, pattern, 1, plain) then
      local first = math.max(1, index - context)
      local last = math.min(#all, index + context)
      matches[#matches + 1] = {
        line = index,
        text = line,
        before = table.move(all, first, index - 1, 1, {}),
        after = table.move(all, index + 1, last, 1, {}),
      }
    end
  end
  return matches
end

--- Finds the lines of a text that match a Lua pattern (or a plain substring, or a
--- regular expression), with surrounding context lines, like `grep -C`.
--- Each match is a table `{ line = <1-based line number>, text = <the line>,
--- before = <context lines above>, after = <context lines below> }`.
---
--- ```lua
--- grep("ok\nERROR 42\nok", "ERROR %d+")[1].line --> 2
--- ```
---@tag search
---@param text string The text to search
---@param pattern string A Lua pattern, or a plain substring when `plain` is true
---@param context? integer Context lines before and after each match (default 0)
---@param plain? boolean|string Match `pattern` literally when true; "regex" reads it as a regular expression (`re` syntax)
---@return table[] matches The matching lines, in order
function grep(text, pattern, context, plain)
  return collect_matches(text, pattern, context or 0, plain == "regex" and plain or plain == true)
end

--- Like `grep`, but returns printable text in `grep -n -C` style: matching lines as
--- "12: text", context lines as "11- text", and "--" between non-adjacent groups.
---
--- ```lua
--- grep_text("a\nERROR\nb", "ERROR", 1) --> "1- a\n2: ERROR\n3- b"
--- ```
---@param text string The text to search
---@param pattern string A Lua pattern, or a plain substring when `plain` is true
---@param context? integer Context lines before and after each match (default 0)
---@param plain? boolean|string Match `pattern` literally when true; "regex" reads it as a regular expression (`re` syntax)
---@return string report The matches with line numbers; "" when nothing matches
function grep_text(text, pattern, context, plain)
  local matches = collect_matches(text, pattern, context or 0, plain == "regex" and plain or plain == true)
  local is_match = {}
  for _, match in ipairs(matches) do
    is_match[match.line] = true
  end
  local out = {}
  local last_printed = 0
  for _, match in ipairs(matches) do
    local first = match.line - #match.before
    local last = match.line + #match.after
    if last_printed > 0 and first > last_printed + 1 then
      out[#out + 1] = "--"
    end
    -- Lines already printed for an earlier match are skipped; a line that matches is
    -- marked ":" even when it is also context of a neighbouring match.
    for number = math.max(first, last_printed + 1), last do
      local line
      if number < match.line then
        line = match.before[number - first + 1]
      elseif number == match.line then
        line = match.text
      else
        line = match.after[number - match.line]
      end
      out[#out + 1] = number .. (is_match[number] and ": " or "- ") .. line
    end
    last_printed = last
  end
  return table.concat(out, "\n")
end

--- Finds every position of `needle` in a text (plain substring, not a pattern).
--- Overlapping occurrences are all reported: "aaa" has "aa" at 1 and 2.
--- With `regex`, `needle` is a regular expression (`re` syntax) and the starts of its
--- non-overlapping matches are reported.
---
--- ```lua
--- find_all("abcabc", "bc") --> {2, 5}
--- ```
---@param text string The text to search
---@param needle string The substring to find (must not be empty)
---@param regex? boolean Read `needle` as a regular expression (default false)
---@return integer[] positions 1-based byte offsets where `needle` starts
function find_all(text, needle, regex)
  if needle == "" then
    error("find_all: needle must not be empty", 2)
  end
  if regex then
    if not native then
      error("find_all: regular expressions need the sandbox's `re` built-in", 2)
    end
    return native.find_all_regex(text, needle)
  end
  if native then return native.find_all(text, needle) end
  local positions = {}
  local start = 1
  while true do
    local found = string.find(text, needle, start, true)
    if not found then
      break
    end
    positions[#positions + 1] = found
    start = found + 1
  end
  return positions
end
