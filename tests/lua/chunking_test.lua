-- Tests for lua/chunking: chunk_by_lines, chunk_by_separator, chunk_by_size.
-- Run by tests/it/lua_library.rs, which loads the baked registry and defines `check`,
-- `check_error` and `show` first. Returns a table of test name -> function.

local T = {}

local FIVE = "1\n2\n3\n4\n5\n"

-- Text mixing 1-, 2-, 3- and 4-byte UTF-8 characters.
local MIXED = "aé日😀bc€ß😀😀d\nxyz日本語éé😀"

-- Whether `chunks` can be laid over `text` in order: the first starting at byte 1, each
-- next one starting after the previous one starts and no later than just after it ends,
-- the last ending at the end of the text. Tries every consistent start (memoized), so
-- repetitive text cannot mislead it.
local function covers(text, chunks)
  local failed = {}
  local function place(i, previous_first, previous_last)
    if i > #chunks then
      return previous_last == #text
    end
    local chunk = chunks[i]
    local from = i == 1 and 1 or previous_first + 1
    local to = i == 1 and 1 or previous_last + 1
    for start = from, to do
      local key = i .. ":" .. start
      if not failed[key] and string.sub(text, start, start + #chunk - 1) == chunk then
        if place(i + 1, start, start + #chunk - 1) then
          return true
        end
        failed[key] = true
      end
    end
    return false
  end
  return place(1, 0, 0)
end

-- Checks the invariants of `chunk_by_size(text, size, overlap)` and returns the chunks:
-- every chunk is non-empty, at most `size` bytes and valid UTF-8 (when the text is), and
-- together they cover the text in order (see `covers`). Without overlap the chunks
-- concatenate back to the text.
local function check_size_chunks(text, size, overlap)
  local chunks = chunk_by_size(text, size, overlap)
  local label = string.format("chunk_by_size(%s, %d, %d) = %s", show(text), size, overlap or 0, show(chunks))
  local valid = utf8.len(text) ~= nil
  for i, chunk in ipairs(chunks) do
    local where = label .. ": chunk " .. i .. " " .. show(chunk)
    check(#chunk >= 1 and #chunk <= size, true, where .. " must have 1 to size bytes")
    if valid then
      check(utf8.len(chunk) ~= nil, true, where .. " cuts a UTF-8 character")
    end
  end
  if text ~= "" then
    check(covers(text, chunks), true, label .. ": the chunks must cover the text in order")
  end
  if (overlap or 0) == 0 then
    check(table.concat(chunks), text, label .. ": chunks without overlap rebuild the text")
  end
  return chunks
end

-- chunk_by_lines ------------------------------------------------------------------

function T.chunk_by_lines_of_empty_text_is_empty()
  check(chunk_by_lines("", 3), {})
  check(chunk_by_lines("", 3, 1), {})
end

function T.chunk_by_lines_groups_n_lines_per_chunk()
  check(chunk_by_lines(FIVE, 2), { "1\n2", "3\n4", "5" })
  check(chunk_by_lines(FIVE, 1), { "1", "2", "3", "4", "5" })
end

function T.chunk_by_lines_exact_multiple_has_no_empty_last_chunk()
  check(chunk_by_lines("1\n2\n3\n4\n", 2), { "1\n2", "3\n4" })
  check(chunk_by_lines(FIVE, 5), { "1\n2\n3\n4\n5" })
end

function T.chunk_by_lines_with_n_beyond_the_text_gives_one_chunk()
  check(chunk_by_lines(FIVE, 100), { "1\n2\n3\n4\n5" })
  check(chunk_by_lines("only", 3, 2), { "only" })
end

function T.chunk_by_lines_ignores_trailing_newline_and_crlf()
  check(chunk_by_lines("a\r\nb\r\nc\r\n", 2), { "a\nb", "c" })
  check(chunk_by_lines("\n", 2), { "" }, "a lone newline is one empty line")
end

function T.chunk_by_lines_keeps_blank_lines()
  check(chunk_by_lines("a\n\n\nb\n", 2), { "a\n", "\nb" })
end

function T.chunk_by_lines_without_overlap_covers_every_line_once()
  local text = "l1\nl2\nl3\nl4\nl5\nl6\nl7\n"
  for n = 1, 8 do
    local chunks = chunk_by_lines(text, n)
    check(table.concat(chunks, "\n"), table.concat(lines(text), "\n"), "n = " .. n)
    check(#chunks, math.ceil(7 / n), "chunk count for n = " .. n)
  end
end

function T.chunk_by_lines_overlap_repeats_the_last_lines_of_the_previous_chunk()
  check(chunk_by_lines(FIVE, 3, 1), { "1\n2\n3", "3\n4\n5" })
  check(chunk_by_lines("1\n2\n3\n4\n5\n6", 3, 1), { "1\n2\n3", "3\n4\n5", "5\n6" })
  check(chunk_by_lines("1\n2\n3\n4\n5\n6", 3, 2), { "1\n2\n3", "2\n3\n4", "3\n4\n5", "4\n5\n6" })
  check(chunk_by_lines(FIVE, 2, 0), { "1\n2", "3\n4", "5" }, "overlap 0 is no overlap")
end

function T.chunk_by_lines_overlap_stops_at_the_last_line()
  -- No trailing chunk made only of lines the previous chunk already holds.
  check(chunk_by_lines("1\n2\n3\n4", 2, 1), { "1\n2", "2\n3", "3\n4" })
  check(chunk_by_lines(FIVE, 5, 4), { "1\n2\n3\n4\n5" })
  check(chunk_by_lines("1\n2", 3, 2), { "1\n2" })
end

function T.chunk_by_lines_rejects_n_below_one()
  check_error(function() chunk_by_lines(FIVE, 0) end, "chunk_by_lines: n must be at least 1")
  check_error(function() chunk_by_lines(FIVE, -2) end, "n must be at least 1")
  check_error(function() chunk_by_lines("", 0) end, "n must be at least 1", "even for empty text")
end

function T.chunk_by_lines_rejects_overlap_outside_zero_to_n()
  check_error(function() chunk_by_lines(FIVE, 3, -1) end, "chunk_by_lines: overlap must be in [0, n)")
  check_error(function() chunk_by_lines(FIVE, 3, 3) end, "overlap must be in [0, n)")
  check_error(function() chunk_by_lines(FIVE, 3, 4) end, "overlap must be in [0, n)")
  check_error(function() chunk_by_lines(FIVE, 1, 1) end, "overlap must be in [0, n)")
  check(chunk_by_lines(FIVE, 3, 2)[1], "1\n2\n3", "overlap n - 1 is allowed")
end

-- chunk_by_separator --------------------------------------------------------------

function T.chunk_by_separator_splits_on_the_separator()
  check(chunk_by_separator("a\n\nb\n\nc", "\n\n"), { "a", "b", "c" })
  check(chunk_by_separator("x,y", ","), { "x", "y" })
end

function T.chunk_by_separator_drops_empty_pieces()
  check(chunk_by_separator(",a,,b,", ","), { "a", "b" }, "leading, doubled and trailing separators")
  check(chunk_by_separator("a\n\n\n\nb\n\n", "\n\n"), { "a", "b" })
  check(chunk_by_separator(",,,", ","), {}, "only separators")
  check(chunk_by_separator("a\n\n\nb", "\n\n"), { "a", "\nb" }, "a leftover newline is not empty")
end

function T.chunk_by_separator_of_empty_text_is_empty()
  check(chunk_by_separator("", ","), {})
  check(chunk_by_separator("", ",", 10), {})
end

function T.chunk_by_separator_without_separator_in_text_returns_the_whole_text()
  check(chunk_by_separator("abc", ","), { "abc" })
  check(chunk_by_separator("abc", ",", 100), { "abc" })
  check(chunk_by_separator("a", "abc"), { "a" }, "separator longer than the text")
end

function T.chunk_by_separator_treats_the_separator_as_plain_text()
  check(chunk_by_separator("a.b.c", "."), { "a", "b", "c" })
  check(chunk_by_separator("a%b%c", "%"), { "a", "b", "c" })
  check(chunk_by_separator("a%sb c", "%s"), { "a", "b c" }, "%s is not a whitespace class")
  check(chunk_by_separator("x(y", "("), { "x", "y" })
end

function T.chunk_by_separator_splits_on_a_multi_character_separator()
  check(chunk_by_separator("a--b---c", "--"), { "a", "b", "-c" })
  check(chunk_by_separator("a\r\n\r\nb", "\r\n\r\n"), { "a", "b" })
  check(chunk_by_separator("éxéyé", "é"), { "x", "y" }, "a multibyte separator")
end

function T.chunk_by_separator_merges_pieces_up_to_max_size()
  local text = "aa,bb,cc,dd"
  check(chunk_by_separator(text, ",", 5), { "aa,bb", "cc,dd" }, "max_size is inclusive")
  check(chunk_by_separator(text, ",", 8), { "aa,bb,cc", "dd" })
  check(chunk_by_separator(text, ",", 11), { "aa,bb,cc,dd" })
  check(chunk_by_separator(text, ",", 100), { "aa,bb,cc,dd" })
  check(chunk_by_separator(text, ",", 4), { "aa", "bb", "cc", "dd" }, "no two pieces fit")
  check(chunk_by_separator("a,bbbb,c,d", ",", 4), { "a", "bbbb", "c,d" })
end

function T.chunk_by_separator_merge_counts_separator_bytes()
  check(chunk_by_separator("a\n\nb", "\n\n", 3), { "a", "b" }, "1 + 2 + 1 bytes do not fit in 3")
  check(chunk_by_separator("a\n\nb", "\n\n", 4), { "a\n\nb" })
  check(chunk_by_separator("é,é", ",", 4), { "é", "é" }, "sizes are bytes, not characters")
  check(chunk_by_separator("é,é", ",", 5), { "é,é" })
end

function T.chunk_by_separator_keeps_an_oversized_piece_whole()
  check(chunk_by_separator("abcdefgh,a,b", ",", 3), { "abcdefgh", "a,b" })
  check(chunk_by_separator("a,abcdefgh,b", ",", 3), { "a", "abcdefgh", "b" })
  check(chunk_by_separator("abcdefgh", ",", 1), { "abcdefgh" })
end

function T.chunk_by_separator_merge_skips_dropped_empty_pieces()
  check(chunk_by_separator("a,,b", ",", 10), { "a,b" }, "re-joined with one separator")
  check(chunk_by_separator(",a,,,b,", ",", 3), { "a,b" })
end

function T.chunk_by_separator_rejects_an_empty_separator()
  check_error(function() chunk_by_separator("abc", "") end,
    "chunk_by_separator: separator must not be empty")
  check_error(function() chunk_by_separator("", "", 10) end, "separator must not be empty")
end

-- chunk_by_size -------------------------------------------------------------------

function T.chunk_by_size_of_empty_text_is_empty()
  check(chunk_by_size("", 4), {})
  check(chunk_by_size("", 10, 3), {})
end

function T.chunk_by_size_cuts_ascii_into_fixed_size_pieces()
  check(chunk_by_size("abcdefghij", 4), { "abcd", "efgh", "ij" })
  check(chunk_by_size("abcdefghij", 5), { "abcde", "fghij" })
end

function T.chunk_by_size_text_shorter_than_size_is_one_chunk()
  check(chunk_by_size("abc", 10), { "abc" })
  check(chunk_by_size("abcd", 4), { "abcd" })
  check(chunk_by_size("a", 4, 1), { "a" })
end

function T.chunk_by_size_exact_multiple_has_no_empty_last_chunk()
  check(chunk_by_size("abcdefgh", 4), { "abcd", "efgh" })
end

function T.chunk_by_size_counts_bytes_not_characters()
  check(chunk_by_size("éééé", 4), { "éé", "éé" })
  check(chunk_by_size("éééé", 5), { "éé", "éé" }, "a fifth byte would cut the third é")
  check(chunk_by_size("日本語", 6), { "日本", "語" })
end

function T.chunk_by_size_keeps_crlf_bytes_verbatim()
  check(chunk_by_size("a\r\nb", 4), { "a\r\nb" })
  check(chunk_by_size("a\r\nb\r\n", 4), { "a\r\nb", "\r\n" }, "a CRLF may be split across chunks")
end

function T.chunk_by_size_never_cuts_a_multibyte_character()
  check(chunk_by_size("abcé", 4), { "abc", "é" })
  check(chunk_by_size("abc😀", 4), { "abc", "😀" })
  check(chunk_by_size("😀😀", 4), { "😀", "😀" })
  check(chunk_by_size("a😀", 4), { "a", "😀" })
  for size = 4, 16 do
    check_size_chunks(MIXED, size)
    check_size_chunks("😀😀😀😀", size)
    check_size_chunks("aéé日日😀😀", size)
  end
end

function T.chunk_by_size_overlap_repeats_bytes_of_the_previous_chunk()
  check(chunk_by_size("abcdefghij", 4, 1), { "abcd", "defg", "ghij" })
  check(chunk_by_size("abcdefghij", 6, 2), { "abcdef", "efghij" })
  check(chunk_by_size("abcdefghij", 5, 2), { "abcde", "defgh", "ghij" })
end

function T.chunk_by_size_overlap_never_starts_inside_a_character()
  -- The overlap grows to the previous character boundary ("about `overlap` bytes").
  check(chunk_by_size("ééé", 4, 1), { "éé", "éé" })
  check(chunk_by_size("😀😀😀", 4, 1), { "😀", "😀", "😀" },
    "no overlap is possible when a chunk holds a single character")
  check(chunk_by_size("😀😀😀", 7, 3), { "😀", "😀", "😀" })
  for size = 4, 16 do
    for overlap = 0, (size - 1) // 2 do
      check_size_chunks(MIXED, size, overlap)
      check_size_chunks("😀😀😀😀", size, overlap)
      check_size_chunks("aéé日日😀😀", size, overlap)
    end
  end
end

function T.chunk_by_size_overlap_always_makes_progress()
  for size = 4, 9 do
    for overlap = 0, (size - 1) // 2 do
      local text = string.rep("x", 50)
      local chunks = check_size_chunks(text, size, overlap)
      check(#chunks <= 50, true, "finite progress for size " .. size .. ", overlap " .. overlap)
    end
  end
end

function T.chunk_by_size_keeps_every_byte_of_invalid_utf8()
  local broken = "abc\xC3" .. string.rep("\x80", 10)
  check(table.concat(check_size_chunks(broken, 4)), broken)
  check_size_chunks(broken, 4, 1)
  check_size_chunks(string.rep("\x80", 9), 4)
  check_size_chunks("\xff\xfe\xfd\xfc\xfb", 4, 1)
end

function T.chunk_by_size_rejects_size_below_four()
  check_error(function() chunk_by_size("abc", 3) end, "chunk_by_size: size must be at least 4")
  check_error(function() chunk_by_size("abc", 0) end, "size must be at least 4")
  check_error(function() chunk_by_size("", -1) end, "size must be at least 4", "even for empty text")
end

function T.chunk_by_size_rejects_overlap_outside_zero_to_half_size()
  check_error(function() chunk_by_size("abcdef", 4, -1) end,
    "chunk_by_size: overlap must be in [0, size / 2)")
  check_error(function() chunk_by_size("abcdef", 4, 2) end, "overlap must be in [0, size / 2)")
  check_error(function() chunk_by_size("abcdef", 10, 5) end, "overlap must be in [0, size / 2)")
  check(#chunk_by_size("abcdef", 5, 2), 2, "overlap 2 < 5 / 2 is allowed")
end

function T.argument_errors_blame_the_caller()
  local calls = {
    function() chunk_by_lines("a", 0) end,
    function() chunk_by_lines("a", 2, 2) end,
    function() chunk_by_separator("a", "") end,
    function() chunk_by_size("a", 1) end,
    function() chunk_by_size("a", 4, 2) end,
  }
  for i, call in ipairs(calls) do
    local ok, err = pcall(call)
    check(ok, false, "call " .. i .. " must fail")
    check(tostring(err):find("chunking_test.lua:", 1, true) ~= nil, true,
      "call " .. i .. " should be reported at the caller's line: " .. tostring(err))
  end
end

-- corpora ------------------------------------------------------------------------------

function T.chunks_of_a_corpus_stay_within_their_document()
  local corpus = {{name = "a", text = "1\n2\n3"}, "4\n5"}
  local chunks, where = chunk_by_lines(corpus, 2)
  check(chunks, {"1\n2", "3", "4\n5"})
  check(where, {{doc = 1, name = "a"}, {doc = 1, name = "a"}, {doc = 2}})
  chunks, where = chunk_by_size({"abcdef", "gh"}, 4)
  check(chunks, {"abcd", "ef", "gh"})
  check(where[3].doc, 2)
  chunks, where = chunk_by_separator({"p1\n\np2", "p3"}, "\n\n")
  check(chunks, {"p1", "p2", "p3"})
  check(where[2].doc, 1)
  check(select("#", chunk_by_lines("a", 1)), 1, "one text: one result, as before")
end

return T
