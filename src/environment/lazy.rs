//! The globals' metatable, which makes the registry's functions lazy: a read of a
//! missing global finds the registry file that wins the name and runs it, keeping only
//! the globals that file wins (as if every file had run in load order), and the
//! built-ins stay read-only, also through `rawset`.

use std::sync::Arc;

use mlua::{Function, Lua, Table, Value};

use super::chunks::InternalChunk;
use crate::Registry;

/// The globals' metatable: built-ins first (read-only), then registry functions, loaded
/// on first use. Assigning to a built-in name is an error, also through `rawset`.
pub(super) fn install_globals_metatable(
    lua: &Lua,
    builtins: Table,
    registry: Arc<Registry>,
) -> mlua::Result<()> {
    // Rust answers the lookups; Lua builds the per-chunk environment, which is cheaper
    // than creating a Rust closure for every lazy load.
    let lookup_registry = Arc::clone(&registry);
    let find_chunk = lua.create_function(move |_, name: Value| {
        Ok(match &name {
            Value::String(name) => name
                .to_str()
                .ok()
                .and_then(|name| lookup_registry.get(&name).map(|f| f.chunk())),
            _ => None,
        })
    })?;
    let compile_registry = Arc::clone(&registry);
    let compile = lua.create_function(move |lua, (index, env): (usize, Table)| {
        let chunk = &compile_registry.chunks()[index];
        lua.load(chunk.source())
            .set_name(format!("@{}", chunk.file()))
            .set_mode(mlua::chunk::ChunkMode::Text)
            .set_environment(env)
            .into_function()
    })?;
    let wins = lua.create_function(move |_, (name, index): (Value, usize)| {
        Ok(match &name {
            Value::String(name) => name
                .to_str()
                .ok()
                .and_then(|name| registry.get(&name).map(|f| f.chunk() == index))
                .unwrap_or(false),
            _ => false,
        })
    })?;
    GLOBALS_METATABLE.function(lua)?.call::<()>((
        builtins,
        find_chunk,
        wins,
        compile,
        lua.globals().get::<Function>("rawset")?,
        lua.globals().get::<Function>("rawget")?,
        lua.globals().get::<Function>("setmetatable")?,
    ))
}

static GLOBALS_METATABLE: InternalChunk = InternalChunk::new(
    "=sandbox",
    r#"
        local G, builtins, find_chunk, wins, compile, rawset, rawget, setmetatable = _G, ...
        -- Runs the file that wins `key`, keeping only the globals that file wins: as if
        -- every file had run in load order.
        local function load_registry(key)
          local index = find_chunk(key)
          if index == nil then return nil end
          local env = setmetatable({}, {
            __index = G,
            __newindex = function(_, name, value)
              if wins(name, index) then rawset(G, name, value) end
            end,
          })
          compile(index, env)()
          return rawget(G, key)
        end
        local function assign(t, key, value, level)
          if t == G and builtins[key] ~= nil then
            error("cannot assign to built-in '" .. tostring(key) .. "'", level)
          end
          return rawset(t, key, value)
        end
        setmetatable(G, {
          __index = function(_, key)
            local builtin = builtins[key]
            if builtin ~= nil then return builtin end
            return load_registry(key)
          end,
          __newindex = function(t, key, value) assign(t, key, value, 3) end,
          __metatable = false,
        })
        G.rawset = function(t, key, value) assign(t, key, value, 3); return t end
        "#,
);
