//! Python statements in Lua: block headers (`if x:`, `elif`, `while`, `for … in …:`,
//! `def f(a):`, `else:`), the statements Python 2 writes without parentheses (`print
//! x`), `del`, `raise`, and a dictionary's entry on a line of its own. The code inside
//! and around them is [`expression`]'s (compound assignments there are
//! [`assignment`](super::assignment)'s).

use super::expression::{self, Out, code, elements, method_colon, parameters};
use super::primary::entry;
use super::tokens::{Kind, Tree, written};
use super::{Cx, Fixed, Shape};

/// Python statements with no mechanical Lua: the line keeps the rule.
const NO_LUA: &[&str] = &[
    "pass", "continue", "import", "from", "try", "except", "finally", "class", "with", "global",
    "nonlocal", "yield", "async", "await",
];

/// A whole line in Lua, a comment at its end kept after the code.
pub(super) fn line(items: &[Tree], cx: &Cx) -> Option<Fixed> {
    let (code_items, comment) = match items.split_last() {
        Some((last, rest)) if last.is_kind(Kind::Comment) => (rest, Some(last)),
        _ => (items, None),
    };
    let mut fixed = if code_items.is_empty() {
        statement_of(String::new())
    } else {
        statement(code_items, cx)?
    };
    if let Some(comment) = comment {
        let mut out = Out::new();
        out.push("", &fixed.text);
        out.push(comment.space(), &written(std::slice::from_ref(comment)));
        fixed.text = out.text();
    }
    Some(fixed)
}

fn statement_of(text: String) -> Fixed {
    Fixed {
        text,
        shape: Shape::Statement,
    }
}

/// One statement (with what follows it on the line) in Lua.
fn statement(items: &[Tree], cx: &Cx) -> Option<Fixed> {
    let first = items[0].token().filter(|t| t.kind == Kind::Name);
    let python_statement = items.len() == 1
        || items[1].is_kind(Kind::Name)
        || items[1].is_kind(Kind::Number)
        || items[1].is_symbol(":");
    match first.map(|t| t.text.as_ref()) {
        Some("elif") if block_colon(items).is_some() => {
            header(items, "elseif", "then", cx, Shape::Continuation)
        }
        Some("elif") => {
            // `elif c then`: Lua's line but for the keyword.
            let rest = code(&items[1..], cx)?;
            let closes = items.iter().any(|t| t.is_word("end"));
            let shape = if closes {
                Shape::Closing
            } else {
                Shape::Continuation
            };
            Some(Fixed {
                text: format!("elseif {rest}"),
                shape,
            })
        }
        Some("if") if block_colon(items).is_some() => {
            header(items, "if", "then", cx, Shape::Opener)
        }
        Some("while") if block_colon(items).is_some() => {
            header(items, "while", "do", cx, Shape::Opener)
        }
        Some("else") if items.get(1).is_some_and(|t| t.is_symbol(":")) => with_body(
            "else".to_string(),
            &items[2..],
            false,
            cx,
            Shape::Continuation,
        ),
        Some("for") => for_loop(items, cx),
        Some("def") => def(items, cx),
        Some(word @ ("print" | "assert")) if python_statement && items.len() > 1 => {
            Some(statement_of(format!("{word}({})", code(&items[1..], cx)?)))
        }
        Some("del") if python_statement => del(&items[1..], cx),
        Some("raise") if python_statement => raise(&items[1..], cx),
        Some(word) if python_statement && NO_LUA.contains(&word) => None,
        _ if is_dict_entry(items) => dict_entry(items, cx),
        _ => match loop_after(items) {
            Some(at) => then_loop(items, at, cx),
            None => code(items, cx).map(|text| Fixed {
                text,
                shape: elif_shape(items, cx),
            }),
        },
    }
}

/// What a line of code with an `elif` inside is once it is `elseif`: inside an `if`
/// opened on an earlier line unless the line opens it first (`if a then x() elif b
/// then`), and closing it when an `end` follows.
fn elif_shape(items: &[Tree], cx: &Cx) -> Shape {
    let Some(at) = (0..items.len()).find(|&i| expression::python_elif(items, i, cx)) else {
        return Shape::Statement;
    };
    if items[..at].iter().any(|t| t.is_word("if")) {
        Shape::Statement
    } else if items[at..].iter().any(|t| t.is_word("end")) {
        Shape::Closing
    } else {
        Shape::Continuation
    }
}

/// Where a `for … in` loop starts after another statement on the line (`local n = 0
/// for k in d.keys() do`), if one does.
fn loop_after(items: &[Tree]) -> Option<usize> {
    let at = (1..items.len()).find(|&i| items[i].is_word("for"))?;
    items[at..].iter().any(|t| t.is_word("in")).then_some(at)
}

/// The statements before `at`, then the loop from `at`.
fn then_loop(items: &[Tree], at: usize, cx: &Cx) -> Option<Fixed> {
    let before = code(&items[..at], cx)?;
    let the_loop = for_loop(&items[at..], cx)?;
    let mut out = Out::new();
    out.push("", &before);
    out.push(items[at].space(), &the_loop.text);
    Some(Fixed {
        text: out.text(),
        shape: the_loop.shape,
    })
}

/// Where the colon closing a Python block header is: the first colon of the line's top
/// level that does not call a method.
fn block_colon(items: &[Tree]) -> Option<usize> {
    (1..items.len()).find(|&i| items[i].is_symbol(":") && !method_colon(items, i))
}

/// `if c:` / `elif c:` / `while c:` as `if c then` / `elseif c then` / `while c do`, with
/// the body written after the colon, if any.
fn header(items: &[Tree], keyword: &str, opener: &str, cx: &Cx, shape: Shape) -> Option<Fixed> {
    let colon = block_colon(items)?;
    let condition = code(&items[1..colon], cx)?;
    if condition.is_empty() {
        return None;
    }
    let mut out = Out::new();
    out.push("", keyword);
    out.push(" ", &condition);
    out.push(" ", opener);
    let closes = shape == Shape::Opener;
    with_body(out.text(), &items[colon + 1..], closes, cx, shape)
}

/// `head` followed by the statement written after a block's colon, closed by `end` when
/// `closes` (an `if`, not an `elseif`). Without a body, the line opens the block.
fn with_body(head: String, body: &[Tree], closes: bool, cx: &Cx, shape: Shape) -> Option<Fixed> {
    if body.is_empty() {
        return Some(Fixed { text: head, shape });
    }
    let body = statement(body, cx)?;
    if body.shape != Shape::Statement {
        return None;
    }
    let end = if closes { " end" } else { "" };
    let shape = if closes { Shape::Statement } else { shape };
    Some(Fixed {
        text: format!("{head} {}{end}", body.text),
        shape,
    })
}

/// `for x in xs:` (or Lua's `for x in xs do`) with the iterable Lua walks: `ipairs` for
/// a list, `pairs` for `d.items()`, a numeric `for` for `range`.
fn for_loop(items: &[Tree], cx: &Cx) -> Option<Fixed> {
    let Some(at_in) = items.iter().position(|t| t.is_word("in")) else {
        return code(items, cx).map(statement_of); // Lua's numeric `for`.
    };
    let names = elements(&items[1..at_in])
        .iter()
        .map(|target| match target {
            [name] => name.name(),
            _ => None,
        })
        .collect::<Option<Vec<&str>>>()?;
    let (end, python) = match block_colon(items) {
        Some(colon) => (colon, true),
        None => (items.iter().position(|t| t.is_word("do"))?, false),
    };
    if end < at_in || names.is_empty() {
        return None;
    }
    let head = loop_head(&names, &items[at_in + 1..end], python, cx)?;
    let body = &items[end + 1..];
    if python {
        return with_body(format!("{head} do"), body, true, cx, Shape::Opener);
    }
    let mut out = Out::new();
    out.push("", &head);
    out.push(items[end].space(), "do");
    if let Some(first) = body.first() {
        out.push(first.space(), &code(body, cx)?);
    }
    let shape = if body.iter().any(|t| t.is_word("end")) {
        Shape::Statement
    } else {
        Shape::Opener
    };
    Some(Fixed {
        text: out.text(),
        shape,
    })
}

/// The loop up to its `do`, for the `targets` and the Python `iterable`.
fn loop_head(targets: &[&str], iterable: &[Tree], python: bool, cx: &Cx) -> Option<String> {
    let joined = targets.join(", ");
    if let Some(arguments) = called(iterable, "range", cx) {
        let [name] = targets else { return None };
        return Some(format!("for {name} = {}", range_bounds(arguments, cx)?));
    }
    if let Some(arguments) = called(iterable, "enumerate", cx) {
        let listed = elements(arguments);
        let ([_, _], [list]) = (targets, listed.as_slice()) else {
            return None;
        };
        if cx.text_receiver(list).is_some() {
            return None; // A string's characters and their places: no `ipairs`.
        }
        return Some(format!(
            "for {joined} in ipairs({})",
            expression::argument(list, cx)?
        ));
    }
    if let Some((receiver, view)) = dict_view(iterable) {
        let receiver = expression::argument(receiver, cx)?;
        return match (view, targets.len()) {
            ("items", 2) | ("keys", 1) => Some(format!("for {joined} in pairs({receiver})")),
            ("values", 1) => Some(format!("for _, {joined} in pairs({receiver})")),
            _ => None,
        };
    }
    let lua = expression::expression(iterable, cx)?;
    if lua_iterator(iterable) || !(python || cx.evidence.tables_iterate) {
        return Some(format!("for {joined} in {lua}"));
    }
    match targets {
        // `ipairs` fails on a string: Python walks its characters.
        [name] => match cx.text_receiver(iterable) {
            Some(text) => Some(format!("for {name} in {text}:gmatch(utf8.charpattern)")),
            None => Some(format!("for _, {name} in ipairs({lua})")),
        },
        _ => None, // A tuple unpacked: no mechanical Lua.
    }
}

/// The arguments of `iterable` when it is a call of the Python built-in `function`.
fn called<'t, 'a>(iterable: &'t [Tree<'a>], function: &str, cx: &Cx) -> Option<&'t [Tree<'a>]> {
    match iterable {
        [name, Tree::Group(group)]
            if name.is_word(function) && group.open.text == "(" && cx.is_free(function) =>
        {
            Some(&group.items)
        }
        _ => None,
    }
}

/// `d.items()`, `d.keys()`, `d.values()` cut into `d` and the view's name.
fn dict_view<'t, 'a>(iterable: &'t [Tree<'a>]) -> Option<(&'t [Tree<'a>], &'t str)> {
    let [receiver @ .., dot, view, Tree::Group(call)] = iterable else {
        return None;
    };
    let name = view.name()?;
    let is_view = matches!(name, "items" | "keys" | "values");
    let dotted = dot.is_symbol(".") || dot.is_symbol(":");
    (is_view && dotted && call.open.text == "(" && call.items.is_empty() && !receiver.is_empty())
        .then_some((receiver, name))
}

/// Whether `iterable` already is a Lua iterator: a call of `pairs`, `ipairs`, `next`,
/// `gmatch`, `utf8.codes`.
fn lua_iterator(iterable: &[Tree]) -> bool {
    let [.., function, Tree::Group(_)] = iterable else {
        return false;
    };
    function
        .name()
        .is_some_and(|name| matches!(name, "pairs" | "ipairs" | "next" | "gmatch" | "codes"))
}

/// `range`'s arguments as a numeric `for`'s bounds: `range(n)` is `0, n - 1`.
fn range_bounds(arguments: &[Tree], cx: &Cx) -> Option<String> {
    match elements(arguments).as_slice() {
        [stop] => Some(format!("0, {}", bound(stop, -1, cx)?)),
        [start, stop] => Some(format!(
            "{}, {}",
            expression::expression(start, cx)?,
            bound(stop, -1, cx)?
        )),
        [start, stop, step] => {
            let step_text = written(step);
            let down = step_text.starts_with('-');
            let digits = step_text.trim_start_matches(['-', ' ']);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits == "0" {
                return None;
            }
            let stop = bound(stop, if down { 1 } else { -1 }, cx)?;
            Some(format!(
                "{}, {stop}, {step_text}",
                expression::expression(start, cx)?
            ))
        }
        _ => None,
    }
}

/// The last value a loop reaches before Python's exclusive `stop`: `stop + shift` (`n -
/// 1`), computed for a number, and `n + 1 - 1` written `n`.
fn bound(stop: &[Tree], shift: i64, cx: &Cx) -> Option<String> {
    if let [number] = stop
        && let Ok(n) = written(stop).parse::<i64>()
        && number.is_kind(Kind::Number)
    {
        return Some(n.checked_add(shift)?.to_string());
    }
    let undo = if shift < 0 { "+" } else { "-" };
    if let [rest @ .., op, one] = stop
        && op.is_symbol(undo)
        && written(std::slice::from_ref(one)) == "1"
        && !rest.is_empty()
        && expression::is_arithmetic(rest)
    {
        return expression::expression(rest, cx);
    }
    let text = expression::expression(stop, cx)?;
    let text = if expression::is_arithmetic(stop) {
        text
    } else {
        format!("({text})")
    };
    Some(if shift < 0 {
        format!("{text} - 1")
    } else {
        format!("{text} + 1")
    })
}

/// `def f(a, b):` as `function f(a, b)`.
fn def(items: &[Tree], cx: &Cx) -> Option<Fixed> {
    let [_, name, Tree::Group(params), ..] = items else {
        return None;
    };
    let name = name.name()?;
    let colon = block_colon(items)?;
    let annotation = &items[3..colon];
    if params.open.text != "(" || !(annotation.is_empty() || annotation[0].is_symbol("->")) {
        return None;
    }
    let head = format!("function {name}({})", parameters(&params.items)?);
    with_body(head, &items[colon + 1..], true, cx, Shape::Opener)
}

/// `del t[k]` as `t[k] = nil`.
fn del(target: &[Tree], cx: &Cx) -> Option<Fixed> {
    let field = target.len() >= 2
        && (target[target.len() - 1].group("[").is_some()
            || target[target.len() - 2].is_symbol("."));
    if !field || elements(target).len() != 1 {
        return None;
    }
    Some(statement_of(format!(
        "{} = nil",
        expression::expression(target, cx)?
    )))
}

/// `raise ValueError("bad")` as `error("bad")`.
fn raise(raised: &[Tree], cx: &Cx) -> Option<Fixed> {
    let text = match raised {
        [name] => format!("error(\"{}\")", name.name()?),
        [name, Tree::Group(arguments)] if arguments.open.text == "(" => {
            let name = name.name()?;
            match elements(&arguments.items).as_slice() {
                [] => format!("error(\"{name}\")"),
                [message] => format!("error({})", expression::expression(message, cx)?),
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(statement_of(text))
}

/// A dictionary's entry on a line of its own: `"key": value,`.
fn is_dict_entry(items: &[Tree]) -> bool {
    items.len() > 2 && items[0].is_kind(Kind::Str) && items[1].is_symbol(":")
}

/// `"key": value,` as `key = value,`.
fn dict_entry(items: &[Tree], cx: &Cx) -> Option<Fixed> {
    let (entry_items, comma) = match items.split_last() {
        Some((last, rest)) if last.is_symbol(",") => (rest, ","),
        _ => (items, ""),
    };
    Some(Fixed {
        text: format!("{}{comma}", entry(entry_items, cx)?),
        shape: Shape::Entry,
    })
}
