-- An example registry directory: helpers for line-oriented records such as CSV or logs.
-- Validate and inspect it with `rlm check --path examples/lua` and `rlm list --path examples/lua`;
-- `rlm test --path examples/lua` runs the examples in the docs.

-- Splits one line on a plain separator, keeping empty fields.
local function split_fields(line, separator)
  local fields = {}
  local start = 1
  while true do
    local found = string.find(line, separator, start, true)
    if not found then
      fields[#fields + 1] = string.sub(line, start)
      return fields
    end
    fields[#fields + 1] = string.sub(line, start, found - 1)
    start = found + #separator
  end
end

--- Parses simple delimited text (no quoting) into records keyed by the header line.
--- Uses the registry's own `lines` function, so it also shows how files build on each other.
---
--- ```lua
--- parse_records("level,service\nERROR,auth")[1].service --> "auth"
--- ```
---@param text string The text, header line first
---@param separator? string The field separator (default ",")
---@return table[] records One table per data line, field name -> value
function parse_records(text, separator)
  separator = separator or ","
  local all = lines(text)
  local header = split_fields(all[1] or "", separator)
  local records = {}
  for i = 2, #all do
    local values = split_fields(all[i], separator)
    local record = {}
    for column, name in ipairs(header) do
      record[name] = values[column]
    end
    records[#records + 1] = record
  end
  return records
end

--- The values of one field with how many records hold each, most frequent first (ties
--- in value order). Builds on the library's `count_by` and `most_common`.
---
--- ```lua
--- tally({{level = "ERROR"}, {level = "INFO"}, {level = "ERROR"}}, "level") --> {{"ERROR", 2}, {"INFO", 1}}
--- ```
---@param records table[] Records as returned by `parse_records`
---@param field string The field to tally
---@return table[] pairs `{value, count}` pairs, most frequent first
function tally(records, field)
  return most_common(count_by(records, field))
end
