-- Searching text: grep with context lines and every position of a substring.

-- The sandbox's Rust primitives (the same results, much faster); nil in a bare Lua VM,
-- where the pure-Lua code below runs instead.
local native = _text_primitives

-- The documents of a corpus: the sandbox's primitive, which model code cannot replace,
-- or the library's `doc_list` in a bare Lua VM.
local documents = native and native.doc_list or function(corpus) return doc_list(corpus) end

-- Finds matches of `pattern` line by line; each match carries `context` lines around it.
-- `plain` is true, false or "regex". Over a corpus, the matches of every document in
-- order, each with the document's `doc` and `name`.
local function collect_matches(text, pattern, context, plain)
  if native then
    local mode = plain == "regex" and "regex" or (plain and "plain" or "pattern")
    return native.grep(text, pattern, context, mode)
  end
  if plain == "regex" then
    error("grep: regular expressions need the sandbox's `re` built-in", 3)
  end
  if type(text) == "table" then
    local all = {}
    for _, document in ipairs(documents(text)) do
      for _, match in ipairs(collect_matches(document.text, pattern, context, plain)) do
        match.doc, match.name = document.doc, document.name
        all[#all + 1] = match
      end
    end
    return all
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
--- Over a corpus (a list of documents or of strings) every document is searched, in
--- order, and each match also has `doc` (the document's index) and `name` (its name);
--- `line` counts from 1 in each document.
---
--- ```lua
--- grep("ok\nERROR 42\nok", "ERROR %d+")[1].line --> 2
--- grep({{name = "a", text = "x"}, {name = "b", text = "ok\nx"}}, "x")[2].name --> "b"
--- ```
---@tag search
---@param text string|table The text to search, or a corpus
---@param pattern string A Lua pattern, or a plain substring when `plain` is true
---@param context? integer Context lines before and after each match (default 0)
---@param plain? boolean|string Match `pattern` literally when true; "regex" reads it as a regular expression (`re` syntax)
---@return table[] matches The matching lines, in order
function grep(text, pattern, context, plain)
  return collect_matches(text, pattern, context or 0, plain == "regex" and plain or plain == true)
end

-- Appends one document's matches to `out` in `grep -n -C` style, each line after
-- `label` (a document's name and its mark, or "" for one text).
local function report(matches, out, label)
  local is_match = {}
  for _, match in ipairs(matches) do
    is_match[match.line] = true
  end
  local last_printed = 0
  for _, match in ipairs(matches) do
    local first = match.line - #match.before
    local last = match.line + #match.after
    -- A new document's first group is always set apart from the one before.
    if #out > 0 and (last_printed == 0 or first > last_printed + 1) then
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
      local mark = is_match[number] and ":" or "-"
      out[#out + 1] = (label and label .. mark or "") .. number .. mark .. " " .. line
    end
    last_printed = last
  end
end

--- Like `grep`, but returns printable text in `grep -n -C` style: matching lines as
--- "12: text", context lines as "11- text", and "--" between non-adjacent groups.
--- Over a corpus each line starts with its document's name (its index for a string):
--- "notes.md:12: text", "notes.md-11- text".
---
--- ```lua
--- grep_text("a\nERROR\nb", "ERROR", 1) --> "1- a\n2: ERROR\n3- b"
--- grep_text({{name = "x.log", text = "ERROR"}}, "ERROR") --> "x.log:1: ERROR"
--- ```
---@param text string|table The text to search, or a corpus
---@param pattern string A Lua pattern, or a plain substring when `plain` is true
---@param context? integer Context lines before and after each match (default 0)
---@param plain? boolean|string Match `pattern` literally when true; "regex" reads it as a regular expression (`re` syntax)
---@return string report The matches with line numbers; "" when nothing matches
function grep_text(text, pattern, context, plain)
  local matches = collect_matches(text, pattern, context or 0, plain == "regex" and plain or plain == true)
  local out = {}
  if type(text) ~= "table" then
    report(matches, out, nil)
    return table.concat(out, "\n")
  end
  -- The matches come in document order: report each document's run of them.
  local first = 1
  while first <= #matches do
    local doc = matches[first].doc
    local last = first
    while matches[last + 1] and matches[last + 1].doc == doc do
      last = last + 1
    end
    local label = tostring(matches[first].name or doc)
    report(table.move(matches, first, last, 1, {}), out, label)
    first = last + 1
  end
  return table.concat(out, "\n")
end

-- The 1-based starts of `needle` in one text.
local function positions_of(text, needle, regex)
  if regex then
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

--- Finds every position of `needle` in a text (plain substring, not a pattern).
--- Overlapping occurrences are all reported: "aaa" has "aa" at 1 and 2.
--- With `regex`, `needle` is a regular expression (`re` syntax) and the starts of its
--- non-overlapping matches are reported.
--- Over a corpus (a list of documents or of strings) each occurrence is a table
--- `{doc = <document index>, name = <its name>, pos = <start in that document>,
--- line = <its line there>}`, in document order.
---
--- ```lua
--- find_all("abcabc", "bc") --> {2, 5}
--- find_all({"xa", "aa"}, "a")[3].pos --> 2
--- ```
---@param text string|table The text to search, or a corpus
---@param needle string The substring to find (must not be empty)
---@param regex? boolean Read `needle` as a regular expression (default false)
---@return table positions 1-based byte offsets where `needle` starts; over a corpus, `{doc, name, pos, line}` tables
function find_all(text, needle, regex)
  if needle == "" then
    error("find_all: needle must not be empty", 2)
  end
  if regex and not native then
    error("find_all: regular expressions need the sandbox's `re` built-in", 2)
  end
  if type(text) ~= "table" then
    return positions_of(text, needle, regex)
  end
  local found = {}
  for _, document in ipairs(documents(text)) do
    local body = document.text
    -- Positions come in order: each line's newlines are counted once.
    local line, counted = 1, 1
    for _, pos in ipairs(positions_of(body, needle, regex)) do
      while true do
        local newline = string.find(body, "\n", counted, true)
        if not newline or newline >= pos then break end
        line, counted = line + 1, newline + 1
      end
      found[#found + 1] = {doc = document.doc, name = document.name, pos = pos, line = line}
    end
  end
  return found
end
