//! The `csv` built-in: `csv.parse`, `csv.rows` and `csv.encode`, on the `csv` crate
//! (RFC 4180: quoted fields may hold the separator, doubled quotes and newlines). Reading
//! drives its parser, `csv_core`, a MiB of input at a time into buffers grown here, so a
//! record's size counts against the memory limit and a huge one stops at a limit.
//!
//! Fields are strings, as Python's `csv` gives them. With a header (the default) a row
//! is a table keyed by column name: a row shorter than the header lacks the missing
//! columns' keys, and a row longer than it keeps its extra fields under their column
//! numbers (`row[5]`), so nothing is lost and nothing is made up. Without a header a row
//! is an array of its fields. A header naming a column twice is an error. Blank lines
//! are skipped.
//!
//! Rows are built with the Lua C API, the header's names pushed once and reused as keys,
//! a whole `csv.parse` in one protected call; the reader and its record are owned
//! outside that call, so an allocation failing in Lua (the memory limit) leaks nothing.
//!
//! ```
//! use rlm_registry::{Registry, environment::{Environment, Limits}};
//!
//! let env = Environment::new(Registry::baked().clone(), Limits::default())?;
//! let run = env.execute(r#"
//!   local rows, header = csv.parse('name,note\nAda,"likes ""maths"", logic"\n')
//!   print(#rows, header[2], rows[1].note)
//!   print(csv.encode(rows, {columns = header}))
//! "#)?;
//! assert_eq!(run.output, "1\tnote\tlikes \"maths\", logic\nname,note\nAda,\"likes \"\"maths\"\", logic\"\n\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use mlua::{Table, Value};

use super::options::check_known as known_options;
use crate::conventions::builtins::BuiltinId;
use crate::environment::errors::quoted;

mod encode;
mod read;

pub(super) use encode::encode;
pub(super) use read::{parse, rows};

fn error(function: BuiltinId, message: String) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{}: {message}", function.name()))
}

/// `a number`, `a table`: a value's Lua type with its article, for messages.
fn a_type(value: &Value) -> String {
    match value {
        Value::Integer(_) | Value::Number(_) => "a number".to_string(),
        other => format!("a {}", other.type_name()),
    }
}

/// `sep` and `header`, from a call's options table.
#[derive(Clone, Copy)]
struct ReadOptions {
    sep: u8,
    header: bool,
}

impl ReadOptions {
    fn from_table(function: BuiltinId, opts: Option<&Table>) -> mlua::Result<Self> {
        let Some(opts) = opts else {
            return Ok(ReadOptions {
                sep: b',',
                header: true,
            });
        };
        known_options(function, opts, &["sep", "header"])?;
        Ok(ReadOptions {
            sep: separator(function, opts)?,
            header: flag(function, opts, "header", true)?,
        })
    }
}

/// `opts.sep`: one byte (a one-character ASCII string), default `,`; not the quote or a
/// line break, which would make the text unreadable.
fn separator(function: BuiltinId, opts: &Table) -> mlua::Result<u8> {
    match opts.get::<Value>("sep")? {
        Value::Nil => Ok(b','),
        Value::String(sep) if matches!(*sep.as_bytes(), [b'"' | b'\n' | b'\r']) => Err(error(
            function,
            format!(
                "sep cannot be a quote or a line break, got {}",
                quoted(&sep.as_bytes())
            ),
        )),
        Value::String(sep) if sep.as_bytes().len() == 1 => Ok(sep.as_bytes()[0]),
        other => Err(error(
            function,
            format!(
                "sep must be one character, like \",\" or \"\\t\", got {}",
                match &other {
                    Value::String(s) => quoted(&s.as_bytes()),
                    other => a_type(other),
                }
            ),
        )),
    }
}

fn flag(function: BuiltinId, opts: &Table, name: &str, default: bool) -> mlua::Result<bool> {
    match opts.get::<Value>(name)? {
        Value::Nil => Ok(default),
        Value::Boolean(b) => Ok(b),
        other => Err(error(
            function,
            format!("{name} must be true or false, got {}", a_type(&other)),
        )),
    }
}
