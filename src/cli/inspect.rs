//! `rlm list`, `rlm show` and `rlm prompt`: look at a registry.

use std::fmt::Write;

use rlm_registry::Registry;
use rlm_registry::rlm::PromptMode;
use rlm_registry::search::function_json;

use super::{EXIT_VIOLATIONS, Output};

pub(super) fn list(registry: &Registry, as_json: bool) -> Output {
    if as_json {
        let functions: Vec<_> = registry.functions().iter().map(function_json).collect();
        return Output::success(format!("{}\n", serde_json::Value::Array(functions)));
    }
    let width = registry
        .functions()
        .iter()
        .map(|f| f.signature().len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for function in registry.functions() {
        let _ = writeln!(
            out,
            "{:width$}  {}",
            function.signature(),
            function.summary()
        );
    }
    Output::success(out)
}

pub(super) fn show(registry: &Registry, name: &str) -> Output {
    let Some(function) = registry.get(name) else {
        let mut message = format!("error: no function named `{name}` in the registry\n");
        if let Some(suggestion) = registry.closest_name(name) {
            let _ = writeln!(message, "help: did you mean `{suggestion}`?");
        }
        return Output::failure(EXIT_VIOLATIONS, message);
    };
    Output::success(format!(
        "{}  ({}:{})\n\n{}\n{}\n",
        function.signature(),
        function.file(),
        function.line(),
        function.doc(),
        function.source()
    ))
}

/// The registry's section of the system prompt, as the RLM loop's full or compact
/// [`PromptMode`] writes it.
pub(super) fn prompt(registry: &Registry, compact: bool) -> Output {
    let mode = if compact {
        PromptMode::Compact
    } else {
        PromptMode::Full
    };
    Output::success(mode.listing(registry).into_owned())
}
