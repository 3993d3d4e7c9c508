//! A primary expression (a name, a literal, a parenthesized expression, then its fields,
//! indexes, calls and method calls) written in Lua: Python's literals as tables, its
//! built-in functions and methods as Lua's (`len(x)` is `#x`, `t.append(v)` is
//! `table.insert(t, v)`, `s.lower()` is `s:lower()`), its index from the end as one from
//! `#t`.

use super::Cx;
use super::ValueKind;
use super::expression::{
    ARITHMETIC, Rendered, elements, expression, head_len, is_single_value, method_colon, op_text,
};
use super::strings::{format_method, prefixed_string};
use super::tokens::{Group, Kind, LUA_KEYWORDS, Token, Tree};
use crate::conventions::is_lua_name;
use crate::hints::calls::{self, CallFix, LUA_STRING_METHODS, MethodFix};

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
    /// The expression inside, when it is one in parentheses: `strip(x)`, not `strip((x))`.
    inner: Option<String>,
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
            inner: None,
            loose: false,
        }
    }

    /// The receiver as a function's first argument.
    fn argument(&self) -> &str {
        self.inner.as_deref().unwrap_or(&self.text)
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
pub(super) fn primary_text(items: &[Tree], cx: &Cx) -> Option<Rendered> {
    let head = head_len(items, 0);
    let mut receiver = head_text(&items[..head], cx)?;
    let mut i = head;
    while i < items.len() {
        let item = &items[i];
        if item.is_symbol(".") || item.is_symbol(":") {
            let name = op_text(&items[i + 1]);
            let call = items
                .get(i + 2)
                .filter(|t| t.group("(").is_some() || (item.is_symbol(":") && !t.is_symbol(".")));
            match call {
                Some(arguments) if item.is_symbol(".") || method_colon(items, i) => {
                    receiver = method(receiver, name, arguments, item.is_symbol("."), cx)?;
                    i += 3;
                }
                _ => {
                    let mut field = Receiver::new(format!("{}.{name}", receiver.callable()));
                    field.simple = receiver.simple;
                    receiver = field;
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
            receiver = Receiver::new(format!("{}{literal}", receiver.callable()));
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
                let inner = expression(only, cx)?;
                let mut receiver = Receiver::new(format!("({inner})"));
                receiver.inner = Some(inner);
                Some(receiver)
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
    let text = receiver.string.is_some()
        || receiver
            .name
            .as_deref()
            .is_some_and(|name| cx.kinds.get(name) == Some(ValueKind::Text));
    if text && let Some(at) = character_position(inner) {
        // Indexing a string reads nil: its characters are `sub`'s.
        let callable = receiver.callable();
        return Some(Receiver::new(format!("{callable}:sub({at}, {at})")));
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

/// Where Python's `s[0]` or `s[-n]` reads a character, as `sub` counts: `1`, `-n`.
fn character_position(inner: &[Tree]) -> Option<String> {
    match inner {
        [zero] if zero.is_kind(Kind::Number) && op_text(zero) == "0" => Some("1".to_string()),
        [minus, number] if minus.is_symbol("-") && number.is_kind(Kind::Number) => {
            let back: u64 = op_text(number).parse().ok()?;
            (back > 0).then(|| format!("-{back}"))
        }
        _ => None,
    }
}

/// The arguments of a call in Lua; `*xs` last is `table.unpack(xs)`. A keyword argument,
/// `**kwargs` or a generator has no mechanical Lua.
pub(super) fn arguments(group: &Group, cx: &Cx) -> Option<Vec<String>> {
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
    let args = arguments(group, cx)?;
    let builtin = receiver
        .name
        .as_deref()
        .filter(|name| cx.is_free(name))
        .and_then(|name| calls::function_fix(name).map(|fix| (name, fix)));
    match builtin {
        Some((name, fix)) => builtin_call(name, fix, &args, &elements(&group.items)),
        None => Some(Receiver::new(format!(
            "{}({})",
            receiver.callable(),
            args.join(", ")
        ))),
    }
}

/// A call of the Python built-in `name` in Lua: `args` as Lua writes them, `raw` as the
/// model did (what they are decides some rewrites).
fn builtin_call(name: &str, fix: CallFix, args: &[String], raw: &[&[Tree]]) -> Option<Receiver> {
    let joined = args.join(", ");
    let text = match (fix, args, raw) {
        (CallFix::Length, [arg], [items]) if is_single_value(items) => format!("#{arg}"),
        (CallFix::Length, [arg], _) => format!("#({arg})"),
        (CallFix::Rename(lua), ..) => format!("{lua}({joined})"),
        // Python's `max(xs)` takes a list; Lua's `math.max` takes the values.
        (CallFix::In(module), [list], [[only]]) if matches!(name, "max" | "min") => {
            match only.group("[") {
                Some(_) => format!(
                    "{module}.{name}({})",
                    list.trim_start_matches('{').trim_end_matches('}')
                ),
                None => format!("{module}.{name}(table.unpack({list}))"),
            }
        }
        (CallFix::In(module), [_], [_]) if matches!(name, "max" | "min") => {
            format!("{module}.{name}(table.unpack({joined}))")
        }
        (CallFix::In(module), ..) => format!("{module}.{name}({joined})"),
        (CallFix::Number, [arg], [items]) if has_arithmetic(items) => format!("math.floor({arg})"),
        (CallFix::Number, [_] | [_, _], _) => format!("tonumber({joined})"),
        (CallFix::TypeTest, [value, _], [_, [kind]]) => {
            let lua = match kind.name()? {
                "str" => "string",
                "int" | "float" => "number",
                "bool" => "boolean",
                "dict" | "list" | "tuple" | "set" => "table",
                _ => return None,
            };
            return Some(loose(format!("type({value}) == \"{lua}\"")));
        }
        (CallFix::Round, [arg], [items]) if is_single_value(items) => {
            format!("math.floor({arg} + 0.5)")
        }
        (CallFix::Round, [arg], _) => format!("math.floor(({arg}) + 0.5)"),
        _ => return None,
    };
    Some(Receiver::new(text))
}

/// A binary expression as a value, in parentheses unless alone.
fn loose(text: String) -> Receiver {
    let mut value = Receiver::new(text);
    value.loose = true;
    value
}

/// Whether `items` holds an arithmetic operator at its top level (`x / 2`).
fn has_arithmetic(items: &[Tree]) -> bool {
    items.iter().any(|t| {
        t.token()
            .is_some_and(|t| t.kind == Kind::Symbol && ARITHMETIC.contains(&t.text.as_ref()))
    })
}

/// Lua's standard libraries, whose functions are called with a dot.
const LUA_LIBRARIES: &[&str] = &["string", "table", "math", "utf8", "os", "coroutine"];

/// `receiver.name(…)` or `receiver:name(…)` in Lua: a Python method as the Lua function
/// doing the same, a Lua string method called with a colon.
fn method(
    receiver: Receiver,
    name: &str,
    arguments: &Tree,
    dot: bool,
    cx: &Cx,
) -> Option<Receiver> {
    let args = method_arguments(arguments, cx)?;
    let fix = calls::method_fix(name);
    if let Some(MethodFix::Module(function)) = fix {
        return cx
            .names
            .contains(function)
            .then(|| Receiver::new(format!("{function}({})", args.join(", "))));
    }
    // `string.format(…)`, `table.insert(t, x)`: a library's function, not a method.
    let library = receiver.name.as_deref().is_some_and(|n| {
        !cx.bound.contains(n) && (LUA_LIBRARIES.contains(&n) || cx.names.is_table(n))
    });
    if dot && library {
        return Some(written_call(&receiver, ".", name, &args));
    }
    match fix {
        Some(fix) => python_method(fix, &receiver, name, &args, arguments, cx),
        None => lua_method(&receiver, name, &args, dot, cx),
    }
}

/// `receiver.name(args)` or `receiver:name(args)`, as the model called it.
fn written_call(receiver: &Receiver, separator: &str, name: &str, args: &[String]) -> Receiver {
    let receiver = if separator == ":" {
        receiver.callable()
    } else {
        receiver.text.clone()
    };
    Receiver::new(format!("{receiver}{separator}{name}({})", args.join(", ")))
}

/// A method Python does not have: Lua's string methods called with a colon, where that
/// is what the model meant; anything else as written.
fn lua_method(
    receiver: &Receiver,
    name: &str,
    args: &[String],
    dot: bool,
    cx: &Cx,
) -> Option<Receiver> {
    if !dot {
        return Some(written_call(receiver, ":", name, args));
    }
    let python_too = matches!(name, "lower" | "upper") && args.is_empty();
    if LUA_STRING_METHODS.contains(&name) && (python_too || cx.evidence.dot_calls) {
        return Some(written_call(receiver, ":", name, args));
    }
    match name {
        "format" => format_method(receiver.string.as_deref()?, args).map(Receiver::new),
        // Python's `find` counts from 0 and answers -1: not Lua's.
        "find" => None,
        _ => Some(written_call(receiver, ".", name, args)),
    }
}

/// A Python method in Lua, as `fix` says.
fn python_method(
    fix: MethodFix,
    receiver: &Receiver,
    name: &str,
    args: &[String],
    arguments: &Tree,
    cx: &Cx,
) -> Option<Receiver> {
    let target = receiver.argument();
    let with_receiver = |function: &str| {
        let all: Vec<&str> = std::iter::once(target)
            .chain(args.iter().map(String::as_str))
            .collect();
        format!("{function}({})", all.join(", "))
    };
    let text = match (fix, args) {
        (MethodFix::ReceiverFirst(function @ "table.insert"), [_])
        | (MethodFix::ReceiverFirst(function @ "table.sort"), []) => with_receiver(function),
        (MethodFix::Library(function), _) if cx.names.contains(function) => with_receiver(function),
        (MethodFix::Strip, _) if name == "strip" && cx.names.contains("strip") => {
            with_receiver("strip")
        }
        (MethodFix::Strip, []) => format!("{}:match(\"{}\")", receiver.callable(), trim(name)),
        (MethodFix::Pop, [] | [_]) => pop(target, args)?,
        (MethodFix::Insert, [at, value]) => {
            let at = at.parse::<u64>().ok()?.checked_add(1)?;
            format!("table.insert({target}, {at}, {value})")
        }
        (MethodFix::Get, [key]) => format!("{}[{}]", receiver.callable(), spaced_key(key)),
        (MethodFix::Get, [key, default]) => {
            let read = format!("{}[{}]", receiver.callable(), spaced_key(key));
            return Some(loose(format!("{read} or {default}")));
        }
        (MethodFix::Join, [list]) => join(receiver, list, arguments)?,
        (MethodFix::CharClass, []) => {
            format!("{}:match(\"^{}+$\")", receiver.callable(), char_class(name))
        }
        _ => return None,
    };
    Some(Receiver::new(text))
}

/// The pattern Lua trims with, for Python's `strip`, `lstrip` or `rstrip`.
fn trim(name: &str) -> &'static str {
    match name {
        "lstrip" => "^%s*(.-)$",
        "rstrip" => "^(.-)%s*$",
        _ => "^%s*(.-)%s*$",
    }
}

/// Lua's character class for Python's `isdigit`, `isalpha`, `isspace`, `isalnum`.
fn char_class(name: &str) -> &'static str {
    match name {
        "isdigit" => "%d",
        "isalpha" => "%a",
        "isspace" => "%s",
        _ => "%w",
    }
}

/// `t.pop()`, `t.pop(-1)` and `t.pop(0)` as `table.remove`; another index is not
/// mechanical (Python's counts from 0).
fn pop(target: &str, args: &[String]) -> Option<String> {
    match args {
        [] => Some(format!("table.remove({target})")),
        [last] if last == "-1" => Some(format!("table.remove({target})")),
        [first] if first == "0" => Some(format!("table.remove({target}, 1)")),
        _ => None,
    }
}

/// `sep.join(list)` as `table.concat(list, sep)`; `t.join(",")` is another language's
/// join, not Python's, and has no mechanical Lua.
fn join(receiver: &Receiver, list: &str, arguments: &Tree) -> Option<String> {
    let literal_argument = arguments
        .group("(")
        .is_some_and(|group| matches!(group.items.as_slice(), [s] if s.is_kind(Kind::Str)));
    if literal_argument && receiver.string.is_none() {
        return None;
    }
    Some(format!("table.concat({list}, {})", receiver.argument()))
}
