//! The `direct` baseline: the context in the prompt, cut to the context window with a
//! note when longer, and one model call.

use crate::llm::{Completion, Llm, LlmError, Message, Request};
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
/// assert!(prompt.contains("[The context was cut to its first 1000 of 5000 tokens"));
/// assert!(prompt.ends_with("Question: How many words?"));
/// ```
pub fn direct_prompt(context: &str, question: &str, context_window: usize) -> String {
    let room = context_window
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

/// Asks `llm` the question with the context in the prompt.
pub fn ask_direct(
    llm: &dyn Llm,
    context: &str,
    question: &str,
    context_window: usize,
) -> Result<Completion, LlmError> {
    let prompt = direct_prompt(context, question, context_window);
    llm.complete(Request::new(vec![
        Message::system(DIRECT_SYSTEM),
        Message::user(prompt),
    ]))
}
