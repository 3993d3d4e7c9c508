//! Runnable examples in doc comments: a fenced ```` ```lua ```` block in the description,
//! which LuaLS renders as code on hover and LDoc (with Markdown) as a code block.
//!
//! Inside the block a line `EXPR --> EXPECTED` asserts that `EXPR` gives `EXPECTED`
//! (tables compared deeply, several values written `--> a, b`); every other line is an
//! ordinary Lua statement. The block runs as one chunk. To Lua, `-->` starts a comment,
//! so the example reads, and runs, as plain Lua too.
//!
//! `rlm check` (and `build.rs`) compile each example's chunk (rule E012); `rlm test`
//! runs them.
//!
//! ```
//! use rlm_registry::conventions::examples::{examples_in, Expectation};
//!
//! let doc = "--- Doubles.\n---\n--- ```lua\n--- double(2) --> 4\n--- ```\n---@param x number";
//! let lines: Vec<&str> = doc.lines().collect();
//! let examples = examples_in(&lines).unwrap();
//! assert_eq!(examples[0].first_line, 3);
//! assert_eq!(
//!     Expectation::of(&examples[0].lines[0]),
//!     Some(Expectation { actual: "double(2)", expected: "4" })
//! );
//! ```

use super::lexer::{PieceKind, pieces};

/// The global function an example's chunk calls to check an expectation.
pub const EXPECT_FUNCTION: &str = "__rlm_expect";

/// Whether a file is a test file (`*_test.lua`): `rlm test` runs it, and loading a
/// registry directory skips it.
///
/// ```
/// use rlm_registry::conventions::examples::is_test_file;
///
/// assert!(is_test_file(std::path::Path::new("lua/text/counts_test.lua")));
/// assert!(!is_test_file(std::path::Path::new("lua/text/counts.lua")));
/// ```
pub fn is_test_file(path: &std::path::Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.ends_with("_test.lua"))
}

/// One fenced Lua block of a doc comment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Example {
    /// Index, among the doc's lines, of the block's first code line (after the fence).
    pub first_line: usize,
    /// The block's code lines, comment markers removed.
    pub lines: Vec<String>,
}

/// A ```` ```lua ```` fence with no closing ```` ``` ````: index of the opening line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnclosedExample {
    /// Index, among the doc's lines, of the opening fence.
    pub line: usize,
}

/// An `EXPR --> EXPECTED` line, split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expectation<'a> {
    /// The expression whose values are checked.
    pub actual: &'a str,
    /// The expression list giving the values expected.
    pub expected: &'a str,
}

impl<'a> Expectation<'a> {
    /// Splits `line` at the `-->` that starts its comment, if the comment starts so.
    ///
    /// ```
    /// use rlm_registry::conventions::examples::Expectation;
    ///
    /// let split = Expectation::of("split('a-->b', '-->') --> {'a', 'b'}").unwrap();
    /// assert_eq!(split.actual, "split('a-->b', '-->')");
    /// assert_eq!(split.expected, "{'a', 'b'}");
    /// assert_eq!(Expectation::of("local x = 1 -- note"), None);
    /// ```
    pub fn of(line: &'a str) -> Option<Expectation<'a>> {
        let comment = comment_start(line)?;
        let expected = line[comment..].strip_prefix("-->")?.trim();
        let actual = line[..comment].trim();
        (!actual.is_empty() && !expected.is_empty()).then_some(Expectation { actual, expected })
    }
}

/// The examples of a doc comment, given as its lines (each with its `---` or `--`).
pub fn examples_in(doc_lines: &[&str]) -> Result<Vec<Example>, UnclosedExample> {
    let mut examples = Vec::new();
    let mut open: Option<(usize, Vec<String>)> = None;
    for (index, raw) in doc_lines.iter().enumerate() {
        let text = strip_comment_marker(raw);
        match open.take() {
            None if is_lua_fence(text) => open = Some((index, Vec::new())),
            None => {}
            Some((start, lines)) if text.trim() == "```" => examples.push(Example {
                first_line: start + 1,
                lines,
            }),
            Some((start, mut lines)) => {
                lines.push(text.to_string());
                open = Some((start, lines));
            }
        }
    }
    match open {
        Some((line, _)) => Err(UnclosedExample { line }),
        None => Ok(examples),
    }
}

impl Example {
    /// The Lua chunk that runs the example, with `padding` empty lines first so that
    /// its line numbers are the file's. An expectation becomes a call of the global
    /// [`EXPECT_FUNCTION`] with both sides packed by `table.pack` and the expression's
    /// source; the runner defines it.
    ///
    /// ```
    /// use rlm_registry::conventions::examples::examples_in;
    ///
    /// let lines = ["--- ```lua", "--- local t = {1}", "--- #t --> 1", "--- ```"];
    /// let chunk = examples_in(&lines).unwrap()[0].chunk(0);
    /// assert_eq!(chunk, "local t = {1}\n__rlm_expect(table.pack(#t), table.pack(1), \"#t\")");
    /// ```
    pub fn chunk(&self, padding: usize) -> String {
        let body: Vec<String> = self
            .lines
            .iter()
            .map(|line| match Expectation::of(line) {
                Some(Expectation { actual, expected }) => format!(
                    "{EXPECT_FUNCTION}(table.pack({actual}), table.pack({expected}), {})",
                    lua_string(actual)
                ),
                None => line.clone(),
            })
            .collect();
        "\n".repeat(padding) + &body.join("\n")
    }
}

/// `text` as a double-quoted Lua string literal.
pub(crate) fn lua_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            c if c.is_ascii_control() => quoted.push_str(&format!("\\{:03}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// A doc line's text: `---` or `--` and one space removed.
fn strip_comment_marker(line: &str) -> &str {
    let line = line.trim_start();
    let text = line
        .strip_prefix("---")
        .or_else(|| line.strip_prefix("--"))
        .unwrap_or(line);
    text.strip_prefix(' ').unwrap_or(text)
}

fn is_lua_fence(text: &str) -> bool {
    text.trim()
        .strip_prefix("```")
        .is_some_and(|language| language.trim() == "lua")
}

/// Where the comment of a Lua line starts, if it has one.
fn comment_start(line: &str) -> Option<usize> {
    pieces(line)
        .find(|piece| piece.kind == PieceKind::Comment)
        .map(|piece| piece.range.start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(doc: &str) -> Vec<&str> {
        doc.lines().collect()
    }

    #[test]
    fn finds_every_lua_block_and_ignores_other_languages() {
        let doc = "--- A.\n--- ```lua\n--- f(1) --> 2\n--- ```\n--- ```text\n--- f(0) --> 9\n--- ```\n--- ```lua\n---   g()\n--- ```";
        let found = examples_in(&lines(doc)).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].first_line, found[0].lines.clone()),
            (2, vec!["f(1) --> 2".to_string()])
        );
        assert_eq!(
            (found[1].first_line, found[1].lines.clone()),
            (8, vec!["  g()".to_string()])
        );
    }

    #[test]
    fn an_unclosed_fence_is_reported_at_its_line() {
        let doc = "--- A.\n--- ```lua\n--- f(1)\n---@return number";
        assert_eq!(examples_in(&lines(doc)), Err(UnclosedExample { line: 1 }));
    }

    #[test]
    fn arrows_inside_strings_are_not_expectations() {
        assert_eq!(Expectation::of("print('-->')"), None);
        assert_eq!(Expectation::of("print([[a --> b]])"), None);
        assert_eq!(Expectation::of("print([==[a ]] --> b]==])"), None);
        let escaped = Expectation::of(r#"f("a\"-->") --> "x""#).unwrap();
        assert_eq!(escaped.actual, r#"f("a\"-->")"#);
        assert_eq!(Expectation::of("--> 3"), None);
        assert_eq!(Expectation::of("f() -->"), None);
    }

    #[test]
    fn several_expected_values_are_packed_together() {
        let example = Example {
            first_line: 0,
            lines: vec!["f() --> 1, 'b'".to_string()],
        };
        assert_eq!(
            example.chunk(2),
            "\n\n__rlm_expect(table.pack(f()), table.pack(1, 'b'), \"f()\")"
        );
    }
}
