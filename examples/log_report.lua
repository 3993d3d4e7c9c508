-- The main job without an LLM server: explore a context with registry functions.
-- Run it with:
--   rlm run examples/log_report.lua --context examples/server.log --path examples/lua
-- `context` holds the file's text; `parse_records` and `count_by` come from
-- examples/lua, the others from the baked library.

print("lines:", line_count(context), "words:", word_count(context))

local records = parse_records(context)
local levels = count_by(records, "level")
for _, level in ipairs({ "INFO", "WARN", "ERROR" }) do
  print(level, levels[level] or 0)
end

print("\nerrors by service:")
local errors = {}
for _, record in ipairs(records) do
  if record.level == "ERROR" then
    errors[#errors + 1] = record
  end
end
local by_service = count_by(errors, "service")
local services = {}
for service in pairs(by_service) do
  services[#services + 1] = service
end
table.sort(services)
for _, service in ipairs(services) do
  print("  " .. service, by_service[service])
end

print("\nfirst timeouts, with one line of context:")
print(head(grep_text(context, "timeout", 1, true), 7))

print("\nchunks of 50 lines for sub-model calls:", #chunk_by_lines(context, 50))
