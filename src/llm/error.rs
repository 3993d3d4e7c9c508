//! [`LlmError`]: why a call to the model failed, in words a model or a user can act on.

use std::fmt;
use std::time::Duration;

/// Why a chat completion failed. Every variant's `Display` is a complete sentence that
/// says what happened and, for HTTP failures, how many attempts were made.
///
/// ```
/// use rlm_registry::llm::LlmError;
///
/// let error = LlmError::Status {
///     status: 503,
///     body: "overloaded".into(),
///     attempts: 4,
///     retried: true,
/// };
/// assert_eq!(error.status(), Some(503));
/// assert_eq!(error.attempts(), 4);
/// assert!(error.to_string().contains("HTTP 503"));
/// assert!(error.to_string().contains("4 attempts"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LlmError {
    /// The configuration is unusable (a bad base URL, an empty model, an environment
    /// variable that does not parse). No request was sent.
    Config(String),
    /// The server answered with a non-success HTTP status: 429 or 5xx on the last of
    /// the allowed attempts (`retried`), or another status, which is not retried.
    Status {
        /// The HTTP status code.
        status: u16,
        /// The start of the response body.
        body: String,
        /// HTTP attempts made, this one included.
        attempts: u32,
        /// Whether the status is one that is retried (429, 5xx): the attempts ran out.
        retried: bool,
    },
    /// No complete response arrived within the per-attempt timeout, on every attempt.
    Timeout {
        /// The per-attempt timeout.
        timeout: Duration,
        /// HTTP attempts made.
        attempts: u32,
    },
    /// The connection failed: refused, reset, closed before a response, unknown host,
    /// TLS failure…
    Transport {
        /// What went wrong, with the URL.
        message: String,
        /// HTTP attempts made.
        attempts: u32,
        /// Whether this kind of failure is retried (it is for refused, reset or
        /// dropped connections): the attempts ran out.
        retried: bool,
    },
    /// The server answered 2xx with something that is not a chat completion: not
    /// JSON, or JSON without `choices[0].message.content`. Not retried.
    MalformedResponse {
        /// What is missing or wrong.
        reason: String,
        /// The start of the response body.
        snippet: String,
        /// HTTP attempts made.
        attempts: u32,
    },
    /// The call was not made: a budget shared by a run (tokens, calls, wall time; see
    /// `rlm::Budgets`) is spent. No request was sent.
    BudgetExhausted(String),
    /// The request does not fit the model's context window: the server said so, in the
    /// wording of OpenAI, vLLM, llama.cpp or SGLang (whatever its HTTP status), or a
    /// window check refused it before it was sent (`attempts` 0). Not retried.
    ///
    /// ```
    /// use rlm_registry::llm::LlmError;
    ///
    /// let error = LlmError::ContextLength { prompt_tokens: Some(9_656), window: Some(8_192), body: String::new(), attempts: 1 };
    /// assert!(error.to_string().contains("does not fit the model's context window: 9,656 tokens, the window is 8,192"));
    /// assert!(error.is_context_length());
    /// ```
    ContextLength {
        /// The request's tokens as counted: by the server (its prompt, or prompt and
        /// reply together when its message counts only that), or by the check.
        prompt_tokens: Option<u64>,
        /// The context window in tokens, when known.
        window: Option<u64>,
        /// The start of the server's answer; empty when nothing was sent.
        body: String,
        /// HTTP attempts made: 0 when the request was not sent.
        attempts: u32,
    },
    /// An [`Llm`](super::Llm) given by a host program (a callback in another language,
    /// say) failed: its own sentence, shown as it is.
    ///
    /// ```
    /// use rlm_registry::llm::LlmError;
    ///
    /// let error = LlmError::Callback("the llm callable raised ValueError: no quota".into());
    /// assert_eq!(error.to_string(), "the llm callable raised ValueError: no quota");
    /// assert_eq!(error.attempts(), 0);
    /// ```
    Callback(String),
    /// The run was cancelled while the call was in flight: its answer, if one comes, is
    /// dropped.
    Interrupted,
}

impl LlmError {
    /// HTTP attempts made before giving up (0 for [`LlmError::Config`],
    /// [`LlmError::BudgetExhausted`] and [`LlmError::Callback`]).
    pub fn attempts(&self) -> u32 {
        match self {
            LlmError::Config(_)
            | LlmError::BudgetExhausted(_)
            | LlmError::Callback(_)
            | LlmError::Interrupted => 0,
            LlmError::Status { attempts, .. }
            | LlmError::ContextLength { attempts, .. }
            | LlmError::Timeout { attempts, .. }
            | LlmError::Transport { attempts, .. }
            | LlmError::MalformedResponse { attempts, .. } => *attempts,
        }
    }

    /// The HTTP status, for [`LlmError::Status`].
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether every attempt timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, LlmError::Timeout { .. })
    }

    /// Whether the request does not fit the model's context window
    /// ([`LlmError::ContextLength`]).
    pub fn is_context_length(&self) -> bool {
        matches!(self, LlmError::ContextLength { .. })
    }
}

/// "after 1 attempt", "gave up after 4 attempts", "not retried".
fn attempts_note(attempts: u32, retried: bool) -> String {
    let plural = if attempts == 1 { "" } else { "s" };
    if retried {
        format!("gave up after {attempts} attempt{plural}")
    } else {
        format!("not retried; {attempts} attempt{plural} made")
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => " Bad Request",
        401 => " Unauthorized",
        402 => " Payment Required",
        403 => " Forbidden",
        404 => " Not Found",
        408 => " Request Timeout",
        413 => " Payload Too Large",
        422 => " Unprocessable Entity",
        429 => " Too Many Requests",
        500 => " Internal Server Error",
        502 => " Bad Gateway",
        503 => " Service Unavailable",
        504 => " Gateway Timeout",
        _ => "",
    }
}

fn hint(status: u16) -> &'static str {
    match status {
        401 | 403 => " (check the API key: RLM_API_KEY or OPENAI_API_KEY)",
        404 => " (check the base URL and the model name)",
        413 => " (the prompt is too large for the server)",
        300..=399 => " (a redirect, not followed: check the base URL)",
        _ => "",
    }
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LlmError::Config(message) => write!(f, "LLM configuration error: {message}"),
            LlmError::BudgetExhausted(reason) => write!(f, "LLM call not made: {reason}"),
            LlmError::Callback(message) => f.write_str(message),
            LlmError::Interrupted => f.write_str("interrupted: the run was cancelled"),
            LlmError::Status {
                status,
                body,
                attempts,
                retried,
            } => {
                write!(
                    f,
                    "LLM request failed: the server answered HTTP {status}{}{} ({})",
                    reason_phrase(*status),
                    hint(*status),
                    attempts_note(*attempts, *retried),
                )?;
                if body.is_empty() {
                    f.write_str(" with an empty body")
                } else {
                    write!(f, "; body: {body}")
                }
            }
            LlmError::ContextLength {
                prompt_tokens,
                window,
                body,
                attempts,
            } => {
                let sent = if *attempts == 0 {
                    "LLM request not sent"
                } else {
                    "LLM request refused by the server"
                };
                write!(f, "{sent}: it does not fit the model's context window")?;
                match (prompt_tokens, window) {
                    (Some(tokens), Some(window)) => write!(
                        f,
                        ": {} tokens, the window is {}",
                        with_commas(*tokens),
                        with_commas(*window)
                    )?,
                    (Some(tokens), None) => write!(f, ": {} tokens", with_commas(*tokens))?,
                    (None, Some(window)) => write!(f, " of {} tokens", with_commas(*window))?,
                    (None, None) => {}
                }
                if !body.is_empty() {
                    write!(f, "; body: {body}")?;
                }
                Ok(())
            }
            LlmError::Timeout { timeout, attempts } => write!(
                f,
                "LLM request failed: timed out, no complete response within {timeout:?} ({})",
                attempts_note(*attempts, true),
            ),
            LlmError::Transport {
                message,
                attempts,
                retried,
            } => write!(
                f,
                "LLM request failed: {message} ({})",
                attempts_note(*attempts, *retried),
            ),
            LlmError::MalformedResponse {
                reason,
                snippet,
                attempts,
            } => {
                write!(f, "LLM request failed: malformed response, {reason}")?;
                if *attempts > 1 {
                    write!(f, " (on attempt {attempts})")?;
                }
                if snippet.is_empty() {
                    f.write_str("; the body was empty")
                } else {
                    write!(f, "; body: {snippet}")
                }
            }
        }
    }
}

impl std::error::Error for LlmError {}

/// `12,345`: the leaves name no other module, so this is not `text_format::thousands`.
fn with_commas(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The start of `body` on one line, at most `SNIPPET_CHARS` characters, quoted with
/// backticks, with `…` when cut.
pub(crate) fn snippet(body: &str) -> String {
    const SNIPPET_CHARS: usize = 200;
    let body = body.trim();
    if body.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(body.len().min(SNIPPET_CHARS * 2) + 4);
    out.push('`');
    let mut chars = body.chars();
    for c in chars.by_ref().take(SNIPPET_CHARS) {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out.push('`');
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_are_short_and_single_line() {
        assert_eq!(snippet(""), "");
        assert_eq!(snippet(" a\nb "), "`a b`");
        let long = "é".repeat(500);
        let cut = snippet(&long);
        assert!(cut.ends_with("`…"));
        assert_eq!(cut.chars().filter(|&c| c == 'é').count(), 200);
    }

    #[test]
    fn messages_say_what_and_how_many_attempts() {
        let error = LlmError::Status {
            status: 400,
            body: "`bad`".into(),
            attempts: 1,
            retried: false,
        };
        assert_eq!(
            error.to_string(),
            "LLM request failed: the server answered HTTP 400 Bad Request \
             (not retried; 1 attempt made); body: `bad`"
        );
        let error = LlmError::Timeout {
            timeout: Duration::from_millis(200),
            attempts: 3,
        };
        assert_eq!(
            error.to_string(),
            "LLM request failed: timed out, no complete response within 200ms \
             (gave up after 3 attempts)"
        );
    }
}
