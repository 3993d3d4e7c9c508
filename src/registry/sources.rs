//! What a registry knows about its own functions beyond their docs: the search index
//! data (baked or built at load), each function's capabilities, and the directories the
//! functions come from. Ranking a query over this data is [`crate::search`]'s job.

use std::sync::Arc;

use serde::Serialize;

use super::Registry;
use super::index::{Index, capabilities_of};
use crate::conventions::Function;

/// A source directory and how many of the registry's functions come from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The directory, as named to the loader.
    pub dir: String,
    /// Functions it provides (winners only).
    pub functions: usize,
}

/// Whether `dir` is `source`, or ends with it as whole path components.
///
/// ```
/// use rlm_registry::registry::source_matches;
/// assert!(source_matches("crates/app/lua/text", "lua/text"));
/// assert!(!source_matches("lua/context", "text"));
/// ```
pub fn source_matches(dir: &str, source: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    let source = source.trim_end_matches('/');
    dir == source || dir.ends_with(&format!("/{source}"))
}

impl Registry {
    /// The search index: baked in for [`Registry::baked`] and generated registries,
    /// built at load for `from_paths` / `from_map`.
    ///
    /// ```
    /// let registry = rlm_registry::Registry::from_map([("hi", "--- Says hi.\nfunction hi() end")]).unwrap();
    /// assert_eq!(registry.index().len(), 1);
    /// ```
    pub fn index(&self) -> &Index {
        match self.search.baked {
            Some(index) => index,
            None => self
                .search
                .built
                .get_or_init(|| Arc::new(Index::build(self.functions()))),
        }
    }

    /// The capabilities of `function` as indexed: its `---@tag`s, then the automatic ones.
    ///
    /// ```
    /// let registry = rlm_registry::Registry::from_map([(
    ///     "find_all",
    ///     "--- Finds every match.\n---@tag search\n---@return table\nfunction find_all() return {} end",
    /// )]).unwrap();
    /// let function = registry.get("find_all").unwrap();
    /// assert_eq!(registry.capabilities_of(function)[0], "search");
    /// ```
    pub fn capabilities_of(&self, function: &Function) -> Vec<String> {
        match self
            .functions()
            .iter()
            .position(|f| std::ptr::eq(f, function))
        {
            Some(i) => self.index().capabilities(i).map(str::to_string).collect(),
            None => capabilities_of(function),
        }
    }

    /// The functions with `capability` (case-insensitive), optionally only from `source`,
    /// in name order.
    pub fn with_capability(&self, capability: &str, source: Option<&str>) -> Vec<&Function> {
        let capability = capability.to_lowercase();
        let index = self.index();
        self.functions()
            .iter()
            .enumerate()
            .filter(|(i, f)| {
                index.has_capability(*i, &capability)
                    && source.is_none_or(|s| source_matches(f.dir(), s))
            })
            .map(|(_, f)| f)
            .collect()
    }

    /// Every source directory, in load order, with how many functions it provides.
    pub fn sources(&self) -> Vec<Source> {
        let mut sources: Vec<Source> = Vec::new();
        for chunk in self.chunks() {
            if !sources.iter().any(|s| s.dir == chunk.dir()) {
                sources.push(Source {
                    dir: chunk.dir().to_string(),
                    functions: 0,
                });
            }
        }
        for function in self.functions() {
            if let Some(source) = sources.iter_mut().find(|s| s.dir == function.dir()) {
                source.functions += 1;
            }
        }
        sources
    }
}
