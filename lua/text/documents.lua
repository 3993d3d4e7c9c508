-- Documents: the one reading of a corpus that the text functions share.

-- The sandbox's Rust primitives (the same results, much faster); nil in a bare Lua VM,
-- where the pure-Lua code below runs instead.
local native = _text_primitives

--- The documents of any context as `{doc, name, text}` tables, for one loop over all.
--- `doc` is the document's index, `name` its name, `text` its text (the same string, not
--- a copy): for a corpus (a list of document tables, as `context` is for a folder), a
--- list of strings (no names), or one text (one document without a name). A document
--- without text (an image) gives "".
---
--- ```lua
--- doc_list({{name = "a.md", text = "x"}, "y"})[2].text --> "y"
--- ```
---@tag text
---@param corpus string|table A text, a list of documents, or a list of strings
---@return table[] documents One `{doc, name, text}` table per document, in order
function doc_list(corpus)
  if type(corpus) == "string" then
    return {{doc = 1, text = corpus}}
  end
  if type(corpus) ~= "table" then
    error("doc_list: expected a text or a list of documents, got " .. type(corpus), 2)
  end
  if native then return native.doc_list(corpus) end
  local documents = {}
  for i, document in ipairs(corpus) do
    if type(document) == "table" then
      local text = document.text
      documents[i] = {doc = i, name = document.name, text = type(text) == "string" and text or ""}
    elseif type(document) == "string" then
      documents[i] = {doc = i, text = document}
    else
      error("doc_list: document " .. i .. " is a " .. type(document) .. ", not a document table or a string", 2)
    end
  end
  return documents
end
