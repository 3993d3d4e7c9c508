//! Loading `context`: a string, a list of strings, or a list of document tables, each
//! made straight from Rust (one Lua string per text, no text through JSON).
//!
//! A context is the user's data, not the code's allocations: what it takes when loaded
//! is measured and set beside the memory limit rather than against it, so a 600 MB log
//! loads under the default 512 MiB, while the code's own allocations stay limited as
//! before (a copy of the whole context is the code's and counts).

use mlua::{Lua, Value};
use serde_json::{Map, Value as Json};

use super::{Environment, ExecError, lua_json};
use crate::conventions::CONTEXT_GLOBAL;

impl Environment {
    /// Sets the global `context` to `text` (any bytes: Lua strings need not be UTF-8).
    /// What it takes does not count against the memory limit: the context is the user's
    /// data; a copy of it made by the code counts, as any allocation of the code's.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    ///
    /// let limits = Limits { memory_bytes: 1024 * 1024, ..Limits::default() };
    /// let env = Environment::new(Registry::baked().clone(), limits)?;
    /// env.set_context(vec![b'x'; 4 * 1024 * 1024])?; // four times the limit
    /// assert_eq!(env.execute("print(#context)")?.output, "4194304\n");
    /// assert!(env.execute("local copy = context .. '!'").is_err()); // a copy is the code's
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_context(&self, text: impl AsRef<[u8]>) -> Result<(), ExecError> {
        self.load_context(|lua| lua.create_string(text.as_ref()).map(Value::String))
    }

    /// Sets `context` to an array of strings, one per item.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// env.set_context_list(["a", "bc"])?;
    /// assert_eq!(env.execute("print(#context, context[2])")?.output, "2\tbc\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_context_list<T: AsRef<[u8]>>(
        &self,
        items: impl IntoIterator<Item = T>,
    ) -> Result<(), ExecError> {
        self.load_context(|lua| {
            let list = lua.create_table()?;
            for (i, item) in items.into_iter().enumerate() {
                list.raw_set(i + 1, lua.create_string(item.as_ref())?)?;
            }
            Ok(Value::Table(list))
        })
    }

    /// Sets `context` to a list of document tables: each one's `fields` as the JSON
    /// mapping makes them, and its `text` field a string of the given bytes.
    ///
    /// ```
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    /// use serde_json::json;
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// let fields = json!({"name": "a.md", "kind": "text"});
    /// env.set_context_documents([(fields.as_object().unwrap().clone(), &b"# A"[..])])?;
    /// assert_eq!(env.execute("print(context[1].name, context[1].text)")?.output, "a.md\t# A\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Texts given by value are freed one by one as Lua takes its copy, so that a corpus
    /// given up this way is never held twice.
    pub fn set_context_documents<T: AsRef<[u8]>>(
        &self,
        documents: impl IntoIterator<Item = (Map<String, Json>, T)>,
    ) -> Result<(), ExecError> {
        self.load_context(|lua| {
            let list = lua.create_table()?;
            for (i, (fields, text)) in documents.into_iter().enumerate() {
                let document = match lua_json::to_lua(
                    lua,
                    &self.tripwire.guard,
                    &Json::Object(fields),
                    "document",
                ) {
                    Ok(Value::Table(table)) => table,
                    Ok(_) => lua.create_table()?,
                    Err(error) => return Err(error.into_lua("")),
                };
                document.raw_set("text", lua.create_string(text.as_ref())?)?;
                list.raw_set(i + 1, document)?;
            }
            Ok(Value::Table(list))
        })
    }

    /// Sets `context` to a string of `len` bytes that `fill` writes straight into the Lua
    /// string's own memory: a file read this way is held once, where reading it into
    /// Rust and handing Lua the bytes would hold it twice while it loads (2 GB for a
    /// 1 GB log). An error of `fill` is the load's, and `context` is then unset.
    ///
    /// ```
    /// use std::io::Read;
    /// use rlm_registry::{Registry, environment::{Environment, Limits}};
    ///
    /// let env = Environment::new(Registry::baked().clone(), Limits::default())?;
    /// let text = "line\n".repeat(10_000);
    /// env.set_context_with(text.len(), |bytes| text.as_bytes().read_exact(bytes))?;
    /// assert_eq!(env.execute("print(#context, context:sub(1, 4))")?.output, "50000\tline\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_context_with(
        &self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> std::io::Result<()>,
    ) -> Result<(), ExecError> {
        if len <= SMALL_CONTEXT {
            // Short strings are interned (shared): these are made from a copy.
            let mut bytes = vec![0; len];
            return match fill(&mut bytes) {
                Ok(()) => self.set_context(bytes),
                Err(error) => Err(self.classify(read_error(error))),
            };
        }
        self.load_context(|lua| {
            let string = zeroed_string(lua, len)?;
            let mut filled = Ok(());
            // SAFETY: the string is new and long (so not interned, and no one else holds
            // it), its hash not yet computed (Lua hashes long strings when first used as a
            // key); its bytes are written through the pointer C gives, before any Lua code
            // sees them, and no Rust reference to them exists meanwhile.
            unsafe {
                lua.exec_raw::<()>(&string, |state| {
                    let mut size = 0usize;
                    let data = mlua::ffi::lua_tolstring(state, -1, &mut size);
                    if !data.is_null() && size == len {
                        let bytes =
                            std::slice::from_raw_parts_mut(data.cast::<u8>().cast_mut(), size);
                        filled = fill(bytes);
                    }
                    mlua::ffi::lua_pop(state, 1);
                })?;
            }
            filled.map_err(read_error)?;
            Ok(Value::String(string))
        })
    }

    /// Sets `context` to `value` by the one Lua ↔ JSON mapping (a fork's copy of a
    /// list or documents).
    pub(super) fn set_context_json(&self, value: &Json) -> Result<(), ExecError> {
        self.load_context(|lua| {
            lua_json::to_lua(lua, &self.tripwire.guard, value, CONTEXT_GLOBAL)
                .map_err(|error| error.into_lua(""))
        })
    }

    /// Makes the new `context` with `make`, with no memory ceiling while it is made, and
    /// sets what it took beside the memory limit.
    fn load_context(
        &self,
        make: impl FnOnce(&Lua) -> mlua::Result<Value>,
    ) -> Result<(), ExecError> {
        let lua = &self.lua;
        let guard = &self.tripwire.guard;
        let load = || -> mlua::Result<usize> {
            // The old context goes first (unless the code kept it), so that what is
            // measured is the new one alone and the two are never held together.
            lua.globals().raw_set(CONTEXT_GLOBAL, Value::Nil)?;
            lua.set_named_registry_value(LOADED_CONTEXT, Value::Nil)?;
            if guard.context_bytes() > 0 {
                guard.set_context_bytes(0);
                lua.gc_collect()?;
            }
            // No ceiling while loading, for Lua's allocator and for the checks of the
            // conversions alike.
            guard.set_context_bytes(usize::MAX);
            lua.set_memory_limit(0)?;
            lua.gc_stop();
            let before = lua.used_memory();
            let made = make(lua).and_then(|value| {
                // Kept as loaded, whatever the code does to the global: what a
                // checkpoint's digest and a fork's copy are made from.
                lua.set_named_registry_value(LOADED_CONTEXT, &value)?;
                lua.globals().raw_set(CONTEXT_GLOBAL, value)
            });
            let took = lua.used_memory().saturating_sub(before);
            lua.gc_restart();
            made.map(|()| took)
        };
        let loaded = load();
        self.state.journal.context_loaded();
        guard.set_context_bytes(*loaded.as_ref().unwrap_or(&0));
        let ceiling = lua.set_memory_limit(guard.memory_ceiling());
        match (loaded, ceiling) {
            (Err(error), _) | (Ok(_), Err(error)) => Err(self.classify(error)),
            (Ok(_), Ok(_)) => Ok(()),
        }
    }
}

/// Where the context as loaded is kept, in the Lua registry.
pub(super) const LOADED_CONTEXT: &str = "rlm.loaded_context";

/// Contexts up to this size are made from a copy ([`Environment::set_context_with`]):
/// well above Lua's longest interned string (40 bytes), and too small for the copy to
/// matter.
const SMALL_CONTEXT: usize = 64 * 1024;

/// A Lua string of `len` zero bytes, copied from an anonymous mapping never written: its
/// pages are the kernel's shared zero page, so the copy's source takes no memory.
fn zeroed_string(lua: &Lua, len: usize) -> mlua::Result<mlua::LuaString> {
    // SAFETY: a fresh private read-only mapping, unmapped below and read only in between.
    let zeros = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if zeros == libc::MAP_FAILED {
        return Err(mlua::Error::MemoryError(format!(
            "cannot map {len} bytes for the context: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: `zeros` maps `len` readable bytes until the munmap below.
    let made = lua.create_string(unsafe { std::slice::from_raw_parts(zeros.cast::<u8>(), len) });
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(zeros, len) };
    made
}

/// A failed read of the context, as the load's error.
fn read_error(error: std::io::Error) -> mlua::Error {
    mlua::Error::RuntimeError(format!("cannot read the context: {error}"))
}
