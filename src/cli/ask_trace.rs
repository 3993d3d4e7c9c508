//! Where `rlm ask` writes its trace: `--trace FILE` in either format, and `--trace-html`,
//! the page written from the run's events when it ends.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rlm_registry::rlm::{Rlm, TraceFormat};
use rlm_registry::trace::{self, ExportOptions, Trace};

use super::{EXIT_USAGE, Output};

/// What `rlm ask` was asked to write.
pub(super) struct TraceRequest<'a> {
    /// `--trace FILE`.
    pub file: Option<&'a Path>,
    /// `--trace-format rlm`.
    pub rlm_format: bool,
    /// `--trace-html OUT.html`.
    pub html: Option<&'a Path>,
}

/// The traces of one run: the events kept in memory when a page is to be written.
pub(super) struct Traces {
    memory: Option<Memory>,
    /// The reference-format file, written from the events when the run ends (when the
    /// events are also needed for the page).
    rlm_file: Option<PathBuf>,
    html: Option<PathBuf>,
}

impl Traces {
    /// Sets up `rlm`'s trace for `request`; a file that cannot be created is a usage
    /// error (exit 2), reported before the run starts.
    pub(super) fn attach(rlm: Rlm, request: &TraceRequest<'_>) -> Result<(Rlm, Traces), Output> {
        let mut traces = Traces {
            memory: None,
            rlm_file: None,
            html: request.html.map(Path::to_path_buf),
        };
        let file = match request.file {
            Some(path) => Some(create(path)?),
            None => None,
        };
        if request.html.is_none() {
            let Some(file) = file else {
                return Ok((rlm, traces));
            };
            let mut rlm = rlm.trace(file);
            if request.rlm_format {
                rlm = rlm.trace_format(TraceFormat::Rlm);
            }
            return Ok((rlm, traces));
        }
        // The page needs the events: keep them in memory, and tee them to an events file.
        let memory = Memory::default();
        traces.memory = Some(memory.clone());
        let rlm = match file {
            Some(file) if !request.rlm_format => rlm.trace(Tee(file, memory)),
            _ => {
                traces.rlm_file = request.file.map(Path::to_path_buf);
                rlm.trace(memory)
            }
        };
        Ok((rlm, traces))
    }

    /// Writes what is written when the run ends; the problems, as lines for stderr.
    pub(super) fn finish(&self) -> String {
        let Some(memory) = &self.memory else {
            return String::new();
        };
        let text = memory.text();
        let trace = match Trace::parse(&text) {
            Ok(trace) => trace,
            Err(error) => return format!("error: cannot read the run's trace: {error}\n"),
        };
        let mut notes = String::new();
        if let Some(path) = &self.rlm_file {
            // The events record the model, the limits and the start: nothing to assume.
            let text = trace::export_rlm(&trace, &ExportOptions::default());
            notes.push_str(&write(path, &text));
        }
        if let Some(path) = &self.html {
            let title = path
                .file_stem()
                .map_or_else(|| "run".into(), |s| s.to_string_lossy().into_owned());
            notes.push_str(&write(path, &trace::html(&trace, &title)));
        }
        notes
    }
}

fn create(path: &Path) -> Result<File, Output> {
    File::create(path).map_err(|error| {
        Output::failure(
            EXIT_USAGE,
            format!("error: cannot create {}: {error}\n", path.display()),
        )
    })
}

fn write(path: &Path, text: &str) -> String {
    match std::fs::write(path, text) {
        Ok(()) => String::new(),
        Err(error) => format!("error: cannot write {}: {error}\n", path.display()),
    }
}

/// The events, kept for the page.
#[derive(Clone, Default)]
struct Memory(Arc<Mutex<Vec<u8>>>);

impl Memory {
    fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for Memory {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut buffer = self.0.lock().unwrap_or_else(|p| p.into_inner());
        buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The events file and the memory, both.
struct Tee(File, Memory);

impl Write for Tee {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.write_all(bytes)?;
        self.1.write_all(bytes)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}
