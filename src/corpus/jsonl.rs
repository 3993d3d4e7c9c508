//! JSONL corpora: a `.jsonl` file whose every line is an object with a text field is one
//! document per line (the shape BrowseComp-Plus's corpus ships in). Any other JSONL stays
//! text, so that `json.lines(context)` keeps working on it.

use std::path::Path;

use serde_json::{Map, Value};

use super::Document;

/// The fields a record's text may be in, in the order they are tried.
const TEXT_FIELDS: [&str; 3] = ["text", "contents", "content"];
/// The fields a record's name may be in, in the order they are tried.
const NAME_FIELDS: [&str; 4] = ["docid", "id", "title", "name"];

/// The documents of `bytes`, the file at `path` named `file`, when it is a JSONL corpus:
/// a `.jsonl` file (see [`records`]).
pub(super) fn corpus_of(path: &Path, file: &str, bytes: &[u8]) -> Option<Vec<Document>> {
    let jsonl = path
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("jsonl"));
    jsonl.then(|| records(file, bytes)).flatten()
}

/// The documents of `bytes`, one per line, each line parsed once — or `None` unless
/// there is at least one line and every non-blank line is an object with a string text
/// field. A record without a name is named `file:LINE`.
pub(super) fn records(file: &str, bytes: &[u8]) -> Option<Vec<Document>> {
    let documents: Option<Vec<Document>> = records_of(bytes)
        .enumerate()
        .map(|(i, record)| {
            let mut record = record?;
            let (field, text) = text_of(&record)?;
            let text = text.to_string();
            record.remove(field);
            let name = NAME_FIELDS
                .iter()
                .find_map(|field| match record.get(*field) {
                    Some(Value::String(name)) => Some(name.clone()),
                    Some(Value::Number(number)) => Some(number.to_string()),
                    _ => None,
                })
                .unwrap_or_else(|| format!("{file}:{}", i + 1));
            Some(Document {
                meta: (!record.is_empty()).then_some(record),
                ..Document::text(name, text)
            })
        })
        .collect();
    documents.filter(|documents| !documents.is_empty())
}

/// Each non-blank line parsed as an object (`None` for a line that is not one).
fn records_of(bytes: &[u8]) -> impl Iterator<Item = Option<Map<String, Value>>> + '_ {
    bytes
        .split(|&b| b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .map(|line| match serde_json::from_slice(line) {
            Ok(Value::Object(record)) => Some(record),
            _ => None,
        })
}

/// The record's text field and its text.
fn text_of(record: &Map<String, Value>) -> Option<(&'static str, &str)> {
    TEXT_FIELDS
        .iter()
        .find_map(|field| record.get(*field)?.as_str().map(|text| (*field, text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_spelling_of_the_text_and_name_fields_is_read() {
        let corpus = b"{\"docid\": \"d1\", \"text\": \"one\", \"url\": \"u\"}\n\
            {\"id\": 7, \"contents\": \"two\"}\n\n\
            {\"title\": \"T\", \"content\": \"three\"}\n\
            {\"name\": \"N\", \"text\": \"five\"}\n\
            {\"content\": \"four\"}\n";
        let documents = corpus_of(Path::new("c.jsonl"), "c.jsonl", corpus).unwrap();
        let names: Vec<&str> = documents.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["d1", "7", "T", "N", "c.jsonl:5"]);
        assert_eq!(documents[1].text, b"two");
        let meta = documents[0].meta.as_ref().unwrap();
        assert_eq!(meta["url"], "u");
        assert!(
            !meta.contains_key("text"),
            "the text is not repeated in meta"
        );
    }

    #[test]
    fn other_jsonl_stays_text() {
        let is_corpus =
            |path: &str, bytes: &[u8]| corpus_of(Path::new(path), path, bytes).is_some();
        assert!(!is_corpus("c.jsonl", b"{\"a\": 1}\n{\"text\": \"x\"}\n"));
        assert!(!is_corpus("c.jsonl", b"[1, 2]\n"));
        assert!(!is_corpus("c.jsonl", b""));
        assert!(!is_corpus("c.json", b"{\"text\": \"x\"}\n"));
    }
}
