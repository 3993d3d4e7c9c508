-- The sandbox's Rust primitives (the same results, much faster); nil in a bare Lua VM,
-- where the pure-Lua code below runs instead.
local native = _text_primitives

--- Counts the words of a text (runs of non-whitespace characters).
---
--- ```lua
--- word_count("a b  c") --> 3
--- ```
---@param text string The text
---@return integer count Number of words
function word_count(text)
  if native then return native.word_count(text) end
  local count = 0
  for _ in string.gmatch(text, "%S+") do
    count = count + 1
  end
  return count
end

--- Counts the characters of a UTF-8 text (not bytes: "é" is one character).
--- Invalid UTF-8 is counted byte by byte: each byte that does not start a valid
--- character counts as one.
---
--- ```lua
--- char_count("héllo") --> 5
--- ```
---@param text string The text
---@return integer count Number of characters
function char_count(text)
  local count = 0
  local position = 1
  while true do
    local valid, invalid_at = utf8.len(text, position)
    if valid then
      return count + valid
    end
    -- Count the valid characters before the invalid byte, then that byte alone.
    count = count + utf8.len(text, position, invalid_at - 1) + 1
    position = invalid_at + 1
  end
end
