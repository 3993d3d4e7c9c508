//! `rlm`: the command-line face of rlm-registry. See `rlm --help`.

mod cli;

use std::process::ExitCode;

use rlm_registry::allocator;

#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

fn main() -> ExitCode {
    allocator::configure();
    cli::run()
}
