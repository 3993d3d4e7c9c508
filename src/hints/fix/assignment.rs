//! Python's compound assignments in Lua: `count -= 1` is `count = count - 1`.

use super::Cx;
use super::expression::{Out, expression, is_single_value, is_text};
use super::tokens::{Kind, Tree};

/// Python's compound assignments and Lua's operator for each.
const COMPOUND: &[(&str, &str)] = &[
    ("+=", "+"),
    ("-=", "-"),
    ("*=", "*"),
    ("/=", "/"),
    ("//=", "//"),
    ("%=", "%"),
    ("**=", "^"),
    ("&=", "&"),
    ("|=", "|"),
    ("<<=", "<<"),
    (">>=", ">>"),
];

/// A segment of code holding a compound assignment, `target op= value`, as `target =
/// target op value`: the target as written, the value in parentheses when it has
/// operators of its own, `+=` on text as `..`. What stands before the target in the
/// segment (another statement's end) is kept.
pub(super) fn compound(items: &[Tree], cx: &Cx) -> Option<String> {
    let at = items.iter().position(|t| compound_operator(t).is_some())?;
    let written_op = compound_operator(&items[at])?;
    let op = COMPOUND.iter().find(|(python, _)| *python == written_op)?.1;
    let start = target_start(items, at)?;
    let target = &items[start..at];
    if target.iter().any(|t| t.group("(").is_some()) {
        return None; // A call in the target would run twice.
    }
    let target = expression(target, cx)?;
    let value = &items[at + 1..];
    if value.is_empty() {
        return None;
    }
    let op = if op == "+" && is_text(value, cx) {
        ".."
    } else {
        op
    };
    let value_text = expression(value, cx)?;
    let value_text = if is_single_value(value) {
        value_text
    } else {
        format!("({value_text})")
    };
    let mut out = Out::new();
    out.push("", &expression(&items[..start], cx)?);
    out.push(
        items[start].space(),
        &format!("{target} = {target} {op} {value_text}"),
    );
    Some(out.text())
}

/// The compound assignment operator `item` is (`+=`, `//=`), if it is one; `^=` too,
/// which has no Lua (xor or power: a guess).
pub(super) fn compound_operator<'a>(item: &'a Tree) -> Option<&'a str> {
    let token = item.token().filter(|t| t.kind == Kind::Symbol)?;
    let text = token.text.as_ref();
    let compound = text.len() >= 2
        && text.ends_with('=')
        && !matches!(text, "==" | "~=" | "!=" | "<=" | ">=" | ":=");
    compound.then_some(text)
}

/// Where the assignment target ending just before `at` starts: a name and its fields and
/// indexes (`t[i].n`).
fn target_start(items: &[Tree], at: usize) -> Option<usize> {
    let mut i = at;
    loop {
        let item = items.get(i.checked_sub(1)?)?;
        if item.group("[").is_some() || item.group("(").is_some() {
            i -= 1;
        } else if item.name().is_some() {
            if i >= 2 && items[i - 2].is_symbol(".") {
                i -= 2;
            } else {
                return Some(i - 1);
            }
        } else {
            return None;
        }
    }
}
