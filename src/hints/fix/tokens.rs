//! One line of source cut into tokens, and the tokens nested by their brackets.
//!
//! Strings are cut as Lua's own lexer cuts them ([`pieces`]), so a rewrite never looks
//! inside one; the rest is names, numbers and symbols, each with the blanks written
//! before it, so that what is not rewritten is quoted as the model wrote it. A line that
//! is not whole on its own (a bracket opened and not closed, a string left open, a
//! character no Lua or Python code holds) gives nothing: there is no line to rewrite.

use crate::conventions::lexer::{PieceKind, pieces};

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A name or a keyword.
    Name,
    /// A number, as written.
    Number,
    /// A string, quotes or brackets included.
    Str,
    /// An operator or punctuation.
    Symbol,
    /// A comment to the end of the line: Lua's `--`, or Python's `#` already written
    /// as Lua's.
    Comment,
}

/// One token of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    pub kind: Kind,
    /// The text (for a Python comment, the comment as Lua writes it).
    pub text: std::borrow::Cow<'a, str>,
    /// The blanks written before it.
    pub space: &'a str,
}

impl Token<'_> {
    /// Whether it is the name or keyword `word`.
    pub fn is_word(&self, word: &str) -> bool {
        self.kind == Kind::Name && self.text == word
    }

    /// Whether it is the symbol `symbol`.
    pub fn is_symbol(&self, symbol: &str) -> bool {
        self.kind == Kind::Symbol && self.text == symbol
    }

    /// Whether a `#` after it cannot be Lua's length operator: it ends a value (`x #t`
    /// is never Lua) or is a Python block's colon.
    fn ends_before_a_comment(&self) -> bool {
        match self.kind {
            Kind::Name => {
                matches!(self.text.as_ref(), "true" | "false" | "nil")
                    || !LUA_KEYWORDS.contains(&self.text.as_ref())
            }
            Kind::Number | Kind::Str => true,
            Kind::Symbol => matches!(self.text.as_ref(), ")" | "]" | "}" | ":"),
            Kind::Comment => false,
        }
    }
}

/// Lua's keywords.
pub(crate) const LUA_KEYWORDS: &[&str] = &[
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
    "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
];

/// The symbols of Lua and Python, longest first, so that the longest one written wins.
const SYMBOLS: &[&str] = &[
    "...", "//=", "**=", "<<=", ">>=", "..", "//", "**", "==", "~=", "!=", "<=", ">=", "<<", ">>",
    "&&", "||", "::", "->", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", ":=", "+", "-", "*",
    "/", "%", "^", "#", "&", "~", "|", "<", ">", "=", "(", ")", "{", "}", "[", "]", ";", ":", ",",
    ".", "!", "@",
];

/// A token, or a bracketed group of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tree<'a> {
    Token(Token<'a>),
    Group(Group<'a>),
}

/// Tokens between an opening bracket and its closing one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Group<'a> {
    /// The opening bracket: `(`, `[` or `{`.
    pub open: Token<'a>,
    pub items: Vec<Tree<'a>>,
    /// The blanks before the closing bracket.
    pub close_space: &'a str,
}

impl<'a> Tree<'a> {
    /// The blanks written before it.
    pub fn space(&self) -> &'a str {
        match self {
            Tree::Token(token) => token.space,
            Tree::Group(group) => group.open.space,
        }
    }

    /// The token it is, if it is one.
    pub fn token(&self) -> Option<&Token<'a>> {
        match self {
            Tree::Token(token) => Some(token),
            Tree::Group(_) => None,
        }
    }

    /// The group it is, opened by `open`, if it is one.
    pub fn group(&self, open: &str) -> Option<&Group<'a>> {
        match self {
            Tree::Group(group) if group.open.text == open => Some(group),
            _ => None,
        }
    }

    pub fn is_word(&self, word: &str) -> bool {
        self.token().is_some_and(|t| t.is_word(word))
    }

    pub fn is_symbol(&self, symbol: &str) -> bool {
        self.token().is_some_and(|t| t.is_symbol(symbol))
    }

    pub fn is_kind(&self, kind: Kind) -> bool {
        self.token().is_some_and(|t| t.kind == kind)
    }

    /// The name it is, if it is a name that is not a keyword.
    pub fn name(&self) -> Option<&str> {
        self.token()
            .filter(|t| t.kind == Kind::Name && !LUA_KEYWORDS.contains(&t.text.as_ref()))
            .map(|t| t.text.as_ref())
    }
}

/// `items` as written, without the blanks before the first.
pub(crate) fn written(items: &[Tree]) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(item.space());
        }
        write_tree(item, &mut out);
    }
    out
}

fn write_tree(tree: &Tree, out: &mut String) {
    match tree {
        Tree::Token(token) => out.push_str(&token.text),
        Tree::Group(group) => {
            out.push_str(&group.open.text);
            for item in &group.items {
                out.push_str(item.space());
                write_tree(item, out);
            }
            out.push_str(group.close_space);
            out.push_str(closing(&group.open.text));
        }
    }
}

/// The bracket closing `open`.
pub(crate) fn closing(open: &str) -> &'static str {
    match open {
        "(" => ")",
        "[" => "]",
        _ => "}",
    }
}

/// Brackets nested deeper than this are no line a model writes: not rewritten, so that
/// the rewrite's recursion stays shallow.
const MAX_DEPTH: usize = 32;

/// The tokens of `line` nested by brackets, or `None` when the line is not whole.
pub(crate) fn trees(line: &str) -> Option<Vec<Tree<'_>>> {
    let mut stack: Vec<(Token, Vec<Tree>)> = Vec::new();
    let mut top = Vec::new();
    for token in tokens(line)? {
        let items = stack.last_mut().map_or(&mut top, |(_, items)| items);
        match token.text.as_ref() {
            "(" | "[" | "{" if token.kind == Kind::Symbol => {
                if stack.len() == MAX_DEPTH {
                    return None;
                }
                stack.push((token, Vec::new()));
            }
            close @ (")" | "]" | "}") if token.kind == Kind::Symbol => {
                let (open, items) = stack.pop()?;
                if closing(&open.text) != close {
                    return None;
                }
                let group = Group {
                    open,
                    items,
                    close_space: token.space,
                };
                stack
                    .last_mut()
                    .map_or(&mut top, |(_, items)| items)
                    .push(Tree::Group(group));
            }
            _ => items.push(Tree::Token(token)),
        }
    }
    stack.is_empty().then_some(top)
}

/// The tokens of `line`, or `None` when a string is left open or a character is neither
/// Lua's nor Python's.
fn tokens(line: &str) -> Option<Vec<Token<'_>>> {
    let mut out: Vec<Token> = Vec::new();
    let mut space = "";
    for piece in pieces(line) {
        let text = &line[piece.range.clone()];
        let kind = match piece.kind {
            PieceKind::Code => {
                if let Some(comment_at) = code_tokens(text, &mut out, &mut space)? {
                    out.push(python_comment(
                        &line[piece.range.start + comment_at..],
                        space,
                    ));
                    return Some(out);
                }
                continue;
            }
            PieceKind::ShortString | PieceKind::LongString if closed_string(piece.kind, text) => {
                Kind::Str
            }
            PieceKind::ShortString | PieceKind::LongString => return None,
            PieceKind::Comment => Kind::Comment,
        };
        out.push(Token {
            kind,
            text: text.trim_end().into(),
            space,
        });
        space = "";
    }
    Some(out)
}

/// Whether a string piece is closed on this line.
fn closed_string(kind: PieceKind, text: &str) -> bool {
    match kind {
        PieceKind::ShortString => {
            let quote = &text[..1];
            text.len() >= 2 && text.ends_with(quote) && !escaped_end(text)
        }
        _ => text.len() >= 4 && text.ends_with(']'),
    }
}

/// Whether the last quote of a short string is escaped (`"a\"`), so the string is open.
fn escaped_end(text: &str) -> bool {
    let body = &text[1..text.len() - 1];
    body.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Cuts the code `text` into tokens, appended to `out`; `space` carries the blanks not
/// yet taken by a token from one piece to the next. Returns where a Python `#` comment
/// starts in `text`, if one does (the rest of the line is then the comment).
fn code_tokens<'a>(
    text: &'a str,
    out: &mut Vec<Token<'a>>,
    space: &mut &'a str,
) -> Option<Option<usize>> {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let blanks = bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        if blanks > 0 {
            *space = &text[at..at + blanks];
            at += blanks;
            continue;
        }
        let rest = &text[at..];
        let b = bytes[at];
        let (kind, len) = if b.is_ascii_alphabetic() || b == b'_' {
            (Kind::Name, name_len(rest))
        } else if b.is_ascii_digit()
            || (b == b'.' && bytes.get(at + 1).is_some_and(u8::is_ascii_digit))
        {
            (Kind::Number, number_len(rest))
        } else if let Some(symbol) = SYMBOLS.iter().find(|s| rest.starts_with(**s)) {
            (Kind::Symbol, symbol.len())
        } else {
            return None;
        };
        if &rest[..len] == "#" && is_python_comment(out, rest) {
            return Some(Some(at));
        }
        out.push(Token {
            kind,
            text: rest[..len].into(),
            space,
        });
        *space = "";
        at += len;
    }
    Some(None)
}

/// Whether the `#` opening `rest` starts a Python comment: after a value (where Lua's
/// length operator cannot stand), or opening the line as a sentence does.
fn is_python_comment(before: &[Token], rest: &str) -> bool {
    match before.last() {
        Some(last) => last.ends_before_a_comment(),
        None => super::super::syntax::hash_comment(rest),
    }
}

/// The Python comment `text` (from its `#`), as Lua writes it.
fn python_comment<'a>(text: &str, space: &'a str) -> Token<'a> {
    let text = text.trim_start_matches('#').trim();
    Token {
        kind: Kind::Comment,
        text: if text.is_empty() {
            "--".into()
        } else {
            format!("-- {text}").into()
        },
        space,
    }
}

fn name_len(text: &str) -> usize {
    text.bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count()
}

/// The length of the number opening `text`: digits, letters, points and an exponent's
/// sign (`0x1F`, `1.5e-3`); what Lua makes of it is for its parser to say.
fn number_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut len = 0;
    while len < bytes.len() {
        let b = bytes[len];
        let exponent_sign = matches!(b, b'+' | b'-')
            && len > 0
            && matches!(bytes[len - 1], b'e' | b'E' | b'p' | b'P')
            && !text.starts_with("0x")
            && !text.starts_with("0X");
        if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || exponent_sign {
            len += 1;
        } else {
            break;
        }
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Vec<String> {
        tokens(line)
            .unwrap()
            .iter()
            .map(|t| format!("{}{}", t.space, t.text))
            .collect()
    }

    #[test]
    fn a_line_is_cut_into_tokens_with_their_blanks() {
        assert_eq!(
            texts("count -= 1"),
            ["count", " -=", " 1"],
            "a compound operator is one token"
        );
        assert_eq!(
            texts("if s != \"a != b\" then"),
            ["if", " s", " !=", " \"a != b\"", " then"]
        );
        assert_eq!(texts("x=1.5e-3+.5"), ["x", "=", "1.5e-3", "+", ".5"]);
        assert_eq!(texts("t[i] //= 2"), ["t", "[", "i", "]", " //=", " 2"]);
    }

    #[test]
    fn comments_are_tokens_and_python_ones_become_lua_ones() {
        assert_eq!(texts("x = 1 -- one"), ["x", " =", " 1", " -- one"]);
        assert_eq!(
            texts("x = 1  # it's one"),
            ["x", " =", " 1", "  -- it's one"]
        );
        assert_eq!(texts("# count the lines"), ["-- count the lines"]);
        assert_eq!(texts("n = #t"), ["n", " =", " #", "t"], "a length");
        assert_eq!(texts("return #t"), ["return", " #", "t"]);
    }

    #[test]
    fn a_line_that_is_not_whole_has_no_trees() {
        assert!(trees("d = {").is_none());
        assert!(trees("}").is_none());
        assert!(trees("x = (1]").is_none());
        assert!(trees("s = \"open").is_none());
        assert!(trees("s = \"a\\\"").is_none());
        assert!(trees("x = `a`").is_none());
        assert!(trees("é = 1").is_none());
        assert!(trees("s = [[a]]").is_some());
    }

    #[test]
    fn groups_nest_and_are_written_back_as_they_were() {
        for line in [
            "d = {\"a\": [1, 2], 'b' : (3)}",
            "print( f(x)[ 1 ] )",
            "if x != 0:  # zero",
        ] {
            let trees = trees(line).unwrap();
            let expected = line.replace("# zero", "-- zero");
            assert_eq!(written(&trees), expected);
        }
    }
}
