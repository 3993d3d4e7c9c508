//! [`Context`]: the text under study, as the `context` global holds it.

use crate::environment::{Environment, ExecError};

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
