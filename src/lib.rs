//! # rlm-registry
//!
//! Lua function registries for Recursive Language Model (RLM) agents: documented Lua
//! helpers, validated against a set of conventions and baked into the binary at compile
//! time, whose documentation doubles as the model's system prompt; and the sandboxed Lua
//! 5.4 environment, the RLM loop and the server that run them.
//!
//! An RLM answers questions over huge contexts by writing code in a REPL; here that REPL
//! is a sandboxed Lua 5.4 VM, and the registry is the library of helper functions
//! available in it. The crate is a stack of layers, each a module that uses only the
//! ones before it (`ARCHITECTURE.md` at the repository root says more; a test enforces
//! the order):
//!
//! ```text
//! conventions → spec → registry → search → providers → catalog → engines
//!             → hints → environment → testing, tools → rlm → trace → eval → serve → cli
//! leaves, for every layer from search up: llm, tokens, text_format, allocator
//! ```
//!
//! 1. [`conventions`]: the rules a registry file must follow (E001–E011) and the
//!    extraction of each exposed [`Function`]; the built-ins table.
//!
//!    ```
//!    let check = rlm_registry::conventions::check_file("bad.lua", "function f() end");
//!    assert_eq!(check.diagnostics[0].code.as_str(), "E002"); // no doc comment
//!    ```
//! 2. [`spec`]: `FunctionSpec`, the one description of a function the model can
//!    call — registry function, built-in or host function — with its JSON and tool forms.
//! 3. [`registry`]: [`Registry::from_paths`], [`Registry::from_map`], [`Registry::baked`],
//!    precedence, [`Registry::system_prompt`] and the search index data.
//!
//!    ```
//!    let registry = rlm_registry::Registry::baked();
//!    assert!(registry.system_prompt().starts_with("## Registry functions"));
//!    ```
//! 4. [`search`]: BM25 ranking over a registry's index, and the LLM rerank modes.
//!
//!    ```
//!    use rlm_registry::search::{FunctionSearch, SearchOptions};
//!    let hits = rlm_registry::Registry::baked().search("count words", &SearchOptions::default());
//!    # #[cfg(feature = "text")]
//!    assert_eq!(hits[0].name, "word_count");
//!    ```
//! 5. `providers` (runtime): host functions in Rust, grouped and scoped; the built-ins are
//!    providers too.
//! 6. `catalog` (runtime): what one agent may call — host functions in scope, then
//!    registry functions — with lookup by id and "did you mean".
//! 7. `environment` (runtime): the sandboxed VM, under time, memory and output limits,
//!    with registry functions loaded lazily; the text engines its built-ins run on
//!    (patterns, `re`, `grep`, the library's primitives) are a layer of their own below
//!    it, internal to the crate, and so is `hints` (runtime), which turns a failed
//!    execution's error into a one-line hint for the model (Python written as Lua, "did
//!    you mean").
//!
//!    ```
//!    # #[cfg(feature = "runtime")] {
//!    use rlm_registry::environment::{Environment, Limits};
//!    let env = Environment::new(rlm_registry::Registry::baked().clone(), Limits::default())?;
//!    assert_eq!(env.execute("print(1 + 1)")?.output, "2\n");
//!    # }
//!    # Ok::<(), Box<dyn std::error::Error>>(())
//!    ```
//!    `testing` (runtime) runs the examples in doc comments and `*_test.lua` files
//!    there (`rlm test`).
//! 8. `tools` (runtime): functions as JSON-Schema tools (OpenAI, Anthropic, MCP), JSON
//!    calls and the bounded tool-calling loop.
//! 9. `rlm` (runtime): the loop — the model writes Lua over the context until `FINAL` —
//!    with child agents, budgets and JSONL trajectories.
//! 10. `trace` (runtime): a run's trace read back, shown as a tree in the terminal or as
//!     one HTML page, and exported to the reference RLM's log format.
//! 11. `eval` (runtime): answer quality on generated tasks (needle in a haystack,
//!     OOLONG-style aggregation and pairs, logs), the RLM loop beside the direct baseline.
//! 12. `serve` (feature `serve`): MCP (stdio, streamable HTTP) and the JSON HTTP API.
//!
//! Beside them, leaves every layer from `search` up may use: `llm`, the OpenAI-compatible
//! client; `tokens`, exact `o200k_base` counts; `text_format`, how text is cut, escaped
//! and numbers written for a reader; `allocator`, the allocator a program running
//! environments installs. And `codegen` (feature `build`), the `Builder` a `build.rs`
//! uses to bake directories, this crate's and yours.
//!
//! ```
//! use rlm_registry::Registry;
//!
//! let registry = Registry::baked();
//! for (name, function) in registry.iter_functions() {
//!     assert!(!function.description().is_empty(), "{name} is documented");
//! }
//! ```

#![deny(missing_docs)]

// Generated code names this crate `::rlm_registry`, inside it as well as outside.
extern crate self as rlm_registry;

#[cfg(feature = "acp")]
pub mod acp;
#[cfg(feature = "runtime")]
pub mod allocator;
mod baked;
#[cfg(feature = "runtime")]
pub mod catalog;
#[cfg(feature = "build")]
pub mod codegen;
pub mod conventions;
#[cfg(feature = "runtime")]
pub mod corpus;
#[cfg(feature = "runtime")]
pub(crate) mod engines;
#[cfg(feature = "runtime")]
pub mod environment;
#[cfg(feature = "runtime")]
pub mod eval;
#[cfg(feature = "runtime")]
pub mod hints;
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
#[cfg(feature = "runtime")]
pub mod setup;
pub mod spec;
#[cfg(feature = "runtime")]
pub mod testing;
#[cfg(feature = "runtime")]
pub(crate) mod text_format;
#[cfg(feature = "runtime")]
pub mod tokens;
#[cfg(feature = "runtime")]
pub mod tools;
#[cfg(feature = "runtime")]
pub mod trace;

pub use conventions::{Code, Diagnostic, Function, Param, Return, Severity};
pub use registry::{Chunk, LoadError, Override, Registry};

/// The Rust blocks of the README and of the pages of `docs/`, compiled and run as doctests
/// (`cargo test --doc`) so that they keep to the API; each page with the features its
/// blocks need. A block that needs a server or a network is `no_run`, and one that is not
/// Rust names its language. `tests/it/docs_links.rs` checks that every page is here.
#[cfg(doctest)]
mod doc_pages {
    #[cfg(all(feature = "runtime", feature = "text"))]
    #[doc = include_str!("../README.md")]
    mod readme {}
    #[doc = include_str!("../docs/README.md")]
    mod docs_readme {}
    #[doc = include_str!("../docs/acp.md")]
    mod acp {}
    #[cfg(feature = "runtime")]
    #[doc = include_str!("../docs/cache.md")]
    mod cache {}
    #[cfg(feature = "runtime")]
    #[doc = include_str!("../docs/checkpoints.md")]
    mod checkpoints {}
    #[doc = include_str!("../docs/cli.md")]
    mod cli {}
    #[cfg(feature = "runtime")]
    #[doc = include_str!("../docs/configuration.md")]
    mod configuration {}
    #[doc = include_str!("../docs/conventions.md")]
    mod conventions {}
    #[cfg(feature = "runtime")]
    #[doc = include_str!("../docs/corpora.md")]
    mod corpora {}
    #[doc = include_str!("../docs/dependencies.md")]
    mod dependencies {}
    #[cfg(feature = "runtime")]
    #[doc = include_str!("../docs/eval.md")]
    mod eval {}
    #[cfg(feature = "runtime")]
    #[doc = include_str!("../docs/loop.md")]
    mod r#loop {}
    #[doc = include_str!("../docs/lua-library.md")]
    mod lua_library {}
    #[doc = include_str!("../docs/performance.md")]
    mod performance {}
    #[cfg(feature = "runtime")]
    #[doc = include_str!("../docs/providers.md")]
    mod providers {}
    #[doc = include_str!("../docs/python.md")]
    mod python {}
    #[doc = include_str!("../docs/python-to-lua.md")]
    mod python_to_lua {}
    #[doc = include_str!("../docs/regex-json-csv.md")]
    mod regex_json_csv {}
    #[cfg(feature = "runtime")]
    #[doc = include_str!("../docs/resume.md")]
    mod resume {}
    #[cfg(all(feature = "build", feature = "text"))]
    #[doc = include_str!("../docs/registry.md")]
    mod registry {}
    #[cfg(all(feature = "runtime", feature = "text"))]
    #[doc = include_str!("../docs/sandbox.md")]
    mod sandbox {}
    #[cfg(feature = "text")]
    #[doc = include_str!("../docs/search.md")]
    mod search {}
    #[cfg(feature = "serve")]
    #[doc = include_str!("../docs/serving.md")]
    mod serving {}
    #[cfg(all(feature = "runtime", feature = "text"))]
    #[doc = include_str!("../docs/tools.md")]
    mod tools {}
    #[doc = include_str!("../docs/traces.md")]
    mod traces {}
}

/// Includes a registry baked by `codegen::Builder` (feature `build`) in your `build.rs`, defining
/// `static REGISTRY: rlm_registry::Registry`. With no argument it includes the default
/// output (`rlm_registry.rs`); pass the name given to `Builder::file_name` otherwise.
///
/// ```
/// rlm_registry::include_registry!();
///
/// fn main() {
///     let prompt: &'static str = REGISTRY.system_prompt();
///     assert!(prompt.starts_with("## Registry functions"));
/// }
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
