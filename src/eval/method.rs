//! [`EvalMethod`]: how a task is answered — the RLM loop with the registry, the loop
//! without it, or the context in the prompt.

use std::fmt;

/// A way of answering a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EvalMethod {
    /// The RLM loop as `rlm ask` runs it, registry functions included.
    Rlm,
    /// The context in the prompt, cut to the context window.
    Direct,
    /// The RLM loop with no registry functions (built-ins only).
    RlmBare,
}

impl EvalMethod {
    /// Every method.
    pub const ALL: [EvalMethod; 3] = [EvalMethod::Rlm, EvalMethod::Direct, EvalMethod::RlmBare];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            EvalMethod::Rlm => "rlm",
            EvalMethod::Direct => "direct",
            EvalMethod::RlmBare => "rlm-bare",
        }
    }
}

impl fmt::Display for EvalMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for EvalMethod {
    type Err = String;

    fn from_str(name: &str) -> Result<EvalMethod, String> {
        EvalMethod::ALL
            .into_iter()
            .find(|m| m.name() == name.trim())
            .ok_or_else(|| {
                let names = EvalMethod::ALL.map(EvalMethod::name);
                format!(
                    "unknown method `{name}`: expected {}",
                    super::one_of(&names)
                )
            })
    }
}
