//! Doc comments: finding the block above a definition and reading its tags.
//!
//! Two styles are accepted and may be mixed:
//!
//! - LuaLS: `---@param name? type description`, `---@return type [name] [description]`
//!   (`---@return type # description` for a description without a name), `---@vararg type`.
//! - LDoc: `--- Summary.` then `-- @param name description`, `-- @tparam type name
//!   description`, `-- @return description`, `-- @treturn type description`, with the
//!   `[opt]` modifier.
//!
//! A tag written `---@` is always LuaLS. With a space (`-- @param`, `--- @param`) it is
//! LuaLS when the word after the name looks like a type, LDoc otherwise.
//!
//! The name of a LuaLS return value is read as LuaLS reads it: on a `---` line, the word
//! right after the type is the name when it is an identifier (alone, or followed by the
//! description); anything else (`#`, `` `code` ``, `(note)`, a number) starts the
//! description. LuaLS itself ignores `--` lines, so an LDoc-style `-- @return type text`
//! keeps all its text as the description.

use std::ops::Range;

use super::lua_type::{looks_like_type, split_type};

/// The comment block directly above a definition.
#[derive(Debug)]
pub(crate) struct DocBlock<'a> {
    /// The block's lines, each trimmed of indentation, with their byte offsets.
    pub lines: Vec<(usize, &'a str)>,
}

impl DocBlock<'_> {
    /// The doc as the model reads it: the lines, indentation removed.
    pub fn text(&self) -> String {
        let lines: Vec<&str> = self.lines.iter().map(|(_, l)| l.trim_end()).collect();
        lines.join("\n")
    }

    /// Byte span of the block's first line.
    pub fn first_line_span(&self) -> Range<usize> {
        let (offset, line) = self.lines[0];
        offset..offset + line.len()
    }
}

/// Finds the doc block in `source[region]`, the trivia between the previous token and a
/// definition: the run of comment lines directly above the definition (no blank line in
/// between), from its topmost line that starts with `---`.
pub(crate) fn find_doc_block(source: &str, region: Range<usize>) -> Option<DocBlock<'_>> {
    let text = &source[region.clone()];
    // The definition must start its own line: a comment ending on the same line does not count.
    let last_newline = text.rfind('\n')?;
    if !text[last_newline + 1..].trim().is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    let mut end = last_newline;
    loop {
        let start = text[..end].rfind('\n').map_or(0, |i| i + 1);
        let starts_region_mid_line = start == 0 && !at_line_start(source, region.start);
        let raw = &text[start..end];
        let line = raw.trim_start();
        if starts_region_mid_line || !line.starts_with("--") {
            break;
        }
        let indent = raw.len() - line.len();
        lines.push((region.start + start + indent, line.trim_end_matches('\r')));
        if start == 0 {
            break;
        }
        end = start - 1;
    }
    lines.reverse();
    let first_doc_line = lines.iter().position(|(_, l)| l.starts_with("---"))?;
    lines.drain(..first_doc_line);
    Some(DocBlock { lines })
}

fn at_line_start(source: &str, offset: usize) -> bool {
    source[..offset]
        .rsplit('\n')
        .next()
        .is_none_or(|before| before.trim().is_empty())
}

/// A doc block read into description and tags.
#[derive(Debug, Default)]
pub(crate) struct ParsedDoc<'a> {
    pub description: String,
    pub params: Vec<DocParam<'a>>,
    pub returns: Vec<DocReturn>,
    /// Capability tags from `---@tag name [name …]`, lower-cased, in doc order, no repeats.
    pub tags: Vec<String>,
}

#[derive(Debug)]
pub(crate) struct DocParam<'a> {
    pub name: &'a str,
    /// Byte span of the name in the file, for E004.
    pub span: Range<usize>,
    pub ty: String,
    pub optional: bool,
    pub description: String,
}

#[derive(Debug)]
pub(crate) struct DocReturn {
    pub ty: String,
    /// The LuaLS name of the value (`chunks` in `---@return string[] chunks The chunks`);
    /// empty when the doc gives none.
    pub name: String,
    pub description: String,
}

/// The parameter names a doc comment's `@param` / `@tparam` tags declare, in doc order
/// (`name?` as `name`, varargs as `...`): what a host function's declaration lists.
///
/// ```
/// use rlm_registry::conventions::documented_params;
/// let doc = "--- F.\n---@param a string\n---@param b? integer\n-- @tparam number c C\n---@param ... any";
/// assert_eq!(documented_params(doc), ["a", "b", "c", "..."]);
/// ```
pub fn documented_params(doc: &str) -> Vec<&str> {
    let mut offset = 0;
    let lines = doc
        .lines()
        .map(|line| {
            let start = offset;
            offset += line.len() + 1;
            (start, line.trim_start())
        })
        .collect();
    parse(&DocBlock { lines })
        .params
        .into_iter()
        .map(|param| param.name)
        .collect()
}

/// Where the description text of a tag continues on later untagged lines.
enum Continuation {
    Description,
    Param,
    Return,
    Other,
}

pub(crate) fn parse<'a>(block: &DocBlock<'a>) -> ParsedDoc<'a> {
    let mut doc = ParsedDoc::default();
    let mut description = Vec::new();
    let mut continuation = Continuation::Description;
    for &(offset, line) in &block.lines {
        let dashes = line.len() - line.trim_start_matches('-').len();
        let content = &line[dashes..];
        if content.trim().is_empty() {
            if matches!(continuation, Continuation::Description) && content.is_empty() && dashes > 3
            {
                continue; // a `-------` separator line
            }
            if matches!(continuation, Continuation::Description) {
                description.push("");
            }
            continue;
        }
        let body = content.strip_prefix(' ').unwrap_or(content);
        let Some(tag_text) = body.trim_start().strip_prefix('@') else {
            append(&mut doc, &mut description, &continuation, body.trim_end());
            continue;
        };
        let marker = Marker {
            tight: content.starts_with('@'),
            // LuaLS reads `---@…` and `--- @…` but not `-- @…` or `----@…`.
            luals_line: dashes == 3,
        };
        let tag_offset = offset + (tag_text.as_ptr() as usize - line.as_ptr() as usize);
        continuation = read_tag(&mut doc, tag_text, tag_offset, marker);
    }
    while description.last().is_some_and(|l| l.trim().is_empty()) {
        description.pop();
    }
    while description.first().is_some_and(|l| l.trim().is_empty()) {
        description.remove(0);
    }
    doc.description = description.join("\n");
    doc
}

fn append<'a>(
    doc: &mut ParsedDoc<'_>,
    description: &mut Vec<&'a str>,
    continuation: &Continuation,
    text: &'a str,
) {
    let target = match continuation {
        Continuation::Description => {
            description.push(text);
            return;
        }
        Continuation::Param => doc.params.last_mut().map(|p| &mut p.description),
        Continuation::Return => doc.returns.last_mut().map(|r| &mut r.description),
        Continuation::Other => None,
    };
    if let Some(target) = target {
        if !target.is_empty() {
            target.push(' ');
        }
        target.push_str(text.trim());
    }
}

/// How a tag line was written, which decides between the LuaLS and LDoc readings.
#[derive(Clone, Copy)]
struct Marker {
    /// `@` follows the dashes directly (`---@param`): always LuaLS.
    tight: bool,
    /// Exactly three dashes, the lines LuaLS itself parses as annotations.
    luals_line: bool,
}

/// Reads one tag line (`text` starts after the `@`) into `doc`.
fn read_tag<'a>(
    doc: &mut ParsedDoc<'a>,
    text: &'a str,
    offset: usize,
    marker: Marker,
) -> Continuation {
    let (tag, rest) = split_word(text);
    let (tag, modifier) = match tag.find('[') {
        Some(i) => (&tag[..i], &tag[i..]),
        None => (tag, ""),
    };
    let ldoc_optional = modifier.starts_with("[opt");
    let span_of = |word: &str| {
        let within = (word.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
        let start = offset + within.min(text.len());
        start..start + word.len()
    };
    match tag {
        "param" => {
            let (name, after_name) = split_word(rest);
            let (ty, description) = split_type(after_name);
            let luals = marker.tight || looks_like_type(ty);
            let (ty, description) = if luals {
                (ty, description)
            } else {
                ("", after_name)
            };
            push_param(doc, name, span_of(name), ty, ldoc_optional, description);
            Continuation::Param
        }
        "tparam" => {
            let (ty, after_type) = split_type(rest);
            let (name, description) = split_word(after_type);
            push_param(doc, name, span_of(name), ty, ldoc_optional, description);
            Continuation::Param
        }
        "vararg" => {
            let (ty, description) = split_type(rest);
            push_param(doc, "...", span_of(tag), ty, true, description);
            Continuation::Param
        }
        "return" | "treturn" => {
            doc.returns
                .push(read_return(rest, tag == "treturn", marker));
            Continuation::Return
        }
        "tag" => {
            for tag in rest.split(|c: char| c.is_whitespace() || c == ',') {
                let tag = tag.trim().to_lowercase();
                if !tag.is_empty() && !doc.tags.contains(&tag) {
                    doc.tags.push(tag);
                }
            }
            Continuation::Other
        }
        _ => Continuation::Other,
    }
}

/// Reads the text after `@return` (LuaLS or LDoc) or `@treturn` (LDoc: type, then
/// description, never a name).
fn read_return(text: &str, treturn: bool, marker: Marker) -> DocReturn {
    let (ty, after_type) = split_type(text);
    if !(treturn || marker.tight || looks_like_type(ty)) {
        // LDoc `@return description`: no type, no name.
        return DocReturn {
            ty: type_or_any(""),
            name: String::new(),
            description: text.trim().to_string(),
        };
    }
    let (name, description) = if treturn || !marker.luals_line {
        ("", after_type)
    } else {
        split_return_name(after_type)
    };
    let description = if treturn {
        description
    } else {
        strip_comment_marker(description)
    };
    DocReturn {
        ty: type_or_any(ty),
        name: name.to_string(),
        description: description.trim().to_string(),
    }
}

/// Splits the optional name off what follows a LuaLS `@return` type. LuaLS takes the
/// next token as the name whenever it is a name token, so a description written right
/// after the type must start with `#` (or anything that is not an identifier).
fn split_return_name(text: &str) -> (&str, &str) {
    let (word, after) = split_word(text);
    if word == "..." || is_identifier(word) {
        (word, after)
    } else {
        ("", text)
    }
}

/// A name LuaLS would lex as one token: a letter (of any script) or `_`, then letters,
/// digits or `_`. (LuaLS also lets `.`, `*` and `-` continue a name, for dotted class
/// names; in a return name they would swallow prose like `e.g.` or `well-formed`, so
/// such a word starts the description instead.)
fn is_identifier(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// Removes the marker LuaLS allows in front of a tail comment: `# text`, EmmyLua's
/// `@ text`, or `-- text`.
fn strip_comment_marker(text: &str) -> &str {
    let text = text.trim_start();
    ["#", "@", "--"]
        .iter()
        .find_map(|marker| text.strip_prefix(marker))
        .unwrap_or(text)
}

fn push_param<'a>(
    doc: &mut ParsedDoc<'a>,
    name: &'a str,
    span: Range<usize>,
    ty: &str,
    optional: bool,
    description: &str,
) {
    let (name, optional_name) = match name.strip_suffix('?') {
        Some(bare) => (bare, true),
        None => (name, false),
    };
    let optional = optional
        || optional_name
        || ty.ends_with('?')
        || ty.split('|').any(|alternative| alternative.trim() == "nil");
    doc.params.push(DocParam {
        name,
        span: span.start..span.start + name.len(),
        ty: type_or_any(ty),
        optional,
        description: description.trim().to_string(),
    });
}

fn type_or_any(ty: &str) -> String {
    if ty.is_empty() {
        "any".to_string()
    } else {
        ty.to_string()
    }
}

/// The first whitespace-separated word and the rest (leading space removed).
fn split_word(text: &str) -> (&str, &str) {
    let text = text.trim_start();
    match text.find(char::is_whitespace) {
        Some(end) => (&text[..end], text[end..].trim_start()),
        // An empty rest still points into `text`: spans are computed from slice addresses.
        None => (text, &text[text.len()..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc_of(source: &str) -> Option<String> {
        let end = source.find("function").unwrap();
        find_doc_block(source, 0..end).map(|b| b.text())
    }

    #[test]
    fn block_directly_above_is_found() {
        let src = "--- Adds.\n---@param a number\nfunction f(a) end";
        assert_eq!(doc_of(src).unwrap(), "--- Adds.\n---@param a number");
    }

    #[test]
    fn blank_line_breaks_the_block() {
        assert_eq!(doc_of("--- Adds.\n\nfunction f() end"), None);
    }

    #[test]
    fn block_starts_at_first_triple_dash_line() {
        let src = "-- header\n--- Doc.\n-- @param a x\nfunction f(a) end";
        assert_eq!(doc_of(src).unwrap(), "--- Doc.\n-- @param a x");
    }

    #[test]
    fn double_dash_only_is_not_a_doc() {
        assert_eq!(doc_of("-- not a doc\nfunction f() end"), None);
    }

    fn parsed(lines: &[&str]) -> ParsedDoc<'static> {
        let text: &'static str = Box::leak(lines.join("\n").into_boxed_str());
        let mut offset = 0;
        let lines = text
            .lines()
            .map(|l| {
                let o = offset;
                offset += l.len() + 1;
                (o, l)
            })
            .collect();
        let block: &'static DocBlock<'static> = Box::leak(Box::new(DocBlock { lines }));
        parse(block)
    }

    #[test]
    fn luals_tags_are_read() {
        let doc = parsed(&[
            "--- Splits text.",
            "--- Second line.",
            "---@param text string The text",
            "---@param sep? string Separator",
            "---@param ... any Extra",
            "---@return string[] parts The parts",
        ]);
        assert_eq!(doc.description, "Splits text.\nSecond line.");
        let names: Vec<_> = doc
            .params
            .iter()
            .map(|p| (p.name, p.ty.as_str(), p.optional))
            .collect();
        assert_eq!(
            names,
            [
                ("text", "string", false),
                ("sep", "string", true),
                ("...", "any", false)
            ]
        );
        assert_eq!(doc.returns[0].ty, "string[]");
        assert_eq!(doc.returns[0].name, "parts");
        assert_eq!(doc.returns[0].description, "The parts");
    }

    /// `(type, name, description)` of the single `@return` in `line`.
    fn return_of(line: &str) -> (String, String, String) {
        let doc = parsed(&["--- X.", line]);
        assert_eq!(doc.returns.len(), 1, "{line}");
        let r = &doc.returns[0];
        (r.ty.clone(), r.name.clone(), r.description.clone())
    }

    fn triple(ty: &str, name: &str, description: &str) -> (String, String, String) {
        (ty.to_string(), name.to_string(), description.to_string())
    }

    #[test]
    fn return_with_a_type_only_has_no_name_or_description() {
        assert_eq!(return_of("---@return string[]"), triple("string[]", "", ""));
        assert_eq!(
            return_of("---@return integer   "),
            triple("integer", "", "")
        );
    }

    #[test]
    fn return_with_a_type_and_a_name_has_no_description() {
        assert_eq!(
            return_of("---@return string[] chunks"),
            triple("string[]", "chunks", "")
        );
        assert_eq!(
            return_of("---@return any ..."),
            triple("any", "...", ""),
            "a vararg return is named `...`"
        );
    }

    #[test]
    fn return_name_is_split_off_the_description() {
        assert_eq!(
            return_of("---@return string[] chunks The chunks, in order"),
            triple("string[]", "chunks", "The chunks, in order")
        );
        assert_eq!(
            return_of("--- @return integer _count2 How many"),
            triple("integer", "_count2", "How many"),
            "`--- @` is a LuaLS line too"
        );
        // LuaLS reads any identifier there as the name, even an English word.
        assert_eq!(
            return_of("---@return string The text"),
            triple("string", "The", "text")
        );
    }

    #[test]
    fn return_description_after_a_hash_or_a_non_identifier_has_no_name() {
        assert_eq!(
            return_of("---@return string # The joined text"),
            triple("string", "", "The joined text")
        );
        assert_eq!(
            return_of("---@return string #The joined text"),
            triple("string", "", "The joined text")
        );
        assert_eq!(
            return_of("---@return string joined # The joined text"),
            triple("string", "joined", "The joined text")
        );
        assert_eq!(
            return_of("---@return Car @the new car"),
            triple("Car", "", "the new car"),
            "EmmyLua's `@comment`"
        );
        for (line, description) in [
            ("---@return integer 1-based index", "1-based index"),
            ("---@return string `text` as given", "`text` as given"),
            ("---@return string (may be empty)", "(may be empty)"),
            ("---@return string \"quoted\" text", "\"quoted\" text"),
            ("---@return string well-formed JSON", "well-formed JSON"),
            ("---@return string e.g. a word", "e.g. a word"),
            (
                "---@return boolean ok: whether it worked",
                "ok: whether it worked",
            ),
        ] {
            let ty = line.split(' ').nth(1).unwrap();
            assert_eq!(return_of(line), triple(ty, "", description), "{line}");
        }
    }

    #[test]
    fn return_description_continues_on_untagged_lines() {
        let doc = parsed(&[
            "--- X.",
            "---@return string[] parts The parts,",
            "--- in order",
        ]);
        assert_eq!(doc.returns[0].name, "parts");
        assert_eq!(doc.returns[0].description, "The parts, in order");
    }

    #[test]
    fn optional_and_union_return_types_keep_the_name() {
        assert_eq!(
            return_of("---@return string? match The match, if any"),
            triple("string?", "match", "The match, if any")
        );
        assert_eq!(
            return_of("---@return string|nil match The match"),
            triple("string|nil", "match", "The match")
        );
        assert_eq!(
            return_of("---@return string | nil match The match"),
            triple("string | nil", "match", "The match")
        );
        assert_eq!(
            return_of("---@return 'a'|'b' mode # Which one"),
            triple("'a'|'b'", "mode", "Which one")
        );
    }

    #[test]
    fn generic_table_and_function_return_types_with_spaces_keep_the_name() {
        assert_eq!(
            return_of("---@return table<string, integer> counts Count per word"),
            triple("table<string, integer>", "counts", "Count per word")
        );
        assert_eq!(
            return_of("---@return fun(a: number): string format The formatter"),
            triple("fun(a: number): string", "format", "The formatter")
        );
        assert_eq!(
            return_of("---@return { k: string, n: integer } entry # One entry"),
            triple("{ k: string, n: integer }", "entry", "One entry")
        );
    }

    #[test]
    fn ldoc_returns_have_no_name() {
        assert_eq!(
            return_of("-- @treturn string the repeated word"),
            triple("string", "", "the repeated word")
        );
        assert_eq!(
            return_of("--- @return the answer"),
            triple("any", "", "the answer")
        );
        // LuaLS does not read `--` lines, so a type there is followed by a description.
        assert_eq!(
            return_of("-- @return string the answer"),
            triple("string", "", "the answer")
        );
        assert_eq!(
            return_of("---@treturn integer count of words"),
            triple("integer", "", "count of words")
        );
    }

    #[test]
    fn ldoc_tags_are_read() {
        let doc = parsed(&[
            "--- Counts words.",
            "-- @param text the text to count",
            "-- @tparam[opt] integer limit stop after this many",
            "-- @treturn integer the count",
        ]);
        assert_eq!(doc.description, "Counts words.");
        assert_eq!(doc.params[0].name, "text");
        assert_eq!(doc.params[0].ty, "any");
        assert_eq!(doc.params[0].description, "the text to count");
        assert_eq!(
            (
                doc.params[1].name,
                doc.params[1].ty.as_str(),
                doc.params[1].optional
            ),
            ("limit", "integer", true)
        );
        assert_eq!(doc.returns[0].ty, "integer");
    }

    #[test]
    fn ldoc_return_without_type() {
        let doc = parsed(&["--- X.", "-- @return the answer"]);
        assert_eq!(doc.returns[0].ty, "any");
        assert_eq!(doc.returns[0].description, "the answer");
    }

    #[test]
    fn capability_tags_are_read() {
        let doc = parsed(&[
            "--- Sends a message.",
            "---@tag notification",
            "-- @tag HTTP, web_search notification",
            "---@param a string",
        ]);
        assert_eq!(doc.tags, ["notification", "http", "web_search"]);
        assert_eq!(doc.description, "Sends a message.");
        assert_eq!(doc.params.len(), 1);
    }

    #[test]
    fn tags_only_means_no_description() {
        let doc = parsed(&["---@param a number"]);
        assert!(doc.description.is_empty());
    }
}
