//! The functions a server exposes, computed in one place from the
//! [`crate::catalog::Catalog`](crate::catalog::Catalog) of a top-level agent: every registry
//! function and every function of the host's own providers (as a tool when its
//! parameters fit JSON), and the built-ins' documentation (they run only inside Lua).
//! The MCP tool list, `search_functions` and the JSON API all read this.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::Registry;
use crate::conventions::lua_type::LuaType;
use crate::providers;
use crate::search::{FunctionSearch, SearchOptions};
use crate::spec::FunctionSpec;
use crate::spec::Tool;
use crate::tools::call::validate;

/// How many results `search_functions` and `GET /v1/search` return at most.
pub const MAX_SEARCH_RESULTS: usize = 50;

/// The functions a server exposes.
///
/// ```
/// use rlm_registry::{Registry, serve::Catalog};
///
/// let catalog = Catalog::of_registry(Registry::baked().clone());
/// # #[cfg(feature = "text")] {
/// assert!(catalog.tools().any(|tool| tool.name == "word_count"));
/// assert_eq!(catalog.describe("word_count").unwrap()["source"], "registry");
/// # }
/// assert_eq!(catalog.describe("print").unwrap()["source"], "builtin");
/// ```
#[derive(Clone, Debug)]
pub struct Catalog {
    functions: crate::catalog::Catalog,
}

impl Catalog {
    /// The functions of `registry` and the built-ins.
    pub fn of_registry(registry: impl Into<Arc<Registry>>) -> Catalog {
        Catalog::new(crate::catalog::Catalog::new(
            registry,
            Arc::new(providers::Providers::builtin()),
            providers::AgentScope::TOP,
        ))
    }

    /// What `functions` offers: its registry and host functions as tools, the built-ins
    /// described.
    pub fn new(functions: crate::catalog::Catalog) -> Catalog {
        Catalog { functions }
    }

    /// The registry the functions come from.
    pub fn registry(&self) -> &Arc<Registry> {
        self.functions.registry()
    }

    /// Everything a top-level agent may call: registry, built-ins, providers.
    pub fn functions(&self) -> &crate::catalog::Catalog {
        &self.functions
    }

    /// The functions that are tools, in name order, with their return type if known.
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        let mut tools: Vec<&Tool> = self
            .functions
            .exported(false)
            .into_iter()
            .filter_map(|f| f.tool().ok())
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools.into_iter()
    }

    /// The tool `name`, if the server offers it as one.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.functions
            .get(name)
            .filter(|f| !f.is_builtin())
            .and_then(|f| f.tool().ok())
    }

    /// Every function: registry and host functions, then built-ins, each as
    /// [`Catalog::describe`] gives it.
    pub fn list(&self) -> Vec<Value> {
        let mut callables = self.functions.functions();
        callables.sort_by_key(FunctionSpec::is_builtin);
        callables
            .iter()
            .filter_map(|c| self.describe(c.function.name()))
            .collect()
    }

    /// The providers (built-in and the host's), each with its description, whether it is
    /// built in, its functions as [`Catalog::describe`] gives them, and its management
    /// routes under their full paths.
    pub fn providers(&self) -> Vec<Value> {
        self.functions
            .providers()
            .providers()
            .map(|provider| {
                let functions: Vec<Value> = provider
                    .functions
                    .iter()
                    .filter_map(|name| self.describe(name))
                    .collect();
                let routes: Vec<Value> = provider
                    .routes
                    .iter()
                    .map(|route| {
                        json!({
                            "method": route.method().as_str(),
                            "path": format!("/v1/providers/{}{}", provider.name, route.path()),
                            "description": route.description(),
                        })
                    })
                    .collect();
                json!({
                    "name": provider.name,
                    "description": provider.description,
                    "builtin": provider.builtin,
                    "functions": functions,
                    "routes": routes,
                })
            })
            .collect()
    }

    /// Whether `name` is a built-in (which runs only inside Lua).
    pub fn is_builtin(&self, name: &str) -> bool {
        self.functions.get(name).is_some_and(|c| c.is_builtin())
    }

    /// One function's description: doc, params, returns, `source` (`registry`,
    /// `provider` or `builtin`: built-ins run only inside Lua, `run_lua` or a session),
    /// and for tools the input and output schemas.
    pub fn describe(&self, name: &str) -> Option<Value> {
        self.functions.get(name).map(|f| f.json())
    }

    /// The closest exposed name to `name`, for "did you mean".
    pub fn closest_name(&self, name: &str) -> Option<&str> {
        self.functions.closest_name(name)
    }

    /// Searches every function (built-ins included): the results as JSON, best first.
    pub fn search(&self, query: &str, max_results: usize, capability: Option<String>) -> Value {
        let options = SearchOptions {
            max_results: max_results.min(MAX_SEARCH_RESULTS),
            capability,
            source: None,
        };
        json!(FunctionSearch::search(&self.functions, query, &options))
    }
}

/// `value`, checked against the documented return type: Lua's empty table becomes `{}`
/// where an object is documented (Lua cannot tell `{}` from `[]`); anything else that
/// does not match is an error, since a client validates structured results.
///
/// ```
/// use serde_json::json;
/// use rlm_registry::{serve::conform, tools::parse_type};
///
/// let counts = parse_type("table<string, integer>").unwrap();
/// assert_eq!(conform(json!([]), &counts), Ok(json!({})));
/// assert!(conform(json!("text"), &parse_type("integer").unwrap()).is_err());
/// ```
pub fn conform(value: Value, output: &LuaType) -> Result<Value, String> {
    if validate(&value, output, "$").is_ok() {
        return Ok(value);
    }
    if value == json!([]) && validate(&json!({}), output, "$").is_ok() {
        return Ok(json!({}));
    }
    match validate(&value, output, "$") {
        Ok(()) => Ok(value),
        Err((path, message)) => Err(format!(
            "the result does not match the documented return type: {path}: {message}"
        )),
    }
}
