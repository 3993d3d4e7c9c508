//! [`PromptMode`]: how the system prompt lists the functions, compactly (the default) or
//! in full, and when [`PromptMode::auto`] switches.

use std::borrow::Cow;

use crate::Registry;

/// The threshold of [`PromptMode::auto`]: a registry whose full listing
/// ([`Registry::system_prompt`]) has more `o200k_base` tokens than this is listed compactly.
///
/// The listing is resent with every turn of every agent: beyond 8,000 tokens it is
/// several times everything else the model is told, which is where looking functions up
/// on demand with `fn_search` and `help` is worth its turns even for a model with a large
/// window. The baked registry (about 5,000 tokens for 47 functions) stays below; at about
/// 100 tokens a function, the switch comes near 80 functions.
pub const AUTO_COMPACT_ABOVE_TOKENS: usize = 8_000;

/// How the system prompt presents the functions, the built-ins' and the registry's.
///
/// Set with [`Rlm::prompt_mode`](super::Rlm::prompt_mode); every agent of a run, the
/// `rlm_query` children included, gets the same listing. The default,
/// [`Compact`](PromptMode::Compact), keeps the whole system prompt of the baked registry
/// under 3,000 tokens, so that a model with an 8k window has room to work.
///
/// ```
/// use rlm_registry::Registry;
/// use rlm_registry::rlm::PromptMode;
///
/// let registry = Registry::from_map([(
///     "shout",
///     "--- Upper-cases a text.\n---@param s string The text\n---@return string\nfunction shout(s) return s:upper() end",
/// )])?;
/// assert_eq!(PromptMode::default(), PromptMode::Compact);
/// assert!(PromptMode::Full.listing(&registry).contains("---@param s string The text"));
/// let compact = PromptMode::Compact.listing(&registry);
/// assert!(compact.contains("\nshout(s)  -- Upper-cases a text.\n"));
/// assert!(compact.contains("fn_search") && !compact.contains("---@param"));
/// // One function is far below the automatic threshold; a tiny threshold switches.
/// assert!(!PromptMode::auto().is_compact_for(&registry));
/// assert!(PromptMode::Auto { max_full_tokens: 10 }.is_compact_for(&registry));
/// # Ok::<(), rlm_registry::LoadError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PromptMode {
    /// Every function with its full documentation, the built-ins' and the registry's
    /// ([`Registry::system_prompt`]): the model needs no lookup, but the prompt grows
    /// with the registry (about 8,000 tokens with the baked one).
    Full,
    /// One line per function, signature and summary, and a pointer to `help` and
    /// `fn_search` for the rest: the built-ins as
    /// [`Catalog::host_prompt_compact`](crate::catalog::Catalog::host_prompt_compact)
    /// lists them, the registry as [`Registry::compact_prompt`] does.
    #[default]
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
    /// [`Auto`](PromptMode::Auto) decides for `registry` (see [`is_compact_for`](Self::is_compact_for)).
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

/// The names `full`, `compact` and `auto` (with [`AUTO_COMPACT_ABOVE_TOKENS`]), as the
/// command line, environment variables, `rlm.toml` and Python give them.
///
/// ```
/// use rlm_registry::rlm::PromptMode;
///
/// assert_eq!("compact".parse::<PromptMode>(), Ok(PromptMode::Compact));
/// assert_eq!("auto".parse::<PromptMode>(), Ok(PromptMode::auto()));
/// assert!("short".parse::<PromptMode>().unwrap_err().contains("full, compact or auto"));
/// ```
impl std::str::FromStr for PromptMode {
    type Err = String;

    fn from_str(name: &str) -> Result<PromptMode, String> {
        match name {
            "full" => Ok(PromptMode::Full),
            "compact" => Ok(PromptMode::Compact),
            "auto" => Ok(PromptMode::auto()),
            other => Err(format!(
                "unknown prompt mode `{other}`: expected full, compact or auto"
            )),
        }
    }
}

impl PromptMode {
    /// Every name [`PromptMode`]'s `FromStr` takes, with what it means: a command line's
    /// choices and their help.
    pub const CHOICES: [(&'static str, &'static str); 3] = [
        ("full", "Every function with its full documentation"),
        (
            "compact",
            "Signatures and one-line summaries; the model looks functions up with help and fn_search",
        ),
        (
            "auto",
            "Compact when the full listing has more than 8,000 tokens (o200k_base), else full",
        ),
    ];
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
