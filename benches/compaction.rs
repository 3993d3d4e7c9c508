//! What a compaction costs: the scripted 12-turn run of `tests/it/compaction.rs` (about
//! 8 KB printed a turn) under an 8,192-token window, compacting at 85% (the default),
//! beside the same run with no window and compaction off, the conversation sent whole and
//! growing each turn. The model answers in process at once, so the times are the run's
//! own work (Lua, token counts, `history`); the tokens are what the model reads and
//! writes, counted with `o200k_base`.
//!
//! Run: `cargo bench --bench compaction`.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group};
use rlm_registry::Registry;
use rlm_registry::llm::{Completion, Llm, LlmError, Message, Request};
use rlm_registry::rlm::Rlm;
use rlm_registry::tokens;

const WINDOW: u64 = 8_192;

/// The start of the request for a summary (`prompt::SUMMARY_REQUEST`).
const ASKS_FOR_SUMMARY: &str = "Write no code: summarise your work";

/// A summary of the length a model writes: some 150 tokens.
const SUMMARY: &str = "Summary of my work so far. Found: each turn prints 550 numbered words \
(w<turn>x<i> followed by one of eight nouns); nothing in them needs keeping beyond the count. \
Still needed: go on printing until turn 12, then answer with how many earlier outputs \
`history` holds, its length, and its first and last roles. Variables: `n` (number) counts \
my turns and is the only global I set; `history` (table) holds every message whole, so an \
earlier output can be read again with history[i].content.";

/// One turn: counts turns in `n`, prints about 8 KB, answers at turn 12.
const TURN: &str = r#"```lua
n = (n or 0) + 1
local words = {"river", "stone", "quiet", "market", "copper", "lantern", "orchard", "harbor"}
local out = {}
for i = 1, 550 do out[i] = "w" .. n .. "x" .. i .. " " .. words[i % 8 + 1] end
print(table.concat(out, " "))
if n == 12 then FINAL(#(history or {}) .. " messages") end
```"#;

/// The scripted model, counting what it reads and writes.
#[derive(Default)]
struct Scripted {
    calls: AtomicU64,
    summaries: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    largest: AtomicU64,
}

impl Llm for Scripted {
    fn complete(&self, request: Request) -> Result<Completion, LlmError> {
        let prompt = tokens::count_chat(request.messages.iter().map(Message::text)) as u64;
        let last = request.messages.last().map_or("", Message::text);
        let summary = last.contains(ASKS_FOR_SUMMARY);
        let reply = if summary { SUMMARY } else { TURN };
        let completion = tokens::count(reply) as u64;
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.summaries
            .fetch_add(u64::from(summary), Ordering::Relaxed);
        self.prompt_tokens.fetch_add(prompt, Ordering::Relaxed);
        self.completion_tokens
            .fetch_add(completion, Ordering::Relaxed);
        self.largest.fetch_max(prompt, Ordering::Relaxed);
        Ok(Completion::new(reply).with_tokens(prompt, completion))
    }
}

/// The run, compacting under the window or sending everything: its answer.
fn run(model: Arc<Scripted>, compact: bool) -> String {
    let rlm = Rlm::new(model, Registry::baked().clone(), 12);
    let rlm = match compact {
        true => rlm.context_window(WINDOW),
        false => rlm.compact_at(None),
    };
    rlm.run("Print your words each turn.", None)
        .map(|answer| answer.text)
        .unwrap_or_else(|error| format!("failed: {error}"))
}

fn report() {
    println!(
        "run | answer | calls | summaries | prompt tokens | completion tokens | largest request"
    );
    for compact in [true, false] {
        let model = Arc::new(Scripted::default());
        let answer = run(Arc::clone(&model), compact);
        println!(
            "{} | {answer} | {} | {} | {} | {} | {}",
            if compact {
                "8k window, compact at 0.85"
            } else {
                "no window, compaction off"
            },
            model.calls.load(Ordering::Relaxed),
            model.summaries.load(Ordering::Relaxed),
            model.prompt_tokens.load(Ordering::Relaxed),
            model.completion_tokens.load(Ordering::Relaxed),
            model.largest.load(Ordering::Relaxed),
        );
    }
}

fn runs(c: &mut Criterion) {
    let mut group = c.benchmark_group("12 turns of 8 KB");
    group.sample_size(10);
    group.bench_function("8k window, compact at 0.85", |b| {
        b.iter(|| run(Arc::new(Scripted::default()), true))
    });
    group.bench_function("no window, compaction off", |b| {
        b.iter(|| run(Arc::new(Scripted::default()), false))
    });
    group.finish();
}

criterion_group!(group, runs);

fn main() {
    report();
    group();
    Criterion::default().configure_from_args().final_summary();
}
