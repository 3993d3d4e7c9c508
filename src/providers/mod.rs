//! Providers: groups of Rust host functions the model can call from Lua,
//! documented like registry functions and checked by the same conventions.
//!
//! The built-ins are providers too: `core` (`print`, `FINAL`, `token_*`, `store_list`,
//! `help`, `fn_search`, …), `llm` (`llm_query*`), `agent` (`rlm_query*`) and `user`
//! (`ask_user`, `notify_user`). A host adds its own with [`Providers::register`]; an
//! environment offers the functions of its [`Providers`] that its [`AgentScope`] allows.
//!
//! ```
//! use std::sync::Arc;
//! use rlm_registry::Registry;
//! use rlm_registry::environment::Environment;
//! use rlm_registry::providers::{HostFunction, Provider, Providers};
//!
//! struct Users;
//!
//! impl Provider for Users {
//!     fn name(&self) -> &str { "users" }
//!     fn description(&self) -> &str { "The user directory." }
//!     fn functions(&self) -> Vec<HostFunction> {
//!         vec![HostFunction::typed(
//!             "user_name",
//!             "--- Looks up a user's name by id.\n---@param id integer The user id\n---@return string name",
//!             |_call, (id,): (i64,)| match id {
//!                 1 => Ok("Ada".to_string()),
//!                 _ => Err(format!("no user {id}")),
//!             },
//!         )]
//!     }
//! }
//!
//! let mut providers = Providers::builtin();
//! providers.register(Users)?;
//! let env = Environment::builder(Registry::baked().clone())
//!     .providers(Arc::new(providers))
//!     .build()?;
//! assert_eq!(env.execute("print(user_name(1))")?.output, "Ada\n");
//! let err = env.execute("user_name(2)").unwrap_err();
//! assert!(err.message().contains("user_name: no user 2"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Precedence: a host function may not take the name of a Lua standard global or of a
//! built-in (an error); registering a name that another host provider has replaces it
//! (reported in the [`Registration`]); a host function shadows a registry (Lua) function
//! of the same name (reported by [`Catalog::shadowed`](crate::catalog::Catalog::shadowed)).

mod builtin;
mod config;
mod files;
pub(crate) mod host;
mod route;
mod set;
mod shell;
mod store;

pub use config::{Config, ConfigError, DEFAULT_FILE};
pub use files::{Edit, FileEntry, Files, FilesConfig, FilesProvider};
pub(crate) use host::HostHandler;
pub use host::{Call, Effect, HostFunction, RawHandler};
pub use route::{Method, Route, RouteRequest, RouteResponse};
pub use set::{ProviderError, ProviderInfo, ProviderSummary, Providers, Registration};
pub use shell::{Shell, ShellConfig, ShellOutput, ShellProvider};
pub use store::{Store, StoreProvider};

pub use crate::conventions::builtins::Scope;

/// Where an agent stands in its tree, which decides the scopes it has.
///
/// ```
/// use rlm_registry::providers::{AgentScope, Scope};
///
/// let child_at_limit = AgentScope { depth: 1, can_spawn: false };
/// assert!(child_at_limit.allows(Scope::Core));
/// assert!(!child_at_limit.allows(Scope::Agent));
/// assert!(!child_at_limit.allows(Scope::User));
/// assert!(AgentScope::TOP.allows(Scope::User));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentScope {
    /// 0 for the top-level agent, 1 for its children, …
    pub depth: usize,
    /// Whether a child may still be started from here (false at the depth limit).
    pub can_spawn: bool,
}

impl AgentScope {
    /// The top-level agent, which may start children: every scope.
    pub const TOP: AgentScope = AgentScope {
        depth: 0,
        can_spawn: true,
    };

    /// Whether an agent here may call functions of `scope`.
    pub fn allows(self, scope: Scope) -> bool {
        match scope {
            Scope::Core => true,
            Scope::Agent => self.can_spawn,
            Scope::User => self.depth == 0,
        }
    }

    /// Why `name` (of `scope`) cannot be called here, in words the model can act on.
    pub fn refusal(self, name: &str, scope: Scope) -> String {
        let why = match scope {
            Scope::Core => "",
            Scope::Agent => {
                "agent-scope functions start child agents, and this agent is at the depth limit; use llm_query for a plain sub-model call"
            }
            Scope::User => {
                "user-scope functions reach the human, which only the top-level agent may do; return what you need to ask in your answer instead"
            }
        };
        format!(
            "{name} is not available to this agent (depth {}): it is in the `{scope}` scope; {why}",
            self.depth
        )
    }
}

impl Default for AgentScope {
    fn default() -> Self {
        AgentScope::TOP
    }
}

/// A group of host functions, registered together with [`Providers::register`].
///
/// `Send + Sync`: one provider serves every environment of a host, on any thread.
pub trait Provider: Send + Sync {
    /// The provider's name (`files`, `users`, …): an identifier, unique in a set.
    fn name(&self) -> &str;
    /// One line on what it offers.
    fn description(&self) -> &str;
    /// Its functions, each with its doc, scope and handler.
    fn functions(&self) -> Vec<HostFunction>;
    /// Its management routes: HTTP endpoints for the host, not the model,
    /// which `rlm serve` mounts under `/v1/providers/<name>/`. None by default.
    fn routes(&self) -> Vec<Route> {
        Vec::new()
    }
}
