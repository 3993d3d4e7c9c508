//! Every string the model reads lives here: the system prompt (rules, the context's
//! description, the agent's role), the first message, and the feedback of each turn
//! (outputs, cut output notes, error wording with "did you mean", the reminder, notes on
//! blocks not run, the turns left, final answers that could not be used) and the message
//! a parent's code gets when a child agent fails. Change the wording here, and only here.
//!
//! The rest of the system prompt comes from where it is defined: the functions the host
//! offers ([`Catalog::host_prompt`]: the built-ins, documented in
//! [`BUILTINS`](crate::conventions::builtins::BUILTINS), and the providers' functions)
//! and the registry's listing
//! ([`Registry::system_prompt`](crate::Registry::system_prompt) or
//! [`Registry::compact_prompt`](crate::Registry::compact_prompt), per [`PromptMode`]).
//! The errors that end a run ([`RlmError`]) are worded for people, in
//! their `Display`.

use std::time::Duration;

use crate::catalog::Catalog;
use crate::conventions::AnswerProtocol;
use crate::environment::{AnswerSchema, ExecError};
use crate::text_format::{byte_prefix, thousands};
use crate::tokens;

use super::context::Context;
use super::prompt_mode::PromptMode;
use super::report::RlmError;

// ---- The system prompt and the first message.

/// The numbers the rules quote, how the registry is listed, and how the agent answers.
pub(crate) struct Settings {
    /// The cap on one turn's output, in bytes.
    pub output_bytes: usize,
    /// The agent's turns at most.
    pub max_iterations: u32,
    /// The time limit of one block.
    pub time_limit: Duration,
    /// The agent's depth: 0 for the root.
    pub depth: usize,
    /// The deepest level of children.
    pub max_depth: usize,
    /// How the registry is listed.
    pub prompt_mode: PromptMode,
    /// How the rules teach the model to end the run.
    pub answer_protocol: AnswerProtocol,
    /// The schema the agent's answer must match, if any.
    pub schema: Option<AnswerSchema>,
    /// The run has a budget (tokens, calls, time or cost): the prompt points at
    /// `budget()`.
    pub budgeted: bool,
}

/// One part of the system prompt, as [`Rlm::prompt_parts`](super::Rlm::prompt_parts)
/// gives them and `rlm prompt --tokens` measures them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptPart {
    /// `rules`, `answer schema`, `context`, `role`, `built-in functions` or `registry
    /// functions`.
    pub name: &'static str,
    /// Its text; the system prompt is the parts joined by blank lines.
    pub text: String,
}

/// Who the agent is, how the REPL works and how to end the run.
fn rules(settings: &Settings) -> String {
    format!(
        r#"You are a Recursive Language Model (RLM) agent. You answer a question about a context that may be far larger than what you can read at once. You do not see the context: it is stored in the variable `context` of a Lua 5.4 REPL, and you study it by writing code.

## How the REPL works

- Write Lua in fenced blocks that open with ```lua and close with ```. Every ```lua block of your reply runs, in order; if one fails, the blocks after it do not run. Then the next message brings you what they printed.
- State persists: globals you assign (without `local`) and functions you define stay available in later blocks and turns. `local` variables last one block.
- Only what you `print` comes back, nothing else (not the value of the last expression). The output of one turn is cut after {output} bytes, so print counts, short slices and summaries, never the whole context.
- An error comes back with its line number, and a limit hit (time: {time:.0} s per block; memory; output) with its cause; your variables survive both. Fix the code and go on.
- The sandbox has Lua's `string`, `table`, `math`, `utf8` and `os.time`/`os.clock`; no files, no network, no `require`. Beside them: `json`, `csv`, `re` (Python-style regular expressions) and the functions listed below (Python-like helpers among them: use them rather than writing your own).
- You have at most {turns} turns (replies), so make each one count.

## How to work

1. Look before you answer: the size and shape of `context`, its first lines, matches for the key words of the question.
2. For a big context, split it into pieces (by lines, separators or tokens) and hand them to a sub-model with `llm_query`/`llm_query_batched`; keep the answers in variables and combine them.
   Several steps per piece (ask, read, ask again)? Write them as a function and run `results, errors = parallel_map(pieces, fn)`: all pieces' calls go out together.
3. Check what you found against the context before you commit to it.

## How to answer

{answer}"#,
        output = thousands(settings.output_bytes as u64),
        time = settings.time_limit.as_secs_f64(),
        turns = settings.max_iterations,
        answer = how_to_answer(settings.answer_protocol),
    )
}

/// The rules' last section: how to end the run, in the protocol the prompt teaches.
fn how_to_answer(protocol: AnswerProtocol) -> &'static str {
    match protocol {
        AnswerProtocol::Final => {
            "When you know the answer, call `FINAL(answer)` in a ```lua block, or build the answer in a variable and call `FINAL_VAR(\"name\")`. That ends the run: only the answer is kept. Call it only after you have seen the output that supports the answer, never in the same reply as the code that finds it."
        }
        AnswerProtocol::Answer => {
            "The REPL has a table `answer = {content = \"\", ready = false}`. Put your answer in `answer[\"content\"]` (build it over several turns if you like); when it is final, set `answer[\"ready\"] = true` in a ```lua block. That ends the run: only `answer[\"content\"]` is kept. Set `ready` only after you have seen the output that supports the answer, never in the same reply as the code that finds it."
        }
    }
}

/// The schema's section: the schema, and how a Lua value becomes the JSON it checks.
fn schema_section(schema: &AnswerSchema) -> String {
    let text = serde_json::to_string_pretty(schema.schema()).unwrap_or_default();
    format!(
        "## The answer's schema\n\nYour answer must be a value matching this JSON Schema:\n\n```json\n{text}\n```\n\nGive it as a Lua value: a table with keys 1..n is an array (`json.array()` for an empty one), a table with string keys an object, `json.null` is null. An answer that does not match is refused with each problem and where it is; fix it and answer again."
    )
}

/// The role's last sentence under a budget.
const BUDGETED: &str = " The run has budgets: `budget()` tells what is left (tokens, calls, seconds, cost, iterations); plan your calls to fit.";

/// The agent's place in the tree.
fn role(settings: &Settings) -> String {
    let mut text = String::new();
    if settings.depth > 0 {
        let returned = if settings.schema.is_some() {
            "as the Lua value your answer's JSON describes"
        } else {
            "as a string"
        };
        text.push_str(&format!(
            "You are a sub-agent at depth {} of {}: another agent's code called `rlm_query` with the sub-task below. Your answer is returned to that code {returned}, so answer exactly what it asks, in the form it asks for. `ask_user` and `notify_user` are not available to you.",
            settings.depth, settings.max_depth
        ));
    }
    if settings.depth >= settings.max_depth {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str("You are at the depth limit: you cannot start child agents (`rlm_query` is not available here); use `llm_query` for sub-model calls.");
    } else {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str("`rlm_query` starts a child agent with its own REPL, for sub-tasks that need code of their own; it costs much more than `llm_query`.");
    }
    text
}

/// The system prompt, part by part.
pub(crate) fn system_prompt_parts(
    catalog: &Catalog,
    context: Option<&Context>,
    settings: &Settings,
) -> Vec<PromptPart> {
    let context = match context {
        Some(context) => describe_context(context),
        None => "There is no context for this question: `context` is nil.".to_string(),
    };
    let part = |name, text| PromptPart { name, text };
    let mut parts = vec![part("rules", rules(settings))];
    if let Some(schema) = &settings.schema {
        parts.push(part("answer schema", schema_section(schema)));
    }
    parts.push(part("context", format!("## The context\n\n{context}")));
    let mut role = role(settings);
    if settings.budgeted {
        role.push_str(BUDGETED);
    }
    parts.push(part("role", format!("## Your role\n\n{role}")));
    let compact = settings.prompt_mode.is_compact_for(catalog.registry());
    let host = if compact {
        catalog.host_prompt_compact()
    } else {
        catalog.host_prompt()
    };
    parts.push(part("built-in functions", host));
    let listing = settings.prompt_mode.listing(catalog.registry());
    if !listing.is_empty() {
        parts.push(part("registry functions", listing.trim_end().to_string()));
    }
    parts
}

/// The whole system prompt: its parts joined by blank lines.
pub(crate) fn system_prompt(
    catalog: &Catalog,
    context: Option<&Context>,
    settings: &Settings,
) -> String {
    let parts = system_prompt_parts(catalog, context, settings);
    let texts: Vec<&str> = parts.iter().map(|part| part.text.as_str()).collect();
    let mut prompt = texts.join("\n\n");
    prompt.push('\n');
    prompt
}

/// The first user message.
pub(crate) fn question(question: &str, has_context: bool, protocol: AnswerProtocol) -> String {
    if has_context {
        format!(
            "{question}\n\n(The context is in the `context` variable, described in the system prompt; you have not seen any of it yet. Start by looking at it with code.)"
        )
    } else {
        format!(
            "{question}\n\n(There is no context: use the REPL as it helps, and answer with {}.)",
            answer_call(protocol)
        )
    }
}

/// A session's next question, after the answer to the last one.
pub(crate) fn follow_up(question: &str, added: &[String], protocol: AnswerProtocol) -> String {
    let context = match added {
        [] => "`context` is unchanged".to_string(),
        names => format!(
            "`context` is now a list of documents, these added at its end: {}",
            names.join(", ")
        ),
    };
    format!(
        "{question}\n\n(A new question in the same session: the REPL still holds every variable you set, and {context}. Answer it with {}.)",
        answer_call(protocol)
    )
}

/// What stands in a session's conversation for the answer a question did not get.
pub(crate) fn unanswered(error: &str) -> String {
    format!("(No answer to that question: {error}.)")
}

/// How the rules tell the model to give its answer, in a phrase.
fn answer_call(protocol: AnswerProtocol) -> &'static str {
    match protocol {
        AnswerProtocol::Final => "FINAL(answer)",
        AnswerProtocol::Answer => "answer[\"content\"] and answer[\"ready\"] = true",
    }
}

/// Contexts up to this size get an exact token count in the prompt; larger ones an
/// estimate (counting is linear, but a 100 MB context is not worth a second).
pub(super) const EXACT_TOKENS_UP_TO: usize = 4 * 1024 * 1024;
/// Chunk sizes listed in the prompt, at most.
const LISTED_CHUNKS: usize = 20;

/// The context's section of the system prompt: type, total size, chunk sizes.
pub(crate) fn describe_context(context: &Context) -> String {
    match context {
        Context::Text(text) => format!(
            "`context` is a string of {} bytes: {}, {}.",
            thousands(text.len() as u64),
            lines(text),
            token_estimate(text),
        ),
        Context::Chunks(chunks) => {
            let total: usize = chunks.iter().map(Vec::len).sum();
            let mut text = format!(
                "`context` is an array (a Lua table) of {} strings, {} bytes in total. Chunk sizes in bytes: ",
                thousands(chunks.len() as u64),
                thousands(total as u64),
            );
            let listed: Vec<String> = chunks
                .iter()
                .take(LISTED_CHUNKS)
                .enumerate()
                .map(|(i, c)| format!("[{}] {}", i + 1, thousands(c.len() as u64)))
                .collect();
            text.push_str(&listed.join(", "));
            if chunks.len() > LISTED_CHUNKS {
                let sizes = chunks.iter().map(Vec::len);
                text.push_str(&format!(
                    ", … ({} more; smallest {}, largest {})",
                    chunks.len() - LISTED_CHUNKS,
                    thousands(sizes.clone().min().unwrap_or(0) as u64),
                    thousands(sizes.max().unwrap_or(0) as u64),
                ));
            }
            text.push('.');
            text
        }
        Context::Corpus(corpus) => super::corpus_description::describe_corpus(corpus),
    }
}

/// `3 lines`: the lines of `text`, the last one counted without a final newline.
fn lines(text: &[u8]) -> String {
    let newlines = text.iter().filter(|&&b| b == b'\n').count();
    let count = newlines + usize::from(!text.is_empty() && !text.ends_with(b"\n"));
    format!(
        "{} line{}",
        thousands(count as u64),
        if count == 1 { "" } else { "s" }
    )
}

/// The tokens of `text`: counted up to [`EXACT_TOKENS_UP_TO`] bytes, estimated beyond.
fn token_estimate(text: &[u8]) -> String {
    if text.len() <= EXACT_TOKENS_UP_TO {
        let count = tokens::count(&String::from_utf8_lossy(text));
        format!("{} tokens (o200k_base)", thousands(count as u64))
    } else {
        format!("about {} tokens", thousands((text.len() / 4) as u64))
    }
}

/// The reminder after a reply with neither code nor a final answer.
pub(crate) fn reminder(protocol: AnswerProtocol) -> String {
    format!(
        "Your reply had no ```lua code block and no final answer. Write Lua in a ```lua block to study `context`, or give the answer with {} in a ```lua block. This is the only reminder: another reply without either ends the run.",
        answer_call(protocol)
    )
}

/// The reminder after a reply that was all thinking: its thinking never closed, so
/// nothing in it ran (a reply without code, as far as the run goes).
pub(crate) fn thinking_only(cut: bool, protocol: AnswerProtocol) -> String {
    let why = if cut {
        "it was cut at the token limit while still thinking"
    } else {
        "its thinking never closed"
    };
    format!(
        "Your reply was all thinking: {why}, and nothing inside thinking runs. Think briefly, close it with </think>, then write a ```lua block, or give the answer with {} in one. This is the only reminder: another reply without code or an answer ends the run.",
        answer_call(protocol)
    )
}

// ---- The feedback of a turn.

/// The feedback for a block that ran: its output (cut to `room` bytes), or a note that
/// it printed nothing, since only printed text comes back.
pub(crate) fn block_output(block: usize, output: &str, room: usize) -> String {
    if output.is_empty() {
        format!("Block {block} ran and printed nothing (only what you print comes back).")
    } else {
        format!(
            "Output of block {block}:\n{}",
            cut_bytes_noted(output, room)
        )
    }
}

/// The feedback for a block skipped because an earlier one failed.
pub(crate) fn not_run(block: usize) -> String {
    format!("Block {block} was not run (an earlier block failed).")
}

/// Why a `FINAL` written outside code is refused when a block of the same reply failed:
/// the answer may rest on code that did not run.
pub(crate) const FINAL_AFTER_FAILURE: &str = "Your FINAL outside the code was not accepted because a block failed: fix the code, check its output, then answer again.";

/// A note for the model, from the reply's parse (a fenced block that was not run).
pub(crate) fn note(note: &str) -> String {
    format!("Note: {note}.")
}

/// Why an unlabeled fenced block was not run.
pub(crate) fn unlabeled_not_lua(error: &str) -> String {
    format!("an unlabeled ``` block was not run: it is not valid Lua ({error}); label code ```lua")
}

/// Why a block labeled with another language was not run.
pub(crate) fn other_language(label: &str) -> String {
    format!("a ```{label} block was not run: only ```lua blocks run")
}

/// The note after a reply the server cut at its token limit.
pub(crate) const CUT_OFF: &str =
    "Note: your reply was cut off at the token limit; keep replies shorter.";

/// The note after a reply the server cut at its token limit inside a code block.
pub(crate) const CUT_IN_BLOCK: &str = "Note: your reply was cut off at the token limit inside a ```lua block, so that block did not run; write shorter blocks, one step at a time.";

/// What goes back into the conversation for a reply that was all thinking: the
/// thinking itself never does, and some servers refuse an empty turn.
pub(crate) const THINKING_ONLY_SENT_BACK: &str = "(thinking only)";

/// The nudge towards the answer in the last turns.
pub(crate) fn turns_left(left: u32, protocol: AnswerProtocol) -> String {
    format!(
        "Note: {left} turn{} left; give your answer with {} soon.",
        if left == 1 { "" } else { "s" },
        answer_call(protocol)
    )
}

/// `FINAL_VAR(name)` outside code with something that is not a Lua name.
pub(crate) fn final_var_not_a_name(name: &str) -> String {
    format!(
        "Your FINAL_VAR({name}) outside the code could not be used: FINAL_VAR takes the name of a global variable, e.g. FINAL_VAR(\"answer\")."
    )
}

/// `FINAL_VAR("name")` outside code that ran but set no answer.
pub(crate) fn final_var_no_answer(name: &str) -> String {
    format!("Your FINAL_VAR(\"{name}\") outside the code gave no answer.")
}

/// `FINAL_VAR("name")` outside code that failed with `message`.
pub(crate) fn final_var_failed(name: &str, message: &str) -> String {
    format!("Your FINAL_VAR(\"{name}\") outside the code could not be used: {message}")
}

/// A `FINAL(...)` outside code that could not be the answer (it did not match the
/// schema, say), with `message` saying why.
pub(crate) fn plain_final_refused(message: &str) -> String {
    format!("Your FINAL outside the code could not be used: {message}")
}

/// What the parent's `rlm_query` call returns as its error when child `id` fails.
pub(crate) fn child_failed(id: &str, error: &RlmError) -> String {
    format!("child agent {id} failed: {error}")
}

/// Cuts `text` to at most `max` bytes (at a character boundary) and says, on a line of
/// its own, how many bytes were cut: the model reads the note, not an ellipsis.
pub(crate) fn cut_bytes_noted(text: &str, max: usize) -> String {
    let kept = byte_prefix(text, max);
    if kept.len() == text.len() {
        return text.to_string();
    }
    let mut out = kept.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!(
        "[... {} more bytes cut; print less, or slices]",
        thousands((text.len() - kept.len()) as u64)
    ));
    out
}

/// The line of the block an error points at: messages start "input:LINE: ".
fn error_line(message: &str) -> Option<(usize, &str)> {
    let rest = message.strip_prefix("input:")?;
    let colon = rest.find(':')?;
    let line = rest[..colon].parse().ok()?;
    Some((line, rest[colon + 1..].trim_start()))
}

/// The message for a block that failed, with the output it printed before failing.
pub(crate) fn describe_error(
    block: usize,
    code: &str,
    error: &ExecError,
    max_bytes: usize,
) -> String {
    let mut text = match error {
        ExecError::Limit { kind, message, .. } => format!(
            "Block {block} hit the {kind} limit: {message}. The environment keeps its variables; \
             try a cheaper approach (smaller pieces, fewer calls, less output)."
        ),
        ExecError::Lua { .. } => {
            let message = cut_bytes_noted(error.message_without_hint(), max_bytes.max(200));
            match error_line(&message) {
                Some((line, rest)) => {
                    let mut text =
                        format!("Block {block} failed with a Lua error on line {line}: {rest}");
                    if let Some(source) = code.lines().nth(line.wrapping_sub(1)) {
                        let source = cut_bytes_noted(source.trim_end(), 200);
                        text.push_str(&format!("\n  {line} | {source}"));
                    }
                    text
                }
                None => format!("Block {block} failed with a Lua error: {message}"),
            }
        }
    };
    // The environment's hint (a Python habit's Lua way, or "did you mean") comes after
    // the line it is about.
    if let Some(hint) = error.hint() {
        text.push_str(&format!("\nHint: {hint}"));
    }
    let output = error.output();
    if !output.is_empty() {
        text.push_str(&format!(
            "\nOutput before the error:\n{}",
            cut_bytes_noted(output, max_bytes)
        ));
    }
    text
}

// ---- A history that fits the window (see `compaction.rs`).

/// What the model is asked when its conversation nears the context window: a summary
/// that lets it go on without the turns it replaces.
pub(crate) const SUMMARY_REQUEST: &str = "Your conversation is about to outgrow the model's context window, so it will be replaced by the summary you write now. Write no code: summarise your work so far for yourself, briefly: what you found (with the exact values and where they came from), what you still need to do, and which Lua variables hold what (name, type, contents). Your REPL's globals stay as they are.";

/// The user message that restarts a conversation compacted `times` times, after the
/// model's summary.
pub(crate) fn compacted(times: u32) -> String {
    let plural = if times == 1 { "" } else { "s" };
    format!(
        "Your conversation was compacted ({times} time{plural}) to fit the context window: the summary above stands for the turns before. The REPL's globals are intact, and `history` holds every message so far (history[i].role, history[i].content) if you need an earlier output whole. Go on from the summary; do not repeat work already done."
    )
}

/// What an older output is sent as when it is left out of the conversation: where the
/// whole of it is.
pub(crate) fn elided(turn: u32, index: usize, tokens: u64) -> String {
    format!(
        "[The output of turn {turn} ({} tokens) is left out here to save room; it is whole in history[{index}].content.]",
        thousands(tokens)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use crate::conventions::builtins::{BUILTINS as DOCS, BuiltinProvider};
    use crate::environment::LimitKind;
    use crate::hints::Names;
    use crate::providers::{AgentScope, Providers};

    fn catalog(registry: &Registry, depth: usize) -> Catalog {
        let scope = AgentScope {
            depth,
            can_spawn: depth < 1,
        };
        Catalog::new(registry.clone(), Providers::builtin_shared(), scope)
    }

    fn settings(depth: usize) -> Settings {
        Settings {
            output_bytes: 10_000,
            max_iterations: 10,
            time_limit: Duration::from_secs(300),
            depth,
            max_depth: 1,
            prompt_mode: PromptMode::Full,
            answer_protocol: AnswerProtocol::Final,
            budgeted: false,
            schema: None,
        }
    }

    #[test]
    fn the_prompt_has_every_piece() {
        let registry = Registry::baked();
        let prompt = system_prompt(
            &catalog(registry, 0),
            Some(&Context::from("a\nb\n")),
            &settings(0),
        );
        assert!(prompt.contains("```lua"));
        assert!(prompt.contains("cut after 10,000 bytes"));
        assert!(prompt.contains("`context` is a string of 4 bytes: 2 lines"));
        for builtin in DOCS
            .iter()
            .filter(|b| b.provider != BuiltinProvider::Primitives)
        {
            assert!(prompt.contains(builtin.doc), "{}", builtin.name);
        }
        assert!(prompt.contains(registry.system_prompt().trim_end()));
        assert!(prompt.contains("starts a child agent"));
        let child = system_prompt(&catalog(registry, 1), None, &settings(1));
        assert!(child.contains("sub-agent at depth 1 of 1"));
        assert!(child.contains("You are at the depth limit"));
        for out_of_scope in ["ask_user", "notify_user", "rlm_query", "rlm_query_batched"] {
            let declaration = format!("function {out_of_scope}(");
            assert!(!child.contains(&declaration), "{out_of_scope}");
        }
        assert!(child.contains("function llm_query("));
        assert!(child.contains("`context` is nil"));
    }

    #[test]
    fn an_empty_registry_adds_no_section() {
        for prompt_mode in [PromptMode::Full, PromptMode::Compact] {
            let settings = Settings {
                prompt_mode,
                ..settings(0)
            };
            let prompt = system_prompt(&catalog(&Registry::empty(), 0), None, &settings);
            assert!(!prompt.contains("## Registry functions"), "{prompt_mode:?}");
        }
    }

    #[test]
    fn the_compact_prompt_lists_every_function_in_one_line_and_no_full_doc() {
        let compact = Settings {
            prompt_mode: PromptMode::Compact,
            ..settings(0)
        };
        let catalog = catalog(Registry::baked(), 0);
        let prompt = system_prompt(&catalog, None, &compact);
        for builtin in DOCS
            .iter()
            .filter(|b| b.provider != BuiltinProvider::Primitives)
        {
            let spec = catalog.get(builtin.name).unwrap();
            let line = match builtin.field() {
                Some(_) => format!("\n{}\n", spec.function.signature()),
                None => format!("\n{}\n", spec.function.listing_line()),
            };
            assert!(prompt.contains(&line), "{}: {line}", builtin.name);
        }
        for function in Registry::baked().functions() {
            assert!(
                prompt.contains(&function.listing_line()),
                "{}",
                function.name()
            );
        }
        assert!(!prompt.contains("---@"), "no full doc");
        assert!(prompt.contains("`help(\"name\")` prints"));
    }

    #[test]
    fn the_answer_protocol_chooses_what_the_rules_teach() {
        let answer = Settings {
            answer_protocol: AnswerProtocol::Answer,
            ..settings(0)
        };
        let catalog = catalog(&Registry::empty(), 0);
        let taught = system_prompt(&catalog, None, &answer);
        assert!(
            taught.contains("set `answer[\"ready\"] = true`"),
            "{taught}"
        );
        assert!(!taught.contains("call `FINAL(answer)`"));
        let final_rules = system_prompt(&catalog, None, &settings(0));
        assert!(final_rules.contains("call `FINAL(answer)`"));
        assert!(!final_rules.contains("answer[\"ready\"]"));
        assert!(reminder(AnswerProtocol::Answer).contains("answer[\"ready\"] = true"));
        assert!(turns_left(1, AnswerProtocol::Final).contains("with FINAL(answer) soon"));
        assert!(question("Q", false, AnswerProtocol::Answer).contains("answer[\"content\"]"));
    }

    #[test]
    fn a_schema_is_shown_and_a_typed_child_is_told_what_it_returns() {
        let schema = AnswerSchema::new(serde_json::json!({"type": "integer"})).unwrap();
        let typed = Settings {
            schema: Some(schema),
            ..settings(1)
        };
        let parts = system_prompt_parts(&catalog(&Registry::empty(), 1), None, &typed);
        let names: Vec<&str> = parts.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "rules",
                "answer schema",
                "context",
                "role",
                "built-in functions"
            ]
        );
        assert!(
            parts[1]
                .text
                .contains("```json\n{\n  \"type\": \"integer\"\n}\n```")
        );
        assert!(
            parts[3]
                .text
                .contains("as the Lua value your answer's JSON describes")
        );
        let untyped = system_prompt(&catalog(&Registry::empty(), 1), None, &settings(1));
        assert!(untyped.contains("returned to that code as a string"));
        assert!(!untyped.contains("## The answer's schema"));
    }

    #[test]
    fn the_compact_prompt_keeps_the_builtins_and_lists_the_registry_briefly() {
        let registry = Registry::from_map([(
            "shout",
            "--- Upper-cases a text.\n---@param s string The text to shout\n---@return string\nfunction shout(s) return s:upper() end",
        )])
        .unwrap();
        let compact = Settings {
            prompt_mode: PromptMode::Compact,
            ..settings(0)
        };
        let prompt = system_prompt(&catalog(&registry, 0), None, &compact);
        assert!(prompt.contains(&catalog(&registry, 0).host_prompt_compact()));
        assert!(prompt.contains(registry.compact_prompt().trim_end()));
        assert!(!prompt.contains("The text to shout"));
        let full = system_prompt(&catalog(&registry, 0), None, &settings(0));
        assert!(full.contains("---@param s string The text to shout"));
    }

    #[test]
    fn descriptions_give_type_size_and_chunks() {
        let text = Context::from("one\ntwo\n");
        assert_eq!(
            describe_context(&text),
            "`context` is a string of 8 bytes: 2 lines, 4 tokens (o200k_base)."
        );
        let chunks = Context::from(vec!["ab", "cde"]);
        assert_eq!(
            describe_context(&chunks),
            "`context` is an array (a Lua table) of 2 strings, 5 bytes in total. Chunk sizes in bytes: [1] 2, [2] 3."
        );
        let many = Context::Chunks((0..25).map(|i| vec![b'x'; i]).collect());
        assert!(describe_context(&many).ends_with("(5 more; smallest 0, largest 24)."));
    }

    #[test]
    fn truncation_says_what_was_cut() {
        assert_eq!(cut_bytes_noted("short", 10), "short");
        let cut = cut_bytes_noted(&"x".repeat(12_355), 10);
        assert_eq!(
            cut,
            "xxxxxxxxxx\n[... 12,345 more bytes cut; print less, or slices]"
        );
        let cut = cut_bytes_noted("ééé", 3);
        assert!(cut.starts_with("é\n"), "{cut}");
    }

    #[test]
    fn the_hint_follows_the_failing_line() {
        let hint = "`word_cout` is not a function here. Did you mean `word_count`?";
        let error = ExecError::Lua {
            message: format!(
                "input:2: attempt to call a nil value (global 'word_cout')\nhint: {hint}"
            ),
            hint: Some(hint.into()),
            output: "before\n".into(),
        };
        let text = describe_error(1, "x = 1\nprint(word_cout(context))\n", &error, 100);
        assert_eq!(
            text,
            format!(
                "Block 1 failed with a Lua error on line 2: attempt to call a nil value (global 'word_cout')\n  \
                 2 | print(word_cout(context))\nHint: {hint}\nOutput before the error:\nbefore\n"
            )
        );
    }

    #[test]
    fn names_come_from_the_catalog_and_the_standard_globals() {
        let names = Names::of(&catalog(Registry::baked(), 0));
        assert_eq!(names.closest("llm_qery"), Some("llm_query"));
        assert_eq!(names.closest("tostrin"), Some("tostring"));
        assert_eq!(names.closest("zzzzzz"), None);
    }

    #[test]
    fn limit_hits_and_errors_without_a_line_are_described_plainly() {
        let error = ExecError::Limit {
            kind: LimitKind::Time,
            message: "time limit exceeded".into(),
            output: String::new(),
        };
        assert!(describe_error(3, "", &error, 100).starts_with("Block 3 hit the time limit"));
        let error = ExecError::Lua {
            message: "input:999: boom".into(),
            hint: None,
            output: String::new(),
        };
        assert_eq!(
            describe_error(1, "", &error, 100),
            "Block 1 failed with a Lua error on line 999: boom"
        );
    }
}
