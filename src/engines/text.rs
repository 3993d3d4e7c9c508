//! The text primitives behind `lua/text` and `lua/chunking`: line counting and
//! splitting, finding every occurrence, counting words, chunking and grep, in Rust over
//! the bytes of the Lua string (borrowed, never copied) and checking the limits as they go.
//!
//! They are not built-ins for the model: the registry's Lua functions call them through
//! the hidden built-in table [`TEXT_PRIMITIVES_GLOBAL`](crate::conventions::TEXT_PRIMITIVES_GLOBAL) and keep their own names, documentation,
//! argument checks and results. Where that table is absent (a bare Lua VM, as the
//! library's own tests use), the Lua functions run their pure-Lua code instead, so both
//! paths are tested against the same expectations.
//!
//! ```
//! use rlm_registry::{Registry, environment::{Environment, Limits}};
//!
//! let env = Environment::new(Registry::baked().clone(), Limits::default())?;
//! env.set_context("a\r\nb\n\nc\n")?;
//! let run = env.execute("print(line_count(context), #lines(context), word_count(context))")?;
//! assert_eq!(run.output, "4\t4\t3\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::rc::Rc;

use memchr::memmem;
use mlua::{FromLua, Lua, LuaString, Table, Value};

use super::corpus::documents;
use super::grep::{LineMatcher, Origin, Searched, matching_lines, result_table};
use super::limits::Guard;
use super::meter::{CHECK_BYTES, VALUE_COST, WorkMeter, string_sequence};
use super::patterns;
use super::re::RegexCache;

/// Where one line is: `start..end` without its terminator (`"\n"` or `"\r\n"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Line {
    start: usize,
    end: usize,
}

/// The lines of `text` as `lua/text` defines them: `"\n"` and `"\r\n"` end a line, and a
/// final newline does not start an extra empty line.
fn lines_of(text: &[u8]) -> impl Iterator<Item = Line> + '_ {
    let mut position = 0;
    std::iter::from_fn(move || {
        if position >= text.len() {
            return None;
        }
        let rest = text.get(position..).unwrap_or_default();
        let stop = memchr::memchr(b'\n', rest).map_or(text.len(), |i| position + i);
        let end = if stop > position && text.get(stop - 1) == Some(&b'\r') {
            stop - 1
        } else {
            stop
        };
        let line = Line {
            start: position,
            end,
        };
        position = stop + 1;
        Some(line)
    })
}

fn slice(text: &[u8], line: Line) -> &[u8] {
    text.get(line.start..line.end).unwrap_or_default()
}

/// Every line's position, checking the limits (the vector lives outside Lua).
fn line_table(text: &[u8], meter: &mut WorkMeter) -> mlua::Result<Vec<Line>> {
    let mut all = Vec::new();
    for line in lines_of(text) {
        all.push(line);
        meter.hold(all.capacity() * std::mem::size_of::<Line>());
        meter.spend(line.end - line.start + 1)?;
    }
    Ok(all)
}

/// `line_count(text)`: newlines, plus one for a last line without one.
fn line_count(text: &[u8], meter: &mut WorkMeter) -> mlua::Result<usize> {
    let mut count = 0;
    for piece in text.chunks(CHECK_BYTES) {
        count += memchr::memchr_iter(b'\n', piece).count();
        meter.spend(piece.len())?;
    }
    if text.last().is_some_and(|&b| b != b'\n') {
        count += 1;
    }
    Ok(count)
}

/// Lines `first..=last` (1-based, already clamped by the caller to the text's lines)
/// joined with `"\n"`.
fn join_lines(
    text: &[u8],
    first: usize,
    last: usize,
    meter: &mut WorkMeter,
) -> mlua::Result<Vec<u8>> {
    let mut out = Vec::new();
    for (index, line) in lines_of(text).enumerate() {
        let number = index + 1;
        if number > last {
            break;
        }
        meter.spend(line.end - line.start + 1)?;
        if number >= first {
            if number > first {
                out.push(b'\n');
            }
            out.extend_from_slice(slice(text, line));
            meter.hold(out.capacity());
        }
    }
    Ok(out)
}

/// C's `isspace` in the "C" locale, which `%s` and `%S` use.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t'..=b'\r')
}

/// `word_count(text)`: runs of bytes that are not whitespace.
fn word_count(text: &[u8], meter: &mut WorkMeter) -> mlua::Result<usize> {
    let mut count = 0;
    let mut in_word = false;
    for piece in text.chunks(CHECK_BYTES) {
        for &byte in piece {
            let word = !is_space(byte);
            count += usize::from(word && !in_word);
            in_word = word;
        }
        meter.spend(piece.len())?;
    }
    Ok(count)
}

/// `find_all(text, needle)`: 1-based starts of every occurrence, overlapping ones too.
fn find_all(lua: &Lua, text: &[u8], needle: &[u8], meter: &mut WorkMeter) -> mlua::Result<Table> {
    let positions = lua.create_table()?;
    let finder = memmem::Finder::new(needle);
    let mut from = 0;
    let mut n = 0;
    while let Some(at) = text.get(from..).and_then(|rest| finder.find(rest)) {
        let start = from + at;
        n += 1;
        positions.raw_set(n, start + 1)?;
        meter.spend(at + VALUE_COST)?;
        from = start + 1;
    }
    Ok(positions)
}

/// `chunk_by_lines(text, n, overlap)` (arguments already checked).
fn chunk_by_lines(
    lua: &Lua,
    text: &[u8],
    n: usize,
    overlap: usize,
    meter: &mut WorkMeter,
) -> mlua::Result<Table> {
    let all = line_table(text, meter)?;
    let chunks = lua.create_table()?;
    let mut joined = Vec::new();
    let mut first = 0;
    let mut count = 0;
    while first < all.len() {
        let last = (first + n - 1).min(all.len() - 1);
        joined.clear();
        for (i, &line) in all[first..=last].iter().enumerate() {
            if i > 0 {
                joined.push(b'\n');
            }
            joined.extend_from_slice(slice(text, line));
        }
        meter.hold(joined.capacity() + all.len() * 16);
        meter.spend(joined.len() + VALUE_COST)?;
        count += 1;
        chunks.raw_set(count, lua.create_string(&joined)?)?;
        if last == all.len() - 1 {
            break;
        }
        first = last - overlap + 1;
    }
    Ok(chunks)
}

/// `chunk_by_separator(text, separator, max_size)` (arguments already checked).
fn chunk_by_separator(
    lua: &Lua,
    text: &[u8],
    separator: &[u8],
    max_size: Option<usize>,
    meter: &mut WorkMeter,
) -> mlua::Result<Table> {
    let chunks = lua.create_table()?;
    let mut count = 0;
    let mut push = |piece: &[u8], meter: &mut WorkMeter| -> mlua::Result<()> {
        count += 1;
        meter.spend(piece.len() + VALUE_COST)?;
        chunks.raw_set(count, lua.create_string(piece)?)
    };
    let pieces = memmem::find_iter(text, separator)
        .chain(std::iter::once(text.len()))
        .scan(0, |start, found| {
            let piece = text.get(*start..found).unwrap_or_default();
            *start = found + separator.len();
            Some(piece)
        })
        .filter(|piece| !piece.is_empty());
    let Some(max_size) = max_size else {
        for piece in pieces {
            push(piece, meter)?;
        }
        return Ok(chunks);
    };
    let mut current: Option<Vec<u8>> = None;
    for piece in pieces {
        match current.as_mut() {
            Some(merged) if merged.len() + separator.len() + piece.len() <= max_size => {
                merged.extend_from_slice(separator);
                merged.extend_from_slice(piece);
            }
            _ => {
                if let Some(done) = current.replace(piece.to_vec()) {
                    push(&done, meter)?;
                }
            }
        }
        meter.hold(current.as_ref().map_or(0, Vec::capacity));
    }
    if let Some(done) = current {
        push(&done, meter)?;
    }
    Ok(chunks)
}

/// Whether a chunk may end after byte `end` (1-based): the next byte does not continue
/// a UTF-8 character.
fn is_boundary(text: &[u8], end: usize) -> bool {
    text.get(end).is_none_or(|&b| !(0x80..0xC0).contains(&b))
}

/// `utf8_safe_end` of `lua/chunking`: the largest end in `floor..=stop` (1-based,
/// inclusive) that does not cut a character, the text's end when `stop` is past it.
fn utf8_safe_end(text: &[u8], stop: usize, floor: usize) -> Option<usize> {
    if stop >= text.len() {
        return Some(text.len());
    }
    (floor..=stop).rev().find(|&end| is_boundary(text, end))
}

/// `chunk_by_size(text, size, overlap)` (arguments already checked): where each chunk
/// starts and ends (0-based, exclusive end).
fn size_chunks(
    text: &[u8],
    size: usize,
    overlap: usize,
) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut first = 1;
    std::iter::from_fn(move || {
        if first > text.len() {
            return None;
        }
        let stop = first + size - 1;
        let last = utf8_safe_end(text, stop, first)
            .unwrap_or(stop)
            .min(text.len());
        let chunk = (first - 1, last);
        first = if last >= text.len() {
            text.len() + 1
        } else if overlap > 0 {
            utf8_safe_end(text, last.saturating_sub(overlap), first).unwrap_or(last) + 1
        } else {
            last + 1
        };
        Some(chunk)
    })
}

/// A count argument the Lua side has already checked; negative values read as 0.
fn count(value: i64) -> usize {
    usize::try_from(value).unwrap_or(0)
}

/// A primitive of the hidden table (a row of the built-ins table each, under
/// `_text_primitives`): the environment's installer names one per row, matched here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Primitive {
    LineCount,
    Lines,
    JoinLines,
    WordCount,
    FindAll,
    FindAllRegex,
    Grep,
    ChunkByLines,
    ChunkBySeparator,
    ChunkBySize,
    DocList,
    /// One of `collections`' primitives.
    Collection(super::collections::Primitive),
}

/// Makes the primitive `which` for one environment, checking `guard` as it works.
pub(crate) fn primitive(
    lua: &Lua,
    guard: &Rc<Guard>,
    cache: &Rc<RegexCache>,
    which: Primitive,
) -> mlua::Result<mlua::Function> {
    macro_rules! primitive {
        (|$lua:ident, $meter:ident, $args:tt : $ty:ty| $body:expr) => {{
            let guard = Rc::clone(guard);
            lua.create_function(move |$lua, $args: $ty| {
                let mut $meter = WorkMeter::new($lua, &guard);
                $body
            })
        }};
    }
    match which {
        Primitive::LineCount => {
            primitive!(|_lua, meter, text: LuaString| line_count(&text.as_bytes(), &mut meter))
        }
        Primitive::Lines => primitive!(|lua, meter, text: LuaString| {
            let text = text.as_bytes();
            // One pass finds the lines (sizing the table), not one to count and one to cut.
            let all = line_table(&text, &mut meter)?;
            string_sequence(
                lua,
                all.iter().map(|&line| slice(&text, line)),
                all.len(),
                &mut meter,
            )
        }),
        Primitive::JoinLines => {
            primitive!(|lua, meter, (text, first, last): (LuaString, i64, i64)| {
                let joined = join_lines(&text.as_bytes(), count(first), count(last), &mut meter)?;
                lua.create_string(joined)
            })
        }
        Primitive::WordCount => {
            primitive!(|_lua, meter, text: LuaString| word_count(&text.as_bytes(), &mut meter))
        }
        Primitive::FindAll => {
            primitive!(|lua, meter, (text, needle): (LuaString, LuaString)| {
                find_all(lua, &text.as_bytes(), &needle.as_bytes(), &mut meter)
            })
        }
        Primitive::FindAllRegex => {
            let cache = Rc::clone(cache);
            primitive!(|lua, meter, (text, pattern): (LuaString, LuaString)| {
                let regex = cache.get("find_all", &pattern.as_bytes(), "")?;
                let text = text.as_bytes();
                let positions = lua.create_table()?;
                let mut previous = 0;
                for (n, found) in regex.find_iter(&text).enumerate() {
                    meter.spend(found.start().saturating_sub(previous) + VALUE_COST)?;
                    previous = found.start();
                    positions.raw_set(n + 1, found.start() + 1)?;
                }
                Ok(positions)
            })
        }
        Primitive::Grep => grep_function(lua, guard, cache),
        Primitive::ChunkByLines => {
            primitive!(|lua, meter, (text, n, overlap): (LuaString, i64, i64)| {
                // The Lua side refuses an overlap of n or more; code may call the primitive
                // directly, so it is clamped here too (else no chunk would move on).
                let n = count(n).max(1);
                chunk_by_lines(
                    lua,
                    &text.as_bytes(),
                    n,
                    count(overlap).min(n - 1),
                    &mut meter,
                )
            })
        }
        Primitive::ChunkBySeparator => {
            primitive!(
                |lua, meter, (text, separator, max): (LuaString, LuaString, Option<i64>)| {
                    chunk_by_separator(
                        lua,
                        &text.as_bytes(),
                        &separator.as_bytes(),
                        max.map(count),
                        &mut meter,
                    )
                }
            )
        }
        Primitive::ChunkBySize => {
            primitive!(|lua, meter, (text, size, overlap): (LuaString, i64, i64)| {
                let text = text.as_bytes();
                let size = count(size).max(4);
                let chunks = size_chunks(&text, size, count(overlap).min(size - 1));
                let expected = text.len() / size + 1;
                string_sequence(
                    lua,
                    chunks.map(|(start, end)| text.get(start..end).unwrap_or_default()),
                    expected,
                    &mut meter,
                )
            })
        }
        Primitive::DocList => lua.create_function(|lua, corpus: Table| doc_list(lua, &corpus)),
        Primitive::Collection(which) => super::collections::primitive(lua, guard, which),
    }
}

/// `grep(text, pattern, context, mode)`, mode `"plain"`, `"pattern"` or `"regex"`; `text`
/// may be a corpus, whose documents are searched in order, each match then carrying
/// `doc` and `name`.
fn grep_function(
    lua: &Lua,
    guard: &Rc<Guard>,
    cache: &Rc<RegexCache>,
) -> mlua::Result<mlua::Function> {
    let guard = Rc::clone(guard);
    let cache = Rc::clone(cache);
    lua.create_function(
        move |lua, (text, pattern, context, mode): (Value, LuaString, i64, String)| {
            let mut meter = WorkMeter::new(lua, &guard);
            let pattern_bytes = pattern.as_bytes();
            // As in `string.find`, a pattern without special characters is plain text.
            let plain =
                mode == "plain" || (mode == "pattern" && !patterns::has_specials(&pattern_bytes));
            let matcher = match mode.as_str() {
                _ if plain => LineMatcher::Plain(memmem::Finder::new(&pattern_bytes)),
                "regex" => LineMatcher::Regex(cache.get("grep", &pattern_bytes, "")?),
                _ => LineMatcher::pattern(&pattern_bytes, &cache),
            };
            let context = count(context);
            let corpus = match &text {
                Value::Table(corpus) => documents("grep", corpus)?,
                _ => {
                    let text = text_arg(lua, text)?;
                    let text = text.as_bytes();
                    let hits = matching_lines(&text, &matcher, &mut meter)?;
                    let searched = Searched {
                        text: &text,
                        hits,
                        origin: None,
                    };
                    return result_table(lua, &[searched], context, &mut meter);
                }
            };
            let texts: Vec<_> = corpus
                .iter()
                .map(|document| document.text.as_ref().map(LuaString::as_bytes))
                .collect();
            let mut searched = Vec::with_capacity(corpus.len());
            for (i, (document, text)) in corpus.iter().zip(&texts).enumerate() {
                let text: &[u8] = text.as_deref().unwrap_or_default();
                searched.push(Searched {
                    text,
                    hits: matching_lines(text, &matcher, &mut meter)?,
                    origin: Some(Origin {
                        doc: i + 1,
                        name: &document.name,
                    }),
                });
            }
            result_table(lua, &searched, context, &mut meter)
        },
    )
}

/// `doc_list(corpus)`: a `{doc, name, text}` table per document (`text` "" for one
/// without text).
fn doc_list(lua: &Lua, corpus: &Table) -> mlua::Result<Table> {
    let corpus = documents("doc_list", corpus)?;
    let list = lua.create_table_with_capacity(corpus.len(), 0)?;
    for (i, document) in corpus.into_iter().enumerate() {
        let entry = lua.create_table_with_capacity(0, 3)?;
        entry.raw_set("doc", i + 1)?;
        entry.raw_set("name", document.name)?;
        match document.text {
            Some(text) => entry.raw_set("text", text)?,
            None => entry.raw_set("text", "")?,
        }
        list.raw_set(i + 1, entry)?;
    }
    Ok(list)
}

/// A text argument (the first): a string, or a number as Lua turns it into one; else
/// the error mlua gives an argument that does not convert.
// mlua's `BadArgument` holds its cause in an `Arc`, whatever the error's threads.
#[allow(clippy::arc_with_non_send_sync)]
fn text_arg(lua: &Lua, value: Value) -> mlua::Result<LuaString> {
    let from = value.type_name();
    LuaString::from_lua(value, lua).map_err(|_| mlua::Error::BadArgument {
        to: None,
        pos: 1,
        name: None,
        cause: std::sync::Arc::new(mlua::Error::FromLuaConversionError {
            from,
            to: "string".to_string(),
            message: None,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<&str> {
        lines_of(text.as_bytes())
            .map(|line| &text[line.start..line.end])
            .collect()
    }

    #[test]
    fn lines_follow_the_lua_library() {
        assert_eq!(spans(""), Vec::<&str>::new());
        assert_eq!(spans("\n"), vec![""]);
        assert_eq!(spans("a\r\nb\n\n"), vec!["a", "b", ""]);
        assert_eq!(spans("a\r\r\nb\r"), vec!["a\r", "b"]);
    }

    #[test]
    fn safe_ends_never_cut_a_character() {
        let text = "aé".as_bytes(); // 'a', 0xC3, 0xA9
        assert_eq!(utf8_safe_end(text, 2, 1), Some(1));
        assert_eq!(utf8_safe_end(text, 3, 1), Some(3));
        assert_eq!(utf8_safe_end(&[0xA9, 0xA9, 0xA9, 0x41], 2, 1), None);
    }
}
