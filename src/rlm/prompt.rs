//! The system prompt, composed from pieces that each have one source: the REPL rules
//! (here), the context's description ([`Context`]), the built-ins
//! ([`builtins::DOCS`](crate::environment::builtins::DOCS)) and the registry's functions
//! ([`Registry::system_prompt`], or [`Registry::compact_prompt`] per [`PromptMode`]).

use std::borrow::Cow;
use std::time::Duration;

use crate::Registry;
use crate::catalog::Catalog;

use super::{Context, thousands};

/// The threshold of [`PromptMode::auto`]: a registry whose full listing
/// ([`Registry::system_prompt`]) has more `o200k_base` tokens than this is listed compactly.
///
/// The listing is resent with every turn of every agent, while the rest of the system
/// prompt (rules, context, built-ins) is about 1,500 tokens: beyond 8,000 the listing is
/// more than five times everything else the model is told, which is where looking
/// functions up on demand with `fn_search` and `help` starts to pay. The baked registry
/// (about 1,500 tokens for 16 functions) stays well below; at about 90 tokens a
/// function, the switch comes near 90 functions.
pub const AUTO_COMPACT_ABOVE_TOKENS: usize = 8_000;

/// How the system prompt presents the registry's functions. The built-ins (`fn_search`,
/// `help`, `llm_query`, …) are documented in full in every mode.
///
/// Set with [`Rlm::prompt_mode`](super::Rlm::prompt_mode); every agent of a run, the
/// `rlm_query` children included, gets the same listing.
///
/// ```
/// use rlm_registry::Registry;
/// use rlm_registry::rlm::PromptMode;
///
/// let registry = Registry::from_map([(
///     "shout",
///     "--- Upper-cases a text.\n---@param s string The text\n---@return string\nfunction shout(s) return s:upper() end",
/// )])?;
/// assert_eq!(PromptMode::default(), PromptMode::Full);
/// assert!(PromptMode::Full.listing(&registry).contains("---@param s string The text"));
/// let compact = PromptMode::Compact.listing(&registry);
/// assert!(compact.contains("- `shout(s)`: Upper-cases a text."));
/// assert!(compact.contains("fn_search") && !compact.contains("---@param"));
/// // One function is far below the automatic threshold; a tiny threshold switches.
/// assert!(!PromptMode::auto().is_compact_for(&registry));
/// assert!(PromptMode::Auto { max_full_tokens: 10 }.is_compact_for(&registry));
/// # Ok::<(), rlm_registry::LoadError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PromptMode {
    /// Every function with its full documentation ([`Registry::system_prompt`]): the
    /// model needs no lookup, but the prompt grows with the registry.
    #[default]
    Full,
    /// One line per function, signature and summary, and a pointer to `fn_search` and
    /// `help` ([`Registry::compact_prompt`]): for registries too large to send in full.
    Compact,
    /// [`Full`](PromptMode::Full) while the full listing has at most `max_full_tokens`
    /// tokens (`o200k_base`), [`Compact`](PromptMode::Compact) beyond.
    Auto {
        /// The largest full listing, in tokens, still sent in full.
        max_full_tokens: usize,
    },
}

impl PromptMode {
    /// [`PromptMode::Auto`] with [`AUTO_COMPACT_ABOVE_TOKENS`].
    pub const fn auto() -> PromptMode {
        PromptMode::Auto {
            max_full_tokens: AUTO_COMPACT_ABOVE_TOKENS,
        }
    }

    /// Whether this mode lists `registry` compactly. For [`PromptMode::Auto`] this counts
    /// the tokens of the full listing (linear in its size).
    ///
    /// ```
    /// use rlm_registry::{Registry, rlm::PromptMode};
    /// assert!(PromptMode::Compact.is_compact_for(Registry::baked()));
    /// assert!(!PromptMode::Full.is_compact_for(Registry::baked()));
    /// ```
    pub fn is_compact_for(self, registry: &Registry) -> bool {
        match self {
            PromptMode::Full => false,
            PromptMode::Compact => true,
            PromptMode::Auto { max_full_tokens } => {
                let full = registry.system_prompt();
                // A token is at least one byte, so a listing of no more bytes than the
                // threshold is below it without counting.
                full.len() > max_full_tokens && crate::tokens::count(full) > max_full_tokens
            }
        }
    }

    /// [`Full`](PromptMode::Full) or [`Compact`](PromptMode::Compact), as this mode
    /// decides for `registry`.
    pub(crate) fn resolve(self, registry: &Registry) -> PromptMode {
        if self.is_compact_for(registry) {
            PromptMode::Compact
        } else {
            PromptMode::Full
        }
    }

    /// The registry's section of the system prompt in this mode (what `rlm prompt`
    /// prints); empty for an empty registry, as [`Registry::system_prompt`] is.
    ///
    /// ```
    /// use rlm_registry::{Registry, rlm::PromptMode};
    /// let registry = Registry::baked();
    /// assert_eq!(PromptMode::Full.listing(registry), registry.system_prompt());
    /// assert_eq!(PromptMode::Compact.listing(&Registry::empty()), "");
    /// ```
    pub fn listing(self, registry: &Registry) -> Cow<'_, str> {
        if self.is_compact_for(registry) {
            Cow::Owned(registry.compact_prompt())
        } else {
            Cow::Borrowed(registry.system_prompt())
        }
    }
}

/// The numbers the rules quote, and how the registry is listed.
pub(crate) struct Settings {
    pub output_bytes: usize,
    pub max_iterations: u32,
    pub time_limit: Duration,
    pub depth: usize,
    pub max_depth: usize,
    pub prompt_mode: PromptMode,
}

/// Who the agent is and how the REPL works.
fn rules(settings: &Settings) -> String {
    format!(
        r#"You are a Recursive Language Model (RLM) agent. You answer a question about a context that may be far larger than what you can read at once. You do not see the context: it is stored in the variable `context` of a Lua 5.4 REPL, and you study it by writing code.

## How the REPL works

- Write Lua in fenced blocks that open with ```lua and close with ```. Every ```lua block of your reply runs, in order; if one fails, the blocks after it do not run. Then the next message brings you what they printed.
- State persists: globals you assign (without `local`) and functions you define stay available in later blocks and turns. `local` variables last one block.
- Only what you `print` comes back, nothing else (not the value of the last expression). The output of one turn is cut after {output} bytes, so print counts, short slices and summaries, never the whole context.
- An error comes back with its line number, and a limit hit (time: {time:.0} s per block; memory; output) with its cause; your variables survive both. Fix the code and go on.
- The sandbox has Lua's `string`, `table`, `math`, `utf8` and `os.time`/`os.clock`; no files, no network, no `require`.
- You have at most {turns} turns (replies), so make each one count.

## How to work

1. Look before you answer: the size and shape of `context`, its first lines, matches for the key words of the question.
2. For a big context, split it into pieces (by lines, separators or tokens) and hand them to a sub-model with `llm_query`/`llm_query_batched`; keep the answers in variables and combine them.
3. Check what you found against the context before you commit to it.

## How to answer

When you know the answer, call `FINAL(answer)` in a ```lua block, or build the answer in a variable and call `FINAL_VAR("name")`. That ends the run: only the answer is kept. Call it only after you have seen the output that supports the answer, never in the same reply as the code that finds it."#,
        output = thousands(settings.output_bytes as u64),
        time = settings.time_limit.as_secs_f64(),
        turns = settings.max_iterations,
    )
}

/// The agent's place in the tree.
fn role(settings: &Settings) -> String {
    let mut text = String::new();
    if settings.depth > 0 {
        text.push_str(&format!(
            "You are a sub-agent at depth {} of {}: another agent's code called `rlm_query` with the sub-task below. Your FINAL answer is returned to that code as a string, so answer exactly what it asks, in the form it asks for. `ask_user` and `notify_user` are not available to you.",
            settings.depth, settings.max_depth
        ));
    }
    if settings.depth >= settings.max_depth {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str("You are at the depth limit: you cannot start child agents (`rlm_query` is not available here); use `llm_query` for sub-model calls.");
    } else {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str("`rlm_query` starts a child agent with its own REPL, for sub-tasks that need code of their own; it costs much more than `llm_query`.");
    }
    text
}

/// The whole system prompt.
pub(crate) fn system_prompt(
    catalog: &Catalog,
    context: Option<&Context>,
    settings: &Settings,
) -> String {
    let context = match context {
        Some(context) => context.describe(),
        None => "There is no context for this question: `context` is nil.".to_string(),
    };
    let mut pieces = vec![
        rules(settings),
        format!("## The context\n\n{context}"),
        format!("## Your role\n\n{}", role(settings)),
        catalog.host_prompt(),
    ];
    let listing = settings.prompt_mode.listing(catalog.registry());
    if !listing.is_empty() {
        pieces.push(listing.trim_end().to_string());
    }
    let mut prompt = pieces.join("\n\n");
    prompt.push('\n');
    prompt
}

/// The first user message.
pub(crate) fn question(question: &str, has_context: bool) -> String {
    if has_context {
        format!(
            "{question}\n\n(The context is in the `context` variable, described in the system prompt; you have not seen any of it yet. Start by looking at it with code.)"
        )
    } else {
        format!(
            "{question}\n\n(There is no context: use the REPL as it helps, and answer with FINAL.)"
        )
    }
}

/// The reminder after a reply with neither code nor a final answer.
pub(crate) const REMINDER: &str = "Your reply had no ```lua code block and no final answer. Write Lua in a ```lua block to study `context`, or give the answer with FINAL(answer) in a ```lua block. This is the only reminder: another reply without either ends the run.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::builtins::DOCS;
    use crate::providers::{AgentScope, Providers};

    fn catalog(registry: &Registry, depth: usize) -> Catalog {
        let scope = AgentScope {
            depth,
            can_spawn: depth < 1,
        };
        Catalog::new(registry.clone(), Providers::builtin_shared(), scope)
    }

    fn settings(depth: usize) -> Settings {
        Settings {
            output_bytes: 10_000,
            max_iterations: 10,
            time_limit: Duration::from_secs(300),
            depth,
            max_depth: 1,
            prompt_mode: PromptMode::Full,
        }
    }

    #[test]
    fn the_prompt_has_every_piece() {
        let registry = Registry::baked();
        let prompt = system_prompt(
            &catalog(registry, 0),
            Some(&Context::from("a\nb\n")),
            &settings(0),
        );
        assert!(prompt.contains("```lua"));
        assert!(prompt.contains("cut after 10,000 bytes"));
        assert!(prompt.contains("`context` is a string of 4 bytes: 2 lines"));
        for builtin in DOCS {
            assert!(prompt.contains(builtin.doc), "{}", builtin.name);
        }
        assert!(prompt.contains(registry.system_prompt().trim_end()));
        assert!(prompt.contains("starts a child agent"));
        let child = system_prompt(&catalog(registry, 1), None, &settings(1));
        assert!(child.contains("sub-agent at depth 1 of 1"));
        assert!(child.contains("You are at the depth limit"));
        for out_of_scope in ["ask_user", "notify_user", "rlm_query", "rlm_query_batched"] {
            let declaration = format!("function {out_of_scope}(");
            assert!(!child.contains(&declaration), "{out_of_scope}");
        }
        assert!(child.contains("function llm_query("));
        assert!(child.contains("`context` is nil"));
    }

    #[test]
    fn an_empty_registry_adds_no_section() {
        for prompt_mode in [PromptMode::Full, PromptMode::Compact] {
            let settings = Settings {
                prompt_mode,
                ..settings(0)
            };
            let prompt = system_prompt(&catalog(&Registry::empty(), 0), None, &settings);
            assert!(!prompt.contains("## Registry functions"), "{prompt_mode:?}");
        }
    }

    #[test]
    fn the_compact_prompt_keeps_the_builtins_and_lists_the_registry_briefly() {
        let registry = Registry::from_map([(
            "shout",
            "--- Upper-cases a text.\n---@param s string The text to shout\n---@return string\nfunction shout(s) return s:upper() end",
        )])
        .unwrap();
        let compact = Settings {
            prompt_mode: PromptMode::Compact,
            ..settings(0)
        };
        let prompt = system_prompt(&catalog(&registry, 0), None, &compact);
        for builtin in DOCS {
            assert!(prompt.contains(builtin.doc), "{}", builtin.name);
        }
        assert!(prompt.contains(registry.compact_prompt().trim_end()));
        assert!(!prompt.contains("The text to shout"));
        let full = system_prompt(&catalog(&registry, 0), None, &settings(0));
        assert!(full.contains("---@param s string The text to shout"));
    }

    #[test]
    fn auto_switches_on_the_token_count_of_the_full_listing() {
        let registry = Registry::baked();
        let tokens = crate::tokens::count(registry.system_prompt());
        let at = PromptMode::Auto {
            max_full_tokens: tokens,
        };
        let below = PromptMode::Auto {
            max_full_tokens: tokens.saturating_sub(1),
        };
        assert!(!at.is_compact_for(registry));
        assert_eq!(below.is_compact_for(registry), tokens > 0);
        assert_eq!(at.resolve(registry), PromptMode::Full);
        assert!(!PromptMode::auto().is_compact_for(registry));
    }
}
