-- Line access: split, count and slice text by lines.

-- The sandbox's Rust primitives (the same results, much faster); nil in a bare Lua VM,
-- where the pure-Lua code below runs instead.
local native = _text_primitives

-- The documents of a corpus: the sandbox's primitive, which model code cannot replace,
-- or the library's `doc_list` in a bare Lua VM.
local documents = native and native.doc_list or function(corpus) return doc_list(corpus) end

-- Calls `visit(index, line)` for every line of `text`; "\r\n" and "\n" both end a line,
-- and a final newline does not start an extra empty line.
local function each_line(text, visit)
  local index = 0
  local position = 1
  local length = #text
  while position <= length do
    local newline = string.find(text, "\n", position, true)
    local stop = newline or (length + 1)
    local line = string.sub(text, position, stop - 1)
    if string.sub(line, -1) == "\r" then
      line = string.sub(line, 1, -2)
    end
    index = index + 1
    if visit(index, line) == false then
      return
    end
    position = stop + 1
  end
end

-- The lines of one text.
local function lines_of(text)
  if native then return native.lines(text) end
  local result = {}
  each_line(text, function(_, line)
    result[#result + 1] = line
  end)
  return result
end

-- The number of lines of one text.
local function count_lines(text)
  if native then return native.line_count(text) end
  local count = 0
  each_line(text, function(index)
    count = index
  end)
  return count
end

-- Refuses a corpus where one text is needed, saying how to take a document's.
local function one_text(name, text)
  if type(text) == "table" then
    error(name .. ": takes one text, not a corpus; give one document's: " .. name .. "(context[i].text, ...)", 3)
  end
end

--- Splits text into its lines, without the line terminators.
--- "\n" and "\r\n" both end a line; a trailing newline adds no empty line at the end.
--- Over a corpus (a list of documents or of strings), the lines of every document in
--- order, as strings (a document's last line never joins the next one's first); use
--- `grep(context, "")` for every line with its `doc`, `name` and `line`.
---
--- ```lua
--- lines("a\r\nb\n") --> {"a", "b"}
--- lines({"a", "b\nc"}) --> {"a", "b", "c"}
--- ```
---@param text string|table The text to split, or a corpus
---@return string[] lines The lines, in order
function lines(text)
  if type(text) ~= "table" then return lines_of(text) end
  local result = {}
  for _, document in ipairs(documents(text)) do
    local these = lines_of(document.text)
    table.move(these, 1, #these, #result + 1, result)
  end
  return result
end

--- Counts how many lines a text has (a trailing newline does not start a new line).
--- Over a corpus, the total of its documents.
---
--- ```lua
--- line_count("a\nb\n") --> 2
--- line_count({"a\nb", "c\n"}) --> 3
--- ```
---@param text string|table The text, or a corpus
---@return integer count Number of lines; 0 for the empty string
function line_count(text)
  if type(text) ~= "table" then return count_lines(text) end
  local count = 0
  for _, document in ipairs(documents(text)) do
    count = count + count_lines(document.text)
  end
  return count
end

--- Returns lines `first` through `last` (1-based, inclusive) joined with "\n".
--- Out-of-range bounds are clamped; negative numbers count from the end (-1 is the last line).
---
--- ```lua
--- line_range("a\nb\nc\nd", 2, -2) --> "b\nc"
--- ```
---@param text string The text
---@param first integer First line to include
---@param last? integer Last line to include (default: the last line)
---@return string excerpt The selected lines
function line_range(text, first, last)
  one_text("line_range", text)
  local all = not native and lines_of(text)
  local count = native and native.line_count(text) or #all
  if first < 0 then first = count + first + 1 end
  last = last or count
  if last < 0 then last = count + last + 1 end
  if first < 1 then first = 1 end
  if last > count then last = count end
  if first > last then
    return ""
  end
  if native then return native.join_lines(text, first, last) end
  return table.concat(all, "\n", first, last)
end

--- Returns the first `n` lines of a text, joined with "\n".
---
--- ```lua
--- head("a\nb\nc", 2) --> "a\nb"
--- ```
---@param text string The text
---@param n? integer How many lines (default 10)
---@return string excerpt The first lines
function head(text, n)
  one_text("head", text)
  n = n or 10
  if n <= 0 then
    return ""
  end
  if native then return native.join_lines(text, 1, n) end
  local taken = {}
  each_line(text, function(index, line)
    taken[index] = line
    return index < n
  end)
  return table.concat(taken, "\n")
end

--- Returns the last `n` lines of a text, joined with "\n".
---
--- ```lua
--- tail("a\nb\nc", 2) --> "b\nc"
--- ```
---@param text string The text
---@param n? integer How many lines (default 10)
---@return string excerpt The last lines
function tail(text, n)
  one_text("tail", text)
  n = n or 10
  if n <= 0 then
    return ""
  end
  if native then
    local count = native.line_count(text)
    return native.join_lines(text, math.max(1, count - n + 1), count)
  end
  local all = lines_of(text)
  local first = #all - n + 1
  if first < 1 then first = 1 end
  return table.concat(all, "\n", first, #all)
end
