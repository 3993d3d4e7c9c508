//! `rlm eval`: answer quality measured on tasks modelled on the RLM paper's (S-NIAH,
//! OOLONG, OOLONG-Pairs) and on service logs, for the RLM loop side by side with the
//! context-in-the-prompt baseline.
//!
//! This module sits above [`rlm`](crate::rlm) (it runs the loop) and below `serve` and
//! the CLI; it uses `llm`, `tokens`, `registry`, `providers` and `environment` limits,
//! and works with any [`Llm`](crate::llm::Llm).
//!
//! - Generators ([`generate`](fn@generate), [`generate_task`]): deterministic from a seed, at a size
//!   in tokens ([`Size`]) hit within 2% with the real tokenizer. Each family is a
//!   [`TaskFamily`] in its own file of `families/`, listed once in [`FAMILIES`] (what
//!   the CLI's `--suite` reads); `prose.rs` is `niah`'s text, `records.rs` and
//!   `classes.rs` the records of `aggregate` and `pairs`. The generator's PRNG is
//!   `rng.rs`; fitting to a size is `size.rs`.
//! - [`Scorer`]s (`score.rs`): exact, contains, numeric (OOLONG's `0.75^|error|`),
//!   F1 over sets, and a model judge.
//! - [`Task`]s and their JSONL file (`task.rs`).
//! - [`Runner`] (`runner.rs`): methods ([`EvalMethod`]: `rlm`, `direct` in `direct.rs`,
//!   `rlm-bare`) over tasks, `jobs` at once, each [`TaskResult`] appended to
//!   `results.jsonl` as it ends (`results.rs`); a re-run resumes.
//! - `summary.md` (`summary.rs`) and `report.html` (`report.rs`).
//! - [`Shard`] (`shard.rs`): `--shard K/N`, the tasks one of N workers runs;
//!   [`RunManifest`] (`manifest.rs`): `eval.json`, what a run was asked; [`merge`](fn@merge)
//!   (`merge.rs`): the shards' directories joined into one, as one run writes it.
//!
//! ```
//! use rlm_registry::eval::{Family, Scorer, Size, generate};
//!
//! let aggregate: Family = "aggregate".parse()?;
//! let tasks = generate(&[aggregate], &[Size::new(2_000)], 2, 1);
//! assert_eq!(tasks.len(), 2);
//! let task = &tasks[0];
//! // A perfect answer scores 1 whatever the scorer.
//! assert_eq!(task.scorer.score(&task.question, &task.answer, &task.answer, None)?, 1.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod classes;
mod direct;
mod families;
mod generate;
mod manifest;
mod merge;
mod method;
mod prose;
mod records;
mod report;
mod results;
mod rng;
mod runner;
mod score;
mod shard;
mod size;
mod summary;
mod task;

pub use classes::CLASSES;
pub use direct::{
    DIRECT_SYSTEM, RESERVED_TOKENS, ask_direct, direct_answer, direct_context, direct_prompt,
};
pub use families::{FAMILIES, Family, Generated, TaskFamily};
pub use generate::{generate, generate_task};
pub use manifest::{MANIFEST_FILE, RunManifest};
pub use merge::{MergeError, Merged, merge, write_reports};
pub use method::EvalMethod;
pub use report::{report_html, score_plot};
pub use results::{DepthTokens, ResultWriter, TaskResult, read_results};
pub use rng::Rng;
pub use runner::{EvalOptions, Progress, RESULTS_FILE, Runner, TRACES_DIR};
pub use score::{JUDGE_RUBRIC, ScoreError, Scorer, first_number, normalize, set_items};
pub use shard::Shard;
pub use size::{MAX_SIZE, SIZE_TOLERANCE, Size, SizeError, fit_lines, parse_sizes};
pub use summary::{Prices, Row, mean_interval, rows, size_label, summary_markdown};
pub use task::{Task, TaskError, read_tasks, write_tasks};

/// `a`, `a or b`, `a, b or c`: the choices an error message offers.
fn one_of(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [only] => (*only).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}
