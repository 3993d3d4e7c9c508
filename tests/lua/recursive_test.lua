-- Tests for lua/recursive: map_chunks, map_reduce, find_in_chunks, against fake
-- built-ins (the real ones are tested in tests/it/builtins.rs). Run by tests/it/lua_library.rs.

local T = {}

-- Fakes that record their prompts and answer deterministically.
local calls
local function install_fakes(answer_for)
  calls = { batched = {}, single = {} }
  llm_query_batched = function(prompts)
    calls.batched[#calls.batched + 1] = prompts
    local answers = {}
    for i, prompt in ipairs(prompts) do
      answers[i] = answer_for(prompt, i)
    end
    return answers
  end
  llm_query = function(prompt)
    calls.single[#calls.single + 1] = prompt
    return "combined"
  end
  token_split = function(text, n)
    -- Fake tokens: one per word.
    local pieces, current, count = {}, {}, 0
    for word in string.gmatch(text, "%S+") do
      current[#current + 1] = word
      count = count + 1
      if count == n then
        pieces[#pieces + 1] = table.concat(current, " ")
        current, count = {}, 0
      end
    end
    if #current > 0 then pieces[#pieces + 1] = table.concat(current, " ") end
    return pieces
  end
end

function T.map_chunks_asks_every_chunk_in_one_batch()
  install_fakes(function(_, i) return "answer " .. i end)
  local answers = map_chunks({ "alpha", "beta", "gamma" }, "What is it?")
  check(answers, { "answer 1", "answer 2", "answer 3" })
  check(#calls.batched, 1, "one batched call")
  local first = calls.batched[1][1]
  check(string.find(first, "What is it?", 1, true) ~= nil, true, "question in prompt")
  check(string.find(first, "<text>\nalpha\n</text>", 1, true) ~= nil, true, "chunk delimited")
  check(string.find(calls.batched[1][3], "part 3 of 3", 1, true) ~= nil, true, "position")
end

function T.map_chunks_of_nothing_makes_no_call()
  install_fakes(function() return "x" end)
  check(map_chunks({}, "q"), {})
  check(#calls.batched, 0)
end

function T.map_reduce_combines_partial_answers_with_one_more_call()
  install_fakes(function(_, i) return "partial " .. i end)
  local answer = map_reduce("one two three four five", "Count?", 2)
  check(answer, "combined")
  check(#calls.batched[1], 3, "three chunks of at most two words")
  check(#calls.single, 1)
  local combine = calls.single[1]
  check(string.find(combine, "<answer part=\"3\">\npartial 3\n</answer>", 1, true) ~= nil, true)
end

function T.map_reduce_of_one_chunk_needs_no_combining()
  install_fakes(function() return "only" end)
  check(map_reduce("short text", "Q?"), "only")
  check(#calls.single, 0)
end

function T.find_in_chunks_keeps_chunks_answered_yes()
  install_fakes(function(prompt)
    -- Only the chunk counts: the question mentions the needle too.
    if string.find(prompt, "<text>\n[^\n]*needle") then return " yes, it does" end
    return "NO"
  end)
  local found = find_in_chunks({ "hay", "a needle here", "hay", "needle again" }, "Where is the needle?")
  check(found, { 2, 4 })
end

return T
