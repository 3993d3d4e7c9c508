//! The one LuaLS type grammar: what a `---@param`/`---@return` type is, where it ends on
//! a doc line (`split_type`), and what it means as JSON ([`LuaType::schema`]). The doc
//! reader, the tool form and host functions all read types through this module.
//!
//! | LuaLS | JSON Schema |
//! |---|---|
//! | `string`, `number`, `integer`, `boolean` | `{"type": …}` |
//! | `any`, `unknown` | `{}` |
//! | `nil` | `{"type": "null"}` |
//! | `T?`, `T\|nil` | `T`, and the parameter or field is not required |
//! | `T[]` | `{"type": "array", "items": T}` |
//! | `table<string, V>` | `{"type": "object", "additionalProperties": V}` |
//! | `table<integer, V>`, `table<number, V>` | `{"type": "array", "items": V}` (a sequence) |
//! | `table` | `{"type": ["object", "array"]}` |
//! | `{ k: T, k2?: U }` | `{"type": "object", "properties": …, "required": ["k"]}` |
//! | `{ [string]: V }` | as `table<string, V>` |
//! | `"a"\|"b"`, `'a'\|'b'` | `{"type": "string", "enum": ["a", "b"]}` |
//! | `A\|B` | `{"anyOf": [A, B]}` |
//! | `fun(…)`, `function`, `userdata`, `thread`, class names | not representable |
//!
//! A function with a parameter whose type is not representable is not exported as a
//! tool; [`function_tool`](crate::spec::function_tool) says why. Varargs (`...`) become an optional array property
//! named `args` whose items have the vararg's type; its elements are passed as the
//! trailing positional arguments. The parameters object has `additionalProperties:
//! false`: a call naming a parameter the function does not have is refused.
//!
//! The parser never panics: any input gives a type or a [`TypeError`].

use std::fmt;

use serde_json::{Map, Value, json};

/// Nesting deeper than this is refused (keeps recursion bounded on any input).
const MAX_DEPTH: usize = 32;

/// A parsed LuaLS type, restricted to what JSON can carry.
#[derive(Clone, Debug, PartialEq)]
pub enum LuaType {
    /// `any`, `unknown`: anything.
    Any,
    /// `nil`.
    Nil,
    /// `string`.
    String,
    /// `number`.
    Number,
    /// `integer`.
    Integer,
    /// `boolean`.
    Boolean,
    /// A string literal, `"a"` or `'a'`.
    Literal(String),
    /// `T[]`, and `table<integer, T>`.
    Array(Box<LuaType>),
    /// `table<string, V>`, `{ [string]: V }`.
    Map(Box<LuaType>),
    /// `table`: an object or an array.
    Table,
    /// `{ k: T, k2?: U }`.
    Record(Vec<Field>),
    /// `A|B|…` (at least two alternatives).
    Union(Vec<LuaType>),
}

/// One field of a record type.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// The key.
    pub name: String,
    /// Its type, `nil` removed when optional.
    pub ty: LuaType,
    /// Whether it may be absent (`k?:`, `T?`, `T|nil`).
    pub optional: bool,
}

/// Why a type string has no JSON Schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeError(pub String);

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TypeError {}

/// Parses a LuaLS type string.
///
/// ```
/// use rlm_registry::conventions::lua_type::{parse_type, LuaType};
///
/// assert_eq!(parse_type("string[]").unwrap(), LuaType::Array(Box::new(LuaType::String)));
/// assert!(parse_type("fun(x: integer): string").is_err());
/// ```
pub fn parse_type(text: &str) -> Result<LuaType, TypeError> {
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        tokens,
        position: 0,
        depth: 0,
    };
    let ty = parser.union()?;
    match parser.peek() {
        None => Ok(ty),
        Some(token) => Err(TypeError(format!(
            "unexpected `{}` in type `{text}`",
            token.text()
        ))),
    }
}

/// The JSON Schema of a LuaLS type string.
///
/// ```
/// use serde_json::json;
/// use rlm_registry::conventions::lua_type::type_schema;
///
/// assert_eq!(type_schema("integer").unwrap(), json!({"type": "integer"}));
/// assert_eq!(
///     type_schema("\"asc\"|\"desc\"").unwrap(),
///     json!({"type": "string", "enum": ["asc", "desc"]})
/// );
/// ```
pub fn type_schema(text: &str) -> Result<Value, TypeError> {
    parse_type(text).map(|ty| ty.schema())
}

impl LuaType {
    /// This type without `nil` alternatives, and whether it had any.
    pub fn strip_nil(self) -> (LuaType, bool) {
        match self {
            LuaType::Nil => (LuaType::Any, true),
            LuaType::Union(alternatives) => {
                let before = alternatives.len();
                let mut rest: Vec<LuaType> = alternatives
                    .into_iter()
                    .filter(|a| *a != LuaType::Nil)
                    .collect();
                let had_nil = rest.len() != before;
                let ty = match rest.len() {
                    0 => LuaType::Any,
                    1 => rest.pop().unwrap_or(LuaType::Any),
                    _ => LuaType::Union(rest),
                };
                (ty, had_nil)
            }
            other => (other, false),
        }
    }

    /// The JSON Schema for this type.
    pub fn schema(&self) -> Value {
        match self {
            LuaType::Any => json!({}),
            LuaType::Nil => json!({"type": "null"}),
            LuaType::String => json!({"type": "string"}),
            LuaType::Number => json!({"type": "number"}),
            LuaType::Integer => json!({"type": "integer"}),
            LuaType::Boolean => json!({"type": "boolean"}),
            LuaType::Literal(value) => json!({"type": "string", "enum": [value]}),
            LuaType::Array(items) => json!({"type": "array", "items": items.schema()}),
            LuaType::Map(values) => {
                json!({"type": "object", "additionalProperties": values.schema()})
            }
            LuaType::Table => json!({"type": ["object", "array"]}),
            LuaType::Record(fields) => {
                let mut properties = Map::new();
                let mut required = Vec::new();
                for field in fields {
                    properties.insert(field.name.clone(), field.ty.schema());
                    if !field.optional {
                        required.push(Value::String(field.name.clone()));
                    }
                }
                let mut schema = json!({"type": "object", "properties": properties});
                if !required.is_empty() {
                    schema["required"] = Value::Array(required);
                }
                schema
            }
            LuaType::Union(alternatives) => {
                let literals: Option<Vec<&String>> = alternatives
                    .iter()
                    .map(|a| match a {
                        LuaType::Literal(value) => Some(value),
                        _ => None,
                    })
                    .collect();
                match literals {
                    Some(values) => json!({"type": "string", "enum": values}),
                    None => json!({
                        "anyOf": alternatives.iter().map(LuaType::schema).collect::<Vec<_>>()
                    }),
                }
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Name(String),
    Literal(String),
    Number(String),
    Symbol(char),
    Ellipsis,
}

impl Token {
    fn text(&self) -> String {
        match self {
            Token::Name(name) | Token::Number(name) => name.clone(),
            Token::Literal(value) => format!("{value:?}"),
            Token::Symbol(c) => c.to_string(),
            Token::Ellipsis => "...".to_string(),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, TypeError> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '"' | '\'' | '`' => {
                let mut value = String::new();
                let mut closed = false;
                for (_, d) in chars.by_ref() {
                    if d == c {
                        closed = true;
                        break;
                    }
                    value.push(d);
                }
                if !closed {
                    return Err(TypeError(format!(
                        "unterminated string literal in type `{text}`"
                    )));
                }
                tokens.push(Token::Literal(value));
            }
            '.' if text[start..].starts_with("...") => {
                chars.next();
                chars.next();
                tokens.push(Token::Ellipsis);
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut end = start + c.len_utf8();
                while let Some(&(i, d)) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' || d == '.' {
                        end = i + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Name(text[start..end].to_string()));
            }
            c if c.is_ascii_digit() || c == '-' => {
                let mut end = start + 1;
                while let Some(&(i, d)) = chars.peek() {
                    if d.is_ascii_alphanumeric() || d == '.' {
                        end = i + 1;
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Number(text[start..end].to_string()));
            }
            '|' | '?' | '[' | ']' | '<' | '>' | ',' | ';' | '{' | '}' | ':' | '(' | ')' => {
                tokens.push(Token::Symbol(c))
            }
            other => {
                return Err(TypeError(format!(
                    "unexpected character `{other}` in type `{text}`"
                )));
            }
        }
    }
    if tokens.is_empty() {
        return Err(TypeError("empty type".to_string()));
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    position: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.position)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.position).cloned();
        self.position += 1;
        token
    }

    fn eat(&mut self, symbol: char) -> bool {
        if self.peek() == Some(&Token::Symbol(symbol)) {
            self.position += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, symbol: char) -> Result<(), TypeError> {
        if self.eat(symbol) {
            Ok(())
        } else {
            Err(TypeError(match self.peek() {
                Some(token) => format!("expected `{symbol}`, found `{}`", token.text()),
                None => format!("expected `{symbol}` at the end of the type"),
            }))
        }
    }

    fn union(&mut self) -> Result<LuaType, TypeError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(TypeError(format!(
                "type nested deeper than {MAX_DEPTH} levels"
            )));
        }
        // A leading `|` is allowed (multi-line LuaLS unions).
        self.eat('|');
        let mut alternatives = vec![self.postfix()?];
        while self.eat('|') {
            alternatives.push(self.postfix()?);
        }
        self.depth -= 1;
        // Flatten nested unions and drop duplicates.
        let mut flat: Vec<LuaType> = Vec::new();
        for alternative in alternatives {
            let parts = match alternative {
                LuaType::Union(parts) => parts,
                other => vec![other],
            };
            for part in parts {
                if !flat.contains(&part) {
                    flat.push(part);
                }
            }
        }
        if flat.contains(&LuaType::Any) {
            // `any|nil` keeps its nil: it still marks the value optional.
            let nil = flat.contains(&LuaType::Nil);
            return Ok(if nil {
                LuaType::Union(vec![LuaType::Any, LuaType::Nil])
            } else {
                LuaType::Any
            });
        }
        Ok(if flat.len() == 1 {
            flat.pop().unwrap_or(LuaType::Any)
        } else {
            LuaType::Union(flat)
        })
    }

    fn postfix(&mut self) -> Result<LuaType, TypeError> {
        let mut ty = self.primary()?;
        loop {
            if self.peek() == Some(&Token::Symbol('['))
                && self.tokens.get(self.position + 1) == Some(&Token::Symbol(']'))
            {
                self.position += 2;
                ty = LuaType::Array(Box::new(ty));
            } else if self.eat('?') {
                ty = match ty {
                    LuaType::Union(mut parts) => {
                        if !parts.contains(&LuaType::Nil) {
                            parts.push(LuaType::Nil);
                        }
                        LuaType::Union(parts)
                    }
                    LuaType::Nil => LuaType::Nil,
                    other => LuaType::Union(vec![other, LuaType::Nil]),
                };
            } else {
                return Ok(ty);
            }
        }
    }

    fn primary(&mut self) -> Result<LuaType, TypeError> {
        match self.next() {
            None => Err(TypeError("a type is missing".to_string())),
            Some(Token::Literal(value)) => Ok(LuaType::Literal(value)),
            Some(Token::Symbol('(')) => {
                let ty = self.union()?;
                self.expect(')')?;
                Ok(ty)
            }
            Some(Token::Symbol('{')) => self.record(),
            Some(Token::Name(name)) => self.named(&name),
            Some(Token::Number(number)) => Err(TypeError(format!(
                "number literal type `{number}` is not supported"
            ))),
            Some(token) => Err(TypeError(format!("unexpected `{}`", token.text()))),
        }
    }

    fn named(&mut self, name: &str) -> Result<LuaType, TypeError> {
        Ok(match name {
            "any" | "unknown" => LuaType::Any,
            "nil" | "void" => LuaType::Nil,
            "string" => LuaType::String,
            "number" => LuaType::Number,
            "integer" => LuaType::Integer,
            "boolean" => LuaType::Boolean,
            "table" if self.eat('<') => {
                let key = self.union()?;
                self.expect(',')?;
                let value = self.union()?;
                self.expect('>')?;
                map_type(key, value)?
            }
            "table" => LuaType::Table,
            "fun" => {
                return Err(TypeError(
                    "a function (`fun(…)`) cannot be passed as JSON".to_string(),
                ));
            }
            "function" | "userdata" | "lightuserdata" | "thread" => {
                return Err(TypeError(format!("a `{name}` cannot be passed as JSON")));
            }
            "true" | "false" => {
                return Err(TypeError(format!(
                    "boolean literal type `{name}` is not supported"
                )));
            }
            other => {
                return Err(TypeError(format!(
                    "unknown type `{other}` (classes and aliases are not supported)"
                )));
            }
        })
    }

    /// After `{`: `k: T, k2?: U` fields or one `[K]: V` index signature, up to `}`.
    fn record(&mut self) -> Result<LuaType, TypeError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(TypeError(format!(
                "type nested deeper than {MAX_DEPTH} levels"
            )));
        }
        let mut fields: Vec<Field> = Vec::new();
        let mut index: Option<LuaType> = None;
        loop {
            if self.eat('}') {
                break;
            }
            if self.eat('[') {
                let key = self.union()?;
                self.expect(']')?;
                self.expect(':')?;
                let value = self.union()?;
                index = Some(map_type(key, value)?);
            } else {
                let name = match self.next() {
                    Some(Token::Name(name)) => name,
                    Some(Token::Literal(name)) => name,
                    Some(token) => {
                        return Err(TypeError(format!(
                            "expected a field name, found `{}`",
                            token.text()
                        )));
                    }
                    None => return Err(TypeError("unterminated `{` in type".to_string())),
                };
                let optional_name = self.eat('?');
                self.expect(':')?;
                let (ty, nil) = self.union()?.strip_nil();
                if fields.iter().any(|f| f.name == name) {
                    return Err(TypeError(format!("field `{name}` appears twice")));
                }
                fields.push(Field {
                    name,
                    ty,
                    optional: optional_name || nil,
                });
            }
            if !(self.eat(',') || self.eat(';')) {
                self.expect('}')?;
                break;
            }
        }
        self.depth -= 1;
        match (index, fields.is_empty()) {
            (Some(_), false) => Err(TypeError(
                "a table type with both named fields and `[key]: value` is not supported"
                    .to_string(),
            )),
            (Some(map), true) => Ok(map),
            (None, _) => Ok(LuaType::Record(fields)),
        }
    }
}

fn map_type(key: LuaType, value: LuaType) -> Result<LuaType, TypeError> {
    let value = Box::new(value);
    match key {
        LuaType::String => Ok(LuaType::Map(value)),
        LuaType::Integer | LuaType::Number => Ok(LuaType::Array(value)),
        other => Err(TypeError(format!(
            "table keys of type `{}` cannot be JSON object keys",
            other.schema()
        ))),
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
pub(crate) fn looks_like_type(word: &str) -> bool {
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
}
