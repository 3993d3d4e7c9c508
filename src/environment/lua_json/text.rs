//! The walk's JSON as text, through serde_json's formatters (compact, or indented as
//! `json.encode(v, {indent = n})` asks): `json.encode`'s writer.

use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

use super::walk::Sink;
use crate::engines::meter::WorkMeter;

/// Spaces enough for the deepest indent asked for.
const SPACES: &[u8; super::MAX_INDENT] = b"                ";

/// JSON text being written.
pub(super) struct TextSink<F> {
    out: Vec<u8>,
    formatter: F,
}

impl TextSink<CompactFormatter> {
    /// Compact text, written after what `out` holds.
    pub(super) fn compact(out: Vec<u8>) -> Self {
        TextSink {
            out,
            formatter: CompactFormatter,
        }
    }
}

impl TextSink<PrettyFormatter<'static>> {
    /// Each value on its own line, `indent` (at most [`super::MAX_INDENT`]) spaces a
    /// level, written after what `out` holds.
    pub(super) fn pretty(indent: usize, out: Vec<u8>) -> Self {
        let indent = &SPACES[..indent.min(SPACES.len())];
        TextSink {
            out,
            formatter: PrettyFormatter::with_indent(indent),
        }
    }
}

impl<F> TextSink<F> {
    pub(super) fn into_bytes(self) -> Vec<u8> {
        self.out
    }
}

// Writing into a `Vec` cannot fail, so the formatters' `io::Result`s are all `Ok`.
impl<F: Formatter> Sink for TextSink<F> {
    fn null(&mut self) {
        let _ = self.formatter.write_null(&mut self.out);
    }

    fn boolean(&mut self, b: bool) {
        let _ = self.formatter.write_bool(&mut self.out, b);
    }

    fn integer(&mut self, i: i64) {
        let _ = self.formatter.write_i64(&mut self.out, i);
    }

    fn float(&mut self, f: f64) {
        let _ = self.formatter.write_f64(&mut self.out, f);
    }

    fn string(&mut self, s: &str) {
        // Escaping is the same whatever the layout, so the compact writer's will do.
        let _ = serde_json::to_writer(&mut self.out, s);
    }

    fn begin_array(&mut self, _len: usize) {
        let _ = self.formatter.begin_array(&mut self.out);
    }

    fn array_item(&mut self, first: bool) {
        let _ = self.formatter.begin_array_value(&mut self.out, first);
    }

    fn end_array(&mut self) {
        let _ = self.formatter.end_array(&mut self.out);
    }

    fn begin_object(&mut self) {
        let _ = self.formatter.begin_object(&mut self.out);
    }

    fn object_key(&mut self, key: &str, first: bool) {
        let _ = self.formatter.begin_object_key(&mut self.out, first);
        self.string(key);
        let _ = self.formatter.end_object_key(&mut self.out);
        let _ = self.formatter.begin_object_value(&mut self.out);
    }

    fn end_object(&mut self) {
        let _ = self.formatter.end_object(&mut self.out);
    }

    fn end_item(&mut self) {
        // Both formatters do the same after an array's value as after an object's.
        let _ = self.formatter.end_array_value(&mut self.out);
    }

    fn held(&self) -> usize {
        self.out.capacity()
    }

    fn before_string(&self, meter: &WorkMeter, len: usize) -> mlua::Result<()> {
        // Escaped, a byte takes up to six (`\u001f`), and the quotes two.
        let most = len.saturating_mul(6).saturating_add(2);
        meter.check_growth(self.out.len(), self.out.capacity(), most)
    }
}
