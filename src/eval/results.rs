//! [`TaskResult`]: one line of `results.jsonl` per (task, method), and the file itself:
//! read back on a re-run so that nothing is run twice, appended and flushed as each
//! result ends so that nothing is lost.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Tokens used at one depth of a run (0 is the root agent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepthTokens {
    /// Prompt tokens, as the server reported them.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
}

/// How one method did on one task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    /// The task's id.
    pub id: String,
    /// Its family (`custom` for a user's own task).
    pub family: String,
    /// The size asked, in tokens, for generated tasks.
    pub size: Option<u64>,
    /// The method (`rlm`, `direct`, `rlm-bare`).
    pub method: String,
    /// In `[0, 1]`; 0 when there is no answer.
    pub score: f64,
    /// The answer, if the method gave one.
    pub answer: Option<String>,
    /// The expected answer.
    pub expected: String,
    /// Model turns of the root agent (1 for `direct`).
    pub turns: u32,
    /// Tokens per depth, the root's first.
    pub tokens: Vec<DepthTokens>,
    /// Model calls, every depth and sub-call included (the judge's excluded).
    pub model_calls: u64,
    /// Calls the call cache answered: not sent, in neither `model_calls` nor `tokens`.
    #[serde(default)]
    pub cached_calls: u64,
    /// The tokens those cached answers cost when first asked: what the cache saved.
    #[serde(default)]
    pub cached_tokens: u64,
    /// Of `cached_calls`, those that waited for another worker's identical call sharing
    /// the cache (single-flight) rather than found the answer stored; left out when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waited_calls: u64,
    /// What the run cost in US dollars, where it knew (the server's `usage.cost`, else
    /// the model's price); left out when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Wall time, in seconds.
    pub seconds: f64,
    /// Why there is no answer, or why it could not be scored.
    pub error: Option<String>,
    /// The trace file, relative to the output directory.
    pub trace: Option<String>,
}

impl TaskResult {
    /// Prompt tokens over every depth.
    pub fn prompt_tokens(&self) -> u64 {
        self.tokens.iter().map(|t| t.prompt).sum()
    }

    /// Completion tokens over every depth.
    pub fn completion_tokens(&self) -> u64 {
        self.tokens.iter().map(|t| t.completion).sum()
    }

    /// The key that makes a result unique in a run.
    pub fn key(&self) -> (String, String) {
        (self.id.clone(), self.method.clone())
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The results already in `path` (none if it does not exist). A last line cut short by
/// a killed run is dropped from the file, so the next append starts on a fresh line.
pub fn read_results(path: &Path) -> io::Result<Vec<TaskResult>> {
    let file = match File::options().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let (results, good_bytes) = parse_results(&file)?;
    if good_bytes < file.metadata()?.len() {
        file.set_len(good_bytes)?;
    }
    Ok(results)
}

/// The results in `path`, read without changing the file (`rlm eval merge` reads
/// other runs' directories): a last line cut short is left out.
pub(crate) fn read_results_only(path: &Path) -> io::Result<Vec<TaskResult>> {
    match File::open(path) {
        Ok(file) => Ok(parse_results(&file)?.0),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(error) => Err(error),
    }
}

/// The complete lines' results, and the bytes of those lines.
fn parse_results(file: &File) -> io::Result<(Vec<TaskResult>, u64)> {
    let mut results = Vec::new();
    let mut good_bytes = 0u64;
    let mut reader = BufReader::new(file);
    let mut line = String::new();
    loop {
        line.clear();
        let read = reader.read_line(&mut line)?;
        if read == 0 || !line.ends_with('\n') {
            break;
        }
        // A complete line that is not a result is kept in the file, and ignored.
        if let Ok(result) = serde_json::from_str::<TaskResult>(&line) {
            results.push(result);
        }
        good_bytes += read as u64;
    }
    Ok((results, good_bytes))
}

/// Appends results to a file, one line each, flushed at once.
pub struct ResultWriter {
    file: File,
}

impl ResultWriter {
    /// Opens `path` for appending, creating it.
    pub fn append(path: &Path) -> io::Result<ResultWriter> {
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        file.seek(io::SeekFrom::End(0))?;
        Ok(ResultWriter { file })
    }

    /// Writes one result as one line, in one write, and flushes it to the file.
    pub fn write(&mut self, result: &TaskResult) -> io::Result<()> {
        let mut line = serde_json::to_vec(result)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str) -> TaskResult {
        TaskResult {
            id: id.into(),
            family: "niah".into(),
            size: Some(8000),
            method: "rlm".into(),
            score: 1.0,
            answer: Some("1".into()),
            expected: "1".into(),
            turns: 2,
            tokens: vec![DepthTokens {
                prompt: 10,
                completion: 5,
            }],
            model_calls: 2,
            cached_calls: 0,
            cached_tokens: 0,
            waited_calls: 0,
            cost: None,
            seconds: 0.5,
            error: None,
            trace: None,
        }
    }

    #[test]
    fn a_line_cut_short_is_dropped_and_the_next_append_starts_clean() {
        let dir = tempdir();
        let path = dir.join("results.jsonl");
        let mut writer = ResultWriter::append(&path).unwrap();
        writer.write(&result("a")).unwrap();
        drop(writer);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"id\":\"b\",\"fam");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_results(&path).unwrap(), [result("a")]);
        ResultWriter::append(&path)
            .unwrap()
            .write(&result("c"))
            .unwrap();
        assert_eq!(read_results(&path).unwrap(), [result("a"), result("c")]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempdir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rlm-eval-results-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
