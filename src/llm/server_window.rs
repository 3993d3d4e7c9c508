//! What a server says its context window is, asked once before a run when nothing else
//! gives the window: [`server_window`].
//!
//! The servers' own answers, read in this order:
//!
//! - llama.cpp: `GET /v1/models` lists the model with `owned_by: "llamacpp"` and
//!   `meta.n_ctx_train` (what the model was trained for), and `GET /props` gives
//!   `default_generation_settings.n_ctx`, the context of one slot: the window requests
//!   are refused against, which is the one taken (`n_ctx_train` only when `/props` does
//!   not answer).
//! - vLLM and SGLang: `max_model_len` on the model's entry of `GET /v1/models`.
//! - LM Studio: `loaded_context_length` (the window the model was loaded with), else
//!   `max_context_length`.
//! - OpenRouter: `context_length`, lowered to `top_provider.context_length` when that is
//!   smaller; others `context_window`.
//!
//! Ollama is not asked: its `/api/show` gives what the model was trained for, while
//! it runs with a smaller `num_ctx` and cuts a longer prompt instead of refusing it.

use std::io::Read;
use std::time::Duration;

use serde_json::Value;

use super::LlmConfig;

/// How long the question may take, all of it: a run waits this long at most before it
/// starts without a window.
pub const SERVER_WINDOW_TIMEOUT: Duration = Duration::from_secs(2);

/// The largest answer read: a long model list (OpenRouter's) fits well within it.
const MAX_ANSWER_BYTES: u64 = 8 * 1024 * 1024;

/// The context window, in tokens, the server at `config.base_url` reports for
/// `config.model`, or `None` when it does not say: one `GET {base_url}/models` (and for
/// llama.cpp one `GET /props`), with the API key, within [`SERVER_WINDOW_TIMEOUT`], never
/// retried. Any failure, status or shape it does not know is `None`, never an error: a
/// run without a window goes on as before.
///
/// ```no_run
/// use rlm_registry::llm::{LlmConfig, server_window};
///
/// let window = server_window(&LlmConfig::new("http://localhost:8080/v1", "qwen"));
/// println!("{window:?}"); // Some(8192) from a llama.cpp server started with -c 8192
/// ```
pub fn server_window(config: &LlmConfig) -> Option<u64> {
    if config.validate().is_err() {
        return None;
    }
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(SERVER_WINDOW_TIMEOUT))
            .max_redirects(0)
            .user_agent(concat!("rlm-registry/", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    let get = |url: &str| get_json(&agent, url, config.api_key.as_deref());
    let base = config.base_url.trim_end_matches('/');
    let models = get(&format!("{base}/models"))?;
    let entry = model_entry(&models, &config.model)?;
    if is_llama_cpp(entry) {
        // `/props` sits at the server's root, beside `/v1`.
        let root = base.strip_suffix("/v1").unwrap_or(base);
        let slot = get(&format!("{root}/props")).and_then(|props| props_window(&props));
        return slot.or_else(|| positive(entry.pointer("/meta/n_ctx_train")));
    }
    entry_window(entry)
}

/// One GET, its 2xx answer as JSON; `None` for anything else.
fn get_json(agent: &ureq::Agent, url: &str, api_key: Option<&str>) -> Option<Value> {
    let mut request = agent.get(url).header("Accept", "application/json");
    if let Some(key) = api_key {
        request = request.header("Authorization", format!("Bearer {key}"));
    }
    let mut response = request.call().ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut bytes = Vec::new();
    response
        .body_mut()
        .as_reader()
        .take(MAX_ANSWER_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The entry of `model` in a model list (`{"data": [{"id": …}, …]}`); the only entry
/// when the list has one (llama.cpp answers to any model name).
pub(crate) fn model_entry<'a>(models: &'a Value, model: &str) -> Option<&'a Value> {
    let data = models.get("data")?.as_array()?;
    let named = data
        .iter()
        .find(|entry| entry.get("id").and_then(Value::as_str) == Some(model));
    match (named, data.as_slice()) {
        (Some(entry), _) => Some(entry),
        (None, [only]) => Some(only),
        (None, _) => None,
    }
}

/// Whether a model list's entry is llama.cpp's.
fn is_llama_cpp(entry: &Value) -> bool {
    entry.get("owned_by").and_then(Value::as_str) == Some("llamacpp")
}

/// The window a model list's entry states, in the field names of vLLM, SGLang, LM
/// Studio, OpenRouter and the rest (see the module docs).
pub(crate) fn entry_window(entry: &Value) -> Option<u64> {
    let field = |name: &str| positive(entry.get(name));
    let openrouter = field("context_length").map(|model| {
        match positive(entry.pointer("/top_provider/context_length")) {
            Some(provider) => model.min(provider),
            None => model,
        }
    });
    field("max_model_len")
        .or_else(|| field("loaded_context_length"))
        .or(openrouter)
        .or_else(|| field("context_window"))
        .or_else(|| field("max_context_length"))
        .or_else(|| positive(entry.pointer("/meta/n_ctx_train")))
}

/// The context of one slot in llama.cpp's `/props`.
pub(crate) fn props_window(props: &Value) -> Option<u64> {
    positive(props.pointer("/default_generation_settings/n_ctx"))
}

/// A positive whole number of tokens.
fn positive(value: Option<&Value>) -> Option<u64> {
    value.and_then(Value::as_u64).filter(|tokens| *tokens > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_servers_field_is_read() {
        let cases = [
            (
                json!({"id": "m", "owned_by": "vllm", "max_model_len": 8192}),
                8192,
            ),
            (
                json!({"id": "m", "owned_by": "sglang", "max_model_len": 40960}),
                40960,
            ),
            (
                json!({"id": "m", "max_context_length": 32768, "loaded_context_length": 4096}),
                4096,
            ),
            (json!({"id": "m", "max_context_length": 32768}), 32768),
            (
                json!({"id": "m", "context_length": 200000, "top_provider": {"context_length": 64000}}),
                64000,
            ),
            (json!({"id": "m", "context_length": 131072}), 131072),
            (json!({"id": "m", "context_window": 131072}), 131072),
            (json!({"id": "m", "meta": {"n_ctx_train": 32768}}), 32768),
        ];
        for (entry, window) in cases {
            assert_eq!(entry_window(&entry), Some(window), "{entry}");
        }
    }

    #[test]
    fn an_entry_without_a_window_or_with_nonsense_gives_none() {
        for entry in [
            json!({"id": "gpt-4o", "object": "model", "owned_by": "openai"}),
            json!({"id": "m", "max_model_len": 0}),
            json!({"id": "m", "max_model_len": -5}),
            json!({"id": "m", "max_model_len": "8192"}),
            json!({"id": "m", "max_model_len": 8192.5}),
            json!("m"),
        ] {
            assert_eq!(entry_window(&entry), None, "{entry}");
        }
    }

    #[test]
    fn the_models_entry_is_found_by_its_id_or_alone() {
        let list =
            json!({"data": [{"id": "a", "max_model_len": 1}, {"id": "b", "max_model_len": 2}]});
        assert_eq!(model_entry(&list, "b").and_then(entry_window), Some(2));
        assert_eq!(model_entry(&list, "c"), None, "two others: neither is it");
        let alone = json!({"data": [{"id": "model.gguf", "owned_by": "llamacpp"}]});
        assert!(model_entry(&alone, "anything").is_some());
        for garbage in [json!({}), json!({"data": {}}), json!([1, 2]), json!(null)] {
            assert_eq!(model_entry(&garbage, "a"), None);
        }
    }

    #[test]
    fn llama_cpp_props_give_the_slots_context() {
        let props = json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 4});
        assert_eq!(props_window(&props), Some(4096));
        assert_eq!(props_window(&json!({"n_ctx": 4096})), None);
    }

    #[test]
    fn a_server_that_is_not_there_gives_none_at_once() {
        // Port 9 (discard) on localhost: refused at once wherever the tests run.
        let started = std::time::Instant::now();
        assert_eq!(
            server_window(&LlmConfig::new("http://127.0.0.1:9/v1", "m")),
            None
        );
        assert_eq!(server_window(&LlmConfig::new("not a url", "m")), None);
        assert!(started.elapsed() <= SERVER_WINDOW_TIMEOUT + Duration::from_secs(1));
    }
}
