-- Tests for lua/text: lines.lua, search.lua, counts.lua.
-- Run by tests/it/lua_library.rs, which loads the baked registry and defines `check`,
-- `check_error` and `show` first. Returns a table of test name -> function.

local T = {}

-- A ten-plus line text: "line 1\nline 2\n...\nline 12\n".
local function numbered(count)
  local out = {}
  for i = 1, count do
    out[i] = "line " .. i
  end
  return table.concat(out, "\n") .. "\n"
end

local FIVE = "one\ntwo\nthree\nfour\nfive\n"

-- lines ---------------------------------------------------------------------------

function T.lines_of_empty_text_is_empty()
  check(lines(""), {}, 'lines("")')
end

function T.lines_splits_on_newline()
  check(lines("a\nb\nc"), { "a", "b", "c" })
  check(lines("single"), { "single" })
end

function T.lines_ignores_a_single_trailing_newline()
  check(lines("a\nb\n"), { "a", "b" })
  check(lines("a\nb\n\n"), { "a", "b", "" }, "only the last newline is a terminator")
end

function T.lines_keeps_blank_lines()
  check(lines("a\n\nb"), { "a", "", "b" })
  check(lines("\na"), { "", "a" }, "leading blank line")
  check(lines("\n\n"), { "", "" })
  check(lines("  \n\t"), { "  ", "\t" }, "whitespace-only lines are kept verbatim")
end

function T.lines_of_a_lone_newline_is_one_empty_line()
  check(lines("\n"), { "" })
end

function T.lines_strips_crlf_terminators()
  check(lines("a\r\nb\r\n"), { "a", "b" })
  check(lines("a\r\nb\nc"), { "a", "b", "c" }, "mixed CRLF and LF")
  check(lines("a\r\n\r\nb"), { "a", "", "b" }, "blank CRLF line")
  check(lines("\r\n"), { "" })
end

function T.lines_keeps_a_carriage_return_inside_a_line()
  check(lines("a\rb\n"), { "a\rb" }, "a lone CR is not a line break")
  check(lines("a\r\r\nb"), { "a\r", "b" }, "only one CR before LF is stripped")
end

-- line_count ----------------------------------------------------------------------

function T.line_count_of_empty_text_is_zero()
  check(line_count(""), 0)
end

function T.line_count_ignores_a_trailing_newline()
  check(line_count("a"), 1)
  check(line_count("a\nb"), 2)
  check(line_count("a\nb\n"), 2)
  check(line_count("a\nb\n\n"), 3)
  check(line_count("\n"), 1)
end

function T.line_count_counts_crlf_lines_once()
  check(line_count("a\r\nb\r\n"), 2)
  check(line_count("a\r\n\r\nb"), 3)
end

function T.line_count_agrees_with_lines()
  for _, text in ipairs({ "", "\n", "x", "x\n", "a\r\nb", "a\n\n\nb\n", FIVE, numbered(12) }) do
    check(line_count(text), #lines(text), "line_count vs #lines for " .. show(text))
  end
end

-- line_range ----------------------------------------------------------------------

function T.line_range_selects_an_inclusive_range()
  check(line_range(FIVE, 2, 4), "two\nthree\nfour")
  check(line_range(FIVE, 3, 3), "three", "a single line")
  check(line_range(FIVE, 1, 5), "one\ntwo\nthree\nfour\nfive", "no trailing newline in the result")
end

function T.line_range_defaults_last_to_the_last_line()
  check(line_range(FIVE, 4), "four\nfive")
  check(line_range(FIVE, 1), "one\ntwo\nthree\nfour\nfive")
end

function T.line_range_counts_negative_bounds_from_the_end()
  check(line_range(FIVE, -1), "five", "-1 is the last line")
  check(line_range(FIVE, -2), "four\nfive")
  check(line_range(FIVE, -3, -2), "three\nfour")
  check(line_range(FIVE, 1, -1), "one\ntwo\nthree\nfour\nfive")
  check(line_range(FIVE, 2, -2), "two\nthree\nfour")
  check(line_range(FIVE, -5, 1), "one", "-5 is the first of five lines")
  check(line_range("a\nb\n", -1), "b", "the trailing newline does not add a last line")
end

function T.line_range_clamps_out_of_range_bounds()
  check(line_range(FIVE, 0, 2), "one\ntwo", "first 0 is clamped to 1")
  check(line_range(FIVE, -100, 2), "one\ntwo", "a negative first before the start is clamped")
  check(line_range(FIVE, 4, 100), "four\nfive", "last beyond the end is clamped")
  check(line_range(FIVE, -100, 100), "one\ntwo\nthree\nfour\nfive")
end

function T.line_range_is_empty_when_first_is_after_last()
  check(line_range(FIVE, 3, 2), "")
  check(line_range(FIVE, 6), "", "first beyond the end")
  check(line_range(FIVE, 100, 200), "")
  check(line_range(FIVE, -1, -2), "")
  check(line_range(FIVE, 2, 0), "", "last 0 selects nothing")
  check(line_range(FIVE, 1, -100), "", "last before the start selects nothing")
end

function T.line_range_of_empty_text_is_empty()
  check(line_range("", 1), "")
  check(line_range("", 1, 10), "")
  check(line_range("", -1), "")
  check(line_range("", -3, -1), "")
end

function T.line_range_joins_crlf_lines_with_lf()
  check(line_range("a\r\nb\r\nc\r\n", 2, 3), "b\nc")
  check(line_range("a\r\nb\r\nc\r\n", -1), "c")
end

-- head ----------------------------------------------------------------------------

function T.head_defaults_to_ten_lines()
  check(head(numbered(12)), table.concat(lines(numbered(10)), "\n"))
end

function T.head_returns_the_first_n_lines()
  check(head(FIVE, 2), "one\ntwo")
  check(head(FIVE, 1), "one")
  check(head(FIVE, 5), "one\ntwo\nthree\nfour\nfive")
end

function T.head_with_n_beyond_the_text_returns_every_line()
  check(head(FIVE, 6), "one\ntwo\nthree\nfour\nfive", "the trailing newline is dropped")
  check(head("a\nb", 100), "a\nb")
  check(head("a\n\n", 100), "a\n", "a blank last line is kept")
end

function T.head_with_zero_or_negative_n_is_empty()
  check(head(FIVE, 0), "")
  check(head(FIVE, -1), "")
end

function T.head_of_empty_text_is_empty()
  check(head(""), "")
  check(head("", 3), "")
end

function T.head_joins_crlf_lines_with_lf()
  check(head("a\r\nb\r\nc\r\n", 2), "a\nb")
end

-- tail ----------------------------------------------------------------------------

function T.tail_defaults_to_ten_lines()
  local text = numbered(12)
  check(tail(text), table.concat(lines(text), "\n", 3, 12))
end

function T.tail_returns_the_last_n_lines()
  check(tail(FIVE, 2), "four\nfive")
  check(tail(FIVE, 1), "five")
  check(tail(FIVE, 5), "one\ntwo\nthree\nfour\nfive")
end

function T.tail_ignores_a_trailing_newline()
  check(tail("a\nb\n", 1), "b")
  check(tail("a\nb", 1), "b")
  check(tail("a\nb\n\n", 1), "", "one blank last line")
  check(tail("a\r\nb\r\n", 2), "a\nb", "CRLF lines joined with LF")
end

function T.tail_with_n_beyond_the_text_returns_every_line()
  check(tail(FIVE, 6), "one\ntwo\nthree\nfour\nfive")
  check(tail("x", 100), "x")
end

function T.tail_with_zero_or_negative_n_is_empty()
  check(tail(FIVE, 0), "")
  check(tail(FIVE, -3), "")
end

function T.tail_of_empty_text_is_empty()
  check(tail(""), "")
  check(tail("", 3), "")
end

-- grep ----------------------------------------------------------------------------

local FRUIT = "apple\nbanana\ncherry\napricot\nblueberry\navocado\n"

function T.grep_returns_line_numbers_and_text_of_matches()
  check(grep(FRUIT, "^a"), {
    { line = 1, text = "apple", before = {}, after = {} },
    { line = 4, text = "apricot", before = {}, after = {} },
    { line = 6, text = "avocado", before = {}, after = {} },
  })
  check(grep(FRUIT, "an"), { { line = 2, text = "banana", before = {}, after = {} } })
end

function T.grep_without_matches_returns_an_empty_table()
  check(grep(FRUIT, "kiwi"), {})
  check(grep(FRUIT, "kiwi", 2, true), {})
end

function T.grep_of_empty_text_is_empty()
  check(grep("", "x"), {})
  check(grep("", ""), {}, "an empty pattern matches no line of an empty text")
  check(grep("", "", 3, true), {})
end

function T.grep_uses_lua_patterns_by_default()
  local text = "id 42\nname\nid 7\nx.y\nxzy\n"
  check(#grep(text, "%d+"), 2, "%d+ is a Lua pattern")
  check(grep(text, "x.y")[1].line, 4)
  check(#grep(text, "x.y"), 2, "'.' matches any character")
  check(#grep(text, "x.y", 0, false), 2, "plain = false is pattern mode")
  check(#grep("a\nb\n", ""), 2, "the empty pattern matches every line")
end

function T.grep_plain_matches_magic_characters_literally()
  local text = "x.y\nxzy\n100%\n(a)\n"
  check(grep(text, "x.y", 0, true), { { line = 1, text = "x.y", before = {}, after = {} } })
  check(grep(text, "100%", 0, true)[1].line, 3, "'%' is literal in plain mode")
  check(grep(text, "(a", 0, true)[1].line, 4, "'(' is literal in plain mode")
  check(grep(text, "%d+", 0, true), {}, "no pattern classes in plain mode")
end

function T.grep_reports_malformed_patterns()
  check_error(function() grep("(a)", "(a") end, "unfinished capture")
  check_error(function() grep_text("100%", "100%") end, "malformed pattern")
end

function T.grep_anchors_apply_to_each_line()
  check(#grep(FRUIT, "^b"), 2)
  check(#grep(FRUIT, "y$"), 2, "cherry and blueberry")
  check(grep("ab\nb\n", "^b$"), { { line = 2, text = "b", before = {}, after = {} } })
end

function T.grep_context_gives_lines_before_and_after()
  check(grep(FRUIT, "cherry", 1), {
    { line = 3, text = "cherry", before = { "banana" }, after = { "apricot" } },
  })
  check(grep(FRUIT, "cherry", 2), {
    { line = 3, text = "cherry", before = { "apple", "banana" }, after = { "apricot", "blueberry" } },
  })
end

function T.grep_context_is_clamped_at_the_text_boundaries()
  check(grep(FRUIT, "apple", 2), {
    { line = 1, text = "apple", before = {}, after = { "banana", "cherry" } },
  })
  check(grep(FRUIT, "avocado", 2), {
    { line = 6, text = "avocado", before = { "apricot", "blueberry" }, after = {} },
  })
  check(grep("only", "only", 5), { { line = 1, text = "only", before = {}, after = {} } })
end

function T.grep_gives_each_match_its_own_full_context()
  -- Tables are not merged: neighbouring matches repeat each other in their context.
  check(grep("a1\na2\nb\n", "a", 1), {
    { line = 1, text = "a1", before = {}, after = { "a2" } },
    { line = 2, text = "a2", before = { "a1" }, after = { "b" } },
  })
end

function T.grep_matches_crlf_lines_without_the_carriage_return()
  check(grep("a\r\nb\r\n", "b$"), { { line = 2, text = "b", before = {}, after = {} } })
  check(grep("a\r\nb\r\n", "\r", 0, true), {}, "no line keeps its CR")
end

-- grep_text -----------------------------------------------------------------------

local TEN = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n"

function T.grep_text_formats_matches_and_context_lines()
  check(grep_text(FRUIT, "cherry", 1), "2- banana\n3: cherry\n4- apricot")
  check(grep_text(FRUIT, "^a"), "1: apple\n--\n4: apricot\n--\n6: avocado")
  check(grep_text("x\n", "x"), "1: x", "no trailing newline")
end

function T.grep_text_without_matches_is_empty()
  check(grep_text(FRUIT, "kiwi"), "")
  check(grep_text(FRUIT, "kiwi", 3, true), "")
  check(grep_text("", "x", 1), "")
end

function T.grep_text_separates_non_adjacent_groups_with_dashes()
  check(grep_text(TEN, "^l[28]$", 1),
    "1- l1\n2: l2\n3- l3\n--\n7- l7\n8: l8\n9- l9")
  check(grep_text(TEN, "^l[29]$", 2),
    "1- l1\n2: l2\n3- l3\n4- l4\n--\n7- l7\n8- l8\n9: l9\n10- l10",
    "a gap of two lines (5, 6) between groups")
end

function T.grep_text_separates_non_adjacent_matches_without_context()
  check(grep_text(TEN, "^l[13]$"), "1: l1\n--\n3: l3")
end

function T.grep_text_joins_adjacent_matches_without_separator()
  check(grep_text(TEN, "^l[23]$"), "2: l2\n3: l3")
  check(grep_text(TEN, "^l[234]$", 1), "1- l1\n2: l2\n3: l3\n4: l4\n5- l5")
end

function T.grep_text_merges_touching_groups_without_separator()
  -- Context of line 2 ends at 3, context of line 5 starts at 4: one group.
  check(grep_text(TEN, "^l[25]$", 1), "1- l1\n2: l2\n3- l3\n4- l4\n5: l5\n6- l6")
end

function T.grep_text_merges_overlapping_context_without_repeating_lines()
  check(grep_text(TEN, "^l[46]$", 2),
    "2- l2\n3- l3\n4: l4\n5- l5\n6: l6\n7- l7\n8- l8")
  check(grep_text(TEN, "^l[456]$", 3),
    "1- l1\n2- l2\n3- l3\n4: l4\n5: l5\n6: l6\n7- l7\n8- l8\n9- l9")
end

function T.grep_text_marks_a_match_inside_earlier_context_as_a_match()
  -- Line 3 is in line 2's after-context, but it matches too: it must read "3:".
  check(grep_text(TEN, "^l[23]$", 2), "1- l1\n2: l2\n3: l3\n4- l4\n5- l5")
  check(grep_text("a\nb\na\nb\na\n", "a", 1), "1: a\n2- b\n3: a\n4- b\n5: a")
end

function T.grep_text_clamps_context_at_the_text_boundaries()
  check(grep_text(TEN, "^l1$", 3), "1: l1\n2- l2\n3- l3\n4- l4")
  check(grep_text(TEN, "^l10$", 3), "7- l7\n8- l8\n9- l9\n10: l10")
  check(grep_text("a\r\nb\r\n", "a", 5), "1: a\n2- b", "CRLF text, context past the end")
end

function T.grep_text_plain_matches_magic_characters_literally()
  local text = "x.y\nxzy\n"
  check(grep_text(text, "x.y", 0, true), "1: x.y")
  check(grep_text(text, "x.y", 0), "1: x.y\n2: xzy", "pattern mode by default")
end

-- find_all ------------------------------------------------------------------------

function T.find_all_returns_byte_positions_of_every_occurrence()
  check(find_all("abcabc", "bc"), { 2, 5 })
  check(find_all("hello", "hello"), { 1 })
  check(find_all("a\nb\na", "a"), { 1, 5 })
end

function T.find_all_reports_overlapping_occurrences()
  check(find_all("aaa", "aa"), { 1, 2 })
  check(find_all("aaaa", "aa"), { 1, 2, 3 })
  check(find_all("abababa", "aba"), { 1, 3, 5 })
end

function T.find_all_treats_the_needle_as_plain_text()
  check(find_all("a.b.c", "."), { 2, 4 })
  check(find_all("50% of 100%", "%"), { 3, 11 })
  check(find_all("(x)(y)", "("), { 1, 4 })
  check(find_all("abc", "a.c"), {}, "'.' is not a wildcard")
end

function T.find_all_without_occurrences_is_empty()
  check(find_all("abc", "d"), {})
  check(find_all("", "a"), {}, "empty text")
  check(find_all("ab", "abc"), {}, "needle longer than the text")
end

function T.find_all_reports_byte_offsets_in_utf8_text()
  check(find_all("éaé", "é"), { 1, 4 }, "é is two bytes")
  check(find_all("日本日本", "本"), { 4, 10 })
end

function T.find_all_rejects_an_empty_needle()
  check_error(function() find_all("abc", "") end, "find_all: needle must not be empty")
  check_error(function() find_all("", "") end, "needle must not be empty")
  local err = check_error(function() find_all("abc", "") end, "needle must not be empty")
  check(err:find("text_test.lua:", 1, true) ~= nil, true,
    "the error blames the caller, not find_all itself: " .. err)
end

-- word_count ----------------------------------------------------------------------

function T.word_count_of_empty_or_blank_text_is_zero()
  check(word_count(""), 0)
  check(word_count("   "), 0)
  check(word_count(" \t\r\n\n"), 0)
end

function T.word_count_splits_on_any_whitespace()
  check(word_count("one"), 1)
  check(word_count("one two"), 2)
  check(word_count("  one   two\tthree\nfour\r\nfive  "), 5)
end

function T.word_count_counts_punctuation_runs_as_words()
  check(word_count("hello, world!"), 2)
  check(word_count("a - b"), 3, "a lone dash is a word")
  check(word_count("don't stop-me"), 2)
end

function T.word_count_counts_utf8_words()
  check(word_count("café naïve 日本語"), 3)
end

-- char_count ----------------------------------------------------------------------

function T.char_count_of_empty_text_is_zero()
  check(char_count(""), 0)
end

function T.char_count_counts_ascii_characters()
  check(char_count("hello"), 5)
  check(char_count("a b\n"), 4, "spaces and newlines are characters")
  check(char_count("a\r\n"), 3, "CR and LF count separately")
end

function T.char_count_counts_utf8_characters_not_bytes()
  check(char_count("é"), 1)
  check(char_count("héllo"), 5)
  check(char_count("日本語"), 3)
  check(char_count("😀"), 1, "a four-byte character")
  check(char_count("a€😀\n"), 4)
end

function T.char_count_counts_invalid_utf8_byte_by_byte()
  check(char_count("\xff"), 1)
  check(char_count("\xff\xfe"), 2)
  check(char_count("\xC3"), 1, "a truncated sequence")
  check(char_count("é\xff"), 2, "valid characters still count once next to an invalid byte")
  check(char_count("\xffé"), 2)
  check(char_count("a\xC3b日"), 4)
  check(char_count("\x80\x80é"), 3, "stray continuation bytes count one each")
end

-- corpora: a list of documents (or of strings) given where a text goes ----------------

local CORPUS = {
  {name = "a.md", text = "one ERROR\ntwo\n"},
  {name = "pic.png", kind = "image"},
  "ERROR x\nERROR y",
}

function T.doc_list_reads_every_kind_of_context()
  check(doc_list("t"), {{doc = 1, text = "t"}})
  check(doc_list(CORPUS), {
    {doc = 1, name = "a.md", text = "one ERROR\ntwo\n"},
    {doc = 2, name = "pic.png", text = ""},
    {doc = 3, text = "ERROR x\nERROR y"},
  })
  check_error(function() doc_list(42) end, "expected a text or a list of documents, got number")
  check_error(function() doc_list({"a", true}) end, "document 2 is a boolean")
end

function T.counts_of_a_corpus_are_totals()
  check(line_count(CORPUS), 4)
  check(word_count(CORPUS), 7)
  check(char_count({"é", "ab"}), 3)
  check(#lines(CORPUS), 4)
end

function T.grep_of_a_corpus_says_where_each_match_is()
  local matches = grep(CORPUS, "ERROR")
  check(#matches, 3)
  check({matches[1].doc, matches[1].name, matches[1].line}, {1, "a.md", 1})
  check({matches[3].doc, matches[3].name, matches[3].line, matches[3].text}, {3, nil, 2, "ERROR y"})
  check(grep_text(CORPUS, "ERROR"), "a.md:1: one ERROR\n--\n3:1: ERROR x\n3:2: ERROR y")
  check(find_all(CORPUS, "ERROR"), {
    {doc = 1, name = "a.md", pos = 5, line = 1},
    {doc = 3, pos = 1, line = 1},
    {doc = 3, pos = 9, line = 2},
  })
end

function T.one_text_functions_refuse_a_corpus()
  check_error(function() head(CORPUS) end, "head: takes one text, not a corpus")
  check_error(function() tail(CORPUS, 1) end, "tail: takes one text, not a corpus")
  check_error(function() line_range(CORPUS, 1, 2) end, "line_range: takes one text, not a corpus")
end

return T
