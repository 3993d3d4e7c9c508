//! What one agent may call: the host functions its scope allows, then the registry's
//! Lua functions, each as a [`FunctionSpec`]. The prompt, `help`, `fn_search`, the CLI,
//! the tool exports and the server all read this one list; none keeps its own.

use std::sync::Arc;

use crate::Registry;
use crate::conventions::Function;
use crate::providers::{AgentScope, Providers};
use crate::search::{FunctionSearch, SearchOptions, SearchResult};
use crate::spec::{FunctionSpec, Origin, Scope, Tool, closest_name};

/// The functions one agent may call.
///
/// ```
/// use std::sync::Arc;
/// use rlm_registry::Registry;
/// use rlm_registry::catalog::Catalog;
/// use rlm_registry::providers::{AgentScope, Providers};
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

    /// A top-level agent's catalog of `registry` and the built-ins.
    pub fn of_registry(registry: impl Into<Arc<Registry>>) -> Catalog {
        Catalog::new(registry, Providers::builtin_shared(), AgentScope::TOP)
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
    pub fn functions(&self) -> Vec<FunctionSpec<'_>> {
        let mut all: Vec<FunctionSpec<'_>> = self.host_functions().collect();
        all.extend(
            self.registry
                .specs()
                .filter(|f| self.providers.get(f.name()).is_none()),
        );
        all
    }

    /// What tool lists, `rlm list` and the server offer: [`Catalog::functions`] without
    /// the built-ins (they run only inside Lua: `print`, `FINAL`, `llm_query`, …) unless
    /// `with_builtins`.
    ///
    /// ```
    /// use rlm_registry::{Registry, catalog::Catalog};
    ///
    /// let catalog = Catalog::of_registry(Registry::baked().clone());
    /// assert!(catalog.exported(false).iter().all(|f| !f.is_builtin()));
    /// assert!(catalog.exported(true).iter().any(|f| f.name() == "print"));
    /// ```
    pub fn exported(&self, with_builtins: bool) -> Vec<FunctionSpec<'_>> {
        let mut functions = self.functions();
        functions.retain(|f| with_builtins || !f.is_builtin());
        functions
    }

    /// The functions that are tools (those [`exported`](Self::exported) whose parameters
    /// JSON can carry), in name order: what the MCP tool list offers.
    ///
    /// ```
    /// use rlm_registry::{Registry, catalog::Catalog};
    ///
    /// let catalog = Catalog::of_registry(Registry::baked().clone());
    /// # #[cfg(feature = "text")]
    /// assert!(catalog.tools().iter().any(|tool| tool.name == "word_count"));
    /// assert!(catalog.tool("print").is_none()); // built-ins run only inside Lua
    /// ```
    pub fn tools(&self) -> Vec<&Tool> {
        let mut tools: Vec<&Tool> = self
            .exported(false)
            .into_iter()
            .filter_map(|f| f.tool().ok())
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }

    /// The tool `name`, if it is one ([`tools`](Self::tools) lists them).
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.get(name)
            .filter(|f| !f.is_builtin())
            .and_then(|f| f.tool().ok())
    }

    /// The host functions in scope, in provider order.
    pub fn host_functions(&self) -> impl Iterator<Item = FunctionSpec<'_>> {
        self.providers
            .iter()
            .filter(|f| self.scope.allows(f.scope()))
            .map(|f| f.spec())
    }

    /// The function `name`, if this agent may call it.
    pub fn get(&self, name: &str) -> Option<FunctionSpec<'_>> {
        match self.providers.get(name) {
            Some(host) if self.scope.allows(host.scope()) => Some(host.spec()),
            Some(_) => None,
            None => self.registry.spec(name),
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
    pub fn lookup(&self, id: &str) -> Option<FunctionSpec<'_>> {
        if let Some(name) = id.strip_prefix("lua:") {
            return self.registry.spec(name);
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
        closest_name(name, self.functions().into_iter().map(|f| f.name()))
    }

    /// The prompt section declaring the host functions this agent may call.
    pub fn host_prompt(&self) -> String {
        self.declarations(
            "## Built-in functions\n\nAlways available; they cannot be reassigned.",
            |_| true,
        )
    }

    /// The compact form of [`host_prompt`](Self::host_prompt): one line of Lua per
    /// function ([`Function::listing_line`]), except that the functions of a built-in
    /// table (`re.*`, `json.*`) are listed by signature under one comment line, the
    /// summary of the table's first function, whose doc opens by introducing its table.
    ///
    /// ```
    /// use rlm_registry::{Registry, catalog::Catalog};
    ///
    /// let compact = Catalog::of_registry(Registry::baked().clone()).host_prompt_compact();
    /// assert!(compact.contains("\nFINAL(value)  -- Gives the final answer and ends the run.\n"));
    /// assert!(compact.contains("\n-- Regular expressions (`re.*`)"));
    /// assert!(compact.contains("\nre.find(text, pattern, init?, flags?)\n"));
    /// assert!(!compact.contains("---@param"));
    /// ```
    pub fn host_prompt_compact(&self) -> String {
        let mut text = String::from(
            "## Built-in functions\n\nAlways available; they cannot be reassigned. Signatures and summaries only: `help(\"name\")` prints one's full documentation.\n\n```lua\n",
        );
        let mut table: Option<&str> = None;
        for callable in self.host_functions() {
            let function = callable.function;
            match function.name().split_once('.') {
                Some((owner, _)) => {
                    if table != Some(owner) {
                        text.push_str(&format!("-- {}\n", function.summary()));
                    }
                    table = Some(owner);
                    text.push_str(&function.signature());
                }
                None => {
                    table = None;
                    text.push_str(&function.listing_line());
                }
            }
            text.push('\n');
        }
        text.push_str("```");
        text
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

    fn declarations(&self, heading: &str, keep: impl Fn(&FunctionSpec<'_>) -> bool) -> String {
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
