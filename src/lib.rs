//! # rlm-registry
//!
//! Lua function registries for Recursive Language Model (RLM) agents: documented Lua
//! helpers, validated against a set of conventions and baked into the binary at compile
//! time, whose documentation doubles as the model's system prompt.
//!
//! An RLM answers questions over huge contexts by writing code in a REPL; here that REPL
//! is a sandboxed Lua 5.4 VM, and the registry is the library of helper functions
//! available in it. Data flows one way:
//!
//! ```text
//! .lua files ─▶ conventions (parse, validate, extract) ─▶ Registry (baked or loaded)
//!             ─▶ Environment (sandboxed Lua VM, functions loaded lazily)
//! ```
//!
//! - [`conventions`]: the rules a registry file must follow (E001–E011) and the
//!   extraction of each exposed [`Function`] with its doc, parameters and returns.
//! - [`registry`]: [`Registry::from_paths`], [`Registry::from_map`], [`Registry::baked`],
//!   lookups and [`Registry::system_prompt`].
//! - [`search`]: BM25 search over a registry (index baked at build time for baked
//!   registries), capabilities, sources, lookup by id, and the LLM rerank modes.
//! - `codegen` (feature `build`): the `Builder` that `build.rs` uses to bake
//!   directories, this crate's and yours.
//!
//! With the `runtime` feature (on by default):
//!
//! - `environment`: the sandboxed Lua 5.4 VM that runs model-written code with
//!   the registry's functions, under time, memory and output limits.
//! - `llm`: the OpenAI-compatible client with retries and usage accounting.
//! - `tools`: registry functions as JSON-Schema tools (OpenAI, Anthropic, MCP),
//!   called with JSON arguments, and the bounded tool-calling dispatch loop.
//! - `rlm`: the RLM loop: the model writes Lua over the context until `FINAL`, with
//!   error recovery, `rlm_query` children, shared budgets and JSONL trajectories.
//! - `tokens`: exact `o200k_base` token counts.
//!
//! With the `serve` feature (in the default `cli` build): `serve`, the registry and the
//! Lua REPL over MCP (stdio, streamable HTTP) and a JSON HTTP API.
//!
//! ```
//! use rlm_registry::Registry;
//!
//! let registry = Registry::baked();
//! for (name, function) in registry.iter_functions() {
//!     assert!(!function.description().is_empty(), "{name} is documented");
//! }
//! println!("{}", registry.system_prompt());
//! ```

// Generated code names this crate `::rlm_registry`, inside it as well as outside.
extern crate self as rlm_registry;

mod baked;
#[cfg(feature = "runtime")]
pub mod catalog;
#[cfg(feature = "build")]
pub mod codegen;
pub mod conventions;
#[cfg(feature = "runtime")]
pub mod environment;
#[cfg(feature = "runtime")]
pub mod llm;
#[cfg(feature = "runtime")]
pub mod providers;
pub mod registry;
#[cfg(feature = "runtime")]
pub mod rlm;
pub mod search;
#[cfg(feature = "serve")]
pub mod serve;
#[cfg(feature = "runtime")] // until Scope moves below the spec
pub mod spec;
#[cfg(feature = "runtime")]
pub mod tokens;
#[cfg(feature = "runtime")]
pub mod tools;

pub use conventions::{Code, Diagnostic, Function, Param, Return, Severity};
pub use registry::{Chunk, LoadError, Override, Registry};

/// Includes a registry baked by `codegen::Builder` (feature `build`) in your `build.rs`, defining
/// `static REGISTRY: rlm_registry::Registry`. With no argument it includes the default
/// output (`rlm_registry.rs`); pass the name given to `Builder::file_name` otherwise.
///
/// ```ignore
/// rlm_registry::include_registry!();
/// let prompt: &'static str = REGISTRY.system_prompt();
/// ```
#[macro_export]
macro_rules! include_registry {
    () => {
        $crate::include_registry!("rlm_registry");
    };
    ($name:literal) => {
        include!(concat!(env!("OUT_DIR"), "/", $name, ".rs"));
    };
}
