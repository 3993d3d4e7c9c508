//! `rlm tools --format openai|anthropic|mcp`: the registry's functions as a tool list.

use std::fmt::Write;

use clap::ValueEnum;
use rlm_registry::catalog::Catalog;
use rlm_registry::tools::{ToolFormat, export};

use super::Output;

/// The tool-list format on the command line.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    /// `[{"type": "function", "function": {name, description, parameters}}]`
    Openai,
    /// `[{name, description, input_schema}]`
    Anthropic,
    /// `{"tools": [{name, description, inputSchema}]}`
    Mcp,
}

/// Prints the tool list (pretty JSON) on stdout; functions that cannot be tools are
/// named on stderr with the reason. Exit 0 either way.
pub(super) fn tools(catalog: &Catalog, format: Format, all: bool) -> Output {
    let format = match format {
        Format::Openai => ToolFormat::OpenAi,
        Format::Anthropic => ToolFormat::Anthropic,
        Format::Mcp => ToolFormat::Mcp,
    };
    let (list, skipped) = export(catalog.exported(all), format);
    let mut stdout = serde_json::to_string_pretty(&list).unwrap_or_else(|_| list.to_string());
    stdout.push('\n');
    let mut stderr = String::new();
    for reason in skipped {
        let _ = writeln!(
            stderr,
            "note: left out `{}`: {}",
            reason.name, reason.reason
        );
    }
    Output {
        stdout: stdout.into(),
        stderr,
        code: 0,
    }
}
