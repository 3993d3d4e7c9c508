//! The sessions kept under `--state-dir`, one folder each, named by the session's id:
//!
//! ```text
//! DIR/rlm-3/session.json       {"sessionId", "cwd"}
//! DIR/rlm-3/1.prompt.json      the first prompt's blocks, as the client sent them
//! DIR/rlm-3/1.trace.jsonl      the trace of its run, written as it runs
//! DIR/rlm-3/2.prompt.json      …
//! ```
//!
//! A prompt's blocks are written (whole: to a temporary file, then renamed) before its run
//! starts, and its trace line by line as the run goes, so an agent killed mid-prompt loses
//! at most the turn in progress.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::schema::ContentBlock;
use super::wire::{INTERNAL_ERROR, RpcError};

/// The folder of kept sessions.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
}

/// A session's `session.json`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionFile {
    session_id: String,
    cwd: PathBuf,
}

/// A prompt's file.
#[derive(Debug, Serialize, Deserialize)]
struct PromptFile {
    prompt: Vec<ContentBlock>,
}

/// A kept session, read back: its prompts in order.
#[derive(Debug)]
pub(crate) struct Stored {
    pub prompts: Vec<StoredPrompt>,
}

/// One kept prompt: its blocks and where its run's trace is (a prompt the agent was
/// killed in before its run wrote anything has none).
#[derive(Debug)]
pub(crate) struct StoredPrompt {
    pub blocks: Vec<ContentBlock>,
    pub trace: PathBuf,
}

impl Store {
    pub fn new(dir: PathBuf) -> Store {
        Store { dir }
    }

    /// Makes the folder of a new session, its id `rlm-N` for the first N whose folder
    /// does not exist yet (made atomically: two agents on one folder never share one).
    pub fn create(&self, first: u64, cwd: &Path) -> io::Result<SessionFiles> {
        fs::create_dir_all(&self.dir)?;
        let mut n = first;
        loop {
            let id = format!("rlm-{n}");
            let dir = self.dir.join(&id);
            match fs::create_dir(&dir) {
                Ok(()) => {
                    let file = SessionFile {
                        session_id: id.clone(),
                        cwd: cwd.to_path_buf(),
                    };
                    write_whole(&dir.join("session.json"), &file)?;
                    return Ok(SessionFiles::new(id, dir, 1));
                }
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => n += 1,
                Err(error) => return Err(error),
            }
        }
    }

    /// The kept session `id`, to go on with: `None` when there is none.
    pub fn open(&self, id: &str) -> Result<Option<(SessionFiles, Stored)>, RpcError> {
        // An id is a folder's name: nothing that could lead out of the store.
        let plain = !id.is_empty()
            && !id.starts_with('.')
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        let dir = self.dir.join(id);
        if !plain || !dir.join("session.json").is_file() {
            return Ok(None);
        }
        let mut prompts = Vec::new();
        loop {
            let n = prompts.len() + 1;
            let path = dir.join(format!("{n}.prompt.json"));
            let text = match fs::read_to_string(&path) {
                Ok(text) => text,
                Err(error) if error.kind() == io::ErrorKind::NotFound => break,
                Err(error) => return Err(unreadable(&path, &error.to_string())),
            };
            let file: PromptFile = serde_json::from_str(&text)
                .map_err(|error| unreadable(&path, &error.to_string()))?;
            prompts.push(StoredPrompt {
                blocks: file.prompt,
                trace: dir.join(format!("{n}.trace.jsonl")),
            });
        }
        let next = prompts.len() + 1;
        Ok(Some((
            SessionFiles::new(id.to_string(), dir, next),
            Stored { prompts },
        )))
    }
}

fn unreadable(path: &Path, why: &str) -> RpcError {
    RpcError::new(
        INTERNAL_ERROR,
        format!("cannot read the kept session's {}: {why}", path.display()),
    )
}

/// Writes `value` as JSON to `path` whole: a temporary file renamed over it.
fn write_whole(path: &Path, value: &impl Serialize) -> io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    let partial = path.with_extension("partial");
    fs::write(&partial, text)?;
    fs::rename(&partial, path)
}

/// One kept session's files: where its next prompt goes, and the trace writer its loop
/// writes to.
pub(crate) struct SessionFiles {
    pub id: String,
    dir: PathBuf,
    next: usize,
    trace: PromptTrace,
}

impl SessionFiles {
    fn new(id: String, dir: PathBuf, next: usize) -> SessionFiles {
        SessionFiles {
            id,
            dir,
            next,
            trace: PromptTrace::default(),
        }
    }

    /// The writer the session's loop traces to: the trace of the prompt running, or
    /// nowhere (while a session loads, its traces are on file already).
    pub fn trace(&self) -> PromptTrace {
        self.trace.clone()
    }

    /// Keeps a prompt's `blocks` and points the trace at its own file.
    pub fn begin_prompt(&mut self, blocks: &[ContentBlock]) -> io::Result<()> {
        let n = self.next;
        let prompt = PromptFile {
            prompt: blocks.to_vec(),
        };
        write_whole(&self.dir.join(format!("{n}.prompt.json")), &prompt)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{n}.trace.jsonl")))?;
        self.next += 1;
        *self.trace.lock() = Some(file);
        Ok(())
    }

    /// The prompt's run has ended: its trace is closed.
    pub fn end_prompt(&mut self) {
        self.trace.lock().take();
    }
}

/// The trace of the prompt running; writes go nowhere between prompts.
#[derive(Clone, Default)]
pub(crate) struct PromptTrace(Arc<Mutex<Option<File>>>);

impl PromptTrace {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<File>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Write for PromptTrace {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self.lock().as_mut() {
            Some(file) => file.write(bytes),
            None => Ok(bytes.len()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.lock().as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_session_gives_back_its_prompts_in_order_and_ids_are_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("state"));
        let mut files = store.create(1, Path::new("/src")).unwrap();
        assert_eq!(files.id, "rlm-1");
        files.begin_prompt(&[ContentBlock::text("one")]).unwrap();
        files.trace().write_all(b"{}\n").unwrap();
        files.end_prompt();
        files.trace().write_all(b"dropped\n").unwrap();
        files.begin_prompt(&[ContentBlock::text("two")]).unwrap();
        assert_eq!(store.create(1, Path::new("/src")).unwrap().id, "rlm-2");

        let (reopened, stored) = store.open("rlm-1").unwrap().unwrap();
        let texts: Vec<_> = stored.prompts.iter().map(|p| p.blocks.clone()).collect();
        assert_eq!(
            texts,
            [
                vec![ContentBlock::text("one")],
                vec![ContentBlock::text("two")]
            ]
        );
        assert_eq!(fs::read(&stored.prompts[0].trace).unwrap(), b"{}\n");
        assert_eq!(reopened.next, 3);
    }

    #[test]
    fn an_unknown_id_or_one_leading_out_of_the_store_is_no_session() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().to_path_buf());
        assert!(store.open("rlm-9").unwrap().is_none());
        assert!(store.open("../etc").unwrap().is_none());
        assert!(store.open("").unwrap().is_none());
    }
}
