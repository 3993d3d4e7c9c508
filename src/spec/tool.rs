//! The tool form of a function: its parameters as one JSON Schema object (LuaLS types
//! mapped by [`LuaType::schema`]), built by [`function_tool`] alone and kept per function
//! in a [`ToolCell`], so every export, call and server reads the same value computed once.

use std::fmt;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::conventions::Function;
use crate::conventions::lua_type::{LuaType, parse_type};

/// Where one function's tool form is kept once computed. A registry keeps one per
/// function, a provider one per host function.
#[derive(Debug, Default)]
pub struct ToolCell(OnceLock<Result<Tool, NotExportable>>);

impl ToolCell {
    /// An empty cell.
    pub const fn new() -> ToolCell {
        ToolCell(OnceLock::new())
    }

    /// The tool form of `function`, computed the first time.
    pub fn get_or_build(&self, function: &Function) -> Result<&Tool, &NotExportable> {
        self.0.get_or_init(|| function_tool(function)).as_ref()
    }
}

impl Clone for ToolCell {
    /// A clone starts empty: the form is derived from the function, not state to copy.
    fn clone(&self) -> Self {
        ToolCell::new()
    }
}

/// How one JSON property maps to the function's arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolParam {
    /// The JSON property name: the Lua parameter name, or `args` for varargs.
    pub name: String,
    /// The type, `nil` removed (see `optional`).
    pub ty: LuaType,
    /// Not in `required`.
    pub optional: bool,
    /// The varargs: an array whose items are spread as trailing arguments.
    pub vararg: bool,
}

/// A registry function as a tool: its name, description and parameters schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    /// The function name.
    pub name: String,
    /// The function's description.
    pub description: String,
    /// A JSON Schema object: `properties` from the parameters, `required` the
    /// non-optional ones.
    pub parameters: Value,
    /// The parameters in call order.
    pub params: Vec<ToolParam>,
    /// The type of the single value it returns, when JSON can carry it: the tool's
    /// `outputSchema` (see [`Tool::output_schema`]).
    pub output: Option<LuaType>,
}

impl Tool {
    /// The tool's `outputSchema`, when its single result has a JSON type: MCP wants an
    /// object at the root, so the value is wrapped as `{"result": value}`.
    ///
    /// ```
    /// use rlm_registry::{Registry, spec::function_tool};
    ///
    /// let registry = Registry::from_map([("n", "--- N.\n---@return integer\nfunction n() return 1 end")])?;
    /// let tool = function_tool(registry.get("n").unwrap()).unwrap();
    /// assert_eq!(tool.output_schema().unwrap()["properties"]["result"]["type"], "integer");
    /// # Ok::<(), rlm_registry::LoadError>(())
    /// ```
    pub fn output_schema(&self) -> Option<Value> {
        let output = self.output.as_ref()?;
        Some(json!({
            "type": "object",
            "properties": {"result": output.schema()},
            "required": ["result"],
        }))
    }
}

/// A function that cannot be a tool, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotExportable {
    /// The function name.
    pub name: String,
    /// Why, e.g. "parameter `f`: a function (`fun(…)`) cannot be passed as JSON".
    pub reason: String,
}

impl fmt::Display for NotExportable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` cannot be a tool: {}", self.name, self.reason)
    }
}

impl std::error::Error for NotExportable {}

/// The property name varargs (`...`) are exposed under.
pub const VARARGS_PROPERTY: &str = "args";

/// The tool form of one function: built here and nowhere else (readers get it cached
/// through [`FunctionSpec::tool`](super::FunctionSpec::tool)).
///
/// ```
/// use rlm_registry::Registry;
/// use rlm_registry::spec::function_tool;
///
/// let registry = Registry::from_map([("add", "--- Adds.\n---@param a integer\n---@param b? integer\n---@return integer\nfunction add(a, b) return a + (b or 0) end")])?;
/// let tool = function_tool(registry.get("add").unwrap()).unwrap();
/// assert_eq!(tool.parameters["required"], serde_json::json!(["a"]));
/// # Ok::<(), rlm_registry::LoadError>(())
/// ```
pub fn function_tool(function: &Function) -> Result<Tool, NotExportable> {
    let not_exportable = |reason: String| NotExportable {
        name: function.name().to_string(),
        reason,
    };
    // Tool names are identifiers; a table member (`re.find`) runs only inside Lua.
    if function.name().contains('.') {
        return Err(not_exportable(
            "a member of a built-in table: call it from Lua".to_string(),
        ));
    }
    let mut params = Vec::new();
    let mut properties = Map::new();
    let mut required = Vec::new();
    for param in function.params() {
        let vararg = param.name() == "...";
        let name = if vararg {
            VARARGS_PROPERTY
        } else {
            param.name()
        };
        let (ty, nil) = parse_type(param.ty())
            .map_err(|error| not_exportable(format!("parameter `{}`: {error}", param.name())))?
            .strip_nil();
        if properties.contains_key(name) {
            return Err(not_exportable(format!(
                "two parameters map to the property `{name}`"
            )));
        }
        let optional = vararg || nil || param.optional();
        let ty = if vararg {
            LuaType::Array(Box::new(ty))
        } else {
            ty
        };
        let mut schema = ty.schema();
        if !param.description().is_empty()
            && let Value::Object(object) = &mut schema
        {
            object.insert(
                "description".to_string(),
                Value::String(param.description().to_string()),
            );
        }
        properties.insert(name.to_string(), schema);
        if !optional {
            required.push(Value::String(name.to_string()));
        }
        params.push(ToolParam {
            name: name.to_string(),
            ty,
            optional,
            vararg,
        });
    }
    let output = match function.returns() {
        [single] => parse_type(single.ty()).ok(),
        _ => None,
    };
    Ok(Tool {
        output,
        name: function.name().to_string(),
        description: function.description().to_string(),
        parameters: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }),
        params,
    })
}
