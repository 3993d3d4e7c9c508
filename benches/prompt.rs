//! The size of what the model reads before its first turn: the whole system prompt of
//! the top-level agent for the baked registry (rules, built-ins, registry listing), and
//! the registry's listing alone against `--prompt-mode auto`'s threshold, in exact
//! `o200k_base` tokens. A count, not a timing: run `cargo bench --bench prompt`.

use std::sync::Arc;

use rlm_registry::Registry;
use rlm_registry::llm::{Completion, Llm, LlmError, Request};
use rlm_registry::rlm::{AUTO_COMPACT_ABOVE_TOKENS, PromptMode, Rlm};
use rlm_registry::tokens;

/// No model is called: only the prompt is built.
struct Unused;

impl Llm for Unused {
    fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
        Ok(Completion::new(""))
    }
}

fn main() {
    let registry = Registry::baked().clone();
    let functions = registry.functions().len();
    let listing = tokens::count(registry.system_prompt());
    let rlm = |mode| Rlm::new(Arc::new(Unused), registry.clone(), 10).prompt_mode(mode);
    let full = tokens::count(&rlm(PromptMode::Full).system_prompt(None));
    let compact = tokens::count(&rlm(PromptMode::Compact).system_prompt(None));
    println!("baked registry: {functions} functions");
    println!("| prompt | tokens |");
    println!("|---|---|");
    println!(
        "| registry listing (full) | {listing} (auto threshold {AUTO_COMPACT_ABOVE_TOKENS}) |"
    );
    println!("| whole system prompt, full listing | {full} |");
    println!("| whole system prompt, compact listing | {compact} |");
    let mode = if PromptMode::auto().is_compact_for(&registry) {
        "compact"
    } else {
        "full"
    };
    println!("--prompt-mode auto lists the baked registry {mode}");
}
