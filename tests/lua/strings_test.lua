-- Tests for lua/strings. Run by tests/it/lua_library.rs in a bare VM and in the sandbox.
-- Expected values are Python's str methods on the same inputs.

local T = {}

-- split ---------------------------------------------------------------------------------

function T.split_without_separator_splits_on_runs_of_whitespace()
  check(split(" a  b\tc\n"), { "a", "b", "c" })
  check(split(""), {}, "''.split() is []")
  check(split("   "), {})
  check(split("one"), { "one" })
end

function T.split_with_a_separator_keeps_empty_pieces()
  check(split("a,b,,c,", ","), { "a", "b", "", "c", "" })
  check(split("", ","), { "" }, "''.split(',') is ['']")
  check(split("a::b", "::"), { "a", "b" })
end

function T.split_treats_the_separator_as_plain_text()
  check(split("a.b%c", "."), { "a", "b%c" })
  check(split("1%d2", "%d"), { "1", "2" })
  check(split("a(b", "("), { "a", "b" })
end

function T.split_honours_maxsplit()
  check(split("a,b,c,d", ",", 2), { "a", "b", "c,d" })
  check(split("a,b", ",", 0), { "a,b" })
  check(split("a,b", ",", -1), { "a", "b" }, "negative: no limit")
  check(split("  a b  c ", nil, 1), { "a", "b  c " }, "the rest keeps trailing whitespace")
end

function T.split_handles_utf8()
  check(split("α→β→γ", "→"), { "α", "β", "γ" })
  check(split("naïve café"), { "naïve", "café" })
end

function T.split_and_strip_know_pythons_unicode_whitespace()
  -- Every character for which Python's str.isspace() holds beyond %s: \28 to \31, NEL,
  -- no-break space, U+1680, U+2000 to U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
  local spaces = { "\28", "\29", "\30", "\31", "\u{85}", "\u{A0}", "\u{1680}", "\u{2028}", "\u{2029}",
    "\u{202F}", "\u{205F}", "\u{3000}" }
  for code = 0x2000, 0x200A do spaces[#spaces + 1] = utf8.char(code) end
  for _, space in ipairs(spaces) do
    local shown = string.format("%q", space)
    check(split("a" .. space .. space .. "b"), { "a", "b" }, "split on " .. shown)
    check(strip(space .. "a" .. space), "a", "strip " .. shown)
  end
  check(split("a\u{A0} b\u{A0}\u{A0}c\u{A0}", nil, 1), { "a", "b\u{A0}\u{A0}c\u{A0}" }, "the rest keeps its spaces")
  check(split("a\u{200B}b \u{2014}"), { "a\u{200B}b", "\u{2014}" }, "a zero-width space and a dash are not whitespace")
  check(strip("\u{A0}\u{A0}"), "")
  check(strip("x\xa0"), "x\xa0", "a continuation byte alone is not a no-break space")
end

function T.split_rejects_bad_arguments()
  check_error(function() split(nil) end, "split: argument 1 (text) must be a string, got nil")
  check_error(function() split("a", "") end, "split: argument 2 (sep) must not be empty")
  check_error(function() split("a", 1) end, "split: argument 2 (sep) must be a string, got number")
  check_error(function() split("a", ",", 1.5) end, "split: argument 3 (maxsplit) must be an integer or nil, got number")
end

-- strip ---------------------------------------------------------------------------------

function T.strip_removes_surrounding_whitespace()
  check(strip("  hi there \n\t"), "hi there")
  check(strip(""), "")
  check(strip(" \r\n "), "")
  check(strip("x"), "x")
end

function T.strip_removes_any_of_the_given_characters()
  check(strip("xxhixy", "xy"), "hi")
  check(strip("www.example.com", "cmowz."), "example")
  check(strip("aaa", "a"), "")
  check(strip("  hi  ", ""), "  hi  ", "no characters: nothing removed")
  check(strip("%%a%%", "%"), "a", "magic characters are plain")
end

function T.strip_removes_utf8_characters_whole()
  check(strip("«quoted»", "«»"), "quoted")
  check(strip("éaé", "é"), "a")
  check(strip("éa", "è"), "éa", "a shared lead byte does not match")
end

function T.strip_rejects_bad_arguments()
  check_error(function() strip(42) end, "strip: argument 1 (text) must be a string, got number")
  check_error(function() strip("a", {}) end, "strip: argument 2 (chars) must be a string, got table")
end

-- startswith, endswith --------------------------------------------------------------------

function T.startswith_and_endswith_test_prefixes_and_suffixes()
  assert(startswith("GET /index", "GET"))
  assert(not startswith("GET /index", "POST"))
  assert(startswith("abc", ""), "every text starts with ''")
  assert(not startswith("", "a"))
  assert(endswith("report.csv", ".csv"))
  assert(not endswith("report.csv", ".txt"))
  assert(endswith("abc", ""))
  assert(not endswith("c", "abc"))
  assert(startswith("émile", "é") and endswith("café", "é"))
end

function T.startswith_and_endswith_accept_a_list_like_a_python_tuple()
  check(startswith("POST /x", { "GET", "POST" }), true)
  check(startswith("PUT /x", { "GET", "POST" }), false)
  check(endswith("a.json", { ".csv", ".json" }), true)
  check(endswith("a.json", {}), false)
end

function T.startswith_and_endswith_reject_bad_arguments()
  check_error(function() startswith(nil, "a") end, "startswith: argument 1 (text) must be a string, got nil")
  check_error(function() endswith("a", nil) end, "endswith: argument 2 (suffix or list of them) must be a string, got nil")
  check_error(function() startswith("a", { 1 }) end, "startswith: argument 2 item 1 must be a string, got number")
end

-- join ----------------------------------------------------------------------------------

function T.join_takes_the_separator_first_or_second()
  check(join(", ", { "a", "b" }), "a, b")
  check(join({ "a", "b" }, "-"), "a-b", "list first, like table.concat")
  check(join({ "a", "b" }), "ab", "no separator")
  check(join(", ", {}), "")
  check(join("→", { "α", "β" }), "α→β")
end

function T.join_converts_items_with_tostring()
  check(join(",", { 1, 2.5, true, "x" }), "1,2.5,true,x")
end

function T.join_rejects_bad_arguments()
  check_error(function() join(",", nil) end, "join: needs a list (a table), got nil")
  check_error(function() join("a", "b") end, "join: needs a list (a table), got string")
  check_error(function() join({ "a" }, 5) end, "join: the separator must be a string, got number")
end

-- replace ---------------------------------------------------------------------------------

function T.replace_replaces_plain_text()
  check(replace("a.b.c", ".", "-"), "a-b-c")
  check(replace("100%", "%", " percent"), "100 percent")
  check(replace("abc", "x", "y"), "abc")
  check(replace("", "a", "b"), "")
  check(replace("aaa", "aa", "b"), "ba", "non-overlapping, left to right")
  check(replace("v1", "1", 2), "v2", "a number replacement is converted")
end

function T.replace_honours_count()
  check(replace("a.b.c", ".", "-", 1), "a-b.c")
  check(replace("a.b.c", ".", "-", 0), "a.b.c")
  check(replace("a.b.c", ".", "-", -1), "a-b-c", "negative: all")
end

function T.replace_with_an_empty_old_inserts_between_characters()
  check(replace("abc", "", "-"), "-a-b-c-")
  check(replace("abc", "", "-", 2), "-a-bc")
  check(replace("", "", "-"), "-")
  check(replace("éa", "", "|"), "|é|a|", "UTF-8 characters stay whole")
end

function T.replace_handles_utf8()
  check(replace("café café", "é", "e"), "cafe cafe")
end

function T.strip_and_replace_read_bytes_that_are_not_utf8_one_at_a_time()
  -- A lead byte without its continuation bytes is one character, at either end.
  check(strip("\xe9\xe9a\xe9", "\xe9"), "a")
  check(strip("\xc3a\xc3", "\xc3"), "a")
  check(strip("\xa9é\xa9", "\xa9"), "é", "a continuation byte alone is one character")
  check(strip("é\xa9", "\xa9"), "é", "the last byte alone, not the end of a character")
  check(replace("\xe9ab", "", "|"), "|\xe9|a|b|")
  check(replace("a\xf0\x9f", "", "|"), "|a|\xf0|\x9f|", "a cut four-byte character")
  check(replace("h😀é", "", "|"), "|h|😀|é|")
end

function T.replace_rejects_bad_arguments()
  check_error(function() replace(nil, "a", "b") end, "replace: argument 1 (text) must be a string, got nil")
  check_error(function() replace("a", nil, "b") end, "replace: argument 2 (old) must be a string, got nil")
  check_error(function() replace("a", "a", {}) end, "replace: argument 3 (new) must be a string, got table")
  check_error(function() replace("a", "a", "b", "all") end, "replace: argument 4 (count) must be an integer or nil, got string")
end

function T.argument_errors_blame_the_caller()
  local err = check_error(function() split(nil) end, "split:")
  assert(err:find("strings_test.lua", 1, true), "error position should be the caller's: " .. err)
  err = check_error(function() startswith(nil, "a") end, "startswith:")
  assert(err:find("strings_test.lua", 1, true), "error position should be the caller's: " .. err)
end

return T
