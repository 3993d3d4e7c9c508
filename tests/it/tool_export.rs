//! Tool lists for model APIs : the OpenAI, Anthropic and MCP export formats,
//! from the library and from `rlm tools`, with functions that cannot be tools left out.

use crate::support;

use rlm_registry::Registry;
use rlm_registry::tools::{ToolFormat, export};
use serde_json::{Value, json};
use support::tools::registry_with_callback;

#[test]
fn export_formats() {
    let registry = Registry::baked();
    let count = registry.functions().len();

    let (openai, skipped) = export(registry.specs(), ToolFormat::OpenAi);
    // Only functions taking a Lua function (`map`, `sort_by`'s key, …) are not tools.
    assert!(
        skipped
            .iter()
            .all(|s| s.reason.contains("a `function` cannot be passed as JSON")),
        "{skipped:?}"
    );
    let count = count - skipped.len();
    let openai = openai.as_array().unwrap();
    assert_eq!(openai.len(), count);
    // `strip` takes one text (the text functions also take a corpus: a union type).
    let strip = openai
        .iter()
        .find(|t| t["function"]["name"] == "strip")
        .unwrap();
    assert_eq!(strip["type"], "function");
    assert_eq!(
        strip["function"]["parameters"]["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(strip["function"]["parameters"]["required"], json!(["text"]));
    assert!(
        !strip["function"]["description"]
            .as_str()
            .unwrap()
            .is_empty()
    );

    let (anthropic, _) = export(registry.specs(), ToolFormat::Anthropic);
    let first = &anthropic.as_array().unwrap()[0];
    let keys: Vec<&String> = first.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["description", "input_schema", "name"]);
    assert_eq!(first["input_schema"]["type"], "object");

    let (mcp, _) = export(registry.specs(), ToolFormat::Mcp);
    let tools = mcp["tools"].as_array().unwrap();
    assert_eq!(tools.len(), count);
    assert!(tools.iter().all(|t| t["inputSchema"]["type"] == "object"));

    // Functions that cannot be tools are left out and reported.
    let registry = registry_with_callback();
    let (list, skipped) = export(registry.specs(), ToolFormat::OpenAi);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].name, "map_it");
    assert_eq!("MCP".parse::<ToolFormat>(), Ok(ToolFormat::Mcp));
    assert!("xml".parse::<ToolFormat>().is_err());
}

#[cfg(feature = "cli")]
#[test]
fn cli_prints_tool_lists() {
    use support::cli::rlm;

    let out = rlm(&["tools"]);
    assert!(out.status.success());
    let openai: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (exportable, _) = export(Registry::baked().specs(), ToolFormat::OpenAi);
    assert_eq!(
        openai.as_array().unwrap().len(),
        exportable.as_array().unwrap().len()
    );
    assert_eq!(openai[0]["type"], "function");

    let out = rlm(&["tools", "--format", "anthropic"]);
    let anthropic: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(anthropic[0]["input_schema"].is_object());

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("f.lua"),
        "--- Maps.\n---@param f fun(x: any): any The mapper\n---@return any\nfunction map_it(f) return f end\n\
         --- Doubles.\n---@param x number The number\n---@return number\nfunction twice(x) return 2 * x end\n",
    )
    .unwrap();
    let path = dir.path().to_str().unwrap();
    let out = rlm(&["tools", "--format", "mcp", "--no-baked", "--path", path]);
    assert!(out.status.success());
    let mcp: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        mcp,
        json!({"tools": [{
            "name": "twice",
            "description": "Doubles.",
            "inputSchema": {
                "type": "object",
                "properties": {"x": {"type": "number", "description": "The number"}},
                "required": ["x"],
                "additionalProperties": false,
            },
        }]})
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("note: left out `map_it`: parameter `f`: a function"),
        "{stderr}"
    );

    let out = rlm(&["tools", "--format", "xml"]);
    assert_eq!(out.status.code(), Some(2));
}
