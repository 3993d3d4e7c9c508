//! The `direct` baseline: the context in the prompt, cut to the context window with a
//! note when longer, and one model call.

use crate::llm::{Completion, Llm, LlmError, Message, Request};
use crate::rlm::Context;
use crate::rlm::trajectory::{Record, Setup, Start, Turn};
use crate::text_format::char_prefix;
use crate::tokens;

/// Tokens kept free in the window for the instructions, the question and the answer.
pub const RESERVED_TOKENS: usize = 1_024;

/// The system prompt of the `direct` method.
pub const DIRECT_SYSTEM: &str = "Answer the question about the context below. Reply with the answer only, as the question asks for it, with no explanation.";

/// The user message: the context (cut to fit `context_window` tokens, with a note
/// saying so), then the question.
///
/// ```
/// use rlm_registry::eval::direct_prompt;
///
/// let context = "word ".repeat(5_000);
/// let prompt = direct_prompt(&context, "How many words?", 2_024);
/// // 2,024 tokens less 1,024 reserved and 4 for the question.
/// assert!(prompt.contains("[The context was cut to its first 996 of 5001 tokens"));
/// assert!(prompt.ends_with("Question: How many words?"));
/// ```
pub fn direct_prompt(context: &str, question: &str, context_window: u64) -> String {
    let window = usize::try_from(context_window).unwrap_or(usize::MAX);
    let room = window
        .saturating_sub(RESERVED_TOKENS)
        .saturating_sub(tokens::count(question));
    let total = tokens::count(context);
    if total <= room {
        return format!("Context:\n{context}\n\nQuestion: {question}");
    }
    let kept = tokens::truncate(context, room);
    format!(
        "Context:\n{kept}\n[The context was cut to its first {room} of {total} tokens to fit the context window; the rest is not shown.]\n\nQuestion: {question}"
    )
}

/// The context as `direct` puts it in the prompt: a text as it is (any bytes not UTF-8
/// replaced), chunks one after the other, a corpus's documents each under its name (as
/// the RLM paper gives its baselines a corpus), to be cut to the window.
///
/// ```
/// use rlm_registry::corpus::{Corpus, Document};
/// use rlm_registry::eval::direct_context;
/// use rlm_registry::rlm::Context;
///
/// let corpus = Corpus { documents: vec![Document::text("a.md", "one"), Document::text("b.md", "two")], skipped: 0 };
/// assert_eq!(direct_context(&Context::Corpus(corpus)), "## a.md\none\n\n## b.md\ntwo\n\n");
/// ```
pub fn direct_context(context: &Context) -> String {
    match context {
        Context::Text(text) => String::from_utf8_lossy(text).into_owned(),
        Context::Chunks(chunks) => String::from_utf8_lossy(&chunks.concat()).into_owned(),
        Context::Corpus(corpus) => {
            let mut text =
                String::with_capacity(corpus.total_bytes() + 16 * corpus.documents.len());
            for document in &corpus.documents {
                text.push_str("## ");
                text.push_str(&document.name);
                text.push('\n');
                text.push_str(&String::from_utf8_lossy(&document.text));
                text.push_str("\n\n");
            }
            text
        }
    }
}

/// Asks `llm` the question with the context in the prompt.
pub fn ask_direct(
    llm: &dyn Llm,
    context: &str,
    question: &str,
    context_window: u64,
) -> Result<Completion, LlmError> {
    llm.complete(direct_request(context, question, context_window))
}

/// The one request of the `direct` method.
pub fn direct_request(context: &str, question: &str, context_window: u64) -> Request {
    let prompt = direct_prompt(context, question, context_window);
    Request::new(vec![Message::system(DIRECT_SYSTEM), Message::user(prompt)])
}

/// Characters of each message kept in a `direct` trace: the context itself is in the
/// task, and a trace per task of a 1M-token run would otherwise weigh megabytes.
const TRACED_CHARS: usize = 4_000;

/// The trace of a `direct` run, in the loop's JSONL trace format (its
/// [`trajectory`](crate::rlm::trajectory) records): a `start` line with the messages (each
/// cut to a few thousand characters, with a note) and one `turn`.
pub(super) fn direct_trace(
    question: &str,
    request: &Request,
    outcome: &Result<Completion, LlmError>,
    elapsed_ms: u64,
) -> String {
    let messages = request.messages.iter().map(kept_in_trace).collect();
    let start = Record::Start(Start {
        agent: "0".to_string(),
        question: question.to_string(),
        messages,
        setup: Setup {
            version: Some(env!("CARGO_PKG_VERSION").to_string()),
            ..Setup::default()
        },
        ..Start::default()
    });
    let turn = match outcome {
        Ok(c) => Turn {
            final_answer: Some(direct_answer(c)),
            reply: Some(c.content.clone()),
            reasoning: c.reasoning.clone(),
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            reasoning_tokens: c.reasoning_tokens,
            finish_reason: c.finish_reason.clone(),
            run_tokens: c.total_tokens(),
            ..Turn::default()
        },
        Err(e) => Turn {
            error: Some(e.to_string()),
            ..Turn::default()
        },
    };
    let turn = Record::Turn(Turn {
        agent: "0".to_string(),
        turn: 1,
        messages_sent: request.messages.len(),
        elapsed_ms,
        llm_ms: elapsed_ms,
        ..turn
    });
    [start, turn]
        .iter()
        .filter_map(|record| serde_json::to_string(record).ok())
        .map(|line| line + "\n")
        .collect()
}

/// The `direct` method's answer: the reply after the model's thinking, trimmed.
///
/// ```
/// # use rlm_registry::llm::Completion;
/// # use rlm_registry::eval::direct_answer;
/// assert_eq!(direct_answer(&Completion::new("<think>hm</think>\n Paris \n")), "Paris");
/// ```
pub fn direct_answer(completion: &Completion) -> String {
    completion.answer().trim().to_string()
}

/// `message` with its text cut to [`TRACED_CHARS`] characters, with a note of the rest.
fn kept_in_trace(message: &Message) -> Message {
    let text = message.text();
    let kept = char_prefix(text, TRACED_CHARS);
    if kept.len() == text.len() {
        return message.clone();
    }
    Message::new(
        message.role,
        format!(
            "{kept}\n[… {} more bytes not kept in the trace]",
            text.len() - kept.len()
        ),
    )
}
