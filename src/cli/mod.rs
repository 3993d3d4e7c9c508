//! Argument parsing and dispatch for the `rlm` binary (SPEC §8).
//!
//! Every command works on one registry: the baked one, with `--path DIR` directories
//! layered on top (later wins), or only the directories with `--no-baked`.

mod ask;
mod ask_trace;
mod check;
mod eval;
mod exec;
mod inspect;
mod meta;
mod search;
mod serve;
mod setup;
mod test;
mod tools;
mod trace;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};
use rlm_registry::catalog::Catalog;
use rlm_registry::providers::{AgentScope, Config, Providers};
use rlm_registry::{LoadError, Registry};

/// Lua function registries for Recursive Language Model agents.
#[derive(Parser, Debug)]
#[command(name = "rlm", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate registry directories against the conventions (exit 0 ok, 1 violations, 2 usage or I/O).
    Check {
        #[command(flatten)]
        source: SourceArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// List the registry's functions and the enabled providers' (`--all` adds the
    /// built-ins).
    List {
        #[command(flatten)]
        source: SourceArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Include the built-ins (print, llm_query, rlm_query, …).
        #[arg(long)]
        all: bool,
    },
    /// Show one function's documentation and source (exit 1 if unknown).
    Show {
        /// The function name.
        name: String,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Print the registry's functions as a tool list (JSON Schema parameters) for OpenAI,
    /// Anthropic or MCP; functions that cannot be tools are noted on stderr.
    Tools {
        #[command(flatten)]
        source: SourceArgs,
        /// The tool-list format.
        #[arg(long, value_enum, default_value_t = tools::Format::Openai)]
        format: tools::Format,
        /// Include the built-ins (llm_query, token_count, …) as tools.
        #[arg(long)]
        all: bool,
    },
    /// Print the system-prompt addendum declaring every function.
    Prompt {
        #[command(flatten)]
        source: SourceArgs,
        /// Print the compact listing instead: names and one-line summaries, pointing the
        /// model to fn_search and help (what `rlm ask --prompt-mode compact` sends).
        #[arg(long)]
        compact: bool,
    },
    /// Run the examples in the registry's doc comments and the `*_test.lua` files under
    /// `--path` in the sandbox (`llm_query` echoes its prompt); with no `--path`, the
    /// baked registry's examples. Exit 0 all passed, 1 a failure or an error, 2 usage or
    /// a registry that does not load.
    Test {
        #[command(flatten)]
        source: SourceArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Run Lua code in the sandbox and print its captured output (exit 1 on a Lua error or limit).
    Exec {
        /// The Lua code (any bytes: Lua source need not be UTF-8).
        code: std::ffi::OsString,
        #[command(flatten)]
        run: exec::RunArgs,
    },
    /// Run a Lua file (or `-` for standard input) in the sandbox.
    Run {
        /// The Lua file, or `-` to read standard input.
        file: PathBuf,
        #[command(flatten)]
        run: exec::RunArgs,
    },
    /// Answer a question with the full RLM loop: the model writes Lua over the context until
    /// FINAL (exit 0 with the answer on stdout; 1 on the iteration limit, a spent budget or an
    /// LLM failure).
    Ask(ask::AskArgs),
    /// Search the registry's functions (BM25 over name, description, capabilities and
    /// keywords; `--mode balanced|accurate` adds an LLM rerank and query expansion);
    /// `--queries FILE|-` answers one query per line as JSON lines.
    Search(search::SearchArgs),
    /// List the providers (built-in and configured), whether each is enabled, and their
    /// functions with their scopes.
    Providers {
        #[command(flatten)]
        source: SourceArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write editor support: a LuaLS `---@meta` file declaring the built-ins and the
    /// enabled providers' functions, and a `.luarc.json` for the registry directories.
    Meta {
        #[command(flatten)]
        source: SourceArgs,
        /// The directory to write `rlm-meta.lua` and `.luarc.json` into.
        #[arg(long, value_name = "DIR", default_value = ".")]
        out: PathBuf,
    },
    /// Serve the registry and a sandboxed Lua REPL to other agents: MCP over stdio, or with
    /// `--http ADDR` streamable HTTP MCP at /mcp and a JSON API on the same port (exit 0 on
    /// SIGINT/SIGTERM or when the stdio client disconnects). `llm_query` in served code
    /// calls a model only when `--model` or `--base-url` is given.
    Serve(serve::ServeArgs),
    /// Look at a run's JSONL trace (`rlm ask --trace FILE`): `show` (a tree in the
    /// terminal), `html` (one self-contained page), `export --format rlm` (the reference
    /// RLM's log format). Exit 0, 1 no such agent or turn, 2 unreadable trace.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
    /// Measure answer quality: generated tasks modelled on the RLM paper's (the families
    /// of `--suite`) or your own (`--tasks FILE.jsonl`), answered by each method
    /// (rlm, direct, rlm-bare); results, summary.md and report.html in `--out DIR`, resumed
    /// when run again. `rlm eval generate` writes the tasks as JSONL.
    Eval(eval::EvalArgs),
}

/// Where the registry comes from.
#[derive(Args, Debug, Clone)]
pub(crate) struct SourceArgs {
    /// A registry directory (or .lua file) layered on top; repeatable, later wins.
    #[arg(long = "path", value_name = "DIR")]
    paths: Vec<PathBuf>,
    /// Leave out the registry baked into the binary.
    #[arg(long)]
    no_baked: bool,
    /// The configuration file enabling and configuring providers (default: `rlm.toml`
    /// in the current directory, if there is one).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Which model answers, for commands that call one: `--model` and `--base-url` over the
/// environment variables, as `rlm exec` and `rlm ask` read them.
#[derive(Args, Debug, Clone)]
pub(crate) struct LlmArgs {
    /// The model (default: RLM_MODEL, or gpt-4o-mini).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// The OpenAI-compatible server (default: RLM_BASE_URL, OPENAI_BASE_URL, or
    /// https://api.openai.com/v1). The key comes from RLM_API_KEY or OPENAI_API_KEY.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
}

impl LlmArgs {
    /// The client; a bad setting in the environment is a usage error (exit 2).
    pub(crate) fn client(&self) -> Result<rlm_registry::llm::LlmClient, Output> {
        setup::llm_client(self.model.as_deref(), self.base_url.as_deref())
    }

    /// The client when `--model` or `--base-url` was given, for commands where a model is
    /// opt-in (`rlm serve`: its users would spend the owner's tokens).
    pub(crate) fn chosen(
        &self,
    ) -> Result<Option<std::sync::Arc<dyn rlm_registry::llm::Llm>>, Output> {
        if self.model.is_none() && self.base_url.is_none() {
            return Ok(None);
        }
        Ok(Some(std::sync::Arc::new(self.client()?)))
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Human,
    Json,
}

/// Exit codes shared by the commands.
pub(crate) const EXIT_VIOLATIONS: u8 = 1;
pub(crate) const EXIT_USAGE: u8 = 2;

/// What a command prints and how it exits. Commands build their output as text and
/// `run` writes it, so a closed pipe (`rlm list | head`) is not a crash.
pub(crate) struct Output {
    /// Bytes: `rlm exec`/`run` write exactly what the program printed.
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub code: u8,
}

impl Output {
    pub fn success(stdout: impl Into<Vec<u8>>) -> Self {
        Output {
            stdout: stdout.into(),
            stderr: String::new(),
            code: 0,
        }
    }

    pub fn failure(code: u8, stderr: String) -> Self {
        Output {
            stdout: Vec::new(),
            stderr,
            code,
        }
    }

    fn emit(self) -> ExitCode {
        // A reader that went away (broken pipe) is not an error worth reporting.
        let _ = std::io::stdout().write_all(&self.stdout);
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().write_all(self.stderr.as_bytes());
        ExitCode::from(self.code)
    }
}

pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { EXIT_USAGE } else { 0 };
            let text = error.render().to_string();
            return if code == 0 {
                Output::success(text).emit()
            } else {
                Output::failure(code, text).emit()
            };
        }
    };
    let output = match cli.command {
        Command::Check { source, format } => check::run(&source, format),
        Command::Test { source, format } => test::run(&source, format),
        Command::List { source, json, all } => {
            with_catalog(&source, |c| inspect::list(c, json, all))
        }
        Command::Show { name, source } => with_catalog(&source, |c| inspect::show(c, &name)),
        Command::Prompt { source, compact } => {
            with_catalog(&source, |c| inspect::prompt(c, compact))
        }
        Command::Tools {
            source,
            format,
            all,
        } => with_catalog(&source, |c| tools::tools(c, format, all)),
        Command::Providers { source, json } => {
            with_catalog(&source, |c| inspect::providers(c, json))
        }
        Command::Meta { source, out } => {
            with_catalog(&source, |c| meta::write(c, &source.paths, &out))
        }
        Command::Exec { code, run } => exec::exec(&run, &code.into_encoded_bytes()),
        Command::Run { file, run } => exec::run_file(&run, &file),
        Command::Ask(args) => ask::ask(&args),
        Command::Search(args) => search::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Trace(command) => trace::run(&command),
        Command::Eval(args) => eval::run(&args),
    };
    output.emit()
}

impl SourceArgs {
    /// The base the paths are layered on.
    fn base(&self) -> &'static Registry {
        static EMPTY: Registry = Registry::empty();
        if self.no_baked {
            &EMPTY
        } else {
            Registry::baked()
        }
    }

    /// Paths that cannot be read at all are a usage error (exit 2), not a violation.
    fn missing_paths_error(&self) -> Option<Output> {
        let mut message = String::new();
        for path in &self.paths {
            if let Err(error) = std::fs::metadata(path) {
                message.push_str(&format!("error: cannot read {}: {error}\n", path.display()));
            }
        }
        (!message.is_empty()).then(|| Output::failure(EXIT_USAGE, message))
    }

    /// The configuration: `--config FILE`, or `rlm.toml` in the current directory, or
    /// the default. A bad file is a usage error (exit 2).
    pub(crate) fn config(&self) -> Result<Config, Output> {
        let path = match &self.config {
            Some(path) => Some(path.clone()),
            None => Config::discover(std::path::Path::new(".")),
        };
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let color = std::io::stderr().is_terminal();
        Config::load(&path)
            .map_err(|e| Output::failure(EXIT_USAGE, format!("{}\n", e.render(color))))
    }

    /// The built-in providers and those the configuration enables.
    pub(crate) fn providers(&self) -> Result<Providers, Output> {
        providers_of(&self.config()?)
    }

    fn load(&self) -> Result<Registry, LoadError> {
        let base = self.base();
        if self.paths.is_empty() {
            return Ok(base.clone());
        }
        base.with_paths(&self.paths)
    }
}

/// The providers `config` enables; one that cannot start (an unreadable root, say) is a
/// usage error (exit 2).
pub(crate) fn providers_of(config: &Config) -> Result<Providers, Output> {
    config
        .providers()
        .map_err(|e| Output::failure(EXIT_USAGE, format!("error: {e}\n")))
}

/// Loads the registry and runs `command` on it; load problems are reported instead.
pub(crate) fn with_registry(
    source: &SourceArgs,
    command: impl FnOnce(&Registry) -> Output,
) -> Output {
    if let Some(missing) = source.missing_paths_error() {
        return missing;
    }
    match source.load() {
        Ok(registry) => command(&registry),
        Err(error) => Output::failure(
            EXIT_VIOLATIONS,
            format!("{}\n", error.render(std::io::stderr().is_terminal())),
        ),
    }
}

/// Loads the registry and the configured providers, and runs `command` on what a
/// top-level agent may call; load and configuration problems are reported instead.
pub(crate) fn with_catalog(
    source: &SourceArgs,
    command: impl FnOnce(&Catalog) -> Output,
) -> Output {
    let providers = match source.providers() {
        Ok(providers) => Arc::new(providers),
        Err(output) => return output,
    };
    with_registry(source, |registry| {
        command(&Catalog::new(registry.clone(), providers, AgentScope::TOP))
    })
}
