//! `rlm list`, `rlm show` and `rlm prompt`: look at a registry.

use std::fmt::Write;
use std::sync::Arc;

use rlm_registry::catalog::Catalog;
use rlm_registry::llm::{Completion, Llm, LlmError, Request};
use rlm_registry::rlm::DEFAULT_MAX_ITERATIONS;
use rlm_registry::setup::RunSetup;
use rlm_registry::spec::{FunctionSpec, Origin, Scope};
use rlm_registry::tokens;
use serde::Serialize;
use serde_json::json;

use super::{EXIT_VIOLATIONS, Output};

pub(super) fn list(catalog: &Catalog, as_json: bool, all: bool) -> Output {
    // Registry functions first, as before providers existed; then host functions.
    let mut callables = catalog.exported(all);
    callables.sort_by_key(FunctionSpec::is_host);
    if as_json {
        let functions: Vec<_> = callables.iter().map(FunctionSpec::json).collect();
        return Output::success(format!("{}\n", serde_json::Value::Array(functions)));
    }
    let width = callables
        .iter()
        .map(|c| c.function.signature().len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for callable in &callables {
        let function = callable.function;
        let _ = write!(
            out,
            "{:width$}  {}",
            function.signature(),
            function.summary()
        );
        if callable.is_host() {
            let _ = write!(out, "  [{}]", callable.label());
        }
        out.push('\n');
    }
    Output::success(out)
}

pub(super) fn show(catalog: &Catalog, name: &str) -> Output {
    let Some(callable) = catalog.lookup(name) else {
        let mut message = format!("error: no function named `{name}`\n");
        if let Some(suggestion) = catalog.closest_name(name) {
            let _ = writeln!(message, "help: did you mean `{suggestion}`?");
        }
        return Output::failure(EXIT_VIOLATIONS, message);
    };
    let function = callable.function;
    if let Origin::Provider {
        provider, scope, ..
    } = callable.origin
    {
        return Output::success(format!(
            "{}  (provider `{provider}`, scope `{scope}`, implemented in Rust)\n\n{}\n",
            function.signature(),
            function.declaration(),
        ));
    }
    Output::success(format!(
        "{}  ({}:{})\n\n{}\n{}\n",
        function.signature(),
        function.file(),
        function.line(),
        function.doc(),
        function.source()
    ))
}

/// One line of `rlm providers`.
#[derive(Serialize)]
struct ProviderRow {
    name: String,
    description: String,
    enabled: bool,
    functions: Vec<FunctionRow>,
}

#[derive(Serialize)]
struct FunctionRow {
    name: String,
    scope: Scope,
}

/// `rlm providers`: each provider, enabled or not, with its functions and their scopes.
pub(super) fn providers(catalog: &Catalog, as_json: bool) -> Output {
    let enabled = catalog.providers();
    let mut rows: Vec<ProviderRow> = enabled
        .providers()
        .map(|provider| ProviderRow {
            name: provider.name.to_string(),
            description: provider.description.to_string(),
            enabled: true,
            functions: provider
                .functions
                .iter()
                .filter_map(|f| enabled.get(f))
                .map(|f| FunctionRow {
                    name: f.name().to_string(),
                    scope: f.scope(),
                })
                .collect(),
        })
        .collect();
    for (name, description) in KNOWN_PROVIDERS {
        if !rows.iter().any(|row| row.name == *name) {
            rows.push(ProviderRow {
                name: name.to_string(),
                description: description.to_string(),
                enabled: false,
                functions: Vec::new(),
            });
        }
    }
    if as_json {
        return Output::success(format!("{}\n", json!(rows)));
    }
    let mut out = String::new();
    for shadowed in catalog.shadowed() {
        let _ = writeln!(
            out,
            "note: the host function `{}` shadows the registry function of the same name ({}:{})",
            shadowed.name(),
            shadowed.file(),
            shadowed.line()
        );
    }
    for row in rows {
        let state = if row.enabled { "enabled" } else { "disabled" };
        let _ = writeln!(out, "{} ({state}): {}", row.name, row.description);
        for function in row.functions {
            let _ = writeln!(out, "    {}  [{}]", function.name, function.scope);
        }
    }
    Output::success(out)
}

/// Providers that exist whether or not the configuration enables them.
const KNOWN_PROVIDERS: &[(&str, &str)] = &[
    (
        "core",
        "Output, the final answer, tokens, the session's variables and discovery.",
    ),
    ("llm", "Sub-model calls on pieces of the context."),
    ("agent", "Child agents with a REPL of their own."),
    (
        "user",
        "The human user as a function; top-level agent only.",
    ),
    ("store", "Values shared by every agent of a run (opt-in)."),
    ("files", "Files under one root directory (opt-in)."),
    (
        "shell",
        "Allow-listed programs, never through a shell (opt-in).",
    ),
];

/// The registry's section of the system prompt as the RLM loop writes it in `mode`, then
/// the enabled providers' functions, if any; or with `tokens`, the size of each part of
/// the root agent's whole system prompt.
pub(super) fn prompt(catalog: &Catalog, setup: &RunSetup, tokens: bool) -> Output {
    let mode = setup.prompt_mode;
    if tokens {
        return Output::success(prompt_sizes(catalog, setup));
    }
    let mut text = mode.listing(catalog.registry()).into_owned();
    let providers = catalog.provider_prompt();
    if !providers.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&providers);
        text.push('\n');
    }
    Output::success(text)
}

/// The parts of the root agent's system prompt without a context, as `rlm ask` with
/// its defaults writes it: a Markdown table of tokens and bytes, the whole prompt last.
fn prompt_sizes(catalog: &Catalog, setup: &RunSetup) -> String {
    let mode = setup.prompt_mode;
    let rlm = setup
        .rlm(
            Arc::new(NoModel),
            Arc::clone(catalog.registry()),
            DEFAULT_MAX_ITERATIONS,
        )
        .providers(Arc::clone(catalog.providers()));
    let listed = if mode.is_compact_for(catalog.registry()) {
        "compact"
    } else {
        "full"
    };
    let mut out = format!(
        "The system prompt of `rlm ask` without a context, {listed} listing, {} registry functions (o200k_base tokens):\n\n| part | tokens | bytes |\n|---|---:|---:|\n",
        catalog.registry().len()
    );
    for part in rlm.prompt_parts(None) {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            part.name,
            thousands(tokens::count(&part.text)),
            thousands(part.text.len())
        );
    }
    let whole = rlm.system_prompt(None);
    let _ = writeln!(
        out,
        "| **whole** | **{}** | **{}** |",
        thousands(tokens::count(&whole)),
        thousands(whole.len())
    );
    out
}

/// `12,345`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Only builds prompts; never asked.
struct NoModel;

impl Llm for NoModel {
    fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
        Err(LlmError::Config("no model is configured".to_string()))
    }
}
