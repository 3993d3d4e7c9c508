//! Python's strings in Lua: an f-string as `string.format`, a raw string with its
//! backslashes doubled, `"{}".format(x)` as `string.format("%s", x)`.

use super::Cx;
use super::expression::expression;
use super::tokens::trees;

/// A Python string with a prefix (`f"…"`, `r"…"`, `b"…"`) in Lua: an f-string as
/// `string.format`, a raw string with its backslashes doubled.
pub(super) fn prefixed_string(prefix: &str, literal: &str, cx: &Cx) -> Option<String> {
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
        let tokens = trees(expression_text)?;
        values.push(expression(&tokens, cx)?);
    }
    Some(fields.lua(quote, &values))
}

/// `"{} of {}".format(a, b)` as `string.format("%s of %s", a, b)`.
pub(super) fn format_method(literal: &str, args: &[String]) -> Option<String> {
    if literal.starts_with('[') {
        return None; // A long string: Python has none.
    }
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
        format!(
            "string.format({quote}{format}{quote}, {})",
            values.join(", ")
        )
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
            Some(at) if !field[at..].contains([']', ')', '"', '\'']) => {
                (&field[..at], &field[at + 1..])
            }
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
}
