//! The session's variables: the `core` provider's `store_list` and `store_summarize`,
//! which list and describe the globals the session's code has set (not the keys of the
//! `store` provider, whose functions are `store_set`, `store_get` and `store_ref`),
//! written in Lua so that the execution's limits apply.

use std::sync::Arc;

use mlua::{Function, Lua, Value};

use crate::Registry;
use crate::conventions::ANSWER_GLOBAL;
use crate::conventions::builtins::BuiltinId;
use crate::environment::chunks::InternalChunk;

/// `store_list` and `store_summarize`, over the globals that are neither the standard
/// library nor registry functions, nor the `answer` table as every environment starts
/// with it (once the code writes to it, it is listed).
pub(super) fn functions(lua: &Lua, registry: Arc<Registry>) -> mlua::Result<(Function, Function)> {
    let is_registry_function =
        lua.create_function(move |_, name: String| Ok(registry.get(&name).is_some()))?;
    let standard = lua.create_table()?;
    for pair in lua.globals().pairs::<Value, Value>() {
        let (key, _) = pair?;
        standard.raw_set(key, true)?;
    }
    SESSION_VARIABLES.function(lua)?.call((
        standard,
        is_registry_function,
        BuiltinId::StoreSummarize.name(),
        ANSWER_GLOBAL,
    ))
}

// `store` is the chunk's name in Lua's messages: the prefix of the built-ins it makes.
static SESSION_VARIABLES: InternalChunk = InternalChunk::new("=store", SESSION_VARIABLES_LUA);

const SESSION_VARIABLES_LUA: &str = r#"
local standard, is_registry_function, summarize_name, answer_name = ...
local G, next, type, tostring, rawget, pairs = _G, next, type, tostring, rawget, pairs
local sort, concat, min, format = table.sort, table.concat, math.min, string.format

local function size_of(value)
  local kind = type(value)
  if kind == "string" then return #value end
  if kind == "table" then
    local n = 0
    for _ in next, value do n = n + 1 end
    return n
  end
  return nil
end

local function preview(value, limit)
  local text
  if type(value) == "table" then
    local parts = {}
    for k, v in next, value do
      if #parts >= 8 then parts[#parts + 1] = "..." break end
      parts[#parts + 1] = tostring(k) .. "=" .. tostring(v)
    end
    text = "{" .. concat(parts, ", ") .. "}"
  else
    text = tostring(value)
  end
  if #text > limit then text = text:sub(1, limit) .. "..." end
  return (text:gsub("\n", "\\n"))
end

-- The answer table as the environment made it: not the session's doing.
local function untouched_answer(name, value)
  return name == answer_name and type(value) == "table" and rawget(value, "content") == ""
    and rawget(value, "ready") == false and size_of(value) == 2
end

local function user_names()
  local names = {}
  for name, value in next, G do
    if type(name) == "string" and not standard[name] and not untouched_answer(name, value)
        and not (type(value) == "function" and is_registry_function(name)) then
      names[#names + 1] = name
    end
  end
  sort(names)
  return names
end

local function list()
  local list = {}
  for i, name in ipairs(user_names()) do
    local value = rawget(G, name)
    list[i] = { name = name, type = type(value), size = size_of(value), preview = preview(value, 80) }
  end
  return list
end

local function summarize(name)
  local value = rawget(G, name)
  if value == nil then
    error(summarize_name .. ": no variable named '" .. tostring(name) .. "'", 2)
  end
  local size = size_of(value)
  local unit = type(value) == "string" and " bytes" or " entries"
  return format("%s: %s%s\n%s", name, type(value), size and (", " .. size .. unit) or "", preview(value, 500))
end

return list, summarize
"#;
