//! `rlm serve --state-dir DIR`: each session's REPL journaled to `DIR/<id>.jsonl` as it
//! runs (the session's checkpoint header, then one line per step, appended and flushed
//! after each execution), so that after a restart a client that comes back with its
//! session id finds its globals as it left them: the session is restored, lazily, by
//! running its steps again with their recorded values (no model call, no effect
//! repeated). An MCP session's `run_lua` REPL is journaled alike, under its own id
//! (the MCP session's id is the transport's and does not outlive the server): a client
//! back after a restart names it with `run_lua`'s `session`. An ended session (deleted,
//! or idle past the timeout) leaves no file; an MCP session that stopped without being
//! deleted (the server stopping, a client leaving) keeps its journal until it has been
//! unused for the timeout ([`StateDir::sweep`]); a file that cannot be read back is a
//! warning, never a crash.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::environment::{Checkpoint, Environment};

/// The directory sessions are journaled in.
#[derive(Debug)]
pub(crate) struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// Opens (creating it if needed) `dir`. Journals unused for longer than
    /// `idle_timeout` are of sessions that expired while the server was down: removed.
    /// Files that are not session journals are named in a warning and left alone.
    pub fn open(dir: &Path, idle_timeout: Duration) -> io::Result<StateDir> {
        fs::create_dir_all(dir)?;
        let state_dir = StateDir {
            dir: dir.to_path_buf(),
        };
        for (name, _) in state_dir.journals(true)? {
            tracing::warn!(
                "--state-dir {}: `{name}` is not a session journal; left alone",
                dir.display()
            );
        }
        state_dir.sweep(idle_timeout, |_| false);
        Ok(state_dir)
    }

    /// Removes the journals unused for longer than `idle_timeout` of the sessions that
    /// are not `live`: sessions no client came back to (after a restart, or an MCP
    /// session whose client left without deleting it) expire as live ones do.
    pub fn sweep(&self, idle_timeout: Duration, live: impl Fn(&str) -> bool) {
        let Ok(journals) = self.journals(false) else {
            return;
        };
        for (id, idle) in journals {
            if !live(&id) && idle.is_some_and(|idle| idle > idle_timeout) {
                let _ = fs::remove_file(self.dir.join(format!("{id}.jsonl")));
            }
        }
    }

    /// The session journals in the directory (`foreign`: the other files instead), by
    /// id (file name), with how long each has not been written.
    fn journals(&self, foreign: bool) -> io::Result<Vec<(String, Option<Duration>)>> {
        let mut found = Vec::new();
        for entry in fs::read_dir(&self.dir)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".jsonl").unwrap_or_default();
            if is_session_id(id) == foreign {
                continue;
            }
            let idle = entry
                .metadata()
                .and_then(|meta| meta.modified())
                .ok()
                .and_then(|modified| SystemTime::now().duration_since(modified).ok());
            found.push((
                if foreign {
                    name.clone()
                } else {
                    id.to_string()
                },
                idle,
            ));
        }
        Ok(found)
    }

    /// Where session `id`'s journal is; none for an id the server never gives out (so
    /// that a client's id cannot name another path).
    pub fn path(&self, id: &str) -> Option<PathBuf> {
        is_session_id(id).then(|| self.dir.join(format!("{id}.jsonl")))
    }

    /// Whether session `id` has a journal to be restored from.
    pub fn has(&self, id: &str) -> bool {
        self.path(id).is_some_and(|path| path.is_file())
    }

    /// Removes session `id`'s journal, if any: the session ended.
    pub fn remove(&self, id: &str) {
        if let Some(path) = self.path(id)
            && let Err(error) = fs::remove_file(&path)
            && error.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove {}: {error}", path.display());
        }
    }
}

/// What the server's session ids look like: a UUID's 32 lowercase hex digits.
fn is_session_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// One session's journal file, kept up to date by the session's thread.
pub(crate) struct SessionJournal {
    path: PathBuf,
    file: Option<File>,
    written: usize,
}

impl SessionJournal {
    /// The journal at `path` for `environment`: an existing one is restored into it (a
    /// session coming back after a restart), else a new one is started.
    pub fn open(path: PathBuf, environment: &Environment) -> Result<SessionJournal, String> {
        let mut journal = SessionJournal {
            path,
            file: None,
            written: 0,
        };
        match fs::read_to_string(&journal.path) {
            Ok(text) => journal.restore(&text, environment)?,
            Err(error) if error.kind() == io::ErrorKind::NotFound => journal.start(environment)?,
            Err(error) => return Err(journal.failed("read", &error.to_string())),
        }
        Ok(journal)
    }

    fn restore(&mut self, text: &str, environment: &Environment) -> Result<(), String> {
        let checkpoint = Checkpoint::from_journal(text)
            .map_err(|error| self.failed("restore", &error.to_string()))?;
        let diverged = environment
            .restore(&checkpoint)
            .map_err(|error| self.failed("restore", &error.to_string()))?;
        for note in diverged {
            tracing::warn!("restoring {}: {note}", self.path.display());
        }
        self.written = checkpoint.steps();
        self.file = Some(self.append()?);
        Ok(())
    }

    fn start(&mut self, environment: &Environment) -> Result<(), String> {
        let header = environment
            .journal_header()
            .map_err(|error| self.failed("start", &error.to_string()))?;
        let mut file =
            File::create(&self.path).map_err(|e| self.failed("create", &e.to_string()))?;
        writeln!(file, "{header}").map_err(|e| self.failed("write", &e.to_string()))?;
        self.file = Some(file);
        Ok(())
    }

    fn append(&self) -> Result<File, String> {
        OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|error| self.failed("open", &error.to_string()))
    }

    /// Appends the steps `environment` ran since the last sync, flushed. A failure is a
    /// warning: the session goes on, unjournaled from there.
    pub fn sync(&mut self, environment: &Environment) {
        let (lines, now) = environment.journal_lines_from(self.written);
        if lines.is_empty() {
            return;
        }
        let Some(file) = &mut self.file else {
            return;
        };
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        match file.write_all(text.as_bytes()).and_then(|()| file.flush()) {
            Ok(()) => self.written = now,
            Err(error) => {
                tracing::warn!("cannot journal to {}: {error}", self.path.display());
                self.file = None;
            }
        }
    }

    fn failed(&self, action: &str, why: &str) -> String {
        let message = format!(
            "cannot {action} the session journal {}: {why}",
            self.path.display()
        );
        tracing::warn!("{message}");
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_session_id_names_a_journal() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path(), Duration::from_secs(60)).unwrap();
        assert!(state.path("0123456789abcdef0123456789abcdef").is_some());
        for bad in [
            "../etc/passwd",
            "",
            "0123456789ABCDEF0123456789ABCDEF",
            "x.jsonl",
        ] {
            assert_eq!(state.path(bad), None, "{bad}");
        }
    }
}
