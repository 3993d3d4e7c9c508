//! The crate's own Lua chunks (the sandbox's wrappers, the globals' metatable, the error
//! wrappers, the session's variables), compiled once per process. Compiling them again for every
//! environment was most of what creating one cost; the first environment compiles each
//! from its source and keeps the bytecode, and the others load that bytecode.
//!
//! Only these chunks are ever loaded as bytecode. They are the crate's constants, never
//! model input: code an environment runs still goes through the sandbox's text-only
//! `load`.

use std::sync::OnceLock;

use mlua::{Function, Lua, chunk::ChunkMode};

/// One internal chunk: its name (as error positions show it) and its source.
pub(crate) struct InternalChunk {
    name: &'static str,
    source: &'static str,
    bytecode: OnceLock<Vec<u8>>,
}

impl InternalChunk {
    /// A chunk named `name` (with Lua's `=` prefix for a literal name) and its source.
    pub(crate) const fn new(name: &'static str, source: &'static str) -> InternalChunk {
        InternalChunk {
            name,
            source,
            bytecode: OnceLock::new(),
        }
    }

    /// The chunk as a function of `lua`, its `_ENV` the globals, as `lua.load` gives it.
    pub(crate) fn function(&'static self, lua: &Lua) -> mlua::Result<Function> {
        if let Some(bytecode) = self.bytecode.get() {
            return lua
                .load(bytecode.as_slice())
                .set_name(self.name)
                .set_mode(ChunkMode::Binary)
                .into_function();
        }
        let function = lua
            .load(self.source)
            .set_name(self.name)
            .set_mode(ChunkMode::Text)
            .into_function()?;
        // Debug information is kept, so positions and names in messages are unchanged.
        let _ = self.bytecode.set(function.dump(false));
        Ok(function)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static ADD: InternalChunk = InternalChunk::new("=test", "local a, b = ... return a + b");
    static FAILS: InternalChunk = InternalChunk::new("=test", "\n\nerror('boom')");

    #[test]
    fn the_second_load_runs_the_kept_bytecode_with_the_same_result() {
        let first = Lua::new();
        assert_eq!(
            ADD.function(&first).unwrap().call::<i64>((1, 2)).unwrap(),
            3
        );
        assert!(ADD.bytecode.get().is_some());
        let second = Lua::new();
        assert_eq!(
            ADD.function(&second).unwrap().call::<i64>((3, 4)).unwrap(),
            7
        );
    }

    #[test]
    fn bytecode_keeps_the_chunk_name_and_lines_in_errors() {
        for _ in 0..2 {
            let lua = Lua::new();
            let error = FAILS.function(&lua).unwrap().call::<()>(()).unwrap_err();
            assert!(error.to_string().contains("test:3: boom"), "{error}");
        }
    }
}
