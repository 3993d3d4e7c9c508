//! A registry's functions as OpenAI, Anthropic and MCP tool lists.
//!
//! Only registry functions are exported (not the environment's built-ins such as
//! `llm_query`, which only make sense inside the Lua sandbox). Functions with a
//! parameter type JSON cannot carry (`fun(…)`, classes, …) are left out;
//! [`export`] returns them with the reason.
//!
//! ```
//! use rlm_registry::{Registry, tools::export::{export, ToolFormat}};
//!
//! let (tools, skipped) = export(Registry::baked().specs(), ToolFormat::OpenAi);
//! let first = &tools.as_array().unwrap()[0];
//! assert_eq!(first["type"], "function");
//! assert!(first["function"]["parameters"]["properties"].is_object());
//! # let _ = skipped;
//! ```

use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

use crate::spec::{FunctionSpec, NotExportable, Tool};

/// A tool-list format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolFormat {
    /// `[{"type": "function", "function": {name, description, parameters}}]`
    OpenAi,
    /// `[{name, description, input_schema}]`
    Anthropic,
    /// `{"tools": [{name, description, inputSchema}]}` (an MCP `tools/list` result)
    Mcp,
}

impl FromStr for ToolFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.to_ascii_lowercase().as_str() {
            "openai" => Ok(ToolFormat::OpenAi),
            "anthropic" => Ok(ToolFormat::Anthropic),
            "mcp" => Ok(ToolFormat::Mcp),
            other => Err(format!(
                "unknown tool format `{other}` (expected openai, anthropic or mcp)"
            )),
        }
    }
}

impl fmt::Display for ToolFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolFormat::OpenAi => "openai",
            ToolFormat::Anthropic => "anthropic",
            ToolFormat::Mcp => "mcp",
        })
    }
}

impl Tool {
    /// `{"type": "function", "function": {name, description, parameters}}`
    pub fn openai(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        })
    }

    /// `{name, description, input_schema}`
    pub fn anthropic(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "input_schema": self.parameters,
        })
    }

    /// `{name, description, inputSchema}`
    pub fn mcp(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.parameters,
        })
    }
}

/// Every exportable function of `functions` (in their order) as a tool list in
/// `format`, and the functions left out with the reason. Pass `registry.specs()`, or
/// the functions of a [`Catalog`](crate::catalog::Catalog) to include the built-ins and
/// providers' host functions.
pub fn export<'a>(
    functions: impl IntoIterator<Item = FunctionSpec<'a>>,
    format: ToolFormat,
) -> (Value, Vec<NotExportable>) {
    let mut tools = Vec::new();
    let mut skipped = Vec::new();
    for function in functions {
        match function.tool() {
            Ok(tool) => tools.push(tool.clone()),
            Err(reason) => skipped.push(reason.clone()),
        }
    }
    (tool_list(&tools, format), skipped)
}

/// `tools` as a tool list in `format`.
pub fn tool_list(tools: &[Tool], format: ToolFormat) -> Value {
    match format {
        ToolFormat::OpenAi => Value::Array(tools.iter().map(Tool::openai).collect()),
        ToolFormat::Anthropic => Value::Array(tools.iter().map(Tool::anthropic).collect()),
        ToolFormat::Mcp => json!({"tools": tools.iter().map(Tool::mcp).collect::<Vec<_>>()}),
    }
}
