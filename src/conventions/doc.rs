//! Doc comments: finding the block above a definition and reading its tags.
//!
//! Two styles are accepted and may be mixed:
//!
//! - LuaLS: `---@param name? type description`, `---@return type description`,
//!   `---@vararg type`.
//! - LDoc: `--- Summary.` then `-- @param name description`, `-- @tparam type name
//!   description`, `-- @return description`, `-- @treturn type description`, with the
//!   `[opt]` modifier.
//!
//! A tag written `---@` is always LuaLS. With a space (`-- @param`, `--- @param`) it is
//! LuaLS when the word after the name looks like a type, LDoc otherwise.

use std::ops::Range;

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
    pub description: String,
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
        let tight = content.starts_with('@');
        let tag_offset = offset + (tag_text.as_ptr() as usize - line.as_ptr() as usize);
        continuation = read_tag(&mut doc, tag_text, tag_offset, tight);
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

/// Reads one tag line (`text` starts after the `@`) into `doc`.
fn read_tag<'a>(
    doc: &mut ParsedDoc<'a>,
    text: &'a str,
    offset: usize,
    tight: bool,
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
            let luals = tight || looks_like_type(ty);
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
            let (ty, description) = split_type(rest);
            let (ty, description) = if tag == "treturn" || tight || looks_like_type(ty) {
                (ty, description)
            } else {
                ("", rest)
            };
            doc.returns.push(DocReturn {
                ty: type_or_any(ty),
                description: description.trim().to_string(),
            });
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

/// Splits a LuaLS type off the front of `text`. Types may contain spaces inside brackets
/// (`table<string, number>`, `fun(a: number): string`, `{ k: T }`) and around `|`.
pub(crate) fn split_type(text: &str) -> (&str, &str) {
    let text = text.trim_start();
    let mut depth = 0usize;
    let mut quote = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' | '`' => quote = Some(c),
            '(' | '<' | '{' | '[' => depth += 1,
            ')' | '>' | '}' | ']' => depth = depth.saturating_sub(1),
            c if c.is_whitespace() && depth == 0 => {
                let before = text[..i].trim_end();
                let after = text[i..].trim_start();
                let joins = before.ends_with(['|', ',', ':']) || after.starts_with('|');
                if !joins {
                    return (&text[..i], after);
                }
                while chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
                    chars.next();
                }
            }
            _ => {}
        }
    }
    (text, &text[text.len()..])
}

/// Whether a word is plausibly a LuaLS type rather than the first word of a description.
fn looks_like_type(word: &str) -> bool {
    const PRIMITIVES: &[&str] = &[
        "any",
        "nil",
        "boolean",
        "bool",
        "string",
        "number",
        "integer",
        "function",
        "table",
        "thread",
        "userdata",
        "lightuserdata",
        "unknown",
        "self",
    ];
    let base = word.trim_end_matches('?');
    PRIMITIVES.contains(&base)
        || word.contains(['[', '<', '{', '|', '"', '\'', '('])
        || word.starts_with("fun(")
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

    #[test]
    fn types_with_spaces_are_kept_whole() {
        assert_eq!(
            split_type("table<string, number> the map"),
            ("table<string, number>", "the map")
        );
        assert_eq!(split_type("string | nil maybe"), ("string | nil", "maybe"));
        assert_eq!(
            split_type("fun(a: number): string cb"),
            ("fun(a: number): string", "cb")
        );
        assert_eq!(split_type("{ k: string } obj"), ("{ k: string }", "obj"));
        assert_eq!(split_type("'a'|'b' mode"), ("'a'|'b'", "mode"));
        assert_eq!(split_type("number"), ("number", ""));
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
        assert_eq!(doc.returns[0].description, "parts The parts");
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
