//! The records written while a turn is still going (`reply`, `call`), the mark a resumed
//! run leaves (`resume`), and the registry's identity on the root's `start` line: what
//! lets [`Resume`](super::super::Resume) go on from a run killed mid-turn without asking
//! the model again for what it already answered.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Registry;
use crate::llm::{Completion, Cost};

use super::SubCall;

/// The `reply` line: a turn's reply, written when it arrives, before its code runs. The
/// turn's `turn` line repeats it when the turn ends; a run killed in between keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyRecord {
    /// The agent's id, as on its `start` line.
    pub agent: String,
    /// The turn it answers, 1-based.
    pub turn: u32,
    /// The model's reply as the server sent it, inline thinking included.
    #[serde(default)]
    pub reply: String,
    /// The thinking the server sent apart from the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Prompt tokens of the call.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens of the call.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Of the completion tokens, those spent thinking.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Why the model stopped writing, as the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The reply came from the call cache. Written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// What the call cost in US dollars, where known; left out when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// When the line was written, in milliseconds since the run began.
    #[serde(default)]
    pub at_ms: Option<u64>,
}

impl ReplyRecord {
    /// The record of `agent`'s reply `completion` to turn `turn`.
    ///
    /// ```
    /// use rlm_registry::llm::Completion;
    /// use rlm_registry::rlm::trajectory::ReplyRecord;
    ///
    /// let record = ReplyRecord::of("0", 2, &Completion::new("print(1)").with_tokens(9, 3));
    /// assert_eq!((record.turn, record.reply.as_str(), record.prompt_tokens), (2, "print(1)", 9));
    /// assert_eq!(record.completion().content, "print(1)");
    /// ```
    pub fn of(agent: &str, turn: u32, completion: &Completion) -> ReplyRecord {
        ReplyRecord {
            agent: agent.to_string(),
            turn,
            reply: completion.content.clone(),
            reasoning: completion.reasoning.clone(),
            prompt_tokens: completion.prompt_tokens,
            completion_tokens: completion.completion_tokens,
            reasoning_tokens: completion.reasoning_tokens,
            finish_reason: completion.finish_reason.clone(),
            cached: completion.cached,
            cost: completion.cost,
            at_ms: None,
        }
    }

    /// The reply as the model gave it, to be given again.
    pub fn completion(&self) -> Completion {
        let mut completion = Completion::new(self.reply.clone())
            .with_tokens(self.prompt_tokens, self.completion_tokens);
        completion.reasoning.clone_from(&self.reasoning);
        completion.reasoning_tokens = self.reasoning_tokens;
        completion.finish_reason.clone_from(&self.finish_reason);
        completion.cached = self.cached;
        completion.cost = self.cost;
        completion
    }
}

/// The `call` line: one model call of a block's code, written when its answer arrives
/// (the calls of `llm_query_batched` and `parallel_map` may arrive in any order). The
/// block's entry in the `turn` line lists the same calls, in the order they were made.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The agent whose code made the call.
    pub agent: String,
    /// The turn, 1-based.
    pub turn: u32,
    /// The block, 1-based.
    pub block: usize,
    /// The call, as a block's `sub_calls` list it.
    #[serde(flatten)]
    pub call: SubCall,
    /// When the line was written, in milliseconds since the run began.
    #[serde(default)]
    pub at_ms: Option<u64>,
}

/// The `resume` line: the lines after it were written by a resumed run, which first ran
/// again what the lines before it record (no line of that is written twice).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeRecord {
    /// The version of this crate that resumed.
    #[serde(default)]
    pub version: Option<String>,
    /// Agents on file, run again from the record.
    #[serde(default)]
    pub agents: usize,
    /// Their turns on file whose reply is played back (a turn cut short included).
    #[serde(default)]
    pub turns: usize,
    /// Their code's model calls on file whose answer is played back.
    #[serde(default)]
    pub calls: usize,
    /// The settings given again that differ from the record's (`max_iterations`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// When the resumed run began, in milliseconds since the Unix epoch (UTC).
    #[serde(default)]
    pub resumed_unix_ms: Option<u64>,
    /// When the line was written, in milliseconds since the run (first) began.
    #[serde(default)]
    pub at_ms: Option<u64>,
}

/// What identifies a registry: a SHA-256 over every function's name, documentation and
/// source, and each function's own digest, so that a resume can say which functions
/// differ.
///
/// ```
/// use rlm_registry::Registry;
/// use rlm_registry::rlm::trajectory::RegistryDigest;
///
/// let baked = RegistryDigest::of(Registry::baked());
/// assert_eq!(baked, RegistryDigest::of(Registry::baked()));
/// assert_eq!(baked.functions.len(), Registry::baked().len());
/// assert!(baked.differences(&baked).is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryDigest {
    /// SHA-256 of the functions' digests in name order, in lowercase hex.
    pub sha256: String,
    /// Each function's name and the first 16 hex digits of the SHA-256 of its
    /// documentation and source.
    pub functions: BTreeMap<String, String>,
}

impl RegistryDigest {
    /// The digest of `registry`.
    pub fn of(registry: &Registry) -> RegistryDigest {
        let functions: BTreeMap<String, String> = registry
            .iter_functions()
            .map(|(name, function)| {
                let digest = hex(&sha256_of(&[function.doc(), function.source()]));
                (name.to_string(), digest[..16].to_string())
            })
            .collect();
        let mut hasher = Sha256::new();
        for (name, digest) in &functions {
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update(digest.as_bytes());
        }
        RegistryDigest {
            sha256: hex(&hasher.finalize()),
            functions,
        }
    }

    /// What differs from `other`, by function: `+name` only here, `-name` only there,
    /// `~name` in both but changed. Empty when the two are the same.
    pub fn differences(&self, other: &RegistryDigest) -> Vec<String> {
        let mut differences = Vec::new();
        for (name, digest) in &self.functions {
            match other.functions.get(name) {
                None => differences.push(format!("+{name}")),
                Some(theirs) if theirs != digest => differences.push(format!("~{name}")),
                Some(_) => {}
            }
        }
        differences.extend(
            other
                .functions
                .keys()
                .filter(|name| !self.functions.contains_key(*name))
                .map(|name| format!("-{name}")),
        );
        differences
    }
}

fn sha256_of(parts: &[&str]) -> Vec<u8> {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
