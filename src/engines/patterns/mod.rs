//! Lua 5.4's pattern matching (`lstrlib.c`), ported to Rust so that it can be stopped.
//!
//! Lua's `string.find`, `string.match`, `string.gmatch` and `string.gsub` run their matcher in C,
//! where the instruction hook never fires: a backtracking pattern such as
//! `("a"):rep(1e5):find(".-.-.-.-.-.-b")` would run for hours whatever the time limit. The port
//! below counts its steps and, every [`STEP_INTERVAL`] of them, asks the execution's
//! [`Guard`](limits::Guard) whether a limit has tripped, so a runaway search ends with the
//! limit's error like any other Lua code.
//!
//! [`Matcher`](matcher::Matcher) follows `lstrlib.c` (Lua 5.4.9) function by function (`match`,
//! `max_expand`, `matchbalance`, ...), with the same recursion limit and error messages, so scripts
//! see the same results. Lua strings end with a hidden `'\0'`, and the C code relies on reading it;
//! [`Matcher::pat`](matcher::Matcher) and `Matcher::src` return `0` past the end to behave the same
//! without reading out of bounds.
//!
//! Fast paths ([`Plan`](plan::Plan), [`Searcher`](plan::Searcher)): patterns that cannot backtrack
//! skip the general matcher with the same results and errors. A pattern without special characters
//! is a `memchr`/`memmem` search; one single-character class, alone or with `+`, is a linear scan;
//! any other pattern skips to the next byte its first class matches before running the matcher.
//! `string.find` answers plain searches of up to [`SCAN_WINDOW`] bytes in a C function without
//! allocating, and `gmatch` over a literal or one-class pattern is a C iterator; longer scans check
//! the limits every window.
//!
//! Errors: an error returned by a Rust callback reaches Lua as an mlua userdata, not as the string
//! `luaL_error` makes. So the Rust functions report a failure as values (`FAIL, message, level`)
//! and a small C function in front of each ([`front`]) raises it with `lua_error`, the message
//! prefixed with the caller's position by `luaL_where` as `luaL_error` does; no Lua frame stands
//! between the caller and the string function, so even a tail call reports the same position as C
//! Lua. A `gsub` replacement function (or `__index`) is called from the C function in front
//! too, as C Lua calls it from `gsub`'s frame, so its errors pass through untouched and
//! error levels count the same frames. Only limit errors travel as mlua errors.
//!
//! The files: [`matcher`] (the port), [`plan`] (the fast paths), [`front`] (the C functions in
//! front), [`functions`] (argument checks, `find`, `match`, `gmatch`, [`install`]), [`gsub`] and
//! [`regular`] (a regular pattern as a regex, for `grep`).

mod front;
mod functions;
mod gsub;
mod matcher;
mod plan;
mod regular;

use super::limits;

pub(crate) use functions::install;
pub(crate) use plan::{find_in, has_specials, required_literal};
pub(crate) use regular::as_regex;

/// `LUA_MAXCAPTURES`.
const MAX_CAPTURES: usize = 32;
/// `MAXCCALLS`: how deep `match` may recurse before "pattern too complex".
const MAX_CALLS: usize = 200;
/// `L_ESC`.
const ESCAPE: u8 = b'%';
/// Characters that make `string.find` use the matcher rather than a plain search.
const SPECIALS: &[u8] = b"^$*+?.([%-";
/// Matcher steps between two checks of the limits: a step costs nanoseconds, a check
/// tens of them, so this stops a runaway pattern within a fraction of a millisecond.
const STEP_INTERVAL: usize = 10_000;

/// Asks whether the execution may go on. The argument is the number of bytes the caller
/// holds outside Lua's allocator (a `gsub` result being built), to be counted with Lua's.
pub(crate) type Check<'a> = &'a dyn Fn(usize) -> mlua::Result<()>;

/// Why a string function failed.
pub(crate) enum Failure {
    /// A Lua error message, raised at the caller's position (like `luaL_error`).
    Raise(String),
    /// A limit tripped, or Lua itself failed (memory): propagated as is.
    Host(mlua::Error),
}

impl From<mlua::Error> for Failure {
    fn from(error: mlua::Error) -> Self {
        Failure::Host(error)
    }
}

fn raise(message: impl Into<String>) -> Failure {
    Failure::Raise(message.into())
}

/// Bytes a fast path scans between two checks of the limits.
const SCAN_WINDOW: usize = 1 << 20;

impl Failure {
    /// The failure as an error of a Rust function called from Lua.
    pub(crate) fn into_lua_error(self) -> mlua::Error {
        match self {
            Failure::Raise(message) => mlua::Error::RuntimeError(message),
            Failure::Host(error) => error,
        }
    }
}
