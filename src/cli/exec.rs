//! `rlm exec CODE` and `rlm run FILE|-`: Lua in the sandbox, captured output on stdout.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use clap::Args;

use rlm_registry::corpus;
use rlm_registry::environment::{Environment, ExecError, Limits};
use rlm_registry::llm::LlmClient;

use super::setup::{ContextArgs, Stdin, Terminal, limits};
use super::{EXIT_USAGE, EXIT_VIOLATIONS, LlmArgs, Output, SourceArgs, with_catalog};

/// Options shared by `exec` and `run`.
#[derive(Args, Debug, Clone)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    context: ContextArgs,
    /// Wall-clock seconds one execution may run.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    time_limit: f64,
    /// Memory the Lua state may use, in MiB, besides the context (which does not count).
    #[arg(long, value_name = "MIB", default_value_t = 512)]
    memory_limit: usize,
    /// The model `llm_query` calls.
    #[command(flatten)]
    llm: LlmArgs,
}

impl RunArgs {
    fn llm(&self) -> Result<LlmClient, Output> {
        self.llm.client(&self.source)
    }

    fn limits(&self) -> Result<Limits, Output> {
        limits(self.time_limit, self.memory_limit)
    }
}

pub(super) fn exec(args: &RunArgs, code: &[u8]) -> Output {
    execute(args, code, false)
}

/// Lua source is bytes: a file need not be UTF-8 (Latin-1 string literals are legal Lua).
pub(super) fn run_file(args: &RunArgs, file: &Path) -> Output {
    let code = if file == Path::new("-") {
        let mut code = Vec::new();
        std::io::stdin().read_to_end(&mut code).map(|_| code)
    } else {
        std::fs::read(file)
    };
    match code {
        Ok(code) => execute(args, &code, file == Path::new("-")),
        Err(error) => Output::failure(
            EXIT_USAGE,
            format!("error: cannot read {}: {error}\n", file.display()),
        ),
    }
}

/// Runs `code` with the args' limits, model and context (`stdin_taken` when the code
/// came from standard input).
fn execute(args: &RunArgs, code: &[u8], stdin_taken: bool) -> Output {
    let limits = match args.limits() {
        Ok(limits) => limits,
        Err(output) => return output,
    };
    let llm = match args.llm() {
        Ok(llm) => llm,
        Err(output) => return output,
    };
    // One plain file is read straight into the Lua string: held once, not twice.
    let lone_file = corpus::lone_text_file(&args.context.paths);
    let context = match lone_file {
        Some(_) => None,
        None => match args.context.gather(
            &args.source,
            if stdin_taken {
                Stdin::Code
            } else {
                Stdin::Free
            },
        ) {
            Ok(context) => context,
            Err(output) => return output,
        },
    };
    with_catalog(&args.source, |catalog| {
        let built = Environment::builder(Arc::clone(catalog.registry()))
            .providers(Arc::clone(catalog.providers()))
            .limits(limits)
            .llm(Arc::new(llm))
            .user(Arc::new(Terminal))
            .build();
        let env = match built {
            Ok(env) => env,
            Err(error) => return Output::failure(EXIT_VIOLATIONS, format!("error: {error}\n")),
        };
        let loaded = match (&lone_file, context) {
            (Some((path, len)), _) => load_file(&env, path, *len),
            (None, Some(context)) => context.move_into(&env),
            (None, None) => Ok(()),
        };
        if let Err(error) = loaded {
            return Output::failure(
                EXIT_VIOLATIONS,
                format!("error: cannot load the context: {error}\n"),
            );
        }
        match env.execute_bytes(code) {
            // The bytes printed, not the text the model reads (see `escape_output`).
            Ok(_) => Output::success(env.last_output_bytes()),
            Err(error) => Output {
                stdout: env.last_output_bytes(),
                stderr: format!("error: {}\n", error.message()),
                code: EXIT_VIOLATIONS,
            },
        }
    })
}

/// Reads the file at `path`, `len` bytes long, into `env`'s `context`.
fn load_file(env: &Environment, path: &Path, len: u64) -> Result<(), ExecError> {
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    env.set_context_with(len, |bytes| {
        std::fs::File::open(path).and_then(|mut file| file.read_exact(bytes))
    })
}
