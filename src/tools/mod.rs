//! Tool definitions and tool calling: registry functions as JSON-Schema tools for
//! OpenAI, Anthropic and MCP, called with JSON arguments, and a bounded tool-calling
//! dispatch loop.
//!
//! - [`parse_type`] and [`type_schema`]: LuaLS type strings → JSON Schema; a function's
//!   tool form is one [`Tool`], built once per function by `spec`.
//! - [`export`](mod@export): a registry as an OpenAI, Anthropic or MCP tool list.
//! - [`call`]: [`ToolCaller`] checks JSON arguments against the schema and calls the
//!   function in a sandboxed environment, returning JSON.
//! - [`dispatch`]: [`ToolDispatcher`], the model ↔ tools loop with an explicit cap.

pub mod call;
pub mod dispatch;
pub mod export;

pub use crate::conventions::lua_type::{LuaType, parse_type, type_schema};
pub use crate::spec::{NotExportable, Tool};
pub use call::{CallError, ToolCaller};
pub use dispatch::{DispatchError, ToolDispatcher, ToolModel};
pub use export::{ToolFormat, export};
