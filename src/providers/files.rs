//! The opt-in `files` provider: `read_file`, `write_file`, `edit_file`, `list_files`,
//! confined to one root directory.
//!
//! What it refuses, and why: paths come from model-written code. Absolute paths and `..`
//! components are refused outright. Every access goes through a capability handle on the
//! root (`cap-std`): each path is resolved beneath it at open time (`openat2` with
//! `RESOLVE_BENEATH`, or component by component with `O_NOFOLLOW`), so a symlink that
//! points outside, to a file or a directory, is refused, and so is one swapped in after
//! any check, because there is no separate check. Reads and writes are size-limited.
//! Without `writable`, `write_file` and `edit_file` are refused. Writes go to a temporary
//! file in the same directory, renamed over the target, so a file is never left
//! half-written, and an `edit_file` with any failing edit changes nothing.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use super::{HostFunction, Provider};

/// The `files` provider's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilesConfig {
    /// The directory everything is confined to.
    pub root: PathBuf,
    /// Whether `write_file` and `edit_file` are allowed (default false).
    pub writable: bool,
    /// The largest file read or written, in bytes (default 16 MiB).
    pub max_file_bytes: u64,
    /// The most entries `list_files` returns (default 10,000).
    pub max_list_entries: usize,
}

impl FilesConfig {
    /// Read-only access to `root`, with the default limits.
    pub fn new(root: impl Into<PathBuf>) -> FilesConfig {
        FilesConfig {
            root: root.into(),
            writable: false,
            max_file_bytes: 16 << 20,
            max_list_entries: 10_000,
        }
    }
}

/// One exact replacement of `edit_file`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Edit {
    /// The text to replace: it must occur exactly once.
    pub old: String,
    /// What replaces it.
    pub new: String,
}

/// One entry of `list_files`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileEntry {
    /// The path relative to the root, `/`-separated.
    pub path: String,
    /// `file`, `dir` or `link` (links are listed, not followed).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The size in bytes (files only).
    pub size: Option<u64>,
}

/// Files under one root.
///
/// ```
/// use rlm_registry::providers::{Edit, Files, FilesConfig};
///
/// let dir = tempfile::tempdir()?;
/// let files = Files::open(FilesConfig { writable: true, ..FilesConfig::new(dir.path()) })?;
/// files.write("notes/a.txt", "hello world")?;
/// files.edit("notes/a.txt", &[Edit { old: "world".into(), new: "there".into() }])?;
/// assert_eq!(files.read("notes/a.txt")?, "hello there");
/// assert!(files.read("../secret").is_err());
/// assert!(files.read("/etc/passwd").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Files {
    root: Dir,
    config: FilesConfig,
}

/// Makes temporary names unique within the process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Files {
    /// Opens the root; a missing or unreadable root is an error.
    pub fn open(config: FilesConfig) -> Result<Files, String> {
        let root = Dir::open_ambient_dir(&config.root, cap_std::ambient_authority())
            .map_err(|e| format!("files: cannot open the root {}: {e}", config.root.display()))?;
        Ok(Files { root, config })
    }

    /// The text of the file at `path` (UTF-8).
    pub fn read(&self, path: &str) -> Result<String, String> {
        let path = checked(path)?;
        let file = self
            .root
            .open(&path)
            .map_err(|e| failed("read", &path, &e))?;
        let mut bytes = Vec::new();
        file.take(self.config.max_file_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| failed("read", &path, &e))?;
        if bytes.len() as u64 > self.config.max_file_bytes {
            return Err(format!(
                "`{}` is larger than the {} byte limit",
                path.display(),
                self.config.max_file_bytes
            ));
        }
        String::from_utf8(bytes).map_err(|_| format!("`{}` is not UTF-8 text", path.display()))
    }

    /// Writes `content` to `path` (creating directories), replacing the file whole.
    pub fn write(&self, path: &str, content: &str) -> Result<usize, String> {
        let path = checked(path)?;
        self.check_writable()?;
        if content.len() as u64 > self.config.max_file_bytes {
            return Err(format!(
                "the content ({} bytes) is larger than the {} byte limit",
                content.len(),
                self.config.max_file_bytes
            ));
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.root
                .create_dir_all(parent)
                .map_err(|e| failed("create the directory of", &path, &e))?;
        }
        self.replace(&path, content)?;
        Ok(content.len())
    }

    /// Applies `edits` in order, each an exact replacement of text that occurs once; if
    /// any fails, the file is left byte-identical and the error names the edit.
    pub fn edit(&self, path: &str, edits: &[Edit]) -> Result<usize, String> {
        self.check_writable()?;
        let mut text = self.read(path)?;
        for (i, edit) in edits.iter().enumerate() {
            let which = format!("edit {} of {}", i + 1, edits.len());
            if edit.old.is_empty() {
                return Err(format!("{which}: `old` is empty; nothing was changed"));
            }
            match text.matches(edit.old.as_str()).count() {
                1 => text = text.replacen(edit.old.as_str(), &edit.new, 1),
                0 => {
                    return Err(format!(
                        "{which}: `old` was not found in `{path}`; nothing was changed"
                    ));
                }
                n => {
                    return Err(format!(
                        "{which}: `old` occurs {n} times in `{path}`; include more text to make it unique; nothing was changed"
                    ));
                }
            }
        }
        self.write(path, &text)?;
        Ok(edits.len())
    }

    /// The files and directories under `dir` (the root by default), recursively, sorted
    /// by path; at most the configured number of entries.
    pub fn list(&self, dir: Option<&str>) -> Result<Vec<FileEntry>, String> {
        let (start, prefix) = match dir.filter(|d| !d.is_empty() && *d != ".") {
            Some(dir) => {
                let path = checked(dir)?;
                let opened = self
                    .root
                    .open_dir(&path)
                    .map_err(|e| failed("list", &path, &e))?;
                (opened, format!("{}/", slashed(&path)))
            }
            None => (
                self.root
                    .try_clone()
                    .map_err(|e| format!("cannot list: {e}"))?,
                String::new(),
            ),
        };
        let mut entries = Vec::new();
        self.walk(&start, &prefix, 0, &mut entries)?;
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    fn walk(
        &self,
        dir: &Dir,
        prefix: &str,
        depth: usize,
        out: &mut Vec<FileEntry>,
    ) -> Result<(), String> {
        let entries = dir
            .entries()
            .map_err(|e| format!("cannot list `{prefix}`: {e}"))?;
        for entry in entries.flatten() {
            if out.len() >= self.config.max_list_entries {
                return Err(format!(
                    "more than {} entries: list a subdirectory",
                    self.config.max_list_entries
                ));
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{prefix}{name}");
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                out.push(FileEntry {
                    path,
                    kind: "link",
                    size: None,
                });
            } else if kind.is_dir() {
                out.push(FileEntry {
                    path: path.clone(),
                    kind: "dir",
                    size: None,
                });
                if depth < 32
                    && let Ok(sub) = entry.open_dir()
                {
                    self.walk(&sub, &format!("{path}/"), depth + 1, out)?;
                }
            } else {
                let size = entry.metadata().ok().map(|m| m.len());
                out.push(FileEntry {
                    path,
                    kind: "file",
                    size,
                });
            }
        }
        Ok(())
    }

    fn check_writable(&self) -> Result<(), String> {
        if self.config.writable {
            Ok(())
        } else {
            Err("the files are read-only (the files provider is configured without `writable = true`)".to_string())
        }
    }

    /// Writes a temporary file next to `path` and renames it over `path`.
    fn replace(&self, path: &Path, content: &str) -> Result<(), String> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = path.with_file_name(format!(
            ".{name}.rlm-{}-{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        self.root
            .write(&temp, content)
            .map_err(|e| failed("write", path, &e))?;
        self.root.rename(&temp, &self.root, path).map_err(|e| {
            let _ = self.root.remove_file(&temp);
            failed("write", path, &e)
        })
    }
}

/// A relative path with no `..`: the only kind accepted.
fn checked(path: &str) -> Result<PathBuf, String> {
    let candidate = Path::new(path);
    if path.is_empty() {
        return Err("the path is empty".to_string());
    }
    if candidate.is_absolute() || path.starts_with('/') || path.starts_with('\\') {
        return Err(format!(
            "`{path}`: absolute paths are not allowed; use a path relative to the files root"
        ));
    }
    let mut clean = PathBuf::new();
    for component in candidate.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(format!(
                    "`{path}`: `..` is not allowed; paths stay inside the files root"
                ));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("`{path}`: absolute paths are not allowed"));
            }
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(format!("`{path}` names the root itself, not a file"));
    }
    Ok(clean)
}

fn slashed(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// An I/O error in words, naming the relative path only (never the root).
fn failed(action: &str, path: &Path, error: &std::io::Error) -> String {
    let why = match error.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => {
            "not allowed (it leads outside the files root, or permission is denied)".to_string()
        }
        _ if error.to_string().contains("outside") => "it leads outside the files root".to_string(),
        _ => error.to_string(),
    };
    format!("cannot {action} `{}`: {why}", slashed(path))
}

/// The `files` provider.
#[derive(Clone, Debug)]
pub struct FilesProvider {
    files: Arc<Files>,
}

impl FilesProvider {
    /// A provider over `config`; an unreadable root is an error.
    pub fn new(config: FilesConfig) -> Result<FilesProvider, String> {
        Ok(FilesProvider {
            files: Arc::new(Files::open(config)?),
        })
    }
}

impl Provider for FilesProvider {
    fn name(&self) -> &str {
        "files"
    }

    fn description(&self) -> &str {
        "Files under one root directory; read-only unless configured writable."
    }

    fn functions(&self) -> Vec<HostFunction> {
        let (read, write, edit, list) = (
            Arc::clone(&self.files),
            Arc::clone(&self.files),
            Arc::clone(&self.files),
            Arc::clone(&self.files),
        );
        let read_only = if self.files.config.writable {
            ""
        } else {
            " The files are read-only here: it fails."
        };
        vec![
            HostFunction::typed(
                "read_file",
                "--- Reads a text file under the files root.\n---@param path string A path relative to the files root, e.g. \"data/notes.txt\"\n---@return string text The file's content",
                move |_, (path,): (String,)| read.read(&path),
            ),
            HostFunction::typed(
                "list_files",
                "--- Lists the files and directories under the files root (or one of its directories), recursively, sorted by path.\n---@param dir? string A directory relative to the root (default: the root)\n---@return table[] entries Each {path = relative path, type = \"file\"|\"dir\"|\"link\", size = bytes}",
                move |_, (dir,): (Option<String>,)| list.list(dir.as_deref()),
            ),
            HostFunction::typed(
                "write_file",
                format!(
                    "--- Writes a text file under the files root, replacing it whole (directories are created).{read_only}\n---@param path string A path relative to the files root\n---@param content string The new content\n---@return integer bytes The bytes written"
                ),
                move |_, (path, content): (String, String)| write.write(&path, &content),
            ),
            HostFunction::typed(
                "edit_file",
                format!(
                    "--- Edits a text file with exact replacements, all or nothing: each `old` must occur exactly once (after the edits before it); if any edit fails, the file is unchanged and the error says which.{read_only}\n---@param path string A path relative to the files root\n---@param edits table[] The replacements, in order: {{old = \"text\", new = \"text\"}}, …\n---@return integer applied The number of edits applied"
                ),
                move |_, (path, edits): (String, Vec<Edit>)| edit.edit(&path, &edits),
            ),
        ]
    }
}
