--- Counts the words of a text (runs of non-whitespace characters).
---@param text string The text
---@return integer count Number of words
function word_count(text)
  local count = 0
  for _ in string.gmatch(text, "%S+") do
    count = count + 1
  end
  return count
end

--- Counts the characters of a UTF-8 text (not bytes: "é" is one character).
--- Invalid UTF-8 is counted byte by byte.
---@param text string The text
---@return integer count Number of characters
function char_count(text)
  return utf8.len(text) or #text
end
