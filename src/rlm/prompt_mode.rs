//! [`PromptMode`]: how the system prompt lists the registry's functions, in full or
//! compactly, and when [`PromptMode::auto`] switches.

use std::borrow::Cow;

use crate::Registry;

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

    /// The name a trace records: `full`, `compact`, or `auto` (a run resolves `auto`
    /// before it starts, so its trace records what `auto` chose).
    pub(crate) fn recorded_name(self) -> &'static str {
        match self {
            PromptMode::Full => "full",
            PromptMode::Compact => "compact",
            PromptMode::Auto { .. } => "auto",
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

#[cfg(test)]
mod tests {
    use super::*;

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
