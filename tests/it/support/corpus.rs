//! A generated registry of 1,020 functions with paraphrased, labelled queries, shared by
//! `tests/it/search.rs` and `benches/search.rs`. Names are snake_case or camelCase; each
//! description uses different words from the name (a synonym of the verb), and each
//! query paraphrases the function the way a model would ask for it: plainly, as a
//! question with filler words, reordered, or inflected with a word left out.

#![allow(dead_code)]

/// (name verb, description verb, query paraphrase, the paraphrase inflected)
const VERBS: &[(&str, &str, &str, &str)] = &[
    ("parse", "Interprets", "interpret", "interpreting"),
    ("format", "Pretty prints", "pretty print", "pretty printing"),
    ("validate", "Verifies", "verify", "verifying"),
    ("count", "Tallies", "tally", "tallying"),
    ("sort", "Orders", "order", "ordering"),
    ("filter", "Selects", "select", "selecting"),
    ("merge", "Combines", "combine", "combining"),
    ("split", "Breaks apart", "break apart", "breaking apart"),
    ("encode", "Serializes", "serialize", "serializing"),
    ("decode", "Deserializes", "deserialize", "deserializing"),
    ("compress", "Shrinks", "shrink", "shrinking"),
    ("hash", "Digests", "digest", "digesting"),
    ("search", "Looks up", "look up", "looking up"),
    ("summarize", "Condenses", "condense", "condensing"),
    (
        "extract",
        "Pulls values out of",
        "pull values out of",
        "pulling values out of",
    ),
    ("normalize", "Cleans up", "clean up", "cleaning up"),
    ("compare", "Diffs", "diff", "diffing"),
    ("render", "Draws", "draw", "drawing"),
    ("fetch", "Downloads", "download", "downloading"),
    ("store", "Saves", "save", "saving"),
];

/// (name object, description and query phrase)
const OBJECTS: &[(&str, &str)] = &[
    ("csv", "comma separated values"),
    ("json", "javascript object notation documents"),
    ("xml", "markup trees"),
    ("log", "server journal lines"),
    ("url", "web addresses"),
    ("email", "mail messages"),
    ("date", "calendar days"),
    ("money", "currency amounts"),
    ("table", "tabular rows"),
    ("image", "pictures"),
    ("html", "web pages"),
    ("config", "configuration settings"),
    ("path", "filesystem locations"),
    ("ip", "network addresses"),
    ("phone", "telephone numbers"),
    ("person", "people's names"),
    ("token", "authentication secrets"),
];

/// (name qualifier, description and query phrase)
const QUALIFIERS: &[(&str, &str)] = &[
    ("fast", "quickly"),
    ("strict", "rejecting bad input"),
    ("batch", "many at once"),
];

fn camel(parts: &[&str]) -> String {
    let mut out = parts[0].to_string();
    for part in &parts[1..] {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

/// One generated function.
pub struct Generated {
    pub name: String,
    pub description: String,
    pub source: String,
    /// The paraphrased query that should find it.
    pub query: String,
}

/// Every generated function (1,020), in generation order.
pub fn corpus() -> Vec<Generated> {
    let mut out = Vec::new();
    for (v, (verb, desc_verb, para, inflected)) in VERBS.iter().enumerate() {
        for (o, (object, phrase)) in OBJECTS.iter().enumerate() {
            for (q, (qualifier, qual_phrase)) in QUALIFIERS.iter().enumerate() {
                let parts = [*verb, *object, *qualifier];
                let name = if (v + o + q) % 3 == 0 {
                    camel(&parts)
                } else {
                    parts.join("_")
                };
                let description = format!("{desc_verb} {phrase} {qual_phrase}.");
                let source = format!(
                    "--- {description}\n---@param input string The input\n---@return string result The result\nfunction {name}(input) return input end\n"
                );
                // Phrased four ways, as models ask: plain, as a question, reordered, and
                // inflected with the object's last word dropped.
                let query = match (v + o + q) % 4 {
                    0 => format!("{para} {phrase} {qual_phrase}"),
                    1 => format!("How do I {para} {phrase} {qual_phrase}?"),
                    2 => format!("{phrase} {qual_phrase}: {para}"),
                    _ => {
                        let partial = phrase.rsplit_once(' ').map_or(*phrase, |(head, _)| head);
                        format!("{inflected} the {partial} {qual_phrase}")
                    }
                };
                out.push(Generated {
                    name,
                    description,
                    source,
                    query,
                });
            }
        }
    }
    out
}

/// The labelled queries: (query, expected function), every 7th function paraphrased.
pub fn labelled(corpus: &[Generated]) -> Vec<(String, String)> {
    corpus
        .iter()
        .step_by(7)
        .map(|g| (g.query.clone(), g.name.clone()))
        .collect()
}
