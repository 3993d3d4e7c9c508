//! Python expressions written as Lua: operators (`!=`, `&&`, `**`, `is None`), names
//! (`None`, `True`), literals (`[1, 2]`, `{"a": 1}`, f-strings), the conditional
//! expression and `lambda`, and Python's functions and methods (`len(x)`, `t.append(v)`).
//!
//! The rewrite is lenient about what it does not know: Lua it finds on the line is kept
//! as written, and two statements on one line are two runs of values. What is Python
//! and has no mechanical Lua (`x in t`, a slice, a keyword argument, `sorted(t)`) makes
//! the whole rewrite `None`.

use super::Cx;
use super::tokens::{Group, Kind, LUA_KEYWORDS, Token, Tree, written};
use crate::conventions::is_lua_name;
use crate::environment::hints::calls::{
    self, CallFix, LUA_STRING_METHODS, MethodFix,
};

/// Text being written: blanks as the model wrote them, and one where two tokens would
/// otherwise run together (`and` after a name, `- -` that would be a comment).
pub(super) struct Out(String);

impl Out {
    pub fn new() -> Out {
        Out(String::new())
    }

    /// Appends `text` after `space` (dropped before the first text).
    pub fn push(&mut self, space: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        if !self.0.is_empty() {
            let touching = space.is_empty() && touches(self.0.chars().last(), text.chars().next());
            self.0.push_str(if touching { " " } else { space });
        }
        self.0.push_str(text);
    }

    pub fn text(self) -> String {
        self.0
    }
}

/// Whether `last` and `next` would read as one token without a blank between them.
fn touches(last: Option<char>, next: Option<char>) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    match (last, next) {
        (Some(a), Some(b)) => {
            (word(a) && word(b)) || (a == '-' && b == '-') || (a == '[' && matches!(b, '[' | '='))
        }
        _ => false,
    }
}

/// Lua keywords that separate the expressions of a run (`return`, `then`, `=` …): each
/// expression between them is rewritten on its own. `if` and `else` are not among them,
/// being Python's conditional expression too.
fn separates(item: &Tree, for_seen: bool) -> bool {
    match item {
        Tree::Token(token) => match token.kind {
            Kind::Symbol => matches!(token.text.as_ref(), "," | "=" | ";"),
            Kind::Comment => true,
            Kind::Name if token.text == "in" => for_seen,
            Kind::Name => {
                LUA_KEYWORDS.contains(&token.text.as_ref())
                    && !matches!(
                        token.text.as_ref(),
                        "if" | "else" | "not" | "and" | "or" | "true" | "false" | "nil" | "function" | "in"
                    )
            }
            _ => false,
        },
        Tree::Group(_) => false,
    }
}

/// A run of code (a statement, or several) in Lua.
pub(super) fn code(items: &[Tree], cx: &Cx) -> Option<String> {
    let mut out = Out::new();
    let mut for_seen = false;
    let mut start = 0;
    for (i, item) in items.iter().enumerate() {
        let in_lambda = item.is_symbol(",") && lambda_params_open(&items[start..i]);
        if separates(item, for_seen) && !in_lambda {
            if start < i {
                out.push(items[start].space(), &expression(&items[start..i], cx)?);
            }
            out.push(item.space(), &written(std::slice::from_ref(item)));
            start = i + 1;
        }
        for_seen |= item.is_word("for");
    }
    if start < items.len() {
        out.push(items[start].space(), &expression(&items[start..], cx)?);
    }
    Some(out.text())
}

/// Whether `items` opens with `lambda` and its parameters still run (no colon yet), so
/// that a comma there separates parameters, not values.
fn lambda_params_open(items: &[Tree]) -> bool {
    items.first().is_some_and(|t| t.is_word("lambda"))
        && !items.iter().any(|t| t.is_symbol(":"))
}

/// The elements of a bracket's `items`, split at its commas (and a table's semicolons),
/// a lambda's own commas kept; a trailing comma ends no element.
pub(super) fn elements<'t, 'a>(items: &'t [Tree<'a>]) -> Vec<&'t [Tree<'a>]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, item) in items.iter().enumerate() {
        let separator = item.is_symbol(",") || item.is_symbol(";");
        if separator && !lambda_params_open(&items[start..i]) {
            out.push(&items[start..i]);
            start = i + 1;
        }
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

/// One expression in Lua: a `lambda`, a conditional expression, or values and operators.
pub(super) fn expression(items: &[Tree], cx: &Cx) -> Option<String> {
    if items.is_empty() {
        return Some(String::new());
    }
    if items[0].is_word("lambda") {
        return lambda(items, cx);
    }
    if let Some((value, condition, otherwise)) = conditional(items) {
        let value = grouped_if_or(value, cx)?;
        let condition = grouped_if_or(condition, cx)?;
        let otherwise = expression(otherwise, cx)?;
        return Some(format!("{condition} and {value} or {otherwise}"));
    }
    Rendered::of(items, cx).map(|r| r.text)
}

/// `x if c else y`, cut into `x`, `c` and `y`, when `items` is one: an `if` after a
/// value and an `else` after it, with no `then` (which would make it Lua's `if`).
fn conditional<'t, 'a>(
    items: &'t [Tree<'a>],
) -> Option<(&'t [Tree<'a>], &'t [Tree<'a>], &'t [Tree<'a>])> {
    if items.iter().any(|t| t.is_word("then") || t.is_word("elseif")) {
        return None;
    }
    let at_if = items.iter().position(|t| t.is_word("if")).filter(|&i| i > 0)?;
    let at_else = at_if + items[at_if..].iter().position(|t| t.is_word("else"))?;
    Some((&items[..at_if], &items[at_if + 1..at_else], &items[at_else + 1..]))
}

/// `items` in Lua, in parentheses when an `or` in it would bind wrongly inside `c and x
/// or y`.
fn grouped_if_or(items: &[Tree], cx: &Cx) -> Option<String> {
    let text = expression(items, cx)?;
    let has_or = items.iter().any(|t| t.is_word("or") || t.is_symbol("||"));
    Some(if has_or { format!("({text})") } else { text })
}

/// `lambda x, y: body` as `function(x, y) return body end`.
fn lambda(items: &[Tree], cx: &Cx) -> Option<String> {
    let colon = items.iter().position(|t| t.is_symbol(":"))?;
    let params = parameters(&items[1..colon])?;
    let body = expression(&items[colon + 1..], cx)?;
    Some(format!("function({params}) return {body} end"))
}

/// A Python parameter list in Lua: plain names (annotations dropped), `*rest` as `...`.
/// A default value or `**kwargs` has no Lua: `None`.
pub(super) fn parameters(items: &[Tree]) -> Option<String> {
    let params = elements(items);
    let mut out = Vec::new();
    for (i, param) in params.iter().enumerate() {
        let name = match param {
            [name] => name.name()?.to_string(),
            [name, colon, ..] if colon.is_symbol(":") => name.name()?.to_string(),
            [star, name] if star.is_symbol("*") && i + 1 == params.len() => {
                name.name()?;
                "...".to_string()
            }
            _ => return None,
        };
        out.push(name);
    }
    Some(out.join(", "))
}

/// A part of an expression.
enum Part<'t, 'a> {
    /// A value: its unary operators, then a primary expression with its suffixes.
    Value {
        unary: &'t [Tree<'a>],
        primary: &'t [Tree<'a>],
    },
    /// A binary operator (two tokens for `is not`).
    Operator(&'t [Tree<'a>]),
    /// Anything else (a Lua keyword): kept as written.
    Other(&'t Tree<'a>),
}

impl Part<'_, '_> {
    fn space(&self) -> &str {
        match self {
            Part::Value { unary, primary } => unary.first().unwrap_or(&primary[0]).space(),
            Part::Operator(tokens) => tokens[0].space(),
            Part::Other(tree) => tree.space(),
        }
    }

    fn operator(&self) -> Option<&str> {
        match self {
            Part::Operator(tokens) => tokens[0].token().map(|t| t.text.as_ref()),
            _ => None,
        }
    }

    /// The primary of a value with no unary operator.
    fn bare(&self) -> Option<&[Tree<'_>]> {
        match self {
            Part::Value { unary: [], primary } => Some(primary),
            _ => None,
        }
    }
}

/// Operators Python and Lua write between two values.
const BINARY: &[&str] = &[
    "+", "-", "*", "/", "//", "%", "^", "**", "..", "==", "~=", "!=", "<", ">", "<=", ">=",
    "&", "|", "~", "<<", ">>", "&&", "||",
];

/// Operators that bind tighter than comparison: the links of an arithmetic chain.
const ARITHMETIC: &[&str] = &["+", "-", "*", "/", "//", "%", "^", "**"];

/// `items` cut into parts, or `None` when they hold Python with no Lua (`in`, `:=`, a
/// colon that is neither a method call nor a table's).
fn parts<'t, 'a>(items: &'t [Tree<'a>]) -> Option<Vec<Part<'t, 'a>>> {
    let mut parts = Vec::new();
    let mut i = 0;
    let mut after_value = false;
    while i < items.len() {
        let item = &items[i];
        let python_only = item.is_word("in")
            || item.is_word("lambda")
            || (item.is_word("is") && !after_value)
            || [":", "::", ":=", "@", "->"].iter().any(|s| item.is_symbol(s));
        if python_only {
            return None;
        }
        if after_value && let Some(len) = binary_operator(&items[i..]) {
            parts.push(Part::Operator(&items[i..i + len]));
            i += len;
            after_value = false;
            continue;
        }
        let unary_start = i;
        while i < items.len() && is_unary(&items[i]) {
            i += 1;
        }
        if i < items.len() && starts_primary(&items[i]) {
            let end = primary_end(items, i);
            parts.push(Part::Value {
                unary: &items[unary_start..i],
                primary: &items[i..end],
            });
            i = end;
            after_value = true;
        } else {
            let end = i.max(unary_start + 1).min(items.len());
            parts.extend(items[unary_start..end].iter().map(Part::Other));
            i = end;
            after_value = false;
        }
    }
    Some(parts)
}

/// How many tokens the binary operator opening `items` takes, if one does.
fn binary_operator(items: &[Tree]) -> Option<usize> {
    let first = items.first()?.token()?;
    match (first.kind, first.text.as_ref()) {
        (Kind::Symbol, symbol) if BINARY.contains(&symbol) => Some(1),
        (Kind::Name, "and" | "or") => Some(1),
        (Kind::Name, "is") => Some(if items.get(1).is_some_and(|t| t.is_word("not")) {
            2
        } else {
            1
        }),
        _ => None,
    }
}

fn is_unary(item: &Tree) -> bool {
    item.is_word("not") || ["-", "#", "!", "~"].iter().any(|s| item.is_symbol(s))
}

fn starts_primary(item: &Tree) -> bool {
    match item {
        Tree::Group(_) => true,
        Tree::Token(token) => match token.kind {
            Kind::Number | Kind::Str => true,
            Kind::Name => {
                matches!(token.text.as_ref(), "true" | "false" | "nil")
                    || !LUA_KEYWORDS.contains(&token.text.as_ref())
            }
            Kind::Symbol => token.text == "...",
            Kind::Comment => false,
        },
    }
}

/// Where the primary expression starting at `start` ends: its head (a prefixed or
/// triple-quoted string counts as one) and every suffix (`.name`, `:name(…)`, `[…]`,
/// `(…)`, and Lua's `f"…"`, `f{…}`).
fn primary_end(items: &[Tree], start: usize) -> usize {
    let mut end = start + head_len(items, start);
    loop {
        let Some(item) = items.get(end) else {
            return end;
        };
        let glued = item.space().is_empty();
        let step = if item.is_symbol(".") && items.get(end + 1).is_some_and(|t| t.is_kind(Kind::Name)) {
            2
        } else if item.is_symbol(":") && method_colon(items, end) {
            3
        } else if item.group("[").is_some() || item.group("(").is_some() {
            1
        } else if glued && (item.is_kind(Kind::Str) || item.group("{").is_some()) {
            1
        } else {
            return end;
        };
        end += step;
    }
}

/// How many items the head of a primary expression at `start` takes.
fn head_len(items: &[Tree], start: usize) -> usize {
    let glued_string = |i: usize| {
        items
            .get(i)
            .is_some_and(|t| t.is_kind(Kind::Str) && t.space().is_empty())
    };
    let head = &items[start];
    if head.name().is_some_and(is_string_prefix) && glued_string(start + 1) {
        return 2;
    }
    if let Some(token) = head.token()
        && token.kind == Kind::Str
        && matches!(token.text.as_ref(), "\"\"" | "''")
        && glued_string(start + 1)
        && items
            .get(start + 2)
            .and_then(Tree::token)
            .is_some_and(|t| t.space.is_empty() && t.text == token.text)
    {
        return 3;
    }
    1
}

/// Whether the colon at `at` calls a method (`s:upper()`, `s:rep"x"`) rather than opening
/// a Python block or a dictionary's value: a name right after it, then arguments, after
/// something that can be a receiver (not a string literal, which Lua would need in
/// parentheses, nor a keyword).
pub(super) fn method_colon(items: &[Tree], at: usize) -> bool {
    let receiver = at
        .checked_sub(1)
        .and_then(|i| items.get(i))
        .is_some_and(|t| t.name().is_some() || t.group("(").is_some() || t.group("[").is_some());
    let name = items
        .get(at + 1)
        .is_some_and(|t| t.is_kind(Kind::Name) && t.space().is_empty());
    let arguments = items.get(at + 2).is_some_and(|t| {
        t.group("(").is_some() || t.group("{").is_some() || t.is_kind(Kind::Str)
    });
    receiver && name && arguments
}

/// Whether `name` prefixes a Python string (`f"…"`, `r'…'`, `rb"…"`).
fn is_string_prefix(name: &str) -> bool {
    name.len() <= 2
        && name
            .chars()
            .all(|c| matches!(c.to_ascii_lowercase(), 'f' | 'r' | 'b' | 'u'))
}

/// An expression written in Lua, with what its use around it needs to know.
struct Rendered {
    text: String,
    /// It is a binary expression (`type(x) == "string"`): in parentheses unless alone.
    loose: bool,
}

impl Rendered {
    /// `items` (values and operators) in Lua.
    fn of(items: &[Tree], cx: &Cx) -> Option<Rendered> {
        let parts = parts(items)?;
        let alone = parts.len() == 1;
        let mut out = Out::new();
        let mut i = 0;
        while i < parts.len() {
            let chain = chain_len(&parts[i..]);
            if let Some(text) = chain_rewrite(&parts[i..i + chain], cx)? {
                out.push(parts[i].space(), &text);
                i += chain;
                continue;
            }
            let concatenates = chain > 1 && parts[i..i + chain].iter().any(|p| stringish(p, cx));
            for part in &parts[i..i + chain] {
                match part {
                    Part::Value { unary, primary } => {
                        for op in *unary {
                            let text = if op.is_symbol("!") { "not" } else { op_text(op) };
                            out.push(op.space(), text);
                        }
                        let value = primary_text(primary, cx)?;
                        let text = if value.loose && !(alone && unary.is_empty()) {
                            format!("({})", value.text)
                        } else {
                            value.text
                        };
                        out.push(primary[0].space(), &text);
                    }
                    Part::Operator(tokens) => {
                        let lua = operator(tokens, concatenates);
                        out.push(tokens[0].space(), lua);
                    }
                    Part::Other(tree) => out.push(tree.space(), &written(std::slice::from_ref(*tree))),
                }
            }
            i += chain;
        }
        Some(Rendered {
            text: out.text(),
            loose: false,
        })
    }
}

/// The text of a token tree that is a token.
fn op_text<'a>(tree: &'a Tree) -> &'a str {
    tree.token().map_or("", |t| t.text.as_ref())
}

/// The Lua for the operator `tokens`; `+` joins strings in a chain that holds one.
fn operator<'a>(tokens: &'a [Tree], concatenates: bool) -> &'a str {
    match op_text(&tokens[0]) {
        "!=" => "~=",
        "&&" => "and",
        "||" => "or",
        "**" => "^",
        "is" if tokens.len() == 2 => "~=",
        "is" => "==",
        "+" if concatenates => "..",
        other => other,
    }
}

/// How many parts the arithmetic chain opening `parts` takes: values linked by
/// arithmetic operators (at least the first part).
fn chain_len(parts: &[Part]) -> usize {
    if !matches!(parts[0], Part::Value { .. }) {
        return 1;
    }
    let mut len = 1;
    while parts
        .get(len)
        .and_then(Part::operator)
        .is_some_and(|op| ARITHMETIC.contains(&op))
        && matches!(parts.get(len + 1), Some(Part::Value { .. }))
    {
        len += 2;
    }
    len
}

/// Whether `items` is one value, with no operator at its top level.
pub(super) fn is_single_value(items: &[Tree]) -> bool {
    parts(items).is_some_and(|parts| matches!(parts.as_slice(), [Part::Value { unary: [], .. }]))
}

/// Whether every operator at the top level of `items` binds at least as tightly as `-`,
/// so that `items - 1` subtracts from all of it.
pub(super) fn is_arithmetic(items: &[Tree]) -> bool {
    parts(items).is_some_and(|parts| {
        parts.iter().all(|part| match part {
            Part::Value { .. } => true,
            Part::Operator(_) => part.operator().is_some_and(|op| ARITHMETIC.contains(&op)),
            Part::Other(_) => false,
        })
    })
}

/// Whether the expression `items` opens with text (`"x"`, `f"…"`, `str(n)`): what `+`
/// joins in Python.
pub(super) fn is_text(items: &[Tree], cx: &Cx) -> bool {
    parts(items).is_some_and(|parts| parts.first().is_some_and(|part| stringish(part, cx)))
}

/// A chain Python writes with a string that Lua writes as a call: `"%d" % n` is
/// `string.format("%d", n)`, `"-" * 40` is `("-"):rep(40)`. `Some(None)`: no such chain.
fn chain_rewrite(chain: &[Part], cx: &Cx) -> Option<Option<String>> {
    let [left, op, right] = chain else {
        return Some(None);
    };
    let literal = |part: &Part| match part.bare() {
        Some([string]) if string.is_kind(Kind::Str) => Some(op_text(string).to_string()),
        _ => None,
    };
    match (op.operator(), literal(left), literal(right)) {
        (Some("%"), Some(format), _) => {
            if format.contains("%(") || format.contains("%r") || format.contains("%a") {
                return None;
            }
            let arguments = match right.bare() {
                Some([Tree::Group(group)]) if group.open.text == "(" => {
                    arguments(group, cx)?.join(", ")
                }
                _ => value_text(right, cx)?,
            };
            Some(Some(format!("string.format({format}, {arguments})")))
        }
        (Some("*"), Some(text), _) => Some(Some(format!("({text}):rep({})", value_text(right, cx)?))),
        (Some("*"), None, Some(text)) => Some(Some(format!("({text}):rep({})", value_text(left, cx)?))),
        _ => Some(None),
    }
}

/// A value part in Lua, on its own.
fn value_text(part: &Part, cx: &Cx) -> Option<String> {
    match part {
        Part::Value { unary, primary } => {
            let value = primary_text(primary, cx)?;
            let unary: String = unary
                .iter()
                .map(|op| if op.is_symbol("!") { "not " } else { op_text(op) })
                .collect();
            Some(format!("{unary}{}", value.text))
        }
        _ => None,
    }
}

/// Whether a value is text in Python: a string literal, an f-string or `str(…)`.
fn stringish(part: &Part, cx: &Cx) -> bool {
    let Some(primary) = part.bare() else {
        return false;
    };
    match &primary[0] {
        Tree::Token(token) if token.kind == Kind::Str => true,
        head => head.name().is_some_and(|name| {
            (is_string_prefix(name) && primary.get(1).is_some_and(|t| t.is_kind(Kind::Str)))
                || (matches!(name, "str" | "repr") && cx.is_free(name))
                || name == "tostring"
        }),
    }
}

/// What the value written so far is, as suffixes are added to it.
struct Receiver {
    text: String,
    /// The name it is, when it is a bare name: a call of it may be Python's built-in.
    name: Option<String>,
    /// Written twice, it is read twice with the same result (no call in it).
    simple: bool,
    /// A string or table constructor, which Lua calls a method of only in parentheses.
    literal: bool,
    /// The string literal it is, quotes included.
    string: Option<String>,
    loose: bool,
}

impl Receiver {
    fn new(text: String) -> Receiver {
        Receiver {
            text,
            name: None,
            simple: false,
            literal: false,
            string: None,
            loose: false,
        }
    }

    /// The receiver of a method call: a literal in parentheses.
    fn callable(&self) -> String {
        if self.literal || self.loose {
            format!("({})", self.text)
        } else {
            self.text.clone()
        }
    }
}

/// A primary expression (head and suffixes) in Lua.
fn primary_text(items: &[Tree], cx: &Cx) -> Option<Rendered> {
    let head = head_len(items, 0);
    let mut receiver = head_text(&items[..head], cx)?;
    let mut i = head;
    while i < items.len() {
        let item = &items[i];
        if item.is_symbol(".") || item.is_symbol(":") {
            let name = op_text(&items[i + 1]);
            let call = items.get(i + 2).filter(|t| {
                t.group("(").is_some() || (item.is_symbol(":") && !t.is_symbol("."))
            });
            match call {
                Some(arguments) if item.is_symbol(".") || method_colon(items, i) => {
                    receiver = method(receiver, name, arguments, item.is_symbol("."), cx)?;
                    i += 3;
                }
                _ => {
                    receiver.text = format!("{}.{name}", receiver.text);
                    receiver.name = None;
                    receiver.literal = false;
                    receiver.string = None;
                    i += 2;
                }
            }
        } else if let Some(group) = item.group("[") {
            receiver = index(receiver, group, cx)?;
            i += 1;
        } else if let Some(group) = item.group("(") {
            receiver = call(receiver, group, cx)?;
            i += 1;
        } else {
            let literal = literal_argument(item, cx)?;
            receiver = Receiver::new(format!("{}{literal}", receiver.text));
            i += 1;
        }
    }
    Some(Rendered {
        text: receiver.text,
        loose: receiver.loose,
    })
}

/// A string or table written right after a function, as Lua's `f"…"` and `f{…}` take it.
fn literal_argument(item: &Tree, cx: &Cx) -> Option<String> {
    match item {
        Tree::Group(group) => table(group, cx),
        Tree::Token(token) => Some(token.text.to_string()),
    }
}

/// The head of a primary expression in Lua.
fn head_text(items: &[Tree], cx: &Cx) -> Option<Receiver> {
    match items {
        [prefix, string] => {
            let text = prefixed_string(op_text(prefix), op_text(string), cx)?;
            let mut receiver = Receiver::new(text);
            receiver.literal = true;
            Some(receiver)
        }
        [_, middle, _] => {
            let mut receiver = Receiver::new(op_text(middle).to_string());
            receiver.literal = true;
            receiver.string = Some(receiver.text.clone());
            Some(receiver)
        }
        [Tree::Group(group)] => match group.open.text.as_ref() {
            "(" => {
                let inner = elements(&group.items);
                let [only] = inner.as_slice() else {
                    return None; // A tuple.
                };
                if only.iter().any(|t| t.is_word("for")) {
                    return None;
                }
                Some(Receiver::new(format!("({})", expression(only, cx)?)))
            }
            "[" => {
                let mut receiver = Receiver::new(list(group, cx)?);
                receiver.literal = true;
                Some(receiver)
            }
            _ => {
                let mut receiver = Receiver::new(table(group, cx)?);
                receiver.literal = true;
                Some(receiver)
            }
        },
        [Tree::Token(token)] => Some(token_head(token, cx)),
        _ => None,
    }
}

/// A name, number or string heading a primary expression.
fn token_head(token: &Token, cx: &Cx) -> Receiver {
    let text = token.text.as_ref();
    match token.kind {
        Kind::Name => {
            let lua = match text {
                "None" if cx.is_free(text) => "nil",
                "True" if cx.is_free(text) => "true",
                "False" if cx.is_free(text) => "false",
                _ => text,
            };
            let mut receiver = Receiver::new(lua.to_string());
            receiver.simple = true;
            receiver.name = (lua == text).then(|| text.to_string());
            receiver
        }
        Kind::Number => {
            let mut receiver = Receiver::new(python_number(text));
            receiver.simple = true;
            receiver
        }
        Kind::Str => {
            let mut receiver = Receiver::new(text.to_string());
            receiver.literal = true;
            receiver.simple = true;
            receiver.string = Some(text.to_string());
            receiver
        }
        _ => Receiver::new(text.to_string()),
    }
}

/// A number in Lua: Python's digit separators (`1_000`) dropped.
fn python_number(text: &str) -> String {
    if text.starts_with(|c: char| c.is_ascii_digit()) {
        text.replace('_', "")
    } else {
        text.to_string()
    }
}

/// A Python list `[a, b]` as a Lua table `{a, b}`; a comprehension has no mechanical Lua.
fn list(group: &Group, cx: &Cx) -> Option<String> {
    let mut values = Vec::new();
    for element in elements(&group.items) {
        if element.iter().any(|t| t.is_word("for")) || element.is_empty() {
            return None;
        }
        values.push(expression(element, cx)?);
    }
    Some(format!("{{{}}}", values.join(", ")))
}

/// A table constructor in Lua: Python's `"key": value` entries as `key = value`, Lua's
/// own entries and plain values rewritten inside.
fn table(group: &Group, cx: &Cx) -> Option<String> {
    let mut entries = Vec::new();
    for element in elements(&group.items) {
        if element.iter().any(|t| t.is_word("for")) || element.is_empty() {
            return None;
        }
        entries.push(entry(element, cx)?);
    }
    Some(format!("{{{}}}", entries.join(", ")))
}

/// One entry of a table or dictionary in Lua.
pub(super) fn entry(items: &[Tree], cx: &Cx) -> Option<String> {
    if items.first().is_some_and(|t| t.is_symbol("**")) {
        return None;
    }
    if let Some(equals) = items.iter().position(|t| t.is_symbol("=")) {
        let key = match &items[..equals] {
            [name] if name.name().is_some() => op_text(name).to_string(),
            [Tree::Group(group)] if group.open.text == "[" => {
                format!("[{}]", spaced_key(&expression(&group.items, cx)?))
            }
            _ => return None,
        };
        return Some(format!("{key} = {}", expression(&items[equals + 1..], cx)?));
    }
    let colon = (0..items.len()).find(|&i| items[i].is_symbol(":") && !method_colon(items, i));
    let Some(colon) = colon else {
        return expression(items, cx);
    };
    let key = match &items[..colon] {
        [Tree::Token(token)] if token.kind == Kind::Str => {
            let text = token.text.as_ref();
            let inner = text.get(1..text.len() - 1).unwrap_or("");
            let short = text.starts_with(['"', '\'']);
            if short && is_lua_name(inner) && !LUA_KEYWORDS.contains(&inner) {
                inner.to_string()
            } else {
                format!("[{}]", spaced_key(text))
            }
        }
        key => format!("[{}]", spaced_key(&expression(key, cx)?)),
    };
    Some(format!("{key} = {}", expression(&items[colon + 1..], cx)?))
}

/// A key inside `[…]`, spaced from the brackets when it starts with one (`[ [[k]] ]`).
fn spaced_key(key: &str) -> String {
    if key.starts_with('[') {
        format!(" {key} ")
    } else {
        key.to_string()
    }
}

/// `receiver[…]` in Lua: Python's index from the end (`xs[-1]`) as one from `#xs`, and
/// `[0]` as `[1]` when the error showed a zero-based read.
fn index(receiver: Receiver, group: &Group, cx: &Cx) -> Option<Receiver> {
    let inner = &group.items;
    if inner.iter().any(|t| t.is_symbol(":")) {
        return None; // A slice.
    }
    let key = match inner.as_slice() {
        [zero] if cx.evidence.zero_based && op_text(zero) == "0" => "1".to_string(),
        [minus, number] if minus.is_symbol("-") && number.is_kind(Kind::Number) => {
            let back: u64 = op_text(number).parse().ok()?;
            if !receiver.simple || back == 0 {
                return None;
            }
            match back {
                1 => format!("#{}", receiver.text),
                _ => format!("#{} - {}", receiver.text, back - 1),
            }
        }
        _ => spaced_key(&expression(inner, cx)?),
    };
    let mut indexed = Receiver::new(format!("{}[{key}]", receiver.callable()));
    indexed.simple = receiver.simple;
    Some(indexed)
}

/// The arguments of a call in Lua; `*xs` last is `table.unpack(xs)`. A keyword argument,
/// `**kwargs` or a generator has no mechanical Lua.
fn arguments(group: &Group, cx: &Cx) -> Option<Vec<String>> {
    let all = elements(&group.items);
    let mut out = Vec::new();
    for (i, element) in all.iter().enumerate() {
        let keyword = element.iter().any(|t| t.is_symbol("="));
        if keyword || element.is_empty() || element.iter().any(|t| t.is_word("for")) {
            return None;
        }
        let text = match element {
            [star, rest @ ..] if star.is_symbol("*") && i + 1 == all.len() => {
                format!("table.unpack({})", expression(rest, cx)?)
            }
            [star, ..] if star.is_symbol("*") || star.is_symbol("**") => return None,
            _ => expression(element, cx)?,
        };
        out.push(text);
    }
    Some(out)
}

/// The arguments a method is called with: `(…)`, or Lua's `"…"` or `{…}`.
fn method_arguments(item: &Tree, cx: &Cx) -> Option<Vec<String>> {
    match item.group("(") {
        Some(group) => arguments(group, cx),
        None => Some(vec![literal_argument(item, cx)?]),
    }
}

/// `receiver(…)` in Lua: a Python built-in called by its bare name is rewritten.
fn call(receiver: Receiver, group: &Group, cx: &Cx) -> Option<Receiver> {
    let builtin = receiver
        .name
        .as_deref()
        .filter(|name| cx.is_free(name))
        .and_then(|name| calls::function_fix(name).map(|fix| (name, fix)));
    let Some((name, fix)) = builtin else {
        let args = arguments(group, cx)?.join(", ");
        return Some(Receiver::new(format!("{}({args})", receiver.callable())));
    };
    let raw = elements(&group.items);
    let args = arguments(group, cx)?;
    let (text, loose) = match (fix, args.as_slice(), raw.as_slice()) {
        (CallFix::Length, [arg], [items]) => {
            let single = matches!(parts(items)?.as_slice(), [Part::Value { unary: [], .. }]);
            (if single { format!("#{arg}") } else { format!("#({arg})") }, false)
        }
        (CallFix::Rename(lua), ..) => (format!("{lua}({})", args.join(", ")), false),
        (CallFix::In(module), ..) => (format!("{module}.{name}({})", args.join(", ")), false),
        (CallFix::Number, [arg], [items]) => {
            let arithmetic = items
                .iter()
                .any(|t| t.token().is_some_and(|t| t.kind == Kind::Symbol && ARITHMETIC.contains(&t.text.as_ref())));
            let function = if arithmetic { "math.floor" } else { "tonumber" };
            (format!("{function}({arg})"), false)
        }
        (CallFix::Number, [_, _], _) => (format!("tonumber({})", args.join(", ")), false),
        (CallFix::TypeTest, [value, _], [_, [kind]]) => {
            let lua = match kind.name()? {
                "str" => "string",
                "int" | "float" => "number",
                "bool" => "boolean",
                "dict" | "list" | "tuple" | "set" => "table",
                _ => return None,
            };
            (format!("type({value}) == \"{lua}\""), true)
        }
        (CallFix::Round, [arg], [items]) => {
            let single = matches!(parts(items)?.as_slice(), [Part::Value { unary: [], .. }]);
            let arg = if single { arg.clone() } else { format!("({arg})") };
            (format!("math.floor({arg} + 0.5)"), false)
        }
        _ => return None,
    };
    let mut called = Receiver::new(text);
    called.loose = loose;
    Some(called)
}

/// `receiver.name(…)` or `receiver:name(…)` in Lua: a Python method as the Lua function
/// doing the same, a Lua string method called with a colon.
fn method(receiver: Receiver, name: &str, arguments: &Tree, dot: bool, cx: &Cx) -> Option<Receiver> {
    let args = method_arguments(arguments, cx)?;
    let plain = |separator: &str| {
        let receiver = if separator == ":" { receiver.callable() } else { receiver.text.clone() };
        Receiver::new(format!("{receiver}{separator}{name}({})", args.join(", ")))
    };
    let fix = calls::method_fix(name);
    if let Some(MethodFix::Module(function)) = fix {
        return cx
            .names
            .contains(function)
            .then(|| Receiver::new(format!("{function}({})", args.join(", "))));
    }
    // `string.format(…)`, `table.insert(t, x)`: a library's function, not a method.
    let library = receiver.name.as_deref().is_some_and(|n| cx.names.is_table(n));
    if dot && library {
        return Some(plain("."));
    }
    let Some(fix) = fix else {
        let python_too = matches!(name, "lower" | "upper") && args.is_empty();
        if dot && LUA_STRING_METHODS.contains(&name) && (python_too || cx.evidence.dot_calls) {
            return Some(plain(":"));
        }
        if dot && name == "format" {
            let literal = receiver.string.as_deref()?;
            return format_method(literal, &args).map(Receiver::new);
        }
        if dot && name == "find" {
            return None; // Python's `find` counts from 0 and answers -1: not Lua's.
        }
        return Some(plain(if dot { "." } else { ":" }));
    };
    let target = receiver.text.clone();
    let with_receiver = |function: &str| {
        let all: Vec<&str> = std::iter::once(target.as_str())
            .chain(args.iter().map(String::as_str))
            .collect();
        format!("{function}({})", all.join(", "))
    };
    let (text, loose) = match (fix, args.as_slice()) {
        (MethodFix::ReceiverFirst(function @ "table.insert"), [_])
        | (MethodFix::ReceiverFirst(function @ "table.sort"), []) => {
            (with_receiver(function), false)
        }
        (MethodFix::Library(function), _) if cx.names.contains(function) => {
            (with_receiver(function), false)
        }
        (MethodFix::Strip, _) if name == "strip" && cx.names.contains("strip") => {
            (with_receiver("strip"), false)
        }
        (MethodFix::Strip, []) => {
            let pattern = match name {
                "lstrip" => "^%s*(.-)$",
                "rstrip" => "^(.-)%s*$",
                _ => "^%s*(.-)%s*$",
            };
            (format!("{}:match(\"{pattern}\")", receiver.callable()), false)
        }
        (MethodFix::Pop, []) => (format!("table.remove({target})"), false),
        (MethodFix::Pop, [last]) if last == "-1" => (format!("table.remove({target})"), false),
        (MethodFix::Pop, [first]) if first == "0" => {
            (format!("table.remove({target}, 1)"), false)
        }
        (MethodFix::Insert, [at, value]) => {
            let at: u64 = at.parse().ok()?;
            (format!("table.insert({target}, {}, {value})", at + 1), false)
        }
        (MethodFix::Get, [key]) => (format!("{}[{}]", receiver.callable(), spaced_key(key)), false),
        (MethodFix::Get, [key, default]) => (
            format!("{}[{}] or {default}", receiver.callable(), spaced_key(key)),
            true,
        ),
        (MethodFix::Join, [list]) => {
            // `sep.join(parts)`; `t.join(",")` is another language's join, not Python's.
            let literal_argument = arguments
                .group("(")
                .is_some_and(|group| matches!(group.items.as_slice(), [s] if s.is_kind(Kind::Str)));
            if literal_argument && receiver.string.is_none() {
                return None;
            }
            (format!("table.concat({list}, {target})"), false)
        }
        (MethodFix::CharClass, []) => {
            let class = match name {
                "isdigit" => "%d",
                "isalpha" => "%a",
                "isspace" => "%s",
                _ => "%w",
            };
            (format!("{}:match(\"^{class}+$\")", receiver.callable()), false)
        }
        _ => return None,
    };
    let mut called = Receiver::new(text);
    called.loose = loose;
    Some(called)
}

/// A Python string with a prefix (`f"…"`, `r"…"`, `b"…"`) in Lua: an f-string as
/// `string.format`, a raw string with its backslashes doubled.
fn prefixed_string(prefix: &str, literal: &str, cx: &Cx) -> Option<String> {
    if !cx.is_free(prefix) || literal.starts_with('[') {
        return None;
    }
    let prefix = prefix.to_ascii_lowercase();
    let quote = &literal[..1];
    let body = &literal[1..literal.len() - 1];
    let body = if prefix.contains('r') {
        body.replace('\\', "\\\\")
    } else {
        body.to_string()
    };
    if !prefix.contains('f') {
        return Some(format!("{quote}{body}{quote}"));
    }
    let fields = format_fields(&body, Fields::Expressions)?;
    let mut values = Vec::new();
    for expression_text in &fields.expressions {
        let trees = super::tokens::trees(expression_text)?;
        values.push(expression(&trees, cx)?);
    }
    Some(fields.lua(quote, &values))
}

/// `"{} of {}".format(a, b)` as `string.format("%s of %s", a, b)`.
fn format_method(literal: &str, args: &[String]) -> Option<String> {
    let quote = &literal[..1];
    let fields = format_fields(&literal[1..literal.len() - 1], Fields::Positional)?;
    (fields.count == args.len()).then(|| fields.lua(quote, args))
}

/// What the fields of a format string may hold.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fields {
    /// An f-string's: an expression each.
    Expressions,
    /// `str.format`'s: nothing (`{}`), the values come in order.
    Positional,
}

/// A Python format string cut for `string.format`.
struct FormatString {
    /// The format with `%` specifiers where the fields were.
    format: String,
    /// The text alone (no fields), for a string with none.
    text: String,
    expressions: Vec<String>,
    count: usize,
}

impl FormatString {
    /// The Lua: a plain string when there are no fields, else `string.format`.
    fn lua(&self, quote: &str, values: &[String]) -> String {
        if self.count == 0 {
            return format!("{quote}{}{quote}", self.text);
        }
        let format = &self.format;
        format!("string.format({quote}{format}{quote}, {})", values.join(", "))
    }
}

/// The fields of the Python format string `body`: `{{` and `}}` are braces, `{x}` and
/// `{x:.2f}` are fields (`%s`, `%.2f`). A field Lua's `%` cannot write (alignment, a
/// thousands separator, a conversion) has no mechanical Lua.
fn format_fields(body: &str, fields: Fields) -> Option<FormatString> {
    let mut out = FormatString {
        format: String::new(),
        text: String::new(),
        expressions: Vec::new(),
        count: 0,
    };
    let mut rest = body;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("{{") || rest.starts_with("}}") {
            out.format.push(c);
            out.text.push(c);
            rest = &rest[2..];
            continue;
        }
        if c == '}' {
            return None;
        }
        if c != '{' {
            if c == '%' {
                out.format.push('%');
            }
            out.format.push(c);
            out.text.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let close = rest.find('}')?;
        let field = &rest[1..close];
        if field.contains('{') {
            return None;
        }
        let (expression, spec) = match field.rfind(':') {
            Some(at) if !field[at..].contains([']', ')', '"', '\'']) => (&field[..at], &field[at + 1..]),
            _ => (field, ""),
        };
        if expression.contains('!') && !expression.contains("!=") {
            return None; // `{x!r}`: a conversion.
        }
        match fields {
            Fields::Expressions if expression.trim().is_empty() || expression.ends_with('=') => {
                return None;
            }
            Fields::Positional if !expression.trim().is_empty() => return None,
            _ => {}
        }
        out.format.push('%');
        out.format.push_str(&lua_spec(spec)?);
        out.expressions.push(expression.trim().to_string());
        out.count += 1;
        rest = &rest[close + 1..];
    }
    Some(out)
}

/// A Python format spec as Lua's: `` → `s`, `.2f` → `.2f`, `5` → `5s`, `d` → `d`.
fn lua_spec(spec: &str) -> Option<String> {
    let (numbers, kind) = match spec.char_indices().last() {
        Some((at, c)) if c.is_ascii_alphabetic() => (&spec[..at], Some(c)),
        _ => (spec, None),
    };
    let (width, precision) = match numbers.split_once('.') {
        Some((width, precision)) => (width, Some(precision)),
        None => (numbers, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(width) || !precision.is_none_or(|p| !p.is_empty() && digits(p)) {
        return None;
    }
    let kind = match kind {
        None if precision.is_none() => 's',
        Some(kind @ ('d' | 'f' | 'e' | 'E' | 'g' | 'G' | 'x' | 'X' | 'o' | 's')) => kind,
        _ => return None,
    };
    Some(format!("{numbers}{kind}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_specs_lua_can_write_and_those_it_cannot() {
        assert_eq!(lua_spec("").as_deref(), Some("s"));
        assert_eq!(lua_spec(".2f").as_deref(), Some(".2f"));
        assert_eq!(lua_spec("5").as_deref(), Some("5s"));
        assert_eq!(lua_spec("05d").as_deref(), Some("05d"));
        assert_eq!(lua_spec(">5"), None);
        assert_eq!(lua_spec(","), None);
        assert_eq!(lua_spec(".2"), None);
        assert_eq!(lua_spec("%"), None);
    }

    #[test]
    fn format_strings_keep_their_text_and_escape_percent() {
        let fields = format_fields("{a} is {b:.1f}% {{x}}", Fields::Expressions).unwrap();
        assert_eq!(fields.format, "%s is %.1f%% {x}");
        assert_eq!(fields.expressions, ["a", "b"]);
        assert!(format_fields("{x!r}", Fields::Expressions).is_none());
        assert!(format_fields("{0}", Fields::Positional).is_none());
        assert!(format_fields("a } b", Fields::Positional).is_none());
    }

    #[test]
    fn words_are_kept_apart_and_dashes_never_make_a_comment() {
        let mut out = Out::new();
        out.push("", "a");
        out.push("", "and");
        out.push("", "b");
        out.push("", "-");
        out.push("", "-1");
        assert_eq!(out.text(), "a and b- -1");
    }
}
