//! Argument parsing and dispatch for the `rlm` binary.
//!
//! Every command works on one registry: the baked one, with `--path DIR` directories
//! layered on top (later wins), or only the directories with `--no-baked`.
//!
//! One file per command group (`ask.rs` with `ask_trace.rs`, `check.rs`, `eval.rs`,
//! `exec.rs`, …); `setup.rs` is what several of them set up from their flags (the LLM
//! client, the limits of one execution, the `--context` file, the user at the
//! terminal); `help_markdown.rs` writes `docs/cli.md` from the clap definitions.

mod acp;
mod ask;
mod ask_resume;
mod ask_trace;
mod cache;
mod check;
mod eval;
mod exec;
mod help_markdown;
mod inspect;
mod meta;
mod replay;
mod run_args;
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

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use rlm_registry::catalog::Catalog;
use rlm_registry::providers::{AgentScope, Config, Providers};
use rlm_registry::{LoadError, Registry};

pub(crate) use run_args::LlmArgs;

/// Lua function registries for Recursive Language Model agents.
///
/// Every command works on one registry: the functions baked into the binary, with the
/// `--path` directories layered on top (later wins), or only those with `--no-baked`.
/// Commands that build an environment or list functions read `--config FILE`, or
/// `rlm.toml` in the current directory, for the providers it enables.
///
/// Exit status: 0 on success; 2 on a usage error (a bad flag, a path or file that cannot
/// be read, a bad rlm.toml); 1 when a registry breaks the conventions, and on the failures
/// each command names.
#[derive(Parser, Debug)]
#[command(name = "rlm", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate registry directories against the conventions.
    ///
    /// Reports every violation at once, rustc-style, with a stable code (E001…); with
    /// `--path`, what those paths define, else the baked registry. Exit 0 ok (notes
    /// allowed), 1 violations, 2 usage or an unreadable path.
    Check {
        #[command(flatten)]
        source: SourceArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// List the functions an agent can call, one line each.
    ///
    /// The signature and summary of each registry function, then the enabled providers'
    /// functions (`--all` adds the built-ins); `--json` gives full docs, source, provider
    /// and scope.
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
    /// Show one function's documentation and source.
    ///
    /// Registry functions, built-ins and providers' functions alike. Exit 1 for a name
    /// that is not known, with a "did you mean".
    Show {
        /// The function's name, or its lookup id: `lua:NAME` (registry), `builtin:NAME`,
        /// `provider:PROVIDER:NAME`.
        name: String,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Print the functions as a tool list for OpenAI, Anthropic or MCP.
    ///
    /// Each registry and enabled provider's function whose parameters JSON can carry,
    /// with a JSON Schema for them, as pretty JSON on stdout; functions that cannot be
    /// tools are named on stderr with the reason.
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
    /// Print the registry's part of the system prompt, or the size of each part.
    ///
    /// The registry's functions as `rlm ask` lists them in the system prompt: by default
    /// compactly (signatures and one-line summaries, pointing the model to help and
    /// fn_search), with `--prompt-mode full` each with its whole documentation.
    /// `--tokens` prints instead the size of every part of the root agent's whole system
    /// prompt (rules, context, role, built-in functions, registry functions) in
    /// o200k_base tokens, as a Markdown table.
    Prompt {
        #[command(flatten)]
        source: SourceArgs,
        #[command(flatten)]
        prompt: run_args::PromptArgs,
        /// The same as `--prompt-mode compact`.
        #[arg(long, conflicts_with = "prompt_mode")]
        compact: bool,
        /// Print the size of each part of the whole system prompt instead.
        #[arg(long)]
        tokens: bool,
    },
    /// Run the examples in doc comments and the `*_test.lua` files.
    ///
    /// Each example block and test file runs in the sandbox in a fresh environment
    /// holding the registry; `llm_query` answers with its prompt, so no model is called.
    /// With `--path`, the examples of those paths and the `*_test.lua` files under them;
    /// with none, the baked registry's examples. Exit 0 all passed, 1 a failure or an
    /// error, 2 usage or a registry that does not load.
    Test {
        #[command(flatten)]
        source: SourceArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Run Lua code in the sandbox and print its output.
    ///
    /// What the code printed goes to stdout byte for byte; a Lua error or a limit goes to
    /// stderr, with a hint when the code is Python written as Lua. Exit 0 ok, 1 a Lua
    /// error or a limit, 2 usage or an unreadable file.
    Exec {
        /// The Lua code (any bytes: Lua source need not be UTF-8).
        code: std::ffi::OsString,
        #[command(flatten)]
        run: exec::RunArgs,
    },
    /// Run a Lua file (or `-` for standard input) in the sandbox.
    ///
    /// As `rlm exec`, with the code read from FILE. Exit 0 ok, 1 a Lua error or a limit,
    /// 2 usage or an unreadable file.
    Run {
        /// The Lua file, or `-` to read standard input.
        file: PathBuf,
        #[command(flatten)]
        run: exec::RunArgs,
    },
    /// Answer a question with the RLM loop.
    ///
    /// The model writes Lua over the context until it calls FINAL. The answer goes to
    /// stdout; the live view and a usage summary go to stderr. Exit 0 answered; 1 when
    /// the run hits its iteration limit, spends a budget, cannot reach the model (after
    /// the client's retries), or the model errs three turns in a row or twice writes
    /// neither code nor an answer; 2 on a usage error.
    Ask(ask::AskArgs),
    /// Serve the RLM as an Agent Client Protocol agent on stdin/stdout.
    ///
    /// JSON-RPC 2.0, one message a line, for editors (Zed's `agent_servers`, JetBrains,
    /// Neovim and Emacs clients) and harnesses. Each session's context is `--context`,
    /// else the folder the client opens it in (`cwd`), as a corpus; each prompt runs the
    /// loop with the model, limits and budgets `rlm ask` takes (per prompt), and a later
    /// prompt of the session goes on with the same REPL state. Only JSON-RPC goes to
    /// stdout. Exit 0 when the client closes stdin, 1 when stdin cannot be read, 2 on a
    /// usage error.
    Acp(acp::AcpArgs),
    /// Search the functions by what they do.
    ///
    /// BM25 over name, description, capabilities and keywords; `--mode balanced` adds a
    /// rerank by the model, `--mode accurate` a query expansion too. `--queries FILE`
    /// answers one query per line as JSON lines. Exit 0 (also when an LLM mode falls back
    /// to the BM25 order), 2 usage.
    Search(search::SearchArgs),
    /// List the providers and their functions.
    ///
    /// Every provider, built-in or configured, whether it is enabled, and its functions
    /// with their scopes.
    Providers {
        #[command(flatten)]
        source: SourceArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write editor support for LuaLS-compatible editors.
    ///
    /// `DIR/rlm-meta/rlm.lua`, a LuaLS `---@meta` file declaring the built-ins, the
    /// enabled providers' functions, the baked registry's functions and `context`; and
    /// `DIR/.luarc.json`, which points the language server at it and at the `--path`
    /// directories. Exit 0, 2 when DIR cannot be written.
    Meta {
        #[command(flatten)]
        source: SourceArgs,
        /// The directory to write `rlm-meta/rlm.lua` and `.luarc.json` into.
        #[arg(long, value_name = "DIR", default_value = ".")]
        out: PathBuf,
    },
    /// Serve the functions and a sandboxed Lua REPL over MCP and a JSON API.
    ///
    /// MCP over stdio; with `--http`, streamable HTTP MCP at /mcp and the JSON API on the
    /// same port. `llm_query` in served code calls a model only when `--model` or
    /// `--base-url` is given. Exit 0 on SIGINT/SIGTERM or when the stdio client
    /// disconnects, 1 when it cannot serve, 2 on a usage error (a non-loopback address
    /// without a token, say).
    Serve(serve::ServeArgs),
    /// Look at a run's trace, as `rlm ask --trace FILE` writes it.
    ///
    /// `show`: a tree in the terminal; `html`: one self-contained page; `export`: the
    /// reference RLM's log format. Exit 0, 1 no such agent or turn, 2 an unreadable trace
    /// or one with no trace event.
    #[command(subcommand)]
    Trace(trace::TraceCommand),
    /// Run a recorded run again, with no server, and compare it with its trace.
    ///
    /// Each agent's replies and every sub-call's answer come from the trace (`rlm ask
    /// --trace`); the code runs again in fresh environments with today's registry (the
    /// baked one and the `--path` directories, as `rlm ask` loads them), and each block's
    /// output is compared with the recorded one. Prints `identical`, or the first
    /// divergence: agent, turn, block and the two sides in columns. Exit 0 identical, 1
    /// diverged, 2 usage, a trace that cannot be read or is incomplete, a registry that
    /// does not load, or a context other than the recorded one without `--force`.
    Replay(replay::ReplayArgs),
    /// Measure answer quality on generated tasks or your own.
    ///
    /// Tasks modelled on the RLM paper's (the families of `--suite`) or your own
    /// (`--tasks FILE.jsonl`), answered by each method (rlm, direct, rlm-bare). Writes
    /// results.jsonl, traces/, summary.md and report.html into `--out DIR`; the same
    /// command run again resumes where it stopped. `rlm eval generate` writes the tasks as
    /// JSONL. Exit 0 (a failed task scores 0), 1 results that cannot be written, 2 usage.
    Eval(eval::EvalArgs),
    /// Look at or empty a call cache (the file `--cache` names).
    ///
    /// `stats`: answers held, their size, hits and misses, the oldest and newest;
    /// `clear`: remove every answer. Exit 0, 1 a file that is not a usable cache, 2 no
    /// such file.
    #[command(subcommand)]
    Cache(cache::CacheCommand),
    /// Print this command-line reference as Markdown (docs/cli.md), from the definitions
    /// that parse the arguments.
    #[command(hide = true)]
    HelpMarkdown,
}

/// Where the registry comes from.
#[derive(Args, Debug, Clone)]
pub(crate) struct SourceArgs {
    /// A registry directory (or .lua file) layered on top; a later one wins.
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
        Command::Prompt {
            source,
            mut prompt,
            compact,
            tokens,
        } => {
            if compact {
                prompt.prompt_mode = Some(rlm_registry::rlm::PromptMode::Compact);
            }
            // The prompt `rlm ask` would send: the same settings, resolved the same way.
            let given = run_args::Given {
                prompt: Some(&prompt),
                ..Default::default()
            };
            match given.settings().and_then(|settings| {
                source.run_setup(&settings, &rlm_registry::setup::Defaults::default())
            }) {
                Ok(setup) => with_catalog(&source, |c| inspect::prompt(c, &setup, tokens)),
                Err(output) => output,
            }
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
        Command::Acp(args) => acp::run(&args),
        Command::Search(args) => search::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Trace(command) => trace::run(&command),
        Command::Replay(args) => replay::run(&args),
        Command::Eval(args) => eval::run(&args),
        Command::Cache(command) => cache::run(&command),
        Command::HelpMarkdown => Output::success(help_markdown::markdown(Cli::command())),
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
        let Some(path) = self.config_path() else {
            return Ok(Config::default());
        };
        let color = std::io::stderr().is_terminal();
        let config = Config::load(&path)
            .map_err(|e| Output::failure(EXIT_USAGE, format!("{}\n", e.render(color))))?;
        // The run's sections are checked by every command, so that a mistake there is
        // found whichever command meets the file first.
        self.file_settings()?;
        Ok(config)
    }

    /// The configuration file: `--config`, else `rlm.toml` in the current directory if
    /// there is one.
    pub(crate) fn config_path(&self) -> Option<PathBuf> {
        match &self.config {
            Some(path) => Some(path.clone()),
            None => Config::discover(std::path::Path::new(".")),
        }
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
