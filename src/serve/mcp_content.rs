//! What the MCP server offers besides tools, all read from the catalog: each function's
//! source and documentation as a resource (`rlm://functions/{name}`), the registry's
//! system prompt as a resource (`rlm://prompt/system`), and the RLM system prompt as
//! the prompt `rlm`, which takes the question as its argument.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    GetPromptResult, Prompt, PromptArgument, PromptMessage, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, Role,
};
use serde_json::{Map, Value};

use super::State;
use crate::llm::{Completion, Llm, LlmError, Request};
use crate::rlm::{PromptMode, Rlm};

/// Where a function's resource lives: this, then its name.
pub const FUNCTION_URI: &str = "rlm://functions/";
/// The resource holding the registry's section of the system prompt.
pub const SYSTEM_PROMPT_URI: &str = "rlm://prompt/system";
/// The prompt that starts an RLM conversation about a question.
pub const RLM_PROMPT: &str = "rlm";

/// Every function (registry, providers, built-ins) and the system prompt.
pub(super) fn resources(state: &State) -> Vec<Resource> {
    let mut resources = vec![
        Resource::new(SYSTEM_PROMPT_URI, "system prompt")
            .with_description(
                "The registry's functions with their whole documentation, as the full RLM system prompt lists them (what `rlm prompt --prompt-mode full` prints)",
            )
            .with_mime_type("text/markdown"),
    ];
    let mut functions = state.functions.functions();
    functions.sort_by(|a, b| a.function.name().cmp(b.function.name()));
    resources.extend(functions.iter().map(|spec| {
        let name = spec.function.name();
        Resource::new(format!("{FUNCTION_URI}{name}"), name)
            .with_description(format!(
                "{} ({}): {}",
                spec.function.signature(),
                spec.source(),
                spec.function.summary()
            ))
            .with_mime_type("text/x-lua")
    }));
    resources
}

/// The function resources as one template, for clients that build URIs.
pub(super) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{FUNCTION_URI}{{name}}"), "function")
            .with_description(
                "A function's documentation and, for registry functions, its Lua source",
            )
            .with_mime_type("text/x-lua"),
    ]
}

/// The text of the resource at `uri`.
pub(super) fn read(state: &State, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let text = if uri == SYSTEM_PROMPT_URI {
        registry_prompt(state)
    } else if let Some(name) = uri.strip_prefix(FUNCTION_URI) {
        function_text(state, name).ok_or_else(|| {
            let hint = state
                .functions
                .closest_name(name)
                .map(|close| format!(" (did you mean {FUNCTION_URI}{close}?)"))
                .unwrap_or_default();
            ErrorData::resource_not_found(format!("no function named `{name}`{hint}"), None)
        })?
    } else {
        return Err(ErrorData::resource_not_found(
            format!(
                "no resource `{uri}`: resources are {FUNCTION_URI}NAME and {SYSTEM_PROMPT_URI}"
            ),
            None,
        ));
    };
    Ok(ReadResourceResult::new(vec![ResourceContents::text(
        text, uri,
    )]))
}

/// A function as Lua: its doc comment, then its definition (registry functions) or a
/// note that the host implements it.
fn function_text(state: &State, name: &str) -> Option<String> {
    let functions = &state.functions;
    let spec = functions.get(name)?;
    let mut text = format!("-- {} ({})\n", spec.function.signature(), spec.source());
    text.push_str(spec.function.doc().trim_end());
    text.push('\n');
    match state.functions.registry().get(name) {
        Some(function) if spec.source() == "registry" => {
            text = format!("-- {}:{}\n{text}", function.file(), function.line());
            text.push_str(function.source());
            text.push('\n');
        }
        _ => text.push_str("-- implemented by the host; call it from Lua (run_lua) or as a tool\n"),
    }
    Some(text)
}

/// The registry's section of the system prompt, then the host's functions.
fn registry_prompt(state: &State) -> String {
    let functions = &state.functions;
    let mut text = PromptMode::Full.listing(functions.registry()).into_owned();
    let providers = functions.provider_prompt();
    if !providers.is_empty() {
        text.push('\n');
        text.push_str(&providers);
        text.push('\n');
    }
    text
}

/// The prompts: one, `rlm`.
pub(super) fn prompts() -> Vec<Prompt> {
    vec![Prompt::new(
        RLM_PROMPT,
        Some(
            "Answer a question the RLM way: the RLM system prompt (rules, the registry's functions), with run_lua as the REPL",
        ),
        Some(vec![
            PromptArgument::new("question")
                .with_description("What to answer")
                .with_required(true),
        ]),
    )]
}

/// The `rlm` prompt for `arguments.question`.
pub(super) fn get_prompt(
    state: &State,
    name: &str,
    arguments: Option<&Map<String, Value>>,
) -> Result<GetPromptResult, ErrorData> {
    if name != RLM_PROMPT {
        return Err(ErrorData::invalid_params(
            format!("no prompt named `{name}` (prompts: {RLM_PROMPT})"),
            None,
        ));
    }
    let question = arguments
        .and_then(|arguments| arguments.get("question"))
        .and_then(Value::as_str)
        .filter(|question| !question.trim().is_empty())
        .ok_or_else(|| {
            ErrorData::invalid_params(
                "the `rlm` prompt needs a `question` (a non-empty string)",
                None,
            )
        })?;
    let llm: Arc<dyn Llm> = state
        .options
        .llm
        .clone()
        .unwrap_or_else(|| Arc::new(NoModel));
    let functions = &state.functions;
    let rlm = Rlm::new(llm, Arc::clone(functions.registry()), 1)
        .providers(Arc::clone(functions.providers()));
    let text = format!(
        "{}\n## Here\n\nIn this conversation the REPL is the `run_lua` tool: send each block of code to it (its variables persist between calls). When you know the answer, reply with it.\n\n## The question\n\n{question}\n",
        // Every session starts with the served context: the prompt describes it.
        rlm.system_prompt(state.options.context.as_deref())
    );
    let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]);
    result.description = Some("The RLM system prompt and the question".to_string());
    Ok(result)
}

/// Only renders the system prompt; never asked.
struct NoModel;

impl Llm for NoModel {
    fn complete(&self, _request: Request) -> Result<Completion, LlmError> {
        Err(LlmError::Config("no model is configured".to_string()))
    }
}
