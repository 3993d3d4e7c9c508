//! The `core` provider's discovery built-ins: `help` and `fn_search`, over the agent's
//! [`Catalog`].

use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, Lua, Table};

use super::core::count_arg;
use super::state::BuiltinState;
use crate::catalog::Catalog;
use crate::conventions::builtins::{BUILTIN_VALUES, BuiltinId};
use crate::environment::errors::shown;
use crate::environment::hook::hold_ticks;
use crate::llm::{Completion, Llm, LlmError, Request};
use crate::spec::Origin;

/// `help([name])`: the one description of any function this agent may call.
pub(super) fn help(lua: &Lua, catalog: Arc<Catalog>) -> mlua::Result<Function> {
    lua.create_function(move |_, name: Option<String>| {
        let Some(name) = name else {
            let names: Vec<&str> = catalog
                .functions()
                .iter()
                .map(|c| c.function.name())
                .collect();
            return Ok(format!(
                "Available functions: {}. Call help(name) for one.",
                names.join(", ")
            ));
        };
        if let Some(callable) = catalog.get(&name) {
            let text = callable.function.declaration();
            return Ok(match callable.origin {
                Origin::Provider { builtin: true, .. } => format!("{text} (built-in)"),
                Origin::Provider { provider, .. } => format!("{text} (provider `{provider}`)"),
                Origin::Registry { .. } => text,
            });
        }
        if let Some(value) = BUILTIN_VALUES.iter().find(|v| v.name == name) {
            // A value (`json.null`) is there when its provider's functions are.
            if value
                .provider
                .functions()
                .any(|f| catalog.get(f.name).is_some())
            {
                return Ok(format!("--- {}\n{name} (built-in value)", value.doc));
            }
        }
        if let Some(scope) = catalog.out_of_scope(&name) {
            return Err(mlua::Error::RuntimeError(format!(
                "{}: {}",
                BuiltinId::Help.name(),
                catalog.scope().refusal(&name, scope)
            )));
        }
        let help = BuiltinId::Help.name();
        let suggestion = catalog.closest_name(&name);
        let name = shown(name.as_bytes());
        Err(mlua::Error::RuntimeError(match suggestion {
            Some(suggestion) => {
                format!("{help}: no function named '{name}'; did you mean '{suggestion}'?")
            }
            None => format!("{help}: no function named '{name}'; call {help}() to list them"),
        }))
    })
}

/// `fn_search(query [, opts])` → `results, info`: `results` is
/// `{ {name, signature, summary, confidence}, … }`, `info` is `{mode, fallback,
/// expanded_terms}`. With `opts.mode` `"balanced"` or `"accurate"` it searches with the
/// environment's LLM ([`search_with_llm`](crate::search::llm_modes::search_with_llm)),
/// reserving the mode's calls against the `llm_calls` limit up front, as
/// `llm_query_batched` does for a batch, and counting the tokens spent; a failing model
/// gives the fast order with `info.fallback` set. Without an LLM those modes are an
/// error rather than a silent fast search, as `llm_query` is.
pub(super) fn fn_search(
    lua: &Lua,
    state: Rc<BuiltinState>,
    catalog: Arc<Catalog>,
) -> mlua::Result<Function> {
    use crate::search::llm_modes::{LlmSearch, llm_calls, search_with_llm};
    use crate::search::{SearchMode, SearchOptions};

    lua.create_function(move |lua, (query, opts): (String, Option<Table>)| {
        let mut options = SearchOptions::default();
        let mut mode = SearchMode::Fast;
        if let Some(opts) = opts {
            if let Some(max) = opts.get::<Option<i64>>("max_results")? {
                options.max_results = count_arg(BuiltinId::FnSearch, "max_results", max)?.min(100);
            }
            options.capability = opts.get::<Option<String>>("capability")?;
            options.source = opts.get::<Option<String>>("source")?;
            if let Some(name) = opts.get::<Option<String>>("mode")? {
                mode = name
                    .parse()
                    .map_err(|e: String| mlua::Error::RuntimeError(format!("{}: {e}", BuiltinId::FnSearch.name())))?;
            }
        }
        let found = if mode == SearchMode::Fast {
            LlmSearch::fast(&*catalog, &query, &options)
        } else {
            let llm = state.host.llm.as_ref().ok_or_else(|| {
                mlua::Error::RuntimeError(format!(
                    "{}: mode \"{}\" needs an LLM and none is configured for this environment; use mode \"fast\"",
                    BuiltinId::FnSearch.name(),
                    mode.name()
                ))
            })?;
            state.before_calls(llm_calls(mode))?;
            let recorded = Recorded {
                llm: llm.as_ref(),
                results: std::sync::Mutex::new(Vec::new()),
            };
            let found = hold_ticks(|| search_with_llm(&*catalog, &recorded, &query, &options, mode));
            let results = recorded
                .results
                .into_inner()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            for result in &results {
                state.spent(result);
            }
            found
        };
        let results = lua.create_table()?;
        for (i, hit) in found.results.into_iter().enumerate() {
            let entry = lua.create_table()?;
            entry.raw_set("name", hit.name)?;
            entry.raw_set("signature", hit.signature)?;
            entry.raw_set("summary", hit.summary)?;
            entry.raw_set("confidence", (hit.confidence * 100.0).round() / 100.0)?;
            results.raw_set(i + 1, entry)?;
        }
        let info = lua.create_table()?;
        info.raw_set("mode", found.mode.name())?;
        info.raw_set("fallback", found.fallback)?;
        info.raw_set("expansion_fallback", found.expansion_fallback)?;
        info.raw_set("expanded_terms", lua.create_sequence_from(found.expanded_terms)?)?;
        Ok((results, info))
    })
}

/// The environment's LLM, keeping every answer so that `fn_search` can charge the tokens
/// to the session afterwards: the session is not `Send`, which [`Llm`] requires.
struct Recorded<'a> {
    llm: &'a dyn Llm,
    results: std::sync::Mutex<Vec<Result<Completion, LlmError>>>,
}

impl Llm for Recorded<'_> {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        let result = self.llm.complete(request);
        self.results
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(result.clone());
        result
    }
}
