-- Chunking: cut a large text into pieces small enough for a sub-model.

-- The sandbox's Rust primitives (the same results, much faster); nil in a bare Lua VM,
-- where the pure-Lua code below runs instead.
local native = _text_primitives

-- The documents of a corpus: the sandbox's primitive, which model code cannot replace,
-- or the library's `doc_list` in a bare Lua VM.
local documents = native and native.doc_list or function(corpus) return doc_list(corpus) end

-- The largest end position in [floor, stop] that does not cut a UTF-8 character in two
-- (the end of the text when `stop` is past it), or nil when there is none.
local function utf8_safe_end(text, stop, floor)
  if stop >= #text then
    return #text
  end
  for candidate = stop, floor, -1 do
    -- A boundary when the next byte is not a continuation byte (0x80-0xBF).
    local next_byte = string.byte(text, candidate + 1)
    if next_byte < 0x80 or next_byte >= 0xC0 then
      return candidate
    end
  end
  return nil
end

-- `chunk_one(text)` of a text; over a corpus, the chunks of every document (no chunk
-- crosses a document), then where each comes from: `{doc = <index>, name = <name>}`.
local function chunks_of(text, chunk_one)
  if type(text) ~= "table" then
    return chunk_one(text)
  end
  local chunks, where = {}, {}
  for _, document in ipairs(documents(text)) do
    for _, chunk in ipairs(chunk_one(document.text)) do
      chunks[#chunks + 1] = chunk
      where[#where + 1] = {doc = document.doc, name = document.name}
    end
  end
  return chunks, where
end

-- `chunk_by_lines` of one text, arguments checked.
local function line_chunks(text, n, overlap)
  if native then return native.chunk_by_lines(text, n, overlap) end
  local all = lines(text)
  local chunks = {}
  local first = 1
  while first <= #all do
    local last = math.min(first + n - 1, #all)
    chunks[#chunks + 1] = table.concat(all, "\n", first, last)
    if last == #all then break end
    first = last - overlap + 1
  end
  return chunks
end

-- `chunk_by_separator` of one text, arguments checked.
local function separator_chunks(text, separator, max_size)
  if native then return native.chunk_by_separator(text, separator, max_size) end
  local pieces = {}
  local start = 1
  while start <= #text + 1 do
    local found = string.find(text, separator, start, true)
    local piece = string.sub(text, start, (found or (#text + 1)) - 1)
    if piece ~= "" then pieces[#pieces + 1] = piece end
    if not found then break end
    start = found + #separator
  end
  if not max_size then
    return pieces
  end
  local chunks = {}
  local current = nil
  for _, piece in ipairs(pieces) do
    if current and #current + #separator + #piece <= max_size then
      current = current .. separator .. piece
    else
      if current then chunks[#chunks + 1] = current end
      current = piece
    end
  end
  if current then chunks[#chunks + 1] = current end
  return chunks
end

-- `chunk_by_size` of one text, arguments checked.
local function size_chunks(text, size, overlap)
  if native then return native.chunk_by_size(text, size, overlap) end
  local chunks = {}
  local first = 1
  local length = #text
  while first <= length do
    -- Only invalid UTF-8 (a run of continuation bytes) leaves no boundary to cut at.
    local last = utf8_safe_end(text, first + size - 1, first) or (first + size - 1)
    chunks[#chunks + 1] = string.sub(text, first, last)
    if last >= length then break end
    -- Start the next chunk at a boundary about `overlap` bytes back, but after `first`;
    -- without such a boundary (one wide character), the chunks do not overlap.
    local resume = last
    if overlap > 0 then
      resume = utf8_safe_end(text, last - overlap, first) or last
    end
    first = resume + 1
  end
  return chunks
end

--- Splits a text into chunks of `n` lines each; consecutive chunks may share
--- `overlap` lines. Chunks are joined with "\n".
--- Over a corpus (a list of documents or of strings) each document is chunked on its
--- own, so no chunk crosses two documents, and a second list gives each chunk's
--- `{doc, name}`: `chunks, where = chunk_by_lines(context, 200)`.
---
--- ```lua
--- chunk_by_lines("a\nb\nc", 2) --> {"a\nb", "c"}
--- select(2, chunk_by_lines({"a\nb\nc", "d"}, 2))[3].doc --> 2
--- ```
---@param text string|table The text to split, or a corpus
---@param n integer Lines per chunk (at least 1)
---@param overlap? integer Lines repeated from the end of the previous chunk (default 0, less than n)
---@return string[] chunks The chunks, in order
---@return table[]? where Over a corpus only: each chunk's document, `{doc, name}`
function chunk_by_lines(text, n, overlap)
  overlap = overlap or 0
  if n < 1 then error("chunk_by_lines: n must be at least 1", 2) end
  if overlap < 0 or overlap >= n then error("chunk_by_lines: overlap must be in [0, n)", 2) end
  return chunks_of(text, function(one) return line_chunks(one, n, overlap) end)
end

--- Splits a text on a separator (a plain string, e.g. "\n\n" for paragraphs), dropping
--- empty pieces. With `max_size`, consecutive pieces are merged (re-joined with the
--- separator) while the merged chunk stays within `max_size` bytes.
--- Over a corpus, each document on its own, and a second list of each chunk's
--- `{doc, name}` (as `chunk_by_lines`).
---
--- ```lua
--- chunk_by_separator("p1\n\np2\n\np3", "\n\n", 6) --> {"p1\n\np2", "p3"}
--- ```
---@param text string|table The text to split, or a corpus
---@param separator string The separator (plain text, not a pattern; not empty)
---@param max_size? integer Merge pieces up to this many bytes per chunk
---@return string[] chunks The chunks, in order
---@return table[]? where Over a corpus only: each chunk's document, `{doc, name}`
function chunk_by_separator(text, separator, max_size)
  if separator == "" then error("chunk_by_separator: separator must not be empty", 2) end
  return chunks_of(text, function(one) return separator_chunks(one, separator, max_size) end)
end

--- Splits a text into chunks of at most `size` bytes, never cutting a UTF-8
--- character; consecutive chunks share about `overlap` bytes.
--- Over a corpus, each document on its own, and a second list of each chunk's
--- `{doc, name}` (as `chunk_by_lines`).
---
--- ```lua
--- chunk_by_size("abcdefgh", 4) --> {"abcd", "efgh"}
--- ```
---@param text string|table The text to split, or a corpus
---@param size integer Maximum bytes per chunk (at least 4, so any character fits)
---@param overlap? integer Bytes repeated from the end of the previous chunk (default 0, less than size / 2)
---@return string[] chunks The chunks, in order
---@return table[]? where Over a corpus only: each chunk's document, `{doc, name}`
function chunk_by_size(text, size, overlap)
  overlap = overlap or 0
  if size < 4 then error("chunk_by_size: size must be at least 4", 2) end
  if overlap < 0 or overlap * 2 >= size then error("chunk_by_size: overlap must be in [0, size / 2)", 2) end
  return chunks_of(text, function(one) return size_chunks(one, size, overlap) end)
end
