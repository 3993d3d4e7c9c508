-- Time: timestamps of logs and data to epoch seconds (UTC) and back, like Python's
-- datetime.fromisoformat / strptime and strftime, in plain arithmetic (no time zone
-- database, no locale).

local MONTHS = {
  jan = 1, feb = 2, mar = 3, apr = 4, may = 5, jun = 6,
  jul = 7, aug = 8, sep = 9, oct = 10, nov = 11, dec = 12,
}
local MONTH_NAMES = { "January", "February", "March", "April", "May", "June", "July",
  "August", "September", "October", "November", "December" }
-- 1970-01-01 was a Thursday.
local DAY_NAMES = { "Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday" }

-- The largest year parse_time takes (epoch seconds up to about 3e18).
local MAX_YEAR = 100000000000

local function is_leap(year)
  return year % 4 == 0 and (year % 100 ~= 0 or year % 400 == 0)
end

local function days_in_month(year, month)
  if month == 2 then return is_leap(year) and 29 or 28 end
  return (month == 4 or month == 6 or month == 9 or month == 11) and 30 or 31
end

-- Days from 1970-01-01 to a date of the proleptic Gregorian calendar (H. Hinnant's
-- days_from_civil).
local function days_from_civil(year, month, day)
  if month <= 2 then year = year - 1 end
  local era = year // 400
  local year_of_era = year - era * 400
  local day_of_year = (153 * (month + (month > 2 and -3 or 9)) + 2) // 5 + day - 1
  local day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
  return era * 146097 + day_of_era - 719468
end

-- The date `days` after 1970-01-01: year, month, day, day of the year.
local function civil_from_days(days)
  local z = days + 719468
  local era = z // 146097
  local day_of_era = z - era * 146097
  local year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096) // 365
  local day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
  local mp = (5 * day_of_year + 2) // 153
  local day = day_of_year - (153 * mp + 2) // 5 + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = year_of_era + era * 400 + (month <= 2 and 1 or 0)
  return year, month, day, days_from_civil(year, month, day) - days_from_civil(year, 1, 1) + 1
end

-- Seconds east of UTC for a zone suffix ("", "Z", "UTC", "+02:00", "-0700", "+05"),
-- or nil when it is not one.
local function zone_offset(zone)
  zone = string.gsub(zone, "^%s+", "")
  if zone == "" or zone == "Z" or zone == "z" or zone == "UTC" or zone == "GMT" then return 0 end
  local sign, hours, minutes = string.match(zone, "^([+-])(%d%d):?(%d%d)$")
  if not sign then
    sign, hours = string.match(zone, "^([+-])(%d%d)$")
    minutes = "00"
  end
  if not sign or tonumber(hours) > 23 or tonumber(minutes) > 59 then return nil end
  local offset = tonumber(hours) * 3600 + tonumber(minutes) * 60
  return sign == "-" and -offset or offset
end

-- Epoch seconds of a checked date and time (strings from the patterns), or nil.
local function epoch_of(year, month, day, hour, minute, second, fraction, zone)
  year, month, day = tonumber(year), tonumber(month), tonumber(day)
  hour, minute, second = tonumber(hour or 0), tonumber(minute or 0), tonumber(second or 0)
  local offset = zone_offset(zone or "")
  if not (month and month >= 1 and month <= 12 and day >= 1 and day <= days_in_month(year, month)
      and hour <= 23 and minute <= 59 and second <= 59 and offset) then
    return nil
  end
  local seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
  if fraction and fraction ~= "" then
    return seconds + tonumber("0." .. fraction)
  end
  return seconds
end

-- ISO 8601 and its log variants: "2024-01-02", "2024-01-02T03:04:05.5Z",
-- "2024-01-02 03:04:05,123", "2024/01/02 03:04", "+02:00" / "-0700" offsets.
local function parse_iso(text)
  local year, month, day, rest = string.match(text, "^(%d%d%d%d)[-/](%d%d)[-/](%d%d)(.*)$")
  if not year then return nil end
  if rest == "" then return epoch_of(year, month, day) end
  local hour, minute, after = string.match(rest, "^[Tt ](%d%d):(%d%d)(.*)$")
  if not hour then return nil end
  local second, fraction, zone = string.match(after, "^:(%d%d)[.,](%d+)(.*)$")
  if not second then
    second, zone = string.match(after, "^:(%d%d)(.*)$")
  end
  return epoch_of(year, month, day, hour, minute, second, fraction, zone or after)
end

-- Apache / nginx access logs: "10/Oct/2000:13:55:36 -0700".
local function parse_apache(text)
  local day, month, year, hour, minute, second, zone =
    string.match(text, "^(%d%d?)/(%a%a%a)/(%d%d%d%d):(%d%d):(%d%d):(%d%d)(.*)$")
  if not day then return nil end
  return epoch_of(year, MONTHS[string.lower(month)], day, hour, minute, second, nil, zone)
end

-- RFC 2822 / HTTP dates: "Tue, 10 Oct 2000 13:55:36 GMT" (the weekday is optional).
local function parse_rfc2822(text)
  local day, month, year, hour, minute, second, zone =
    string.match(text, "^%a*,?%s*(%d%d?) (%a%a%a) (%d%d%d%d) (%d%d):(%d%d):(%d%d)(.*)$")
  if not day then return nil end
  return epoch_of(year, MONTHS[string.lower(month)], day, hour, minute, second, nil, zone)
end

-- syslog: "Oct 10 13:55:36" or "Oct  1 13:55:36.250", which carry no year.
local function parse_syslog(text, year)
  local month, day, hour, minute, second, rest =
    string.match(text, "^(%a%a%a) +(%d%d?) (%d%d):(%d%d):(%d%d)(.*)$")
  if not month then return nil end
  local fraction = string.match(rest, "^[.,](%d+)$")
  if rest ~= "" and not fraction then return nil end
  return epoch_of(year, MONTHS[string.lower(month)], day, hour, minute, second, fraction)
end

-- Bytes `%s` matches: space, \t, \n, \v, \f, \r.
local function is_space(byte)
  return byte == 32 or (byte ~= nil and byte >= 9 and byte <= 13)
end

-- `text` without the whitespace around it, an opening "[" and a closing "]" (as around
-- Apache times) and the whitespace inside them. Scanned in from both ends: a pattern
-- such as "^%s*(.-)%s*$" takes quadratic time on a long run of spaces inside the text.
local function unwrap(text)
  local first, last = 1, #text
  while is_space(string.byte(text, first)) do first = first + 1 end
  if string.byte(text, first) == 91 then first = first + 1 end
  while is_space(string.byte(text, first)) do first = first + 1 end
  while last >= first and is_space(string.byte(text, last)) do last = last - 1 end
  if last >= first and string.byte(text, last) == 93 then last = last - 1 end
  while last >= first and is_space(string.byte(text, last)) do last = last - 1 end
  return string.sub(text, first, last)
end

local function current_year()
  if os and os.time then
    return (civil_from_days(os.time() // 86400))
  end
  return 1970
end

--- Reads a timestamp as epoch seconds, like datetime.fromisoformat(s).timestamp(): ISO 8601
--- (no zone = UTC), "2024-01-02 03:04:05,123", Apache, syslog, RFC 2822.
---
--- ```lua
--- parse_time("2024-01-02T03:04:05.5+01:00") --> 1704161045.5
--- parse_time("[10/Oct/2000:13:55:36 -0700]") --> 971211336
--- ```
---@param text string The timestamp
---@param year? integer Year of syslog times (default: this year)
---@return number|nil seconds Epoch seconds; nil if unrecognised
---@return string|nil error Why not
function parse_time(text, year)
  if type(text) ~= "string" then
    error(string.format("parse_time: argument 1 (text) must be a string, got %s", type(text)), 2)
  end
  if year ~= nil and math.type(year) ~= "integer" then
    error(string.format("parse_time: argument 2 (year) must be an integer or nil, got %s", type(year)), 2)
  end
  -- Its epoch seconds must fit in an integer (beyond, the arithmetic would wrap around).
  if year ~= nil and (year < -MAX_YEAR or year > MAX_YEAR) then
    error(string.format("parse_time: argument 2 (year) must be from %d to %d, got %d", -MAX_YEAR, MAX_YEAR, year), 2)
  end
  local trimmed = unwrap(text)
  local seconds = parse_iso(trimmed) or parse_apache(trimmed) or parse_rfc2822(trimmed)
    or parse_syslog(trimmed, year or current_year())
  if seconds == nil then
    return nil, string.format("parse_time: unrecognised time %q", text)
  end
  return seconds
end

local function two(n) return string.format("%02d", n) end

-- The value of each strftime directive for one moment.
local function directives(seconds, micros)
  local days = seconds // 86400
  local of_day = seconds % 86400
  local year, month, day, yday = civil_from_days(days)
  local hour = of_day // 3600
  local values = {
    Y = tostring(year), m = two(month), d = two(day), H = two(hour),
    M = two(of_day % 3600 // 60), S = two(of_day % 60), f = string.format("%06d", micros),
    y = two(year % 100), j = string.format("%03d", yday), B = MONTH_NAMES[month],
    A = DAY_NAMES[days % 7 + 1], I = two((hour + 11) % 12 + 1), p = hour < 12 and "AM" or "PM",
    z = "+0000", Z = "UTC", s = tostring(seconds), ["%"] = "%",
  }
  values.b, values.a = string.sub(values.B, 1, 3), string.sub(values.A, 1, 3)
  values.F = values.Y .. "-" .. values.m .. "-" .. values.d
  values.T = values.H .. ":" .. values.M .. ":" .. values.S
  return values
end

--- Formats epoch seconds as UTC text, like strftime (%Y %m %d %H %M %S %f %j %a %b %p %z %s %F %T ...); default ISO 8601.
---
--- ```lua
--- format_time(971211336) --> "2000-10-10T20:55:36Z"
--- format_time(0, "%d %b %Y %H:%M") --> "01 Jan 1970 00:00"
--- ```
---@param seconds number Epoch seconds
---@param format? string The format
---@return string text The time
function format_time(seconds, format)
  if type(seconds) ~= "number" or seconds ~= seconds or seconds == math.huge or seconds == -math.huge then
    error(string.format("format_time: argument 1 (seconds) must be a finite number, got %s", tostring(seconds)), 2)
  end
  if format ~= nil and type(format) ~= "string" then
    error(string.format("format_time: argument 2 (format) must be a string or nil, got %s", type(format)), 2)
  end
  local whole = math.floor(seconds)
  local micros = math.floor((seconds - whole) * 1e6 + 0.5)
  if micros >= 1000000 then whole, micros = whole + 1, 0 end
  whole = math.tointeger(whole)
  if not whole then
    error("format_time: argument 1 (seconds) is out of range", 2)
  end
  local values = directives(whole, micros)
  if format == nil then
    local millis = math.floor(micros / 1000 + 0.5)
    local fraction = micros > 0 and string.format(".%03d", math.min(millis, 999)) or ""
    return values.F .. "T" .. values.T .. fraction .. "Z"
  end
  return (string.gsub(format, "%%(.?)", function(directive)
    local value = values[directive]
    if not value then
      error(string.format("format_time: unknown directive %%%s in the format", directive), 4)
    end
    return value
  end))
end
