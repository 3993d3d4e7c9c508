-- Searching text: grep with context lines and every position of a substring.

-- Finds matches of `pattern` line by line; each match carries `context` lines around it.
local function collect_matches(text, pattern, context, plain)
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

--- Finds the lines of a text that match a Lua pattern (or a plain substring), with
--- surrounding context lines, like `grep -C`.
--- Each match is a table `{ line = <1-based line number>, text = <the line>,
--- before = <context lines above>, after = <context lines below> }`.
---@param text string The text to search
---@param pattern string A Lua pattern, or a plain substring when `plain` is true
---@param context? integer Context lines before and after each match (default 0)
---@param plain? boolean Match `pattern` literally (default false)
---@return table[] matches The matching lines, in order
function grep(text, pattern, context, plain)
  return collect_matches(text, pattern, context or 0, plain == true)
end

--- Like `grep`, but returns printable text in `grep -n -C` style: matching lines as
--- "12: text", context lines as "11- text", and "--" between non-adjacent groups.
---@param text string The text to search
---@param pattern string A Lua pattern, or a plain substring when `plain` is true
---@param context? integer Context lines before and after each match (default 0)
---@param plain? boolean Match `pattern` literally (default false)
---@return string report The matches with line numbers; "" when nothing matches
function grep_text(text, pattern, context, plain)
  local out = {}
  local last_printed = 0
  for _, match in ipairs(collect_matches(text, pattern, context or 0, plain == true)) do
    local first = match.line - #match.before
    if last_printed > 0 and first > last_printed + 1 then
      out[#out + 1] = "--"
    end
    for offset, line in ipairs(match.before) do
      local number = first + offset - 1
      if number > last_printed then
        out[#out + 1] = number .. "- " .. line
      end
    end
    if match.line > last_printed then
      out[#out + 1] = match.line .. ": " .. match.text
    end
    for offset, line in ipairs(match.after) do
      out[#out + 1] = (match.line + offset) .. "- " .. line
    end
    last_printed = match.line + #match.after
  end
  return table.concat(out, "\n")
end

--- Finds every position of `needle` in a text (plain substring, not a pattern).
--- Overlapping occurrences are all reported: "aaa" has "aa" at 1 and 2.
---@param text string The text to search
---@param needle string The substring to find (must not be empty)
---@return integer[] positions 1-based byte offsets where `needle` starts
function find_all(text, needle)
  if needle == "" then
    error("find_all: needle must not be empty", 2)
  end
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
