//! [`Context`]: the text under study, as the `context` global holds it.

use crate::environment::{Environment, ExecError};
use crate::tokens;

use super::thousands;

/// Contexts up to this size get an exact token count in the prompt; larger ones an
/// estimate (counting is linear, but a 100 MB context is not worth a second).
const EXACT_TOKENS_UP_TO: usize = 4 * 1024 * 1024;
/// Chunk sizes listed in the prompt, at most.
const LISTED_CHUNKS: usize = 20;

/// What the agent studies: one text, or a list of texts (chunks: documents, files,
/// pages). In Lua, `context` is a string or an array of strings. Any bytes are allowed
/// (Lua strings need not be UTF-8).
///
/// ```
/// use rlm_registry::rlm::Context;
///
/// let one = Context::from("a long report…");
/// let many = Context::from(vec!["first document", "second document"]);
/// assert_eq!(one.total_bytes(), "a long report…".len());
/// assert_eq!(many.chunk_sizes(), vec![14, 15]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Context {
    /// A single string.
    Text(Vec<u8>),
    /// An array of strings.
    Chunks(Vec<Vec<u8>>),
}

impl Context {
    /// Bytes in total.
    pub fn total_bytes(&self) -> usize {
        self.chunk_sizes().iter().sum()
    }

    /// The size in bytes of each chunk (one for a text).
    pub fn chunk_sizes(&self) -> Vec<usize> {
        match self {
            Context::Text(text) => vec![text.len()],
            Context::Chunks(chunks) => chunks.iter().map(Vec::len).collect(),
        }
    }

    /// Sets the global `context` of `env`.
    pub(crate) fn load_into(&self, env: &Environment) -> Result<(), ExecError> {
        match self {
            Context::Text(text) => env.set_context(text),
            Context::Chunks(chunks) => {
                // One string in, cut into the array in Lua: no other way in, and cheap.
                env.set_context(chunks.concat())?;
                let sizes: Vec<String> = chunks.iter().map(|c| c.len().to_string()).collect();
                let code = format!(
                    "local s, sizes, t, start = context, \"{}\", {{}}, 1
                     for size in sizes:gmatch('%d+') do
                       size = tonumber(size)
                       t[#t + 1] = s:sub(start, start + size - 1)
                       start = start + size
                     end
                     context = t",
                    sizes.join(" ")
                );
                env.execute(&code).map(|_| ())
            }
        }
    }

    /// The prompt's description: type, total size, chunk sizes.
    pub(crate) fn describe(&self) -> String {
        match self {
            Context::Text(text) => format!(
                "`context` is a string of {} bytes: {}, {}.",
                thousands(text.len() as u64),
                lines(text),
                token_estimate(text),
            ),
            Context::Chunks(chunks) => {
                let total: usize = chunks.iter().map(Vec::len).sum();
                let mut text = format!(
                    "`context` is an array (a Lua table) of {} strings, {} bytes in total. Chunk sizes in bytes: ",
                    thousands(chunks.len() as u64),
                    thousands(total as u64),
                );
                let listed: Vec<String> = chunks
                    .iter()
                    .take(LISTED_CHUNKS)
                    .enumerate()
                    .map(|(i, c)| format!("[{}] {}", i + 1, thousands(c.len() as u64)))
                    .collect();
                text.push_str(&listed.join(", "));
                if chunks.len() > LISTED_CHUNKS {
                    let sizes = chunks.iter().map(Vec::len);
                    text.push_str(&format!(
                        ", … ({} more; smallest {}, largest {})",
                        chunks.len() - LISTED_CHUNKS,
                        thousands(sizes.clone().min().unwrap_or(0) as u64),
                        thousands(sizes.max().unwrap_or(0) as u64),
                    ));
                }
                text.push('.');
                text
            }
        }
    }
}

fn lines(text: &[u8]) -> String {
    let newlines = text.iter().filter(|&&b| b == b'\n').count();
    let count = newlines + usize::from(!text.is_empty() && !text.ends_with(b"\n"));
    format!(
        "{} line{}",
        thousands(count as u64),
        if count == 1 { "" } else { "s" }
    )
}

fn token_estimate(text: &[u8]) -> String {
    if text.len() <= EXACT_TOKENS_UP_TO {
        let count = tokens::count(&String::from_utf8_lossy(text));
        format!("{} tokens (o200k_base)", thousands(count as u64))
    } else {
        format!("about {} tokens", thousands((text.len() / 4) as u64))
    }
}

impl From<Vec<u8>> for Context {
    fn from(text: Vec<u8>) -> Context {
        Context::Text(text)
    }
}

impl From<&[u8]> for Context {
    fn from(text: &[u8]) -> Context {
        Context::Text(text.to_vec())
    }
}

impl From<String> for Context {
    fn from(text: String) -> Context {
        Context::Text(text.into_bytes())
    }
}

impl From<&str> for Context {
    fn from(text: &str) -> Context {
        Context::Text(text.as_bytes().to_vec())
    }
}

impl From<Vec<String>> for Context {
    fn from(chunks: Vec<String>) -> Context {
        Context::Chunks(chunks.into_iter().map(String::into_bytes).collect())
    }
}

impl From<Vec<&str>> for Context {
    fn from(chunks: Vec<&str>) -> Context {
        Context::Chunks(chunks.into_iter().map(|c| c.as_bytes().to_vec()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use crate::environment::Limits;

    #[test]
    fn descriptions_give_type_size_and_chunks() {
        let text = Context::from("one\ntwo\n");
        assert_eq!(
            text.describe(),
            "`context` is a string of 8 bytes: 2 lines, 4 tokens (o200k_base)."
        );
        let chunks = Context::from(vec!["ab", "cde"]);
        assert_eq!(
            chunks.describe(),
            "`context` is an array (a Lua table) of 2 strings, 5 bytes in total. Chunk sizes in bytes: [1] 2, [2] 3."
        );
        let many = Context::Chunks((0..25).map(|i| vec![b'x'; i]).collect());
        assert!(
            many.describe()
                .ends_with("(5 more; smallest 0, largest 24).")
        );
    }

    #[test]
    fn chunks_become_a_lua_array() {
        let env = Environment::new(Registry::baked().clone(), Limits::default()).unwrap();
        Context::from(vec!["ab", "", "cdé"])
            .load_into(&env)
            .unwrap();
        let out = env
            .execute("print(#context, context[1], context[2] == '', context[3])")
            .unwrap();
        assert_eq!(out.output, "3\tab\ttrue\tcdé\n");
    }
}
