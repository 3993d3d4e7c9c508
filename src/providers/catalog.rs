//! What one agent may call: the host functions its scope allows, then the registry's
//! Lua functions. The prompt, `help`, `fn_search`, the CLI and the tool exports all read
//! this one list.

use std::sync::Arc;

use super::{AgentScope, ProviderInfo, Providers, Scope};
use crate::Registry;
use crate::conventions::Function;
use crate::search::{FunctionSearch, SearchOptions, SearchResult};

/// Where a callable function comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin<'a> {
    /// A registry (Lua) function, from this source directory.
    Registry {
        /// The directory it was loaded from.
        dir: &'a str,
    },
    /// A host function of a provider.
    Provider {
        /// The provider's name (`core`, `llm`, … for the built-ins).
        provider: &'a str,
        /// Who may call it.
        scope: Scope,
        /// Whether the provider is one of the built-in ones.
        builtin: bool,
    },
}

/// A function an agent may call, with its one description.
#[derive(Clone, Copy, Debug)]
pub struct Callable<'a> {
    /// Name, doc, parameters, returns.
    pub function: &'a Function,
    /// Where it comes from.
    pub origin: Origin<'a>,
}

impl Callable<'_> {
    /// Its lookup id: `builtin:<name>`, `provider:<provider>:<name>` or `lua:<name>`.
    pub fn id(&self) -> String {
        id_of(self.function.name(), self.origin)
    }

    /// Whether it is one of the built-ins (`print`, `llm_query`, …).
    pub fn is_builtin(&self) -> bool {
        matches!(self.origin, Origin::Provider { builtin: true, .. })
    }

    /// Whether it is a host function (implemented in Rust).
    pub fn is_host(&self) -> bool {
        matches!(self.origin, Origin::Provider { .. })
    }

    /// Its description as JSON ([`function_json`](crate::search::function_json)) with
    /// where it comes from: `id`, `source` (`registry`, `builtin` or `provider`), and for
    /// host functions `provider` and `scope`.
    pub fn json(&self) -> serde_json::Value {
        let mut value = crate::search::function_json(self.function);
        value["id"] = self.id().into();
        value["source"] = match self.origin {
            Origin::Registry { .. } => "registry",
            Origin::Provider { builtin: true, .. } => "builtin",
            Origin::Provider { .. } => "provider",
        }
        .into();
        if let Origin::Provider {
            provider, scope, ..
        } = self.origin
        {
            value["provider"] = provider.into();
            value["scope"] = scope.name().into();
        }
        value
    }

    /// `provider:<name>` for host functions, the directory for registry ones.
    pub fn label(&self) -> String {
        match self.origin {
            Origin::Registry { dir } => dir.to_string(),
            Origin::Provider { provider, .. } => format!("provider:{provider}"),
        }
    }
}

fn id_of(name: &str, origin: Origin<'_>) -> String {
    match origin {
        Origin::Registry { .. } => format!("lua:{name}"),
        Origin::Provider { builtin: true, .. } => format!("builtin:{name}"),
        Origin::Provider { provider, .. } => format!("provider:{provider}:{name}"),
    }
}

/// The functions one agent may call.
///
/// ```
/// use std::sync::Arc;
/// use rlm_registry::Registry;
/// use rlm_registry::providers::{AgentScope, Catalog, Providers};
///
/// let child = AgentScope { depth: 1, can_spawn: false };
/// let catalog = Catalog::new(Registry::baked().clone(), Arc::new(Providers::builtin()), child);
/// assert!(catalog.get("llm_query").is_some());
/// assert!(catalog.get("ask_user").is_none()); // user scope: top level only
/// assert!(catalog.get("rlm_query").is_none()); // agent scope: not at the depth limit
/// assert_eq!(catalog.lookup("builtin:print").unwrap().function.name(), "print");
/// ```
#[derive(Clone, Debug)]
pub struct Catalog {
    registry: Arc<Registry>,
    providers: Arc<Providers>,
    scope: AgentScope,
}

impl Catalog {
    /// The catalog of an agent at `scope` with these providers and registry.
    pub fn new(
        registry: impl Into<Arc<Registry>>,
        providers: Arc<Providers>,
        scope: AgentScope,
    ) -> Catalog {
        Catalog {
            registry: registry.into(),
            providers,
            scope,
        }
    }

    /// The Lua registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The providers (all of them, in scope or not).
    pub fn providers(&self) -> &Arc<Providers> {
        &self.providers
    }

    /// The agent's scope.
    pub fn scope(&self) -> AgentScope {
        self.scope
    }

    /// Host functions in scope (provider order), then registry functions (name order)
    /// that no host function shadows.
    pub fn functions(&self) -> Vec<Callable<'_>> {
        let mut all: Vec<Callable<'_>> = self.host_functions().collect();
        all.extend(
            self.registry
                .functions()
                .iter()
                .filter(|f| self.providers.get(f.name()).is_none())
                .map(registry_callable),
        );
        all
    }

    /// The host functions in scope, in provider order.
    pub fn host_functions(&self) -> impl Iterator<Item = Callable<'_>> {
        self.providers
            .iter()
            .filter(|f| self.scope.allows(f.scope()))
            .map(|f| self.host_callable(f))
    }

    /// The function `name`, if this agent may call it.
    pub fn get(&self, name: &str) -> Option<Callable<'_>> {
        match self.providers.get(name) {
            Some(host) if self.scope.allows(host.scope()) => Some(self.host_callable(host)),
            Some(_) => None,
            None => self.registry.get(name).map(registry_callable),
        }
    }

    /// The scope of `name` when it is a host function this agent may not call.
    pub fn out_of_scope(&self, name: &str) -> Option<Scope> {
        self.providers
            .get(name)
            .map(|f| f.scope())
            .filter(|&scope| !self.scope.allows(scope))
    }

    /// Looks up `lua:<name>`, `builtin:<name>`, `provider:<provider>:<name>` or a bare
    /// name (host functions first, as calls resolve), among what this agent may call.
    pub fn lookup(&self, id: &str) -> Option<Callable<'_>> {
        if let Some(name) = id.strip_prefix("lua:") {
            return self.registry.get(name).map(registry_callable);
        }
        if let Some(name) = id.strip_prefix("builtin:") {
            return self
                .get(name)
                .filter(|c| matches!(c.origin, Origin::Provider { builtin: true, .. }));
        }
        if let Some(rest) = id.strip_prefix("provider:") {
            let (wanted, name) = rest.split_once(':')?;
            return self.get(name).filter(
                |c| matches!(c.origin, Origin::Provider { provider, .. } if provider == wanted),
            );
        }
        self.get(id)
    }

    /// Registry functions hidden by a host function of the same name.
    pub fn shadowed(&self) -> Vec<&Function> {
        self.registry
            .functions()
            .iter()
            .filter(|f| self.providers.get(f.name()).is_some())
            .collect()
    }

    /// The callable name most like `name`, for "did you mean".
    pub fn closest_name(&self, name: &str) -> Option<&str> {
        self.functions()
            .into_iter()
            .map(|c| {
                (
                    strsim::jaro_winkler(name, c.function.name()),
                    c.function.name(),
                )
            })
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, n)| n)
    }

    /// The prompt section declaring the host functions this agent may call.
    pub fn host_prompt(&self) -> String {
        self.declarations(
            "## Built-in functions\n\nAlways available; they cannot be reassigned.",
            |_| true,
        )
    }

    /// The functions of the host's own providers (not the built-ins), declared as
    /// [`host_prompt`](Self::host_prompt) does; empty when there are none.
    pub fn provider_prompt(&self) -> String {
        if self.host_functions().all(|c| c.is_builtin()) {
            return String::new();
        }
        self.declarations(
            "## Provider functions\n\nImplemented by the host; they cannot be reassigned.",
            |c| !c.is_builtin(),
        )
    }

    fn declarations(&self, heading: &str, keep: impl Fn(&Callable<'_>) -> bool) -> String {
        let mut text = format!("{heading}\n\n```lua\n");
        for (i, callable) in self.host_functions().filter(keep).enumerate() {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(&callable.function.declaration());
            text.push('\n');
        }
        text.push_str("```");
        text
    }

    fn host_callable<'a>(&'a self, info: ProviderInfo<'a>) -> Callable<'a> {
        let builtin = self
            .providers
            .providers()
            .any(|p| p.builtin && p.name == info.provider());
        Callable {
            function: info.function(),
            origin: Origin::Provider {
                provider: info.provider(),
                scope: info.scope(),
                builtin,
            },
        }
    }
}

fn registry_callable(function: &Function) -> Callable<'_> {
    Callable {
        function,
        origin: Origin::Registry {
            dir: function.dir(),
        },
    }
}

impl FunctionSearch for Catalog {
    /// Searches the registry and the host functions in scope together, best first.
    fn search(&self, query: &str, options: &SearchOptions) -> Vec<SearchResult> {
        let mut results: Vec<SearchResult> = self
            .providers
            .docs()
            .search(query, &all_of(options))
            .into_iter()
            .filter_map(|mut result| {
                let callable = self.get(&result.name)?;
                callable.is_host().then(|| {
                    result.id = callable.id();
                    result
                })
            })
            .collect();
        let registry_wide = SearchOptions {
            max_results: options.max_results.saturating_add(results.len()),
            ..options.clone()
        };
        results.extend(
            self.registry
                .search(query, &registry_wide)
                .into_iter()
                .filter(|r| self.providers.get(&r.name).is_none()),
        );
        results.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.name.cmp(&b.name))
        });
        results.truncate(options.max_results);
        // Two indexes score on their own scales: keep confidence monotonic in rank.
        for i in 1..results.len() {
            results[i].confidence = results[i].confidence.min(results[i - 1].confidence);
        }
        results
    }
}

/// The same options without a result cap: host functions are few, and out-of-scope ones
/// are dropped after the search.
fn all_of(options: &SearchOptions) -> SearchOptions {
    SearchOptions {
        max_results: usize::MAX,
        ..options.clone()
    }
}
