//! The size of what the model reads before its first turn: the whole system prompt of
//! the top-level agent (no context), part by part, in each prompt mode, with the baked
//! registry and without it, in exact `o200k_base` tokens. A count, not a timing: run
//! `cargo bench --bench prompt`; it prints the table of BENCHMARKS.md. `rlm prompt
//! --tokens [--prompt-mode full] [--no-baked]` prints one row of it, part by part.

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

/// The parts measured, in prompt order.
const PARTS: [&str; 5] = [
    "rules",
    "context",
    "role",
    "built-in functions",
    "registry functions",
];

fn main() {
    let baked = Registry::baked().clone();
    println!("| registry | mode | {} | whole |", PARTS.join(" | "));
    println!("|---|---|{}---:|", "---:|".repeat(PARTS.len()));
    for (label, registry) in [
        (format!("baked ({} functions)", baked.len()), baked.clone()),
        ("none (`--no-baked`)".to_string(), Registry::empty()),
    ] {
        for mode in [PromptMode::Compact, PromptMode::Full] {
            let rlm =
                Rlm::with_default_iterations(Arc::new(Unused), registry.clone()).prompt_mode(mode);
            let parts = rlm.prompt_parts(None);
            let sizes: Vec<String> = PARTS
                .iter()
                .map(|name| {
                    parts
                        .iter()
                        .find(|part| part.name == *name)
                        .map_or("–".to_string(), |part| {
                            tokens::count(&part.text).to_string()
                        })
                })
                .collect();
            let whole = tokens::count(&rlm.system_prompt(None));
            let mode = if mode == PromptMode::Compact {
                "compact (default)"
            } else {
                "full"
            };
            println!("| {label} | {mode} | {} | **{whole}** |", sizes.join(" | "));
        }
    }
    let listing = tokens::count(baked.system_prompt());
    let auto = if PromptMode::auto().is_compact_for(&baked) {
        "compact"
    } else {
        "full"
    };
    println!(
        "\nthe baked registry's full listing: {listing} tokens; --prompt-mode auto (threshold {AUTO_COMPACT_ABOVE_TOKENS}) lists it {auto}"
    );
}
