//! Providers: host functions written with each handler style, called from Lua and as
//! JSON tools; registration errors, replacement and removal; scopes at every depth;
//! the opt-in store shared by an agent tree; built-ins found by search and exports.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::catalog::Catalog;
use rlm_registry::environment::{Environment, Limits, User};
use rlm_registry::llm::{LlmClient, LlmConfig};
use rlm_registry::providers::{
    AgentScope, HostFunction, Method, Provider, Providers, Route, RouteRequest, RouteResponse,
    Scope, StoreProvider,
};
use rlm_registry::search::FunctionSearch;
use rlm_registry::search::SearchOptions;
use rlm_registry::tools::{CallError, ToolCaller, ToolFormat, export};
use serde_json::json;
use support::openai_server::{Behavior, OpenAiServer};

/// A provider with one function of each handler style.
struct Inventory;

impl Provider for Inventory {
    fn name(&self) -> &str {
        "inventory"
    }

    fn description(&self) -> &str {
        "Stock levels."
    }

    fn functions(&self) -> Vec<HostFunction> {
        vec![
            HostFunction::typed(
                "stock_of",
                "--- The number of items in stock.\n---@param item string The item's name\n---@param warehouse? string Which warehouse (default: all)\n---@return integer count",
                |_, (item, warehouse): (String, Option<String>)| match item.as_str() {
                    "apple" => Ok(if warehouse.is_some() { 3 } else { 7 }),
                    other => Err(format!("unknown item `{other}`")),
                },
            ),
            HostFunction::raw(
                "items",
                "--- Lists the items, with a count for each.\n---@param prefix string Only items starting with this\n---@return table items name -> count\n---@return integer n How many",
                |call, args| {
                    let prefix: String = mlua::FromLuaMulti::from_lua_multi(args, call.lua())?;
                    let table = call.lua().create_table()?;
                    let mut n = 0;
                    for (name, count) in [("apple", 7), ("apricot", 2), ("banana", 5)] {
                        if name.starts_with(&prefix) {
                            table.set(name, count)?;
                            n += 1;
                        }
                    }
                    mlua::IntoLuaMulti::into_lua_multi((table, n), call.lua())
                },
            ),
        ]
    }
}

fn with_inventory() -> Providers {
    let mut providers = Providers::builtin();
    providers.register(Inventory).unwrap();
    providers
}

fn env_with(providers: Providers, scope: AgentScope) -> Environment {
    Environment::builder(Registry::baked().clone())
        .providers(Arc::new(providers))
        .scope(scope)
        .limits(Limits {
            time: Duration::from_secs(5),
            ..Limits::default()
        })
        .build()
        .unwrap()
}

fn run(env: &Environment, code: &str) -> String {
    match env.execute(code) {
        Ok(run) => run.output,
        Err(error) => panic!("{code}: {error}"),
    }
}

#[test]
fn a_typed_host_function_is_called_from_lua_with_optional_arguments() {
    let env = env_with(with_inventory(), AgentScope::TOP);
    assert_eq!(
        run(&env, "print(stock_of('apple'), stock_of('apple', 'north'))"),
        "7\t3\n"
    );
}

#[test]
fn a_host_error_is_an_ordinary_lua_error_that_pcall_catches() {
    let env = env_with(with_inventory(), AgentScope::TOP);
    let err = env.execute("stock_of('pear')").unwrap_err();
    assert!(
        err.message().contains("stock_of: unknown item `pear`"),
        "{err}"
    );
    assert_eq!(
        run(&env, "local ok, e = pcall(stock_of, 'pear') print(ok, e)"),
        "false\tstock_of: unknown item `pear`\n"
    );
    let bad = env.execute("stock_of(42)").unwrap_err();
    assert!(bad.message().contains("bad arguments"), "{bad}");
}

#[test]
fn a_raw_host_function_returns_lua_tables_and_several_values() {
    let env = env_with(with_inventory(), AgentScope::TOP);
    assert_eq!(
        run(
            &env,
            "local t, n = items('ap') print(n, t.apple, t.apricot, t.banana)"
        ),
        "2\t7\t2\tnil\n"
    );
}

#[test]
fn host_functions_are_json_tools_with_checked_arguments() {
    let caller = ToolCaller::with_providers(
        Registry::baked().clone(),
        Arc::new(with_inventory()),
        Limits::default(),
    )
    .unwrap();
    assert_eq!(
        caller.call("stock_of", &json!({"item": "apple"})).unwrap(),
        json!(7)
    );
    assert_eq!(
        caller.call("items", &json!({"prefix": "b"})).unwrap(),
        json!([{"banana": 5}, 1])
    );
    let invalid = caller.call("stock_of", &json!({"item": 1})).unwrap_err();
    assert!(
        matches!(invalid, CallError::InvalidArguments { .. }),
        "{invalid}"
    );
    let failed = caller
        .call("stock_of", &json!({"item": "pear"}))
        .unwrap_err();
    assert!(
        failed.to_string().contains("unknown item `pear`"),
        "{failed}"
    );
    // `ToolCaller::execute`, over the set itself.
    let providers = with_inventory();
    assert_eq!(
        ToolCaller::execute(
            &providers,
            "stock_of",
            &json!({"item": "apple", "warehouse": "n"})
        )
        .unwrap(),
        json!(3)
    );
    assert!(matches!(
        ToolCaller::execute(&providers, "stock_off", &json!({})),
        Err(CallError::UnknownFunction { suggestion: Some(s), .. }) if s == "stock_of"
    ));
}

#[test]
fn tool_exports_cover_builtins_and_host_functions() {
    let catalog = Catalog::new(
        Registry::baked().clone(),
        Arc::new(with_inventory()),
        AgentScope::TOP,
    );
    let functions = catalog.functions();
    let (tools, _) = export(functions.iter().copied(), ToolFormat::OpenAi);
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for name in [
        "print",
        "llm_query",
        "ask_user",
        "stock_of",
        "items",
        "word_count",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let stock = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "stock_of")
        .unwrap();
    assert_eq!(stock["function"]["parameters"]["required"], json!(["item"]));
}

#[test]
fn a_doc_that_breaks_the_conventions_is_refused_naming_provider_and_function() {
    let mut providers = Providers::builtin();
    let cases = [
        ("no_description", "---@param x string The x"),
        ("empty_doc", ""),
        ("bad name", "--- Does it."),
        ("", "--- Does it."),
    ];
    for (name, doc) in cases {
        let function = HostFunction::typed(name, doc, |_, (): ()| Ok::<_, String>(()));
        let err = providers.register_function("tools", function).unwrap_err();
        assert_eq!(err.provider, "tools");
        assert_eq!(err.function, name);
        assert!(!err.problems.is_empty(), "{name}");
    }
    let err = providers
        .register_function(
            "tools",
            HostFunction::typed("nodesc", "---@return string", |_, (): ()| {
                Ok::<_, String>("")
            }),
        )
        .unwrap_err();
    assert!(err.to_string().contains("E003"), "{err}");
    // Nothing was registered.
    assert!(providers.get("nodesc").is_none());
    assert_eq!(
        providers.iter().count(),
        Providers::builtin().iter().count()
    );
}

#[test]
fn a_host_function_may_not_take_a_lua_global_or_a_builtin_name() {
    let mut providers = Providers::builtin();
    for (name, expected) in [
        ("string", "Lua standard global"),
        ("pairs", "Lua standard global"),
        ("llm_query", "built-in of the `llm` provider"),
        ("FINAL", "built-in of the `core` provider"),
    ] {
        let function = HostFunction::typed(name, "--- Shadows.", |_, (): ()| Ok::<_, String>(()));
        let err = providers.register_function("mine", function).unwrap_err();
        assert!(err.to_string().contains(expected), "{name}: {err}");
    }
    let twice = HostFunction::typed("same", "--- Once.", |_, (): ()| Ok::<_, String>(()));
    struct Twice(HostFunction);
    impl Provider for Twice {
        fn name(&self) -> &str {
            "twice"
        }
        fn description(&self) -> &str {
            ""
        }
        fn functions(&self) -> Vec<HostFunction> {
            vec![self.0.clone(), self.0.clone()]
        }
    }
    let err = providers.register(Twice(twice)).unwrap_err();
    assert!(err.to_string().contains("defined twice"), "{err}");
}

#[test]
fn registering_a_name_again_replaces_it_and_unregister_removes_it() {
    let mut providers = with_inventory();
    let replacement = HostFunction::typed(
        "stock_of",
        "--- Always 99.\n---@param item string\n---@return integer",
        |_, (_item,): (String,)| Ok::<_, String>(99),
    );
    let registration = providers
        .register_function("override", replacement)
        .unwrap();
    assert_eq!(
        registration.replaced,
        [("stock_of".to_string(), "inventory".to_string())]
    );
    assert_eq!(providers.get("stock_of").unwrap().provider(), "override");
    let env = env_with(providers.clone(), AgentScope::TOP);
    assert_eq!(run(&env, "print(stock_of('apple'))"), "99\n");

    assert!(providers.unregister("stock_of").is_some());
    assert!(providers.unregister("stock_of").is_none());
    let env = env_with(providers.clone(), AgentScope::TOP);
    let err = env.execute("stock_of('apple')").unwrap_err();
    assert!(err.message().contains("stock_of"), "{err}");
    // Re-registering a whole provider replaces its old function list.
    assert!(providers.get("items").is_some());
    assert!(providers.unregister_provider("inventory"));
    assert!(providers.get("items").is_none());
}

#[test]
fn a_host_function_shadows_a_registry_function_and_the_catalog_reports_it() {
    let mut providers = Providers::builtin();
    providers
        .register_function(
            "fast",
            HostFunction::typed(
                "word_count",
                "--- Counts words, in Rust.\n---@param text string\n---@return integer",
                |_, (text,): (String,)| Ok::<_, String>(text.split_whitespace().count() * 10),
            ),
        )
        .unwrap();
    let catalog = Catalog::new(
        Registry::baked().clone(),
        Arc::new(providers.clone()),
        AgentScope::TOP,
    );
    let shadowed: Vec<&str> = catalog.shadowed().iter().map(|f| f.name()).collect();
    assert_eq!(shadowed, ["word_count"]);
    assert!(catalog.get("word_count").unwrap().is_host());
    let env = env_with(providers, AgentScope::TOP);
    assert_eq!(run(&env, "print(word_count('a b c'))"), "30\n");
}

struct Nobody;

impl User for Nobody {
    fn ask(&self, question: &str) -> Result<String, String> {
        Ok(format!("answer to {question}"))
    }
    fn notify(&self, _: &str) -> Result<(), String> {
        Ok(())
    }
}

fn scoped_env(scope: AgentScope) -> Environment {
    Environment::builder(Registry::baked().clone())
        .scope(scope)
        .user(Arc::new(Nobody))
        .build()
        .unwrap()
}

#[test]
fn the_top_level_has_every_scope() {
    let env = scoped_env(AgentScope::TOP);
    assert_eq!(run(&env, "print(ask_user('q'))"), "answer to q\n");
    let help = run(&env, "print(help())");
    for name in ["ask_user", "notify_user", "rlm_query", "llm_query", "print"] {
        assert!(help.contains(name), "{name}");
    }
}

#[test]
fn a_child_cannot_reach_the_user_and_is_told_the_scope() {
    let child = AgentScope {
        depth: 1,
        can_spawn: true,
    };
    let env = scoped_env(child);
    let err = env.execute("ask_user('q')").unwrap_err();
    assert!(err.message().contains("`user` scope"), "{err}");
    assert!(err.message().contains("depth 1"), "{err}");
    let err = env.execute("notify_user('hi')").unwrap_err();
    assert!(err.message().contains("`user` scope"), "{err}");
    // Neither help nor fn_search offers it.
    let listing = run(&env, "print(help())");
    assert!(!listing.contains("ask_user"), "{listing}");
    assert!(listing.contains("rlm_query"), "{listing}");
    let err = env.execute("help('ask_user')").unwrap_err();
    assert!(err.message().contains("`user` scope"), "{err}");
    let found = run(
        &env,
        "for _, r in ipairs(fn_search('ask the human user a question', {max_results = 20})) do print(r.name) end",
    );
    assert!(!found.contains("ask_user"), "{found}");
    // The name cannot be taken over by model code either.
    assert!(env.execute("ask_user = print").is_err());
}

#[test]
fn the_last_level_cannot_start_children() {
    let last = AgentScope {
        depth: 2,
        can_spawn: false,
    };
    let env = scoped_env(last);
    for code in ["rlm_query('x')", "rlm_query_batched({'x'})"] {
        let err = env.execute(code).unwrap_err();
        assert!(err.message().contains("`agent` scope"), "{code}: {err}");
        assert!(err.message().contains("llm_query"), "{code}: {err}");
    }
    let listing = run(&env, "print(help())");
    assert!(!listing.contains("rlm_query"), "{listing}");
    assert!(listing.contains("llm_query"), "{listing}");
}

#[test]
fn host_functions_can_be_limited_to_the_top_level() {
    let mut providers = Providers::builtin();
    providers
        .register_function(
            "admin",
            HostFunction::typed("reset_all", "--- Resets everything.", |_, (): ()| {
                Ok::<_, String>("reset")
            })
            .scope(Scope::User),
        )
        .unwrap();
    let top = env_with(providers.clone(), AgentScope::TOP);
    assert_eq!(run(&top, "print(reset_all())"), "reset\n");
    let child = env_with(
        providers,
        AgentScope {
            depth: 1,
            can_spawn: true,
        },
    );
    let err = child.execute("reset_all()").unwrap_err();
    assert!(err.message().contains("`user` scope"), "{err}");
}

#[test]
fn builtins_and_host_functions_are_found_by_search_and_lookup() {
    let catalog = Catalog::new(
        Registry::baked().clone(),
        Arc::new(with_inventory()),
        AgentScope::TOP,
    );
    let options = SearchOptions::default();
    let top = |query: &str| catalog.search(query, &options)[0].id.clone();
    assert_eq!(top("ask_user"), "builtin:ask_user");
    assert_eq!(top("count the tokens of a text"), "builtin:token_count");
    assert_eq!(top("stock_of"), "provider:inventory:stock_of");
    assert_eq!(
        catalog.lookup("builtin:llm_query").unwrap().function.name(),
        "llm_query"
    );
    assert_eq!(
        catalog
            .lookup("provider:inventory:items")
            .unwrap()
            .function
            .name(),
        "items"
    );
    assert!(catalog.lookup("provider:core:items").is_none());
    assert!(catalog.lookup("lua:word_count").is_some());
    // From Lua as well.
    let env = env_with(with_inventory(), AgentScope::TOP);
    assert_eq!(
        run(&env, "print(fn_search('how many items in stock')[1].name)"),
        "stock_of\n"
    );
    assert!(run(&env, "print(help('stock_of'))").contains("(provider `inventory`)"));
}

#[test]
fn the_store_is_shared_by_agents_given_the_same_provider() {
    let mut providers = Providers::builtin();
    providers.register(StoreProvider::new(1024)).unwrap();
    let parent = env_with(providers.clone(), AgentScope::TOP);
    let child = env_with(
        providers,
        AgentScope {
            depth: 1,
            can_spawn: false,
        },
    );
    assert_eq!(
        run(
            &parent,
            "store_set('plan', {steps = {'a', 'b'}, n = 2}) print(store_ref('plan'))"
        ),
        "store:plan\n"
    );
    assert_eq!(
        run(
            &child,
            "local p = store_get('store:plan') print(p.n, p.steps[2])"
        ),
        "2\tb\n"
    );
    assert_eq!(run(&child, "print(store_get('missing'))"), "nil\n");
    let err = child
        .execute("store_set('big', string.rep('x', 2000))")
        .unwrap_err();
    assert!(err.message().contains("over its limit"), "{err}");
    let err = child.execute("store_set('f', print)").unwrap_err();
    assert!(err.message().contains("store_set"), "{err}");
    let err = parent.execute("store_ref('missing')").unwrap_err();
    assert!(err.message().contains("no value stored"), "{err}");
    // A fresh provider is a fresh store.
    let mut other = Providers::builtin();
    other.register(StoreProvider::new(1024)).unwrap();
    let stranger = env_with(other, AgentScope::TOP);
    assert_eq!(run(&stranger, "print(store_get('plan'))"), "nil\n");
}

#[test]
fn the_store_carries_values_from_a_parent_to_its_child_in_a_run() {
    let lua = |code: &str| Behavior::reply(&format!("```lua\n{code}\n```"));
    let server = OpenAiServer::start(
        vec![
            lua("store_set('secret', 'forty-two') print(rlm_query('Read the secret'))"),
            lua("FINAL('child read ' .. store_get('secret'))"),
            lua("FINAL('done')"),
        ],
        Behavior::status(500),
    );
    let client = LlmClient::new(LlmConfig::new(server.base_url(), "test-model")).unwrap();
    let mut providers = Providers::builtin();
    providers.register(StoreProvider::new(1 << 20)).unwrap();
    let answer = rlm_registry::rlm::Rlm::new(Arc::new(client), Registry::baked().clone(), 5)
        .providers(Arc::new(providers))
        .run("Q", None)
        .unwrap();
    assert_eq!(answer.text, "done");
    let requests = server.requests();
    let last = requests.last().unwrap().json().unwrap();
    let feedback = last["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(feedback.contains("child read forty-two"), "{feedback}");
}

/// A provider with the given management routes and no functions.
struct Routed(Vec<(Method, &'static str)>);

impl Provider for Routed {
    fn name(&self) -> &str {
        "routed"
    }

    fn description(&self) -> &str {
        "Routes only."
    }

    fn functions(&self) -> Vec<HostFunction> {
        Vec::new()
    }

    fn routes(&self) -> Vec<Route> {
        self.0
            .iter()
            .map(|&(method, path)| {
                Route::new(method, path, "", move |r| {
                    RouteResponse::ok(json!({"path": path, "params": r.params}))
                })
            })
            .collect()
    }
}

#[test]
fn a_route_with_a_bad_or_clashing_path_is_refused_naming_the_provider() {
    let mut providers = Providers::builtin();
    let err = providers
        .register(Routed(vec![
            (Method::Get, "items"),
            (Method::Get, "/a/{1}"),
        ]))
        .unwrap_err();
    assert_eq!(err.provider, "routed");
    assert_eq!(err.problems.len(), 2, "{err}");
    assert!(err.to_string().contains("`GET items`"), "{err}");
    let err = providers
        .register(Routed(vec![
            (Method::Get, "/items/{id}"),
            (Method::Get, "/items/{name}"),
        ]))
        .unwrap_err();
    assert!(
        err.to_string().contains("answer the same requests"),
        "{err}"
    );
    assert!(
        providers.providers().all(|p| p.name != "routed"),
        "nothing registered"
    );
}

#[test]
fn a_literal_route_wins_over_a_capture_and_methods_are_told_apart() {
    let mut providers = Providers::empty();
    providers
        .register(Routed(vec![
            (Method::Get, "/items/{id}"),
            (Method::Get, "/items/all"),
            (Method::Delete, "/items/{id}"),
        ]))
        .unwrap();
    let get =
        |path: &str| providers.handle_route("routed", Method::Get, path, RouteRequest::default());
    assert_eq!(get("/items/all").body["path"], "/items/all");
    assert_eq!(get("/items/7").body["params"], json!({"id": "7"}));
    let deleted = providers.handle_route(
        "routed",
        Method::Delete,
        "/items/7",
        RouteRequest::default(),
    );
    assert_eq!(deleted.status, 200);
    let refused =
        providers.handle_route("routed", Method::Put, "/items/7", RouteRequest::default());
    assert_eq!(refused.status, 405);
    assert!(
        refused.body["error"]
            .as_str()
            .unwrap()
            .contains("GET, DELETE")
    );
    let summary = providers.providers().find(|p| p.name == "routed").unwrap();
    assert_eq!(summary.routes.len(), 3);
}
