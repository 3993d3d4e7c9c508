-- The main job without an LLM server: explore a context with registry functions.
-- Run it with:
--   rlm run examples/log_report.lua --context examples/server.log --path examples/lua
-- `context` holds the file's text; `parse_records` and `tally` come from
-- examples/lua, the others from the baked library.

print("lines:", line_count(context), "words:", word_count(context))

local records = parse_records(context)
local levels = count_by(records, "level")
for _, level in ipairs({ "INFO", "WARN", "ERROR" }) do
  print(level, levels[level] or 0)
end

print("\nerrors by service:")
local errors = filter(records, function(record) return record.level == "ERROR" end)
for _, pair in ipairs(tally(errors, "service")) do
  print("  " .. pair[1], pair[2])
end

print("\nfirst timeouts, with one line of context:")
print(head(grep_text(context, "timeout", 1, true), 7))

print("\nchunks of 50 lines for sub-model calls:", #chunk_by_lines(context, 50))
