//! [`Task`]: one question over one context with its expected answer, and the JSONL
//! task file (`{"id", "question", "context" | "context_file", "answer", "scorer"}`, and
//! optionally `"schema"`) that `rlm eval generate` writes and `rlm eval --tasks` reads.

use std::fmt;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::score::Scorer;
use crate::corpus::{self, Corpus};
use crate::rlm::Context;

/// One task. Generated tasks also carry their `family` and `size`; a user's own tasks
/// need neither.
///
/// ```
/// use rlm_registry::eval::{Scorer, Task};
///
/// let line = r#"{"id":"t1","question":"What is 6 x 7?","context":"six sevens","answer":"42","scorer":"numeric"}"#;
/// let task: Task = serde_json::from_str(line)?;
/// assert_eq!(task.scorer, Scorer::Numeric);
/// assert_eq!(task.family(), "custom");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Unique within a run; results are keyed by it.
    pub id: String,
    /// The question the method answers.
    pub question: String,
    /// The context, inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Or the context in a file, relative to the task file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_file: Option<PathBuf>,
    /// The expected answer.
    pub answer: String,
    /// How an answer is scored against [`Task::answer`].
    pub scorer: Scorer,
    /// The generator family (a name of [`FAMILIES`](super::FAMILIES)), if generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// The context size asked, in tokens, if generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// A JSON Schema the answer must match (the loop's methods: see
    /// [`Rlm::answer_schema`](crate::rlm::Rlm::answer_schema)); the answer scored is then
    /// its JSON text, objects' keys sorted. The `direct` method does not use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// The inline `context` is a corpus: JSONL records, one document a line (`{"docid",
    /// "text"}`, as `--context FILE.jsonl` reads them). A `context_file` needs no flag:
    /// it is gathered as `--context` gathers it (a `.jsonl` corpus or a folder is a
    /// corpus).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub corpus: bool,
}

impl Task {
    /// The family, `custom` for a user's own task.
    pub fn family(&self) -> &str {
        self.family.as_deref().unwrap_or("custom")
    }

    /// The context: inline (a text, or with [`Task::corpus`] a JSONL corpus), or
    /// gathered from `context_file` (relative paths from `base`) as `--context` gathers
    /// a path. A task with neither has an empty context.
    ///
    /// ```
    /// use rlm_registry::eval::Task;
    /// use rlm_registry::rlm::Context;
    ///
    /// let line = r#"{"id":"c","question":"q","answer":"a","scorer":"exact","corpus":true,
    ///                "context":"{\"docid\":\"d1\",\"text\":\"one\"}\n{\"docid\":\"d2\",\"text\":\"two\"}"}"#;
    /// let task: Task = serde_json::from_str(line)?;
    /// let Context::Corpus(corpus) = task.context(".".as_ref())? else { panic!("a corpus") };
    /// assert_eq!(corpus.documents[1].name, "d2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn context(&self, base: &Path) -> Result<Context, TaskError> {
        if let Some(text) = &self.context {
            if !self.corpus {
                return Ok(Context::from(text.as_str()));
            }
            return Corpus::from_jsonl(&self.id, text.as_bytes())
                .map(Context::Corpus)
                .ok_or_else(|| TaskError::NotACorpus {
                    id: self.id.clone(),
                });
        }
        let Some(file) = &self.context_file else {
            return Ok(Context::from(""));
        };
        let path = base.join(file);
        corpus::gather(std::slice::from_ref(&path))
            .map(Context::from)
            .map_err(|error| TaskError::ContextFile {
                id: self.id.clone(),
                path,
                source: io::Error::other(error.reason),
            })
    }
}

/// A task file that cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum TaskError {
    /// The file could not be read or written.
    Io(io::Error),
    /// A line is not a task.
    Line {
        /// 1-based.
        line: usize,
        /// What serde said.
        message: String,
    },
    /// Two tasks have the same id.
    DuplicateId {
        /// The id.
        id: String,
        /// The second line with it.
        line: usize,
    },
    /// A task's inline context is marked a corpus but is not JSONL records.
    NotACorpus {
        /// The task.
        id: String,
    },
    /// A task's `context_file` cannot be read.
    ContextFile {
        /// The task.
        id: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Io(error) => error.fmt(f),
            TaskError::Line { line, message } => write!(f, "line {line}: not a task: {message}"),
            TaskError::DuplicateId { id, line } => {
                write!(f, "line {line}: the id `{id}` is used by an earlier task")
            }
            TaskError::NotACorpus { id } => write!(
                f,
                "task `{id}`: its context is marked a corpus, but not every line is a JSON object with a text field (`text`, `contents` or `content`)"
            ),
            TaskError::ContextFile { id, path, source } => write!(
                f,
                "task `{id}`: cannot read its context file {}: {source}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for TaskError {}

impl From<io::Error> for TaskError {
    fn from(error: io::Error) -> TaskError {
        TaskError::Io(error)
    }
}

/// Reads tasks, one JSON object a line (blank lines skipped); ids must be unique.
pub fn read_tasks(reader: impl BufRead) -> Result<Vec<Task>, TaskError> {
    let mut tasks: Vec<Task> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let task: Task = serde_json::from_str(&line).map_err(|e| TaskError::Line {
            line: i + 1,
            message: e.to_string(),
        })?;
        if !seen.insert(task.id.clone()) {
            return Err(TaskError::DuplicateId {
                id: task.id,
                line: i + 1,
            });
        }
        tasks.push(task);
    }
    Ok(tasks)
}

/// Writes tasks, one JSON object a line.
pub fn write_tasks(mut writer: impl Write, tasks: &[Task]) -> io::Result<()> {
    for task in tasks {
        serde_json::to_writer(&mut writer, task)?;
        writer.write_all(b"\n")?;
    }
    writer.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_round_trip_through_jsonl() {
        let task = Task {
            id: "a".into(),
            question: "q?".into(),
            context: Some("ctx".into()),
            context_file: None,
            answer: "x".into(),
            scorer: Scorer::Exact,
            family: Some("niah".into()),
            size: Some(8000),
            schema: Some(serde_json::json!({"type": "string"})),
            corpus: false,
        };
        let mut out = Vec::new();
        write_tasks(&mut out, std::slice::from_ref(&task)).unwrap();
        let back = read_tasks(io::Cursor::new(out)).unwrap();
        assert_eq!(back, [task]);
    }

    #[test]
    fn bad_lines_and_duplicate_ids_are_errors_with_their_line() {
        let bad = "{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\",\"scorer\":\"exact\"}\n\n{\"id\":\"a\",\"question\":\"q\",\"answer\":\"1\",\"scorer\":\"exact\"}\n";
        let error = read_tasks(io::Cursor::new(bad)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "line 3: the id `a` is used by an earlier task"
        );
        let error = read_tasks(io::Cursor::new("{\"id\":\"a\",\"scorer\":\"regex\"}")).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("line 1: not a task: unknown variant `regex`"),
            "{error}"
        );
    }

    #[test]
    fn a_context_file_is_read_relative_to_the_task_file() {
        let dir = std::env::temp_dir().join(format!("rlm-eval-task-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("c.txt"), "from a file").unwrap();
        let mut task: Task = serde_json::from_str(
            r#"{"id":"f","question":"q","context_file":"c.txt","answer":"a","scorer":"contains"}"#,
        )
        .unwrap();
        assert_eq!(task.context(&dir).unwrap(), Context::from("from a file"));
        task.context_file = Some("missing.txt".into());
        assert!(
            task.context(&dir)
                .unwrap_err()
                .to_string()
                .contains("missing.txt")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
