//! The registration API: a set of providers and their host functions,
//! with each function's description checked by the conventions and kept as a
//! [`Registry`] of [`Function`]s, so the prompt, `help`, search and the tool exports
//! read host functions exactly as they read Lua ones.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

use super::{HostFunction, Method, Provider, Route, RouteRequest, RouteResponse, Scope, builtin};
use crate::conventions::builtins::BuiltinProvider;
use crate::conventions::{Code, Function, LUA_GLOBALS, Severity, check_files, is_lua_name};
use crate::registry::{Chunk, Registry};
use crate::spec::{FunctionSpec, Origin};

/// One registered provider.
#[derive(Clone, Debug)]
struct Entry {
    name: String,
    description: String,
    builtin: bool,
    functions: Vec<HostFunction>,
    routes: Vec<Route>,
}

/// The entries of the built-in providers `which`, as [`Providers::builtin`] holds them.
fn builtin_entries(which: &[BuiltinProvider]) -> Vec<Entry> {
    builtin::providers(which)
        .into_iter()
        .map(|(name, description, functions)| Entry {
            routes: Vec::new(),
            name: name.to_string(),
            description: description.to_string(),
            builtin: true,
            functions,
        })
        .collect()
}

/// A set of providers: the registration API. Cheap to clone (to give one agent extra
/// functions, clone the set and register them there).
///
/// ```
/// use rlm_registry::providers::{HostFunction, Providers, Scope};
///
/// let mut providers = Providers::builtin();
/// let ping = HostFunction::typed("ping", "--- Answers pong.\n---@return string", |_, (): ()| Ok::<_, String>("pong"));
/// providers.register_function("net", ping)?;
/// assert_eq!(providers.get("ping").unwrap().provider(), "net");
/// assert!(providers.list(Some(Scope::User)).iter().any(|f| f.name() == "ask_user"));
///
/// // A doc that breaks the conventions is an error naming the provider and the function.
/// let bad = HostFunction::typed("nodoc", "---@param x string", |_, (_x,): (String,)| Ok::<_, String>(()));
/// let err = providers.register_function("net", bad).unwrap_err();
/// assert!(err.to_string().contains("net") && err.to_string().contains("nodoc"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Providers {
    entries: Vec<Entry>,
    /// Every host function's description, as a registry whose "directories" are
    /// `provider:<name>`.
    docs: Arc<Registry>,
}

/// What a registration changed beyond adding functions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registration {
    /// `(function, provider it was taken from)` for every name that another host
    /// provider had (now replaced).
    pub replaced: Vec<(String, String)>,
}

/// A registration refused: which provider, which function, what is wrong. Nothing
/// changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderError {
    /// The provider being registered.
    pub provider: String,
    /// The function at fault (empty for a problem with the provider itself).
    pub function: String,
    /// What is wrong, with the conventions' code where one applies.
    pub problems: Vec<String>,
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.function.is_empty() {
            write!(f, "provider `{}`: ", self.provider)?;
        } else {
            write!(
                f,
                "provider `{}`, function `{}`: ",
                self.provider, self.function
            )?;
        }
        f.write_str(&self.problems.join("; "))
    }
}

impl std::error::Error for ProviderError {}

/// One registered provider, as [`Providers::providers`] lists it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ProviderSummary<'a> {
    /// Its name.
    pub name: &'a str,
    /// What it offers.
    pub description: &'a str,
    /// Whether it is one of the built-in providers (`core`, `llm`, `agent`, `user`).
    pub builtin: bool,
    /// Its functions' names, in its order.
    pub functions: Vec<&'a str>,
    /// Its management routes ([`Provider::routes`]).
    pub routes: &'a [Route],
}

/// A registered host function with its checked description.
#[derive(Clone, Copy, Debug)]
pub struct ProviderInfo<'a> {
    provider: &'a str,
    builtin: bool,
    host: &'a HostFunction,
    /// The checked description (from the providers' own docs registry, which keeps its
    /// tool form), before the provider is named as its origin.
    checked: FunctionSpec<'a>,
}

impl<'a> ProviderInfo<'a> {
    /// The provider it belongs to.
    pub fn provider(&self) -> &'a str {
        self.provider
    }

    /// The function's name.
    pub fn name(&self) -> &'a str {
        self.host.name()
    }

    /// Whether its provider is one of the built-in ones (`core`, `re`, `llm`, `agent`,
    /// `user`).
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    /// Who may call it.
    pub fn scope(&self) -> Scope {
        self.host.scope
    }

    /// Its description, as the conventions extracted it.
    pub fn function(&self) -> &'a Function {
        self.checked.function
    }

    /// Its one description, with where it comes from: what every reader takes.
    pub fn spec(&self) -> FunctionSpec<'a> {
        self.checked.with_origin(Origin::Provider {
            provider: self.provider,
            scope: self.host.scope,
            builtin: self.builtin,
        })
    }

    pub(crate) fn host(&self) -> &'a HostFunction {
        self.host
    }
}

impl Default for Providers {
    fn default() -> Self {
        Providers::builtin()
    }
}

impl Providers {
    /// A set with no provider at all: not even `print`. Mostly for tests; see
    /// [`Providers::builtin`].
    pub fn empty() -> Providers {
        Providers {
            entries: Vec::new(),
            docs: Arc::new(Registry::empty()),
        }
    }

    /// The built-in providers `core`, `llm`, `agent` and `user` (built once per process).
    pub fn builtin() -> Providers {
        static BUILTIN: OnceLock<Providers> = OnceLock::new();
        BUILTIN
            .get_or_init(|| {
                let entries = builtin_entries(&BuiltinProvider::ALL);
                let mut set = Providers {
                    entries,
                    docs: Arc::new(Registry::empty()),
                };
                // The built-ins' docs are fixed text, checked by a test; a failure here
                // would be a bug in this crate, reported rather than panicking.
                match describe(&set.entries) {
                    Ok(docs) => set.docs = Arc::new(docs),
                    Err(error) => tracing::error!("built-in documentation: {error}"),
                }
                set
            })
            .clone()
    }

    /// The shared built-in set, for environments that add nothing.
    pub(crate) fn builtin_shared() -> Arc<Providers> {
        static SHARED: OnceLock<Arc<Providers>> = OnceLock::new();
        Arc::clone(SHARED.get_or_init(|| Arc::new(Providers::builtin())))
    }

    /// Registers `provider`'s functions, replacing a provider of the same name and any
    /// same-named function of another host provider. Every function's doc is checked by
    /// the conventions first; on any problem nothing changes.
    pub fn register(&mut self, provider: impl Provider) -> Result<Registration, ProviderError> {
        let entry = Entry {
            name: provider.name().to_string(),
            description: provider.description().to_string(),
            builtin: false,
            functions: provider.functions(),
            routes: provider.routes(),
        };
        self.insert(entry)
    }

    /// Registers one function under `provider` (created if new, else added to), replacing
    /// a same-named function of any host provider.
    pub fn register_function(
        &mut self,
        provider: &str,
        function: HostFunction,
    ) -> Result<Registration, ProviderError> {
        let mut entry = match self.entries.iter().find(|e| e.name == provider) {
            Some(existing) if existing.builtin => {
                return Err(ProviderError {
                    provider: provider.to_string(),
                    function: function.name().to_string(),
                    problems: vec![
                        "built-in providers cannot be extended; use a provider of your own"
                            .to_string(),
                    ],
                });
            }
            Some(existing) => existing.clone(),
            None => Entry {
                name: provider.to_string(),
                description: String::new(),
                builtin: false,
                functions: Vec::new(),
                routes: Vec::new(),
            },
        };
        entry.functions.retain(|f| f.name() != function.name());
        entry.functions.push(function);
        self.insert(entry)
    }

    /// Removes the host function `name`; returns it if there was one.
    pub fn unregister(&mut self, name: &str) -> Option<HostFunction> {
        let mut removed = None;
        for entry in &mut self.entries {
            if let Some(at) = entry.functions.iter().position(|f| f.name() == name) {
                removed = Some(entry.functions.remove(at));
            }
        }
        removed.inspect(|_| self.refresh())
    }

    /// Removes the provider `name` and all its functions (built-in ones too, e.g. to run
    /// without `llm`); returns whether there was one.
    pub fn unregister_provider(&mut self, name: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.name != name);
        let removed = self.entries.len() != before;
        if removed {
            self.refresh();
        }
        removed
    }

    /// The host function `name`, with its provider and description.
    pub fn get(&self, name: &str) -> Option<ProviderInfo<'_>> {
        self.iter().find(|f| f.name() == name)
    }

    /// The functions of `scope` (all with `None`), in provider order.
    pub fn list(&self, scope: Option<Scope>) -> Vec<ProviderInfo<'_>> {
        self.iter()
            .filter(|f| scope.is_none_or(|s| f.scope() == s))
            .collect()
    }

    /// Every function, in provider order then the provider's own order.
    pub fn iter(&self) -> impl Iterator<Item = ProviderInfo<'_>> {
        self.entries.iter().flat_map(move |entry| {
            entry.functions.iter().filter_map(move |host| {
                let checked = self.docs.spec(host.name())?;
                Some(ProviderInfo {
                    provider: &entry.name,
                    builtin: entry.builtin,
                    host,
                    checked,
                })
            })
        })
    }

    /// The providers, in registration order.
    pub fn providers(&self) -> impl Iterator<Item = ProviderSummary<'_>> {
        self.entries.iter().map(|e| ProviderSummary {
            name: &e.name,
            description: &e.description,
            builtin: e.builtin,
            functions: e.functions.iter().map(HostFunction::name).collect(),
            routes: &e.routes,
        })
    }

    /// Answers a request to a provider's management route: `path` is relative to the
    /// provider (`/prices/tea`). The route with the most literal segments wins where
    /// several match. No such provider or path is a 404, a path served for other methods
    /// a 405 naming them.
    ///
    /// ```
    /// use rlm_registry::providers::{HostFunction, Method, Provider, Providers, Route, RouteRequest, RouteResponse};
    ///
    /// struct Shop;
    /// impl Provider for Shop {
    ///     fn name(&self) -> &str { "shop" }
    ///     fn description(&self) -> &str { "Prices." }
    ///     fn functions(&self) -> Vec<HostFunction> { Vec::new() }
    ///     fn routes(&self) -> Vec<Route> {
    ///         vec![Route::new(Method::Get, "/prices/{item}", "A price.", |r| {
    ///             RouteResponse::ok(serde_json::json!({ "item": r.params["item"], "price": 3 }))
    ///         })]
    ///     }
    /// }
    /// let mut providers = Providers::empty();
    /// providers.register(Shop)?;
    /// let answer = providers.handle_route("shop", Method::Get, "/prices/tea", RouteRequest::default());
    /// assert_eq!((answer.status, answer.body["price"].as_i64()), (200, Some(3)));
    /// assert_eq!(providers.handle_route("shop", Method::Put, "/prices/tea", RouteRequest::default()).status, 405);
    /// assert_eq!(providers.handle_route("shop", Method::Get, "/nope", RouteRequest::default()).status, 404);
    /// # Ok::<(), rlm_registry::providers::ProviderError>(())
    /// ```
    pub fn handle_route(
        &self,
        provider: &str,
        method: Method,
        path: &str,
        mut request: RouteRequest,
    ) -> RouteResponse {
        let Some(entry) = self.entries.iter().find(|e| e.name == provider) else {
            return RouteResponse::error(
                404,
                format!("no provider named `{provider}` (see GET /v1/providers)"),
            );
        };
        let matching: Vec<_> = entry
            .routes
            .iter()
            .filter_map(|route| Some((route, route.captures(path)?)))
            .collect();
        let chosen = matching
            .iter()
            .filter(|(route, _)| route.method() == method)
            .min_by_key(|(_, captures)| captures.len());
        match chosen {
            Some((route, captures)) => {
                request.params = captures.clone();
                route.call(&request)
            }
            None if matching.is_empty() => RouteResponse::error(
                404,
                format!(
                    "provider `{provider}` has no route {path} (see GET /v1/providers/{provider})"
                ),
            ),
            None => {
                let mut allowed: Vec<Method> = matching.iter().map(|(r, _)| r.method()).collect();
                allowed.sort();
                allowed.dedup();
                let allowed: Vec<&str> = allowed.into_iter().map(Method::as_str).collect();
                RouteResponse::error(
                    405,
                    format!(
                        "{method} is not allowed on {path}; it answers {}",
                        allowed.join(", ")
                    ),
                )
            }
        }
    }

    /// Every host function's description, as a registry (search, tool export).
    pub(crate) fn docs(&self) -> &Arc<Registry> {
        &self.docs
    }

    fn insert(&mut self, entry: Entry) -> Result<Registration, ProviderError> {
        self.check_names(&entry)?;
        check_routes(&entry)?;
        let mut next = self.entries.clone();
        let mut registration = Registration::default();
        next.retain(|e| e.name != entry.name);
        for other in next.iter_mut() {
            other.functions.retain(|f| {
                let taken = entry.functions.iter().any(|g| g.name() == f.name());
                if taken {
                    registration
                        .replaced
                        .push((f.name().to_string(), other.name.clone()));
                }
                !taken
            });
        }
        next.push(entry);
        self.docs = Arc::new(describe(&next)?);
        self.entries = next;
        Ok(registration)
    }

    fn refresh(&mut self) {
        // Removing functions cannot make the remaining docs invalid.
        if let Ok(docs) = describe(&self.entries) {
            self.docs = Arc::new(docs);
        }
    }

    /// A host provider may not take a Lua standard global's or a built-in's name, nor
    /// define one name twice.
    fn check_names(&self, entry: &Entry) -> Result<(), ProviderError> {
        let refuse = |function: &str, problem: String| ProviderError {
            provider: entry.name.clone(),
            function: function.to_string(),
            problems: vec![problem],
        };
        if !is_lua_name(&entry.name) {
            return Err(refuse(
                "",
                "a provider's name must be an identifier (letters, digits, `_`)".to_string(),
            ));
        }
        let builtin_owner = |name: &str| {
            self.entries
                .iter()
                .filter(|e| e.builtin && e.name != entry.name)
                .find(|e| e.functions.iter().any(|f| f.name() == name))
                .map(|e| e.name.clone())
        };
        for (i, function) in entry.functions.iter().enumerate() {
            let name = function.name();
            if LUA_GLOBALS.contains(&name) {
                return Err(refuse(
                    name,
                    format!("`{name}` is a Lua standard global and cannot be replaced"),
                ));
            }
            if let Some(owner) = builtin_owner(name).filter(|_| !entry.builtin) {
                return Err(refuse(
                    name,
                    format!(
                        "`{name}` is a built-in of the `{owner}` provider and cannot be replaced; choose another name"
                    ),
                ));
            }
            if entry.functions[..i].iter().any(|f| f.name() == name) {
                return Err(refuse(name, "defined twice by this provider".to_string()));
            }
        }
        Ok(())
    }
}

/// Checks every function's doc with the conventions and builds the registry of
/// descriptions, one chunk per function.
fn describe(entries: &[Entry]) -> Result<Registry, ProviderError> {
    let inputs: Vec<(String, String, &Entry, &HostFunction)> = entries
        .iter()
        .flat_map(|entry| {
            entry.functions.iter().map(move |f| {
                let file = format!("<provider:{}:{}>", entry.name, f.name());
                (file, f.declaration(&checked_name(entry, f)), entry, f)
            })
        })
        .collect();
    let files: Vec<(&str, &str)> = inputs
        .iter()
        .map(|(file, source, _, _)| (file.as_str(), source.as_str()))
        .collect();
    let mut chunks = Vec::with_capacity(inputs.len());
    for (index, ((file, source, entry, host), check)) in
        inputs.iter().zip(check_files(&files)).enumerate()
    {
        let problems: Vec<String> = check
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            // The built-ins are, by definition, allowed their reserved names.
            .filter(|d| !(entry.builtin && d.code == Code::ReservedName))
            .map(|d| format!("{}: {}", d.code.as_str(), d.message))
            .collect();
        let defined: Vec<&str> = check.functions.iter().map(|f| f.name()).collect();
        if !problems.is_empty() || defined != [checked_name(entry, host)] {
            let problems = if problems.is_empty() {
                vec![format!(
                    "the name must be a plain identifier (the declaration defines {defined:?})"
                )]
            } else {
                problems
            };
            return Err(ProviderError {
                provider: entry.name.clone(),
                function: host.name().to_string(),
                problems,
            });
        }
        let dir = format!("provider:{}", entry.name);
        let functions = check
            .functions
            .into_iter()
            .map(|mut f| {
                f.name = Cow::Owned(host.name().to_string());
                f.dir = Cow::Owned(dir.clone());
                f.chunk = u32::try_from(index).unwrap_or(u32::MAX);
                f
            })
            .collect();
        let chunk = Chunk {
            file: Cow::Owned(file.clone()),
            dir: Cow::Owned(dir),
            source: Cow::Owned(source.clone()),
        };
        chunks.push((chunk, functions));
    }
    Ok(crate::registry::load::assemble(None, chunks))
}

/// The name a function's declaration is checked under: its own, except that a built-in
/// table member (`re.find`) is checked as a plain function (`re_find`) and keeps its
/// dotted name. Host providers' names must be plain identifiers: they become globals.
fn checked_name(entry: &Entry, host: &HostFunction) -> String {
    if entry.builtin {
        host.name().replace('.', "_")
    } else {
        host.name().to_string()
    }
}

/// Every route of a provider has a servable path, and no two answer the same requests.
fn check_routes(entry: &Entry) -> Result<(), ProviderError> {
    let problems: Vec<String> = entry
        .routes
        .iter()
        .enumerate()
        .filter_map(|(i, route)| {
            route.path_problem().or_else(|| {
                let earlier = entry.routes[..i].iter().find(|r| r.overlaps(route))?;
                Some(format!(
                    "routes `{earlier}` and `{route}` answer the same requests"
                ))
            })
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(ProviderError {
        provider: entry.name.clone(),
        function: String::new(),
        problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The primitives are not offered to the model, but their docs (what `rlm meta`
    /// and a reader of the table see) follow the same conventions as every built-in's.
    #[test]
    fn the_primitives_docs_pass_the_conventions() {
        let entries = builtin_entries(&[BuiltinProvider::Primitives]);
        assert!(!entries[0].functions.is_empty());
        describe(&entries).expect("the primitives' docs pass the conventions");
    }
}
