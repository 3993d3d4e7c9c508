//! The text engines the sandbox's built-ins and string functions run on: Lua's pattern
//! matching ported to run under the limits (`patterns/`), regular expressions (`re`),
//! `grep` over lines (`grep`), the library's line and chunk primitives (`text`) and
//! Python's batteries over Lua tables (`collections/`).
//!
//! An engine works on a Lua state through the C API or mlua, never on the environment:
//! all it knows of an execution is the [`Guard`](limits::Guard) it checks as it works
//! (time, memory, a cancelled call) and the [`WorkMeter`](meter::WorkMeter) that spaces
//! those checks out. The environment installs them (`environment::builtins`) and owns the
//! rest of the limits. Results are built in one protected pass with the collector paused
//! ([`meter::with_collector_paused`]), so a large result costs no collector cycles while
//! it is still being made.
//!
//! # Where things are
//!
//! - `patterns/`: the port of `lstrlib.c`'s matcher, its fast paths, the C functions in
//!   front of it, the string functions and `gsub`; `regular.rs` turns a regular Lua
//!   pattern into a regular expression.
//! - `re`: the `re` built-in, and the per-environment cache of compiled regular
//!   expressions, which also keeps `grep`'s translated Lua patterns.
//! - `corpus`: a corpus (a list of documents or strings) as `grep` and `doc_search` read
//!   it; `doc_search`: the built-in that ranks a corpus's documents by BM25.
//! - `grep`, `text`: the library's primitives over a text; `collections/` (with
//!   `sort.rs`, `sort_by`'s keys and sort): those over Lua tables.
//! - `limits`: the limits and the [`Guard`](limits::Guard); `meter`: the
//!   [`WorkMeter`](meter::WorkMeter) and the collector's pause; `lauxlib`: the C
//!   API helpers mlua does not export.

use std::borrow::Cow;

pub(crate) mod collections;
pub(crate) mod corpus;
pub(crate) mod doc_search;
pub(crate) mod grep;
pub(crate) mod lauxlib;
pub(crate) mod limits;
pub(crate) mod meter;
pub(crate) mod patterns;
pub(crate) mod re;
pub(crate) mod text;

/// The most bytes of a string a message shows: a message names a value, it never copies
/// a large one (a 100 MB option name, escaped, would be held six times outside Lua).
const SHOWN_BYTES: usize = 64;

/// A string's first bytes as a message shows them, `…` after when there is more. Bytes
/// that are not UTF-8 are shown as U+FFFD.
pub(crate) fn shown(bytes: &[u8]) -> Cow<'_, str> {
    if bytes.len() <= SHOWN_BYTES {
        return String::from_utf8_lossy(bytes);
    }
    Cow::Owned(format!(
        "{}…",
        String::from_utf8_lossy(&bytes[..SHOWN_BYTES])
    ))
}

/// A string quoted as a message shows it: `"name"`, escaped as Rust escapes a string,
/// cut as [`shown`] cuts it (the `…` after the closing quote).
pub(crate) fn quoted(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(SHOWN_BYTES)];
    let more = if cut.len() < bytes.len() { "…" } else { "" };
    format!("{:?}{more}", String::from_utf8_lossy(cut))
}
