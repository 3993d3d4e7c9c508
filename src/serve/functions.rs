//! The server's views of the one [`Catalog`] of a top-level agent, as JSON: the function
//! and provider lists of the JSON API, search results, and a result checked against its
//! documented type. The server keeps no list of functions of its own.

use serde_json::{Value, json};

use crate::catalog::Catalog;
use crate::conventions::lua_type::LuaType;
use crate::search::{FunctionSearch, SearchOptions};
use crate::spec::FunctionSpec;
use crate::tools::call::{empty_tables_as_documented, validate};

/// How many results `search_functions` and `GET /v1/search` return at most.
pub const MAX_SEARCH_RESULTS: usize = 50;

/// Every function as the JSON API lists it: registry and host functions, then the
/// built-ins, each in its one JSON form ([`FunctionSpec::json`]).
pub(super) fn function_list(functions: &Catalog) -> Vec<Value> {
    let mut all = functions.functions();
    all.sort_by_key(FunctionSpec::is_builtin);
    all.iter().map(FunctionSpec::json).collect()
}

/// The providers (built-in and the host's), each with its description, whether it is
/// built in, its functions in their JSON form, and its management routes under their
/// full paths.
pub(super) fn provider_list(functions: &Catalog) -> Vec<Value> {
    functions
        .providers()
        .providers()
        .map(|provider| {
            let listed: Vec<Value> = provider
                .functions
                .iter()
                .filter_map(|name| functions.get(name).map(|f| f.json()))
                .collect();
            let routes: Vec<Value> = provider
                .routes
                .iter()
                .map(|route| {
                    json!({
                        "method": route.method().as_str(),
                        "path": format!("/v1/providers/{}{}", provider.name, route.path()),
                        "description": route.description(),
                    })
                })
                .collect();
            json!({
                "name": provider.name,
                "description": provider.description,
                "builtin": provider.builtin,
                "functions": listed,
                "routes": routes,
            })
        })
        .collect()
}

/// Searches every function (built-ins included): the results as JSON, best first.
pub(super) fn search(
    functions: &Catalog,
    query: &str,
    max_results: usize,
    capability: Option<String>,
) -> Value {
    let options = SearchOptions {
        max_results: max_results.min(MAX_SEARCH_RESULTS),
        capability,
        source: None,
    };
    json!(FunctionSearch::search(functions, query, &options))
}

/// `value`, checked against the documented return type, its empty tables first given
/// the kind documented at their place ([`empty_tables_as_documented`]: Lua's empty table
/// is `{}` unless marked with `json.array`); anything else that does not match is an
/// error, since a client validates structured results.
///
/// ```
/// use serde_json::json;
/// use rlm_registry::{serve::conform, tools::parse_type};
///
/// let names = parse_type("string[]").unwrap();
/// assert_eq!(conform(json!({}), &names), Ok(json!([])));
/// let counts = parse_type("table<string, integer>").unwrap();
/// assert_eq!(conform(json!([]), &counts), Ok(json!({})));
/// assert!(conform(json!("text"), &parse_type("integer").unwrap()).is_err());
/// ```
pub fn conform(value: Value, output: &LuaType) -> Result<Value, String> {
    let value = empty_tables_as_documented(value, output);
    match validate(&value, output, "$") {
        Ok(()) => Ok(value),
        Err((path, message)) => Err(format!(
            "the result does not match the documented return type: {path}: {message}"
        )),
    }
}
