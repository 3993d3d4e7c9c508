//! Hints for code that failed: Python written as Lua, answered with the Lua way in one
//! line, and a "did you mean" for an unknown function. The environment adds the hint to
//! the error of every failed execution ([`ExecError::Lua`](super::ExecError::Lua)), so
//! the loop, `rlm exec`/`rlm run`, MCP `run_lua` and the JSON API all show it.
//!
//! A hint needs a failure: the error's message and the code that raised it. Three kinds
//! of cases, each a table in its own file:
//! - `syntax`: Python syntax on the line the error points at (`!=`, `elif`, `x += 1`, a
//!   `# comment`, …), looked for in the line's code with strings and comments removed.
//!   Each is something valid Lua never holds.
//! - `runtime`: Python that runs and then fails (`xs[0] + 1`, `"n: " + n`), found from
//!   the runtime error and the failing line together.
//! - `calls`: Python's functions and methods (`len(x)`, `s.split(",")`, `t.append(x)`),
//!   found from the error Lua raised on calling them ("attempt to call a nil value
//!   (global 'len')"), naming a library function when the environment has it.
//!
//! ```
//! use rlm_registry::environment::hints::{Names, hint};
//!
//! let names = Names::new(["word_count", "line_count", "print"]);
//! let source = "if n != 0 then print(n) end";
//! let message = "input:1: 'then' expected near '!'";
//! assert_eq!(hint(source, message, &names).unwrap(), "Lua writes not-equal as `~=`: `a ~= b`.");
//!
//! let message = "input:1: attempt to call a nil value (global 'countlines')";
//! assert!(hint("print(countlines(context))", message, &names).unwrap().contains("Did you mean `line_count`?"));
//! ```

mod calls;
mod runtime;
mod scan;
mod syntax;

use crate::catalog::Catalog;
use crate::conventions::LUA_GLOBALS;
use crate::spec::closest_name;

use super::sandbox::REMOVED_GLOBALS;

/// The names code may call in an environment: what "did you mean" chooses from, and
/// which library functions a hint may name.
#[derive(Clone, Debug, Default)]
pub struct Names(Vec<String>);

/// Not a global at all, though Lua lists it with them: never suggested.
const NOT_CALLABLE: &str = "_ENV";

impl Names {
    /// These names.
    ///
    /// ```
    /// use rlm_registry::environment::hints::Names;
    /// let names = Names::new(["word_count"]);
    /// assert!(names.contains("word_count"));
    /// assert_eq!(names.closest("wordcount"), Some("word_count"));
    /// ```
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Names {
        Names(names.into_iter().map(Into::into).collect())
    }

    /// What `catalog` offers (built-ins, providers' and registry functions) and the
    /// standard globals the sandbox keeps.
    ///
    /// ```
    /// use rlm_registry::{Registry, catalog::Catalog, environment::hints::Names};
    ///
    /// let catalog = Catalog::of_registry(Registry::baked().clone());
    /// let names = Names::of(&catalog);
    /// assert!(names.contains("llm_query") && names.contains("line_count") && names.contains("tostring"));
    /// assert!(!names.contains("require"), "removed by the sandbox");
    /// ```
    pub fn of(catalog: &Catalog) -> Names {
        let mut names: Vec<String> = catalog
            .functions()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        names.extend(
            LUA_GLOBALS
                .iter()
                .filter(|name| !REMOVED_GLOBALS.contains(name) && **name != NOT_CALLABLE)
                .map(|name| name.to_string()),
        );
        Names(names)
    }

    /// Adds `names` (the session's own global functions, say).
    pub fn extend(&mut self, names: impl IntoIterator<Item = String>) {
        self.0.extend(names);
    }

    /// Whether `name` is one of them.
    pub fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|known| known == name)
    }

    /// The name most like `name`, if one is close enough ([`closest_name`]).
    pub fn closest(&self, name: &str) -> Option<&str> {
        closest_name(name, self.0.iter().map(String::as_str))
    }
}

/// The hint for the failure `message` raised by `source`, in one line, if there is one.
/// Only an error in the code itself (`input:LINE: …`) gets one.
///
/// ```
/// use rlm_registry::environment::hints::{Names, hint};
///
/// let names = Names::new(["split"]);
/// let failed = "input:1: attempt to call a nil value (method 'split')";
/// assert_eq!(
///     hint("for _, w in ipairs(s:split(',')) do end", failed, &names).as_deref(),
///     Some("Lua strings have no `split` method: call `split(s, \",\")`."),
/// );
/// // The same code failing for another reason gets no hint.
/// assert_eq!(hint("print(s:split(','))", "input:1: boom", &names), None);
/// ```
pub fn hint(source: &str, message: &str, names: &Names) -> Option<String> {
    let (line, detail) = position(message)?;
    let lines = scan::code_lines(source, line);
    let code = lines.get(line.wrapping_sub(1)).map_or("", String::as_str);
    // A syntax error may be reported lines after the Python that caused it (`for x in
    // xs:` parses on as a method call): the nearest Python line above it is the cause.
    // A nil value may come from `None` written lines above.
    let from_source = if is_syntax_error(detail) {
        lines.iter().rev().find_map(|code| syntax::hint(code))
    } else if detail.contains("a nil value") {
        syntax::hint(code).or_else(|| lines.iter().rev().find_map(|code| syntax::nil_hint(code)))
    } else {
        syntax::hint(code)
    };
    let from_error = from_error(detail, code, names);
    match (from_source, from_error) {
        (Some(a), Some(b)) if a != b => Some(format!("{a} {b}")),
        (Some(a), _) => Some(a.to_string()),
        (None, b) => b,
    }
}

/// The line and the text of an error in the code: `input:LINE: text`.
fn position(message: &str) -> Option<(usize, &str)> {
    let rest = message.strip_prefix("input:")?;
    let (line, detail) = rest.split_once(": ")?;
    Some((line.parse().ok()?, detail))
}

/// Whether `detail` is what Lua's parser says: `… near 'token'` or `… near <eof>`.
fn is_syntax_error(detail: &str) -> bool {
    detail.contains(" near '") || detail.ends_with(" near <eof>")
}

/// The hint the error itself calls for, given the failing line's `code`.
fn from_error(detail: &str, code: &str, names: &Names) -> Option<String> {
    if let Some(name) = quoted(detail, "attempt to call a nil value (global '") {
        return calls::function(name, names).or_else(|| Some(did_you_mean(name, names)));
    }
    if let Some(name) = quoted(detail, "attempt to call a nil value (method '")
        .or_else(|| quoted(detail, "attempt to call a nil value (field '"))
    {
        return calls::method(name, names);
    }
    if let Some(name) = quoted(detail, "attempt to index a nil value (global '") {
        return calls::module(name).or_else(|| {
            let suggestion = names.closest(name)?;
            Some(format!(
                "`{name}` is not defined here. Did you mean `{suggestion}`?"
            ))
        });
    }
    if detail.starts_with("bad argument #")
        && let Some(name) = quoted(detail, " to '")
        && detail.ends_with("got no value)")
        && called_with_a_dot(code, name)
    {
        return Some(format!(
            "Call a string's methods with a colon: `s:{name}(…)`."
        ));
    }
    runtime::hint(detail, code).map(str::to_string)
}

/// Whether `code` calls `x.name(…)` on a value `x`, not on the `string` library.
fn called_with_a_dot(code: &str, name: &str) -> bool {
    let call = format!(".{name}(");
    code.match_indices(&call).any(|(at, _)| {
        let before = code[..at].trim_end();
        let owner_len = before
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        &before[before.len() - owner_len..] != "string"
    })
}

/// The "did you mean" for an unknown function `name`.
fn did_you_mean(name: &str, names: &Names) -> String {
    match names.closest(name) {
        Some(suggestion) => format!(
            "`{name}` is not a function here. Did you mean `{suggestion}`? (help(\"{suggestion}\") shows how to call it.)"
        ),
        None => {
            format!("`{name}` is not a function here. help() lists every function you can call.")
        }
    }
}

/// The text between `prefix` and the next `'` in `detail`.
fn quoted<'a>(detail: &'a str, prefix: &str) -> Option<&'a str> {
    let start = detail.find(prefix)? + prefix.len();
    let rest = &detail[start..];
    Some(&rest[..rest.find('\'')?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_source_and_messages_never_panic() {
        let names = Names::new(["word_count"]);
        let sources = [
            "s = \"é\\é\" .. 'ü",
            "x = [==[ never closed",
            "--[[ never closed\né != ü",
            "é.ü(ö) # ü ü",
            "",
            "\n\n\n",
        ];
        let messages = [
            "input:0: x",
            "input:1: attempt to call a nil value (global '",
            "input:99999999999999999999: x",
            "input:2: bad argument #1 to 'é' (string expected, got no value)",
            "input:1: attempt to call a nil value (field 'é')",
            "input:3: unexpected symbol near 'é'",
            "input:1: attempt to index a nil value (field '?')",
        ];
        for source in sources {
            for message in messages {
                let _ = hint(source, message, &names);
            }
        }
    }

    #[test]
    fn an_error_outside_the_code_gets_no_hint() {
        let names = Names::new(["line_count"]);
        let message = "lua/text.lua:3: attempt to call a nil value (global 'len')";
        assert_eq!(hint("len(x)", message, &names), None);
    }

    #[test]
    fn json_loads_names_json_decode_once_there_is_one() {
        let message = "input:1: attempt to call a nil value (field 'loads')";
        let without = hint("json.loads(s)", message, &Names::default()).unwrap();
        assert!(without.contains("patterns"), "{without}");
        let with = hint("json.loads(s)", message, &Names::new(["json.decode"])).unwrap();
        assert_eq!(with, "Lua reads JSON with `json.decode(text)`.");
    }

    #[test]
    fn a_library_function_is_named_only_when_present() {
        let message = "input:1: attempt to call a nil value (field 'split')";
        let without = hint("x.split(',')", message, &Names::default()).unwrap();
        assert!(without.contains("gmatch"), "{without}");
        let with = hint("x.split(',')", message, &Names::new(["split"])).unwrap();
        assert!(with.contains("split(s, \",\")"), "{with}");
    }
}
