//! Python expressions written as Lua: operators (`!=`, `&&`, `**`, `is None`), names
//! (`None`, `True`), literals (`[1, 2]`, `{"a": 1}`, f-strings), the conditional
//! expression and `lambda`, and Python's functions and methods (`len(x)`, `t.append(v)`).
//!
//! The rewrite is lenient about what it does not know: Lua it finds on the line is kept
//! as written, and two statements on one line are two runs of values. What is Python
//! and has no mechanical Lua (`x in t`, a slice, a keyword argument, `sorted(t)`) makes
//! the whole rewrite `None`.

use super::Cx;
use super::assignment::{compound, compound_operator};
use super::primary::{arguments, primary_text};
use super::tokens::{Kind, LUA_KEYWORDS, Tree, written};

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

/// Whether `item` separates the expressions of a run (`,`, `=`, `return`, `then`, a
/// comment …), each rewritten on its own. The keywords an expression holds (`and`,
/// `not`, `function`) do not, nor `if` and `else`, Python's conditional expression's
/// too; `in` does after a `for`.
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
                        "if" | "else"
                            | "not"
                            | "and"
                            | "or"
                            | "true"
                            | "false"
                            | "nil"
                            | "function"
                            | "in"
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
        // Lua's `else`, unless it is the conditional expression's (`a if c else b`).
        let lua_else = item.is_word("else") && !items[start..i].iter().any(|t| t.is_word("if"));
        let elif = python_elif(items, i, cx);
        if (separates(item, for_seen) || lua_else || elif) && !in_lambda {
            if start < i {
                out.push(items[start].space(), &segment(&items[start..i], cx)?);
            }
            let keyword = if elif {
                "elseif".to_string()
            } else {
                written(std::slice::from_ref(item))
            };
            out.push(item.space(), &keyword);
            start = i + 1;
        }
        for_seen |= item.is_word("for");
    }
    if start < items.len() {
        out.push(items[start].space(), &segment(&items[start..], cx)?);
    }
    Some(out.text())
}

/// Whether the item at `at` is Python's `elif` where Lua has its `elseif`: where a
/// statement starts (after a value, `then` or `end`) and before a condition; not a name
/// the code defines, a field, or an assignment's target.
pub(super) fn python_elif(items: &[Tree], at: usize, cx: &Cx) -> bool {
    if !items[at].is_word("elif") || !cx.is_free("elif") {
        return false;
    }
    let after_statement = match at.checked_sub(1).map(|i| &items[i]) {
        None | Some(Tree::Group(_)) => true,
        Some(Tree::Token(token)) => match token.kind {
            Kind::Number | Kind::Str => true,
            Kind::Name => {
                let word = token.text.as_ref();
                matches!(
                    word,
                    "then" | "end" | "else" | "do" | "true" | "false" | "nil"
                ) || !LUA_KEYWORDS.contains(&word)
            }
            Kind::Symbol | Kind::Comment => false,
        },
    };
    let condition = items.get(at + 1).is_some_and(|next| match next.token() {
        None => true,
        Some(token) => match token.kind {
            Kind::Symbol => matches!(token.text.as_ref(), "-" | "#" | "!" | "~"),
            Kind::Name => !matches!(token.text.as_ref(), "then" | "and" | "or"),
            Kind::Number | Kind::Str => true,
            Kind::Comment => false,
        },
    });
    after_statement && condition
}

/// One segment of a run of code: a compound assignment, or an expression.
fn segment(items: &[Tree], cx: &Cx) -> Option<String> {
    if items.iter().any(|t| compound_operator(t).is_some()) {
        return compound(items, cx);
    }
    expression(items, cx)
}

/// Whether `items` opens with `lambda` and its parameters still run (no colon yet), so
/// that a comma there separates parameters, not values.
fn lambda_params_open(items: &[Tree]) -> bool {
    items.first().is_some_and(|t| t.is_word("lambda")) && !items.iter().any(|t| t.is_symbol(":"))
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

/// An expression in Lua where it is a function's only argument: `(x)` written `x`.
pub(super) fn argument(items: &[Tree], cx: &Cx) -> Option<String> {
    match items {
        [Tree::Group(group)] if group.open.text == "(" => expression(&group.items, cx),
        _ => expression(items, cx),
    }
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
    if let Some(at) = items.iter().position(|t| t.is_word("in")) {
        return membership(items, at, cx);
    }
    Rendered::of(items, cx).map(|r| r.text)
}

/// Python's `x in s` (at `at`) and `x not in s` where `s` is known to be text, as
/// `s:find(x, 1, true)` (plain: `x` is no pattern). The left operand runs back to a
/// boolean operator or `if`, the right one is one value. Any other `in` (a table's, or a
/// value the code does not show) has no mechanical Lua.
fn membership(items: &[Tree], at: usize, cx: &Cx) -> Option<String> {
    let negated = at > 0 && items[at - 1].is_word("not");
    let left_end = if negated { at - 1 } else { at };
    let left_start = (0..left_end)
        .rev()
        .find(|&i| ends_an_operand(&items[i]))
        .map_or(0, |i| i + 1);
    let right_end = (at + 1..items.len())
        .find(|&i| ends_an_operand(&items[i]))
        .unwrap_or(items.len());
    let left = &items[left_start..left_end];
    let receiver = cx.text_receiver(&items[at + 1..right_end])?;
    // Python chains comparisons (`a < b in s`): no mechanical Lua.
    let chained = items[..left_start].last().is_some_and(is_comparison)
        || items.get(right_end).is_some_and(is_comparison);
    if left.is_empty() || chained {
        return None;
    }
    let not = if negated { "not " } else { "" };
    let found = format!("{not}{receiver}:find({}, 1, true)", expression(left, cx)?);
    let mut out = Out::new();
    out.push("", &expression(&items[..left_start], cx)?);
    out.push(items[left_start].space(), &found);
    if right_end < items.len() {
        out.push(
            items[right_end].space(),
            &expression(&items[right_end..], cx)?,
        );
    }
    Some(out.text())
}

/// Whether `item` ends an operand of `in` (`and`, `if`, a comparison, …).
fn ends_an_operand(item: &Tree) -> bool {
    const WORDS: &[&str] = &[
        "and", "or", "not", "if", "elseif", "else", "while", "then", "do", "return", "is",
    ];
    WORDS.iter().any(|word| item.is_word(word))
        || ["&&", "||", "!"].iter().any(|s| item.is_symbol(s))
        || is_comparison(item)
}

fn is_comparison(item: &Tree) -> bool {
    ["==", "!=", "~=", "<", ">", "<=", ">="]
        .iter()
        .any(|s| item.is_symbol(s))
}

/// `x if c else y`, cut into `x`, `c` and `y`, when `items` is one: an `if` after a
/// value and an `else` after it, with no `then` (which would make it Lua's `if`).
fn conditional<'t, 'a>(
    items: &'t [Tree<'a>],
) -> Option<(&'t [Tree<'a>], &'t [Tree<'a>], &'t [Tree<'a>])> {
    if items
        .iter()
        .any(|t| t.is_word("then") || t.is_word("elseif"))
    {
        return None;
    }
    let at_if = items
        .iter()
        .position(|t| t.is_word("if"))
        .filter(|&i| i > 0)?;
    let at_else = at_if + items[at_if..].iter().position(|t| t.is_word("else"))?;
    Some((
        &items[..at_if],
        &items[at_if + 1..at_else],
        &items[at_else + 1..],
    ))
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
pub(super) enum Part<'t, 'a> {
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
    "+", "-", "*", "/", "//", "%", "^", "**", "..", "==", "~=", "!=", "<", ">", "<=", ">=", "&",
    "|", "~", "<<", ">>", "&&", "||",
];

/// Operators that bind tighter than comparison: the links of an arithmetic chain.
pub(super) const ARITHMETIC: &[&str] = &["+", "-", "*", "/", "//", "%", "^", "**"];

/// `items` cut into parts, or `None` when they hold Python with no Lua (`in`, `:=`, a
/// colon that is neither a method call nor a table's).
pub(super) fn parts<'t, 'a>(items: &'t [Tree<'a>]) -> Option<Vec<Part<'t, 'a>>> {
    let mut parts = Vec::new();
    let mut i = 0;
    let mut after_value = false;
    while i < items.len() {
        let item = &items[i];
        let python_only = item.is_word("in")
            || item.is_word("lambda")
            || (item.is_word("is") && !after_value)
            || [":", "::", ":=", "@", "->"]
                .iter()
                .any(|s| item.is_symbol(s));
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
        let index_or_call = item.group("[").is_some() || item.group("(").is_some();
        let literal_call = glued && (item.is_kind(Kind::Str) || item.group("{").is_some());
        let step =
            if item.is_symbol(".") && items.get(end + 1).is_some_and(|t| t.is_kind(Kind::Name)) {
                2
            } else if item.is_symbol(":") && method_colon(items, end) {
                3
            } else if index_or_call || literal_call {
                1
            } else {
                return end;
            };
        end += step;
    }
}

/// How many items the head of a primary expression at `start` takes.
pub(super) fn head_len(items: &[Tree], start: usize) -> usize {
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
    let arguments = items
        .get(at + 2)
        .is_some_and(|t| t.group("(").is_some() || t.group("{").is_some() || t.is_kind(Kind::Str));
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
pub(super) struct Rendered {
    pub text: String,
    /// It is a binary expression (`type(x) == "string"`): in parentheses unless alone.
    pub loose: bool,
}

impl Rendered {
    /// `items` (values and operators) in Lua.
    fn of(items: &[Tree], cx: &Cx) -> Option<Rendered> {
        let parts = parts(items)?;
        let alone = parts.len() == 1;
        let joins = joins(&parts, cx);
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
            for (j, part) in parts.iter().enumerate().skip(i).take(chain) {
                match part {
                    Part::Value { unary, primary } => {
                        for op in *unary {
                            let text = if op.is_symbol("!") {
                                "not"
                            } else {
                                op_text(op)
                            };
                            out.push(op.space(), text);
                        }
                        let value = primary_text(primary, cx)?;
                        let joined = (j > 0 && joins[j - 1]) || joins.get(j + 1) == Some(&true);
                        let text = if joined
                            && unary.is_empty()
                            && matches!(value.text.as_str(), "nil" | "true" | "false")
                        {
                            // `..` fails on nil and booleans: their text is joined.
                            format!("tostring({})", value.text)
                        } else if value.loose && !(alone && unary.is_empty()) {
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
                    Part::Other(tree) => {
                        out.push(tree.space(), &written(std::slice::from_ref(*tree)))
                    }
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

/// For each of `parts`, whether it is an operator joining text: `..`, or `+` in a chain
/// that holds text (Python's `"n: " + str(n)`).
fn joins(parts: &[Part], cx: &Cx) -> Vec<bool> {
    let mut joins = vec![false; parts.len()];
    let mut i = 0;
    while i < parts.len() {
        let chain = chain_len(&parts[i..]);
        let concatenates = chain > 1 && parts[i..i + chain].iter().any(|p| stringish(p, cx));
        for (j, part) in parts.iter().enumerate().skip(i).take(chain) {
            joins[j] = match part.operator() {
                Some("..") => true,
                Some("+") => concatenates,
                _ => false,
            };
        }
        i += chain;
    }
    joins
}

/// The text of a token tree that is a token.
pub(super) fn op_text<'a>(tree: &'a Tree) -> &'a str {
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
        (Some("*"), Some(text), _) => {
            Some(Some(format!("({text}):rep({})", value_text(right, cx)?)))
        }
        (Some("*"), None, Some(text)) => {
            Some(Some(format!("({text}):rep({})", value_text(left, cx)?)))
        }
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
                .map(|op| {
                    if op.is_symbol("!") {
                        "not "
                    } else {
                        op_text(op)
                    }
                })
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

#[cfg(test)]
mod tests {
    use super::*;

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
