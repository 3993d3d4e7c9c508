//! What `print` writes, as text, without losing a byte.
//!
//! Lua strings are bytes; the captured output ([`crate::environment::Execution::output`])
//! is a `String`, read by the model, the JSON API and MCP. Each byte that is not part of
//! valid UTF-8 is shown as Lua's own escape `\xNN` (two lower-case hex digits), which a
//! model can paste back into a Lua string literal to mean that byte; valid UTF-8 is left
//! exactly as printed. The text is for reading: a program may also print a literal
//! backslash, `x` and two hex digits, which reads the same. The exact bytes are kept
//! beside it ([`crate::environment::Environment::last_output_bytes`]); `rlm exec` and
//! `rlm run` write those.
//!
//! ```
//! use rlm_registry::environment::escape_output;
//!
//! assert_eq!(escape_output(b"caf\xe9\n"), "caf\\xe9\n");
//! assert_eq!(escape_output("café".as_bytes()), "café");
//! assert_eq!(escape_output(b"\xe2\x82\t\xac"), "\\xe2\\x82\t\\xac");
//! ```

use std::borrow::Cow;

/// `bytes` as text: valid UTF-8 as it is, every other byte as `\xNN`.
pub fn escape_output(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for &byte in chunk.invalid() {
            out.push('\\');
            out.push('x');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 15)]));
        }
    }
    Cow::Owned(out)
}
