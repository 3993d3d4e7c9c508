-- The sandbox's Rust primitives (the same results, much faster); nil in a bare Lua VM,
-- where the pure-Lua code below runs instead.
local native = _text_primitives

-- The documents of a corpus: the sandbox's primitive, which model code cannot replace,
-- or the library's `doc_list` in a bare Lua VM.
local documents = native and native.doc_list or function(corpus) return doc_list(corpus) end

-- `count_one` summed over the documents of a corpus.
local function total(corpus, count_one)
  local sum = 0
  for _, document in ipairs(documents(corpus)) do
    sum = sum + count_one(document.text)
  end
  return sum
end

-- The words of one text.
local function words_of(text)
  if native then return native.word_count(text) end
  local count = 0
  for _ in string.gmatch(text, "%S+") do
    count = count + 1
  end
  return count
end

--- Counts the words of a text (runs of non-whitespace characters).
--- Over a corpus (a list of documents or of strings), the total of its documents.
---
--- ```lua
--- word_count("a b  c") --> 3
--- word_count({"a b", {name = "n", text = "c"}}) --> 3
--- ```
---@param text string|table The text, or a corpus
---@return integer count Number of words
function word_count(text)
  if type(text) == "table" then return total(text, words_of) end
  return words_of(text)
end

-- The characters of one text.
local function characters_of(text)
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

--- Counts the characters of a UTF-8 text (not bytes: "é" is one character).
--- Invalid UTF-8 is counted byte by byte: each byte that does not start a valid
--- character counts as one. Over a corpus, the total of its documents.
---
--- ```lua
--- char_count("héllo") --> 5
--- ```
---@param text string|table The text, or a corpus
---@return integer count Number of characters
function char_count(text)
  if type(text) == "table" then return total(text, characters_of) end
  return characters_of(text)
end
