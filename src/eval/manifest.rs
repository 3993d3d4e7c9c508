//! [`RunManifest`]: `eval.json` in an output directory, what `rlm eval` was asked (the
//! shard, every task's id, a digest of the tasks, the methods, the settings that change
//! an answer, the prices), written before the first task runs so that `rlm eval merge`
//! can tell the shards of one eval from those of another, and a shard cut short from a
//! finished one.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::runner::EvalOptions;
use super::shard::Shard;
use super::summary::Prices;
use super::task::Task;

/// The manifest's file name in the output directory.
pub const MANIFEST_FILE: &str = "eval.json";

/// What one `rlm eval` run (or one shard of it) was asked.
///
/// ```
/// use rlm_registry::eval::{EvalOptions, Prices, RunManifest, Shard, Task};
///
/// let task: Task = serde_json::from_str(
///     r#"{"id":"t1","question":"q","context":"c","answer":"a","scorer":"exact"}"#,
/// )?;
/// let shard: Shard = "1/2".parse()?;
/// let manifest = RunManifest::new(shard, &[task], &EvalOptions::default(), "m", Prices::default());
/// assert_eq!(manifest.methods, ["rlm", "direct"]);
/// assert_eq!(manifest.shard_ids(), ["t1"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunManifest {
    /// The part of the tasks this run has (`1/1` for all of them).
    pub shard: Shard,
    /// The id of every task of the eval, every shard's, in the order given.
    pub tasks: Vec<String>,
    /// SHA-256 of the tasks (each one's JSON, in id order), so that shards given the
    /// same ids with other questions or answers are told apart.
    pub tasks_sha256: String,
    /// The methods, in the order given: each task's results are in that order.
    pub methods: Vec<String>,
    /// The settings that change an answer (the model, turns, depth, prompt mode, answer
    /// protocol, window, budgets, registry), each as text.
    pub settings: BTreeMap<String, String>,
    /// Price per million prompt tokens, for the summary's cost column.
    pub price_in: f64,
    /// Price per million completion tokens.
    pub price_out: f64,
}

impl RunManifest {
    /// The manifest of a run of `shard` of `tasks` (all of them, not the shard's alone)
    /// with `options` against `model`, its costs at `prices`.
    pub fn new(
        shard: Shard,
        tasks: &[Task],
        options: &EvalOptions,
        model: &str,
        prices: Prices,
    ) -> RunManifest {
        let mut sorted: Vec<&Task> = tasks.iter().collect();
        sorted.sort_by(|a, b| a.id.cmp(&b.id));
        let mut hasher = Sha256::new();
        for task in sorted {
            // Each task's JSON with its length first, so that no two lists of tasks
            // hash alike by moving bytes from one task to the next.
            let json = serde_json::to_vec(task).unwrap_or_default();
            hasher.update((json.len() as u64).to_le_bytes());
            hasher.update(&json);
        }
        let registry = Sha256::digest(options.registry.system_prompt().as_bytes());
        let settings = [
            ("model", model.to_string()),
            ("max_iterations", options.max_iterations.to_string()),
            ("max_depth", options.max_depth.to_string()),
            ("prompt_mode", format!("{:?}", options.prompt_mode)),
            ("answer_protocol", format!("{:?}", options.answer_protocol)),
            ("context_window", options.context_window.to_string()),
            ("budgets", format!("{:?}", options.budgets)),
            ("registry", hex(&registry[..8])),
        ];
        RunManifest {
            shard,
            tasks: tasks.iter().map(|t| t.id.clone()).collect(),
            tasks_sha256: hex(&hasher.finalize()),
            methods: options.methods.iter().map(ToString::to_string).collect(),
            settings: settings
                .into_iter()
                .map(|(name, value)| (name.to_string(), value))
                .collect(),
            price_in: prices.input,
            price_out: prices.output,
        }
    }

    /// The ids of this run's shard, in the order given.
    pub fn shard_ids(&self) -> Vec<&str> {
        self.shard.select_ids(&self.tasks)
    }

    /// The prices of the summary's cost column.
    pub fn prices(&self) -> Prices {
        Prices {
            input: self.price_in,
            output: self.price_out,
        }
    }

    /// Writes `eval.json` into `dir`.
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(io::Error::other)?;
        std::fs::write(dir.join(MANIFEST_FILE), json + "\n")
    }

    /// Reads `eval.json` from `dir`; an error says why it is not there or not a manifest.
    pub fn read(dir: &Path) -> Result<RunManifest, String> {
        let path = dir.join(MANIFEST_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(format!(
                    "it has no {MANIFEST_FILE} (rlm eval writes one into its --out)"
                ));
            }
            Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
        };
        serde_json::from_str(&text)
            .map_err(|error| format!("its {MANIFEST_FILE} is not an eval's: {error}"))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
