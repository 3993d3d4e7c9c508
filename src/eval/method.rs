//! [`Method`]: how a task is answered — the RLM loop with the registry, the loop
//! without it, or the context in the prompt.

use std::fmt;

/// A way of answering a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// The RLM loop as `rlm ask` runs it, registry functions included.
    Rlm,
    /// The context in the prompt, cut to the context window.
    Direct,
    /// The RLM loop with no registry functions (built-ins only).
    RlmBare,
}

impl Method {
    /// Every method.
    pub const ALL: [Method; 3] = [Method::Rlm, Method::Direct, Method::RlmBare];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Method::Rlm => "rlm",
            Method::Direct => "direct",
            Method::RlmBare => "rlm-bare",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Method {
    type Err = String;

    fn from_str(name: &str) -> Result<Method, String> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == name.trim())
            .ok_or_else(|| format!("unknown method `{name}`: expected rlm, direct or rlm-bare"))
    }
}
