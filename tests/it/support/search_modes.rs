//! Helpers of the LLM search mode tests (`tests/it/search_modes*.rs`): a client for the
//! scripted server and a small registry of text functions.

use std::time::Duration;

use rlm_registry::Registry;
use rlm_registry::llm::{LlmClient, LlmConfig};

use super::openai_server::OpenAiServer;

/// A client for `server`: one retry, millisecond backoffs.
pub fn client(server: &OpenAiServer) -> LlmClient {
    let config = LlmConfig::new(server.base_url(), "rank-model")
        .with_max_retries(1)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
        .with_timeout(Duration::from_secs(5));
    LlmClient::new(config).expect("valid config")
}

/// Five functions about texts: "text" matches them all, "count" three of them.
pub const TEXT_FUNCTIONS: &[(&str, &str)] = &[
    (
        "word_count",
        "--- Counts the words of a text.\n---@tag analyze\n---@param text string The text\n---@return integer\nfunction word_count(text) return 0 end",
    ),
    (
        "line_count",
        "--- Counts the lines of a text.\n---@tag analyze\n---@param text string The text\n---@return integer\nfunction line_count(text) return 0 end",
    ),
    (
        "char_count",
        "--- Counts the characters of a text, one by one.\n---@param text string The text\n---@return integer\nfunction char_count(text) return 0 end",
    ),
    (
        "shout",
        "--- Upper-cases a text.\n---@param text string The text\n---@return string\nfunction shout(text) return text end",
    ),
    (
        "reverse_text",
        "--- Reverses a text, last character first.\n---@param text string The text\n---@return string\nfunction reverse_text(text) return text end",
    ),
];

pub fn text_registry() -> Registry {
    Registry::from_map(TEXT_FUNCTIONS.iter().copied()).expect("valid functions")
}
