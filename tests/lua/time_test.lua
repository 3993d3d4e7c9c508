-- Tests for lua/time. Run by tests/it/lua_library.rs in a bare VM and in the sandbox.
-- Expected values are Python's datetime(..., tzinfo=timezone.utc).timestamp() and strftime.

local T = {}

-- 2024-01-02T03:04:05Z
local MOMENT = 1704164645

function T.parse_time_reads_iso_8601_dates_and_times()
  check(parse_time("2024-01-02T03:04:05Z"), MOMENT)
  check(parse_time("2024-01-02T03:04:05"), MOMENT, "no zone: UTC")
  check(parse_time("2024-01-02 03:04:05"), MOMENT, "space instead of T")
  check(parse_time("2024-01-02t03:04:05z"), MOMENT, "lower-case t and z")
  check(parse_time("2024-01-02T03:04Z"), MOMENT - 5, "no seconds")
  check(parse_time("2024-01-02"), MOMENT - 3 * 3600 - 4 * 60 - 5, "date only: midnight UTC")
  check(parse_time("2024/01/02 03:04:05"), MOMENT, "slashes")
  check(math.type(parse_time("2024-01-02T03:04:05Z")), "integer")
end

function T.parse_time_reads_fractions_with_a_dot_or_a_comma()
  check(parse_time("2024-01-02T03:04:05.5Z"), MOMENT + 0.5)
  check(parse_time("2024-01-02 03:04:05,123"), MOMENT + 0.123, "Python logging's default format")
  check(parse_time("2024-01-02T03:04:05.000000+00:00"), MOMENT + 0.0)
end

function T.parse_time_applies_utc_offsets()
  check(parse_time("2024-01-02T04:04:05+01:00"), MOMENT)
  check(parse_time("2024-01-02T04:04:05+0100"), MOMENT)
  check(parse_time("2024-01-02T04:04:05+01"), MOMENT)
  check(parse_time("2024-01-01T22:34:05-04:30"), MOMENT)
  check(parse_time("2024-01-02 03:04:05 UTC"), MOMENT)
  check(parse_time("2024-01-02T04:04:05.5 +01:00"), MOMENT + 0.5)
end

function T.parse_time_reads_apache_and_rfc_2822_times()
  check(parse_time("10/Oct/2000:13:55:36 -0700"), 971211336)
  check(parse_time("[10/Oct/2000:13:55:36 -0700]"), 971211336, "with the log's brackets")
  check(parse_time("10/oct/2000:20:55:36 +0000"), 971211336, "month names in any case")
  check(parse_time("Tue, 10 Oct 2000 20:55:36 GMT"), 971211336)
  check(parse_time("10 Oct 2000 13:55:36 -0700"), 971211336)
end

function T.parse_time_reads_syslog_times_in_the_given_year()
  check(parse_time("Oct 10 13:55:36", 2000), 971186136)
  check(parse_time("Oct  1 13:55:36", 2023), 1696168536, "space-padded day")
  check(parse_time("Oct 10 13:55:36.250", 2000), 971186136.25)
  local this_year = parse_time("Jan  1 00:00:00")
  local now = os.time()
  assert(this_year <= now and now - this_year < 367 * 86400, "default: the current year")
end

function T.parse_time_handles_dates_outside_the_usual_range()
  check(parse_time("2024-02-29"), 1709164800, "leap day")
  check(parse_time("1969-12-31T23:59:59Z"), -1)
  check(parse_time("1900-03-01"), -2203891200)
  check(parse_time("  2024-01-02T03:04:05Z \n"), MOMENT, "surrounding whitespace")
end

function T.parse_time_returns_nil_and_a_message_for_unrecognised_text()
  for _, text in ipairs({ "", "yesterday", "2024-13-01", "2023-02-29", "2024-01-02T25:00:00",
    "2024-01-02T03:60:00", "2024-01-02T03:04:05+25:00", "32/Oct/2000:13:55:36 -0700",
    "Foo 10 13:55:36", "2024-01-02T03:04:05 tomorrow" }) do
    local seconds, err = parse_time(text, 2024)
    check(seconds, nil, "parse_time(" .. show(text) .. ")")
    check(err, string.format("parse_time: unrecognised time %q", text))
  end
end

function T.parse_time_takes_linear_time_on_long_runs_of_spaces()
  local text = "2024-01-02" .. string.rep(" ", 200000) .. "x"
  local started = os.clock()
  check(parse_time(text), nil)
  check(parse_time("[ " .. string.rep(" ", 200000) .. "2024-01-02 ]"), 1704153600, "brackets and spaces around")
  check(parse_time(" [2024-01-02"), 1704153600, "an opening bracket alone")
  check(parse_time("2024-01-02] "), 1704153600, "a closing bracket alone")
  check(parse_time("[]"), nil)
  assert(os.clock() - started < 1, "parse_time took " .. (os.clock() - started) .. " s")
end

function T.parse_time_rejects_bad_arguments()
  check_error(function() parse_time(nil) end, "parse_time: argument 1 (text) must be a string, got nil")
  check_error(function() parse_time(1704164645) end, "parse_time: argument 1 (text) must be a string, got number")
  check_error(function() parse_time("Oct 10 13:55:36", "2000") end, "parse_time: argument 2 (year) must be an integer or nil, got string")
  check_error(function() parse_time("Oct 10 13:55:36", math.maxinteger) end,
    "parse_time: argument 2 (year) must be from -100000000000 to 100000000000, got 9223372036854775807")
  check_error(function() parse_time("Oct 10 13:55:36", math.mininteger) end, "parse_time: argument 2 (year) must be from")
  check(format_time(parse_time("Jan  1 00:00:00", 100000000000)), "100000000000-01-01T00:00:00Z", "the largest year")
  check(format_time(parse_time("Dec 31 23:59:59", -100000000000)), "-100000000000-12-31T23:59:59Z", "the smallest year")
end

function T.format_time_defaults_to_iso_8601_utc()
  check(format_time(MOMENT), "2024-01-02T03:04:05Z")
  check(format_time(MOMENT + 0.5), "2024-01-02T03:04:05.500Z", "milliseconds when fractional")
  check(format_time(0), "1970-01-01T00:00:00Z")
  check(format_time(-1), "1969-12-31T23:59:59Z")
  check(format_time(1709164800), "2024-02-29T00:00:00Z")
end

function T.format_time_follows_strftime_directives()
  check(format_time(MOMENT, "%Y-%m-%d %H:%M:%S %j %a %A %b %B %y %I %p"),
    "2024-01-02 03:04:05 002 Tue Tuesday Jan January 24 03 AM")
  check(format_time(-1, "%Y-%m-%d %H:%M:%S %j %a %A %b %B %y %I %p"),
    "1969-12-31 23:59:59 365 Wed Wednesday Dec December 69 11 PM")
  check(format_time(951782400, "%F %T %j %a"), "2000-02-29 00:00:00 060 Tue")
  check(format_time(MOMENT + 0.25, "%S.%f %z %Z %s 100%%"), "05.250000 +0000 UTC 1704164645 100%")
  check(format_time(MOMENT, "no directives"), "no directives")
end

function T.format_time_and_parse_time_round_trip()
  for _, seconds in ipairs({ 0, MOMENT, -86400 * 365, 4102444800, 971211336 }) do
    check(parse_time(format_time(seconds)), seconds)
  end
  check(parse_time(format_time(MOMENT + 0.125)), MOMENT + 0.125)
end

function T.format_time_rejects_bad_arguments()
  check_error(function() format_time(nil) end, "format_time: argument 1 (seconds) must be a finite number, got nil")
  check_error(function() format_time("1704164645") end, "format_time: argument 1 (seconds) must be a finite number")
  check_error(function() format_time(0 / 0) end, "format_time: argument 1 (seconds) must be a finite number")
  check_error(function() format_time(1e300) end, "format_time: argument 1 (seconds) is out of range")
  check_error(function() format_time(0, 5) end, "format_time: argument 2 (format) must be a string or nil, got number")
  check_error(function() format_time(0, "%Q") end, "format_time: unknown directive %Q in the format")
end

function T.argument_errors_blame_the_caller()
  local err = check_error(function() parse_time(nil) end, "parse_time:")
  assert(err:find("time_test.lua", 1, true), "error position should be the caller's: " .. err)
  err = check_error(function() format_time(0, "%Q") end, "format_time:")
  assert(err:find("time_test.lua", 1, true), "error position should be the caller's: " .. err)
end

return T
