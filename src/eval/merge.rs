//! [`merge`]: the output directories of an eval's shards (`rlm eval --shard K/N`) joined
//! into one, as one run over every task would have written it: `results.jsonl` in task
//! then method order, `eval.json` (shard `1/1`), `summary.md`, `report.html`, and the
//! traces the results name. It refuses shards of different evals, a shard given twice,
//! a missing or unfinished shard, a directory that is not an eval's, and an output
//! directory that is one of the inputs.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::manifest::RunManifest;
use super::results::{TaskResult, read_results_only};
use super::runner::RESULTS_FILE;
use super::shard::Shard;
use super::summary::{Prices, summary_markdown};

/// Why shards cannot be merged.
#[derive(Debug)]
#[non_exhaustive]
pub enum MergeError {
    /// No directory to merge.
    NoInput,
    /// A directory is not the output of `rlm eval`.
    NotEvalOutput {
        /// The directory.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// The output directory is one of the inputs.
    OutIsInput {
        /// The directory.
        dir: PathBuf,
    },
    /// Two directories are shards of different evals.
    DifferentEvals {
        /// The first directory given.
        first: PathBuf,
        /// The one that differs from it.
        dir: PathBuf,
        /// What differs.
        what: String,
    },
    /// One shard is given twice: its tasks would count twice.
    Twice {
        /// The shard.
        shard: Shard,
        /// Its first directory.
        first: PathBuf,
        /// Its second.
        second: PathBuf,
    },
    /// Shards of the split are not given.
    Missing {
        /// Those missing.
        missing: Vec<Shard>,
    },
    /// A shard's run has not finished: some of its results are not there.
    Incomplete {
        /// The shard's directory.
        dir: PathBuf,
        /// The shard.
        shard: Shard,
        /// Results there.
        have: usize,
        /// Results it runs.
        want: usize,
    },
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::NoInput => write!(f, "no directory to merge"),
            MergeError::NotEvalOutput { dir, reason } => {
                write!(f, "{} is not an rlm eval output: {reason}", dir.display())
            }
            MergeError::OutIsInput { dir } => write!(
                f,
                "--out {} is one of the directories merged: write the merge elsewhere",
                dir.display()
            ),
            MergeError::DifferentEvals { first, dir, what } => write!(
                f,
                "{} and {} are shards of different evals: {what}",
                first.display(),
                dir.display()
            ),
            MergeError::Twice {
                shard,
                first,
                second,
            } => write!(
                f,
                "shard {shard} is given twice ({} and {}): its tasks would count twice",
                first.display(),
                second.display()
            ),
            MergeError::Missing { missing } => {
                let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
                let (noun, verb) = if names.len() == 1 {
                    ("shard", "is")
                } else {
                    ("shards", "are")
                };
                write!(
                    f,
                    "{noun} {} {verb} missing: merge every shard of the split",
                    names.join(", ")
                )
            }
            MergeError::Incomplete {
                dir,
                shard,
                have,
                want,
            } => write!(
                f,
                "shard {shard} in {} has not finished: {have} of its {want} results; run its command again to finish it",
                dir.display()
            ),
            MergeError::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for MergeError {}

/// What [`merge`] wrote.
#[derive(Clone, Debug)]
pub struct Merged {
    /// Every result, in task then method order.
    pub results: Vec<TaskResult>,
    /// The shards merged.
    pub shards: usize,
    /// The summary written (`summary.md`).
    pub summary: String,
}

/// Merges the output directories `dirs`, the shards of one eval, into `out` (created if
/// need be; the files it writes are replaced).
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Merged, MergeError> {
    let Some(first_dir) = dirs.first() else {
        return Err(MergeError::NoInput);
    };
    let out_real = real_path(out);
    let mut shards: Vec<(PathBuf, RunManifest)> = Vec::new();
    for dir in dirs {
        let real = dir
            .canonicalize()
            .map_err(|error| MergeError::NotEvalOutput {
                dir: dir.clone(),
                reason: error.to_string(),
            })?;
        if Some(&real) == out_real.as_ref() {
            return Err(MergeError::OutIsInput { dir: out.into() });
        }
        let manifest = RunManifest::read(dir).map_err(|reason| MergeError::NotEvalOutput {
            dir: dir.clone(),
            reason,
        })?;
        if let Some(what) = shards
            .first()
            .and_then(|(_, first)| differs(first, &manifest))
        {
            return Err(MergeError::DifferentEvals {
                first: first_dir.clone(),
                dir: dir.clone(),
                what,
            });
        }
        if let Some((first, _)) = shards.iter().find(|(_, m)| m.shard == manifest.shard) {
            return Err(MergeError::Twice {
                shard: manifest.shard,
                first: first.clone(),
                second: dir.clone(),
            });
        }
        shards.push((dir.clone(), manifest));
    }
    let count = shards[0].1.shard.count();
    let given: BTreeSet<u32> = shards.iter().map(|(_, m)| m.shard.index()).collect();
    let missing: Vec<Shard> = (1..=count)
        .filter(|k| !given.contains(k))
        .filter_map(|k| Shard::new(k, count))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing { missing });
    }
    let mut results = Vec::new();
    let mut sources = Vec::new();
    for (dir, manifest) in &shards {
        let mine = shard_results(dir, manifest)?;
        sources.extend(std::iter::repeat_n(dir.as_path(), mine.len()));
        results.extend(mine);
    }
    let manifest = RunManifest {
        shard: Shard::WHOLE,
        ..shards[0].1.clone()
    };
    let mut order: Vec<usize> = (0..results.len()).collect();
    let task_rank: HashMap<&str, usize> = manifest
        .tasks
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let method_rank = |method: &str| manifest.methods.iter().position(|m| m == method);
    order.sort_by_key(|&i| {
        let r = &results[i];
        (
            task_rank.get(r.id.as_str()).copied(),
            method_rank(&r.method),
        )
    });
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MergeError::Io { path, source }
    };
    std::fs::create_dir_all(out).map_err(io_error(out))?;
    for &i in &order {
        if let Some(trace) = &results[i].trace {
            copy_trace(sources[i], trace, out)?;
        }
    }
    let results: Vec<TaskResult> = order.into_iter().map(|i| results[i].clone()).collect();
    let mut lines = Vec::new();
    for result in &results {
        serde_json::to_writer(&mut lines, result)
            .map_err(|error| io_error(&out.join(RESULTS_FILE))(io::Error::other(error)))?;
        lines.push(b'\n');
    }
    let results_path = out.join(RESULTS_FILE);
    std::fs::write(&results_path, lines).map_err(io_error(&results_path))?;
    manifest.write(out).map_err(io_error(out))?;
    let summary = write_reports(out, &results, manifest.prices(), "").map_err(io_error(out))?;
    Ok(Merged {
        results,
        shards: shards.len(),
        summary,
    })
}

/// Writes `summary.md` (the summary, then `note`) and `report.html` into `dir`, as
/// `rlm eval` and `rlm eval merge` do; returns the summary.
pub fn write_reports(
    dir: &Path,
    results: &[TaskResult],
    prices: Prices,
    note: &str,
) -> io::Result<String> {
    let summary = summary_markdown(results, prices) + note;
    std::fs::write(dir.join("summary.md"), &summary)?;
    std::fs::write(
        dir.join("report.html"),
        super::report::report_html(results, prices),
    )?;
    Ok(summary)
}

/// What makes `other` a shard of another eval than `first`, if anything.
fn differs(first: &RunManifest, other: &RunManifest) -> Option<String> {
    if first.shard.count() != other.shard.count() {
        return Some(format!(
            "split {} ways and {} ways",
            first.shard.count(),
            other.shard.count()
        ));
    }
    if first.tasks_sha256 != other.tasks_sha256 {
        return Some(format!(
            "their tasks differ ({} and {} tasks{})",
            first.tasks.len(),
            other.tasks.len(),
            if first.tasks.len() == other.tasks.len() {
                ", not the same ones or not alike"
            } else {
                ""
            }
        ));
    }
    if first.methods != other.methods {
        return Some(format!(
            "their methods differ ({} and {})",
            first.methods.join(","),
            other.methods.join(",")
        ));
    }
    let settings: Vec<String> = first
        .settings
        .keys()
        .chain(other.settings.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|key| first.settings.get(*key) != other.settings.get(*key))
        .map(|key| {
            let value = |m: &RunManifest| m.settings.get(key).cloned().unwrap_or_default();
            format!("{key} {} and {}", value(first), value(other))
        })
        .collect();
    if !settings.is_empty() {
        return Some(format!("their settings differ ({})", settings.join("; ")));
    }
    if first.prices() != other.prices() {
        return Some("their prices differ (--price-in, --price-out)".to_string());
    }
    None
}

/// The results of `manifest`'s shard in `dir`, each (task, method) once; every one must
/// be there. Results of other tasks (an earlier run into the same directory) are left
/// out, as a re-run leaves them.
fn shard_results(dir: &Path, manifest: &RunManifest) -> Result<Vec<TaskResult>, MergeError> {
    let path = dir.join(RESULTS_FILE);
    let all = read_results_only(&path).map_err(|source| MergeError::Io {
        path: path.clone(),
        source,
    })?;
    let ids: HashSet<&str> = manifest.shard_ids().into_iter().collect();
    let methods: HashSet<&str> = manifest.methods.iter().map(String::as_str).collect();
    let mut seen = HashSet::new();
    let mine: Vec<TaskResult> = all
        .into_iter()
        .filter(|r| ids.contains(r.id.as_str()) && methods.contains(r.method.as_str()))
        .filter(|r| seen.insert(r.key()))
        .collect();
    let want = ids.len() * methods.len();
    if mine.len() < want {
        return Err(MergeError::Incomplete {
            dir: dir.into(),
            shard: manifest.shard,
            have: mine.len(),
            want,
        });
    }
    Ok(mine)
}

/// Copies a result's trace and its page, if there, from `dir` to `out`; a trace that
/// names a path outside the directory is not an eval's.
fn copy_trace(dir: &Path, trace: &str, out: &Path) -> Result<(), MergeError> {
    let relative = Path::new(trace);
    if !relative
        .components()
        .all(|part| matches!(part, Component::Normal(_)))
    {
        return Err(MergeError::NotEvalOutput {
            dir: dir.into(),
            reason: format!("a result's trace `{trace}` is not inside it"),
        });
    }
    for file in [relative.to_path_buf(), relative.with_extension("html")] {
        let from = dir.join(&file);
        if !from.is_file() {
            continue;
        }
        let to = out.join(&file);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|source| MergeError::Io {
                path: parent.into(),
                source,
            })?;
        }
        std::fs::copy(&from, &to).map_err(|source| MergeError::Io { path: to, source })?;
    }
    Ok(())
}

/// `path` made absolute with its links resolved, as far as it exists: an output
/// directory not made yet is its nearest existing ancestor's real path with the rest
/// appended, a `..` there undoing the name before it (nothing that does not exist can
/// be a link).
fn real_path(path: &Path) -> Option<PathBuf> {
    let mut real = std::env::current_dir().ok()?;
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                real.pop();
            }
            other => {
                real.push(other);
                if let Ok(resolved) = real.canonicalize() {
                    real = resolved;
                }
            }
        }
    }
    Some(real)
}
