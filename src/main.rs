//! `rlm`: the command-line face of rlm-registry. See `rlm --help`.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::run()
}
