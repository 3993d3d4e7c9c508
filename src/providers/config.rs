//! `rlm.toml`: which providers are enabled and how they are configured.
//!
//! ```toml
//! [providers.store]          # opt-in: values shared by a run's agents
//! enabled = true
//! max_bytes = 16777216       # total size of the stored JSON (default 16 MiB)
//!
//! [providers.files]          # opt-in: files under one root
//! enabled = true
//! root = "data"              # required; relative to this file's directory
//! writable = false           # default false: write_file and edit_file fail
//! max_file_bytes = 16777216  # largest file read or written (default 16 MiB)
//!
//! [providers.shell]          # opt-in: allow-listed programs, never through a shell
//! enabled = true
//! allow = ["wc", "sort"]     # required: plain program names
//! timeout_ms = 10000         # default 10 s, never more than the execution's time left
//! max_output_bytes = 1048576 # per stream (default 1 MiB)
//!
//! [providers.llm]            # built-in providers can be turned off: llm, agent, user
//! enabled = true             # (core cannot)
//!
//! [serve]                    # `rlm serve`: web origins whose pages may call it
//! allow_origins = ["http://localhost:5173"]
//!
//! ```
//!
//! The run's sections, `[model]`, `[cache]`, `[budgets]` and `[prices]`, are read by
//! [`FileSettings`](crate::setup::FileSettings); a section neither knows is an error.
//!
//! Unknown providers or keys, wrong types and invalid values are errors with the file,
//! line and column.
//!
//! ```
//! use rlm_registry::providers::Config;
//!
//! let config = Config::parse("[providers.shell]\nenabled = true\nallow = [\"wc\"]\n", "rlm.toml", ".")?;
//! assert_eq!(config.shell.unwrap().allow, ["wc"]);
//!
//! let err = Config::parse("[providers.shel]\nenabled = true\n", "rlm.toml", ".").unwrap_err();
//! assert_eq!((err.line, err.column), (1, 12));
//! assert!(err.message.contains("shel"));
//! # Ok::<(), rlm_registry::providers::ConfigError>(())
//! ```

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde::de::IgnoredAny;
use toml::Spanned;

use super::{
    FilesConfig, FilesProvider, ProviderError, Providers, ShellConfig, ShellProvider, StoreProvider,
};
use crate::conventions::diagnostic::{Located, line_column, render_error};

/// The file `rlm` reads from the current directory when no `--config` is given.
pub const DEFAULT_FILE: &str = "rlm.toml";

/// A parsed configuration: the enabled opt-in providers' settings and the built-in
/// providers turned off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// The `store` provider's total size limit, if enabled.
    pub store: Option<usize>,
    /// The `files` provider's settings, if enabled (root resolved).
    pub files: Option<FilesConfig>,
    /// The `shell` provider's settings, if enabled (`cwd` = the files root, if any).
    pub shell: Option<ShellConfig>,
    /// Built-in providers turned off (`llm`, `agent`, `user`).
    pub disabled: Vec<String>,
    /// `[serve] allow_origins`: web origins `rlm serve` lets in (checked by the server).
    pub allow_origins: Vec<String>,
}

/// A configuration error, with where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as named.
    pub file: String,
    /// 1-based line (1 when the error has no position).
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
    span: Option<Range<usize>>,
    source: String,
}

impl ConfigError {
    /// An error at `span` of `text` (the whole of file `file`); at 1:1 without a span.
    pub fn at(text: &str, file: &str, span: Option<Range<usize>>, message: String) -> ConfigError {
        let (line, column) = span
            .as_ref()
            .map_or((1, 1), |s| line_column(text, s.start.min(text.len())));
        ConfigError {
            file: file.to_string(),
            line,
            column,
            message,
            span,
            source: text.to_string(),
        }
    }

    /// An error about `file` as a whole (it cannot be read).
    pub fn unplaced(file: &str, message: String) -> ConfigError {
        ConfigError::at("", file, None, message)
    }

    /// The error rustc-style: `error[config]: …`, `--> file:line:col`, the line, a caret.
    pub fn render(&self, color: bool) -> String {
        let at = Located {
            file: &self.file,
            source: self.span.as_ref().map(|_| self.source.as_str()),
            span: self.span.clone().unwrap_or(0..0),
        };
        render_error("config", &self.message, at, Some(HELP), color)
    }
}

const HELP: &str = "see the config file reference in docs/providers.md";

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ConfigError {}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    providers: RawProviders,
    #[serde(default)]
    serve: RawServe,
    // The run's sections, read by `setup::FileSettings`.
    #[serde(rename = "model")]
    _model: Option<IgnoredAny>,
    #[serde(rename = "cache")]
    _cache: Option<IgnoredAny>,
    #[serde(rename = "budgets")]
    _budgets: Option<IgnoredAny>,
    #[serde(rename = "prices")]
    _prices: Option<IgnoredAny>,
    #[serde(rename = "context")]
    _context: Option<IgnoredAny>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServe {
    #[serde(default)]
    allow_origins: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawProviders {
    core: Option<Toggle>,
    llm: Option<Toggle>,
    agent: Option<Toggle>,
    user: Option<Toggle>,
    store: Option<RawStore>,
    files: Option<RawFiles>,
    shell: Option<RawShell>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Toggle {
    enabled: Spanned<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    #[serde(default)]
    enabled: bool,
    max_bytes: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFiles {
    #[serde(default)]
    enabled: bool,
    root: Option<Spanned<String>>,
    #[serde(default)]
    writable: bool,
    max_file_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShell {
    #[serde(default)]
    enabled: bool,
    allow: Option<Spanned<Vec<Spanned<String>>>>,
    timeout_ms: Option<u64>,
    max_output_bytes: Option<usize>,
}

impl Config {
    /// Reads and parses `path`; relative paths in it are relative to its directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::unplaced(&file, format!("cannot read {file}: {e}")))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base
        };
        Config::parse(&text, &file, base)
    }

    /// `rlm.toml` in `dir`, if there is one.
    pub fn discover(dir: &Path) -> Option<PathBuf> {
        let path = dir.join(DEFAULT_FILE);
        path.is_file().then_some(path)
    }

    /// Parses `text` (named `file` in errors); relative paths resolve against `base`.
    pub fn parse(text: &str, file: &str, base: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let error = |span: Option<Range<usize>>, message: String| {
            ConfigError::at(text, file, span, message)
        };
        let raw: RawFile =
            toml::from_str(text).map_err(|e| error(e.span(), e.message().trim().to_string()))?;
        let p = raw.providers;
        let mut config = Config {
            allow_origins: raw.serve.allow_origins,
            ..Config::default()
        };
        if let Some(core) = &p.core
            && !*core.enabled.get_ref()
        {
            return Err(error(
                Some(core.enabled.span()),
                "the core provider cannot be disabled: print, FINAL and the other core functions are what every agent needs".to_string(),
            ));
        }
        for (name, toggle) in [("llm", &p.llm), ("agent", &p.agent), ("user", &p.user)] {
            if toggle.as_ref().is_some_and(|t| !*t.enabled.get_ref()) {
                config.disabled.push(name.to_string());
            }
        }
        if let Some(store) = p.store.filter(|s| s.enabled) {
            config.store = Some(store.max_bytes.unwrap_or(16 << 20));
        }
        if let Some(files) = p.files.filter(|f| f.enabled) {
            let Some(root) = files.root else {
                return Err(error(
                    None,
                    "[providers.files] is enabled but has no `root`: add root = \"a directory\""
                        .to_string(),
                ));
            };
            let dir = base.as_ref().join(root.get_ref());
            if !dir.is_dir() {
                return Err(error(
                    Some(root.span()),
                    format!("the files root `{}` is not a directory", root.get_ref()),
                ));
            }
            let mut settings = FilesConfig::new(dir);
            settings.writable = files.writable;
            if let Some(max) = files.max_file_bytes {
                settings.max_file_bytes = max;
            }
            config.files = Some(settings);
        }
        if let Some(shell) = p.shell.filter(|s| s.enabled) {
            let allow = shell.allow.filter(|a| !a.get_ref().is_empty()).ok_or_else(|| {
                error(
                    None,
                    "[providers.shell] is enabled but `allow` lists no program: add allow = [\"wc\", …]".to_string(),
                )
            })?;
            for program in allow.get_ref() {
                let one = ShellConfig::new([program.get_ref().clone()]);
                if let Err(message) = super::shell::Shell::new(one) {
                    return Err(error(Some(program.span()), message));
                }
            }
            let mut settings =
                ShellConfig::new(allow.get_ref().iter().map(|p| p.get_ref().clone()));
            settings.cwd = config.files.as_ref().map(|f| f.root.clone());
            if let Some(ms) = shell.timeout_ms {
                settings.timeout = Duration::from_millis(ms);
            }
            if let Some(max) = shell.max_output_bytes {
                settings.max_output_bytes = max;
            }
            config.shell = Some(settings);
        }
        Ok(config)
    }

    /// The built-in providers, without those turned off, plus the enabled opt-in ones.
    pub fn providers(&self) -> Result<Providers, ProviderError> {
        let mut providers = Providers::builtin();
        for name in &self.disabled {
            providers.unregister_provider(name);
        }
        let setup = |provider: &str, problem: String| ProviderError {
            provider: provider.to_string(),
            function: String::new(),
            problems: vec![problem],
        };
        if let Some(max_bytes) = self.store {
            providers.register(StoreProvider::new(max_bytes))?;
        }
        if let Some(files) = &self.files {
            let provider = FilesProvider::new(files.clone()).map_err(|e| setup("files", e))?;
            providers.register(provider)?;
        }
        if let Some(shell) = &self.shell {
            let provider = ShellProvider::new(shell.clone()).map_err(|e| setup("shell", e))?;
            providers.register(provider)?;
        }
        Ok(providers)
    }
}
