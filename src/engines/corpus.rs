//! A corpus as the engines read it: a Lua list whose items are document tables (their
//! `text` and `name`) or strings, the way `lua/text/documents.lua`'s `doc_list` reads
//! one. The texts stay the Lua strings (borrowed when read, never copied).

use mlua::{LuaString, Table, Value};

/// One document of a corpus.
pub(crate) struct CorpusDocument {
    /// Its text; `None` for a document table without a string `text` (an image).
    pub text: Option<LuaString>,
    /// Its `name` field (`nil` for a string).
    pub name: Value,
}

/// The documents of `corpus`, in order; an item that is neither a table nor a string is
/// an error that `caller` starts.
pub(crate) fn documents(caller: &str, corpus: &Table) -> mlua::Result<Vec<CorpusDocument>> {
    let mut documents = Vec::new();
    for (i, item) in corpus.sequence_values::<Value>().enumerate() {
        documents.push(match item? {
            Value::String(text) => CorpusDocument {
                text: Some(text),
                name: Value::Nil,
            },
            Value::Table(document) => CorpusDocument {
                text: match document.raw_get::<Value>("text")? {
                    Value::String(text) => Some(text),
                    _ => None,
                },
                name: document.raw_get("name")?,
            },
            other => {
                return Err(mlua::Error::RuntimeError(format!(
                    "{caller}: document {} is a {}, not a document table or a string",
                    i + 1,
                    lua_type(&other)
                )));
            }
        });
    }
    Ok(documents)
}

/// The name Lua's `type` gives a value (`number` for an integer too).
fn lua_type(value: &Value) -> &'static str {
    match value {
        Value::Integer(_) | Value::Number(_) => "number",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        other => other.type_name(),
    }
}
