//! `rlm serve`'s JSON API: the function routes and their errors, sessions, providers'
//! functions and management routes, and `llm_query` only when a model is served.

use crate::support;

use std::sync::Arc;

use rlm_registry::serve::{ServeOptions, Server};
use serde_json::{Value, json};
use support::serve::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_function_routes_answer_and_explain_errors() {
    bounded(async {
        let server = TestServer::start(options()).await;
        let get = |path: &str| request("GET", server.url(path), None, None);
        let post = |path: &str, body: &str| request("POST", server.url(path), Some(body), None);

        let (status, health) = get("/healthz").await;
        assert_eq!((status, &health["status"]), (200, &json!("ok")));
        assert_eq!(health["functions"], json!(registry().len()));

        let (status, listed) = get("/v1/functions").await;
        assert_eq!(status, 200);
        let functions = listed["functions"].as_array().unwrap();
        let word_count = functions
            .iter()
            .find(|f| f["name"] == "word_count")
            .unwrap();
        assert_eq!(word_count["source"], "registry");
        assert_eq!(word_count["tool"], true);
        assert!(
            functions
                .iter()
                .any(|f| f["name"] == "llm_query" && f["source"] == "builtin")
        );

        let (status, described) = get("/v1/functions/word_count").await;
        assert_eq!(status, 200);
        assert_eq!(described["params"][0]["name"], "text");
        assert_eq!(described["returns"][0]["type"], "integer");
        assert_eq!(described["input_schema"]["required"], json!(["text"]));
        assert!(
            described["doc"]
                .as_str()
                .unwrap()
                .starts_with("--- Counts the words")
        );
        let (status, builtin) = get("/v1/functions/print").await;
        assert_eq!((status, &builtin["source"]), (200, &json!("builtin")));
        let (status, not_tool) = get("/v1/functions/apply_to").await;
        assert_eq!((status, &not_tool["tool"]), (200, &json!(false)));
        let (status, unknown) = get("/v1/functions/word_cont").await;
        assert_eq!(status, 404);
        assert_eq!(
            unknown["error"],
            "unknown function `word_cont` (did you mean `word_count`?)"
        );

        assert_eq!(
            post("/v1/functions/word_count", r#"{"text": "a b c"}"#).await,
            (200, json!({"result": 3}))
        );
        let (status, bad_args) = post("/v1/functions/word_count", r#"{"text": 3}"#).await;
        assert_eq!(status, 400);
        assert_eq!(
            bad_args["error"],
            "invalid arguments for `word_count`: $.text: expected a string, or an object or an array, got 3"
        );
        let (status, malformed) = post("/v1/functions/word_count", r#"{"text": "#).await;
        assert_eq!(status, 400);
        assert!(
            malformed["error"]
                .as_str()
                .unwrap()
                .starts_with("malformed JSON body"),
            "{malformed}"
        );
        let (status, not_object) = post("/v1/functions/word_count", "[1]").await;
        assert_eq!(status, 400);
        assert!(
            not_object["error"]
                .as_str()
                .unwrap()
                .contains("expected an object"),
            "{not_object}"
        );
        let (status, unknown) = post("/v1/functions/nope_nope", "{}").await;
        assert_eq!(status, 404);
        assert!(
            unknown["error"]
                .as_str()
                .unwrap()
                .starts_with("unknown function `nope_nope`")
        );
        let (status, builtin) = post("/v1/functions/print", "{}").await;
        assert_eq!(status, 400);
        assert!(
            builtin["error"].as_str().unwrap().contains("built-in"),
            "{builtin}"
        );
        let (status, not_tool) = post("/v1/functions/apply_to", "{}").await;
        assert_eq!(status, 400);
        assert!(
            not_tool["error"]
                .as_str()
                .unwrap()
                .contains("cannot be a tool"),
            "{not_tool}"
        );
        let (status, lua_error) = post("/v1/functions/fail_with", r#"{"message": "nope"}"#).await;
        assert_eq!(
            (status, lua_error),
            (422, json!({"error": "`fail_with` failed: nope"}))
        );
        assert_eq!(
            post("/v1/functions/word_tally", r#"{"text": ""}"#).await,
            (200, json!({"result": {}}))
        );
        let (status, broken) = post("/v1/functions/broken_promise", "{}").await;
        assert_eq!(status, 422);
        assert!(
            broken["error"]
                .as_str()
                .unwrap()
                .contains("does not match the documented return type"),
            "{broken}"
        );
        let (status, limit) = post("/v1/functions/spin_forever", "").await;
        assert_eq!(status, 422);
        assert!(
            limit["error"]
                .as_str()
                .unwrap()
                .contains("time limit exceeded"),
            "{limit}"
        );

        let (status, found) = get("/v1/search?q=count%20words&max_results=1").await;
        assert_eq!(status, 200);
        assert_eq!(found["results"].as_array().unwrap().len(), 1);
        assert_eq!(found["results"][0]["name"], "word_count");
        let (status, missing) = get("/v1/search").await;
        assert_eq!(status, 400);
        assert!(
            missing["error"].as_str().unwrap().contains("`q`"),
            "{missing}"
        );
        let (status, _) = get("/v1/search?q=x&max_results=many").await;
        assert_eq!(status, 400);

        let (status, no_route) = get("/v2/anything").await;
        assert_eq!(status, 404);
        assert!(no_route["error"].is_string());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_api_sessions_keep_state_until_deleted() {
    bounded(async {
        let server = TestServer::start(ServeOptions {
            max_sessions: 2,
            ..options()
        })
        .await;
        let post = |path: &str, body: Option<&str>| request("POST", server.url(path), body, None);

        let (status, created) = post("/v1/sessions", None).await;
        assert_eq!(status, 201);
        let id = created["id"].as_str().unwrap().to_string();
        let exec = format!("/v1/sessions/{id}/exec");
        assert_eq!(
            post(&exec, Some(r#"{"code": "x = 20"}"#)).await,
            (200, json!({"output": ""}))
        );
        assert_eq!(
            post(
                &exec,
                Some(r#"{"code": "print(x + #context)", "context": "ab"}"#)
            )
            .await,
            (200, json!({"output": "22\n"}))
        );
        // Bytes that are not UTF-8 reach the JSON text as Lua's `\xNN`, not lost.
        assert_eq!(
            post(&exec, Some(r#"{"code": "print('caf\\233', '\u00e9')"}"#)).await,
            (200, json!({"output": "caf\\xe9\t\u{e9}\n"}))
        );
        let (status, failed) =
            post(&exec, Some(r#"{"code": "print('partial') error('bad')"}"#)).await;
        assert_eq!(status, 422);
        assert_eq!(
            failed,
            json!({"error": "input:1: bad", "kind": "lua", "output": "partial\n"})
        );
        let (status, limit) = post(&exec, Some(r#"{"code": "while true do end"}"#)).await;
        assert_eq!((status, &limit["kind"]), (422, &json!("time")));
        let (status, bad_body) = post(&exec, Some(r#"{"cod": "x"}"#)).await;
        assert_eq!(status, 400);
        assert!(
            bad_body["error"]
                .as_str()
                .unwrap()
                .contains("unknown property `cod`"),
            "{bad_body}"
        );
        let (status, _) = post(&exec, Some("{")).await;
        assert_eq!(status, 400);

        let (status, _) = post("/v1/sessions", None).await;
        assert_eq!(status, 201);
        let (status, full) = post("/v1/sessions", None).await;
        assert_eq!(status, 503);
        assert!(
            full["error"]
                .as_str()
                .unwrap()
                .contains("too many live sessions"),
            "{full}"
        );

        let (status, _) = request(
            "DELETE",
            server.url(&format!("/v1/sessions/{id}")),
            None,
            None,
        )
        .await;
        assert_eq!(status, 204);
        let (status, gone) = post(&exec, Some(r#"{"code": "print(x)"}"#)).await;
        assert_eq!(status, 404);
        assert!(
            gone["error"].as_str().unwrap().contains("no session"),
            "{gone}"
        );
        let (status, _) = request(
            "DELETE",
            server.url(&format!("/v1/sessions/{id}")),
            None,
            None,
        )
        .await;
        assert_eq!(status, 404);
        let (status, _) = post("/v1/sessions", None).await;
        assert_eq!(status, 201, "a deleted session frees its place");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_functions_are_served_and_each_session_has_its_own_store() {
    use rlm_registry::providers::{HostFunction, Providers};
    bounded(async {
        let mut providers = Providers::builtin();
        providers
            .register_function(
                "shop",
                HostFunction::typed(
                    "price_of",
                    "--- The price of an item, in cents.\n---@param item string\n---@return integer",
                    |_, (item,): (String,)| Ok::<_, String>(item.len() as i64 * 10),
                ),
            )
            .unwrap();
        let options = ServeOptions {
            session_store: Some(1024),
            ..options()
        };
        let server = Server::with_providers(registry(), Arc::new(providers), options);
        let server = TestServer::serving("127.0.0.1:0", server).await;
        let get = |path: &str| request("GET", server.url(path), None, None);
        let post = |path: &str, body: Option<&str>| request("POST", server.url(path), body, None);

        // The host function is a tool over MCP and the JSON API.
        let client = server.mcp().await;
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "price_of"));
        assert!(!tools.iter().any(|t| t.name == "llm_query"), "built-ins run in Lua only");
        let result = call(&client, "price_of", json!({"item": "pear"})).await;
        assert!(!is_error(&result), "{}", text(&result));
        assert_eq!(
            post("/v1/functions/price_of", Some(r#"{"item": "apple"}"#)).await,
            (200, json!({"result": 50}))
        );
        let (status, described) = get("/v1/functions/price_of").await;
        assert_eq!((status, &described["source"]), (200, &json!("provider")));
        assert_eq!(described["provider"], "shop");

        // GET /v1/providers lists the built-in providers and the host's.
        let (status, listed) = get("/v1/providers").await;
        assert_eq!(status, 200);
        let names: Vec<&str> = listed["providers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["core", "re", "json", "csv", "llm", "agent", "user", "shop"]);
        let (status, shop) = get("/v1/providers/shop").await;
        assert_eq!((status, &shop["functions"][0]["name"]), (200, &json!("price_of")));
        assert_eq!(get("/v1/providers/nope").await.0, 404);

        // Each session has its own store: one never sees another's values.
        let (_, a) = post("/v1/sessions", None).await;
        let (_, b) = post("/v1/sessions", None).await;
        let exec = |id: &Value, code: &str| {
            let path = format!("/v1/sessions/{}/exec", id["id"].as_str().unwrap());
            post(&path, Some(&json!({"code": code}).to_string()))
                .into_future()
        };
        assert_eq!(
            exec(&a, "store_set('k', 'from a') print(store_get('k'), price_of('ab'))").await,
            (200, json!({"output": "from a\t20\n"}))
        );
        assert_eq!(
            exec(&b, "print(store_get('k'))").await,
            (200, json!({"output": "nil\n"}))
        );
        server.stop().await.unwrap();
    })
    .await;
}

/// A shop whose prices the host manages over HTTP and the model reads through a function.
struct Shop(Arc<std::sync::Mutex<std::collections::BTreeMap<String, i64>>>);

impl rlm_registry::providers::Provider for Shop {
    fn name(&self) -> &str {
        "shop"
    }

    fn description(&self) -> &str {
        "Prices, managed by the host."
    }

    fn functions(&self) -> Vec<rlm_registry::providers::HostFunction> {
        let prices = Arc::clone(&self.0);
        vec![rlm_registry::providers::HostFunction::typed(
            "price_of",
            "--- The price of an item, in cents.\n---@param item string\n---@return integer",
            move |_, (item,): (String,)| {
                let prices = prices.lock().unwrap();
                prices
                    .get(&item)
                    .copied()
                    .ok_or(format!("no price for {item}"))
            },
        )]
    }

    fn routes(&self) -> Vec<rlm_registry::providers::Route> {
        use rlm_registry::providers::{Method, Route, RouteResponse};
        let (all, set, remove) = (
            Arc::clone(&self.0),
            Arc::clone(&self.0),
            Arc::clone(&self.0),
        );
        vec![
            Route::new(
                Method::Get,
                "/prices",
                "Every price at least ?min.",
                move |r| {
                    let min: i64 = r.query.get("min").and_then(|m| m.parse().ok()).unwrap_or(0);
                    let prices = all.lock().unwrap();
                    let kept: serde_json::Map<String, Value> = prices
                        .iter()
                        .filter(|(_, cents)| **cents >= min)
                        .map(|(item, cents)| (item.clone(), json!(cents)))
                        .collect();
                    RouteResponse::ok(Value::Object(kept))
                },
            ),
            Route::new(
                Method::Put,
                "/prices/{item}",
                "Sets a price: {\"cents\": n}.",
                move |r| {
                    let Some(cents) = r.body["cents"].as_i64() else {
                        return RouteResponse::error(400, "the body needs an integer `cents`");
                    };
                    set.lock().unwrap().insert(r.params["item"].clone(), cents);
                    RouteResponse::ok(json!({"item": r.params["item"], "cents": cents}))
                },
            ),
            Route::new(
                Method::Delete,
                "/prices/{item}",
                "Removes a price.",
                move |r| match remove.lock().unwrap().remove(&r.params["item"]) {
                    Some(_) => RouteResponse::ok(json!({"removed": r.params["item"]})),
                    None => RouteResponse::error(404, "no such item"),
                },
            ),
            Route::new(Method::Get, "/boom", "A handler that panics.", |_| {
                panic!("a bug in the host's handler")
            }),
        ]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_management_routes_are_served_and_change_what_functions_see() {
    use rlm_registry::providers::Providers;
    bounded(async {
        let mut providers = Providers::builtin();
        providers.register(Shop(Arc::default())).unwrap();
        let server = Server::with_providers(registry(), Arc::new(providers), options());
        let server = TestServer::serving("127.0.0.1:0", server).await;
        let send = |method: &str, path: &str, body: Option<&str>| {
            request(method, server.url(path), body, None)
        };

        // The listing shows the routes under their full paths.
        let (status, shop) = send("GET", "/v1/providers/shop", None).await;
        assert_eq!(status, 200);
        assert_eq!(
            shop["routes"][1],
            json!({"method": "PUT", "path": "/v1/providers/shop/prices/{item}", "description": "Sets a price: {\"cents\": n}."})
        );

        // The host sets a price; the function the model calls sees it.
        let tea = "/v1/providers/shop/prices/tea";
        assert_eq!(
            send("PUT", tea, Some(r#"{"cents": 250}"#)).await,
            (200, json!({"item": "tea", "cents": 250}))
        );
        send("PUT", "/v1/providers/shop/prices/jam", Some(r#"{"cents": 400}"#)).await;
        assert_eq!(
            send("POST", "/v1/functions/price_of", Some(r#"{"item": "tea"}"#)).await,
            (200, json!({"result": 250}))
        );
        assert_eq!(
            send("GET", "/v1/providers/shop/prices?min=300", None).await,
            (200, json!({"jam": 400}))
        );
        assert_eq!(send("DELETE", tea, None).await.0, 200);
        assert_eq!(
            send("POST", "/v1/functions/price_of", Some(r#"{"item": "tea"}"#)).await.0,
            422
        );

        // Errors: the handler's own, bad JSON, wrong method, no such route or provider,
        // and a panicking handler, which leaves the server answering.
        let (status, missing) = send("DELETE", tea, None).await;
        assert_eq!((status, missing["error"].as_str()), (404, Some("no such item")));
        assert_eq!(send("PUT", tea, Some(r#"{"cents": "x"}"#)).await.0, 400);
        let (status, malformed) = send("PUT", tea, Some("{cents")).await;
        assert_eq!(status, 400);
        assert!(malformed["error"].as_str().unwrap().contains("malformed JSON"));
        let (status, wrong) = send("POST", tea, Some("{}")).await;
        assert_eq!(status, 405);
        assert!(wrong["error"].as_str().unwrap().contains("PUT, DELETE"), "{wrong}");
        assert_eq!(send("GET", "/v1/providers/shop/nope", None).await.0, 404);
        assert_eq!(send("GET", "/v1/providers/nope/prices", None).await.0, 404);
        let (status, panicked) = send("GET", "/v1/providers/shop/boom", None).await;
        assert_eq!(status, 500);
        assert!(panicked["error"].as_str().unwrap().contains("panicked"));
        assert_eq!(send("GET", "/healthz", None).await.0, 200);
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_query_calls_a_model_only_when_serve_is_given_one() {
    use support::openai_server::{Behavior, OpenAiServer};
    bounded(async {
        let model = OpenAiServer::always(Behavior::reply("from the model"));
        let base_url = model.base_url();
        let served = stdio_client(&["--base-url", &base_url, "--model", "tiny"]).await;
        let result = run_lua(&served, "print(llm_query('hi'))").await;
        assert!(!is_error(&result), "{}", text(&result));
        assert_eq!(text(&result), "from the model\n");
        assert_eq!(model.requests()[0].json().unwrap()["model"], "tiny");
        served.cancel().await.unwrap();

        let unserved = stdio_client(&[]).await;
        let result = run_lua(&unserved, "print(llm_query('hi'))").await;
        assert!(is_error(&result));
        assert!(text(&result).contains("llm_query"), "{}", text(&result));
        assert_eq!(
            model.requests().len(),
            1,
            "no request without --model/--base-url"
        );
        unserved.cancel().await.unwrap();
    })
    .await;
}

/// Without `--context-window`, `rlm serve --model` checks `llm_query` prompts against the
/// window the model's server reports, asked once at start; without a model, nothing is
/// asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_model_without_a_window_is_checked_against_the_one_its_server_reports() {
    use support::openai_server::{Behavior, OpenAiServer};
    bounded(async {
        let model = OpenAiServer::always(Behavior::reply("from the model"));
        model.answer_get(
            "/v1/models",
            Behavior::Json(json!({"data": [{"id": "tiny", "max_model_len": 1_500}]})),
        );
        let serve = |model_args: &[&str]| {
            let mut command = support::cli::rlm_process();
            command
                .args(["serve", "--http", "127.0.0.1:0"])
                .args(model_args);
            ServedProcess::spawn(command)
        };
        let base_url = model.base_url();
        let served = serve(&["--base-url", &base_url, "--model", "tiny"]).await;
        let url = |path: &str| format!("http://{}{path}", served.address);
        let (_, created) = request("POST", url("/v1/sessions"), None, None).await;
        let exec = url(&format!(
            "/v1/sessions/{}/exec",
            created["id"].as_str().unwrap()
        ));
        let code = json!({"code": "print(llm_query(string.rep('word ', 600)))"}).to_string();
        let (status, refused) = request("POST", exec, Some(&code), None).await;
        assert_eq!(status, 422, "{refused}");
        let error = refused["error"].as_str().unwrap();
        assert!(
            error.contains("does not fit the model's context window of 1,500 tokens"),
            "{error}"
        );
        assert_eq!(model.request_count(), 0, "nothing sent");

        let _unserved = serve(&[]).await;
        let asked: Vec<String> = model.get_requests().into_iter().map(|r| r.path).collect();
        assert_eq!(asked, ["/v1/models"], "once, and only with a model");
    })
    .await;
}

/// With the served model's window (`--context-window`), a `llm_query` prompt that would
/// not fit is not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_llm_query_prompt_too_long_for_the_served_window_is_not_sent() {
    use rlm_registry::llm::{LlmClient, LlmConfig};
    use support::openai_server::{Behavior, OpenAiServer};
    bounded(async {
        let model = OpenAiServer::always(Behavior::reply("from the model"));
        let llm = LlmClient::new(LlmConfig::new(model.base_url(), "tiny")).unwrap();
        let server = TestServer::start(ServeOptions {
            llm: Some(Arc::new(llm)),
            context_window: Some(1_500),
            limits: rlm_registry::environment::Limits::default(),
            ..options()
        })
        .await;
        let (_, created) = request("POST", server.url("/v1/sessions"), None, None).await;
        let path = format!("/v1/sessions/{}/exec", created["id"].as_str().unwrap());
        let exec = |code: &str| {
            let body = json!({ "code": code }).to_string();
            let url = server.url(&path);
            async move { request("POST", url, Some(&body), None).await }
        };
        assert_eq!(
            exec("print(llm_query('hi'))").await,
            (200, json!({"output": "from the model\n"}))
        );
        let (status, refused) = exec("print(llm_query(string.rep('word ', 600)))").await;
        assert_eq!(status, 422);
        let error = refused["error"].as_str().unwrap();
        assert!(
            error.contains("llm_query: not sent: the prompt is 608 tokens (o200k_base) and, with 1,024 kept for the answer, does not fit the model's context window of 1,500 tokens"),
            "{error}"
        );
        assert_eq!(model.request_count(), 1, "nothing sent");
        server.stop().await.unwrap();
    })
    .await;
}
