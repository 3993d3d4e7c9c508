//! The sandbox's `load`: C Lua's `luaB_load`, line for line (chunk names, modes, the
//! environment argument, one result on success, `nil` and the message on failure),
//! except that binary chunks are always refused: they can crash the VM.
//!
//! It is a C function, as C Lua's is, so that argument errors, the position of a bad
//! piece and the traceback of an error raised by a reader are C Lua's. A reader
//! function's pieces go straight to Lua's parser, one at a time: the parser stops at the
//! first syntax error, and what it holds is Lua's memory, under the memory limit.
//! (Gathering the pieces first would hold them outside Lua, where a reader handing out
//! a large string forever exhausts the process's memory.)

use std::ffi::{c_char, c_int, c_void};

use mlua::{Function, Lua, ffi};

/// The first byte of a precompiled chunk (`LUA_SIGNATURE`).
const BINARY_SIGNATURE: u8 = 0x1b;
/// `load`'s arguments: the chunk (a string, or a reader function), then its name, its
/// mode and the environment.
const CHUNK: c_int = 1;
const NAME: c_int = 2;
const MODE: c_int = 3;
const ENV: c_int = 4;
/// Where a reader function's last piece is kept, so that it is not collected while the
/// parser reads it (C Lua's `RESERVEDSLOT`).
const PIECE: c_int = 5;

/// `load(chunk [, chunkname [, mode [, env]]])`.
pub(crate) fn safe_load(lua: &Lua) -> mlua::Result<Function> {
    // SAFETY: `exec_raw` runs the closure protected; it pushes one C function.
    unsafe {
        lua.exec_raw((), |state| {
            ffi::lua_pushcfunction(state, load);
        })
    }
}

/// What the readers know of the chunk being loaded.
struct Reading {
    /// Whether the mode lets Lua load a binary chunk, which the sandbox then refuses.
    binary_allowed: bool,
    /// Whether a piece has been handed to the parser yet.
    started: bool,
    /// Whether the chunk was found binary and refused (the parser was handed nothing).
    refused: bool,
}

/// `luaB_load`, with the readers below in place of `luaL_loadbufferx` and
/// `generic_reader`.
unsafe extern "C-unwind" fn load(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: C API calls on the arguments of a C function; errors raised here (the
    // argument checks) leave before `reading` exists, and errors raised by a reader are
    // caught by `lua_load`, so nothing is unwound past a Rust value.
    unsafe {
        let text = ffi::lua_tolstring(state, CHUNK, std::ptr::null_mut());
        let mode = ffi::luaL_optlstring(state, MODE, c"bt".as_ptr(), std::ptr::null_mut());
        let env = ffi::lua_isnone(state, ENV) == 0;
        let (reader, default_name): (ffi::lua_Reader, _) = if text.is_null() {
            (read_from_function, c"=(load)".as_ptr())
        } else {
            (read_whole_string, text)
        };
        let name = ffi::luaL_optlstring(state, NAME, default_name, std::ptr::null_mut());
        if text.is_null() {
            ffi::luaL_checktype(state, CHUNK, ffi::LUA_TFUNCTION);
            ffi::lua_settop(state, PIECE);
        }
        let mut reading = Reading {
            binary_allowed: std::ffi::CStr::from_ptr(mode).to_bytes().contains(&b'b'),
            started: false,
            refused: false,
        };
        let data = (&raw mut reading).cast::<c_void>();
        let status = ffi::lua_load(state, reader, data, name, mode);
        if reading.refused {
            // Refused as a message, not as an error raised in the parser, so that it
            // reads as Lua's own refusals do (no traceback added by a message handler).
            ffi::lua_pop(state, 1);
            ffi::lua_pushnil(state);
            ffi::lua_pushstring(
                state,
                c"attempt to load a binary chunk (the sandbox loads text chunks only)".as_ptr(),
            );
            return 2;
        }
        match status {
            ffi::LUA_OK => {
                if env {
                    ffi::lua_pushvalue(state, ENV);
                    if ffi::lua_setupvalue(state, -2, 1).is_null() {
                        ffi::lua_pop(state, 1);
                    }
                }
                1
            }
            // Out of memory is the memory limit: raised again, not handed back to code
            // that could go on allocating.
            ffi::LUA_ERRMEM => ffi::lua_error(state),
            _ => {
                ffi::lua_pushnil(state);
                ffi::lua_insert(state, -2);
                2
            }
        }
    }
}

/// `lua_load`'s reader for a string chunk: the whole string, once.
unsafe extern "C-unwind" fn read_whole_string(
    state: *mut ffi::lua_State,
    data: *mut c_void,
    size: *mut usize,
) -> *const c_char {
    // SAFETY: `data` is `load`'s `Reading`, the string at `CHUNK`.
    unsafe {
        let reading = &mut *data.cast::<Reading>();
        if reading.started {
            *size = 0;
            return std::ptr::null();
        }
        let piece = ffi::lua_tolstring(state, CHUNK, size);
        hand_over(reading, piece, size)
    }
}

/// `lua_load`'s reader for a reader function, as C Lua's `generic_reader`: its next
/// piece (`nil` or an empty string ends the chunk, a number is written as a string,
/// anything else is an error at the position of the call to `load`).
unsafe extern "C-unwind" fn read_from_function(
    state: *mut ffi::lua_State,
    data: *mut c_void,
    size: *mut usize,
) -> *const c_char {
    // SAFETY: `data` is `load`'s `Reading`, the function at `CHUNK`, the slot `PIECE`
    // made; errors raised here unwind into `lua_load`'s protected parser.
    unsafe {
        ffi::luaL_checkstack(state, 2, c"too many nested functions".as_ptr());
        ffi::lua_pushvalue(state, CHUNK);
        ffi::lua_call(state, 0, 1);
        if ffi::lua_isnil(state, -1) != 0 {
            ffi::lua_pop(state, 1);
            *size = 0;
            return std::ptr::null();
        }
        if ffi::lua_isstring(state, -1) == 0 {
            ffi::luaL_error(state, c"reader function must return a string".as_ptr());
        }
        ffi::lua_replace(state, PIECE);
        let piece = ffi::lua_tolstring(state, PIECE, size);
        hand_over(&mut *data.cast::<Reading>(), piece, size)
    }
}

/// Hands a piece to the parser, or ends the chunk there when its first piece is binary
/// and the mode would let Lua load it (where it would not, Lua refuses it with its own
/// message).
///
/// # Safety
/// `piece` must point to `*size` bytes, kept alive by the stack.
unsafe fn hand_over(
    reading: &mut Reading,
    piece: *const c_char,
    size: *mut usize,
) -> *const c_char {
    // SAFETY: as the caller promises; the first byte is read only when there is one.
    unsafe {
        if *size > 0
            && !std::mem::replace(&mut reading.started, true)
            && *piece.cast::<u8>() == BINARY_SIGNATURE
            && reading.binary_allowed
        {
            reading.refused = true;
            *size = 0;
            return std::ptr::null();
        }
    }
    piece
}
