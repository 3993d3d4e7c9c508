//! The one description of "a function the model can call": a registry (Lua) function, a
//! built-in or a provider's host function, as a [`FunctionSpec`] — its documentation as
//! the conventions extracted it ([`Function`]: name, doc, description, params and
//! returns with their LuaLS types, tags, file) and where it comes from ([`Origin`], with
//! its [`Scope`]).
//!
//! Every reader takes this one value: the system prompt, `help`, `fn_search`, `rlm
//! list/show/search/tools/providers`, lookup ids, the tool exports, the tool dispatcher,
//! MCP and the JSON API. Its JSON form is built by [`FunctionSpec::json`] alone, its
//! tool form by [`function_tool`] alone and kept (see [`FunctionSpec::tool`]).
//!
//! ```
//! use rlm_registry::Registry;
//!
//! let registry = Registry::from_map([("hi", "--- Says hi.\n---@return string\nfunction hi() return 'hi' end")])?;
//! let spec = registry.spec("hi").unwrap();
//! assert_eq!(spec.id(), "lua:hi");
//! assert_eq!(spec.tool().unwrap().name, "hi");
//! assert_eq!(spec.json()["source"], "registry");
//! assert_eq!(spec.json()["signature"], "hi()");
//! # Ok::<(), rlm_registry::LoadError>(())
//! ```

mod tool;

use serde_json::{Value, json};

use crate::conventions::Function;
pub use crate::conventions::builtins::Scope;
pub use tool::{NotExportable, Tool, ToolCell, ToolParam, VARARGS_PROPERTY, function_tool};

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
pub struct FunctionSpec<'a> {
    /// Name, doc, parameters, returns, tags, file.
    pub function: &'a Function,
    /// Where it comes from.
    pub origin: Origin<'a>,
    /// Where its tool form is kept.
    tool: &'a ToolCell,
}

impl<'a> FunctionSpec<'a> {
    /// The description of `function` from `origin`, its tool form kept in `tool` (the
    /// registry's or provider's cell for that function).
    pub fn new(function: &'a Function, origin: Origin<'a>, tool: &'a ToolCell) -> Self {
        FunctionSpec {
            function,
            origin,
            tool,
        }
    }

    /// The same function and tool form from another origin: a provider's host function
    /// is checked as a registry function first, then named as the provider's.
    pub fn with_origin(self, origin: Origin<'a>) -> Self {
        FunctionSpec { origin, ..self }
    }

    /// Its tool form (JSON Schema parameters), or why it cannot be a tool: computed the
    /// first time any reader asks, then shared by all.
    pub fn tool(&self) -> Result<&'a Tool, &'a NotExportable> {
        self.tool.get_or_build(self.function)
    }

    /// The global name the model calls it by.
    pub fn name(&self) -> &'a str {
        self.function.name()
    }

    /// Its lookup id: `builtin:<name>`, `provider:<provider>:<name>` or `lua:<name>`.
    pub fn id(&self) -> String {
        match self.origin {
            Origin::Registry { .. } => format!("lua:{}", self.name()),
            Origin::Provider { builtin: true, .. } => format!("builtin:{}", self.name()),
            Origin::Provider { provider, .. } => format!("provider:{provider}:{}", self.name()),
        }
    }

    /// Whether it is one of the built-ins (`print`, `llm_query`, …), which run only
    /// inside Lua.
    pub fn is_builtin(&self) -> bool {
        matches!(self.origin, Origin::Provider { builtin: true, .. })
    }

    /// Whether it is a host function (implemented in Rust).
    pub fn is_host(&self) -> bool {
        matches!(self.origin, Origin::Provider { .. })
    }

    /// Who may call it: a registry function is core.
    pub fn scope(&self) -> Scope {
        match self.origin {
            Origin::Registry { .. } => Scope::Core,
            Origin::Provider { scope, .. } => scope,
        }
    }

    /// `source` in its JSON: `registry`, `builtin` or `provider`.
    pub fn source(&self) -> &'static str {
        match self.origin {
            Origin::Registry { .. } => "registry",
            Origin::Provider { builtin: true, .. } => "builtin",
            Origin::Provider { .. } => "provider",
        }
    }

    /// `provider:<name>` for host functions, the directory for registry ones.
    pub fn label(&self) -> String {
        match self.origin {
            Origin::Registry { dir } => dir.to_string(),
            Origin::Provider { provider, .. } => format!("provider:{provider}"),
        }
    }

    /// Its description as JSON — what `rlm list --json` and `rlm show --json` print, what
    /// `GET /v1/functions` lists — built here and nowhere else: `id`, `name`,
    /// `signature`, `summary`, `description`, `doc`, `params` (name, type, optional,
    /// description), `returns` (type, name, description), `file`, `line`, `dir`,
    /// `source` (`registry`, `builtin` or `provider`), `scope`, for host functions
    /// `provider`; and its tool form: `tool` (whether it can be called with JSON; the
    /// built-ins run only inside Lua), then `input_schema` and `output_schema` (when its
    /// result has a JSON type), or `not_a_tool` with the reason.
    pub fn json(&self) -> Value {
        let function = self.function;
        let params: Vec<Value> = function
            .params()
            .iter()
            .map(|p| {
                json!({"name": p.name(), "type": p.ty(), "optional": p.optional(), "description": p.description()})
            })
            .collect();
        let returns: Vec<Value> = function
            .returns()
            .iter()
            .map(|r| json!({"type": r.ty(), "name": r.name(), "description": r.description()}))
            .collect();
        let mut value = json!({
            "id": self.id(),
            "name": function.name(),
            "signature": function.signature(),
            "summary": function.summary(),
            "description": function.description(),
            "doc": function.doc(),
            "params": params,
            "returns": returns,
            "file": function.file(),
            "line": function.line(),
            "dir": function.dir(),
            "source": self.source(),
            "scope": self.scope().name(),
        });
        if let Origin::Provider { provider, .. } = self.origin {
            value["provider"] = provider.into();
        }
        self.add_tool_json(&mut value);
        value
    }

    fn add_tool_json(&self, value: &mut Value) {
        if self.is_builtin() {
            value["tool"] = false.into();
            return;
        }
        match self.tool() {
            Ok(tool) => {
                value["tool"] = true.into();
                value["input_schema"] = tool.parameters.clone();
                if let Some(output) = tool.output_schema() {
                    value["output_schema"] = output;
                }
            }
            Err(reason) => {
                value["tool"] = false.into();
                value["not_a_tool"] = reason.reason.clone().into();
            }
        }
    }
}

/// The name in `candidates` most like `name`, for every "did you mean" the crate gives
/// (the environment's error hints, `rlm show`, the JSON API, tool calls): Jaro-Winkler
/// above 0.8 on the names with case and underscores set aside, the candidate's words
/// taken in any order (`countlines` finds `line_count`), never `name` itself.
///
/// ```
/// use rlm_registry::spec::closest_name;
/// assert_eq!(closest_name("grep_txt", ["grep_text", "lines"]), Some("grep_text"));
/// assert_eq!(closest_name("Print", ["print", "pairs"]), Some("print"));
/// assert_eq!(closest_name("wordcount", ["word_count", "line_count"]), Some("word_count"));
/// assert_eq!(closest_name("countlines", ["word_count", "line_count"]), Some("line_count"));
/// assert_eq!(closest_name("zzz", ["grep_text", "lines"]), None);
/// assert_eq!(closest_name(&"grep_text".repeat(20), ["grep_text"]), None);
/// ```
pub fn closest_name<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    // A name this long is like no function name, and comparing it with each would take
    // time in proportion to its length (code may look up any text).
    if name.len() > MAX_LIKENED_NAME_BYTES {
        return None;
    }
    let wanted = squashed(name);
    candidates
        .into_iter()
        .filter(|&candidate| candidate != name)
        .map(|candidate| (likeness(&wanted, candidate), candidate))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// Names longer than this get no "did you mean".
const MAX_LIKENED_NAME_BYTES: usize = 128;

/// Names longer than this many words are compared in their own order only: the orders
/// grow as a factorial.
const MAX_REORDERED_WORDS: usize = 4;

/// How like `wanted` (squashed) `candidate` is, in the best order of its words.
fn likeness(wanted: &str, candidate: &str) -> f64 {
    let words: Vec<String> = candidate
        .split('_')
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut best = strsim::jaro_winkler(wanted, &squashed(candidate));
    if (2..=MAX_REORDERED_WORDS).contains(&words.len()) {
        for_each_order(&mut words.clone(), 0, &mut |order| {
            best = best.max(strsim::jaro_winkler(wanted, &order.concat()));
        });
    }
    best
}

/// `name` lower-cased without underscores: `Word_Count` and `wordcount` are alike.
fn squashed(name: &str) -> String {
    name.chars()
        .filter(|&c| c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Calls `visit` with every order of `words[from..]`: each word in turn at `from`, the
/// rest ordered after it.
fn for_each_order(words: &mut [String], from: usize, visit: &mut impl FnMut(&[String])) {
    if from + 1 >= words.len() {
        visit(words);
        return;
    }
    for i in from..words.len() {
        words.swap(from, i);
        for_each_order(words, from + 1, visit);
        words.swap(from, i);
    }
}
