//! Recognising a server's "the request does not fit the context window" answer, in the
//! wordings of the servers the client talks to, so that it is reported as
//! [`LlmError::ContextLength`](super::LlmError::ContextLength) (with the tokens and the
//! window when the server gives them) rather than as a bare HTTP status.
//!
//! The wordings, from the servers' own answers:
//!
//! - OpenAI: `{"error": {"message": "This model's maximum context length is 128000
//!   tokens. However, your messages resulted in 204308 tokens. …", "code":
//!   "context_length_exceeded"}}`, or `… you requested 4120 tokens (3120 in the messages,
//!   1000 in the completion) …`.
//! - vLLM: the same sentences under `{"object": "error", "message": …}`; newer versions
//!   `… However, you requested 65535 output tokens and your prompt contains at least
//!   62466 input tokens …`, older `Input prompt (2664 tokens) is too long and exceeds
//!   limit of 2048`.
//! - llama.cpp: `{"error": {"message": "the request exceeds the available context size.
//!   …", "type": "exceed_context_size_error", "n_prompt_tokens": 14429, "n_ctx": 8192}}`,
//!   newer `request (4390 tokens) exceeds the available context size (4096 tokens), try
//!   increasing it`, and `Context size has been exceeded.`
//! - SGLang: `{"object": "error", "message": "The input (61709 tokens) is longer than the
//!   model's context length (40960 tokens).", …}`.

use serde_json::Value;

/// What a context-length refusal says: the request's tokens and the window, as far as
/// the server gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The request's tokens as the server counted them: its prompt, or prompt and reply
    /// together when its message counts only that.
    pub prompt_tokens: Option<u64>,
    /// The context window.
    pub window: Option<u64>,
}

/// The refusal `body` holds, if it is one.
pub(crate) fn recognise(body: &str) -> Option<Refusal> {
    let json: Option<Value> = serde_json::from_str(body).ok();
    let error = json.as_ref().map(|json| json.get("error").unwrap_or(json));
    let field = |name: &str| error.and_then(|e| e.get(name));
    let message = field("message")
        .and_then(Value::as_str)
        .unwrap_or(body)
        .to_lowercase();
    let tagged = field("code").and_then(Value::as_str) == Some("context_length_exceeded")
        || field("type").and_then(Value::as_str) == Some("exceed_context_size_error");
    let number_field = |name: &str| field(name).and_then(Value::as_u64);
    let refusal = if message.contains("maximum context length is") {
        Refusal {
            prompt_tokens: number_before(&message, " in the messages")
                .or_else(|| number_after(&message, "resulted in"))
                .or_else(|| number_after(&message, "contains at least"))
                .or_else(|| number_after(&message, "you requested")),
            window: number_after(&message, "maximum context length is"),
        }
    } else if message.contains("exceeds the available context size")
        || message.contains("context size has been exceeded")
    {
        Refusal {
            prompt_tokens: number_field("n_prompt_tokens")
                .or_else(|| number_after(&message, "request (")),
            window: number_field("n_ctx").or_else(|| number_after(&message, "context size (")),
        }
    } else if message.contains("longer than the model's context length") {
        Refusal {
            prompt_tokens: number_after(&message, "the input ("),
            window: number_after(&message, "context length ("),
        }
    } else if message.contains("is too long and exceeds limit of") {
        Refusal {
            prompt_tokens: number_after(&message, "input prompt ("),
            window: number_after(&message, "exceeds limit of"),
        }
    } else if tagged {
        Refusal::default()
    } else {
        return None;
    };
    Some(refusal)
}

/// The number right after `marker` in `text` (spaces and `(` skipped; `12,000` read as
/// 12000).
fn number_after(text: &str, marker: &str) -> Option<u64> {
    let at = text.find(marker)? + marker.len();
    let rest = text[at..].trim_start_matches([' ', '(']);
    parse_leading(rest)
}

/// The number right before `marker` in `text`: `(3120 in the messages`.
fn number_before(text: &str, marker: &str) -> Option<u64> {
    let before = text[..text.find(marker)?].trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_digit() || c == ','))
        .map_or(0, |i| i + 1);
    parse_leading(&before[start..])
}

/// The digits (and thousands commas) at the start of `text`, as a number.
fn parse_leading(text: &str) -> Option<u64> {
    let digits: String = text
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(prompt_tokens: Option<u64>, window: Option<u64>) -> Option<Refusal> {
        Some(Refusal {
            prompt_tokens,
            window,
        })
    }

    #[test]
    fn openai_wordings() {
        let body = r#"{"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#;
        assert_eq!(recognise(body), refusal(Some(8227), Some(8192)));
        let body = r#"{"error": {"message": "This model's maximum context length is 128000 tokens. However, you requested 131447 tokens (71447 in the messages, 60000 in the completion). Please reduce the length of the messages or completion.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#;
        assert_eq!(recognise(body), refusal(Some(71447), Some(128000)));
        let body =
            r#"{"error": {"message": "Input is too long.", "code": "context_length_exceeded"}}"#;
        assert_eq!(recognise(body), refusal(None, None));
    }

    #[test]
    fn vllm_wordings() {
        let body = r#"{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 19591 tokens (9591 in the messages, 10000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(recognise(body), refusal(Some(9591), Some(16384)));
        let body = r#"{"object":"error","message":"This model's maximum context length is 131072 tokens. However, you requested 351430 tokens. Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(recognise(body), refusal(Some(351430), Some(131072)));
        let body = r#"{"object":"error","message":"This model's maximum context length is 128000 tokens. However, you requested 65535 output tokens and your prompt contains at least 62466 input tokens, for a total of at least 128001 tokens.","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(recognise(body), refusal(Some(62466), Some(128000)));
        let body = "Input prompt (2664 tokens) is too long and exceeds limit of 2048";
        assert_eq!(recognise(body), refusal(Some(2664), Some(2048)));
    }

    #[test]
    fn llama_cpp_wordings() {
        let body = r#"{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}"#;
        assert_eq!(recognise(body), refusal(Some(14429), Some(8192)));
        let body = r#"{"error":{"code":400,"message":"request (4390 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error"}}"#;
        assert_eq!(recognise(body), refusal(Some(4390), Some(4096)));
        let body = r#"{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}"#;
        assert_eq!(recognise(body), refusal(None, None));
    }

    #[test]
    fn sglang_wording() {
        let body = r#"{"object":"error","message":"The input (61709 tokens) is longer than the model's context length (40960 tokens).","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(recognise(body), refusal(Some(61709), Some(40960)));
    }

    #[test]
    fn other_errors_are_not_refusals_of_length() {
        for body in [
            r#"{"error": {"message": "Invalid API key", "type": "invalid_request_error", "code": "invalid_api_key"}}"#,
            r#"{"error": {"message": "scripted status 400"}}"#,
            "upstream connect error",
            "",
            r#"{"error": {"message": "max_tokens must be at least 1"}}"#,
        ] {
            assert_eq!(recognise(body), None, "{body}");
        }
    }

    #[test]
    fn numbers_are_read_with_their_commas() {
        assert_eq!(number_after("is 12,000 tokens", "is"), Some(12000));
        assert_eq!(
            number_before("(3,120 in the messages", " in the messages"),
            Some(3120)
        );
        assert_eq!(number_after("no number here", "here"), None);
        assert_eq!(number_after("short", "missing"), None);
    }
}
