//! `doc_search(query [, k [, corpus]])`: the documents of a corpus ranked by BM25
//! ([`Bm25Index`]), best first, as `{doc = i, name = …, score = …}` entries.
//!
//! The index is built on the first call, in Rust, from the documents' Lua strings
//! (borrowed, never copied), under the execution's limits, and kept for the calls that
//! follow. It is built again when the corpus is another: another table, another number
//! of documents, or another string in a document's `text` (each call compares every
//! text's identity and length, which costs a table read per document, not a pass over
//! the text). A corpus is `context` unless a table is given: a list of document tables
//! (their `text` and `name`; one without a string `text`, an image, is indexed empty) or
//! of strings. A `context` that is one text is no corpus: the error says to use `grep`.

use std::cell::RefCell;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::rc::Rc;

use mlua::{Function, Lua, LuaString, Table, Value};

use super::corpus::{CorpusDocument, documents};
use super::limits::Guard;
use super::meter::WorkMeter;
use crate::conventions::CONTEXT_GLOBAL;
use crate::conventions::builtins::BuiltinId;
use crate::search::bm25::Bm25Index;

/// How many documents `doc_search` returns when the call does not say.
const DEFAULT_K: i64 = 10;

/// The index kept between calls, and what it was built from.
struct Kept {
    fingerprint: u64,
    index: Bm25Index,
}

/// Makes `doc_search` for one environment.
pub(crate) fn function(lua: &Lua, guard: &Rc<Guard>) -> mlua::Result<Function> {
    let guard = Rc::clone(guard);
    let kept: RefCell<Option<Kept>> = RefCell::new(None);
    lua.create_function(move |lua, (query, k, corpus): (Value, Value, Value)| {
        let query = query_arg(&query)?;
        let k = k_arg(&k)?;
        let corpus = corpus_arg(lua, corpus)?;
        let documents = documents(BuiltinId::DocSearch.name(), &corpus)?;
        let fingerprint = fingerprint(&corpus, &documents);
        let mut kept = kept.borrow_mut();
        if kept.as_ref().is_none_or(|k| k.fingerprint != fingerprint) {
            // The old index goes first: two would be held at once otherwise.
            *kept = None;
            let mut meter = WorkMeter::new(lua, &guard);
            let index = build(&documents, &mut meter)?;
            *kept = Some(Kept { fingerprint, index });
        }
        let Some(kept) = kept.as_ref() else {
            return lua.create_table();
        };
        results(lua, &documents, &kept.index, &query.to_string_lossy(), k)
    })
}

fn error(message: String) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{}: {message}", BuiltinId::DocSearch.name()))
}

fn query_arg(query: &Value) -> mlua::Result<LuaString> {
    match query {
        Value::String(query) => Ok(query.clone()),
        other => Err(error(format!(
            "query must be a string (the words to look for), got {}",
            other.type_name()
        ))),
    }
}

fn k_arg(k: &Value) -> mlua::Result<usize> {
    let wrong = |shown: String| error(format!("k must be a positive integer, got {shown}"));
    match k {
        Value::Nil => Ok(DEFAULT_K as usize),
        Value::Integer(n) if *n >= 1 => Ok(usize::try_from(*n).unwrap_or(usize::MAX)),
        Value::Number(n) if n.fract() == 0.0 && *n >= 1.0 => Ok(*n as usize),
        Value::Integer(n) => Err(wrong(n.to_string())),
        Value::Number(n) => Err(wrong(n.to_string())),
        other => Err(wrong(format!("a {}", other.type_name()))),
    }
}

/// The corpus given, or `context`.
fn corpus_arg(lua: &Lua, corpus: Value) -> mlua::Result<Table> {
    let (value, what) = match corpus {
        Value::Nil => (lua.globals().raw_get(CONTEXT_GLOBAL)?, "context"),
        given => (given, "the corpus given"),
    };
    match value {
        Value::Table(table) => Ok(table),
        Value::String(_) => Err(error(format!(
            "{what} is one text, not a corpus (a list of documents): search it with grep(context, \"word\")"
        ))),
        Value::Nil => Err(error(format!(
            "{what} is nil: there are no documents to search"
        ))),
        other => Err(error(format!(
            "{what} is a {}, not a corpus (a list of documents)",
            other.type_name()
        ))),
    }
}

/// What identifies a corpus for the kept index: the table, and each text's string and
/// length (Lua strings are immutable, so the same string has the same bytes).
fn fingerprint(corpus: &Table, documents: &[CorpusDocument]) -> u64 {
    let mut hasher = DefaultHasher::new();
    corpus.to_pointer().hash(&mut hasher);
    documents.len().hash(&mut hasher);
    for document in documents {
        match &document.text {
            Some(text) => (text.to_pointer(), text.as_bytes().len()).hash(&mut hasher),
            None => 0usize.hash(&mut hasher),
        }
    }
    hasher.finish()
}

/// The index of the texts, checking the limits as the text goes by.
fn build(documents: &[CorpusDocument], meter: &mut WorkMeter) -> mlua::Result<Bm25Index> {
    let mut builder = Bm25Index::builder();
    for document in documents {
        match &document.text {
            Some(text) => {
                let bytes = text.as_bytes();
                builder.add(&bytes);
                meter.hold(builder.heap_bytes());
                meter.spend(bytes.len().max(1))?;
            }
            None => builder.add(b""),
        }
    }
    meter.check_holding(builder.heap_bytes())?;
    Ok(builder.build())
}

/// `{doc, name, score}` per hit, best first.
fn results(
    lua: &Lua,
    documents: &[CorpusDocument],
    index: &Bm25Index,
    query: &str,
    k: usize,
) -> mlua::Result<Table> {
    let hits = index.search(query, k);
    let list = lua.create_table_with_capacity(hits.len(), 0)?;
    for hit in hits {
        let entry = lua.create_table_with_capacity(0, 3)?;
        entry.raw_set("doc", hit.doc + 1)?;
        if let Some(document) = documents.get(hit.doc) {
            entry.raw_set("name", &document.name)?;
        }
        // Four decimals are what a reader compares; f32's last digits are noise.
        entry.raw_set("score", (f64::from(hit.score) * 1e4).round() / 1e4)?;
        list.raw_push(entry)?;
    }
    Ok(list)
}
