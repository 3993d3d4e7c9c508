-- Recursive helpers: fan sub-model calls out over chunks of a large text and combine the
-- answers. They use the built-ins llm_query, llm_query_batched and token_split.

-- The prompt for one chunk: the question first, then the chunk, clearly delimited.
local function chunk_prompt(question, chunk, index, count)
  return string.format(
    "%s\n\nAnswer using only the text below (part %d of %d of a larger document).\n\n<text>\n%s\n</text>",
    question, index, count, chunk)
end

-- The prompt that combines partial answers into one.
local function combine_prompt(question, answers)
  local parts = {}
  for i, answer in ipairs(answers) do
    parts[#parts + 1] = string.format("<answer part=\"%d\">\n%s\n</answer>", i, answer)
  end
  return string.format(
    "%s\n\nBelow are answers to this question, each from a different part of a document. Combine them into one answer; ignore parts that found nothing.\n\n%s",
    question, table.concat(parts, "\n\n"))
end

--- Asks the same question about every chunk, concurrently: one sub-model call per chunk.
---
--- ```lua
--- local answers = map_chunks(chunk_by_lines(context, 500), "List the error codes")
--- ```
---@param chunks string[] The pieces of text, e.g. from chunk_by_lines or token_split
---@param question string What to ask about each piece
---@return string[] answers One answer per chunk, in order ("error: ..." for a failed call)
function map_chunks(chunks, question)
  local prompts = {}
  for i, chunk in ipairs(chunks) do
    prompts[i] = chunk_prompt(question, chunk, i, #chunks)
  end
  if #prompts == 0 then
    return {}
  end
  return llm_query_batched(prompts)
end

--- Answers a question about a text too large for one call (map-reduce): splits it into
--- chunks of at most `chunk_tokens` tokens, asks the question of every chunk concurrently,
--- then combines the partial answers with one more call.
---
--- ```lua
--- local answer = map_reduce(context, "Who is mentioned most often?")
--- ```
---@param text string The text, e.g. `context`
---@param question string The question
---@param chunk_tokens? integer Tokens per chunk (default 20000)
---@return string answer The combined answer
function map_reduce(text, question, chunk_tokens)
  local chunks = token_split(text, chunk_tokens or 20000)
  local answers = map_chunks(chunks, question)
  if #answers == 0 then
    return llm_query(question)
  end
  if #answers == 1 then
    return answers[1]
  end
  return llm_query(combine_prompt(question, answers))
end

--- Finds the chunks that are relevant to a question: asks of every chunk, concurrently,
--- whether it is relevant, and keeps those the model answers YES for.
---
--- ```lua
--- local relevant = find_in_chunks(chunk_by_lines(context, 500), "Is a refund discussed?")
--- ```
---@param chunks string[] The pieces of text
---@param question string What to look for
---@return integer[] indices The 1-based indices of the relevant chunks, in order
function find_in_chunks(chunks, question)
  local answers = map_chunks(chunks,
    "Does the text below contain information relevant to this question? Answer YES or NO only.\nQuestion: " .. question)
  local found = {}
  for i, answer in ipairs(answers) do
    if string.find(string.upper(answer), "^%s*YES") then
      found[#found + 1] = i
    end
  end
  return found
end
