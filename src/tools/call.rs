//! Calling a registry function with JSON arguments: check them against the tool's
//! schema, call the function in a sandboxed [`Environment`], get JSON back.
//!
//! ```
//! use serde_json::json;
//! use rlm_registry::{Registry, environment::Limits, tools::ToolCaller};
//!
//! let caller = ToolCaller::new(Registry::baked().clone(), Limits::default())?;
//! assert_eq!(caller.call("word_count", &json!({"text": "a b c"}))?, json!(3));
//! let error = caller.call("word_count", &json!({"text": 3})).unwrap_err();
//! assert_eq!(
//!     error.to_string(),
//!     "invalid arguments for `word_count`: $.text: expected a string, or an object or an array, got 3"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::Registry;
use crate::conventions::lua_type::LuaType;
use crate::environment::{Environment, ExecError, Limits, SetupError};
use crate::providers::Providers;
use crate::spec::{NotExportable, Tool};
use crate::text_format::cut_chars;

/// Why a call failed.
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    /// No registry function has this name.
    UnknownFunction {
        /// The name asked for.
        name: String,
        /// The closest registry name, if any is close.
        suggestion: Option<String>,
    },
    /// The function exists but cannot be called as a tool.
    NotExportable(NotExportable),
    /// The arguments do not match the schema.
    InvalidArguments {
        /// The function.
        name: String,
        /// Where, as a JSON path (`$.text`, `$.options.limit`, `$.items[2]`).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// The sandbox to run the call in could not be set up.
    Setup(String),
    /// The function raised an error, hit a limit, or returned something JSON cannot hold.
    Execution {
        /// The function.
        name: String,
        /// The error.
        error: ExecError,
    },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::UnknownFunction { name, suggestion } => {
                write!(f, "unknown function `{name}`")?;
                if let Some(suggestion) = suggestion {
                    write!(f, " (did you mean `{suggestion}`?)")?;
                }
                Ok(())
            }
            CallError::NotExportable(error) => error.fmt(f),
            CallError::InvalidArguments {
                name,
                path,
                message,
            } => write!(f, "invalid arguments for `{name}`: {path}: {message}"),
            CallError::Setup(message) => f.write_str(message),
            CallError::Execution { name, error } => write!(f, "`{name}` failed: {error}"),
        }
    }
}

impl std::error::Error for CallError {}

/// Checks `value` against `ty` (the subset of JSON Schema that [`LuaType::schema`]
/// generates), returning the path and the problem of the first mismatch.
///
/// ```
/// use serde_json::json;
/// use rlm_registry::tools::{call::validate, parse_type};
///
/// let ty = parse_type("{ name: string, tags?: string[] }").unwrap();
/// assert!(validate(&json!({"name": "a", "tags": ["x"]}), &ty, "$").is_ok());
/// let (path, _) = validate(&json!({"name": "a", "tags": ["x", 1]}), &ty, "$").unwrap_err();
/// assert_eq!(path, "$.tags[1]");
/// ```
pub fn validate(value: &Value, ty: &LuaType, path: &str) -> Result<(), (String, String)> {
    let mismatch = |expected: &str| {
        Err((
            path.to_string(),
            format!("expected {expected}, got {}", short(value)),
        ))
    };
    match ty {
        LuaType::Any => Ok(()),
        LuaType::Nil if value.is_null() => Ok(()),
        LuaType::Nil => mismatch("null"),
        LuaType::String if value.is_string() => Ok(()),
        LuaType::String => mismatch("a string"),
        LuaType::Number if value.is_number() => Ok(()),
        LuaType::Number => mismatch("a number"),
        LuaType::Integer if is_integer(value) => Ok(()),
        LuaType::Integer => mismatch("an integer"),
        LuaType::Boolean if value.is_boolean() => Ok(()),
        LuaType::Boolean => mismatch("a boolean"),
        LuaType::Literal(literal) if value.as_str() == Some(literal) => Ok(()),
        LuaType::Literal(literal) => mismatch(&format!("{literal:?}")),
        LuaType::Table if value.is_object() || value.is_array() => Ok(()),
        LuaType::Table => mismatch("an object or an array"),
        LuaType::Array(items) => match value {
            Value::Array(values) => values
                .iter()
                .enumerate()
                .try_for_each(|(i, item)| validate(item, items, &format!("{path}[{i}]"))),
            _ => mismatch("an array"),
        },
        LuaType::Map(values) => match value {
            Value::Object(object) => object
                .iter()
                .try_for_each(|(key, item)| validate(item, values, &child(path, key))),
            _ => mismatch("an object"),
        },
        LuaType::Record(fields) => {
            let Value::Object(object) = value else {
                return mismatch("an object");
            };
            for field in fields {
                match object.get(&field.name) {
                    Some(item) => validate(item, &field.ty, &child(path, &field.name))?,
                    None if field.optional => {}
                    None => {
                        return Err((
                            path.to_string(),
                            format!("missing required property `{}`", field.name),
                        ));
                    }
                }
            }
            Ok(())
        }
        LuaType::Union(alternatives) => {
            if alternatives
                .iter()
                .any(|alternative| validate(value, alternative, path).is_ok())
            {
                return Ok(());
            }
            let words: Vec<String> = alternatives.iter().map(expected_of).collect();
            match alternatives
                .iter()
                .all(|a| matches!(a, LuaType::Literal(_)))
            {
                true => mismatch(&format!("one of {}", words.join(", "))),
                false => mismatch(&words.join(", or ")),
            }
        }
    }
}

/// What a value of `ty` is, in the words of a mismatch: `a string`, `"fast"`, or the
/// type's JSON Schema where words would not be shorter.
fn expected_of(ty: &LuaType) -> String {
    match ty {
        LuaType::Nil => "null".into(),
        LuaType::String => "a string".into(),
        LuaType::Number => "a number".into(),
        LuaType::Integer => "an integer".into(),
        LuaType::Boolean => "a boolean".into(),
        LuaType::Literal(literal) => format!("{literal:?}"),
        LuaType::Table => "an object or an array".into(),
        LuaType::Array(_) => "an array".into(),
        LuaType::Map(_) | LuaType::Record(_) => "an object".into(),
        other => other.schema().to_string(),
    }
}

/// `value` with each empty array or object given the kind `ty` documents at its place:
/// Lua has one empty table, which the Lua ↔ JSON mapping writes as `{}` unless it is
/// marked with `json.array`, so a function documented to return `string[]` that returns
/// `{}` answers `[]` (and an empty array where an object is documented is `{}`).
/// Anything else is left as it is, for [`validate`] to judge.
///
/// ```
/// use serde_json::json;
/// use rlm_registry::tools::{call::empty_tables_as_documented, parse_type};
///
/// let ty = parse_type("{ names: string[], counts: table<string, integer> }").unwrap();
/// let value = json!({"names": {}, "counts": []});
/// assert_eq!(empty_tables_as_documented(value, &ty), json!({"names": [], "counts": {}}));
/// ```
pub fn empty_tables_as_documented(value: Value, ty: &LuaType) -> Value {
    match (ty, value) {
        (LuaType::Array(_), Value::Object(object)) if object.is_empty() => Value::Array(Vec::new()),
        (LuaType::Map(_) | LuaType::Record(_), Value::Array(items)) if items.is_empty() => {
            Value::Object(serde_json::Map::new())
        }
        (LuaType::Array(item), Value::Array(items)) => Value::Array(
            items
                .into_iter()
                .map(|value| empty_tables_as_documented(value, item))
                .collect(),
        ),
        (LuaType::Map(item), Value::Object(object)) => Value::Object(
            object
                .into_iter()
                .map(|(key, value)| (key, empty_tables_as_documented(value, item)))
                .collect(),
        ),
        (LuaType::Record(fields), Value::Object(object)) => Value::Object(
            object
                .into_iter()
                .map(|(key, value)| {
                    let value = match fields.iter().find(|field| field.name == key) {
                        Some(field) => empty_tables_as_documented(value, &field.ty),
                        None => value,
                    };
                    (key, value)
                })
                .collect(),
        ),
        (LuaType::Union(alternatives), value) => {
            if validate(&value, ty, "$").is_ok() {
                return value;
            }
            // The first alternative the value fits once its empty tables are shaped.
            alternatives
                .iter()
                .map(|alternative| {
                    (
                        alternative,
                        empty_tables_as_documented(value.clone(), alternative),
                    )
                })
                .find(|(alternative, shaped)| validate(shaped, alternative, "$").is_ok())
                .map_or(value, |(_, shaped)| shaped)
        }
        (_, value) => value,
    }
}

/// JSON Schema's `integer`: a number with no fractional part (`2.0` counts).
fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64()
                || n.is_u64()
                || n.as_f64()
                    .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
        }
        _ => false,
    }
}

fn child(path: &str, key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_alphanumeric() || c == '_') {
        format!("{path}.{key}")
    } else {
        format!("{path}[{}]", Value::String(key.to_string()))
    }
}

/// A value, shortened for an error message.
fn short(value: &Value) -> String {
    cut_chars(&value.to_string(), 60)
}

/// Checks a tool call's arguments (a JSON object) against `tool` and orders them as
/// the function's positional arguments.
pub fn positional_args(tool: &Tool, arguments: &Value) -> Result<Vec<Value>, CallError> {
    let invalid = |path: String, message: String| CallError::InvalidArguments {
        name: tool.name.clone(),
        path,
        message,
    };
    let empty = serde_json::Map::new();
    let object = match arguments {
        Value::Object(object) => object,
        // No parameters: `null` is as good as `{}`.
        Value::Null => &empty,
        other => {
            return Err(invalid(
                "$".to_string(),
                format!(
                    "expected an object of named arguments, got {}",
                    short(other)
                ),
            ));
        }
    };
    if let Some(unknown) = object
        .keys()
        .find(|key| !tool.params.iter().any(|p| &p.name == *key))
    {
        let known: Vec<&str> = tool.params.iter().map(|p| p.name.as_str()).collect();
        return Err(invalid(
            "$".to_string(),
            format!(
                "unknown property `{unknown}` (parameters: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        ));
    }
    let mut args = Vec::with_capacity(tool.params.len());
    // Omitted optional parameters become `nil`; trailing ones are dropped.
    let mut pending_nils = 0;
    for param in &tool.params {
        match object.get(&param.name) {
            None if param.optional => pending_nils += 1,
            None => {
                return Err(invalid(
                    "$".to_string(),
                    format!("missing required property `{}`", param.name),
                ));
            }
            Some(value) => {
                validate(value, &param.ty, &child("$", &param.name))
                    .map_err(|(path, message)| invalid(path, message))?;
                args.extend(std::iter::repeat_n(Value::Null, pending_nils));
                pending_nils = 0;
                match (param.vararg, value) {
                    (true, Value::Array(items)) => args.extend(items.iter().cloned()),
                    _ => args.push(value.clone()),
                }
            }
        }
    }
    Ok(args)
}

/// The functions an agent may call as tools: registry functions and the host functions
/// of providers (the built-ins only when asked for: most of them act on a REPL session),
/// called in one sandboxed [`Environment`] (globals persist from one call to the next,
/// as in a REPL session). Not `Send`, like the environment.
pub struct ToolCaller {
    environment: Environment,
    tools: BTreeMap<String, Result<Tool, NotExportable>>,
}

impl ToolCaller {
    /// Calls `name` — any function of `providers`, built-ins included — with JSON
    /// arguments keyed by parameter name, checked against its
    /// schema, in a fresh sandboxed environment offering that set at the top level.
    ///
    /// ```
    /// use rlm_registry::providers::{HostFunction, Providers};
    /// use rlm_registry::tools::ToolCaller;
    ///
    /// let mut providers = Providers::builtin();
    /// let ping = HostFunction::typed("ping", "--- Answers pong.\n---@return string", |_, (): ()| Ok::<_, String>("pong"));
    /// providers.register_function("net", ping)?;
    /// assert_eq!(ToolCaller::execute(&providers, "ping", &serde_json::json!({}))?, serde_json::json!("pong"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn execute(
        providers: &Providers,
        name: &str,
        arguments: &Value,
    ) -> Result<Value, CallError> {
        let environment = Environment::builder(Registry::empty())
            .providers(Arc::new(providers.clone()))
            .build()
            .map_err(|error| CallError::Setup(error.to_string()))?;
        ToolCaller::over(environment, true).call(name, arguments)
    }

    /// A caller for `registry`'s functions, each call under `limits`.
    pub fn new(
        registry: impl Into<Arc<Registry>>,
        limits: Limits,
    ) -> Result<ToolCaller, SetupError> {
        ToolCaller::with_providers(registry, Arc::new(Providers::builtin()), limits)
    }

    /// A caller for `registry`'s functions and the host functions of `providers`' own
    /// (not built-in) providers, as seen by a top-level agent.
    pub fn with_providers(
        registry: impl Into<Arc<Registry>>,
        providers: Arc<Providers>,
        limits: Limits,
    ) -> Result<ToolCaller, SetupError> {
        let environment = Environment::builder(registry)
            .providers(providers)
            .limits(limits)
            .build()?;
        Ok(ToolCaller::over(environment, false))
    }

    /// A caller over an environment built by the host: its catalog decides the tools,
    /// with the built-ins too if `builtins`.
    pub fn over(environment: Environment, builtins: bool) -> ToolCaller {
        let tools = environment
            .catalog()
            .exported(builtins)
            .into_iter()
            .map(|c| {
                (
                    c.name().to_string(),
                    c.tool().cloned().map_err(Clone::clone),
                )
            })
            .collect();
        ToolCaller { environment, tools }
    }

    /// The exportable functions as tools, in name order.
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.tools.values().filter_map(|t| t.as_ref().ok())
    }

    /// The functions that cannot be tools, and why.
    pub fn not_exportable(&self) -> impl Iterator<Item = &NotExportable> {
        self.tools.values().filter_map(|t| t.as_ref().err())
    }

    /// The environment the calls run in.
    pub fn environment(&self) -> &Environment {
        &self.environment
    }

    /// Calls the function `name` with `arguments`, a JSON object keyed by parameter
    /// name (`args` for varargs), checked against the function's schema first.
    pub fn call(&self, name: &str, arguments: &Value) -> Result<Value, CallError> {
        let tool = match self.tools.get(name) {
            Some(Ok(tool)) => tool,
            Some(Err(not_exportable)) => {
                return Err(CallError::NotExportable(not_exportable.clone()));
            }
            None => {
                return Err(CallError::UnknownFunction {
                    name: name.to_string(),
                    suggestion: self
                        .environment
                        .catalog()
                        .closest_name(name)
                        .map(str::to_string),
                });
            }
        };
        let args = positional_args(tool, arguments)?;
        let value = self
            .environment
            .call_function(name, args)
            .map_err(|error| CallError::Execution {
                name: name.to_string(),
                error,
            })?;
        Ok(match &tool.output {
            Some(output) => empty_tables_as_documented(value, output),
            None => value,
        })
    }
}
